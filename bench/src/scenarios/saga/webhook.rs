//! The saga scenario's webhook receiver: a server on a loopback port that answers every
//! delivery `204` and counts them, registered as the orders' client's endpoint.

use crate::service::Service;
use anyhow::{Result, bail};
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub struct Receiver {
    received: Arc<AtomicU64>,
}

async fn receive(State(received): State<Arc<AtomicU64>>) -> StatusCode {
    received.fetch_add(1, Ordering::Relaxed);
    StatusCode::NO_CONTENT
}

impl Receiver {
    /// Starts the receiver and registers it with `service` (every event type).
    pub async fn start(service: &Service) -> Result<Receiver> {
        let received = Arc::new(AtomicU64::new(0));
        let app = Router::new()
            .route("/hook", axum::routing::post(receive))
            .with_state(received.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/hook", listener.local_addr()?);
        tokio::spawn(async move { axum::serve(listener, app).await });
        let registered = reqwest::Client::new()
            .post(format!("http://{}/webhooks/endpoints", service.addr()))
            .bearer_auth(&*service.token)
            .json(&serde_json::json!({ "url": url }))
            .send()
            .await?;
        if registered.status() != reqwest::StatusCode::CREATED {
            bail!(
                "registering the webhook endpoint: {} {}",
                registered.status(),
                registered.text().await.unwrap_or_default()
            );
        }
        Ok(Receiver { received })
    }

    /// Waits until `expected` deliveries arrived; says how long after `finished` (the last
    /// saga's end) the last one came.
    pub async fn all_delivered(
        &self,
        expected: u64,
        finished: Instant,
        deadline: Instant,
    ) -> Result<String> {
        loop {
            let got = self.received.load(Ordering::Relaxed);
            if got >= expected {
                let lag = finished.elapsed();
                return Ok(format!(
                    "; {got} webhooks delivered, the last {:.2} s after the last saga ended",
                    lag.as_secs_f64()
                ));
            }
            if Instant::now() >= deadline {
                bail!("{got} of {expected} webhooks delivered before the deadline");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
