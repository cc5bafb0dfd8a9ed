//! `bench`: load benchmarks of the real `fulfillment` binary on loopback — accept latency and
//! saturation, saga throughput, parked orders, crash recovery and the disk's fsync rate — on
//! the embedded backend and on AWS emulators (fakecloud + moto) side by side; and the AWS
//! backend's calls per API beside AWS's quotas (`quota`, against `fulfillment engine` + moto); a soak
//! of many orders with a short retention (`soak`); and the same saga on Restate and Temporal
//! beside ours (`peers`, [`peers`]). Each scenario
//! prints one `bench <scenario>: …` line on stdout; progress goes to stderr.

mod aws;
mod load;
mod metrics;
mod peers;
mod report;
mod scenarios;
mod service;
mod stats;

use anyhow::{Context, Result, bail};
use clap::{Parser, ValueEnum};
use report::Row;
use scenarios::{Ctx, Report, Sizes};
use service::Backend;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Scenario {
    All,
    Accept,
    Saga,
    Parked,
    Recovery,
    Fsync,
    Quota,
    Soak,
    Console,
    Peers,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum PeerName {
    Fulfillment,
    Restate,
    Temporal,
}

impl PeerName {
    fn kind(self) -> peers::Kind {
        match self {
            PeerName::Fulfillment => peers::Kind::Ours,
            PeerName::Restate => peers::Kind::Restate,
            PeerName::Temporal => peers::Kind::Temporal,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Backends {
    Embedded,
    Aws,
    Both,
}

/// Load benchmarks of the `fulfillment` binary (built beside this one: `cargo build --release
/// --workspace`, or set FULFILLMENT_BIN).
#[derive(Debug, Parser)]
#[command(name = "bench")]
struct Cli {
    /// The scenario to run, or all of them.
    scenario: Scenario,
    /// Which backend: the default is both for `all`, embedded for one scenario.
    #[arg(long, env = "BENCH_BACKEND")]
    backend: Option<Backends>,
    /// accept: the open-loop rates, requests per second.
    #[arg(
        long,
        env = "BENCH_ACCEPT_RATES",
        value_delimiter = ',',
        default_value = "500,1000"
    )]
    accept_rates: Vec<f64>,
    /// accept: seconds per open-loop rate.
    #[arg(long, env = "BENCH_ACCEPT_SECS", default_value_t = 10.0)]
    accept_secs: f64,
    /// accept: seconds of the closed loop at saturation.
    #[arg(long, env = "BENCH_SATURATION_SECS", default_value_t = 10.0)]
    saturation_secs: f64,
    /// Connections of every closed loop.
    #[arg(long, env = "BENCH_CONNECTIONS", default_value_t = 64)]
    connections: usize,
    /// saga: orders submitted.
    #[arg(long = "orders", env = "BENCH_SAGA_ORDERS", default_value_t = 20_000)]
    saga_orders: u64,
    /// saga: submit open loop at this rate (req/s) instead of as fast as the closed loop goes.
    #[arg(long, env = "BENCH_SAGA_RATE")]
    saga_rate: Option<f64>,
    /// saga: register a webhook endpoint for the orders' client, received by a server in the
    /// bench, and wait for every order's `order.accepted` and `order.completed` (the outbox's
    /// cost, end to end).
    #[arg(long, env = "BENCH_SAGA_WEBHOOK")]
    saga_webhook: bool,
    /// parked: orders parked awaiting approval.
    #[arg(long, env = "BENCH_PARKED_ORDERS", default_value_t = 100_000)]
    parked: u64,
    /// recovery: orders in flight at the SIGKILL.
    #[arg(long, env = "BENCH_RECOVERY_ORDERS", default_value_t = 10_000)]
    recovery: u64,
    /// fsync: seconds of appending.
    #[arg(long, env = "BENCH_FSYNC_SECS", default_value_t = 2.0)]
    fsync_secs: f64,
    /// quota: small sagas, status polls and parked approvals (a quarter as many approved).
    #[arg(long, env = "BENCH_QUOTA_ORDERS", default_value_t = 100)]
    quota_orders: u64,
    /// quota: seconds of each background measurement.
    #[arg(long, env = "BENCH_QUOTA_WINDOW_SECS", default_value_t = 10.0)]
    quota_window_secs: f64,
    /// soak: orders pushed through one service (embedded backend).
    #[arg(long, env = "BENCH_SOAK_ORDERS", default_value_t = 1_000_000)]
    soak_orders: u64,
    /// soak: orders per measured window.
    #[arg(long, env = "BENCH_SOAK_WINDOW", default_value_t = 100_000)]
    soak_window: u64,
    /// soak: the service's retention of closed executions, seconds (short, so that pruning
    /// runs during the soak).
    #[arg(long, env = "BENCH_SOAK_RETENTION_SECS", default_value_t = 60)]
    soak_retention_secs: u64,
    /// soak: the service's repair window, seconds (its frequent passes read the orders of the
    /// window; small orders live seconds, as the retention is shortened for the run)
    #[arg(long, env = "BENCH_SOAK_REPAIR_WINDOW_SECS", default_value_t = 120)]
    soak_repair_window_secs: u64,
    /// console: orders in the store while the console's pages are read (one in a hundred
    /// awaiting approval; embedded backend).
    #[arg(long, env = "BENCH_CONSOLE_ORDERS", default_value_t = 100_000)]
    console_orders: u64,
    /// peers: small orders of the closed loop, on each system.
    #[arg(long, env = "BENCH_PEERS_ORDERS", default_value_t = 20_000)]
    peers_orders: u64,
    /// peers: orders parked for approval, on each system.
    #[arg(long, env = "BENCH_PEERS_PARKED", default_value_t = 100_000)]
    peers_parked: u64,
    /// peers: orders in flight at the SIGKILL, on each system.
    #[arg(long, env = "BENCH_PEERS_RECOVERY", default_value_t = 10_000)]
    peers_recovery: u64,
    /// peers: Temporal's counts are divided by this (its dev server is ~100 times slower here).
    #[arg(long, env = "BENCH_PEERS_TEMPORAL_DIVISOR", default_value_t = 10)]
    peers_temporal_divisor: u64,
    /// peers: which systems (fulfillment, restate, temporal).
    #[arg(
        long,
        env = "BENCH_PEERS",
        value_delimiter = ',',
        default_value = "fulfillment,restate,temporal"
    )]
    peers: Vec<PeerName>,
    /// The AWS side runs the counts and rates divided by this.
    #[arg(long, env = "BENCH_AWS_DIVISOR", default_value_t = 10)]
    aws_divisor: u64,
    /// The most any wait of an embedded scenario may take, seconds.
    #[arg(long, env = "BENCH_TIMEOUT_SECS", default_value_t = 900)]
    timeout_secs: u64,
    /// The most an AWS-side scenario may take in all, seconds.
    #[arg(long, env = "BENCH_AWS_TIMEOUT_SECS", default_value_t = 600)]
    aws_timeout_secs: u64,
}

impl Cli {
    fn sizes(&self) -> Sizes {
        Sizes {
            accept_rates: self.accept_rates.clone(),
            accept_secs: self.accept_secs,
            saturation_secs: self.saturation_secs,
            connections: self.connections,
            saga_orders: self.saga_orders,
            saga_rate: self.saga_rate,
            saga_webhook: self.saga_webhook,
            parked: self.parked,
            recovery: self.recovery,
        }
    }
}

/// Points the harness at the `fulfillment` built beside this binary, unless told otherwise.
fn locate_binary() -> Result<()> {
    let bin = match std::env::var_os("FULFILLMENT_BIN") {
        Some(bin) => PathBuf::from(bin),
        None => std::env::current_exe()?
            .parent()
            .context("the bench's directory")?
            .join("fulfillment"),
    };
    if !bin.is_file() {
        bail!(
            "{} does not exist: build it with `cargo build --release --workspace`, or set \
             FULFILLMENT_BIN",
            bin.display()
        );
    }
    // SAFETY: before the runtime starts, no other thread reads the environment.
    unsafe { std::env::set_var("FULFILLMENT_BIN", &bin) };
    Ok(())
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    locate_binary()?;
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run(cli))
}

const ALL: [(Scenario, &str); 9] = [
    (Scenario::Fsync, "fsync"),
    (Scenario::Accept, "accept"),
    (Scenario::Saga, "saga"),
    (Scenario::Parked, "parked"),
    (Scenario::Recovery, "recovery"),
    (Scenario::Quota, "quota"),
    (Scenario::Soak, "soak"),
    (Scenario::Console, "console"),
    (Scenario::Peers, "peers"),
];

async fn run(cli: Cli) -> Result<()> {
    let backends = cli.backend.unwrap_or(if cli.scenario == Scenario::All {
        Backends::Both
    } else {
        Backends::Embedded
    });
    let sizes = cli.sizes();
    // The disk's limit, next to which every scenario's commit rates are read.
    let fsyncs = scenarios::fsync::measure_here(cli.fsync_secs)?;
    let run_id = format!(
        "{:x}",
        SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis()
    );
    let ctx = |backend| Ctx {
        backend,
        sizes: match backend {
            Backend::Embedded => sizes.clone(),
            Backend::Aws => sizes.divided(cli.aws_divisor),
        },
        run: run_id.clone(),
        fsyncs,
        timeout: Duration::from_secs(match backend {
            Backend::Embedded => cli.timeout_secs,
            Backend::Aws => cli.aws_timeout_secs,
        }),
    };
    if backends != Backends::Embedded {
        // Found (or installed, which takes long) before any scenario's time limit starts.
        if let Err(e) = tokio::task::block_in_place(aws::fakecloud_executable) {
            eprintln!("bench: no fakecloud, every AWS side will fail: {e:#}");
        }
    }
    let mut rows = Vec::new();
    let mut failed = false;
    for (scenario, name) in ALL {
        if cli.scenario != Scenario::All && cli.scenario != scenario {
            continue;
        }
        if scenario == Scenario::Fsync {
            // The disk is the machine's, not a backend's: the measurement of the run's start.
            let report = scenarios::fsync::report(fsyncs, cli.fsync_secs);
            println!("bench fsync: {}", report.summary);
            rows.push(Row {
                scenario: name,
                embedded: Some(Ok(report)),
                aws: None,
            });
            continue;
        }
        if scenario == Scenario::Quota {
            // The AWS backend's calls, whichever backends the other scenarios compare: it
            // needs moto and the binary's own engine, not fakecloud. Its table is its own.
            eprintln!("bench quota: aws (fulfillment engine + moto) …");
            let sizes = scenarios::quota::QuotaSizes {
                orders: cli.quota_orders,
                window_secs: cli.quota_window_secs,
            };
            let limit = Duration::from_secs(cli.aws_timeout_secs);
            let result = one_task(limit, async move {
                scenarios::quota::run(&sizes, std::time::Instant::now() + limit).await
            })
            .await;
            match &result {
                Ok(report) => println!("bench quota: {}", report.summary),
                Err(e) => println!("bench quota: failed: {e}"),
            }
            failed |= result.is_err();
            continue;
        }
        if scenario == Scenario::Soak {
            // Retention is the embedded engine's (on AWS it is Step Functions' own 90 days).
            eprintln!("bench soak: embedded …");
            let sizes = scenarios::soak::SoakSizes {
                orders: cli.soak_orders,
                window: cli.soak_window,
                retention: Duration::from_secs(cli.soak_retention_secs),
                repair_window: Duration::from_secs(cli.soak_repair_window_secs),
            };
            let ctx = ctx(Backend::Embedded);
            let result =
                joined(tokio::spawn(async move { scenarios::soak::run(&ctx, &sizes).await }).await);
            match &result {
                Ok(report) => println!("bench soak: {}", report.summary),
                Err(e) => println!("bench soak: failed: {e}"),
            }
            failed |= result.is_err();
            continue;
        }
        if scenario == Scenario::Console {
            // The console's pages over the embedded store (its counts are SQLite's).
            eprintln!("bench console: embedded …");
            let ctx = ctx(Backend::Embedded);
            let orders = cli.console_orders;
            let result = joined(
                tokio::spawn(async move { scenarios::console::run(&ctx, orders).await }).await,
            );
            match &result {
                Ok(report) => println!("bench console: {}", report.summary),
                Err(e) => println!("bench console: failed: {e}"),
            }
            failed |= result.is_err();
            continue;
        }
        if scenario == Scenario::Peers {
            // Its own table: the systems side by side, not the backends.
            let sizes = peers::run::PeerSizes {
                orders: cli.peers_orders,
                connections: cli.connections,
                accept_rates: cli.accept_rates.clone(),
                accept_secs: cli.accept_secs,
                parked: cli.peers_parked,
                recovery: cli.peers_recovery,
                timeout: Duration::from_secs(cli.timeout_secs),
            };
            let kinds: Vec<peers::Kind> = cli.peers.iter().map(|p| p.kind()).collect();
            failed |= !peers::bench(&kinds, &sizes, cli.peers_temporal_divisor, &run_id).await;
            continue;
        }
        let embedded = if backends != Backends::Aws {
            eprintln!("bench {name}: embedded …");
            Some(one(scenario, ctx(Backend::Embedded), None).await)
        } else {
            None
        };
        let aws = if backends != Backends::Embedded {
            eprintln!("bench {name}: aws (fakecloud + moto) …");
            let limit = Duration::from_secs(cli.aws_timeout_secs);
            Some(one(scenario, ctx(Backend::Aws), Some(limit)).await)
        } else {
            None
        };
        failed |= matches!(embedded, Some(Err(_)))
            || backends == Backends::Aws && matches!(aws, Some(Err(_)));
        print_lines(name, &embedded, &aws);
        rows.push(Row {
            scenario: name,
            embedded,
            aws,
        });
    }
    if cli.scenario == Scenario::All {
        println!("{}", report::table(&rows, &report::machine()));
    }
    if failed {
        bail!("a scenario failed");
    }
    Ok(())
}

/// Runs one scenario on its own task (a harness panic fails the scenario, not the run),
/// within `limit` if given.
async fn one(scenario: Scenario, ctx: Ctx, limit: Option<Duration>) -> Result<Report, String> {
    let run = async move {
        match scenario {
            Scenario::Accept => scenarios::accept::run(&ctx).await,
            Scenario::Saga => scenarios::saga::run(&ctx).await,
            Scenario::Parked => scenarios::parked::run(&ctx).await,
            Scenario::Recovery => scenarios::recovery::run(&ctx).await,
            Scenario::Fsync
            | Scenario::Quota
            | Scenario::Soak
            | Scenario::Console
            | Scenario::Peers
            | Scenario::All => {
                unreachable!("not a backend's scenario")
            }
        }
    };
    match limit {
        Some(limit) => one_task(limit, run).await,
        None => joined(tokio::spawn(run).await),
    }
}

/// Runs `scenario` on its own task within `limit`.
async fn one_task(
    limit: Duration,
    scenario: impl std::future::Future<Output = Result<Report>> + Send + 'static,
) -> Result<Report, String> {
    let task = tokio::spawn(scenario);
    let abort = task.abort_handle();
    match tokio::time::timeout(limit, task).await {
        Ok(result) => joined(result),
        Err(_) => {
            // Dropping the task's state kills its servers (the harness kills on drop).
            abort.abort();
            Err(format!("timed out after {} s", limit.as_secs()))
        }
    }
}

/// A scenario task's outcome: its report, its error, or its panic's message.
fn joined(joined: Result<Result<Report>, tokio::task::JoinError>) -> Result<Report, String> {
    match joined {
        Ok(Ok(report)) => Ok(report),
        Ok(Err(e)) => Err(format!("{e:#}")),
        Err(e) if e.is_panic() => {
            let panic = e.into_panic();
            Err(panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "panicked".to_owned()))
        }
        Err(e) => Err(e.to_string()),
    }
}

/// The scenario's stdout: one `bench <name>: …` line, with the per-backend lines before it
/// when both ran.
fn print_lines(
    name: &str,
    embedded: &Option<Result<Report, String>>,
    aws: &Option<Result<Report, String>>,
) {
    let line = |r: &Result<Report, String>| match r {
        Ok(report) => report.summary.clone(),
        Err(e) => format!("failed: {e}"),
    };
    match (embedded, aws) {
        (Some(e), None) => println!("bench {name}: {}", line(e)),
        (None, Some(a)) => println!("bench {name}: [{}] {}", Backend::Aws.label(), line(a)),
        (Some(e), Some(a)) => {
            println!("bench {name} [{}]: {}", Backend::Embedded.label(), line(e));
            println!("bench {name} [{}]: {}", Backend::Aws.label(), line(a));
            let verdict = match (e, a) {
                (Ok(e), Ok(a)) => report::comparison(e, a),
                (Ok(_), Err(_)) => "aws side failed (above); no ratio".to_owned(),
                (Err(_), _) => "embedded side failed (above); no ratio".to_owned(),
            };
            println!("bench {name}: {verdict}");
        }
        (None, None) => {}
    }
}
