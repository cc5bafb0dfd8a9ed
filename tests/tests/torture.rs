//! The torture test, a target of its own (`cargo test --release --workspace --test torture --
//! --nocapture --test-threads=1`, the `torture` suite of `.ci/run`): the real binary on the
//! embedded default runs a seeded mix of orders (small and large, declined cards, transient and lost-response
//! payment faults, shipment failures, approvals, rejections and expiries, duplicate and
//! conflicting submissions) while it is killed with SIGKILL at random moments and restarted at
//! once on the same database; clients retry what a kill cut off, as real ones would. When every
//! order has ended, a client-side oracle and the service's own audit judge the result.
//!
//! Prints `torture: seed N` first (replay the workload with `TORTURE_SEED=N`; the kills' timing
//! is the machine's) and `torture: N orders, K kills, V violations` last; fails when V > 0.
//!
//! The variants (`variant.rs`) run the same with a real provider's adapter against its fake, or
//! with the AWS backend, behind fault-injecting proxies, and also judge by the provider's own
//! books. Each ends with `torture[<variant>]: N orders, K kills, V violations, R repairs`.

#[path = "torture/audit.rs"]
mod audit;
#[path = "torture/driver.rs"]
mod driver;
#[path = "torture/oracle.rs"]
mod oracle;
#[path = "torture/service.rs"]
mod service;
#[path = "torture/variant.rs"]
mod variant;
#[path = "torture/workload.rs"]
mod workload;

use driver::{Anomalies, Journal};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use reqwest::{Method, StatusCode};
use serde_json::json;
use service::Service;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use variant::{Kind, Variant};
use workload::Workload;

const ORDERS: usize = 300;
/// The AWS variant's orders: its DynamoDB (moto) serves one request at a time.
const AWS_ORDERS: usize = 150;
const SKUS: usize = 30;
/// Kills go on until both this many happened and every order was placed.
const MIN_KILLS: u32 = 24;
/// The variants' kills (the faults they inject are their point).
const VARIANT_MIN_KILLS: u32 = 12;
/// How long the orders may take to end after the last kill. A task handed to a killed process
/// comes back after its heartbeat timeout (20 s) and a retry's back-off.
const SETTLE: Duration = Duration::from_secs(150);
/// The service's approval window: short, so that orders nobody decides expire within the run.
const APPROVAL_WINDOW: &str = "6s";
/// How soon an approval task lost with a killed process is handed out again.
const APPROVAL_HEARTBEAT: &str = "2s";
/// The most violation lines printed (all are counted).
const SHOWN: usize = 60;

fn seed() -> u64 {
    match std::env::var("TORTURE_SEED") {
        Ok(s) => s
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("TORTURE_SEED must be an unsigned integer, not {s:?}")),
        Err(_) => rand::random(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_order_ends_consistently_through_random_sigkills() {
    torture(Kind::Plain).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_charge_is_kept_or_refunded_once_through_a_faulty_stripe_and_sigkills() {
    torture(Kind::Stripe).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_label_is_bought_at_most_once_through_a_faulty_easypost_and_sigkills() {
    torture(Kind::EasyPost).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_order_ends_consistently_on_aws_through_faulty_endpoints_and_sigkills() {
    torture(Kind::Aws).await;
}

async fn torture(kind: Kind) {
    let seed = seed();
    let tag = kind.tag();
    println!("{tag}: seed {seed}");
    let (orders, min_kills) = match kind {
        Kind::Plain => (ORDERS, MIN_KILLS),
        Kind::Aws => (AWS_ORDERS, VARIANT_MIN_KILLS),
        _ => (ORDERS, VARIANT_MIN_KILLS),
    };
    let (variant, workload) =
        Variant::start(kind, seed, Workload::generate(seed, orders, SKUS)).await;
    if !variant.late.is_empty() {
        println!("{tag}: charges landing late: {:?}", variant.late);
    }
    let workload = Arc::new(workload);
    variant.faults(false);
    let launcher = variant.launcher();
    let service = Arc::new(tokio::task::block_in_place(|| {
        Service::start(
            launcher,
            &[
                "--approval-timeout",
                APPROVAL_WINDOW,
                "--approval-heartbeat",
                APPROVAL_HEARTBEAT,
            ],
        )
    }));
    for (sku, units) in &workload.stock {
        let price = workload.prices[sku];
        let body = json!({ "available": units, "price": { "cents": price, "currency": "EUR" } });
        let stocked = service
            .call(Method::PUT, &format!("/inventory/{sku}"), Some(&body))
            .await;
        assert_eq!(stocked.status, StatusCode::OK, "{}", stocked.text);
    }
    variant.faults(true);

    let journal = Journal::default();
    let anomalies = Anomalies::default();
    let (deciding_done, watching_done) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (waves_tx, mut waves) = tokio::sync::mpsc::unbounded_channel();
    let placing = tokio::spawn(driver::place_all(
        service.clone(),
        workload.clone(),
        journal.clone(),
        seed,
        waves_tx,
    ));
    let deciding = tokio::spawn(driver::decide_all(
        service.clone(),
        workload.clone(),
        journal.clone(),
        anomalies.clone(),
        deciding_done.clone(),
    ));
    let watching = tokio::spawn(driver::watch_all(
        service.clone(),
        journal.clone(),
        anomalies.clone(),
        watching_done.clone(),
    ));

    // A kill a random moment into most waves of orders (while requests, steps and their
    // answers are in flight), then, once every order is placed, at random until there were
    // enough.
    let started = Instant::now();
    let mut rng = StdRng::seed_from_u64(seed.wrapping_add(2));
    loop {
        let aimed = match waves.recv().await {
            Some(()) if rng.random_bool(0.2) => continue,
            Some(()) if rng.random_bool(0.3) => rng.random_range(0..30),
            Some(()) => rng.random_range(0..600),
            None if service.kills() < min_kills => rng.random_range(500..2_000),
            None => break,
        };
        tokio::time::sleep(Duration::from_millis(aimed)).await;
        let victim = service.clone();
        tokio::task::spawn_blocking(move || victim.kill_and_restart())
            .await
            .expect("a restart");
        let kills = service.kills();
        if kills % 5 == 0 {
            progress(&tag, &journal, kills, started);
        }
    }
    placing.await.expect("the placements");
    watching_done.store(true, Ordering::SeqCst);
    watching.await.expect("the watcher");
    println!(
        "{tag}: kills stopped after {:.0?}; waiting for every order to end",
        started.elapsed()
    );

    let until = Instant::now() + SETTLE;
    while driver::watch_once(&service, &journal, &anomalies).await > 0 && Instant::now() < until {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    deciding_done.store(true, Ordering::SeqCst);
    deciding.await.expect("the operator");
    println!("{tag}: settled after {:.0?}", started.elapsed());
    variant.faults(false);
    variant
        .settle(&workload, &journal.lock().unwrap().clone())
        .await;

    let mut violations = judge(&tag, &service, &workload, &journal).await;
    violations.extend(variant.books(&workload, &journal.lock().unwrap()));
    violations.extend(anomalies.lock().unwrap().drain(..));
    violations.extend(service.stop());
    violations.extend(service.panics());
    let audit = audit::run(variant.audit());
    let (n, kills) = (workload.plans.len(), service.kills());
    let v = violations.len() + audit.violations();

    for line in violations.iter().take(SHOWN) {
        println!("violation: {line}");
    }
    if violations.len() > SHOWN {
        println!("… and {} more", violations.len() - SHOWN);
    }
    for line in &audit.listed {
        println!("{line}");
    }
    for problem in &audit.problems {
        println!("violation: {problem}");
    }
    if let Some(summary) = &audit.summary {
        println!("{summary}");
    }
    for line in variant.injected() {
        println!("{line}");
    }
    let repairs = service.repairs();
    if kind == Kind::Plain {
        println!("torture: {n} orders, {kills} kills, {v} violations");
    } else {
        println!("{tag}: repairs {repairs:?}");
        println!(
            "{tag}: {n} orders, {kills} kills, {v} violations, {} repairs",
            repairs.total()
        );
    }
    assert_eq!(v, 0, "seed {seed}: {v} violations (listed above)");
}

/// The client-side oracle over every order and every SKU; also prints how the orders ended
/// and how hard the kills hit.
async fn judge(
    tag: &str,
    service: &Service,
    workload: &Workload,
    journal: &Journal,
) -> Vec<String> {
    let (mut violations, shipped) = judge_orders(tag, workload, &journal.lock().unwrap());

    // How hard the kills hit: tasks a killed process had taken and never answered come back
    // after their heartbeat lapses. A lapse is recorded as `States.Timeout`, as on AWS; one
    // the state's retrier re-issued is followed at once by the task scheduled again.
    let mut reissued = 0;
    for plan in &workload.plans {
        let history = service
            .get(&format!("/orders/{}/history?maxResults=1000", plan.id))
            .await
            .json();
        let events: Vec<&serde_json::Value> =
            history["events"].as_array().into_iter().flatten().collect();
        reissued += events
            .windows(2)
            .filter(|w| w[0]["type"] == "ActivityTimedOut" && w[1]["type"] == "ActivityScheduled")
            .count();
    }
    println!(
        "{tag}: {} requests cut off by kills and sent again, {reissued} tasks re-issued after \
         a kill or a lost answer",
        service.cut_off()
    );

    let mut levels = BTreeMap::new();
    for sku in workload.stock.keys() {
        let level = service.get(&format!("/inventory/{sku}")).await;
        levels.insert(sku.clone(), level.json());
    }
    violations.extend(oracle::check_stock(workload, &shipped, &levels));
    violations
}

/// Each order's violations, and the units per SKU the completed orders shipped.
fn judge_orders(
    tag: &str,
    workload: &Workload,
    journal: &BTreeMap<String, driver::Record>,
) -> (Vec<String>, BTreeMap<String, u64>) {
    let mut violations = Vec::new();
    let mut shipped: BTreeMap<String, u64> = BTreeMap::new();
    let mut ends: BTreeMap<String, usize> = BTreeMap::new();
    for plan in &workload.plans {
        let record = journal.get(&plan.id);
        violations.extend(oracle::check_order(plan, record, workload));
        let Some(view) = record.and_then(|r| r.last.as_ref()) else {
            continue;
        };
        let end = view["failure"]["error"]
            .as_str()
            .or(view["status"].as_str())
            .unwrap_or("?");
        *ends.entry(end.to_owned()).or_default() += 1;
        if view["status"] == "COMPLETED" {
            for (sku, units) in oracle::ordered(plan) {
                *shipped.entry(sku).or_default() += units;
            }
        }
    }
    println!("{tag}: orders ended {ends:?}");
    (violations, shipped)
}

fn progress(tag: &str, journal: &Journal, kills: u32, started: Instant) {
    let journal = journal.lock().unwrap();
    let placed = journal.values().filter(|r| r.accepted()).count();
    let ended = journal.values().filter(|r| r.settled()).count();
    println!(
        "{tag}: {kills} kills in {:.0?}; {placed} orders placed, {ended} ended",
        started.elapsed()
    );
}
