//! `fulfillment audit` against the real binary on the embedded backend: beside the running
//! service, it finds nothing wrong in a store the saga kept (an order still awaiting a decision
//! included), and names each thing tampered with (straight in the SQLite files, as a bug or a
//! hand could).

use blackbox::{Audit, DEADLINE, Db, Server, TOKEN, audit_command, client, order, serve_command};
use reqwest::StatusCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Runs the saga's paths to their ends: a small order, a large one approved, a declined card
/// and a large one rejected (charged, then refunded); and one more large order left waiting
/// for a decision (its token parked, its execution running).
async fn run_the_saga(server: &Server) {
    server.stock("audit-book", 10, 1_500).await;
    server.stock("audit-piano", 3, 450_000).await;
    for placed in [
        order("audit-small", "audit-book", 2, 1_500, "pm_card_visa"),
        order("audit-large", "audit-piano", 1, 450_000, "pm_card_visa"),
        order(
            "audit-declined",
            "audit-book",
            1,
            1_500,
            "pm_card_chargeDeclined",
        ),
        order("audit-rejected", "audit-piano", 1, 450_000, "pm_card_visa"),
        order("audit-parked", "audit-piano", 1, 450_000, "pm_card_visa"),
    ] {
        let r = server.place(&placed).await;
        assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text);
    }
    for (id, decision) in [("audit-large", "approve"), ("audit-rejected", "reject")] {
        server.reaches(id, "AWAITING_APPROVAL").await;
        let r = server.decide(id, decision).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    }
    server.ends("audit-small", "COMPLETED", "SUCCEEDED").await;
    server.ends("audit-large", "COMPLETED", "SUCCEEDED").await;
    server.ends("audit-declined", "CANCELLED", "FAILED").await;
    server.ends("audit-rejected", "CANCELLED", "FAILED").await;
    server.reaches("audit-parked", "AWAITING_APPROVAL").await;
}

/// What a bug or a hand could do to the files, one thing per invariant.
fn tamper(db: &Db) {
    let conn = rusqlite::Connection::open(db.path()).expect("open the store");
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .expect("busy timeout");
    conn.execute_batch(
        "UPDATE stock SET available = available + 3 WHERE sku = 'audit-book';
         DELETE FROM sandbox_refunds WHERE order_id = 'audit-rejected';
         INSERT INTO sandbox_charges (idempotency_key, charge_id, order_id, amount_cents, \
             currency, payment_method, created_at) \
             VALUES ('manual:audit-small', 'ch_second', 'audit-small', 3000, 'EUR', \
             'pm_card_visa', '2025-01-01T00:00:00.000000000Z');
         UPDATE orders SET status = 'CHARGED', \
             execution_arn = 'arn:aws:states:us-east-1:123456789012:execution:nowhere:audit-large' \
             WHERE order_id = 'audit-large';
         UPDATE orders SET approval_task_token = 'a-token-no-task-has' \
             WHERE order_id = 'audit-parked';",
    )
    .expect("tamper");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_passes_a_kept_store_and_names_everything_tampered_with() {
    let db = Db::new();
    let server = Server::start(&db);
    run_the_saga(&server).await;

    let clean = Audit::run(audit_command(&db));
    assert_eq!(clean.code, Some(0), "{clean:?}");
    assert_eq!(
        clean.stdout, "audit: 5 orders, 2 SKUs, 4 charges, 0 violations\n",
        "only the summary on stdout (logs go to stderr): {clean:?}"
    );

    tamper(&db);
    let tampered = Audit::run(audit_command(&db));
    assert_eq!(tampered.code, Some(1), "{tampered:?}");
    assert_eq!(
        tampered.summary(),
        "audit: 5 orders, 2 SKUs, 5 charges, 5 violations",
        "{tampered:?}"
    );
    let violations = tampered.violations();
    assert_eq!(violations.len(), 5, "{violations:#?}");
    for (subject, says) in [
        ("order audit-large", "CHARGED but its execution"),
        (
            "order audit-parked",
            "parked approval token is not an open task",
        ),
        ("order audit-rejected", "CANCELLED but its charge"),
        ("order audit-small", "charged 2 times at the provider"),
        ("sku audit-book", "but 10 were stocked"),
    ] {
        let prefix = format!("violation: {subject}: ");
        assert!(
            violations
                .iter()
                .any(|v| v.starts_with(&prefix) && v.contains(says)),
            "no {subject} line saying {says:?}: {violations:#?}"
        );
    }
    assert_eq!(
        tampered.stdout.lines().count(),
        6,
        "violations and the summary only: {}",
        tampered.stdout
    );
    server.stop();
}

/// A charge that landed after its order's compensation looked for it (the order CANCELLED, the
/// money kept): plain `audit` only names it, and again (it changes nothing); `audit --repair`
/// refunds it, says so, and leaves nothing for the next audit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_charge_is_named_by_the_audit_and_refunded_by_audit_repair() {
    let db = Db::new();
    let server = Server::start(&db);
    run_the_saga(&server).await;
    // --repair opens the engine, whose lock the running service holds.
    server.stop();
    let conn = rusqlite::Connection::open(db.path()).expect("open the store");
    conn.execute(
        "INSERT INTO sandbox_charges (idempotency_key, charge_id, order_id, amount_cents, \
             currency, payment_method, created_at) \
         VALUES ('late:audit-declined', 'ch_late', 'audit-declined', 1500, 'EUR', \
             'pm_card_visa', '2025-01-01T00:00:00.000000000Z')",
        [],
    )
    .expect("a late charge");
    drop(conn);
    for _ in 0..2 {
        let found = Audit::run(audit_command(&db));
        assert_eq!(found.code, Some(1), "{found:?}");
        assert!(
            found.violations().iter().any(|v| v.starts_with(
                "violation: order audit-declined: CANCELLED but its charge ch_late is not refunded"
            )),
            "{found:?}"
        );
    }

    let mut repair = audit_command(&db);
    repair.arg("--repair");
    let repaired = Audit::run(repair);
    assert_eq!(repaired.code, Some(0), "{repaired:?}");
    assert!(
        repaired.stdout.lines().any(|l| l.starts_with(
            "repair: refunded_late_charge: order audit-declined: refunded charge ch_late (1500 cents"
        )),
        "{repaired:?}"
    );
    assert!(
        repaired
            .stdout
            .contains("repair: 0 started, 1 late charges refunded, 0 stock released, 0 incidents recorded, 0 reported"),
        "{repaired:?}"
    );
    let clean = Audit::run(audit_command(&db));
    assert_eq!(clean.code, Some(0), "{clean:?}");
}

/// Orders keep coming while the audit reads, all on one SKU: whatever it catches half-way
/// (an order stored but not yet started, a reservation made between the stock and the
/// reservations were read) is gone or moving at its second look, and nothing is reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_audit_beside_a_busy_service_reports_nothing_the_saga_does_on_its_way() {
    let db = Db::new();
    // Four loops place orders with one key as fast as they can: no rate limit, a busy store.
    let mut cmd = serve_command(&db);
    cmd.args(["--operator-token", TOKEN, "--rate-limit", "0"]);
    let server = Server::spawn(cmd);
    server.stock("busy-book", 1_000_000, 500).await;
    let stop = Arc::new(AtomicBool::new(false));
    let placed = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..4)
        .map(|c| {
            let (base, stop, placed) = (server.base.clone(), stop.clone(), placed.clone());
            tokio::spawn(async move {
                let http = client();
                for n in 0.. {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let card = if n % 3 == 0 {
                        "pm_card_chargeDeclined"
                    } else {
                        "pm_card_visa"
                    };
                    let body = order(&format!("busy-{c}-{n}"), "busy-book", 1, 500, card);
                    let r = http
                        .post(format!("{base}/orders"))
                        .bearer_auth(TOKEN)
                        .json(&body)
                        .send()
                        .await
                        .expect("placed");
                    assert_eq!(r.status(), StatusCode::ACCEPTED);
                    placed.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    let until = Instant::now() + DEADLINE;
    while placed.load(Ordering::SeqCst) < 40 {
        assert!(Instant::now() < until, "the orders are not coming");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let audit = tokio::task::block_in_place(|| Audit::run(audit_command(&db)));
    let during = placed.load(Ordering::SeqCst);
    stop.store(true, Ordering::SeqCst);
    for c in clients {
        c.await.expect("a client");
    }
    assert_eq!(audit.code, Some(0), "{audit:?}");
    assert!(audit.summary().ends_with(" 0 violations"), "{audit:?}");
    eprintln!(
        "{during} orders placed by the end of the audit: {}",
        audit.summary()
    );
    server.stop();
}

#[test]
fn an_audit_of_a_store_that_is_not_there_is_a_wrong_setting() {
    let db = Db::new();
    let audit = Audit::run(audit_command(&db));
    assert_eq!(audit.code, Some(2), "{audit:?}");
    assert!(audit.stderr.contains("--db"), "{audit:?}");
    assert_eq!(audit.stdout, "");
    assert!(!db.path().exists(), "nothing was created");
}

#[test]
fn an_audit_that_cannot_reach_its_backend_says_so_apart_from_violations() {
    let db = Db::new();
    let mut cmd = audit_command(&db);
    cmd.args([
        "--backend",
        "aws",
        "--aws-region",
        "us-east-1",
        // Nothing listens on the discard port of loopback: every call is refused.
        "--endpoint-url",
        "http://127.0.0.1:9",
        "--state-machine-arn",
        "arn:aws:states:us-east-1:123456789012:stateMachine:fulfillment-order-saga",
        "--payments",
        "sandbox",
    ])
    .env("AWS_ACCESS_KEY_ID", "test")
    .env("AWS_SECRET_ACCESS_KEY", "test");
    let audit = Audit::run(cmd);
    assert_eq!(audit.code, Some(3), "{audit:?}");
    assert!(
        !audit.stdout.contains("audit:"),
        "no summary when the audit could not finish: {audit:?}"
    );
}
