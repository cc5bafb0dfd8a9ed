//! The README's walk-through, over HTTP against the real binary: the front door, stock, a small
//! order that completes and reads back as placed, a large one an operator approves, a declined
//! card compensated, a large one its client cancels, a replay and a conflict, the stock listed.

use blackbox::{Db, Server, keys_create, order, unpriced};
use reqwest::{Method, StatusCode};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_walk_through_works_over_http() {
    let db = Db::new();
    let server = Server::start(&db);
    // The README's keys: an operator and a client, made beside the running service.
    let grace = keys_create(&db, "grace", "operator");
    let shop = keys_create(&db, "shop-1", "client");
    let index = server.request(Method::GET, "/", None).await;
    assert_eq!(index.json()["docs"], "/docs", "{}", index.text);

    // Stocking is an operator action.
    let anonymous = server
        .anonymous(
            Method::PUT,
            "/inventory/book",
            Some(&json!({ "available": 10 })),
        )
        .await;
    assert_eq!(
        anonymous.status,
        StatusCode::UNAUTHORIZED,
        "{}",
        anonymous.text
    );
    server.stock("book", 10, 1_500).await;
    server.stock("piano", 1, 450_000).await;

    // A small order, priced by the catalog, runs to completion on its own.
    let small = unpriced(order("walk-small", "book", 2, 1_500, "pm_card_visa"));
    let placed = server.place_as(&small, &shop).await;
    assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
    assert!(!placed.replayed());
    assert_eq!(placed.header("location"), Some("/orders/walk-small/status"));
    let arn = placed.json()["executionArn"].as_str().unwrap().to_owned();
    assert!(arn.ends_with(":walk-small"), "{arn}");
    let done = server.ends("walk-small", "COMPLETED", "SUCCEEDED").await;
    assert_eq!(done["payment"]["amountCents"], 3_000);
    assert!(done["shipment"]["trackingNumber"].is_string(), "{done}");
    let placed_order = server
        .send(Method::GET, "/orders/walk-small", None, Some(&shop))
        .await;
    assert_eq!(placed_order.json()["items"][0]["lineTotalCents"], 3_000);

    // A price the catalog does not say is refused, naming the line, and stores nothing.
    let cheap = order("walk-cheap", "book", 60, 1, "pm_card_visa");
    let refused = server.place_as(&cheap, &shop).await;
    assert_eq!(
        refused.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        refused.text
    );
    assert_eq!(refused.problem().as_deref(), Some("price-mismatch"));
    assert_eq!(
        refused.json()["errors"][0]["field"],
        "/items/0/unitPriceCents"
    );
    let missing = server
        .send(Method::GET, "/orders/walk-cheap", None, Some(&shop))
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND, "{}", missing.text);

    // A large order waits for an operator, who approves it.
    let large = unpriced(order("walk-large", "piano", 1, 450_000, "pm_card_visa"));
    let placed = server.place_as(&large, &shop).await;
    assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
    server.reaches("walk-large", "AWAITING_APPROVAL").await;
    let pending = server.operator(Method::GET, "/approvals", None).await;
    assert_eq!(pending.status, StatusCode::OK, "{}", pending.text);
    assert!(
        pending.json()["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["orderId"] == "walk-large"),
        "{}",
        pending.text
    );
    let approved = server
        .send(
            Method::POST,
            "/orders/walk-large/approval",
            Some(&json!({"decision": "approve"})),
            Some(&grace),
        )
        .await;
    assert_eq!(approved.status, StatusCode::OK, "{}", approved.text);
    assert_ne!(
        approved.json()["status"],
        "AWAITING_APPROVAL",
        "{}",
        approved.text
    );
    let done = server.reaches("walk-large", "COMPLETED").await;
    assert_eq!(done["approval"]["decision"], "approve");
    assert_eq!(
        done["approval"]["decidedBy"], "grace",
        "the operator's principal"
    );

    // A declined card is compensated: the order is cancelled with the reason, stock released.
    let declined = unpriced(order(
        "walk-declined",
        "book",
        1,
        1_500,
        "pm_card_chargeDeclined",
    ));
    assert_eq!(
        server.place_as(&declined, &shop).await.status,
        StatusCode::ACCEPTED
    );
    let cancelled = server.reaches("walk-declined", "CANCELLED").await;
    assert_eq!(
        cancelled["failure"]["error"], "Payment.Declined",
        "{cancelled}"
    );
    assert!(cancelled["payment"].is_null(), "{cancelled}");

    // The client cancels a large order while it waits for approval: refunded, released.
    server.stock("organ", 1, 900_000).await;
    let organ = unpriced(order("walk-cancelled", "organ", 1, 900_000, "pm_card_visa"));
    assert_eq!(
        server.place_as(&organ, &shop).await.status,
        StatusCode::ACCEPTED
    );
    server.reaches("walk-cancelled", "AWAITING_APPROVAL").await;
    let cancel = server
        .send(
            Method::POST,
            "/orders/walk-cancelled/cancel",
            Some(&json!({"reason": "ordered twice"})),
            Some(&shop),
        )
        .await;
    assert_eq!(cancel.status, StatusCode::ACCEPTED, "{}", cancel.text);
    assert_eq!(cancel.json()["cancellation"]["requestedBy"], "client");
    let undone = server.ends("walk-cancelled", "CANCELLED", "FAILED").await;
    assert_eq!(undone["failure"]["error"], "Order.Cancelled", "{undone}");
    assert_eq!(undone["refund"]["amountCents"], 900_000, "{undone}");
    let shipped = server
        .send(
            Method::POST,
            "/orders/walk-small/cancel",
            Some(&json!({})),
            Some(&shop),
        )
        .await;
    assert_eq!(shipped.status, StatusCode::CONFLICT, "{}", shipped.text);
    assert_eq!(shipped.problem().as_deref(), Some("order-shipped"));

    // The client's cancelled orders, newest first: the one it cancelled, then the declined one.
    let listed = server
        .send(
            Method::GET,
            "/orders?status=CANCELLED&limit=2",
            None,
            Some(&shop),
        )
        .await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.text);
    let body = listed.json();
    let ids: Vec<&str> = body["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|o| o["orderId"].as_str())
        .collect();
    assert_eq!(ids, ["walk-cancelled", "walk-declined"], "{}", listed.text);

    // A webhook endpoint: registered with its secret shown once.
    let endpoint = server
        .send(
            Method::POST,
            "/webhooks/endpoints",
            Some(&json!({"url": "https://shop.example.com/hooks/orders"})),
            Some(&shop),
        )
        .await;
    assert_eq!(endpoint.status, StatusCode::CREATED, "{}", endpoint.text);
    let endpoint = endpoint.json();
    assert!(endpoint["secret"].as_str().unwrap().starts_with("whsec_"));
    assert_eq!(endpoint["eventTypes"], json!([]));
    assert!(endpoint["disabled"].is_null());

    // The status stream of an order that has ended: its status, then the end.
    let stream = server
        .client
        .get(server.url("/orders/walk-large/events"))
        .bearer_auth(&shop)
        .send()
        .await
        .expect("the stream");
    assert_eq!(stream.status(), StatusCode::OK);
    let text = stream.text().await.expect("it ends");
    assert!(text.contains("id: COMPLETED"), "{text}");

    // The same order again replays: same answer, same execution.
    let again = server.place_as(&small, &shop).await;
    assert_eq!(again.status, StatusCode::ACCEPTED, "{}", again.text);
    assert!(again.replayed(), "{:?}", again.headers);
    assert_eq!(again.json()["executionArn"], arn.as_str());

    // The same id with another body conflicts and changes nothing.
    let mut other = small.clone();
    other["items"][0]["quantity"] = json!(5);
    let conflict = server.place_as(&other, &shop).await;
    assert_eq!(conflict.status, StatusCode::CONFLICT, "{}", conflict.text);
    assert_eq!(conflict.problem().as_deref(), Some("order-conflict"));
    assert_eq!(
        conflict.header("content-type"),
        Some("application/problem+json")
    );
    assert_eq!(server.status("walk-small").await["amountCents"], 3_000);

    // Stock: two books shipped, the declined one's released; the piano shipped.
    let book = server.request(Method::GET, "/inventory/book", None).await;
    assert_eq!(book.json()["available"], 8, "{}", book.text);
    assert_eq!(book.json()["reserved"], 0, "{}", book.text);
    let piano = server.request(Method::GET, "/inventory/piano", None).await;
    assert_eq!(piano.json()["available"], 0, "{}", piano.text);
    let all = server
        .request(Method::GET, "/inventory?limit=10", None)
        .await;
    assert_eq!(
        all.json(),
        json!({"items": [
            {"sku": "book", "available": 8, "reserved": 0, "shipped": 2, "stocked": 10,
                "price": {"cents": 1_500, "currency": "EUR"}},
            {"sku": "organ", "available": 1, "reserved": 0, "shipped": 0, "stocked": 1,
                "price": {"cents": 900_000, "currency": "EUR"}},
            {"sku": "piano", "available": 0, "reserved": 0, "shipped": 1, "stocked": 1,
                "price": {"cents": 450_000, "currency": "EUR"}},
        ], "nextCursor": null})
    );

    server.stop();
}
