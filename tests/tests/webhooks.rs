//! Webhooks against the real binary over HTTP, received by a server in the test that verifies
//! every signature with the `standardwebhooks` crate as a receiver would: each event delivered
//! with a stable `webhook-id`, a 503's `Retry-After` honoured, a rotation signing with both
//! secrets, a 410 disabling its endpoint, the delivery log, a replay, the guard against private
//! addresses, another client's endpoints out of reach, and every event delivered at least once,
//! with the same id, across a SIGKILL.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode as AxumStatus};
use axum::response::{IntoResponse, Response};
use blackbox::{Db, Server, TOKEN, keys_create, order, serve_command};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One delivery as the receiver got it.
#[derive(Debug, Clone)]
struct Received {
    id: String,
    body: Value,
    /// Whether a signature verified with the receiver's secrets at the time.
    verified_with: Vec<usize>,
}

/// How the receiver answers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Ok,
    /// 503 with `Retry-After: 1` to the first attempt of each message, 200 after.
    UnavailableFirst,
    Gone,
    Failing,
}

#[derive(Default)]
struct Inner {
    secrets: Vec<String>,
    received: Vec<Received>,
    attempts: HashMap<String, u32>,
    mode: HashMap<String, Mode>,
}

#[derive(Clone, Default)]
struct Receiver(Arc<Mutex<Inner>>);

impl Receiver {
    fn received(&self) -> Vec<Received> {
        self.0.lock().unwrap().received.clone()
    }
    fn trust(&self, secret: &str) {
        self.0.lock().unwrap().secrets.push(secret.to_owned());
    }
    fn set_mode(&self, path: &str, mode: Mode) {
        self.0.lock().unwrap().mode.insert(path.to_owned(), mode);
    }
    /// Waits until `pred` holds of what was received (30 s at most).
    async fn until(&self, what: &str, pred: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            let got = self.received();
            if pred(&got) {
                return got;
            }
            assert!(Instant::now() < until, "{what}: got {got:#?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

async fn receive(
    State(receiver): State<Receiver>,
    axum::extract::Path(path): axum::extract::Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut inner = receiver.0.lock().unwrap();
    let id = headers
        .get("webhook-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let attempt = {
        let n = inner.attempts.entry(format!("{path}/{id}")).or_default();
        *n += 1;
        *n
    };
    let mode = inner.mode.get(&path).copied().unwrap_or(Mode::Ok);
    match mode {
        Mode::Gone => return AxumStatus::GONE.into_response(),
        Mode::Failing => return AxumStatus::INTERNAL_SERVER_ERROR.into_response(),
        Mode::UnavailableFirst if attempt == 1 => {
            return (AxumStatus::SERVICE_UNAVAILABLE, [("retry-after", "1")]).into_response();
        }
        _ => {}
    }
    let verified_with: Vec<usize> = inner
        .secrets
        .iter()
        .enumerate()
        .filter(|(_, secret)| {
            standardwebhooks::Webhook::new(secret)
                .and_then(|w| w.verify(&body, &headers))
                .is_ok()
        })
        .map(|(i, _)| i)
        .collect();
    if verified_with.is_empty() {
        return AxumStatus::UNAUTHORIZED.into_response();
    }
    inner.received.push(Received {
        id,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        verified_with,
    });
    AxumStatus::NO_CONTENT.into_response()
}

/// A receiver on a loopback port: `http://127.0.0.1:PORT/{path}`.
async fn start_receiver() -> (Receiver, String) {
    let receiver = Receiver::default();
    let app = Router::new()
        .route("/{path}", axum::routing::post(receive))
        .with_state(receiver.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (receiver, base)
}

/// The service with private endpoints allowed (the receiver is on loopback) and quick retries.
fn start(db: &Db) -> Server {
    let mut cmd = serve_command(db);
    cmd.args([
        "--operator-token",
        TOKEN,
        "--webhook-allow-private",
        "--webhook-retries",
        "1s,1s",
    ]);
    Server::spawn(cmd)
}

async fn register(server: &Server, key: &str, url: &str, events: Option<Value>) -> Value {
    let mut body = json!({ "url": url });
    if let Some(events) = events {
        body["eventTypes"] = events;
    }
    let r = server
        .send(Method::POST, "/webhooks/endpoints", Some(&body), Some(key))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text);
    r.json()
}

fn of_type<'a>(got: &'a [Received], order: &str, kind: &str) -> Vec<&'a Received> {
    got.iter()
        .filter(|r| r.body["type"] == kind && r.body["data"]["orderId"] == order)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_are_signed_retried_rotated_logged_and_replayed() {
    let (receiver, base) = start_receiver().await;
    let db = Db::new();
    let server = start(&db);
    let alice = keys_create(&db, "alice-shop", "client");
    let bob = keys_create(&db, "bob-shop", "client");
    server.stock("book", 100, 1_500).await;
    server.stock("piano", 5, 450_000).await;

    receiver.set_mode("main", Mode::UnavailableFirst);
    let endpoint = register(&server, &alice, &format!("{base}/main"), None).await;
    let secret = endpoint["secret"].as_str().expect("a secret").to_owned();
    assert!(secret.starts_with("whsec_"), "{secret}");
    receiver.trust(&secret);
    let id = endpoint["id"].as_str().unwrap().to_owned();

    // A small order: accepted and completed, each once per message id, signed, after a 503
    // that named a Retry-After.
    let placed = server
        .place_as(&order("hook-1", "book", 1, 1_500, "pm_card_visa"), &alice)
        .await;
    assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
    let got = receiver
        .until("accepted and completed", |got| {
            !of_type(got, "hook-1", "order.accepted").is_empty()
                && !of_type(got, "hook-1", "order.completed").is_empty()
        })
        .await;
    let completed = of_type(&got, "hook-1", "order.completed")[0];
    assert_eq!(completed.id, "msg_hook-1.completed");
    assert_eq!(completed.body["data"]["status"], "COMPLETED");
    assert!(completed.body["timestamp"].as_str().is_some());
    let log = server
        .send(
            Method::GET,
            &format!("/webhooks/endpoints/{id}/deliveries"),
            None,
            Some(&alice),
        )
        .await;
    assert_eq!(log.status, StatusCode::OK, "{}", log.text);
    let entry = log.json()["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["webhookId"] == "msg_hook-1.completed")
        .cloned()
        .expect("in the log");
    assert_eq!(entry["state"], "DELIVERED");
    let statuses: Vec<u64> = entry["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["status"].as_u64().unwrap_or(0))
        .collect();
    assert_eq!(statuses, [503, 204], "{entry}");

    // Bob sees none of it.
    let theirs = server
        .send(
            Method::GET,
            &format!("/webhooks/endpoints/{id}"),
            None,
            Some(&bob),
        )
        .await;
    assert_eq!(theirs.status, StatusCode::NOT_FOUND, "{}", theirs.text);
    let listed = server
        .send(Method::GET, "/webhooks/endpoints", None, Some(&bob))
        .await;
    assert_eq!(listed.json()["items"], json!([]));

    // A rotation: the next deliveries carry both signatures.
    receiver.set_mode("main", Mode::Ok);
    let rotated = server
        .send(
            Method::POST,
            &format!("/webhooks/endpoints/{id}/rotate"),
            None,
            Some(&alice),
        )
        .await;
    assert_eq!(rotated.status, StatusCode::OK, "{}", rotated.text);
    let new_secret = rotated.json()["secret"].as_str().unwrap().to_owned();
    assert_ne!(new_secret, secret);
    receiver.trust(&new_secret);
    assert!(rotated.json()["previousSecretExpiresAt"].as_str().is_some());
    server
        .place_as(
            &order("hook-2", "piano", 1, 450_000, "pm_card_visa"),
            &alice,
        )
        .await;
    let got = receiver
        .until("awaiting approval", |got| {
            !of_type(got, "hook-2", "order.awaiting_approval").is_empty()
        })
        .await;
    let waiting = of_type(&got, "hook-2", "order.awaiting_approval")[0];
    assert_eq!(
        waiting.verified_with,
        [0, 1],
        "signed by the old and the new secret"
    );

    // Cancelled: the event comes.
    let cancel = server
        .send(
            Method::POST,
            "/orders/hook-2/cancel",
            Some(&json!({})),
            Some(&alice),
        )
        .await;
    assert_eq!(cancel.status, StatusCode::ACCEPTED, "{}", cancel.text);
    receiver
        .until("cancelled", |got| {
            !of_type(got, "hook-2", "order.cancelled").is_empty()
        })
        .await;

    // An endpoint answering 410 is disabled, and says so.
    receiver.set_mode("gone", Mode::Gone);
    let gone = register(
        &server,
        &alice,
        &format!("{base}/gone"),
        Some(json!(["order.completed"])),
    )
    .await;
    let gone_id = gone["id"].as_str().unwrap().to_owned();
    server
        .place_as(&order("hook-3", "book", 1, 1_500, "pm_card_visa"), &alice)
        .await;
    server.ends("hook-3", "COMPLETED", "SUCCEEDED").await;
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let ep = server
            .send(
                Method::GET,
                &format!("/webhooks/endpoints/{gone_id}"),
                None,
                Some(&alice),
            )
            .await
            .json();
        if !ep["disabled"].is_null() {
            assert!(
                ep["disabled"]["reason"].as_str().unwrap().contains("410"),
                "{ep}"
            );
            break;
        }
        assert!(Instant::now() < until, "not disabled: {ep}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // An endpoint failing every attempt: failed after the schedule; replayed once it answers.
    receiver.set_mode("flaky", Mode::Failing);
    let flaky = register(
        &server,
        &alice,
        &format!("{base}/flaky"),
        Some(json!(["order.completed"])),
    )
    .await;
    receiver.trust(flaky["secret"].as_str().unwrap());
    let flaky_id = flaky["id"].as_str().unwrap().to_owned();
    let before = chrono::Utc::now() - chrono::Duration::seconds(5);
    server
        .place_as(&order("hook-4", "book", 1, 1_500, "pm_card_visa"), &alice)
        .await;
    let deliveries = format!("/webhooks/endpoints/{flaky_id}/deliveries");
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let log = server
            .send(Method::GET, &deliveries, None, Some(&alice))
            .await
            .json();
        let first = &log["items"][0];
        if first["state"] == "FAILED" {
            assert_eq!(first["attempts"].as_array().unwrap().len(), 3, "{first}");
            break;
        }
        assert!(Instant::now() < until, "never failed for good: {log}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    receiver.set_mode("flaky", Mode::Ok);
    let replay = server
        .send(
            Method::POST,
            &format!("/webhooks/endpoints/{flaky_id}/replay"),
            Some(&json!({ "since": before })),
            Some(&alice),
        )
        .await;
    assert_eq!(replay.status, StatusCode::ACCEPTED, "{}", replay.text);
    assert_eq!(replay.json()["replayed"], 1);
    receiver
        .until("replayed", |got| {
            got.iter()
                .any(|r| r.id == "msg_hook-4.completed" && r.verified_with == [2])
        })
        .await;

    // Bad input: nothing registered.
    for bad in [
        json!({"url": "ftp://example.com/x"}),
        json!({"url": "https://example.com/x", "eventTypes": ["order.shipped"]}),
        json!({"url": "https://example.com/x", "extra": 1}),
        json!({}),
    ] {
        let r = server
            .send(
                Method::POST,
                "/webhooks/endpoints",
                Some(&bad),
                Some(&alice),
            )
            .await;
        assert_eq!(
            r.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{bad}: {}",
            r.text
        );
    }
    let mine = server
        .send(Method::GET, "/webhooks/endpoints", None, Some(&alice))
        .await;
    assert_eq!(mine.json()["items"].as_array().unwrap().len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_addresses_are_refused_unless_an_operator_allows_them() {
    let db = Db::new();
    let server = Server::start(&db);
    let alice = keys_create(&db, "alice-shop", "client");
    for url in [
        "http://127.0.0.1:9/hook",
        "https://127.0.0.1/hook",
        "https://localhost/hook",
        "https://169.254.169.254/latest/meta-data",
        "https://10.0.0.7/hook",
        "https://[::1]/hook",
    ] {
        let r = server
            .send(
                Method::POST,
                "/webhooks/endpoints",
                Some(&json!({ "url": url })),
                Some(&alice),
            )
            .await;
        assert_eq!(
            r.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{url}: {}",
            r.text
        );
        assert!(r.text.contains("/url"), "{}", r.text);
    }
    let listed = server
        .send(Method::GET, "/webhooks/endpoints", None, Some(&alice))
        .await;
    assert_eq!(listed.json()["items"], json!([]), "nothing stored");
    let public = server
        .send(
            Method::POST,
            "/webhooks/endpoints",
            Some(&json!({ "url": "https://hooks.example.com/orders" })),
            Some(&alice),
        )
        .await;
    assert_eq!(public.status, StatusCode::CREATED, "{}", public.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_event_arrives_at_least_once_with_the_same_id_across_a_sigkill() {
    let (receiver, base) = start_receiver().await;
    let db = Db::new();
    let mut server = start(&db);
    let alice = keys_create(&db, "alice-shop", "client");
    server.stock("book", 1_000, 1_500).await;
    let endpoint = register(&server, &alice, &format!("{base}/all"), None).await;
    receiver.trust(endpoint["secret"].as_str().unwrap());
    let ids: Vec<String> = (0..40).map(|i| format!("kill-{i}")).collect();
    for (i, id) in ids.iter().enumerate() {
        let placed = server
            .place_as(&order(id, "book", 1, 1_500, "pm_card_visa"), &alice)
            .await;
        assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
        if i == 25 {
            server.kill();
            server = start(&db);
        }
    }
    for id in &ids {
        server.ends(id, "COMPLETED", "SUCCEEDED").await;
    }
    let got = receiver
        .until("every order's accepted and completed", |got| {
            ids.iter().all(|id| {
                !of_type(got, id, "order.accepted").is_empty()
                    && !of_type(got, id, "order.completed").is_empty()
            })
        })
        .await;
    // At least once, and every copy of a message is the same message.
    let mut by_id: HashMap<&str, Vec<&Value>> = HashMap::new();
    for r in &got {
        by_id.entry(r.id.as_str()).or_default().push(&r.body);
    }
    for (id, copies) in &by_id {
        assert!(copies.windows(2).all(|w| w[0] == w[1]), "{id}: {copies:?}");
    }
    for id in &ids {
        assert!(by_id.contains_key(format!("msg_{id}.accepted").as_str()));
        assert!(by_id.contains_key(format!("msg_{id}.completed").as_str()));
    }
    assert!(
        got.iter().all(|r| r.verified_with == [0]),
        "every copy signed"
    );
}
