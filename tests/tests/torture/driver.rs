//! The clients of the torture run: placing each order (with its duplicates, late replay and
//! conflicting resubmission), the operator deciding the large ones as they show up in
//! `GET /approvals`, and a watcher reading every order's status view until it ends. Every
//! answer is kept in the journal the oracle judges.

use super::service::{Answer, Service};
use super::workload::{Plan, Workload};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

/// Everything the clients saw of one order.
#[derive(Debug, Clone, Default)]
pub struct Record {
    /// The answers to `POST /orders` with the order's own body.
    pub placements: Vec<Answer>,
    /// The answer to the conflicting resubmission, if one was sent.
    pub conflicting: Option<Answer>,
    /// Each decision sent and its answer.
    pub decisions: Vec<(&'static str, Answer)>,
    /// Every charge id any status view showed.
    pub charge_ids: BTreeSet<String>,
    /// The last status view read.
    pub last: Option<Value>,
}

impl Record {
    pub fn accepted(&self) -> bool {
        self.placements
            .iter()
            .any(|a| a.status == StatusCode::ACCEPTED)
    }

    pub fn settled(&self) -> bool {
        self.last.as_ref().is_some_and(settled)
    }
}

/// Whether a status view shows the order ended and its execution too.
pub fn settled(view: &Value) -> bool {
    blackbox::is_terminal(view["status"].as_str()) && view["executionStatus"] != "RUNNING"
}

pub type Journal = Arc<Mutex<BTreeMap<String, Record>>>;

/// Unexpected answers to requests that have no order of their own (status reads, stock).
pub type Anomalies = Arc<Mutex<Vec<String>>>;

/// Places every order, in waves of 6–14 a random 1.2–2.8 s apart; tells `waves` as each
/// wave goes out (the kills aim at the work it makes).
pub async fn place_all(
    service: Arc<Service>,
    workload: Arc<Workload>,
    journal: Journal,
    seed: u64,
    waves: mpsc::UnboundedSender<()>,
) {
    let mut rng = StdRng::seed_from_u64(seed.wrapping_add(1));
    let mut running = JoinSet::new();
    let mut next = 0;
    while next < workload.plans.len() {
        let wave = rng.random_range(6..=14).min(workload.plans.len() - next);
        for plan in &workload.plans[next..next + wave] {
            let later = Duration::from_millis(rng.random_range(500..5_000));
            running.spawn(place(service.clone(), plan.clone(), journal.clone(), later));
        }
        next += wave;
        let _ = waves.send(());
        tokio::time::sleep(Duration::from_millis(rng.random_range(1_200..2_800))).await;
    }
    while let Some(done) = running.join_next().await {
        done.expect("a placement task");
    }
}

async fn place(service: Arc<Service>, plan: Plan, journal: Journal, later: Duration) {
    let body = Arc::new(plan.body());
    let mut sends = JoinSet::new();
    for _ in 0..=plan.duplicates {
        let (service, body) = (service.clone(), body.clone());
        sends.spawn(async move { service.call(Method::POST, "/orders", Some(&body)).await });
    }
    let mut accepted = false;
    while let Some(answer) = sends.join_next().await {
        let answer = answer.expect("a placement");
        accepted |= answer.status == StatusCode::ACCEPTED;
        with_record(&journal, &plan.id, |r| r.placements.push(answer));
    }
    if !accepted {
        return;
    }
    if plan.conflicting {
        let other = service
            .call(Method::POST, "/orders", Some(&plan.conflicting_body()))
            .await;
        with_record(&journal, &plan.id, |r| r.conflicting = Some(other));
    }
    if plan.replay_later {
        tokio::time::sleep(later).await;
        let again = service.call(Method::POST, "/orders", Some(&body)).await;
        with_record(&journal, &plan.id, |r| r.placements.push(again));
    }
}

/// Runs `f` on the order's record (made empty the first time).
fn with_record<R>(journal: &Journal, id: &str, f: impl FnOnce(&mut Record) -> R) -> R {
    f(journal.lock().unwrap().entry(id.to_owned()).or_default())
}

/// The operator: every 300 ms, lists the waiting orders and sends each its planned decisions
/// (once per order), until `done`.
pub async fn decide_all(
    service: Arc<Service>,
    workload: Arc<Workload>,
    journal: Journal,
    anomalies: Anomalies,
    done: Arc<AtomicBool>,
) {
    let plans: BTreeMap<&str, &Plan> = workload.plans.iter().map(|p| (p.id.as_str(), p)).collect();
    let mut seen = HashSet::new();
    let mut running = JoinSet::new();
    while !done.load(Ordering::SeqCst) {
        let pending = service
            .call(Method::GET, "/approvals?limit=1000", None)
            .await;
        if pending.status != StatusCode::OK {
            anomalies.lock().unwrap().push(format!(
                "GET /approvals: {} {}",
                pending.status, pending.text
            ));
        }
        let body = pending.json();
        for item in body["items"].as_array().into_iter().flatten() {
            let Some(id) = item["orderId"].as_str() else {
                continue;
            };
            if !seen.insert(id.to_owned()) {
                continue;
            }
            let Some(decisions) = plans.get(id).and_then(|p| p.decisions.clone()) else {
                anomalies
                    .lock()
                    .unwrap()
                    .push(format!("{id} waits for approval, yet it is no large order"));
                continue;
            };
            let (service, journal, id) = (service.clone(), journal.clone(), id.to_owned());
            running.spawn(async move {
                let path = format!("/orders/{id}/approval");
                if decisions.concurrent {
                    let mut all = JoinSet::new();
                    for decision in decisions.sequence {
                        let (service, path) = (service.clone(), path.clone());
                        all.spawn(async move {
                            let body = json!({ "decision": decision });
                            (
                                decision,
                                service.call(Method::POST, &path, Some(&body)).await,
                            )
                        });
                    }
                    while let Some(answer) = all.join_next().await {
                        let answer = answer.expect("a decision");
                        with_record(&journal, &id, |r| r.decisions.push(answer));
                    }
                } else {
                    for decision in decisions.sequence {
                        let body = json!({ "decision": decision });
                        let answer = service.call(Method::POST, &path, Some(&body)).await;
                        with_record(&journal, &id, |r| r.decisions.push((decision, answer)));
                    }
                }
            });
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    while let Some(done) = running.join_next().await {
        done.expect("a decision task");
    }
}

/// Reads the status view of every accepted order that has not ended, 16 at a time, once.
/// Returns how many have not ended.
pub async fn watch_once(service: &Arc<Service>, journal: &Journal, anomalies: &Anomalies) -> usize {
    let open: Vec<String> = journal
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, r)| r.accepted() && !r.settled())
        .map(|(id, _)| id.clone())
        .collect();
    for chunk in open.chunks(16) {
        let mut reads = JoinSet::new();
        for id in chunk {
            let (service, id) = (service.clone(), id.clone());
            reads.spawn(async move {
                let answer = service.get(&format!("/orders/{id}/status")).await;
                (id, answer)
            });
        }
        while let Some(read) = reads.join_next().await {
            let (id, answer) = read.expect("a status read");
            if answer.status != StatusCode::OK {
                anomalies.lock().unwrap().push(format!(
                    "GET /orders/{id}/status: {} {}",
                    answer.status, answer.text
                ));
                continue;
            }
            let view = answer.json();
            with_record(journal, &id, |r| {
                if let Some(charge) = view["payment"]["chargeId"].as_str() {
                    r.charge_ids.insert(charge.to_owned());
                }
                r.last = Some(view);
            });
        }
    }
    journal
        .lock()
        .unwrap()
        .values()
        .filter(|r| r.accepted() && !r.settled())
        .count()
}

/// Watches until `done`, a read of every open order about once a second.
pub async fn watch_all(
    service: Arc<Service>,
    journal: Journal,
    anomalies: Anomalies,
    done: Arc<AtomicBool>,
) {
    while !done.load(Ordering::SeqCst) {
        watch_once(&service, &journal, &anomalies).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
