//! The service under test: the real `fulfillment serve` started through the black-box harness
//! (`blackbox::Server`) on the embedded backend or the AWS stack, and what the scenarios ask of
//! it: stock, status sweeps over many orders, metrics, its RSS and database size, stop, kill,
//! restart and audit. The harness panics where a test would fail; here those panics become
//! errors, so a failing AWS side reports instead of ending the run.

use crate::aws::Stack;
use crate::load::{MakeRequest, Pool, Spec, closed};
use crate::metrics::{self, Counters, Sample};
use anyhow::{Context, Result, anyhow, bail};
use blackbox::{Db, Server, TOKEN};
use hyper::Method;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Connections of a status sweep or of the scenarios' closed loops.
pub const CONNECTIONS: usize = 64;
/// SKUs the orders are spread over, so stock rows are not one hot spot.
pub const SKUS: u64 = 64;
/// A per-key rate no scenario reaches.
const UNLIMITED: &str = "1000000000";

/// The catalog price of every SKU of the bench, and what its orders say they pay.
pub const PRICE_CENTS: u64 = 1500;
/// How long the service may take to become ready after it announces its address.
const READY_WITHIN: Duration = Duration::from_secs(60);

/// Which backend a service runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    Embedded,
    Aws,
}

impl Backend {
    pub fn label(self) -> &'static str {
        match self {
            Backend::Embedded => "embedded",
            Backend::Aws => "aws/fakecloud+moto",
        }
    }
}

/// What the status endpoint says of one order.
#[derive(Debug, Clone, Default)]
pub struct View {
    pub status: String,
    pub updated_at: Option<chrono::DateTime<chrono::Utc>>,
}

/// A `fulfillment serve` and where it keeps its state.
pub struct Service {
    pub backend: Backend,
    server: Option<Server>,
    /// The embedded backend's database (on AWS, only the working directory).
    pub db: Db,
    /// The AWS backend's emulators, started for this service alone (a fresh table and no
    /// executions left over from another scenario).
    aws: Option<Stack>,
    extra: Vec<String>,
    pub token: Arc<str>,
    control: Arc<Pool>,
}

/// Runs `f`, turning a harness panic into an error.
fn unpanic<T>(what: &str, f: impl FnOnce() -> T) -> Result<T> {
    tokio::task::block_in_place(|| catch_unwind(AssertUnwindSafe(f))).map_err(|panic| {
        let why = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_else(|| "panicked".to_owned());
        anyhow!("{what}: {why}")
    })
}

impl Service {
    /// Starts the service on `backend` with `extra` arguments, waits until it is ready and
    /// stocks every SKU with `stock` units.
    pub async fn start(backend: Backend, extra: &[&str], stock: u64) -> Result<Service> {
        let aws = match backend {
            Backend::Aws => Some(tokio::task::block_in_place(Stack::start)?),
            Backend::Embedded => None,
        };
        let db = Db::new();
        let mut service = Service {
            backend,
            server: None,
            // A placeholder until the first spawn: every pool is re-made then.
            control: Pool::new(SocketAddr::from(([127, 0, 0, 1], 0)), 1),
            db,
            aws,
            extra: extra.iter().map(|s| (*s).to_owned()).collect(),
            token: Arc::from(TOKEN),
        };
        service.spawn().await?;
        for sku in 0..SKUS {
            let spec = Spec::json(
                Method::PUT,
                format!("/inventory/{}", sku_name(sku)),
                format!(
                    "{{\"available\": {stock}, \"price\": {{\"cents\": {PRICE_CENTS}, \"currency\": \"EUR\"}}}}"
                ),
            )
            .operator(&service.token);
            service
                .control
                .json(&spec)
                .await
                .context("stocking the inventory")?;
        }
        Ok(service)
    }

    fn command(&self) -> Command {
        let mut cmd = match &self.aws {
            Some(stack) if self.backend == Backend::Aws => stack.serve_command(),
            _ => blackbox::serve_command(&self.db),
        };
        // One key sends the whole load: its bucket is made large enough never to refuse, so
        // the limiter's cost is measured and its refusals are not.
        cmd.args(["--operator-token", TOKEN])
            .args(["--rate-limit", UNLIMITED, "--rate-limit-burst", UNLIMITED])
            .args(&self.extra);
        cmd
    }

    /// Spawns the service and waits for `/readyz`; the time from spawn to ready.
    pub async fn spawn(&mut self) -> Result<Duration> {
        anyhow::ensure!(self.server.is_none(), "the service is already running");
        let cmd = self.command();
        let t0 = Instant::now();
        let server = unpanic("the service did not start", || Server::spawn(cmd))?;
        self.control = Pool::new(server.addr, 8);
        self.server = Some(server);
        let until = t0 + READY_WITHIN;
        loop {
            if let Ok((200, _)) = self.control.send(&Spec::get("/readyz")).await {
                return Ok(t0.elapsed());
            }
            if Instant::now() >= until {
                bail!("not ready within {READY_WITHIN:?}: {}", self.stderr_tail());
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    fn server(&self) -> &Server {
        self.server.as_ref().expect("the service is running")
    }

    pub fn addr(&self) -> SocketAddr {
        self.server().addr
    }

    /// The last lines the service logged (for error messages).
    pub fn stderr_tail(&self) -> String {
        let text = self
            .server
            .as_ref()
            .map(|s| s.stderr.text())
            .unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(5)..].join("\n")
    }

    /// SIGTERM and a clean exit.
    pub async fn stop(&mut self) -> Result<()> {
        let Some(server) = self.server.take() else {
            return Ok(());
        };
        unpanic("the service did not stop cleanly", move || server.stop())?;
        Ok(())
    }

    /// SIGKILL: a crash.
    pub async fn kill(&mut self) {
        if let Some(mut server) = self.server.take() {
            tokio::task::block_in_place(|| server.kill());
        }
    }

    /// The CPU time the service has used so far (Linux `/proc`; `None` elsewhere).
    pub fn cpu_time(&self) -> Option<CpuTime> {
        let pid = self.server.as_ref()?.pid();
        let process = stat_cpu(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)?;
        let engine_writer = std::fs::read_dir(format!("/proc/{pid}/task"))
            .ok()?
            .flatten()
            .find_map(|task| {
                let stat = std::fs::read_to_string(task.path().join("stat")).ok()?;
                // The kernel keeps a thread's name to 15 bytes: "sfn-engine-writer".
                stat.contains("(sfn-engine-writ)")
                    .then(|| stat_cpu(&stat))
                    .flatten()
            });
        Some(CpuTime {
            process,
            engine_writer,
        })
    }

    /// The service's resident set (VmRSS), in bytes.
    pub fn rss(&self) -> Result<u64> {
        let pid = self.server().pid();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        let kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .context("no VmRSS in /proc/<pid>/status")?;
        Ok(kib * 1024)
    }

    /// The store and the engine's database with their WALs, in bytes (embedded only).
    pub fn db_bytes(&self) -> u64 {
        let dir = self.db.dir();
        ["fulfillment.db", "fulfillment.engine.db"]
            .iter()
            .flat_map(|f| {
                [
                    dir.join(f),
                    PathBuf::from(format!("{}-wal", dir.join(f).display())),
                ]
            })
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| m.len())
            .sum()
    }

    /// `/metrics`, parsed, and its text (to tell an absent metric from a zero one).
    pub async fn metrics(&self) -> Result<(Vec<Sample>, String)> {
        let (status, body) = self.control.send(&Spec::get("/metrics")).await?;
        anyhow::ensure!(status == 200, "/metrics answered {status}");
        let text = String::from_utf8_lossy(&body).into_owned();
        Ok((metrics::parse(&text), text))
    }

    /// The embedded backend's counters, when exported.
    pub async fn counters(&self) -> Option<Counters> {
        let (samples, _) = self.metrics().await.ok()?;
        Counters::read(&samples)
    }

    /// Sagas finished (any status) by the metric, when exported.
    pub async fn finished(&self) -> Option<u64> {
        let (samples, text) = self.metrics().await.ok()?;
        if !text.contains(metrics::SAGAS_FINISHED) {
            return None;
        }
        Some(
            ["COMPLETED", "CANCELLED", "COMPENSATION_FAILED"]
                .iter()
                .map(|s| metrics::finished(&samples, s).unwrap_or_default())
                .sum(),
        )
    }

    /// The status of each order of `ids` (one closed-loop sweep); an order the service does
    /// not answer for is `"?<http status>"`.
    pub async fn statuses(&self, ids: &[String]) -> Result<Vec<String>> {
        Ok(self
            .views(ids)
            .await?
            .into_iter()
            .map(|v| v.status)
            .collect())
    }

    /// Every order's status and when it last changed (`updatedAt`, the service's clock: for
    /// a finished order, when it finished), in the order of `ids`.
    pub async fn views(&self, ids: &[String]) -> Result<Vec<View>> {
        let ids: Arc<Vec<String>> = Arc::new(ids.to_vec());
        let found = Arc::new(Mutex::new(vec![View::default(); ids.len()]));
        let make: MakeRequest = {
            let (ids, token) = (ids.clone(), self.token.clone());
            Arc::new(move |i| {
                Spec::get(format!("/orders/{}/status", ids[i as usize])).operator(&token)
            })
        };
        let sink = found.clone();
        let outcome = closed::run(
            self.addr(),
            CONNECTIONS.min(ids.len()),
            closed::Until::count(ids.len() as u64),
            make,
            Some(Arc::new(move |i, status, body, _| {
                let view = if status == 200 {
                    let v = serde_json::from_slice::<serde_json::Value>(body).unwrap_or_default();
                    View {
                        status: v["status"].as_str().unwrap_or("?unreadable").to_owned(),
                        updated_at: v["updatedAt"]
                            .as_str()
                            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                            .map(|t| t.with_timezone(&chrono::Utc)),
                    }
                } else {
                    View {
                        status: format!("?{status}"),
                        updated_at: None,
                    }
                };
                sink.lock().unwrap()[i as usize] = view;
            })),
        )
        .await?;
        anyhow::ensure!(
            outcome.failures == 0,
            "status sweep: {}",
            outcome.errors(200)
        );
        let found = std::mem::take(&mut *found.lock().unwrap());
        Ok(found)
    }

    /// Sweeps the statuses of the orders not yet `done` until none is left (or `deadline`):
    /// the moment the last one was seen done. With `metric_goal`, first waits (polling
    /// `/metrics` every 100 ms) until that many sagas have finished, which costs the service
    /// far less than sweeping; the sweeps then only confirm.
    pub async fn await_all(
        &self,
        ids: &[String],
        done: fn(&str) -> bool,
        metric_goal: Option<u64>,
        deadline: Instant,
    ) -> Result<Instant> {
        let mut reached = None;
        if let Some(goal) = metric_goal
            && self.finished().await.is_some()
        {
            loop {
                if self.finished().await.unwrap_or_default() >= goal {
                    reached = Some(Instant::now());
                    break;
                }
                if Instant::now() >= deadline {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        let mut pending: Vec<String> = ids.to_vec();
        loop {
            let swept = Instant::now();
            let statuses = self.statuses(&pending).await?;
            let left: Vec<String> = pending
                .iter()
                .zip(&statuses)
                .filter(|(_, s)| !done(s))
                .map(|(id, _)| id.clone())
                .collect();
            if left.is_empty() {
                // Confirmed by the sweep: the metric's moment if it had got there first.
                return Ok(reached.unwrap_or_else(Instant::now));
            }
            reached = None;
            if Instant::now() >= deadline {
                bail!(
                    "{} of {} orders never got there: {}",
                    left.len(),
                    ids.len(),
                    tally(&statuses)
                );
            }
            pending = left;
            // The sweep competes with the sagas it waits for: at most a quarter of the time.
            let pause = (swept.elapsed() * 3).max(Duration::from_millis(50));
            tokio::time::sleep(pause).await;
        }
    }

    /// `fulfillment audit` of this service's store (it must be stopped or running; both are
    /// allowed): its summary line, or an error with its violations.
    pub async fn audit(&self) -> Result<String> {
        let cmd = match &self.aws {
            Some(stack) if self.backend == Backend::Aws => stack.audit_command(),
            _ => blackbox::audit_command(&self.db),
        };
        let audit = tokio::task::block_in_place(|| blackbox::Audit::run(cmd));
        if audit.code != Some(0) {
            bail!(
                "audit exited {:?}: {}\n{}",
                audit.code,
                audit.violations().join("\n"),
                audit.stderr.lines().last().unwrap_or_default()
            );
        }
        Ok(audit.summary().to_owned())
    }
}

/// SKU `n` of the bench's catalogue.
pub fn sku_name(n: u64) -> String {
    format!("bench-sku-{n}")
}

/// The JSON body of order `id`: one line of SKU `i % SKUS` at `unit_price_cents`.
pub fn order_body(id: &str, i: u64, unit_price_cents: u64) -> String {
    format!(
        concat!(
            r#"{{"orderId":"{id}","customerId":"cus_bench","currency":"EUR","#,
            r#""shippingAddress":{{"name":"Ada","line1":"1 Way","city":"London","postalCode":"N1 9GU","country":"GB"}},"#,
            r#""items":[{{"sku":"{sku}","quantity":1,"unitPriceCents":{price}}}],"paymentMethod":"pm_card_visa"}}"#
        ),
        id = id,
        sku = sku_name(i % SKUS),
        price = unit_price_cents
    )
}

/// Order `i` of a scenario: `b-<run>-<scenario>-<i>`, unique across runs and scenarios.
pub fn order_id(run: &str, scenario: &str, i: u64) -> String {
    format!("b-{run}-{scenario}-{i}")
}

/// Every order id of a scenario of `n` orders.
pub fn order_ids(run: &str, scenario: &str, n: u64) -> Vec<String> {
    (0..n).map(|i| order_id(run, scenario, i)).collect()
}

/// `POST /orders` of order `i` of the scenario, with the operator's key (which may place
/// orders: one key for the whole load, as one storefront backend would have).
pub fn place_orders(run: &str, scenario: &str, unit_price_cents: u64) -> MakeRequest {
    let (run, scenario) = (run.to_owned(), scenario.to_owned());
    let token: Arc<str> = Arc::from(TOKEN);
    Arc::new(move |i| {
        let id = order_id(&run, &scenario, i);
        Spec::json(
            Method::POST,
            "/orders",
            order_body(&id, i, unit_price_cents),
        )
        .operator(&token)
    })
}

pub fn is_terminal(status: &str) -> bool {
    blackbox::is_terminal(Some(status))
}

/// `COMPLETED×98, CANCELLED×2`.
pub fn tally(statuses: &[String]) -> String {
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    for s in statuses {
        *counts.entry(s.as_str()).or_default() += 1;
    }
    counts
        .iter()
        .map(|(s, n)| format!("{s}×{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// CPU time (user and system) of the whole service, the threads that have ended included, and
/// of the embedded engine's writer thread (absent on AWS). Steadier than a rate on a shared
/// machine: a step that costs less shows here even when the rate is bound by something else.
#[derive(Debug, Clone, Copy)]
pub struct CpuTime {
    pub process: Duration,
    pub engine_writer: Option<Duration>,
}

impl CpuTime {
    /// `; 1.62 CPU-ms a saga (engine writer 0.61)`: the time used since `before`, per unit.
    pub fn per(&self, before: &CpuTime, units: u64, unit: &str) -> String {
        let per = |after: Duration, before: Duration| {
            after.saturating_sub(before).as_secs_f64() * 1000.0 / units.max(1) as f64
        };
        let writer = match (self.engine_writer, before.engine_writer) {
            (Some(a), Some(b)) => format!(" (engine writer {:.2})", per(a, b)),
            _ => String::new(),
        };
        format!(
            "; {:.2} CPU-ms a {unit}{writer}",
            per(self.process, before.process)
        )
    }
}

/// utime + stime of a `/proc/…/stat` line (fields 14 and 15; the name before them may hold
/// spaces, so fields are counted from its closing parenthesis).
pub fn stat_cpu(stat: &str) -> Option<Duration> {
    let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf reads a constant of the system; it has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (hz > 0).then(|| Duration::from_secs_f64(ticks as f64 / hz as f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_order_body_is_valid_json_with_its_id_and_sku() {
        let body: serde_json::Value =
            serde_json::from_str(&order_body("b-1-s-70", 70, 1500)).unwrap();
        assert_eq!(body["orderId"], "b-1-s-70");
        assert_eq!(body["items"][0]["sku"], "bench-sku-6");
        assert_eq!(body["items"][0]["unitPriceCents"], 1500);
    }

    #[test]
    fn cpu_time_is_read_after_a_thread_name_that_holds_spaces_and_parentheses() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime …
        let stat = "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 10 0 0 0 250 50 0 0 20 0 9 0";
        // SAFETY: as in `stat_cpu`.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        assert_eq!(
            stat_cpu(stat),
            Some(Duration::from_secs_f64(300.0 / hz)),
            "utime 250 + stime 50 ticks"
        );
        assert_eq!(stat_cpu("4242 (cut short) S 1"), None);
    }

    #[test]
    fn cpu_per_unit_counts_only_the_time_since_the_first_reading() {
        let before = CpuTime {
            process: Duration::from_millis(500),
            engine_writer: Some(Duration::from_millis(100)),
        };
        let after = CpuTime {
            process: Duration::from_millis(3_500),
            engine_writer: Some(Duration::from_millis(1_300)),
        };
        assert_eq!(
            after.per(&before, 2_000, "saga"),
            "; 1.50 CPU-ms a saga (engine writer 0.60)"
        );
        let remote = CpuTime {
            engine_writer: None,
            ..after
        };
        assert_eq!(remote.per(&before, 2_000, "saga"), "; 1.50 CPU-ms a saga");
    }
}
