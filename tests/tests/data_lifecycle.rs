//! The data's life, against the real binary: a finished order's execution past the retention
//! (its history answers 410, its record stays, its books stay clean), and a backup taken under
//! load restored into a fresh directory (the two files agree, every order the backup holds
//! finishes there, the audit is clean, and a client's retry places again what the backup lost).

use blackbox::{
    Audit, DEADLINE, Db, Server, TOKEN, audit_command, binary, client, is_terminal, order,
    serve_command,
};
use reqwest::{Method, StatusCode};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The service on `db` with `extra` flags; one key sends the whole load, so no rate limit.
fn serve_with(db: &Db, extra: &[&str]) -> Server {
    let mut cmd = serve_command(db);
    cmd.arg("--operator-token")
        .arg(TOKEN)
        .args(["--rate-limit", "0"])
        .args(extra);
    Server::spawn(cmd)
}

/// `fulfillment <words…>` with no `FULFILLMENT_*` variable from the test's environment.
fn fulfillment(words: &[&str]) -> Output {
    let mut cmd = Command::new(binary());
    cmd.args(words);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("FULFILLMENT_") {
            cmd.env_remove(key);
        }
    }
    cmd.output().expect("the binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_orders_history_is_gone_past_the_retention_and_its_record_stays() {
    let db = Db::new();
    let server = serve_with(&db, &["--retention", "1s"]);
    server.stock("book", 100, 1_000).await;
    server.stock("piano", 1, 450_000).await;
    let placed = server
        .place(&order("kept-small", "book", 2, 1_000, "pm_card_visa"))
        .await;
    assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
    let parked = server
        .place(&order("kept-large", "piano", 1, 450_000, "pm_card_visa"))
        .await;
    assert_eq!(parked.status, StatusCode::ACCEPTED, "{}", parked.text);
    let finished = server.ends("kept-small", "COMPLETED", "SUCCEEDED").await;
    server.reaches("kept-large", "AWAITING_APPROVAL").await;

    // Pruned within a few passes of the pruner (a tenth of the retention apart).
    let until = Instant::now() + DEADLINE;
    let gone = loop {
        let r = server
            .request(Method::GET, "/orders/kept-small/history", None)
            .await;
        if r.status != StatusCode::OK {
            break r;
        }
        assert!(Instant::now() < until, "the history was never pruned");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(gone.status, StatusCode::GONE, "{}", gone.text);
    assert_eq!(gone.problem().as_deref(), Some("history-pruned"));
    assert!(
        gone.json()["detail"]
            .as_str()
            .is_some_and(|d| d.contains("/orders/kept-small/status")),
        "the answer says where the record is: {}",
        gone.text
    );

    // The record is whole: status, prices, charge and shipment as before the pruning.
    let now = server.status("kept-small").await;
    for field in [
        "status",
        "amountCents",
        "payment",
        "shipment",
        "reservation",
        "executionStatus",
    ] {
        assert_eq!(now[field], finished[field], "{field} of {now}");
    }
    assert!(
        !now["payment"].is_null() && !now["shipment"].is_null(),
        "{now}"
    );

    // A parked order is running: kept however long it waits, and it still finishes.
    let history = server.history("kept-large").await;
    assert!(!history.is_empty());
    let approved = server.decide("kept-large", "approve").await;
    assert_eq!(approved.status, StatusCode::OK, "{}", approved.text);
    server.reaches("kept-large", "COMPLETED").await;
    let metrics = server.metrics().await;
    assert!(
        metrics.lines().any(
            |l| l.starts_with("fulfillment_engine_executions_pruned_total ") && !l.ends_with(" 0")
        ),
        "the pruning is counted:\n{metrics}"
    );
    server.stop();

    let audit = Audit::run(audit_command(&db));
    assert_eq!(
        audit.code,
        Some(0),
        "pruned executions leave the books clean: {}{}",
        audit.stdout,
        audit.stderr
    );
}

/// Payments and addresses the load cycles through: successes, retried failures, a decline and
/// an undeliverable address (compensated: refund and release).
const MIXED: [(&str, &str); 5] = [
    ("pm_card_visa", "22201"),
    ("pm_card_unavailable_once", "22201"),
    ("pm_card_chargeDeclined", "22201"),
    ("pm_card_visa", "00000"),
    ("pm_card_visa", "99999"),
];

/// Clients placing orders until `stop`: small ones of every kind above, and every tenth a large
/// one that waits for approval. Returns every id that was answered 202, in order.
fn load(
    base: String,
    stop: Arc<AtomicBool>,
    accepted: Arc<Mutex<Vec<String>>>,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..4)
        .map(|c| {
            let (base, stop, accepted) = (base.clone(), stop.clone(), accepted.clone());
            tokio::spawn(async move {
                let http = client();
                for n in 0.. {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let id = format!("bk-{c}-{n}");
                    let body = if n % 10 == 9 {
                        order(&id, "piano", 1, 450_000, "pm_card_visa")
                    } else {
                        let (payment, postal) = MIXED[n % MIXED.len()];
                        let mut body = order(&id, "book", 1, 1_000, payment);
                        body["shippingAddress"]["postalCode"] = postal.into();
                        body
                    };
                    let sent = http
                        .post(format!("{base}/orders"))
                        .bearer_auth(TOKEN)
                        .json(&body)
                        .send()
                        .await;
                    if let Ok(r) = sent
                        && r.status() == StatusCode::ACCEPTED
                    {
                        accepted.lock().unwrap().push(id);
                    }
                    // A steady stream (a few hundred orders a second in all), not a flood:
                    // every order of the run is polled to its end afterwards.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            })
        })
        .collect()
}

/// The order ids a store file holds, and the execution names its engine file holds.
fn ids_in(store: &Path, engine: &Path) -> (BTreeSet<String>, BTreeSet<String>) {
    let read = |path: &Path, sql: &str| -> BTreeSet<String> {
        let conn =
            rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
                .unwrap();
        let mut stmt = conn.prepare(sql).unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    (
        read(store, "SELECT order_id FROM orders"),
        read(engine, "SELECT name FROM executions"),
    )
}

/// The body of order `id` as the load placed it (for a client's retry).
fn body_of(id: &str) -> Value {
    let n: usize = id.rsplit('-').next().unwrap().parse().unwrap();
    if n % 10 == 9 {
        order(id, "piano", 1, 450_000, "pm_card_visa")
    } else {
        let (payment, postal) = MIXED[n % MIXED.len()];
        let mut body = order(id, "book", 1, 1_000, payment);
        body["shippingAddress"]["postalCode"] = postal.into();
        body
    }
}

/// Approves every order of `ids` that waits for approval until all are terminal.
async fn finish_all(server: &Server, ids: &[String]) {
    let until = Instant::now() + DEADLINE * 3;
    let mut left: Vec<String> = ids.to_vec();
    while !left.is_empty() {
        let mut still = Vec::new();
        for id in left {
            let s = server.status(&id).await;
            match s["status"].as_str() {
                Some("AWAITING_APPROVAL") => {
                    let r = server.decide(&id, "approve").await;
                    assert!(
                        r.status == StatusCode::OK || r.status == StatusCode::CONFLICT,
                        "{id}: {}",
                        r.text
                    );
                    still.push(id);
                }
                status if is_terminal(status) && s["executionStatus"] != "RUNNING" => {}
                _ => still.push(id),
            }
        }
        assert!(
            Instant::now() < until,
            "{} orders never finished, e.g. {:?}",
            still.len(),
            still.first()
        );
        left = still;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backup_under_load_restores_to_a_service_that_finishes_every_order_it_holds() {
    let live = Db::new();
    let server = serve_with(&live, &[]);
    server.stock("book", 1_000_000, 1_000).await;
    server.stock("piano", 1_000, 450_000).await;
    let stop = Arc::new(AtomicBool::new(false));
    let accepted = Arc::new(Mutex::new(Vec::new()));
    let clients = load(server.base.clone(), stop.clone(), accepted.clone());
    let count = || accepted.lock().unwrap().len();
    let until = Instant::now() + DEADLINE;
    while count() < 300 {
        assert!(
            Instant::now() < until,
            "the load placed only {} orders",
            count()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // The backup, while the clients go on.
    let backups = tempfile::tempdir().unwrap();
    let dir = backups.path().join("b1");
    let (store, to) = (live.path(), dir.clone());
    let made = tokio::task::spawn_blocking(move || {
        fulfillment(&[
            "backup",
            "--db",
            store.to_str().unwrap(),
            "--to",
            to.to_str().unwrap(),
        ])
    })
    .await
    .unwrap();
    assert!(made.status.success(), "backup: {}", text(&made.stderr));
    assert!(
        text(&made.stdout).starts_with("backup: "),
        "{}",
        text(&made.stdout)
    );
    // Orders accepted after the backup: what a restore loses.
    let after = count() + 40;
    while count() < after {
        assert!(Instant::now() < until, "the load stalled");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, Ordering::SeqCst);
    for c in clients {
        c.await.unwrap();
    }
    server.stop();
    let placed: Vec<String> = accepted.lock().unwrap().clone();

    // A second backup into the same directory is refused; so is a restore over a store.
    let again = fulfillment(&[
        "backup",
        "--db",
        live.path().to_str().unwrap(),
        "--to",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(again.status.code(), Some(2), "{}", text(&again.stderr));
    let over = fulfillment(&[
        "restore",
        "--from",
        dir.to_str().unwrap(),
        "--db",
        live.path().to_str().unwrap(),
    ]);
    assert_eq!(over.status.code(), Some(2), "{}", text(&over.stderr));

    let fresh = Db::new();
    let restored = fulfillment(&[
        "restore",
        "--from",
        dir.to_str().unwrap(),
        "--db",
        fresh.path().to_str().unwrap(),
    ]);
    assert!(
        restored.status.success(),
        "restore: {}",
        text(&restored.stderr)
    );

    // The two files agree: every execution has its order (the store is never behind).
    let engine_file = fresh.dir().join("fulfillment.engine.db");
    let (orders, executions) = ids_in(&fresh.path(), &engine_file);
    let orphans: Vec<_> = executions.difference(&orders).collect();
    assert!(
        orphans.is_empty(),
        "executions without their order: {orphans:?}"
    );
    let lost: Vec<String> = placed
        .iter()
        .filter(|id| !orders.contains(*id))
        .cloned()
        .collect();
    eprintln!(
        "{} orders placed, {} in the backup, {} lost",
        placed.len(),
        orders.len(),
        lost.len()
    );
    assert!(
        lost.len() >= 40,
        "the orders accepted after the backup are not in it ({} lost of {})",
        lost.len(),
        placed.len()
    );

    // The restored service finishes every order the backup holds.
    let server = serve_with(&fresh, &[]);
    let held: Vec<String> = orders.iter().cloned().collect();
    finish_all(&server, &held).await;
    // A client's retry places again what the restore lost, and it finishes too.
    for id in &lost {
        let r = server.place(&body_of(id)).await;
        assert_eq!(r.status, StatusCode::ACCEPTED, "{id}: {}", r.text);
    }
    finish_all(&server, &lost).await;
    server.stop();
    let audit = Audit::run(audit_command(&fresh));
    assert_eq!(
        audit.code,
        Some(0),
        "the restored books are clean: {}{}",
        audit.stdout,
        audit.stderr
    );
}
