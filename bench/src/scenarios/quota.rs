//! `bench quota`: what `--backend aws` asks of Step Functions and DynamoDB, API by API, set
//! beside AWS's default quotas. The real binary runs against `fulfillment engine` (standing in
//! for Step Functions) and moto (DynamoDB), each behind a counting proxy (the black-box tests'
//! [`FaultProxy`] with no faults), and the scenario reads the calls per small saga, per
//! approved saga, per status poll, per parked approval per hour and per repair pass. Then, for
//! each API, the sagas a second one account sustains before that API throttles; the lowest
//! names the quota that binds first.
//!
//! Background work (the keeper's rounds and leases, idle activity polls) is measured on its
//! own while nothing else happens and subtracted from each phase by its duration; the status
//! polls the scenario makes to wait for orders are subtracted at the measured cost of a poll.

use super::{Figure, Report};
use anyhow::{Result, ensure};
use blackbox::aws::AwsStack;
use blackbox::faults::{ApiCalls, Dialect, FaultProxy, Faults};
use blackbox::{Server, order};
use futures_util::{StreamExt, stream};
use reqwest::{Method, StatusCode};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How many of each the scenario runs.
#[derive(Debug, Clone)]
pub struct QuotaSizes {
    /// Small sagas (and status polls); a quarter as many approved ones, and as many parked.
    pub orders: u64,
    /// Seconds of each background measurement.
    pub window_secs: f64,
}

/// The keeper's interval at the default `--approval-heartbeat` (5 minutes, a round every
/// fifth of it): the per-hour figures are scaled to it.
const DEFAULT_KEEPER_INTERVAL_SECS: f64 = 60.0;
const DEFAULT_HEARTBEAT_SECS: f64 = 300.0;
/// Keeper rounds an hour at the defaults.
const ROUNDS_PER_HOUR: f64 = 3600.0 / DEFAULT_KEEPER_INTERVAL_SECS;
/// The heartbeat the parked phase runs with (a round every 2 s), to see many rounds quickly;
/// the per-round figures are then scaled to the default's rounds.
const PARKED_HEARTBEAT: &str = "10s";

/// Orders in flight at once while placing.
const IN_FLIGHT: usize = 16;

const SMALL_SKU: &str = "quota-book";
const LARGE_SKU: &str = "quota-piano";
/// Below the default approval threshold (100,000 cents), and above it.
const SMALL_CENTS: u64 = 1_500;
const LARGE_CENTS: u64 = 150_000;

/// One AWS API: the service and the operation.
type Api = (&'static str, String);

/// AWS's default quota of an API: a token bucket refilled every second, per account and
/// region (Step Functions' "API action throttling" table; the large regions are us-east-1,
/// us-west-2 and eu-west-1), or for DynamoDB the on-demand table's request units.
#[derive(Debug, Clone, Copy)]
struct Quota {
    bucket: f64,
    refill: f64,
    /// The same in every other region.
    other_bucket: f64,
    other_refill: f64,
}

fn sfn_quota(api: &str) -> Option<Quota> {
    let q = |bucket, refill, other_bucket, other_refill| Quota {
        bucket,
        refill,
        other_bucket,
        other_refill,
    };
    Some(match api {
        "StartExecution" | "RedriveExecution" => q(1300.0, 300.0, 800.0, 150.0),
        "DescribeExecution" => q(300.0, 15.0, 250.0, 10.0),
        "ListExecutions" => q(200.0, 5.0, 100.0, 2.0),
        "GetExecutionHistory" => q(400.0, 20.0, 400.0, 20.0),
        "StopExecution" => q(1000.0, 200.0, 500.0, 25.0),
        "GetActivityTask" | "SendTaskSuccess" | "SendTaskFailure" | "SendTaskHeartbeat" => {
            q(3000.0, 500.0, 1500.0, 300.0)
        }
        // State transitions of Standard workflows, counted from the histories.
        "(state transitions)" => q(5000.0, 5000.0, 800.0, 800.0),
        _ => return None,
    })
}

/// An on-demand table's default throughput, each of reads and writes (request units a
/// second); one partition takes at most 3,000 read and 1,000 write units a second.
const DYNAMODB_TABLE_UNITS: f64 = 40_000.0;

/// Calls (and items) per API, as counted or as a per-unit figure.
#[derive(Debug, Clone, Default)]
struct Tally(BTreeMap<Api, (f64, f64)>);

impl Tally {
    fn read(sfn: &FaultProxy, dynamodb: &FaultProxy) -> Tally {
        let mut t = Tally::default();
        for (service, proxy) in [("Step Functions", sfn), ("DynamoDB", dynamodb)] {
            for (target, ApiCalls { calls, items }) in proxy.api_calls() {
                let api = target.rsplit('.').next().unwrap_or(&target).to_owned();
                t.0.insert((service, api), (calls as f64, items as f64));
            }
        }
        t
    }

    /// `self - before - rate × secs - per_poll × polls`, over `per`, rounding what is
    /// within noise of zero to zero.
    fn per(
        &self,
        before: &Tally,
        background: &Tally,
        secs: f64,
        per_poll: &Tally,
        polls: f64,
        per: f64,
    ) -> Tally {
        let mut out = Tally::default();
        for (api, (calls, items)) in &self.0 {
            let (c0, i0) = before.0.get(api).copied().unwrap_or_default();
            let (bc, bi) = background.0.get(api).copied().unwrap_or_default();
            let (pc, pi) = per_poll.0.get(api).copied().unwrap_or_default();
            let c = (calls - c0 - bc * secs - pc * polls) / per;
            let i = (items - i0 - bi * secs - pi * polls) / per;
            if c > 0.005 {
                out.0.insert(api.clone(), (c, i.max(c)));
            }
        }
        out
    }

    /// Calls of the Step Functions API `api`.
    fn sfn_calls(&self, api: &str) -> f64 {
        self.0
            .get(&("Step Functions", api.to_owned()))
            .map_or(0.0, |c| c.0)
    }

    /// DynamoDB request units this tally uses at least: one per item (a transaction's items
    /// two each), items of at most 1 KB written and 4 KB read; `(reads, writes)`.
    fn dynamodb_units(&self) -> (f64, f64) {
        let (mut reads, mut writes) = (0.0, 0.0);
        for ((service, api), (_, items)) in &self.0 {
            if *service != "DynamoDB" {
                continue;
            }
            match api.as_str() {
                "GetItem" | "BatchGetItem" | "Query" | "Scan" => reads += items,
                "TransactGetItems" => reads += 2.0 * items,
                "TransactWriteItems" => writes += 2.0 * items,
                "PutItem" | "UpdateItem" | "DeleteItem" | "BatchWriteItem" => writes += items,
                _ => {}
            }
        }
        (reads, writes)
    }
}

/// The counting proxies and what was counted before a phase began.
struct Meter<'a> {
    sfn: &'a FaultProxy,
    dynamodb: &'a FaultProxy,
}

impl Meter<'_> {
    fn now(&self) -> (Tally, Instant) {
        (Tally::read(self.sfn, self.dynamodb), Instant::now())
    }

    /// Calls a second while nothing but the replica's background runs.
    async fn background(&self, secs: f64) -> Tally {
        let (before, t0) = self.now();
        tokio::time::sleep(Duration::from_secs_f64(secs)).await;
        let (after, _) = self.now();
        let secs = t0.elapsed().as_secs_f64();
        let none = Tally::default();
        after.per(&before, &none, 0.0, &none, 0.0, secs)
    }
}

/// A client's calls, as a client makes them: placing orders and polling their status.
struct Client<'a> {
    server: &'a Server,
    key: String,
    polls: AtomicU64,
}

impl Client<'_> {
    async fn place(&self, body: &Value) -> Result<()> {
        let (status, text) =
            call(self.server, Method::POST, "/orders", Some(body), &self.key).await?;
        ensure!(status == StatusCode::ACCEPTED, "POST /orders: {text}");
        Ok(())
    }

    async fn status(&self, id: &str) -> Result<Value> {
        self.polls.fetch_add(1, Ordering::Relaxed);
        let path = format!("/orders/{id}/status");
        let (status, text) = call(self.server, Method::GET, &path, None, &self.key).await?;
        ensure!(status == StatusCode::OK, "status of {id}: {text}");
        Ok(serde_json::from_str(&text)?)
    }

    /// Polls `id` every 200 ms until its status is `want` (a terminal status it did not want
    /// is an error).
    async fn until(&self, id: &str, want: &str, deadline: Instant) -> Result<()> {
        loop {
            let s = self.status(id).await?;
            let status = s["status"].as_str().unwrap_or_default();
            // A finished order's execution may still be closing: waited for by `settled`.
            if status == want {
                return Ok(());
            }
            ensure!(
                !blackbox::is_terminal(Some(status)),
                "{id} ended {status}, not {want}: {s}"
            );
            ensure!(
                Instant::now() < deadline,
                "{id} is still {status}, never {want}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn polls(&self) -> f64 {
        self.polls.load(Ordering::Relaxed) as f64
    }

    /// Places `ids` (of `sku`) and waits until each is `want`, `IN_FLIGHT` at a time.
    async fn run(
        &self,
        ids: &[String],
        sku: &str,
        cents: u64,
        want: &str,
        deadline: Instant,
    ) -> Result<()> {
        // Owned ids: futures borrowing the stream's items are not `Send` for every lifetime.
        let results: Vec<Result<()>> = stream::iter(ids.to_vec())
            .map(|id| async move {
                self.place(&order(&id, sku, 1, cents, "pm_card_visa"))
                    .await?;
                self.until(&id, want, deadline).await
            })
            .buffer_unordered(IN_FLIGHT)
            .collect()
            .await;
        results.into_iter().collect()
    }
}

/// The counts once the last orders' executions have closed: an order reads COMPLETED just
/// before its last step's SendTaskSuccess. (The second waited is background, subtracted.)
async fn settled(meter: &Meter<'_>) -> Tally {
    tokio::time::sleep(Duration::from_secs(1)).await;
    meter.now().0
}

/// What a replica asked of AWS over a window, and what its keeper and repair loop did.
struct Watched {
    calls: Tally,
    secs: f64,
    rounds: f64,
    beats: f64,
    passes: f64,
}

/// How much longer than its window a watch that needs a repair pass may wait for one: the
/// loop rests nine times as long as a pass took (against the emulators, a second or so, but
/// over 6 s once on a loaded 2-core host, when a 60 s grace ran out). A watch stops at the first
/// pass, so the grace costs time only when no pass comes at all.
const PASS_GRACE: Duration = Duration::from_secs(180);

impl Watched {
    /// Watches for `secs`, and on until a repair pass has ended in the window if `until_pass`.
    async fn over(
        meter: &Meter<'_>,
        server: &Server,
        secs: f64,
        until_pass: bool,
    ) -> Result<Watched> {
        let counters = || async {
            Ok::<_, anyhow::Error>((
                metric(server, "fulfillment_approval_keeper_rounds_total").await?,
                metric(server, "fulfillment_approval_heartbeats_total").await?,
                metric(server, "fulfillment_repair_passes_total").await?,
            ))
        };
        let (r0, b0, p0) = counters().await?;
        let (before, t0) = meter.now();
        tokio::time::sleep(Duration::from_secs_f64(secs)).await;
        let grace = Instant::now() + PASS_GRACE;
        while until_pass
            && metric(server, "fulfillment_repair_passes_total").await? <= p0
            && Instant::now() < grace
        {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let (after, _) = meter.now();
        let secs = t0.elapsed().as_secs_f64();
        let (r1, b1, p1) = counters().await?;
        let none = Tally::default();
        Ok(Watched {
            calls: after.per(&before, &none, 0.0, &none, 0.0, 1.0),
            secs,
            rounds: r1 - r0,
            beats: b1 - b0,
            passes: p1 - p0,
        })
    }
}

/// One request with `key`: its status and body. A request that fails on its connection is
/// sent once more on a fresh one, as HTTP clients do (the replica closes a keep-alive
/// connection idle for its read timeout, and a request may meet it closing); every request
/// here is idempotent. A second failure is an error naming the end of the replica's log.
async fn call(
    server: &Server,
    method: Method,
    path: &str,
    body: Option<&Value>,
    key: &str,
) -> Result<(StatusCode, String)> {
    let mut failed = None;
    for _ in 0..2 {
        let mut request = server
            .client
            .request(method.clone(), server.url(path))
            .bearer_auth(key);
        if let Some(body) = body {
            request = request.json(body);
        }
        match request.send().await {
            Ok(r) => return Ok((r.status(), r.text().await?)),
            Err(e) => failed = Some(e),
        }
    }
    let log = server.stderr.text();
    let tail: Vec<&str> = log.lines().rev().take(20).collect();
    anyhow::bail!(
        "{method} {path}: {}; the replica's log ends:\n{}",
        failed.map_or_else(String::new, |e| e.to_string()),
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    )
}

/// A metric's value from `/metrics` (0 when absent).
async fn metric(server: &Server, name: &str) -> Result<f64> {
    let (_, text) = call(server, Method::GET, "/metrics", None, blackbox::TOKEN).await?;
    Ok(text
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or(0.0))
}

/// State transitions of the order's execution: its `…StateEntered` events.
async fn transitions(server: &Server, id: &str) -> f64 {
    server
        .history(id)
        .await
        .iter()
        .filter(|e| e.ends_with("StateEntered"))
        .count() as f64
}

fn ids(prefix: &str, n: u64) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

pub async fn run(sizes: &QuotaSizes, deadline: Instant) -> Result<Report> {
    let n = sizes.orders.max(4);
    let approved_n = (n / 4).max(2);
    let window = sizes.window_secs;
    let run = format!("{:x}", std::process::id());

    let mut stack = AwsStack::start().await;
    let sfn = FaultProxy::start(&stack.engine.base, Dialect::Aws, Faults::default(), 1).await;
    let dynamodb =
        FaultProxy::start(stack.moto.endpoint(), Dialect::Aws, Faults::default(), 2).await;
    stack.route_replicas_through(&sfn.base_url, &dynamodb.base_url);
    let meter = Meter {
        sfn: &sfn,
        dynamodb: &dynamodb,
    };
    // The harness blocks while a process starts or stops: off the runtime's workers, so the
    // proxies the replica calls at its start keep answering.
    use tokio::task::block_in_place as blocking;
    let key = blocking(|| stack.keys_create("bench-quota-shop", "client"));

    // Sagas and polls: one replica, its keeper at the defaults, no repair loop.
    let a = blocking(|| stack.replica(&["--repair-interval", "off"]));
    a.stock(SMALL_SKU, 1_000_000, SMALL_CENTS).await;
    a.stock(LARGE_SKU, 1_000_000, LARGE_CENTS).await;
    let client = Client {
        server: &a,
        key: key.clone(),
        polls: AtomicU64::new(0),
    };
    let warm = format!("q{run}-warm");
    client
        .run(
            std::slice::from_ref(&warm),
            SMALL_SKU,
            SMALL_CENTS,
            "COMPLETED",
            deadline,
        )
        .await?;
    eprintln!("bench quota: background of an idle replica, {window:.0} s …");
    let idle = meter.background(window).await;

    let none = Tally::default();
    let (before, t0) = meter.now();
    for _ in 0..n {
        client.status(&warm).await?;
    }
    let (after, _) = meter.now();
    let per_poll = after.per(
        &before,
        &idle,
        t0.elapsed().as_secs_f64(),
        &none,
        0.0,
        n as f64,
    );

    eprintln!("bench quota: {n} small sagas …");
    let small_ids = ids(&format!("q{run}-s"), n);
    let polls0 = client.polls();
    let (before, t0) = meter.now();
    client
        .run(&small_ids, SMALL_SKU, SMALL_CENTS, "COMPLETED", deadline)
        .await?;
    let after = settled(&meter).await;
    let small = after.per(
        &before,
        &idle,
        t0.elapsed().as_secs_f64(),
        &per_poll,
        client.polls() - polls0,
        n as f64,
    );

    eprintln!("bench quota: {approved_n} approved sagas …");
    let large_ids = ids(&format!("q{run}-a"), approved_n);
    let polls0 = client.polls();
    let (before, t0) = meter.now();
    client
        .run(
            &large_ids,
            LARGE_SKU,
            LARGE_CENTS,
            "AWAITING_APPROVAL",
            deadline,
        )
        .await?;
    let approvals: Vec<Result<()>> = stream::iter(large_ids.clone())
        .map(|id| {
            let (a, client) = (&a, &client);
            async move {
                let path = format!("/orders/{id}/approval");
                let decision = serde_json::json!({ "decision": "approve" });
                let (status, text) =
                    call(a, Method::POST, &path, Some(&decision), blackbox::TOKEN).await?;
                ensure!(status == StatusCode::OK, "approving {id}: {text}");
                client.until(&id, "COMPLETED", deadline).await
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    approvals.into_iter().collect::<Result<()>>()?;
    let after = settled(&meter).await;
    let approved = after.per(
        &before,
        &idle,
        t0.elapsed().as_secs_f64(),
        &per_poll,
        client.polls() - polls0,
        approved_n as f64,
    );
    let small_transitions = transitions(&a, &small_ids[0]).await;
    let approved_transitions = transitions(&a, &large_ids[0]).await;
    drop(client);
    // Stopped, not killed: it gives up its keeper shards, which the next replica takes.
    blocking(|| drop(a.stop()));

    // Parked approvals and repair passes: a replica keeping rounds every 2 s, and its repair
    // loop every 2 s.
    let b = blocking(|| {
        stack.replica(&[
            "--approval-heartbeat",
            PARKED_HEARTBEAT,
            "--approval-timeout",
            "1h",
            "--approval-keeper-rate",
            "1000",
            "--repair-interval",
            "2s",
        ])
    });
    let client = Client {
        server: &b,
        key,
        polls: AtomicU64::new(0),
    };
    tokio::time::sleep(Duration::from_secs(3)).await;
    eprintln!("bench quota: background with nothing parked, {window:.0} s …");
    let empty = Watched::over(&meter, &b, window, false).await?;
    eprintln!("bench quota: {n} approvals parked …");
    let parked_ids = ids(&format!("q{run}-p"), n);
    client
        .run(
            &parked_ids,
            LARGE_SKU,
            LARGE_CENTS,
            "AWAITING_APPROVAL",
            deadline,
        )
        .await?;
    // A full round over all of them first.
    let settle = Instant::now() + Duration::from_secs(30);
    while metric(&b, "fulfillment_approval_keeper_last_round_approvals").await? < n as f64 {
        ensure!(
            Instant::now() < settle,
            "the keeper never kept all {n} parked approvals"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!("bench quota: background with {n} parked, {window:.0} s …");
    let parked = Watched::over(&meter, &b, window, true).await?;
    ensure!(
        empty.rounds >= 1.0 && parked.rounds >= 1.0,
        "no keeper round in {window:.0} s"
    );
    ensure!(
        parked.passes >= 1.0,
        "no repair pass in {:.0} s",
        parked.secs
    );
    // The keeper's calls per parked approval and round (less what a round costs with none
    // parked), times the rounds of an hour at the defaults.
    let empty_rate = empty.calls.per(&none, &none, 0.0, &none, 0.0, empty.secs);
    let mut keeper = parked.calls.per(
        &none,
        &empty_rate,
        parked.secs,
        &none,
        0.0,
        parked.rounds * n as f64 / ROUNDS_PER_HOUR,
    );
    keeper
        .0
        .retain(|(_, api), _| matches!(api.as_str(), "SendTaskHeartbeat" | "Query"));
    // What a round costs with nothing parked, an hour of rounds at the defaults.
    let mut keeper_idle = empty.calls.per(
        &none,
        &none,
        0.0,
        &none,
        0.0,
        empty.rounds / ROUNDS_PER_HOUR,
    );
    keeper_idle.0.retain(|(_, api), _| api == "Query");
    // The repair loop's calls per pass, with the parked ones running; its heartbeats are
    // those the keeper did not send.
    let mut repair = parked
        .calls
        .per(&none, &none, 0.0, &none, 0.0, parked.passes);
    repair.0.retain(|(_, api), _| {
        matches!(
            api.as_str(),
            "ListExecutions" | "DescribeExecution" | "Scan"
        )
    });
    let repair_heartbeats =
        (parked.calls.sfn_calls("SendTaskHeartbeat") - parked.beats).max(0.0) / parked.passes;
    drop(client);
    blocking(|| drop(b.stop()));

    Ok(report(Figures {
        n,
        approved_n,
        per_poll,
        small,
        approved,
        keeper,
        keeper_idle,
        repair,
        repair_heartbeats,
        small_transitions,
        approved_transitions,
    }))
}

struct Figures {
    n: u64,
    approved_n: u64,
    per_poll: Tally,
    small: Tally,
    approved: Tally,
    /// Per parked approval per hour at the defaults.
    keeper: Tally,
    /// A replica's keeper with nothing parked, per hour at the defaults.
    keeper_idle: Tally,
    repair: Tally,
    repair_heartbeats: f64,
    small_transitions: f64,
    approved_transitions: f64,
}

fn fmt(x: f64) -> String {
    match x {
        0.0 => "—".to_owned(),
        x if x >= 100.0 => format!("{x:.0}"),
        x if x >= 10.0 => format!("{x:.1}"),
        x => format!("{x:.2}"),
    }
}

fn report(f: Figures) -> Report {
    let mut small = f.small.clone();
    small.0.insert(
        ("Step Functions", "(state transitions)".to_owned()),
        (f.small_transitions, f.small_transitions),
    );
    let mut approved = f.approved.clone();
    approved.0.insert(
        ("Step Functions", "(state transitions)".to_owned()),
        (f.approved_transitions, f.approved_transitions),
    );
    let mut apis: Vec<Api> = Vec::new();
    for t in [&small, &approved, &f.keeper, &f.per_poll] {
        for api in t.0.keys() {
            if !apis.contains(api) {
                apis.push(api.clone());
            }
        }
    }
    apis.sort();
    let get = |t: &Tally, api: &Api| t.0.get(api).map_or(0.0, |c| c.0);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n## bench quota: AWS calls per unit of work, beside AWS's default quotas\n\n\
         Counted through a proxy in front of `fulfillment engine` (Step Functions) and moto \
         (DynamoDB); {} small sagas, {} approved, {} status polls, {} parked approvals. Quotas: \
         bucket / refill a second, large regions (us-east-1, us-west-2, eu-west-1), other \
         regions in brackets. \"sagas/s\": the refill over the calls per small saga.\n",
        f.n, f.approved_n, f.n, f.n
    );
    let _ = writeln!(
        out,
        "| service | API | per small saga | per approved saga | per parked approval per hour | per status poll | default quota | small sagas/s at quota |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|");
    let mut binding: Option<(String, f64, f64)> = None;
    for api in &apis {
        let (service, name) = api;
        let per_saga = get(&small, api);
        let (quota, at_quota) = match (*service, sfn_quota(name)) {
            ("Step Functions", Some(q)) => {
                let at = (per_saga > 0.0).then(|| q.refill / per_saga);
                if let Some(at) = at {
                    if binding.as_ref().is_none_or(|b| at < b.1) {
                        binding = Some((name.clone(), at, q.other_refill / per_saga));
                    }
                }
                (
                    format!(
                        "{:.0} / {:.0} ({:.0} / {:.0})",
                        q.bucket, q.refill, q.other_bucket, q.other_refill
                    ),
                    at.map_or("—".to_owned(), |a| {
                        format!("{a:.0} ({:.0})", q.other_refill / per_saga)
                    }),
                )
            }
            _ => ("table units (below)".to_owned(), "—".to_owned()),
        };
        let _ = writeln!(
            out,
            "| {service} | {name} | {} | {} | {} | {} | {quota} | {at_quota} |",
            fmt(per_saga),
            fmt(get(&approved, api)),
            fmt(get(&f.keeper, api)),
            fmt(get(&f.per_poll, api)),
        );
    }
    let (reads, writes) = f.small.dynamodb_units();
    let dynamo_at = DYNAMODB_TABLE_UNITS / reads.max(writes).max(f64::MIN_POSITIVE);
    let _ = writeln!(
        out,
        "\nDynamoDB per small saga: at least {reads:.1} read and {writes:.1} write request units \
         (an item read up to 4 KB or written up to 1 KB each, a transaction's items twice): an \
         on-demand table's default {DYNAMODB_TABLE_UNITS:.0} a second each allows about \
         {dynamo_at:.0} sagas/s (fewer when items are larger); one SKU's stock item, written by \
         each reservation, takes at most 1,000 write units a second."
    );
    let _ = writeln!(
        out,
        "The keeper of a replica with nothing parked, per hour at the defaults: {} (a page of \
         each of the queue's 17 shards a round), besides its lease renewals (two conditional \
         writes a round per replica, one per shard held).",
        f.keeper_idle
            .0
            .iter()
            .map(|((s, a), c)| format!("{s} {a} {:.0}", c.0))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let repair_list = f
        .repair
        .0
        .iter()
        .map(|((s, a), c)| format!("{s} {a} {:.1}", c.0))
        .collect::<Vec<_>>()
        .join(", ");
    let _ = writeln!(
        out,
        "A repair pass with {} orders running: {repair_list}, SendTaskHeartbeat {:.1} (it used \
         to make a DescribeExecution per running order and a heartbeat per parked approval: {} \
         and {} here).",
        f.n, f.repair_heartbeats, f.n, f.n
    );
    // While a round (heartbeating every other token at the keeper's rate) takes under a
    // fifth of the heartbeat, each token is heartbeaten every other round: up to
    // 2 × rate × heartbeat / 5 parked approvals.
    let parked_at = |rate: f64| 2.0 * rate * DEFAULT_HEARTBEAT_SECS / 5.0;
    let _ = writeln!(
        out,
        "Parked approvals one account keeps at that cost at the default heartbeat (5 min): {:.0} \
         at the keeper's default rate (--approval-keeper-rate 100 a second), {:.0} at \
         SendTaskHeartbeat's whole refill (500 a second); a longer --approval-heartbeat keeps \
         proportionally more.",
        parked_at(100.0),
        parked_at(500.0)
    );
    let (api, at, other) = binding.unwrap_or(("none".to_owned(), f64::INFINITY, f64::INFINITY));
    let _ = writeln!(
        out,
        "Binds first: {api}, at {at:.0} small sagas/s in the large regions ({other:.0} elsewhere)."
    );
    print!("{out}");
    let sfn_calls: f64 = small
        .0
        .iter()
        .filter(|((s, a), _)| *s == "Step Functions" && !a.starts_with('('))
        .map(|(_, c)| c.0)
        .sum();
    let dynamo_calls: f64 = small
        .0
        .iter()
        .filter(|((s, _), _)| *s == "DynamoDB")
        .map(|(_, c)| c.0)
        .sum();
    Report {
        summary: format!(
            "a small saga makes {sfn_calls:.1} Step Functions and {dynamo_calls:.1} DynamoDB \
             calls; binds first: {api} at {at:.0} sagas/s (large regions; {other:.0} elsewhere)"
        ),
        figures: vec![
            Figure::rate("small sagas/s before throttling", at, "/s"),
            Figure::cost("Step Functions calls per small saga", sfn_calls, ""),
            Figure::cost("DynamoDB calls per small saga", dynamo_calls, ""),
        ],
    }
}
