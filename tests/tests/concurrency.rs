//! Idempotency under concurrency, against the real binary: many identical orders at once start
//! one execution and charge once; many decisions at once apply exactly one; many orders at once
//! for the last units of a SKU never oversell it.

use blackbox::{Db, Server, order};
use reqwest::StatusCode;
use std::collections::HashSet;
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_identical_orders_start_one_execution_and_charge_once() {
    let db = Db::new();
    let server = Arc::new(Server::start(&db));
    server.stock("book", 10, 2_500).await;
    let body = Arc::new(order("race-1", "book", 1, 2_500, "pm_card_visa"));

    let replies: Vec<_> = (0..50)
        .map(|_| {
            let (server, body) = (server.clone(), body.clone());
            tokio::spawn(async move { server.place(&body).await })
        })
        .collect();
    let mut arns = HashSet::new();
    let mut fresh = 0;
    for reply in replies {
        let reply = reply.await.unwrap();
        assert_eq!(reply.status, StatusCode::ACCEPTED, "{}", reply.text);
        arns.insert(reply.json()["executionArn"].as_str().unwrap().to_owned());
        fresh += usize::from(!reply.replayed());
    }
    assert_eq!(arns.len(), 1, "one execution: {arns:?}");
    assert_eq!(fresh, 1, "exactly one placement is not a replay");

    let done = server.reaches("race-1", "COMPLETED").await;
    assert_eq!(done["payment"]["amountCents"], 2_500, "{done}");
    let history = server.history("race-1").await;
    let count = |t: &str| history.iter().filter(|e| *e == t).count();
    assert_eq!(count("ExecutionStarted"), 1, "{history:?}");
    let book = server
        .request(reqwest::Method::GET, "/inventory/book", None)
        .await
        .json();
    assert_eq!(book["available"], 9, "one unit taken: {book}");
    let metrics = server.metrics().await;
    assert!(
        metrics.contains("fulfillment_orders_total{outcome=\"accepted\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("fulfillment_orders_total{outcome=\"replayed\"} 49"),
        "{metrics}"
    );
    // The first POST queued the start; a replay may have started the execution before the
    // queue came to it (starts are idempotent), so the queue empties soon, if not yet.
    let until = std::time::Instant::now() + blackbox::DEADLINE;
    loop {
        let metrics = server.metrics().await;
        assert!(
            metrics.contains("# TYPE fulfillment_start_queue_orders gauge\n"),
            "{metrics}"
        );
        if metrics.contains("\nfulfillment_start_queue_orders 0\n") {
            break;
        }
        assert!(std::time::Instant::now() < until, "{metrics}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    Arc::into_inner(server).unwrap().stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_concurrent_decisions_apply_exactly_one() {
    let db = Db::new();
    let server = Arc::new(Server::start(&db));
    server.stock("piano", 1, 450_000).await;
    let placed = server
        .place(&order("race-big", "piano", 1, 450_000, "pm_card_visa"))
        .await;
    assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
    server.reaches("race-big", "AWAITING_APPROVAL").await;

    let decisions: Vec<_> = (0..20)
        .map(|i| {
            let server = server.clone();
            let decision = if i % 2 == 0 { "approve" } else { "reject" };
            tokio::spawn(async move { (decision, server.decide("race-big", decision).await) })
        })
        .collect();
    let mut replies = Vec::new();
    for d in decisions {
        replies.push(d.await.unwrap());
    }
    let applied: Vec<_> = replies
        .iter()
        .filter(|(_, r)| r.status == StatusCode::OK && !r.replayed())
        .collect();
    assert_eq!(
        applied.len(),
        1,
        "exactly one decision applied: {replies:#?}"
    );
    let winner = applied[0].0;
    for (decision, reply) in &replies {
        if *decision == winner {
            assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
            assert_eq!(reply.json()["decision"], winner, "{}", reply.text);
        } else {
            assert_eq!(reply.status, StatusCode::CONFLICT, "{}", reply.text);
            assert_eq!(reply.problem().as_deref(), Some("approval-conflict"));
        }
    }
    let replays = replies.iter().filter(|(_, r)| r.replayed()).count();
    assert_eq!(
        replays, 9,
        "the winner's other nine are replays: {replies:#?}"
    );

    let (end, failure) = if winner == "approve" {
        ("COMPLETED", None)
    } else {
        ("CANCELLED", Some("Order.Rejected"))
    };
    let done = server.reaches("race-big", end).await;
    assert_eq!(done["approval"]["decision"], winner, "{done}");
    if let Some(error) = failure {
        assert_eq!(done["failure"]["error"], error, "{done}");
    }

    Arc::into_inner(server).unwrap().stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forty_concurrent_orders_for_five_units_ship_five_and_never_oversell() {
    let db = Db::new();
    let server = Arc::new(Server::start(&db));
    server.stock("last-ones", 5, 2_000).await;

    let placed: Vec<_> = (0..40)
        .map(|i| {
            let server = server.clone();
            tokio::spawn(async move {
                let id = format!("last-{i}");
                let reply = server
                    .place(&order(&id, "last-ones", 1, 2_000, "pm_card_visa"))
                    .await;
                assert_eq!(reply.status, StatusCode::ACCEPTED, "{}", reply.text);
                server.settles(&id).await
            })
        })
        .collect();
    let (mut completed, mut out_of_stock) = (0, 0);
    for order in placed {
        let end = order.await.unwrap();
        match (end["status"].as_str(), end["failure"]["error"].as_str()) {
            (Some("COMPLETED"), None) => {
                assert_eq!(end["reservation"]["status"], "SHIPPED", "{end}");
                completed += 1;
            }
            (Some("CANCELLED"), Some("Inventory.OutOfStock")) => {
                assert!(end["payment"].is_null(), "charged without stock: {end}");
                // Nothing held: no reservation, or the record that none was made.
                assert!(
                    end["reservation"].is_null() || end["reservation"]["status"] == "RELEASED",
                    "{end}"
                );
                out_of_stock += 1;
            }
            _ => panic!("neither shipped nor out of stock: {end}"),
        }
    }
    assert_eq!((completed, out_of_stock), (5, 35));
    let stock = server
        .request(reqwest::Method::GET, "/inventory/last-ones", None)
        .await
        .json();
    assert_eq!(stock["available"], 0, "{stock}");
    assert_eq!(stock["reserved"], 0, "{stock}");

    Arc::into_inner(server).unwrap().stop();
}
