//! Restate as a peer: `restate-server` (npm `@restatedev/restate-server`, its own log and
//! partition store under a base directory) and our saga written as a Restate service
//! (`bench/peers/restate`, the Rust SDK) that it calls over HTTP/2. The load generator talks
//! to Restate's own ingress; the audit reads the objects' state through the admin API's SQL.

use super::install::Installed;
use super::process::{Proc, Procs, dir_bytes, free_port, loopback};
use super::records::{Charge, Expect, Records, Reservation, Sku};
use super::{Goal, Peer, READY_WITHIN, phase_prefix};
use crate::load::{MakeRequest, Pool, Spec};
use crate::service::{PRICE_CENTS, SKUS, order_body, order_id, sku_name};
use anyhow::{Context, Result, bail};
use async_trait::async_trait;
use hyper::Method;
use serde_json::Value;
use std::net::SocketAddr;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const SETTINGS: &str = "restate-server 1.7.12 (single node, one partition per core, \
     100,000 concurrent invocations, \
     its own log and RocksDB partition store with their defaults: every append fsynced before it \
     is acknowledged), our saga on the Rust SDK restate-sdk 0.13; the steps' records in \
     the virtual objects' state";

/// How long a query may keep failing after a restart before it counts as an error.
const QUERY_SETTLES_WITHIN: Duration = Duration::from_secs(30);

struct Ports {
    ingress: u16,
    admin: u16,
    node: u16,
    endpoint: u16,
}

pub struct Restate {
    installed: Installed,
    dir: tempfile::TempDir,
    threshold: u64,
    ports: Ports,
    procs: Procs,
    ingress: Arc<Pool>,
    admin: Arc<Pool>,
}

impl Restate {
    pub async fn launch(threshold: u64) -> Result<Restate> {
        let installed = super::install::ensure()?;
        let dir = tempfile::Builder::new().prefix("peer-restate").tempdir()?;
        std::fs::create_dir_all(dir.path().join("data"))?;
        std::fs::create_dir_all(dir.path().join("logs"))?;
        let ports = Ports {
            ingress: free_port()?,
            admin: free_port()?,
            node: free_port()?,
            endpoint: free_port()?,
        };
        let mut r = Restate {
            installed,
            dir,
            threshold,
            ingress: Pool::new(loopback(ports.ingress), 8),
            admin: Pool::new(loopback(ports.admin), 4),
            ports,
            procs: Procs::default(),
        };
        r.start().await?;
        let deployment = Spec::json(
            Method::POST,
            "/deployments",
            format!("{{\"uri\": \"http://127.0.0.1:{}\"}}", r.ports.endpoint),
        );
        r.admin
            .json(&deployment)
            .await
            .context("registering the saga's deployment")?;
        for n in 0..SKUS {
            let spec = Spec::json(
                Method::POST,
                format!("/Sku/{}/restock", sku_name(n)),
                format!(
                    "{{\"available\": {}, \"priceCents\": {PRICE_CENTS}}}",
                    super::STOCK
                ),
            );
            // Answered 200 with no body.
            let (status, body) = r.ingress.send(&spec).await.context("stocking the SKUs")?;
            anyhow::ensure!(
                status == 200,
                "stocking the SKUs: {status} {}",
                String::from_utf8_lossy(&body)
            );
        }
        Ok(r)
    }

    /// Starts the endpoint and the server on the state in `dir`; the time until the ingress
    /// answers its health check.
    async fn start(&mut self) -> Result<Duration> {
        let t0 = Instant::now();
        let logs = self.dir.path().join("logs");
        let mut endpoint = Command::new(&self.installed.restate_endpoint);
        endpoint
            .env("PORT", self.ports.endpoint.to_string())
            .env("APPROVAL_THRESHOLD_CENTS", self.threshold.to_string());
        self.procs
            .push(Proc::spawn("saga endpoint", endpoint, &logs)?);
        let bind = |port: u16| format!("127.0.0.1:{port}");
        let mut server = Command::new(&self.installed.restate_server);
        server
            .arg("--base-dir")
            .arg(self.dir.path().join("data"))
            .env("RESTATE_INGRESS__BIND_ADDRESS", bind(self.ports.ingress))
            .env("RESTATE_ADMIN__BIND_ADDRESS", bind(self.ports.admin))
            .env("RESTATE_BIND_ADDRESS", bind(self.ports.node))
            .env("RESTATE_LISTEN_MODE", "tcp")
            .env("RESTATE_NODE_NAME", "bench")
            // Its default, 24 partitions, is made for scaling out over nodes; one per core is
            // its best here (3,000 small sagas: 24 → 378 sagas/s, 8 → 470, 4 → 494, 2 → 521,
            // with accept p50 at 500/s 59 → 18 ms). Read at the first start only.
            .env("RESTATE_DEFAULT_NUM_PARTITIONS", cores().to_string())
            // Its default of 1,000 invocations at once stalls this saga under a burst: the
            // workflows take every slot while they wait on calls to the SKU and payment
            // objects, which need slots too, until its inactivity timeout (1 min) suspends
            // them. 20,000 small sagas: 44 sagas/s at the default, 487 with this.
            .env(
                "RESTATE_WORKER__INVOKER__CONCURRENT_INVOCATIONS_LIMIT",
                "100000",
            )
            .env("RESTATE_DISABLE_TELEMETRY", "true")
            .env("RESTATE_LOG_FILTER", "warn")
            .args(["--no-logo", "--log-format", "compact"])
            .args(["--log-disable-ansi-codes", "true"]);
        self.procs
            .push(Proc::spawn("restate-server", server, &logs)?);
        self.ingress = Pool::new(loopback(self.ports.ingress), 8);
        self.admin = Pool::new(loopback(self.ports.admin), 4);
        let until = t0 + READY_WITHIN;
        loop {
            let ingress = self.ingress.send(&Spec::get("/restate/health")).await;
            let admin = self.admin.send(&Spec::get("/health")).await;
            // Healthy, and every partition has a leader again: its state can be queried.
            if matches!((ingress, admin), (Ok((200, _)), Ok((200, _))))
                && self
                    .query("SELECT count(*) AS n FROM sys_invocation_status")
                    .await
                    .is_ok()
            {
                return Ok(t0.elapsed());
            }
            self.procs.check_alive()?;
            if Instant::now() >= until {
                bail!("not ready within {READY_WITHIN:?}");
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Rows of a SQL query over Restate's introspection tables.
    async fn query(&self, sql: &str) -> Result<Vec<Value>> {
        let spec = Spec::json(
            Method::POST,
            "/query",
            serde_json::json!({ "query": sql }).to_string(),
        )
        // Arrow IPC otherwise.
        .header("accept", "application/json");
        // Just after a restart a query may still meet a partition whose leader is being
        // chosen again ("node … was shut down or removed"): asked again for a while.
        let until = Instant::now() + QUERY_SETTLES_WITHIN;
        loop {
            match self.admin.json(&spec).await {
                Ok(answer) => return Ok(answer["rows"].as_array().cloned().unwrap_or_default()),
                Err(_) if Instant::now() < until => {
                    tokio::time::sleep(Duration::from_millis(200)).await
                }
                Err(e) => return Err(e),
            }
        }
    }
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// A state value as the admin SQL shows it (JSON text), parsed.
fn state_value(row: &Value) -> Value {
    row["value_utf8"]
        .as_str()
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or(Value::Null)
}

/// The objects' state rows (`service_name`, `service_key`, `key`, `value_utf8`) in the common
/// shape.
fn records(rows: &[Value]) -> Records {
    let mut r = Records::default();
    for row in rows {
        let (service, key, name) = (
            row["service_name"].as_str().unwrap_or_default(),
            row["service_key"].as_str().unwrap_or_default().to_owned(),
            row["key"].as_str().unwrap_or_default(),
        );
        let value = state_value(row);
        let int = |v: &Value| v.as_i64().unwrap_or_default();
        match (service, name) {
            ("Sku", "available") => {
                r.skus.entry(key).or_insert_with(Sku::default).available = int(&value)
            }
            ("Sku", "given") => r.skus.entry(key).or_insert_with(Sku::default).given = int(&value),
            ("Sku", reservation) if reservation.starts_with("r:") => {
                let order = reservation[2..].to_owned();
                r.orders.entry(order).or_default().reserved.insert(
                    key,
                    Reservation {
                        quantity: int(&value["quantity"]),
                        released: value["released"].as_bool().unwrap_or_default(),
                    },
                );
            }
            ("Payments", "charge") => r.orders.entry(key).or_default().charges.push(Charge {
                amount_cents: int(&value["amountCents"]),
                refunded: value["refunded"].as_bool().unwrap_or_default(),
            }),
            ("OrderSaga", "status") => {
                r.orders.entry(key).or_default().status = value.as_str().unwrap_or("?").to_owned()
            }
            ("OrderSaga", "reason") => {
                r.orders.entry(key).or_default().reason = value.as_str().map(str::to_owned)
            }
            ("OrderSaga", "shipment") => {
                r.orders.entry(key).or_default().shipped = !value.is_null()
            }
            _ => {}
        }
    }
    r
}

#[async_trait]
impl Peer for Restate {
    fn ingress(&self) -> SocketAddr {
        loopback(self.ports.ingress)
    }

    fn place(&self, run: &str, scenario: &str) -> MakeRequest {
        let (run, scenario) = (run.to_owned(), scenario.to_owned());
        Arc::new(move |i| {
            let id = order_id(&run, &scenario, i);
            Spec::json(
                Method::POST,
                format!("/OrderSaga/{id}/run/send"),
                order_body(&id, i, PRICE_CENTS),
            )
        })
    }

    fn approve(&self, run: &str, scenario: &str) -> MakeRequest {
        let (run, scenario) = (run.to_owned(), scenario.to_owned());
        Arc::new(move |i| {
            Spec::json(
                Method::POST,
                format!("/OrderSaga/{}/approve", order_id(&run, &scenario, i)),
                r#"{"decision":"approve"}"#,
            )
        })
    }

    fn accepted_status(&self) -> u16 {
        202
    }

    async fn count(&self, ids: &[String], goal: Goal) -> Result<u64> {
        let wanted = match goal {
            Goal::Finished => "'\"COMPLETED\"', '\"CANCELLED\"'",
            Goal::Parked => "'\"AWAITING_APPROVAL\"'",
        };
        let sql = format!(
            "SELECT count(*) AS n FROM state WHERE service_name = 'OrderSaga' AND key = 'status' \
             AND service_key LIKE '{}%' AND value_utf8 IN ({wanted})",
            phase_prefix(ids)
        );
        let rows = self.query(&sql).await?;
        Ok(rows
            .first()
            .and_then(|r| r["n"].as_u64())
            .unwrap_or_default())
    }

    async fn audit(&self, expect: &Expect<'_>) -> Result<String> {
        let rows = self
            .query(
                "SELECT service_name, service_key, key, value_utf8 FROM state \
                 WHERE service_name IN ('Sku', 'Payments', 'OrderSaga')",
            )
            .await?;
        records(&rows).check(expect)
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
        anyhow::ensure!(self.procs.is_empty(), "Restate is still running");
        self.start().await
    }
}
