//! `GET /orders/{id}/events` against the real binary: the current status at once, each change
//! after it, the end after a final status, a reconnect with `Last-Event-ID` missing nothing,
//! another client's order out of reach, and the number of streams bounded per client.

use blackbox::{Db, Server, keys_create, order};
use futures_util::StreamExt;
use reqwest::{Method, StatusCode};
use serde_json::Value;
use std::time::Duration;

/// One server-sent event: its id and data.
#[derive(Debug, Clone)]
struct Sse {
    id: String,
    data: Value,
}

/// Opens the stream of `order` for `key` (with `Last-Event-ID` when given).
async fn open(server: &Server, order: &str, key: &str, last: Option<&str>) -> reqwest::Response {
    let mut req = server
        .client
        .get(server.url(&format!("/orders/{order}/events")))
        .bearer_auth(key);
    if let Some(last) = last {
        req = req.header("last-event-id", last);
    }
    req.send().await.expect("open the stream")
}

/// Reads events from `response` until it has `n` of them, or the stream ends (30 s at most).
async fn read(response: &mut Option<reqwest::Response>, n: usize) -> (Vec<Sse>, bool) {
    let mut events = Vec::new();
    let mut text = String::new();
    let body = response.take().expect("a response");
    let mut stream = body.bytes_stream();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        while let Some(end) = text.find("\n\n") {
            let block: String = text.drain(..end + 2).collect();
            let (mut id, mut data) = (None, None);
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("id:") {
                    id = Some(v.trim().to_owned());
                } else if let Some(v) = line.strip_prefix("data:") {
                    data = serde_json::from_str(v.trim()).ok();
                }
            }
            if let (Some(id), Some(data)) = (id, data) {
                events.push(Sse { id, data });
            }
        }
        if events.len() >= n {
            return (events, false);
        }
        match tokio::time::timeout_at(deadline, stream.next()).await {
            Ok(Some(Ok(chunk))) => text.push_str(&String::from_utf8_lossy(&chunk)),
            Ok(None) => return (events, true),
            Ok(Some(Err(e))) => panic!("stream: {e}"),
            Err(_) => panic!("no event within 30 s; got {events:?}"),
        }
    }
}

fn ids(events: &[Sse]) -> Vec<&str> {
    events.iter().map(|e| e.id.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_stream_sends_each_change_and_resumes_after_the_last_event_id() {
    let db = Db::new();
    let server = Server::start(&db);
    let alice = keys_create(&db, "alice-shop", "client");
    let bob = keys_create(&db, "bob-shop", "client");
    server.stock("piano", 2, 450_000).await;
    let placed = server
        .place_as(&order("sse-1", "piano", 1, 450_000, "pm_card_visa"), &alice)
        .await;
    assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
    server.reaches("sse-1", "AWAITING_APPROVAL").await;

    // At once: the current status, and nothing more while it waits.
    let response = open(&server, "sse-1", &alice, None).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let mut response = Some(response);
    let (first, ended) = read(&mut response, 1).await;
    assert!(!ended);
    assert_eq!(ids(&first), ["AWAITING_APPROVAL"]);
    assert_eq!(first[0].data["orderId"], "sse-1");
    assert_eq!(first[0].data["status"], "AWAITING_APPROVAL");

    // A second stream, opened now, follows the approval to the end.
    let mut live = Some(open(&server, "sse-1", &alice, Some("AWAITING_APPROVAL")).await);
    assert_eq!(
        server.decide("sse-1", "approve").await.status,
        StatusCode::OK
    );
    let (after, ended) = read(&mut live, 10).await;
    assert!(ended, "closed after the final status: {after:?}");
    assert_eq!(ids(&after), ["APPROVED", "COMPLETED"]);

    // A reconnect after RESERVED gets every later status, once each, then the end.
    let mut again = Some(open(&server, "sse-1", &alice, Some("RESERVED")).await);
    let (rest, ended) = read(&mut again, 10).await;
    assert!(ended);
    assert_eq!(
        ids(&rest),
        ["CHARGED", "AWAITING_APPROVAL", "APPROVED", "COMPLETED"]
    );

    // Another client's order does not exist for bob.
    let theirs = server
        .send(Method::GET, "/orders/sse-1/events", None, Some(&bob))
        .await;
    assert_eq!(theirs.status, StatusCode::NOT_FOUND, "{}", theirs.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_holds_a_bounded_number_of_streams() {
    let db = Db::new();
    let server = Server::start(&db);
    let alice = keys_create(&db, "alice-shop", "client");
    server.stock("piano", 1, 450_000).await;
    server
        .place_as(&order("sse-2", "piano", 1, 450_000, "pm_card_visa"), &alice)
        .await;
    server.reaches("sse-2", "AWAITING_APPROVAL").await;
    let mut open_streams = Vec::new();
    for _ in 0..8 {
        let r = open(&server, "sse-2", &alice, None).await;
        assert_eq!(r.status(), StatusCode::OK);
        open_streams.push(r);
    }
    let refused = open(&server, "sse-2", &alice, None).await;
    assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
    let operator = open(&server, "sse-2", blackbox::TOKEN, None).await;
    assert_eq!(
        operator.status(),
        StatusCode::OK,
        "the bound is per principal"
    );
    drop(open_streams);
    // Closed streams give their places back (the server notices on its next write or poll).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let r = open(&server, "sse-2", &alice, None).await;
        if r.status() == StatusCode::OK {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never given back");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}
