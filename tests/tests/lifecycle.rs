//! The process's life, against the real binary: a graceful stop under load (every request
//! answered whole or refused cleanly, no activity task stranded), a restart on the same
//! database, the generated operator token, and backends that cannot start.

use blackbox::{
    Audit, DEADLINE, Db, START_STOP, Server, TOKEN, audit_command, binary, client, order,
    serve_command,
};
use reqwest::{Method, StatusCode};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use store::OrderRecords;

/// The sandbox values the clients cycle through: each order still completes, some after a
/// retry, so steps are running (and retrying) when the stop comes.
const MIXED: [(&str, &str); 4] = [
    ("pm_card_visa", "22201"),
    ("pm_card_unavailable_once", "22201"),
    ("pm_card_lost_response", "22201"),
    ("pm_card_visa", "99999"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_under_load_answers_or_refuses_cleanly_and_strands_no_task() {
    let db = Db::new();
    let mut server = Server::start(&db);
    server.stock("book", 10_000, 1_000).await;
    server.stock("piano", 4, 450_000).await;
    // Parked approvals at the stop: their tokens must survive it.
    let mut accepted = Vec::new();
    for i in 0..4 {
        let id = format!("drain-large-{i}");
        let placed = server
            .place(&order(&id, "piano", 1, 450_000, "pm_card_visa"))
            .await;
        assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
        accepted.push(id);
    }
    let base = server.base.clone();
    let answered = Arc::new(AtomicUsize::new(0));
    let stopping = Arc::new(AtomicBool::new(false));

    // Clients placing orders as fast as they can, on their own connections.
    let clients: Vec<_> = (0..8)
        .map(|c| {
            let (base, answered, stopping) = (base.clone(), answered.clone(), stopping.clone());
            tokio::spawn(async move {
                let http = client();
                let mut accepted = Vec::new();
                let mut refused = 0;
                for n in 0.. {
                    let id = format!("drain-{c}-{n}");
                    let (payment, postal) = MIXED[n % MIXED.len()];
                    let mut body = order(&id, "book", 1, 1_000, payment);
                    body["shippingAddress"]["postalCode"] = postal.into();
                    let result = http
                        .post(format!("{base}/orders"))
                        .bearer_auth(TOKEN)
                        .json(&body)
                        .send()
                        .await;
                    match result {
                        Ok(response) => {
                            let status = response.status();
                            let problem = response
                                .headers()
                                .get("content-type")
                                .is_some_and(|t| t == "application/problem+json");
                            // A started answer is whole: never cut off by the stop.
                            let body = response
                                .text()
                                .await
                                .unwrap_or_else(|e| panic!("{id}: a truncated answer: {e}"));
                            match status {
                                StatusCode::ACCEPTED => accepted.push(id),
                                StatusCode::SERVICE_UNAVAILABLE => {
                                    assert!(problem, "{id}: a 503 that is no problem: {body}")
                                }
                                _ => panic!("{id}: {status} {body}"),
                            }
                            answered.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(e) => {
                            assert!(!e.is_timeout(), "{id}: a request hung: {e}");
                            assert!(
                                stopping.load(Ordering::SeqCst),
                                "{id}: refused before the stop: {e}"
                            );
                            refused += 1;
                            // Refused at connect: the listener is closed; nothing more to try.
                            if e.is_connect() || refused > 3 {
                                break;
                            }
                        }
                    }
                }
                accepted
            })
        })
        .collect();

    // Stop while the clients are busy and the workers behind them.
    let until = Instant::now() + DEADLINE;
    while answered.load(Ordering::SeqCst) < 80 {
        assert!(Instant::now() < until, "the clients got no answers");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stopping.store(true, Ordering::SeqCst);
    server.sigterm();
    for c in clients {
        accepted.extend(
            tokio::time::timeout(DEADLINE, c)
                .await
                .expect("every client ends")
                .unwrap(),
        );
    }
    let status = tokio::task::block_in_place(|| server.wait(START_STOP));
    assert!(
        status.success(),
        "exit status {status}: {}",
        server.stderr.text()
    );
    let after = server
        .stdout
        .text()
        .lines()
        .skip_while(|l| !l.contains("shutdown requested"))
        .filter(|l| l.contains("finished processing request"))
        .count();
    eprintln!(
        "{} orders accepted; {after} requests finished after the stop was requested",
        accepted.len()
    );

    // Every order that was accepted is durable: it completes after a restart (the large ones
    // once approved) ...
    let server = Server::start(&db);
    for i in 0..4 {
        let id = format!("drain-large-{i}");
        server.reaches(&id, "AWAITING_APPROVAL").await;
        let approved = server.decide(&id, "approve").await;
        assert_eq!(approved.status, StatusCode::OK, "{}", approved.text);
    }
    for id in &accepted {
        server.ends(id, "COMPLETED", "SUCCEEDED").await;
    }
    // ... and none waited for a heartbeat timeout: the stop handed no task to a worker that
    // then did not answer it.
    for id in &accepted {
        let history = server.history(id).await;
        assert!(
            !history.iter().any(|e| e == "ActivityTimedOut"),
            "{id} had a task stranded by the stop: {history:?}"
        );
    }
    server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_in_flight_at_a_restart_completes_after_it() {
    let db = Db::new();
    let server = Server::start(&db);
    server.stock("piano", 1, 450_000).await;
    server.stock("book", 5, 1_500).await;
    let large = order("restart-large", "piano", 1, 450_000, "pm_card_visa");
    assert_eq!(server.place(&large).await.status, StatusCode::ACCEPTED);
    server.reaches("restart-large", "AWAITING_APPROVAL").await;
    let small = order("restart-small", "book", 1, 1_500, "pm_card_visa");
    let placed = server.place(&small).await;
    assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
    let arn = placed.json()["executionArn"].clone();
    server.stop();

    let server = Server::start(&db);
    let done = server.reaches("restart-small", "COMPLETED").await;
    assert_eq!(done["executionArn"], arn);
    let approved = server.decide("restart-large", "approve").await;
    assert_eq!(approved.status, StatusCode::OK, "{}", approved.text);
    server.reaches("restart-large", "COMPLETED").await;
    // The same order again is still a replay of the first run's.
    let again = server.place(&small).await;
    assert!(again.replayed(), "{:?}", again.headers);
    assert_eq!(again.json()["executionArn"], arn);
    server.stop();
}

/// A 202 means the order is committed; its execution is started from the start queue, which is
/// in memory. An order the last process committed but never started (its queue lost in a
/// crash) is queued again by the next process as it starts, with no client retry and with the
/// repair loop off (which would start it too, later: the AWS backend's way,
/// `aws_backend.rs`), with the ARN its 202 gave.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_stored_but_never_started_is_queued_again_by_the_next_process_without_a_retry() {
    let db = Db::new();
    let server = Server::start(&db);
    server.stock("SKU-A", 2, 1_000).await;
    server.stock("SKU-B", 2, 999).await;
    let before = order("queued-before", "SKU-B", 1, 999, "pm_card_visa");
    let placed = server.place(&before).await;
    assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
    server.reaches("queued-before", "COMPLETED").await;
    let arn = placed.json()["executionArn"]
        .as_str()
        .expect("an executionArn")
        .to_owned();
    server.stop();

    // What a crash between the commit and the start leaves: the order and its ARN, no execution.
    let id = store::OrderId::parse("queued-lost").expect("an order id");
    let lost_arn = format!("{}:queued-lost", arn.rsplit_once(':').expect("an ARN").0);
    {
        let store = store_sqlite::SqliteStore::open(db.path()).expect("the store");
        let created = store
            .create(testkit::new_order(&id), &lost_arn)
            .await
            .expect("stored");
        assert!(matches!(created, store::Created::New(_)));
    }
    let stored = Audit::run(audit_command(&db));
    assert_eq!(stored.code, Some(1), "{stored:?}");
    assert!(
        stored
            .violations()
            .iter()
            .any(|v| v.contains("stored but never started")),
        "{stored:?}"
    );

    let mut cmd = serve_command(&db);
    cmd.arg("--operator-token")
        .arg(TOKEN)
        .args(["--repair-interval", "off"]);
    let server = Server::spawn(cmd);
    let done = server.reaches("queued-lost", "COMPLETED").await;
    assert_eq!(done["executionArn"], lost_arn.as_str());
    server.stop();
    let clean = Audit::run(audit_command(&db));
    assert_eq!(clean.code, Some(0), "{clean:?}");
}

/// The key shown in the banner line `  <role> key (<name>): fk_…`.
fn banner_key(banner: &str, role: &str) -> String {
    banner
        .lines()
        .find_map(|l| {
            let rest = l.trim_start().strip_prefix(&format!("{role} key ("))?;
            Some(rest.split_once(": ")?.1.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no {role} key in the banner: {banner}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_start_creates_an_operator_and_a_client_key_shown_once_that_survive_restarts() {
    let db = Db::new();
    let mut cmd = serve_command(&db);
    cmd.args(["--log-format", "json"]).env("RUST_LOG", "debug");
    let server = Server::spawn(cmd);

    // The banner: where the service is, its docs, and the two keys with a command each.
    let banner = server.stderr.wait_for("Keys: ");
    assert!(
        banner.contains(&format!("serving on {}", server.base)),
        "{banner}"
    );
    assert!(
        banner.contains(&format!("{}/docs", server.base)),
        "{banner}"
    );
    assert!(
        banner.contains(&format!("{}/openapi.json", server.base)),
        "{banner}"
    );
    let operator = banner_key(&banner, "operator");
    let client = banner_key(&banner, "client");
    for key in [&operator, &client] {
        assert!(
            key.starts_with("fk_") && key.len() >= 60,
            "a long key: {key}"
        );
        assert_eq!(
            banner.matches(key.as_str()).count(),
            2,
            "shown once, and in its curl line"
        );
    }
    assert!(
        banner.contains(&format!(
            "curl -H \"Authorization: Bearer {operator}\" {}/approvals",
            server.base
        )),
        "{banner}"
    );

    // Each works for its role, and nothing else does.
    let ok = server
        .send(Method::GET, "/approvals", None, Some(&operator))
        .await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.text);
    let forbidden = server
        .send(Method::GET, "/approvals", None, Some(&client))
        .await;
    assert_eq!(
        forbidden.status,
        StatusCode::FORBIDDEN,
        "{}",
        forbidden.text
    );
    let wrong = server
        .send(Method::GET, "/approvals", None, Some("not-the-token"))
        .await;
    assert_eq!(wrong.status, StatusCode::UNAUTHORIZED, "{}", wrong.text);
    let stocked = server
        .send(
            Method::PUT,
            "/inventory/book",
            Some(&serde_json::json!({ "available": 3 })),
            Some(&operator),
        )
        .await;
    assert_eq!(stocked.status, StatusCode::OK, "{}", stocked.text);
    let listed = server
        .send(Method::GET, "/inventory", None, Some(&client))
        .await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.text);

    // They are shown nowhere else: not in the logs, not in the metrics, not in the store.
    let metrics = server.metrics().await;
    let server = server.stop();
    let stdout = server.stdout.text();
    for key in [&operator, &client] {
        assert!(!metrics.contains(key.as_str()));
        assert!(!stdout.contains(key.as_str()), "a key leaked into the logs");
        assert_eq!(server.stderr.text().matches(key.as_str()).count(), 2);
        let stored = std::fs::read(db.path()).unwrap();
        let wal = std::fs::read(db.dir().join("fulfillment.db-wal")).unwrap_or_default();
        let needle = key.as_bytes();
        assert!(
            !stored.windows(needle.len()).any(|w| w == needle)
                && !wal.windows(needle.len()).any(|w| w == needle),
            "only the key's hash is stored"
        );
    }
    // JSON logs are one object per line (besides the address announcement).
    for line in stdout.lines().filter(|l| !l.starts_with("listening on ")) {
        let parsed: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not a JSON log line ({e}): {line}"));
        assert!(parsed["level"].is_string(), "{line}");
    }

    // A restart keeps them (scripts keep working) and shows none again.
    let again = Server::spawn(serve_command(&db));
    let banner = again.stderr.wait_for("Keys: ");
    assert!(!banner.contains("fk_"), "{banner}");
    let ok = again
        .send(Method::GET, "/approvals", None, Some(&operator))
        .await;
    assert_eq!(ok.status, StatusCode::OK, "{}", ok.text);
    let again = again.stop();
    assert!(!again.stderr.text().contains(&operator));
}

#[test]
fn the_aws_backend_without_its_settings_fails_fast_naming_them() {
    let db = Db::new();
    for (args, needs) in [
        (
            &[
                "--backend",
                "aws",
                "--payments",
                "stripe",
                "--stripe-key",
                "sk_test_x",
                "--operator-token",
                TOKEN,
            ][..],
            "--state-machine-arn",
        ),
        (
            &[
                "--backend",
                "aws",
                "--state-machine-arn",
                "arn:aws:states:us-east-1:123456789012:stateMachine:fulfillment-order-saga",
                "--operator-token",
                TOKEN,
            ][..],
            "--payments",
        ),
        // The replicas must share one operator token: none is generated on AWS.
        (
            &[
                "--backend",
                "aws",
                "--state-machine-arn",
                "arn:aws:states:us-east-1:123456789012:stateMachine:fulfillment-order-saga",
                "--payments",
                "sandbox",
            ][..],
            "--operator-token",
        ),
    ] {
        let mut cmd = serve_command(&db);
        cmd.args(args);
        let output = cmd.output().expect("the binary runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(needs), "{args:?}: {stderr}");
        assert!(!db.path().exists(), "nothing was created");
    }
}

/// As AWS would refuse the task: an approval heartbeat not shorter than the window, or one so
/// short that its lapses could use up the approval's retries within the window.
#[test]
fn an_approval_window_that_could_not_hold_is_refused_at_start() {
    let db = Db::new();
    for (args, says) in [
        (
            &["--approval-timeout", "60s", "--approval-heartbeat", "60s"][..],
            "must be shorter than the approval window",
        ),
        (
            &["--approval-timeout", "30d", "--approval-heartbeat", "5s"][..],
            "raise --approval-heartbeat",
        ),
    ] {
        let mut cmd = serve_command(&db);
        cmd.args(["--operator-token", TOKEN]).args(args);
        let output = cmd.output().expect("the binary runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(!db.path().exists(), "nothing was created");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_service_on_the_same_database_is_refused_and_the_first_goes_on() {
    let db = Db::new();
    let server = Server::start(&db);
    server.stock("book", 3, 1_000).await;
    let mut second = serve_command(&db)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let until = Instant::now() + START_STOP;
    let status = loop {
        if let Some(status) = second.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > until {
            second.kill().unwrap();
            second.wait().unwrap();
            panic!("a second service started on a database in use");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut second.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("in use by another engine"), "{stderr}");
    assert!(
        !stderr.contains("ServiceUnavailable"),
        "no internal error kind: {stderr}"
    );
    let keys = blackbox::command_on_store(&db, &["keys", "list"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&keys.stdout).lines().count(),
        3,
        "the header and the first start's two keys: the refused start made none it never showed"
    );
    let placed = server
        .place(&order("after-refusal", "book", 1, 1_000, "pm_card_visa"))
        .await;
    assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
    server.reaches("after-refusal", "COMPLETED").await;
    server.stop();
}

/// The settings `serve` and `audit` share: where the state is and who charges.
const BACKEND_SETTINGS: &[(&str, &str)] = &[
    ("--db", "FULFILLMENT_DB"),
    ("--backend", "FULFILLMENT_BACKEND"),
    ("--log-format", "FULFILLMENT_LOG_FORMAT"),
    ("--table", "FULFILLMENT_TABLE"),
    ("--state-machine-arn", "FULFILLMENT_STATE_MACHINE_ARN"),
    ("--payments", "FULFILLMENT_PAYMENTS"),
    ("--stripe-url", "FULFILLMENT_STRIPE_URL"),
    ("--stripe-key", "FULFILLMENT_STRIPE_KEY"),
    ("--stripe-timeout", "FULFILLMENT_STRIPE_TIMEOUT"),
    ("--idempotency-prefix", "FULFILLMENT_IDEMPOTENCY_PREFIX"),
];

fn help(subcommand: &str) -> String {
    let output = std::process::Command::new(binary())
        .args([subcommand, "--help"])
        .output()
        .expect("the binary runs");
    assert!(output.status.success());
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn help_documents_every_setting_and_its_environment_variable() {
    let serve_only: &[(&str, &str)] = &[
        ("--listen", "FULFILLMENT_LISTEN"),
        ("--operator-token", "FULFILLMENT_OPERATOR_TOKEN"),
        (
            "--approval-threshold-cents",
            "FULFILLMENT_APPROVAL_THRESHOLD_CENTS",
        ),
        ("--approval-timeout", "FULFILLMENT_APPROVAL_TIMEOUT"),
        ("--approval-heartbeat", "FULFILLMENT_APPROVAL_HEARTBEAT"),
        ("--approval-keeper-rate", "FULFILLMENT_APPROVAL_KEEPER_RATE"),
        ("--max-body-bytes", "FULFILLMENT_MAX_BODY_BYTES"),
        ("--request-timeout", "FULFILLMENT_REQUEST_TIMEOUT"),
        ("--read-timeout", "FULFILLMENT_READ_TIMEOUT"),
        ("--shipping", "FULFILLMENT_SHIPPING"),
        ("--easypost-url", "FULFILLMENT_EASYPOST_URL"),
        ("--easypost-key", "FULFILLMENT_EASYPOST_KEY"),
        ("--easypost-timeout", "FULFILLMENT_EASYPOST_TIMEOUT"),
        ("--easypost-carrier", "FULFILLMENT_EASYPOST_CARRIER"),
        ("--easypost-service", "FULFILLMENT_EASYPOST_SERVICE"),
        (
            "--easypost-from-address",
            "FULFILLMENT_EASYPOST_FROM_ADDRESS",
        ),
        (
            "--easypost-unit-weight-oz",
            "FULFILLMENT_EASYPOST_UNIT_WEIGHT_OZ",
        ),
    ];
    for (subcommand, own) in [("serve", serve_only), ("audit", &[][..])] {
        let help = help(subcommand);
        for (flag, env) in BACKEND_SETTINGS.iter().chain(own) {
            assert!(
                help.contains(flag) && help.contains(env),
                "{subcommand}: {flag} / {env}:\n{help}"
            );
        }
        for standard in [
            "--aws-region",
            "--aws-profile",
            "--endpoint-url",
            "AWS_ENDPOINT_URL_SFN",
            "AWS_ENDPOINT_URL_DYNAMODB",
        ] {
            assert!(help.contains(standard), "{subcommand}: {standard}:\n{help}");
        }
    }
    assert!(help("serve").contains("fulfillment.engine.db"));
    // The audit's help says what it prints and how it exits.
    let audit = help("audit");
    for promise in ["violation: <subject>: <what is wrong>", "Exit status"] {
        assert!(audit.contains(promise), "{promise}:\n{audit}");
    }
}
