//! No secret leaves the service: the real binary, configured with an operator token and a
//! payment provider's key, logging everything (`RUST_LOG=trace`, JSON), is driven through failed
//! authentication, provider errors and a provider that refuses (and quotes back) a revoked key;
//! neither secret, nor the wrong token a caller tried, appears in its output, in any answer or
//! in `/metrics`. `--help`, a refused setting and a start refused for a wrong key do not show
//! them either.
//!
//! A revoked key is the operator's fault, not the order's: the order is not cancelled, its
//! charge is retried, `/readyz` fails saying why, and once the key works again the order
//! completes.

use blackbox::{DEADLINE, Db, Reply, Server, TOKEN, binary, order, serve_command};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use testkit::fake_stripe::{FakeStripe, PM_DECLINED, SECRET_KEY};

/// What a caller guessing at the operator token sends.
const WRONG_TOKEN: &str = "guessed-operator-token-9d8c7b6a";
/// A key the provider does not know: it answers 401 quoting it.
const WRONG_KEY: &str = "sk_test_wrong_key_5f4e3d2c1b0a";
const SECRETS: [&str; 4] = [TOKEN, SECRET_KEY, WRONG_TOKEN, WRONG_KEY];

/// The service paying through `stripe` with `key`, its secrets in the environment (as a
/// deployment passes them), logging at the most verbose level.
fn start(db: &Db, stripe: &FakeStripe, key: &str) -> Server {
    let mut cmd = serve_command(db);
    cmd.args(["--payments", "stripe", "--stripe-url", &stripe.base_url])
        .args(["--log-format", "json"])
        .env("FULFILLMENT_OPERATOR_TOKEN", TOKEN)
        .env("FULFILLMENT_STRIPE_KEY", key)
        .env("RUST_LOG", "trace");
    Server::spawn(cmd)
}

/// Polls the order's status until `done`; the last status body.
async fn until(server: &Server, id: &str, what: &str, done: impl Fn(&Value) -> bool) -> Reply {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let r = server
            .request(Method::GET, &format!("/orders/{id}/status"), None)
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        if done(&r.json()) {
            return r;
        }
        assert!(Instant::now() < deadline, "{id} never {what}: {}", r.text);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_reaches_the_logs_the_answers_or_the_metrics() {
    let (stripe, revoking) = (FakeStripe::start().await, FakeStripe::start().await);
    let (db, revoked_db) = (Db::new(), Db::new());
    let server = start(&db, &stripe, SECRET_KEY);
    let misconfigured = start(&revoked_db, &revoking, SECRET_KEY);
    let mut answers: Vec<String> = Vec::new();

    // Operator endpoints tried with the wrong token, every way a caller might send it.
    for (method, path) in [
        (Method::GET, "/approvals"),
        (Method::PUT, "/inventory/book"),
        (Method::POST, "/orders/o-1/approval"),
    ] {
        for authorization in [
            format!("Bearer {WRONG_TOKEN}"),
            format!("Basic {WRONG_TOKEN}"),
            WRONG_TOKEN.to_owned(),
        ] {
            let response = server
                .client
                .request(method.clone(), server.url(path))
                .header("authorization", authorization)
                .json(&json!({ "available": 1, "decision": "approve" }))
                .send()
                .await
                .expect("an answer");
            let r = Reply::read(response).await;
            assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{method} {path}");
            answers.push(r.text);
        }
    }
    let r = server
        .anonymous(
            Method::GET,
            &format!("/approvals?token={WRONG_TOKEN}&access_token={WRONG_TOKEN}"),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    answers.push(r.text);

    // A charge, a declined card, and an outage the charge step retries through.
    server.stock("book", 10, 1_500).await;
    misconfigured.stock("book", 10, 1_500).await;
    for (id, method) in [("paid", "pm_card_visa"), ("declined", PM_DECLINED)] {
        let placed = server.place(&order(id, "book", 1, 1_500, method)).await;
        assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
        answers.push(placed.text);
    }
    answers.push(server.reaches("paid", "COMPLETED").await.to_string());
    answers.push(server.reaches("declined", "CANCELLED").await.to_string());
    stripe.fail_next(2);
    server
        .place(&order("outage", "book", 1, 1_500, "pm_card_visa"))
        .await;
    answers.push(server.reaches("outage", "COMPLETED").await.to_string());

    // The provider stops taking the service's key (rolled in its dashboard), quoting it back.
    revoking.revoke_key(true);
    misconfigured
        .place(&order("revoked-key", "book", 1, 1_500, "pm_card_visa"))
        .await;
    let refused = until(&misconfigured, "revoked-key", "refused", |_| {
        revoking
            .requests()
            .iter()
            .any(|r| r.path == "/v1/payment_intents")
    })
    .await;
    answers.push(refused.text);
    // The provider has seen the request; the service takes in its refusal a moment later.
    let until_unready = std::time::Instant::now() + blackbox::DEADLINE;
    let ready = loop {
        let ready = misconfigured.anonymous(Method::GET, "/readyz", None).await;
        if ready.status != StatusCode::OK || std::time::Instant::now() >= until_unready {
            break ready;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(
        ready.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        ready.text
    );
    // The refusal, with the key it quoted replaced, says why.
    assert!(
        ready
            .text
            .contains("Invalid API Key provided: Bearer <redacted>"),
        "{}",
        ready.text
    );
    answers.push(ready.text);
    let metrics = misconfigured.request(Method::GET, "/metrics", None).await;
    assert!(
        metrics.text.lines().any(|l| l
            .starts_with("fulfillment_payment_provider_misconfigured_answers_total ")
            && !l.ends_with(" 0")),
        "{}",
        metrics.text
    );
    answers.push(metrics.text);
    // No order is cancelled for it: the charge waits, and goes through once the key works.
    let waiting = misconfigured.status("revoked-key").await;
    assert!(waiting["failure"].is_null(), "{waiting}");
    assert_eq!(waiting["status"], "RESERVED", "{waiting}");
    revoking.revoke_key(false);
    answers.push(
        misconfigured
            .reaches("revoked-key", "COMPLETED")
            .await
            .to_string(),
    );
    assert_eq!(revoking.charges_of("revoked-key"), 1);
    let ready = misconfigured.anonymous(Method::GET, "/readyz", None).await;
    assert_eq!(ready.status, StatusCode::OK, "{}", ready.text);

    for (s, id) in [
        (&server, "paid"),
        (&server, "declined"),
        (&server, "outage"),
        (&misconfigured, "revoked-key"),
    ] {
        let history = s
            .request(
                Method::GET,
                &format!("/orders/{id}/history?maxResults=1000"),
                None,
            )
            .await;
        assert_eq!(history.status, StatusCode::OK, "{}", history.text);
        answers.push(history.text);
        let metrics = s.request(Method::GET, "/metrics", None).await;
        answers.push(metrics.text);
    }

    let mut output = Vec::new();
    for s in [server.stop(), misconfigured.stop()] {
        output.push(s.stdout.text());
        output.push(s.stderr.text());
    }
    let logs = output.join("\n");
    // The logs are the most verbose there are, and saw the provider's refusal and outage.
    assert!(logs.contains("\"level\":\"TRACE\""), "not trace logs");
    for error in [
        "Payment.Declined",
        "Payment.Unavailable",
        "Provider.Misconfigured",
    ] {
        assert!(
            logs.contains(&format!("\"error\":\"{error}\"")),
            "{error} not logged"
        );
    }
    for secret in SECRETS {
        assert!(!logs.contains(secret), "{secret} is in the logs");
        for answer in &answers {
            assert!(
                !answer.contains(secret),
                "{secret} is in an answer: {answer}"
            );
        }
    }
}

/// A key the provider refuses stops the start, before anything is created, saying which
/// setting to fix and never quoting the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_with_a_key_the_provider_refuses_is_refused_and_creates_nothing() {
    let stripe = FakeStripe::start().await;
    let db = Db::new();
    let mut cmd = serve_command(&db);
    cmd.args(["--payments", "stripe", "--stripe-url", &stripe.base_url])
        .env("FULFILLMENT_OPERATOR_TOKEN", TOKEN)
        .env("FULFILLMENT_STRIPE_KEY", WRONG_KEY);
    let refused = tokio::task::spawn_blocking(move || cmd.output())
        .await
        .expect("joined")
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("refuses this service's settings") && stderr.contains("--stripe-key"),
        "{stderr}"
    );
    assert!(!stderr.contains(WRONG_KEY), "{stderr}");
    assert!(!db.path().exists(), "a refused start created the store");
    assert!(
        stripe
            .requests()
            .iter()
            .all(|r| r.method == Method::GET && r.path == "/v1/balance"),
        "the check changes nothing"
    );
}

#[test]
fn help_and_refused_settings_never_show_a_secret_from_the_environment() {
    let help = std::process::Command::new(binary())
        .args(["serve", "--help"])
        .env("FULFILLMENT_OPERATOR_TOKEN", TOKEN)
        .env("FULFILLMENT_STRIPE_KEY", SECRET_KEY)
        .output()
        .expect("the binary runs");
    assert!(help.status.success());
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(text.contains("FULFILLMENT_OPERATOR_TOKEN") && text.contains("FULFILLMENT_STRIPE_KEY"));
    assert!(
        !text.contains(TOKEN) && !text.contains(SECRET_KEY),
        "{text}"
    );

    // A token the service refuses (it has a space) is still someone's secret.
    let db = Db::new();
    let refused = serve_command(&db)
        .env("FULFILLMENT_OPERATOR_TOKEN", "correct horse battery staple")
        .output()
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--operator-token"), "{stderr}");
    assert!(!stderr.contains("horse battery"), "{stderr}");
}
