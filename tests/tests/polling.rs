//! Long-running-operation conventions, against the real binary over HTTP: the `202` points at
//! the status (`Location`), a status still moving says when to poll again (`Retry-After`), an
//! unchanged status is a `304` to `If-None-Match`, and `Idempotency-Key` is the order id's
//! alias.

use blackbox::{Db, Server, TOKEN, order};
use reqwest::header::{ETAG, IF_NONE_MATCH, LOCATION, RETRY_AFTER};
use reqwest::{Method, StatusCode};
use serde_json::Value;

async fn status_with(server: &Server, id: &str, if_none_match: Option<&str>) -> reqwest::Response {
    let mut req = server
        .client
        .get(server.url(&format!("/orders/{id}/status")))
        .bearer_auth(TOKEN);
    if let Some(tag) = if_none_match {
        req = req.header(IF_NONE_MATCH, tag);
    }
    req.send().await.expect("status")
}

fn header(response: &reqwest::Response, name: reqwest::header::HeaderName) -> Option<&str> {
    response.headers().get(name).and_then(|v| v.to_str().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_says_when_to_poll_and_is_not_sent_again_unchanged() {
    let db = Db::new();
    let server = Server::start(&db);
    server.stock("piano", 1, 450_000).await;
    let placed = server
        .place(&order("poll-1", "piano", 1, 450_000, "pm_card_visa"))
        .await;
    assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
    assert_eq!(placed.header("location"), Some("/orders/poll-1/status"));
    server.reaches("poll-1", "AWAITING_APPROVAL").await;

    let first = status_with(&server, "poll-1", None).await;
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(
        header(&first, RETRY_AFTER),
        Some("60"),
        "an order waiting for a person is polled slowly"
    );
    let etag = header(&first, ETAG).expect("an ETag").to_owned();
    let body: Value = first.json().await.unwrap();
    assert_eq!(body["status"], "AWAITING_APPROVAL");

    let unchanged = status_with(&server, "poll-1", Some(&etag)).await;
    assert_eq!(unchanged.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(header(&unchanged, ETAG), Some(etag.as_str()));
    assert!(unchanged.bytes().await.unwrap().is_empty(), "no body");
    let listed = status_with(&server, "poll-1", Some(&format!("\"other\", W/{etag}"))).await;
    assert_eq!(listed.status(), StatusCode::NOT_MODIFIED);

    assert_eq!(
        server.decide("poll-1", "approve").await.status,
        StatusCode::OK
    );
    server.ends("poll-1", "COMPLETED", "SUCCEEDED").await;
    let moved = status_with(&server, "poll-1", Some(&etag)).await;
    assert_eq!(moved.status(), StatusCode::OK, "the status moved on");
    assert_ne!(header(&moved, ETAG), Some(etag.as_str()));
    assert_eq!(
        header(&moved, RETRY_AFTER),
        None,
        "nothing to poll for at a terminal status"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_key_is_an_alias_of_the_order_id() {
    let db = Db::new();
    let server = Server::start(&db);
    server.stock("book", 10, 1_500).await;
    let mut body = order("ignored", "book", 1, 1_500, "pm_card_visa");
    body.as_object_mut().unwrap().remove("orderId");
    let post = |key: &'static str, body: Value| {
        let req = server
            .client
            .post(server.url("/orders"))
            .bearer_auth(TOKEN)
            .header("Idempotency-Key", key)
            .json(&body);
        async move { req.send().await.expect("post") }
    };

    // A body without orderId takes the key (quoted as a structured-field string, or not).
    let first = post("\"idem-7\"", body.clone()).await;
    assert_eq!(first.status(), StatusCode::ACCEPTED);
    assert_eq!(header(&first, LOCATION), Some("/orders/idem-7/status"));
    let again = post("idem-7", body.clone()).await;
    assert_eq!(again.status(), StatusCode::ACCEPTED);
    assert_eq!(
        header(&again, "idempotent-replayed".parse().unwrap()),
        Some("true")
    );
    server.ends("idem-7", "COMPLETED", "SUCCEEDED").await;

    // With both, they must agree; a key that cannot be an order id is refused. Neither stores
    // anything.
    let mut other = body.clone();
    other["orderId"] = "idem-8".into();
    let mismatch = post("idem-9", other).await;
    assert_eq!(mismatch.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let problem: Value = mismatch.json().await.unwrap();
    assert_eq!(problem["errors"][0]["field"], "/orderId", "{problem}");
    let bad = post("not a valid id!", body.clone()).await;
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    for id in ["idem-8", "idem-9"] {
        let r = server
            .request(Method::GET, &format!("/orders/{id}/status"), None)
            .await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{id}: {}", r.text);
    }
    let book = server
        .request(Method::GET, "/inventory/book", None)
        .await
        .json();
    assert_eq!(
        book["available"], 9,
        "one order charged and shipped: {book}"
    );
}
