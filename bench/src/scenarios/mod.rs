//! The scenarios, one per file, each against the real binary on loopback: what a scenario is
//! given ([`Ctx`]: backend, sizes, the run's id) and what it hands back ([`Report`]: its
//! summary line and its figures, for the side-by-side table).

pub mod accept;
pub mod console;
pub mod fsync;
pub mod parked;
pub mod quota;
pub mod recovery;
pub mod saga;
pub mod soak;

use crate::metrics::Counters;
use crate::service::{Backend, Service};
use std::time::{Duration, Instant};

/// The sizes of every scenario (flags or `BENCH_*`; the AWS side divides them).
#[derive(Debug, Clone)]
pub struct Sizes {
    pub accept_rates: Vec<f64>,
    pub accept_secs: f64,
    pub saturation_secs: f64,
    pub connections: usize,
    pub saga_orders: u64,
    /// `None`: as fast as the closed loop allows.
    pub saga_rate: Option<f64>,
    /// Whether the saga scenario receives its orders' webhooks.
    pub saga_webhook: bool,
    pub parked: u64,
    pub recovery: u64,
}

impl Sizes {
    /// The AWS side's sizes: counts and rates over `divisor` (the emulators are slow), at
    /// least a handful of each.
    pub fn divided(&self, divisor: u64) -> Sizes {
        let d = divisor.max(1);
        Sizes {
            accept_rates: self
                .accept_rates
                .iter()
                .map(|r| (r / d as f64).max(1.0))
                .collect(),
            saga_orders: (self.saga_orders / d).max(10),
            saga_rate: self.saga_rate.map(|r| (r / d as f64).max(1.0)),
            parked: (self.parked / d).max(10),
            recovery: (self.recovery / d).max(10),
            connections: self.connections.min(16),
            ..self.clone()
        }
    }
}

/// What a scenario runs with.
#[derive(Debug, Clone)]
pub struct Ctx {
    pub backend: Backend,
    pub sizes: Sizes,
    /// Unique per run: order ids are `b-<run>-…`.
    pub run: String,
    /// fsyncs/s of the disk, measured at the start of the run.
    pub fsyncs: f64,
    /// The most any wait of the scenario may take.
    pub timeout: Duration,
}

impl Ctx {
    /// The deadline of a wait starting now.
    pub fn deadline(&self) -> Instant {
        Instant::now() + self.timeout
    }
}

/// One figure of a scenario, for the table.
#[derive(Debug, Clone)]
pub struct Figure {
    pub name: String,
    pub value: f64,
    pub unit: &'static str,
    /// Rates are better higher; latencies, times and sizes lower.
    pub higher_is_better: bool,
    /// Whether systems are compared on it (no for a fact of the run, such as how many orders
    /// a crash interrupted).
    pub compared: bool,
}

impl Figure {
    pub fn rate(name: impl Into<String>, value: f64, unit: &'static str) -> Figure {
        Figure {
            name: name.into(),
            value,
            unit,
            higher_is_better: true,
            compared: true,
        }
    }

    pub fn cost(name: impl Into<String>, value: f64, unit: &'static str) -> Figure {
        Figure {
            name: name.into(),
            value,
            unit,
            higher_is_better: false,
            compared: true,
        }
    }

    /// A fact of the run, shown but not compared.
    pub fn fact(name: impl Into<String>, value: f64, unit: &'static str) -> Figure {
        Figure {
            compared: false,
            ..Figure::rate(name, value, unit)
        }
    }

    pub fn millis(name: impl Into<String>, d: Duration) -> Figure {
        Figure::cost(name, d.as_secs_f64() * 1e3, "ms")
    }
}

/// What a scenario measured: its summary (after `bench <scenario>: `) and its figures, the
/// first being the headline compared side by side.
#[derive(Debug, Clone)]
pub struct Report {
    pub summary: String,
    pub figures: Vec<Figure>,
}

/// The embedded backend's commit counters over a scenario's measured window.
pub struct Window {
    start: Instant,
    before: Option<Counters>,
}

impl Window {
    pub async fn open(service: &Service) -> Window {
        Window {
            before: service.counters().await,
            start: Instant::now(),
        }
    }

    /// `; engine … commits/s, store … commits/s, … transitions/engine commit (disk … fsyncs/s)`,
    /// with the figures; nothing on a backend without the counters.
    pub async fn close(self, service: &Service, ctx: &Ctx, figures: &mut Vec<Figure>) -> String {
        let secs = self.start.elapsed().as_secs_f64();
        match (self.before, service.counters().await) {
            (Some(before), Some(after)) => {
                let commits = (after.engine_commits - before.engine_commits) / secs;
                let store = (after.store_commits - before.store_commits) / secs;
                let per = (after.transitions - before.transitions)
                    / (after.engine_commits - before.engine_commits).max(1.0);
                figures.push(Figure::rate("engine commits/s", commits, "/s"));
                figures.push(Figure::rate("store commits/s", store, "/s"));
                figures.push(Figure::rate("transitions per fsync", per, ""));
                format!(
                    "; {} (disk {:.0} fsyncs/s)",
                    after.rates_since(&before, secs),
                    ctx.fsyncs
                )
            }
            _ if ctx.backend == Backend::Embedded => {
                "; engine counters not exported by this build".to_owned()
            }
            _ => String::new(),
        }
    }
}
