//! Shipping for real: the binary with `--shipping easypost` against the fake EasyPost ships an
//! order under the label's tracking number, and cancels (refunds, releases) an order whose
//! address the carrier refuses. It refuses to start with a key EasyPost refuses, without a
//! from-address, or with a live payment key and no carrier chosen by name. On the AWS backend
//! two replicas share the label records in DynamoDB.

use blackbox::aws::AwsStack;
use blackbox::{Db, Server, TOKEN, order, serve_command};
use reqwest::StatusCode;
use std::process::{Command, Output};
use testkit::fake_easypost::{API_KEY, FakeEasyPost};

/// `serve` shipping through `fake` with `key` (in the environment, as a deployment passes it).
fn easypost_command(db: &Db, fake: &FakeEasyPost, key: &str) -> Command {
    let mut cmd = serve_command(db);
    cmd.args(["--operator-token", TOKEN, "--shipping", "easypost"])
        .args(["--easypost-url", &fake.base_url])
        .args(["--easypost-from-address", "adr_warehouse"])
        .args(["--easypost-timeout", "2s"])
        .env("FULFILLMENT_EASYPOST_KEY", key);
    cmd
}

/// Runs a command expected to refuse to start, off the runtime the fake answers on.
async fn refused(mut cmd: Command) -> (Output, String) {
    let output = tokio::task::spawn_blocking(move || cmd.output().expect("the binary runs"))
        .await
        .expect("task");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output, stderr)
}

/// An order placed on `a` ships (read on `b`) under the label's tracking number; one placed on
/// `b` whose postal code (99501) the carrier refuses is cancelled, refunded and released (read on
/// `a`). The fake holds one label, of the first. `sku` is stocked with enough for both.
async fn ships_one_and_cancels_one(
    fake: &FakeEasyPost,
    a: &Server,
    b: &Server,
    prefix: &str,
    sku: &str,
) {
    let (ships, refused_id) = (format!("{prefix}-ships"), format!("{prefix}-refused"));
    let placed = a.place(&order(&ships, sku, 2, 1_500, "pm_card_visa")).await;
    assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
    let done = b.reaches(&ships, "COMPLETED").await;
    let tracking = fake.tracking_codes(&ships);
    assert_eq!(tracking.len(), 1, "one label");
    assert_eq!(done["shipment"]["trackingNumber"], tracking[0].as_str());

    let mut refused = order(&refused_id, sku, 1, 1_500, "pm_card_visa");
    refused["shippingAddress"]["postalCode"] = "99501".into();
    let placed = b.place(&refused).await;
    assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
    let cancelled = a.reaches(&refused_id, "CANCELLED").await;
    assert_eq!(cancelled["failure"]["error"], "Shipment.Rejected");
    let cause = cancelled["failure"]["cause"].as_str().unwrap_or_default();
    assert!(cause.contains("99501 is not deliverable"), "{cancelled}");
    assert!(cancelled["refund"]["refundId"].is_string(), "{cancelled}");
    assert_eq!(cancelled["reservation"]["status"], "RELEASED");
    assert!(cancelled["shipment"].is_null());
    assert_eq!(fake.labels_bought(&refused_id), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ships_through_easypost_and_cancels_an_order_the_carrier_refuses() {
    let fake = FakeEasyPost::start().await;
    fake.undeliverable("99501");
    let db = Db::new();
    let server = Server::spawn(easypost_command(&db, &fake, API_KEY));
    server.stock("book", 5, 1_500).await;
    ships_one_and_cancels_one(&fake, &server, &server, "ep", "book").await;
    // Two shipped, one released: the stock adds up.
    let stock = server
        .request(reqwest::Method::GET, "/inventory/book", None)
        .await;
    assert_eq!(stock.json()["available"], 3, "{}", stock.text);
    assert_eq!(stock.json()["shipped"], 2, "{}", stock.text);
    server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refuses_to_start_with_a_key_easypost_refuses_or_settings_missing() {
    let fake = FakeEasyPost::start().await;
    let db = Db::new();
    let wrong = "EZTK_wrong_key_0f1e2d3c4b5a";
    let (output, stderr) = refused(easypost_command(&db, &fake, wrong)).await;
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("EasyPost refused the API key"), "{stderr}");
    assert!(!stderr.contains(wrong), "the key is never shown: {stderr}");
    assert!(!db.path().exists(), "nothing was created");

    let mut no_key = easypost_command(&db, &fake, "");
    no_key.env_remove("FULFILLMENT_EASYPOST_KEY");
    let (output, stderr) = refused(no_key).await;
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--easypost-key"), "{stderr}");

    let mut no_origin = serve_command(&db);
    no_origin
        .args(["--shipping", "easypost", "--easypost-url", &fake.base_url])
        .env("FULFILLMENT_EASYPOST_KEY", API_KEY);
    let (output, stderr) = refused(no_origin).await;
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--easypost-from-address"), "{stderr}");
    assert!(!db.path().exists(), "nothing was created");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_payment_key_needs_the_sandbox_carrier_said_by_name() {
    let db = Db::new();
    let live = |cmd: &mut Command| {
        cmd.args(["--operator-token", TOKEN, "--payments", "stripe"])
            .args(["--stripe-url", "http://127.0.0.1:9"])
            .env("FULFILLMENT_STRIPE_KEY", "sk_live_0123456789abcdef");
    };
    let mut unsaid = serve_command(&db);
    live(&mut unsaid);
    let (output, stderr) = refused(unsaid).await;
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--shipping sandbox"), "{stderr}");
    assert!(stderr.contains("--shipping easypost"), "{stderr}");
    assert!(!stderr.contains("sk_live_0123"), "{stderr}");
    assert!(!db.path().exists(), "nothing was created");

    let mut said = serve_command(&db);
    live(&mut said);
    said.args(["--shipping", "sandbox"]);
    let server = Server::spawn(said);
    let health = server
        .anonymous(reqwest::Method::GET, "/healthz", None)
        .await;
    assert_eq!(health.status, StatusCode::OK);
    server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ships_through_easypost_on_the_aws_backend_across_replicas() {
    let stack = AwsStack::start().await;
    let fake = FakeEasyPost::start().await;
    fake.undeliverable("99501");
    let args = [
        "--shipping",
        "easypost",
        "--easypost-url",
        &fake.base_url,
        "--easypost-from-address",
        "adr_warehouse",
        "--easypost-key",
        API_KEY,
    ];
    let (a, b) = (stack.replica(&args), stack.replica(&args));
    a.stock("aws-ep-book", 3, 1_500).await;
    ships_one_and_cancels_one(&fake, &a, &b, "aws-ep", "aws-ep-book").await;
    a.stop();
    b.stop();
}
