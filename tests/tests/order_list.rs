//! `GET /orders` against the real binary over HTTP: a client lists its own orders only, an
//! operator every order, newest first, a page at a time through an opaque cursor, filtered by
//! status and creation window; a bad filter is a 400 naming it.

use blackbox::{Db, Server, keys_create, order};
use reqwest::{Method, StatusCode};
use serde_json::Value;

/// Every order `path` lists for `key`, following `next` to the end; each page at most `limit`.
async fn all(server: &Server, key: &str, query: &str, limit: usize) -> Vec<Value> {
    let mut items = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..1000 {
        let mut path = format!("/orders?limit={limit}{query}");
        if let Some(after) = &after {
            path.push_str(&format!("&after={}", urlencoding(after)));
        }
        let page = server.send(Method::GET, &path, None, Some(key)).await;
        assert_eq!(page.status, StatusCode::OK, "{path}: {}", page.text);
        let body = page.json();
        let got = body["items"].as_array().expect("items").clone();
        assert!(got.len() <= limit, "{path}: {} items", got.len());
        items.extend(got);
        match body["next"].as_str() {
            Some(next) => after = Some(next.to_owned()),
            None => return items,
        }
    }
    panic!("the listing never ends");
}

fn urlencoding(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn ids(orders: &[Value]) -> Vec<&str> {
    orders
        .iter()
        .map(|o| o["orderId"].as_str().expect("orderId"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_lists_its_own_orders_newest_first_and_an_operator_every_order() {
    let db = Db::new();
    let server = Server::start(&db);
    let alice = keys_create(&db, "alice-shop", "client");
    let bob = keys_create(&db, "bob-shop", "client");
    server.stock("book", 100, 1_500).await;
    server.stock("piano", 10, 450_000).await;

    let mut alices = Vec::new();
    for i in 0..5 {
        // One piano among alice's books: it waits for an operator.
        let (id, sku, price) = match i {
            2 => (format!("alice-{i}"), "piano", 450_000),
            _ => (format!("alice-{i}"), "book", 1_500),
        };
        let placed = server
            .place_as(&order(&id, sku, 1, price, "pm_card_visa"), &alice)
            .await;
        assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
        alices.push(id);
        let theirs = format!("bob-{i}");
        let placed = server
            .place_as(&order(&theirs, "book", 1, 1_500, "pm_card_visa"), &bob)
            .await;
        assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
    }
    for i in 0..5 {
        server.settles(&format!("bob-{i}")).await;
        if i != 2 {
            server.settles(&format!("alice-{i}")).await;
        }
    }
    server.reaches("alice-2", "AWAITING_APPROVAL").await;

    let newest_first: Vec<&str> = alices.iter().rev().map(String::as_str).collect();
    let mine = all(&server, &alice, "", 2).await;
    assert_eq!(ids(&mine), newest_first, "alice's own, newest first");
    let first = &mine[0];
    assert_eq!(first["status"], "COMPLETED");
    assert_eq!(first["amountCents"], 1_500);
    assert_eq!(first["statusUrl"], "/orders/alice-4/status");
    assert!(first["createdAt"].as_str().is_some());

    let waiting = all(&server, &alice, "&status=AWAITING_APPROVAL", 10).await;
    assert_eq!(ids(&waiting), ["alice-2"]);
    let none = all(&server, &bob, "&status=AWAITING_APPROVAL", 10).await;
    assert!(none.is_empty(), "bob's are all completed: {none:?}");

    // A creation window: from alice-1's creation (inclusive) to alice-3's (exclusive).
    let created = |id: &str| {
        mine.iter()
            .find(|o| o["orderId"] == id)
            .and_then(|o| o["createdAt"].as_str())
            .expect("createdAt")
            .to_owned()
    };
    let window = format!(
        "&createdSince={}&createdUntil={}",
        urlencoding(&created("alice-1")),
        urlencoding(&created("alice-3"))
    );
    assert_eq!(
        ids(&all(&server, &alice, &window, 1).await),
        ["alice-2", "alice-1"]
    );

    // An operator sees both clients' orders, interleaved, newest first.
    let everyone = all(&server, blackbox::TOKEN, "", 3).await;
    assert_eq!(everyone.len(), 10);
    let order_of_creation: Vec<String> = (0..5)
        .rev()
        .flat_map(|i| [format!("bob-{i}"), format!("alice-{i}")])
        .collect();
    assert_eq!(ids(&everyone), order_of_creation);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_listing_query_is_a_400_naming_each_parameter() {
    let db = Db::new();
    let server = Server::start(&db);
    let bad = server
        .operator(
            Method::GET,
            "/orders?status=SHIPPED&createdSince=yesterday&limit=0&after=nope",
            None,
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.text);
    let fields: Vec<String> = bad.json()["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .map(|e| e["field"].as_str().unwrap_or_default().to_owned())
        .collect();
    for field in ["status", "createdSince", "limit", "after"] {
        assert!(fields.iter().any(|f| f == field), "{field} in {fields:?}");
    }
    let backwards = server
        .operator(
            Method::GET,
            "/orders?createdSince=2026-12-04T10:00:00Z&createdUntil=2026-12-04T09:00:00Z",
            None,
        )
        .await;
    assert_eq!(backwards.status, StatusCode::OK, "an empty window");
    assert_eq!(backwards.json()["items"], serde_json::json!([]));
    let anonymous = server.anonymous(Method::GET, "/orders", None).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
}
