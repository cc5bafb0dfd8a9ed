//! Our service as a peer: `fulfillment serve`, embedded backend, `synchronous=FULL` (the
//! default), through the bench's own [`Service`].

use super::records::Expect;
use super::{Goal, Peer};
use crate::load::MakeRequest;
use crate::load::Spec;
use crate::service::{Backend, PRICE_CENTS, Service, is_terminal, place_orders};
use anyhow::Result;
use async_trait::async_trait;
use hyper::Method;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub struct Ours {
    service: Service,
    /// Sagas this process has seen finish before the current wait (the metric counts from
    /// the process's start), or `None` after a restart, when the metric no longer says.
    finished_before: Option<AtomicU64>,
}

impl Ours {
    pub async fn launch(threshold: u64) -> Result<Ours> {
        let threshold = threshold.to_string();
        let service = Service::start(
            Backend::Embedded,
            &["--approval-threshold-cents", &threshold],
            super::STOCK,
        )
        .await?;
        Ok(Ours {
            service,
            finished_before: Some(AtomicU64::new(0)),
        })
    }
}

#[async_trait]
impl Peer for Ours {
    fn ingress(&self) -> SocketAddr {
        self.service.addr()
    }

    fn place(&self, run: &str, scenario: &str) -> MakeRequest {
        place_orders(run, scenario, PRICE_CENTS)
    }

    fn approve(&self, run: &str, scenario: &str) -> MakeRequest {
        let (run, scenario, token) = (
            run.to_owned(),
            scenario.to_owned(),
            self.service.token.clone(),
        );
        Arc::new(move |i| {
            Spec::json(
                Method::POST,
                format!(
                    "/orders/{}/approval",
                    crate::service::order_id(&run, &scenario, i)
                ),
                r#"{"decision":"approve"}"#,
            )
            .operator(&token)
        })
    }

    async fn count(&self, ids: &[String], goal: Goal) -> Result<u64> {
        let finished = match (goal, &self.finished_before) {
            // A fresh process's metric counts exactly the sagas it finished.
            (Goal::Finished, Some(before)) if before.load(Ordering::SeqCst) == 0 => {
                self.service.finished().await
            }
            _ => None,
        };
        if let Some(n) = finished {
            return Ok(n);
        }
        let statuses = self.service.statuses(ids).await?;
        Ok(statuses
            .iter()
            .filter(|s| match goal {
                Goal::Finished => is_terminal(s),
                Goal::Parked => *s == "AWAITING_APPROVAL",
            })
            .count() as u64)
    }

    async fn await_goal(&self, ids: &[String], goal: Goal, deadline: Instant) -> Result<Instant> {
        match goal {
            Goal::Finished => {
                let metric = self
                    .finished_before
                    .as_ref()
                    .map(|before| before.load(Ordering::SeqCst) + ids.len() as u64);
                let at = self
                    .service
                    .await_all(ids, is_terminal, metric, deadline)
                    .await?;
                if let Some(before) = &self.finished_before {
                    before.fetch_add(ids.len() as u64, Ordering::SeqCst);
                }
                Ok(at)
            }
            Goal::Parked => {
                self.service
                    .await_all(ids, |s| s == "AWAITING_APPROVAL", None, deadline)
                    .await
            }
        }
    }

    async fn audit(&self, _expect: &Expect<'_>) -> Result<String> {
        // Our own audit checks the same invariants and more, from the store and the engine.
        self.service.audit().await
    }

    fn cpu(&self) -> Vec<(&'static str, Duration)> {
        self.service
            .cpu_time()
            .map(|t| vec![("fulfillment", t.process)])
            .unwrap_or_default()
    }

    fn rss(&self) -> u64 {
        self.service.rss().unwrap_or_default()
    }

    fn disk_bytes(&self) -> u64 {
        self.service.db_bytes()
    }

    async fn stop(&mut self) -> Result<()> {
        self.service.stop().await
    }

    async fn kill(&mut self) {
        self.service.kill().await;
        self.finished_before = None;
    }

    async fn restart(&mut self) -> Result<Duration> {
        let ready = self.service.spawn().await?;
        self.finished_before = self.finished_before.take().map(|_| AtomicU64::new(0));
        Ok(ready)
    }
}

pub const SETTINGS: &str = "this build, `fulfillment serve`, embedded engine and store in SQLite \
     (WAL, `synchronous=FULL`: every commit fsynced before it is acknowledged)";
