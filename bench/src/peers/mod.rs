//! `bench peers`: the same order saga on our service, on Restate and on Temporal, on this
//! machine, in one run, one table. Each system is a [`Peer`]: started from its own installed
//! server (`bench/peers/setup.sh`, pinned, under `target/peers/`), loaded by the same load
//! generator over its own HTTP ingress, measured through `/proc`, crashed with SIGKILL, and
//! audited with the same invariants ([`records`]). The phases are in [`run`].

pub mod install;
pub mod ours;
pub mod process;
pub mod records;
pub mod restate;
pub mod run;
pub mod table;
pub mod temporal;

use crate::load::MakeRequest;
use anyhow::Result;
use async_trait::async_trait;
use records::Expect;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The approval threshold of small orders (none needs approval) and of parked ones (all do).
pub const NO_APPROVAL: u64 = 100_000;
pub const ALL_NEED_APPROVAL: u64 = 1;
/// Units every SKU is stocked with: no order runs out.
pub const STOCK: u64 = 1_000_000_000;

/// How long a system's start may take before it counts as failed.
pub const READY_WITHIN: Duration = Duration::from_secs(60);

/// `b-<run>-<scenario>-` of `b-<run>-<scenario>-<i>`: the orders of one phase.
pub fn phase_prefix(ids: &[String]) -> &str {
    ids.first()
        .and_then(|id| id.rfind('-').map(|i| &id[..=i]))
        .unwrap_or("")
}

/// Which system.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Ours,
    Restate,
    Temporal,
}

impl Kind {
    pub fn label(self) -> &'static str {
        match self {
            Kind::Ours => "fulfillment",
            Kind::Restate => "Restate",
            Kind::Temporal => "Temporal",
        }
    }
}

/// What a peer waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Goal {
    /// `COMPLETED` or `CANCELLED`.
    Finished,
    /// `AWAITING_APPROVAL`.
    Parked,
}

/// One system under test, running.
#[async_trait]
pub trait Peer: Send + Sync {
    /// Where the load generator sends its requests.
    fn ingress(&self) -> SocketAddr;
    /// Request `i` places order `b-<run>-<scenario>-<i>` (the body of our `POST /orders`).
    fn place(&self, run: &str, scenario: &str) -> MakeRequest;
    /// Request `i` approves order `b-<run>-<scenario>-<i>`.
    fn approve(&self, run: &str, scenario: &str) -> MakeRequest;
    /// The status code a placed order is answered with.
    fn accepted_status(&self) -> u16 {
        202
    }
    /// How many of `ids` have reached `goal` (each peer counts the cheapest way it has).
    async fn count(&self, ids: &[String], goal: Goal) -> Result<u64>;
    /// Waits until every order of `ids` has reached `goal`: the moment it was seen.
    async fn await_goal(&self, ids: &[String], goal: Goal, deadline: Instant) -> Result<Instant> {
        let what = format!("reached {goal:?}");
        poll_until(&what, ids.len() as u64, deadline, || self.count(ids, goal)).await
    }
    /// Checks every record against the invariants: a summary, or an error with what broke.
    async fn audit(&self, expect: &Expect<'_>) -> Result<String>;
    /// CPU time of each of its processes so far (name, time).
    fn cpu(&self) -> Vec<(&'static str, Duration)>;
    /// Resident set of all its processes, bytes.
    fn rss(&self) -> u64;
    /// Its durable state on disk, bytes.
    fn disk_bytes(&self) -> u64;
    /// SIGTERM to every process, and wait for them to exit.
    async fn stop(&mut self) -> Result<()>;
    /// SIGKILL to every process: a crash of the machine's services.
    async fn kill(&mut self);
    /// Starts it again on the same state; the time until it takes orders again.
    async fn restart(&mut self) -> Result<Duration>;
}

/// Starts `kind` on a fresh state with `threshold` and every bench SKU stocked.
pub async fn launch(kind: Kind, threshold: u64) -> Result<Box<dyn Peer>> {
    Ok(match kind {
        Kind::Ours => Box::new(ours::Ours::launch(threshold).await?),
        Kind::Restate => Box::new(restate::Restate::launch(threshold).await?),
        Kind::Temporal => Box::new(temporal::Temporal::launch(threshold).await?),
    })
}

/// Polls `count` until it reaches `n`: the moment it was seen. A count costs the system
/// measured (a query over its state, which grows with the run), so polls take at most a
/// tenth of the time: the pause is nine times the last count's, 100 ms at least.
pub async fn poll_until<F, Fut>(
    what: &str,
    n: u64,
    deadline: Instant,
    mut count: F,
) -> Result<Instant>
where
    F: FnMut() -> Fut + Send,
    Fut: std::future::Future<Output = Result<u64>> + Send,
{
    loop {
        let asked = Instant::now();
        let reached = count().await?;
        if reached >= n {
            return Ok(Instant::now());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "only {reached} of {n} orders {what} in time"
        );
        tokio::time::sleep((asked.elapsed() * 9).max(Duration::from_millis(100))).await;
    }
}

/// Runs every phase on each of `kinds`, one after the other, and prints the summary line and
/// the table: whether every system ran and audited clean.
pub async fn bench(
    kinds: &[Kind],
    sizes: &run::PeerSizes,
    temporal_divisor: u64,
    run_id: &str,
) -> bool {
    let installed = match tokio::task::block_in_place(install::ensure) {
        Ok(installed) => Some(installed),
        Err(e) => {
            eprintln!("bench peers: the peers could not be installed: {e:#}");
            None
        }
    };
    let mut columns = Vec::new();
    for &kind in kinds {
        eprintln!("bench peers: {} …", kind.label());
        let result = match (&installed, kind) {
            (None, Kind::Restate | Kind::Temporal) => Err("not installed".to_owned()),
            _ => {
                let sizes = sizes_of(kind, sizes, temporal_divisor);
                let run_id = run_id.to_owned();
                match tokio::spawn(async move { run::measure(kind, &sizes, &run_id).await }).await {
                    Ok(Ok(figures)) => Ok(figures),
                    Ok(Err(e)) => Err(format!("{e:#}")),
                    Err(e) => Err(format!("panicked: {e}")),
                }
            }
        };
        if let Err(e) = &result {
            eprintln!("bench peers: {} failed: {e}", kind.label());
        }
        columns.push(table::Column {
            kind,
            settings: format!(
                "{} ({})",
                settings(kind),
                sizes_of(kind, sizes, temporal_divisor).describe()
            ),
            result,
        });
    }
    let ok = columns.iter().all(|c| c.result.is_ok());
    println!("bench peers: {}", summary(&columns));
    println!("{}", table::table(&columns, &crate::report::machine()));
    ok
}

/// Temporal's dev server runs the saga at about a hundredth of the others' rate on these two
/// cores: it gets the counts over `divisor` (the rates stay), so a full run ends in hours, not
/// days. Its figures that grow with the counts are per order, or said with the sizes.
fn sizes_of(kind: Kind, sizes: &run::PeerSizes, temporal_divisor: u64) -> run::PeerSizes {
    match kind {
        Kind::Temporal => sizes.divided(temporal_divisor),
        _ => sizes.clone(),
    }
}

/// Each system's version and durability as run.
fn settings(kind: Kind) -> &'static str {
    match kind {
        Kind::Ours => ours::SETTINGS,
        Kind::Restate => restate::SETTINGS,
        Kind::Temporal => temporal::SETTINGS,
    }
}

/// `fulfillment 1032 sagas/s, Restate 410 sagas/s, Temporal failed`.
fn summary(columns: &[table::Column]) -> String {
    columns
        .iter()
        .map(|c| match &c.result {
            Ok(figures) => match figures.first() {
                Some(f) => format!("{} {}", c.kind.label(), crate::report::value(f)),
                None => format!("{} —", c.kind.label()),
            },
            Err(_) => format!("{} failed", c.kind.label()),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phase_is_the_prefix_of_its_ids() {
        let ids = vec!["b-19a-a1-0".to_owned(), "b-19a-a1-1".to_owned()];
        assert_eq!(phase_prefix(&ids), "b-19a-a1-");
        assert_eq!(phase_prefix(&[]), "");
    }
}
