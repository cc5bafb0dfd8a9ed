//! Cancelling orders, against the real binary over HTTP: a client cancels its own order (an
//! operator any), before shipping only; the order ends `CANCELLED` through the saga's own
//! compensations (refund, release), never by stopping its execution. Races — cancel against
//! approve, against the shipment step, against itself — each have one winner, the loser is told
//! so, and the audit finds money and stock in agreement.

use blackbox::{Audit, Db, Reply, Server, audit_command, keys_create, order};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

async fn cancel(server: &Server, order_id: &str, body: &Value, key: &str) -> Reply {
    server
        .send(
            Method::POST,
            &format!("/orders/{order_id}/cancel"),
            Some(body),
            Some(key),
        )
        .await
}

fn assert_audit_clean(db: &Db) {
    let audit = Audit::run(audit_command(db));
    assert_eq!(audit.code, Some(0), "{audit:?}");
    assert!(audit.violations().is_empty(), "{audit:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_cancels_its_order_waiting_for_approval_and_gets_money_and_stock_back() {
    let db = Db::new();
    let server = Server::start(&db);
    let alice = keys_create(&db, "alice-shop", "client");
    let bob = keys_create(&db, "bob-shop", "client");
    let grace = keys_create(&db, "grace", "operator");
    server.stock("piano", 1, 450_000).await;
    let placed = server
        .place_as(
            &order("c-parked", "piano", 1, 450_000, "pm_card_visa"),
            &alice,
        )
        .await;
    assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
    server.reaches("c-parked", "AWAITING_APPROVAL").await;

    // Another client's order does not exist for bob; nothing changes.
    let theirs = cancel(&server, "c-parked", &json!({}), &bob).await;
    assert_eq!(theirs.status, StatusCode::NOT_FOUND, "{}", theirs.text);
    // Bad input is refused and changes nothing.
    let long = cancel(
        &server,
        "c-parked",
        &json!({"reason": "x".repeat(501)}),
        &alice,
    )
    .await;
    assert_eq!(
        long.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        long.text
    );
    let unknown = cancel(&server, "c-parked", &json!({"why": "no"}), &alice).await;
    assert_eq!(
        unknown.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        unknown.text
    );
    let view = server.status("c-parked").await;
    assert!(view["cancellation"].is_null(), "{view}");
    assert_eq!(view["status"], "AWAITING_APPROVAL", "{view}");

    let cancelled = cancel(
        &server,
        "c-parked",
        &json!({"reason": "ordered twice"}),
        &alice,
    )
    .await;
    assert_eq!(cancelled.status, StatusCode::ACCEPTED, "{}", cancelled.text);
    assert!(!cancelled.replayed());
    assert_eq!(
        cancelled.header("location"),
        Some("/orders/c-parked/status")
    );
    let body = cancelled.json();
    assert_eq!(body["cancellation"]["requestedBy"], "client", "{body}");
    assert_eq!(body["cancellation"]["reason"], "ordered twice", "{body}");
    assert!(
        ["COMPENSATING", "CANCELLED"].contains(&body["status"].as_str().unwrap()),
        "the parked token is failed at once: {body}"
    );

    // The same request again answers the same; an approval now takes no effect.
    let again = cancel(&server, "c-parked", &json!({"reason": "really"}), &alice).await;
    assert_eq!(again.status, StatusCode::ACCEPTED, "{}", again.text);
    assert!(again.replayed(), "{}", again.text);
    assert_eq!(again.json()["cancellation"]["reason"], "ordered twice");
    let approve = server
        .send(
            Method::POST,
            "/orders/c-parked/approval",
            Some(&json!({"decision": "approve"})),
            Some(&grace),
        )
        .await;
    assert_eq!(approve.status, StatusCode::CONFLICT, "{}", approve.text);
    assert_eq!(approve.problem().as_deref(), Some("order-cancelled"));

    let done = server.ends("c-parked", "CANCELLED", "FAILED").await;
    assert_eq!(done["failure"]["error"], "Order.Cancelled", "{done}");
    assert_eq!(
        done["failure"]["cause"], "cancelled by the client: ordered twice",
        "{done}"
    );
    assert_eq!(done["refund"]["amountCents"], 450_000, "{done}");
    assert_eq!(done["reservation"]["status"], "RELEASED", "{done}");
    assert!(done["approval"]["decision"].is_null(), "{done}");
    assert_eq!(server.stock_of("piano").await, (1, 0), "the stock is back");
    let history = server.history("c-parked").await;
    assert!(
        !history.iter().any(|e| e == "ExecutionAborted"),
        "never stopped from outside: {history:?}"
    );
    let approvals = server.operator(Method::GET, "/approvals", None).await;
    assert!(
        !approvals.text.contains("c-parked"),
        "the order left the operators' queue: {}",
        approvals.text
    );
    assert_audit_clean(&db);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shipped_order_or_one_already_undone_is_not_cancelled() {
    let db = Db::new();
    let server = Server::start(&db);
    let alice = keys_create(&db, "alice-shop", "client");
    server.stock("book", 5, 1_500).await;
    let placed = server
        .place_as(
            &order("c-shipped", "book", 1, 1_500, "pm_card_visa"),
            &alice,
        )
        .await;
    assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
    let done = server.ends("c-shipped", "COMPLETED", "SUCCEEDED").await;
    for _ in 0..2 {
        let late = cancel(&server, "c-shipped", &json!({}), &alice).await;
        assert_eq!(late.status, StatusCode::CONFLICT, "{}", late.text);
        assert_eq!(late.problem().as_deref(), Some("order-shipped"));
    }
    assert_eq!(server.status("c-shipped").await, done, "nothing changed");

    let declined = server
        .place_as(
            &order("c-declined", "book", 1, 1_500, "pm_card_chargeDeclined"),
            &alice,
        )
        .await;
    assert_eq!(declined.status, StatusCode::ACCEPTED, "{}", declined.text);
    let undone = server.ends("c-declined", "CANCELLED", "FAILED").await;
    let refused = cancel(&server, "c-declined", &json!({}), &alice).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.text);
    assert_eq!(refused.problem().as_deref(), Some("not-cancellable"));
    assert!(
        refused.text.contains("Payment.Declined"),
        "{}",
        refused.text
    );
    assert_eq!(server.status("c-declined").await, undone, "nothing changed");
    assert_audit_clean(&db);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_cancels_any_order_under_its_name_shown_to_operators_only() {
    let db = Db::new();
    let server = Server::start(&db);
    let alice = keys_create(&db, "alice-shop", "client");
    let grace = keys_create(&db, "grace", "operator");
    server.stock("piano", 1, 450_000).await;
    let placed = server
        .place_as(
            &order("c-by-op", "piano", 1, 450_000, "pm_card_visa"),
            &alice,
        )
        .await;
    assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
    server.reaches("c-by-op", "AWAITING_APPROVAL").await;
    let cancelled = cancel(
        &server,
        "c-by-op",
        &json!({"reason": "fraud check"}),
        &grace,
    )
    .await;
    assert_eq!(cancelled.status, StatusCode::ACCEPTED, "{}", cancelled.text);
    server.ends("c-by-op", "CANCELLED", "FAILED").await;

    let seen = server
        .send(Method::GET, "/orders/c-by-op/status", None, Some(&grace))
        .await
        .json();
    assert_eq!(seen["cancellation"]["requestedBy"], "operator", "{seen}");
    assert_eq!(seen["cancellation"]["operator"], "grace", "{seen}");
    let own = server
        .send(Method::GET, "/orders/c-by-op/status", None, Some(&alice))
        .await
        .json();
    assert_eq!(own["cancellation"]["requestedBy"], "operator", "{own}");
    assert!(own["cancellation"]["operator"].is_null(), "{own}");
    assert_eq!(
        own["failure"]["cause"], "cancelled by an operator: fraud check",
        "{own}"
    );
    assert!(!own.to_string().contains("grace"), "{own}");
}

/// How a race between a cancel and another action ended for one order.
fn cancel_won(reply: &Reply) -> bool {
    match reply.status {
        StatusCode::ACCEPTED => true,
        StatusCode::CONFLICT => {
            assert_eq!(
                reply.problem().as_deref(),
                Some("order-shipped"),
                "{}",
                reply.text
            );
            false
        }
        other => panic!("a cancel answered {other}: {}", reply.text),
    }
}

/// Waits for each order's end and checks it is the one its cancel's answer promised.
async fn ends_as_answered(server: &Server, outcomes: &[(String, bool)]) {
    let won = outcomes.iter().filter(|(_, c)| *c).count();
    eprintln!("cancels won {won} of {} races", outcomes.len());
    for (id, cancelled) in outcomes {
        let end = server.settles(id).await;
        if *cancelled {
            assert_eq!(end["status"], "CANCELLED", "{id}: {end}");
            assert_eq!(end["failure"]["error"], "Order.Cancelled", "{id}: {end}");
            assert!(end["shipment"].is_null(), "{id}: {end}");
            assert!(
                end["payment"].is_null()
                    || end["refund"]["amountCents"] == end["payment"]["amountCents"],
                "{id}: a charge is refunded whole: {end}"
            );
        } else {
            assert_eq!(end["status"], "COMPLETED", "{id}: {end}");
            assert!(end["refund"].is_null(), "{id}: {end}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancel_and_approve_race_one_wins_and_the_books_agree() {
    let db = Db::new();
    let server = Arc::new(Server::start(&db));
    let grace = keys_create(&db, "grace", "operator");
    let n = 12;
    server.stock("organ", n, 300_000).await;
    let ids: Vec<String> = (0..n).map(|i| format!("c-race-{i}")).collect();
    for id in &ids {
        let placed = server
            .place(&order(id, "organ", 1, 300_000, "pm_card_visa"))
            .await;
        assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
    }
    for id in &ids {
        server.reaches(id, "AWAITING_APPROVAL").await;
    }
    let mut races = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        let (s1, s2, g1, g2, id1, id2) = (
            server.clone(),
            server.clone(),
            grace.clone(),
            grace.clone(),
            id.clone(),
            id.clone(),
        );
        // A third get the cancel first by a hair; the rest the approval, with the cancel up to
        // a few tens of milliseconds later: before the shipment begins, or after.
        let (first, second) = if i % 3 == 0 {
            (2, 0)
        } else {
            (0, 3 * i as u64)
        };
        let approve = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(first)).await;
            s1.send(
                Method::POST,
                &format!("/orders/{id1}/approval"),
                Some(&json!({"decision": "approve"})),
                Some(&g1),
            )
            .await
        });
        let cancel = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(second)).await;
            cancel(&s2, &id2, &json!({"reason": "race"}), &g2).await
        });
        races.push((id.clone(), approve, cancel));
    }
    let mut outcomes = Vec::new();
    for (id, approve, cancelled) in races {
        let (approve, cancelled) = (approve.await.unwrap(), cancelled.await.unwrap());
        let won = cancel_won(&cancelled);
        match approve.status {
            // Approved first: the cancel still wins unless the shipment began in between.
            StatusCode::OK => {}
            StatusCode::CONFLICT => {
                assert_eq!(
                    approve.problem().as_deref(),
                    Some("order-cancelled"),
                    "{}",
                    approve.text
                );
                assert!(won, "{id}: the approval lost to a cancel that did not win");
            }
            other => panic!("{id}: the approval answered {other}: {}", approve.text),
        }
        outcomes.push((id, won));
    }
    ends_as_answered(&server, &outcomes).await;
    let (available, reserved) = server.stock_of("organ").await;
    let cancelled = outcomes.iter().filter(|(_, c)| *c).count() as u64;
    assert_eq!((available, reserved), (cancelled, 0), "{outcomes:?}");
    assert_audit_clean(&db);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancels_racing_the_saga_either_stop_it_or_are_told_it_shipped() {
    let db = Db::new();
    let server = Arc::new(Server::start(&db));
    let n = 30u64;
    server.stock("pen", n, 400).await;
    let mut races = Vec::new();
    for i in 0..n {
        let id = format!("c-ship-{i}");
        let placed = server
            .place(&order(&id, "pen", 1, 400, "pm_card_visa"))
            .await;
        assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
        let s = server.clone();
        // Spread over the saga's few milliseconds: some before the reservation, some during
        // the charge, some at the shipment, some after it.
        races.push(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_micros(i * 700)).await;
            let reply = cancel(&s, &id, &json!({}), blackbox::TOKEN).await;
            (id, reply)
        }));
    }
    let mut outcomes = Vec::new();
    for race in races {
        let (id, reply) = race.await.unwrap();
        outcomes.push((id, cancel_won(&reply)));
    }
    ends_as_answered(&server, &outcomes).await;
    let (available, reserved) = server.stock_of("pen").await;
    let cancelled = outcomes.iter().filter(|(_, c)| *c).count() as u64;
    assert_eq!((available, reserved), (cancelled, 0), "{outcomes:?}");
    assert_audit_clean(&db);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_cancels_at_once_record_one_and_replay_the_other() {
    let db = Db::new();
    let server = Arc::new(Server::start(&db));
    server.stock("harp", 10, 300_000).await;
    let ids: Vec<String> = (0..10).map(|i| format!("c-twice-{i}")).collect();
    for id in &ids {
        let placed = server
            .place(&order(id, "harp", 1, 300_000, "pm_card_visa"))
            .await;
        assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
        server.reaches(id, "AWAITING_APPROVAL").await;
    }
    for id in &ids {
        let calls: Vec<_> = (0..2)
            .map(|i| {
                let (s, id) = (server.clone(), id.clone());
                tokio::spawn(async move {
                    cancel(
                        &s,
                        &id,
                        &json!({"reason": format!("caller {i}")}),
                        blackbox::TOKEN,
                    )
                    .await
                })
            })
            .collect();
        let mut fresh = 0;
        let mut reasons = Vec::new();
        for call in calls {
            let reply = call.await.unwrap();
            assert_eq!(reply.status, StatusCode::ACCEPTED, "{}", reply.text);
            fresh += usize::from(!reply.replayed());
            reasons.push(reply.json()["cancellation"]["reason"].clone());
        }
        assert_eq!(fresh, 1, "{id}: exactly one cancel is recorded");
        assert_eq!(reasons[0], reasons[1], "{id}: both answer the recorded one");
    }
    for id in &ids {
        let end = server.ends(id, "CANCELLED", "FAILED").await;
        assert_eq!(end["refund"]["amountCents"], 300_000, "{end}");
    }
    let metrics = server.metrics().await;
    assert!(
        metrics.contains("fulfillment_cancel_requests_total{outcome=\"accepted\"} 10"),
        "{metrics}"
    );
    assert_eq!(server.stock_of("harp").await, (10, 0));
    assert_audit_clean(&db);
}
