//! What a newcomer meets first, against the real binary over HTTP: the front door, an order read
//! back as placed, the stock listed a page at a time, answers that say what happened (the
//! status after a decision, the refund and the released stock, what every unit of stock is
//! doing), a start on a busy address that leaves nothing behind, and metrics that stand still
//! while nothing happens.

use blackbox::{DEADLINE, Db, Server, binary, order};
use reqwest::{Method, StatusCode};
use serde_json::json;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_front_door_points_at_the_docs_and_the_contract() {
    let db = Db::new();
    let server = Server::start(&db);
    let index = server.request(Method::GET, "/", None).await;
    assert_eq!(index.status, StatusCode::OK, "{}", index.text);
    let index = index.json();
    assert_eq!(index["service"], "fulfillment");
    assert_eq!(index["docs"], "/docs");
    assert_eq!(index["openapi"], "/openapi.json");
    for link in ["docs", "openapi", "health", "metrics"] {
        let path = index[link].as_str().unwrap();
        let r = server.request(Method::GET, path, None).await;
        assert!(r.status.is_success(), "{path}: {} {}", r.status, r.text);
    }
    server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_reads_back_as_placed_with_its_lines_prices_and_status() {
    let db = Db::new();
    let server = Server::start(&db);
    server.stock("book", 10, 1_500).await;
    server.stock("pen", 10, 250).await;
    let mut placed = order("readback-1", "book", 2, 1_500, "pm_card_visa");
    placed["items"]
        .as_array_mut()
        .unwrap()
        .push(json!({"sku": "pen", "quantity": 3, "unitPriceCents": 250}));
    let r = server.place(&placed).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text);
    server.reaches("readback-1", "COMPLETED").await;

    let r = server
        .request(Method::GET, "/orders/readback-1", None)
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    let o = r.json();
    assert_eq!(o["orderId"], "readback-1");
    assert_eq!(o["customerId"], "cus_blackbox");
    assert_eq!(
        o["items"],
        json!([
            {"sku": "book", "quantity": 2, "unitPriceCents": 1500, "lineTotalCents": 3000},
            {"sku": "pen", "quantity": 3, "unitPriceCents": 250, "lineTotalCents": 750},
        ])
    );
    assert_eq!(o["amountCents"], 3_750);
    assert_eq!(o["currency"], "EUR");
    assert_eq!(o["requiresApproval"], false);
    assert_eq!(o["shippingAddress"]["postalCode"], "22201");
    assert_eq!(o["status"], "COMPLETED");
    assert_eq!(o["statusUrl"], "/orders/readback-1/status");
    assert!(o["executionArn"].as_str().unwrap().ends_with(":readback-1"));
    assert!(
        o["createdAt"].is_string() && o["updatedAt"].is_string(),
        "{o}"
    );

    for unknown in ["/orders/never-placed", "/orders/bad%20id"] {
        let r = server.request(Method::GET, unknown, None).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{unknown}: {}", r.text);
        assert_eq!(
            r.problem().as_deref(),
            Some("order-not-found"),
            "{}",
            r.text
        );
    }
    server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stock_list_pages_every_sku_once_with_an_opaque_cursor() {
    let db = Db::new();
    let server = Server::start(&db);
    let skus = ["amp", "bass", "cello", "drum", "flute"];
    for (i, sku) in skus.iter().enumerate() {
        server.stock(sku, i as u64 + 1, 100).await;
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let path = match &cursor {
            Some(c) => format!("/inventory?limit=2&cursor={c}"),
            None => "/inventory?limit=2".to_owned(),
        };
        let r = server.request(Method::GET, &path, None).await;
        assert_eq!(r.status, StatusCode::OK, "{path}: {}", r.text);
        let page = r.json();
        let items = page["items"].as_array().unwrap();
        assert!(items.len() <= 2, "{page}");
        for item in items {
            seen.push(item["sku"].as_str().unwrap().to_owned());
            let (a, res, shipped) = (&item["available"], &item["reserved"], &item["shipped"]);
            assert_eq!(
                item["stocked"].as_u64(),
                Some(a.as_u64().unwrap() + res.as_u64().unwrap() + shipped.as_u64().unwrap()),
                "{item}"
            );
        }
        pages += 1;
        assert!(pages <= 4, "the pages never end: {seen:?}");
        match page["nextCursor"].as_str() {
            Some(next) => {
                assert!(!skus.contains(&next), "the cursor is opaque: {next}");
                cursor = Some(next.to_owned());
            }
            None => break,
        }
    }
    assert_eq!(seen, skus, "every SKU once, in SKU order");

    for bad in [
        "/inventory?limit=0",
        "/inventory?limit=x",
        "/inventory?cursor=%25%25",
    ] {
        let r = server.request(Method::GET, bad, None).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{bad}: {}", r.text);
        assert_eq!(
            r.problem().as_deref(),
            Some("invalid-request"),
            "{}",
            r.text
        );
    }
    server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_answer_the_status_after_them_and_a_cancelled_order_shows_its_refund_and_release()
{
    let db = Db::new();
    let server = Server::start(&db);
    server.stock("piano", 2, 450_000).await;
    for id in ["decided-approve", "decided-reject"] {
        let r = server
            .place(&order(id, "piano", 1, 450_000, "pm_card_visa"))
            .await;
        assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text);
        server.reaches(id, "AWAITING_APPROVAL").await;
    }

    let approved = server.decide("decided-approve", "approve").await;
    assert_eq!(approved.status, StatusCode::OK, "{}", approved.text);
    let after = approved.json()["status"].as_str().unwrap().to_owned();
    assert!(
        ["APPROVED", "COMPLETED"].contains(&after.as_str()),
        "{}",
        approved.text
    );

    let rejected = server.decide("decided-reject", "reject").await;
    assert_eq!(rejected.status, StatusCode::OK, "{}", rejected.text);
    let after = rejected.json()["status"].as_str().unwrap().to_owned();
    assert!(
        ["COMPENSATING", "CANCELLED"].contains(&after.as_str()),
        "the status after a rejection, not before it: {}",
        rejected.text
    );
    let again = server.decide("decided-reject", "reject").await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.text);
    assert!(again.replayed());

    let cancelled = server.ends("decided-reject", "CANCELLED", "FAILED").await;
    assert_eq!(
        cancelled["failure"]["error"], "Order.Rejected",
        "{cancelled}"
    );
    let charge = &cancelled["payment"];
    assert!(charge["chargeId"].is_string(), "{cancelled}");
    let refund = &cancelled["refund"];
    assert!(refund["refundId"].is_string(), "{cancelled}");
    assert_eq!(refund["amountCents"], 450_000, "{cancelled}");
    assert_eq!(refund["currency"], "EUR", "{cancelled}");
    assert!(
        refund["refundedAt"].as_str() >= charge["createdAt"].as_str(),
        "{cancelled}"
    );
    assert_eq!(
        cancelled["reservation"]["status"], "RELEASED",
        "{cancelled}"
    );
    assert_eq!(
        cancelled["reservation"]["lines"],
        json!([{"sku": "piano", "quantity": 1}]),
        "what was released"
    );

    let completed = server
        .ends("decided-approve", "COMPLETED", "SUCCEEDED")
        .await;
    assert!(completed["refund"].is_null(), "{completed}");
    assert_eq!(completed["reservation"]["status"], "SHIPPED", "{completed}");
    server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shipment_refused_after_the_charge_shows_the_refund_and_an_out_of_stock_order_no_reservation()
 {
    let db = Db::new();
    let server = Server::start(&db);
    server.stock("book", 1, 1_500).await;
    let mut rejected = order("ship-refused", "book", 1, 1_500, "pm_card_visa");
    rejected["shippingAddress"]["postalCode"] = json!("00000");
    server.place(&rejected).await;
    let s = server.ends("ship-refused", "CANCELLED", "FAILED").await;
    assert_eq!(s["failure"]["error"], "Shipment.Rejected", "{s}");
    assert_eq!(s["refund"]["amountCents"], 1_500, "{s}");
    assert_eq!(s["reservation"]["status"], "RELEASED", "{s}");

    server
        .place(&order("no-stock", "book", 5, 1_500, "pm_card_visa"))
        .await;
    let s = server.ends("no-stock", "CANCELLED", "FAILED").await;
    assert_eq!(s["failure"]["error"], "Inventory.OutOfStock", "{s}");
    assert!(s["reservation"].is_null(), "nothing was reserved: {s}");
    assert!(s["payment"].is_null() && s["refund"].is_null(), "{s}");
    server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stock_count_answers_where_every_unit_is() {
    let db = Db::new();
    let server = Server::start(&db);
    server.stock("piano", 1, 9_000).await;
    server
        .place(&order("one-piano", "piano", 1, 9_000, "pm_card_visa"))
        .await;
    server.ends("one-piano", "COMPLETED", "SUCCEEDED").await;
    // The shelf is counted again: five pianos on it, and the one that shipped is still counted.
    let r = server
        .operator(
            Method::PUT,
            "/inventory/piano",
            Some(&json!({"available": 5})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(
        r.json(),
        json!({"sku": "piano", "available": 5, "reserved": 0, "shipped": 1, "stocked": 6,
            "price": {"cents": 9_000, "currency": "EUR"}})
    );
    server.stop();
}

#[test]
fn a_start_on_a_busy_address_fails_and_creates_nothing() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let db = Db::new();
    let output = std::process::Command::new(binary())
        .arg("serve")
        .arg("--listen")
        .arg(busy.local_addr().unwrap().to_string())
        .arg("--db")
        .arg(db.path())
        .env_clear()
        .output()
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot listen on"), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(db.dir()).unwrap().collect();
    assert!(left.is_empty(), "nothing on disk: {left:?}");
}

/// The value of an unlabelled counter in a Prometheus exposition.
fn counter(metrics: &str, name: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in the metrics"))
}

fn commits(metrics: &str) -> (u64, u64, u64) {
    (
        counter(metrics, "fulfillment_engine_commits_total"),
        counter(metrics, "fulfillment_engine_transitions_total"),
        counter(metrics, "fulfillment_store_commits_total"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_service_commits_nothing() {
    let db = Db::new();
    let server = Server::start(&db);
    server.stock("book", 1, 1_500).await;
    server
        .place(&order("before-idle", "book", 1, 1_500, "pm_card_visa"))
        .await;
    server.ends("before-idle", "COMPLETED", "SUCCEEDED").await;
    let busy = commits(&server.metrics().await);
    assert!(
        busy.0 > 0 && busy.1 > 0 && busy.2 > 0,
        "the saga committed: {busy:?}"
    );

    // Once the last saga's commits are counted, nothing moves: the workers keep polling and
    // the engine keeps waking up, but an idle pass writes nothing and is no commit.
    let until = Instant::now() + DEADLINE;
    let mut settled = commits(&server.metrics().await);
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = commits(&server.metrics().await);
        if now == settled {
            break;
        }
        assert!(
            Instant::now() < until,
            "the counters never stood still: {now:?}"
        );
        settled = now;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        commits(&server.metrics().await),
        settled,
        "an idle service counted commits"
    );
    server.stop();
}
