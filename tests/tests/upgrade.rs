//! A database written by a release opens and runs its orders to the end with this build: the
//! store's file and the engine's, recorded by the release build itself
//! (`tests/fixtures/<version>/`, made by [`record_the_release_fixture`] at the release's tag) and
//! checked in. From 0.1.0 on, every change of a stored format ships with its migration, and this
//! test is what proves it: it must pass unchanged against every fixture of every release.
//!
//! What each fixture holds (the same orders, whatever the release):
//!
//! | order | in the fixture | after the upgrade |
//! |---|---|---|
//! | `fx-small` | completed | still completed, its replay answers the same ARN |
//! | `fx-declined` | cancelled (declined card, stock released) | still cancelled |
//! | `fx-client` | completed, placed with a client's key | that key still reads it |
//! | `fx-approve` | parked on its approval (1000-day window) | approved, ships |
//! | `fx-reject` | parked on its approval (1000-day window) | rejected, compensated |
//! | `fx-expires` | parked on its approval, its 10 s window long past | expired, compensated |
//!
//! The parked orders' heartbeats have lapsed by the time the test runs (the fixture is days old
//! or more): their tasks are re-issued on the new build's first start, as after any outage.
//! The 1000-day windows bound how long a fixture stays good: a fixture older than that holds
//! no parked order any more (the keeper expires them too); re-record it at its tag then.

use blackbox::{Audit, DEADLINE, Db, Server, TOKEN, audit_command, order};
use reqwest::{Method, StatusCode};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The releases whose fixtures every build must open.
const RELEASES: &[&str] = &["0.1.0"];

/// The approval window and heartbeat the fixture's first run had (the parked orders').
const LONG_WINDOW: [&str; 4] = ["--approval-timeout", "1000d", "--approval-heartbeat", "6h"];
/// The window of the fixture's second run, whose order is long expired when the test runs.
const SHORT_WINDOW: [&str; 4] = ["--approval-timeout", "10s", "--approval-heartbeat", "2s"];

/// The files of a fixture: the store's and, beside it, the engine's.
const FILES: [&str; 2] = ["fulfillment.db", "fulfillment.engine.db"];
/// The client's key the fixture's `fx-client` was placed with (a test key of a test database).
const CLIENT_KEY: &str = "client-key.txt";

fn fixture_dir(release: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(release)
}

/// A temporary database holding a copy of the release's fixture (the checked-in files stay as
/// they are).
fn copy_of(release: &str) -> Db {
    let db = Db::new();
    for file in FILES {
        let from = fixture_dir(release).join(file);
        std::fs::copy(&from, db.dir().join(file))
            .unwrap_or_else(|e| panic!("{}: {e}", from.display()));
    }
    db
}

fn serve(db: &Db, window: [&str; 4]) -> Server {
    let mut cmd = blackbox::serve_command(db);
    cmd.arg("--operator-token").arg(TOKEN).args(window);
    Server::spawn(cmd)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_written_by_each_release_runs_its_orders_to_the_end() {
    for release in RELEASES {
        runs_to_the_end(release).await;
    }
}

async fn runs_to_the_end(release: &str) {
    let db = copy_of(release);
    let client_key = std::fs::read_to_string(fixture_dir(release).join(CLIENT_KEY))
        .expect("the fixture's client key");
    let client_key = client_key.trim();
    let server = serve(&db, LONG_WINDOW);

    // What had ended stays as it ended.
    let small = server.ends("fx-small", "COMPLETED", "SUCCEEDED").await;
    let again = server
        .place(&order("fx-small", "widget", 1, 1_500, "pm_card_visa"))
        .await;
    assert!(again.replayed(), "{release}: {:?}", again.headers);
    assert_eq!(again.json()["executionArn"], small["executionArn"]);
    let declined = server.settles("fx-declined").await;
    assert_eq!(declined["status"], "CANCELLED", "{release}: {declined}");
    let theirs = server
        .send(
            Method::GET,
            "/orders/fx-client/status",
            None,
            Some(client_key),
        )
        .await;
    assert_eq!(theirs.status, StatusCode::OK, "{release}: {}", theirs.text);
    assert_eq!(theirs.json()["status"], "COMPLETED", "{release}");

    // The expired window is closed by the keeper, its order compensated.
    let expired = server.settles("fx-expires").await;
    assert_eq!(expired["status"], "CANCELLED", "{release}: {expired}");
    assert_eq!(
        expired["failure"]["error"], "Order.ApprovalExpired",
        "{release}: {expired}"
    );

    // The parked ones take their decisions.
    decides(&server, "fx-approve", "approve").await;
    decides(&server, "fx-reject", "reject").await;
    server.ends("fx-approve", "COMPLETED", "SUCCEEDED").await;
    let rejected = server.settles("fx-reject").await;
    assert_eq!(rejected["status"], "CANCELLED", "{release}: {rejected}");
    assert_eq!(
        rejected["failure"]["error"], "Order.Rejected",
        "{release}: {rejected}"
    );

    // The books: one piano of five shipped, the rejected and expired ones back on the shelf.
    assert_eq!(server.stock_of("piano").await, (4, 0), "{release}");

    // And a new order runs on the old database.
    let placed = server
        .place(&order("after-upgrade", "widget", 2, 1_500, "pm_card_visa"))
        .await;
    assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
    server.ends("after-upgrade", "COMPLETED", "SUCCEEDED").await;
    // Six widgets of a hundred shipped: one, three, two; the declined one's back.
    assert_eq!(server.stock_of("widget").await, (94, 0), "{release}");
    // The running service holds the engine: the versions command says so, and changes nothing.
    let (code, _, stderr) = blackbox::versions(&db, &["list"]);
    assert_eq!(code, Some(1), "{release}: {stderr}");
    assert!(stderr.contains("engine"), "{release}: {stderr}");
    server.stop();

    // The release's orders ran on the machine's first revision, which no version holds; this
    // build's start published its definition as version 1 and routed live to it.
    let (code, listed, stderr) = blackbox::versions(&db, &["list"]);
    assert_eq!(code, Some(0), "{release}: {stderr}");
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(lines.len(), 2, "{release}: {listed}");
    let line: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(line[..3], ["1", "100%", "0"], "{release}: {listed}");
    assert!(
        lines[1].contains(&format!(
            "fulfillment {} definition sha256:",
            env!("CARGO_PKG_VERSION")
        )),
        "{release}: {listed}"
    );
    let (code, _, stderr) = blackbox::versions(&db, &["rollback"]);
    assert_eq!(code, Some(2), "{release}: {stderr}");
    assert!(
        stderr.contains("no version older than 1"),
        "{release}: {stderr}"
    );
    let (code, promoted, stderr) = blackbox::versions(&db, &["promote"]);
    assert_eq!(code, Some(0), "{release}: {stderr}");
    assert_eq!(promoted.trim(), "live: version 1 (this build's), unpinned");

    let audit = Audit::run(audit_command(&db));
    assert_eq!(audit.code, Some(0), "{release}: {audit:?}");
}

/// Sends the decision until it is taken: right after the start, the parked order's task may be
/// between its lapsed heartbeat and its re-issue, and its decision is refused until it is parked
/// again (it must never be taken twice, nor lost while answered 200).
async fn decides(server: &Server, order_id: &str, decision: &str) {
    let until = Instant::now() + DEADLINE;
    loop {
        server.reaches(order_id, "AWAITING_APPROVAL").await;
        let reply = server.decide(order_id, decision).await;
        if reply.status == StatusCode::OK {
            return;
        }
        assert!(
            reply.status == StatusCode::CONFLICT && Instant::now() < until,
            "{order_id}: {decision} answered {}: {}",
            reply.status,
            reply.text
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Records the fixture of this build's release into `tests/fixtures/<version>/`: run once, with
/// the release build, at the release's tag (`cargo test --release -p blackbox --test upgrade --
/// --ignored`), and check the files in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "records a release's fixture: run once, at the release's tag"]
async fn record_the_release_fixture() {
    let release = env!("CARGO_PKG_VERSION");
    let db = Db::new();
    let client_key = blackbox::keys_create(&db, "fixture-shop", "client");

    let server = serve(&db, LONG_WINDOW);
    server.stock("widget", 100, 1_500).await;
    server.stock("piano", 5, 450_000).await;
    for (id, sku, price, card) in [
        ("fx-small", "widget", 1_500, "pm_card_visa"),
        ("fx-declined", "widget", 1_500, "pm_card_chargeDeclined"),
        ("fx-approve", "piano", 450_000, "pm_card_visa"),
        ("fx-reject", "piano", 450_000, "pm_card_visa"),
    ] {
        let placed = server.place(&order(id, sku, 1, price, card)).await;
        assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
    }
    let placed = server
        .place_as(
            &order("fx-client", "widget", 3, 1_500, "pm_card_visa"),
            &client_key,
        )
        .await;
    assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
    server.ends("fx-small", "COMPLETED", "SUCCEEDED").await;
    server.ends("fx-client", "COMPLETED", "SUCCEEDED").await;
    server.settles("fx-declined").await;
    server.reaches("fx-approve", "AWAITING_APPROVAL").await;
    server.reaches("fx-reject", "AWAITING_APPROVAL").await;
    server.stop();

    let server = serve(&db, SHORT_WINDOW);
    let placed = server
        .place(&order("fx-expires", "piano", 1, 450_000, "pm_card_visa"))
        .await;
    assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
    server.reaches("fx-expires", "AWAITING_APPROVAL").await;
    server.stop();

    let audit = Audit::run(audit_command(&db));
    assert_eq!(audit.code, Some(0), "{audit:?}");
    // A clean stop leaves no write-ahead log beside either file: each is whole.
    for file in FILES {
        let wal = db.dir().join(format!("{file}-wal"));
        assert!(
            !wal.exists() || std::fs::metadata(&wal).unwrap().len() == 0,
            "{} is not empty",
            wal.display()
        );
    }
    let out = fixture_dir(release);
    std::fs::create_dir_all(&out).unwrap();
    for file in FILES {
        std::fs::copy(db.dir().join(file), out.join(file)).unwrap();
    }
    std::fs::write(out.join(CLIENT_KEY), format!("{client_key}\n")).unwrap();
    eprintln!("recorded {}", out.display());
}
