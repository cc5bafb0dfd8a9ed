//! The saga's end-to-end scenarios with `--backend aws`: two replicas of the service, as
//! separate processes, on Step Functions (`fulfillment engine`), DynamoDB (moto) and a
//! Stripe-compatible provider (the fake Stripe), knowing them only by endpoint URL. An order
//! placed on one replica is worked by either and read from the other.

use blackbox::aws::AwsStack;
use blackbox::faults::{Dialect, FaultProxy, Faults};
use blackbox::{Audit, Server, order};
use reqwest::{Method, StatusCode};
use serde_json::json;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_saga_scenario_runs_on_the_aws_backend_across_replicas() {
    let stack = AwsStack::start().await;
    // Keeper rounds every second on every replica: whichever keeps the queue's shard of an
    // order closes its window within a second of the deadline (a round is the precision).
    let keeper = ["--approval-heartbeat", "5s", "--approval-timeout", "1h"];
    let a = stack.replica(&keeper);
    let b = stack.replica(&keeper);
    // Orders placed here get a two-second approval window (it travels in the execution's
    // input, and its deadline is fixed on the order, so whichever replica works the task or
    // keeps the approvals honours it).
    let hasty = stack.replica(&["--approval-timeout", "2s", "--approval-heartbeat", "1s"]);

    tokio::join!(
        small_order_completes(&stack, &a, &b),
        large_order_is_approved(&stack, &a, &b),
        declined_card_is_compensated(&stack, &a, &b),
        rejected_approval_is_compensated(&stack, &a, &b),
        expired_approval_window_is_compensated(&stack, &hasty, &b),
        replays_and_conflicts(&stack, &a, &b),
        parked_order_is_cancelled(&stack, &a, &b),
    );

    // The audit, beside the running replicas, finds the books the scenarios kept in order,
    // with one more order waiting for a decision: its execution running (DescribeExecution),
    // its parked token an open task (SendTaskHeartbeat).
    a.stock("aws-cello", 1, 250_000).await;
    let parked = order("aws-parked", "aws-cello", 1, 250_000, "pm_card_visa");
    assert_eq!(a.place(&parked).await.status, StatusCode::ACCEPTED);
    b.reaches("aws-parked", "AWAITING_APPROVAL").await;
    let audit = tokio::task::block_in_place(|| Audit::run(stack.audit_command()));
    assert_eq!(audit.code, Some(0), "{audit:?}");
    assert_eq!(
        audit.stdout, "audit: 9 orders, 9 SKUs, 8 charges, 0 violations\n",
        "{audit:?}"
    );

    for replica in [a, b, hasty] {
        replica.stop();
    }
}

/// The order's POSTs to `path` at the provider: at least one, every one with `key`.
fn assert_idempotency_keys(stack: &AwsStack, path: &str, order_id: &str, key: &str) {
    let keys: Vec<Option<String>> = stack
        .stripe
        .requests()
        .iter()
        .filter(|r| r.method == Method::POST && r.path == path)
        .filter(|r| r.param("metadata[order_id]") == Some(order_id))
        .map(|r| r.header("idempotency-key").map(str::to_owned))
        .collect();
    assert!(!keys.is_empty(), "no POST {path} for {order_id}");
    assert!(
        keys.iter().all(|k| k.as_deref() == Some(key)),
        "{path} for {order_id}: {keys:?}"
    );
}

async fn small_order_completes(stack: &AwsStack, a: &Server, b: &Server) {
    a.stock("aws-book", 5, 1_500).await;
    let placed = a
        .place(&order("aws-small", "aws-book", 2, 1_500, "pm_card_visa"))
        .await;
    assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
    let arn = placed.json()["executionArn"].as_str().unwrap().to_owned();
    assert_eq!(
        arn,
        format!(
            "{}:aws-small",
            stack
                .state_machine_arn
                .replace(":stateMachine:", ":execution:")
        )
    );
    let done = b.ends("aws-small", "COMPLETED", "SUCCEEDED").await;
    assert_eq!(done["payment"]["amountCents"], 3_000, "{done}");
    assert!(done["shipment"]["trackingNumber"].is_string(), "{done}");
    assert_eq!(stack.stripe.charges_of("aws-small"), 1);
    assert_idempotency_keys(
        stack,
        "/v1/payment_intents",
        "aws-small",
        "charge:aws-small",
    );
    assert_eq!(b.stock_of("aws-book").await, (3, 0));
    let history = a.history("aws-small").await;
    assert_eq!(
        history.first().map(String::as_str),
        Some("ExecutionStarted")
    );
    assert_eq!(
        history.last().map(String::as_str),
        Some("ExecutionSucceeded")
    );
}

async fn large_order_is_approved(stack: &AwsStack, a: &Server, b: &Server) {
    a.stock("aws-piano", 1, 450_000).await;
    let placed = a
        .place(&order("aws-large", "aws-piano", 1, 450_000, "pm_card_visa"))
        .await;
    assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
    b.reaches("aws-large", "AWAITING_APPROVAL").await;
    let pending = b.operator(Method::GET, "/approvals", None).await;
    assert_eq!(pending.status, StatusCode::OK, "{}", pending.text);
    assert!(
        pending.json()["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["orderId"] == "aws-large"),
        "{}",
        pending.text
    );
    let approved = b.decide("aws-large", "approve").await;
    assert_eq!(approved.status, StatusCode::OK, "{}", approved.text);
    let again = a.decide("aws-large", "approve").await;
    assert_eq!(
        again.status,
        StatusCode::OK,
        "the same decision replays: {}",
        again.text
    );
    let done = a.reaches("aws-large", "COMPLETED").await;
    assert_eq!(done["approval"]["decision"], "approve", "{done}");
    assert_eq!(stack.stripe.charges_of("aws-large"), 1);
    assert_eq!(stack.stripe.refunds_of("aws-large"), 0);
    assert_eq!(a.stock_of("aws-piano").await, (0, 0));
}

/// Cancelled on one replica while it waits for approval on the other: the token is failed, the
/// Catch refunds and releases (never `StopExecution`); once shipped, a cancel is refused.
async fn parked_order_is_cancelled(stack: &AwsStack, a: &Server, b: &Server) {
    a.stock("aws-drum", 1, 200_000).await;
    let placed = a
        .place(&order(
            "aws-cancelled",
            "aws-drum",
            1,
            200_000,
            "pm_card_visa",
        ))
        .await;
    assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
    a.reaches("aws-cancelled", "AWAITING_APPROVAL").await;
    let body = json!({"reason": "changed plans"});
    let cancelled = b
        .request(Method::POST, "/orders/aws-cancelled/cancel", Some(&body))
        .await;
    assert_eq!(cancelled.status, StatusCode::ACCEPTED, "{}", cancelled.text);
    let again = a
        .request(Method::POST, "/orders/aws-cancelled/cancel", Some(&body))
        .await;
    assert!(again.replayed(), "{}", again.text);
    let late = a.decide("aws-cancelled", "approve").await;
    assert_eq!(late.status, StatusCode::CONFLICT, "{}", late.text);
    assert_eq!(late.problem().as_deref(), Some("order-cancelled"));
    let done = b.ends("aws-cancelled", "CANCELLED", "FAILED").await;
    assert_eq!(done["failure"]["error"], "Order.Cancelled", "{done}");
    assert_eq!(done["reservation"]["status"], "RELEASED", "{done}");
    assert_eq!(stack.stripe.refunds_of("aws-cancelled"), 1);
    assert_eq!(b.stock_of("aws-drum").await, (1, 0), "the stock is back");
    let history = a.history("aws-cancelled").await;
    assert!(
        !history.iter().any(|e| e == "ExecutionAborted"),
        "{history:?}"
    );

    // A shipped order is past the point of no return.
    a.stock("aws-cup", 1, 900).await;
    let cup = order("aws-cup-order", "aws-cup", 1, 900, "pm_card_visa");
    assert_eq!(a.place(&cup).await.status, StatusCode::ACCEPTED);
    b.ends("aws-cup-order", "COMPLETED", "SUCCEEDED").await;
    let refused = b
        .request(
            Method::POST,
            "/orders/aws-cup-order/cancel",
            Some(&json!({})),
        )
        .await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.text);
    assert_eq!(refused.problem().as_deref(), Some("order-shipped"));
}

async fn declined_card_is_compensated(stack: &AwsStack, a: &Server, b: &Server) {
    a.stock("aws-lamp", 3, 1_500).await;
    let placed = b
        .place(&order(
            "aws-declined",
            "aws-lamp",
            1,
            1_500,
            "pm_card_chargeDeclined",
        ))
        .await;
    assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
    let cancelled = a.ends("aws-declined", "CANCELLED", "FAILED").await;
    assert_eq!(
        cancelled["failure"]["error"], "Payment.Declined",
        "{cancelled}"
    );
    assert!(cancelled["payment"].is_null(), "{cancelled}");
    assert_eq!(stack.stripe.charges_of("aws-declined"), 0);
    assert_eq!(
        a.stock_of("aws-lamp").await,
        (3, 0),
        "the stock is released"
    );
}

async fn rejected_approval_is_compensated(stack: &AwsStack, a: &Server, b: &Server) {
    a.stock("aws-organ", 1, 900_000).await;
    let placed = a
        .place(&order(
            "aws-rejected",
            "aws-organ",
            1,
            900_000,
            "pm_card_visa",
        ))
        .await;
    assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
    b.reaches("aws-rejected", "AWAITING_APPROVAL").await;
    let rejected = a.decide("aws-rejected", "reject").await;
    assert_eq!(rejected.status, StatusCode::OK, "{}", rejected.text);
    assert!(
        ["COMPENSATING", "CANCELLED"].contains(&rejected.json()["status"].as_str().unwrap()),
        "the status after the rejection: {}",
        rejected.text
    );
    let other = b.decide("aws-rejected", "approve").await;
    assert_eq!(other.status, StatusCode::CONFLICT, "{}", other.text);
    let cancelled = b.reaches("aws-rejected", "CANCELLED").await;
    assert_eq!(cancelled["approval"]["decision"], "reject", "{cancelled}");
    let refunded = b.ends("aws-rejected", "CANCELLED", "FAILED").await;
    assert!(
        refunded["refund"]["refundId"]
            .as_str()
            .is_some_and(|id| id.starts_with("re_")),
        "the status shows the refund: {refunded}"
    );
    assert_eq!(refunded["reservation"]["status"], "RELEASED", "{refunded}");
    assert_eq!(stack.stripe.charges_of("aws-rejected"), 1);
    assert_eq!(stack.stripe.refunds_of("aws-rejected"), 1);
    assert_idempotency_keys(stack, "/v1/refunds", "aws-rejected", "refund:aws-rejected");
    assert_eq!(
        b.stock_of("aws-organ").await,
        (1, 0),
        "the stock is released"
    );
}

async fn expired_approval_window_is_compensated(stack: &AwsStack, hasty: &Server, b: &Server) {
    hasty.stock("aws-harp", 1, 300_000).await;
    let placed = hasty
        .place(&order(
            "aws-expired",
            "aws-harp",
            1,
            300_000,
            "pm_card_visa",
        ))
        .await;
    assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
    let cancelled = b.reaches("aws-expired", "CANCELLED").await;
    assert_eq!(
        cancelled["failure"]["error"], "Order.ApprovalExpired",
        "a keeper closed the window: {cancelled}"
    );
    let deadline = cancelled["approval"]["deadline"].as_str().unwrap();
    let cause = cancelled["failure"]["cause"].as_str().unwrap();
    assert!(
        cause.starts_with("the approval window closed at ") && deadline.starts_with(&cause[30..49]),
        "the cause names the deadline {deadline}: {cancelled}"
    );
    assert_eq!(stack.stripe.refunds_of("aws-expired"), 1);
    assert_eq!(
        b.stock_of("aws-harp").await,
        (1, 0),
        "the stock is released"
    );
    let late = b.decide("aws-expired", "approve").await;
    assert_eq!(late.status, StatusCode::CONFLICT, "{}", late.text);
}

async fn replays_and_conflicts(stack: &AwsStack, a: &Server, b: &Server) {
    a.stock("aws-pen", 10, 250).await;
    let pen = order("aws-replayed", "aws-pen", 1, 250, "pm_card_visa");
    let first = a.place(&pen).await;
    assert_eq!(first.status, StatusCode::ACCEPTED, "{}", first.text);
    assert!(!first.replayed());
    let again = b.place(&pen).await;
    assert_eq!(again.status, StatusCode::ACCEPTED, "{}", again.text);
    assert!(again.replayed(), "{:?}", again.headers);
    assert_eq!(again.json()["executionArn"], first.json()["executionArn"]);
    let mut other = pen.clone();
    other["items"][0]["quantity"] = json!(3);
    let conflict = b.place(&other).await;
    assert_eq!(conflict.status, StatusCode::CONFLICT, "{}", conflict.text);
    assert_eq!(
        conflict.header("content-type"),
        Some("application/problem+json")
    );
    let done = a.reaches("aws-replayed", "COMPLETED").await;
    assert_eq!(
        done["amountCents"], 250,
        "the conflict changed nothing: {done}"
    );
    assert_eq!(stack.stripe.charges_of("aws-replayed"), 1);
    assert_eq!(a.stock_of("aws-pen").await, (9, 0));
}

/// The trust boundaries with `--backend aws`, across two replicas: a client reads only its own
/// orders and cannot decide any, a price not the catalog's is refused and leaves nothing, a key
/// revoked in the table is refused by the replica that had it cached within ten seconds, and a
/// client past its rate is refused while another is served.
/// Step Functions is unreachable from the replica an order is placed on: it stores the order,
/// cannot start it and answers 503, and the client never retries. The repair loop of another
/// replica starts it once its grace has passed (the order id names the execution, so a start
/// that raced it would change nothing), and it completes, charged once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_order_its_replica_could_not_start_is_started_by_another_replicas_repair_loop() {
    let mut stack = AwsStack::start().await;
    let healer = stack.replica(&["--repair-interval", "1s", "--repair-grace", "2s"]);
    let down = Faults {
        unavailable: 1.0,
        ..Faults::default()
    };
    let sfn = FaultProxy::start(&stack.engine.base, Dialect::Aws, down, 1).await;
    // Up while the replica starts (it checks its state machine), down from then on.
    sfn.pause(true);
    let dynamodb = stack.moto.endpoint().to_owned();
    stack.route_replicas_through(&sfn.base_url, &dynamodb);
    let cut_off = stack.replica(&["--repair-interval", "off"]);
    sfn.pause(false);

    healer.stock("aws-atlas", 2, 3_000).await;
    let unstarted = order("aws-unstarted", "aws-atlas", 1, 3_000, "pm_card_visa");
    let placed = cut_off.place(&unstarted).await;
    assert_eq!(
        placed.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        placed.text
    );
    assert!(sfn.injected().unavailable > 0, "{}", sfn.injected());

    let done = healer.ends("aws-unstarted", "COMPLETED", "SUCCEEDED").await;
    assert_eq!(done["amountCents"], 3_000, "{done}");
    assert_eq!(stack.stripe.charges_of("aws-unstarted"), 1);
    let metrics = healer.metrics().await;
    assert!(
        metrics.contains("fulfillment_repairs_total{kind=\"started\"} 1"),
        "{metrics}"
    );
    cut_off.stop();
    healer.stop();
}

/// A replica answers status polls from the order's record and asks Step Functions nothing
/// for them (AWS refills `DescribeExecution` at about 15 a second for a whole account), and
/// its `/readyz` asks at most once in a while; the history is still read there.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn status_polls_make_no_step_functions_call_on_the_aws_backend() {
    let mut stack = AwsStack::start().await;
    let sfn = FaultProxy::start(&stack.engine.base, Dialect::Aws, Faults::default(), 1).await;
    let dynamodb = stack.moto.endpoint().to_owned();
    stack.route_replicas_through(&sfn.base_url, &dynamodb);
    let replica = stack.replica(&[]);
    replica.stock("aws-globe", 3, 2_000).await;
    let placed = replica
        .place(&order("aws-polled", "aws-globe", 1, 2_000, "pm_card_visa"))
        .await;
    assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
    replica.ends("aws-polled", "COMPLETED", "SUCCEEDED").await;

    const DESCRIBE: &str = "AWSStepFunctions.DescribeExecution";
    let before = sfn.calls(DESCRIBE);
    for _ in 0..15 {
        let view = replica.status("aws-polled").await;
        assert_eq!(view["executionStatus"], "SUCCEEDED", "{view}");
    }
    assert_eq!(
        sfn.calls(DESCRIBE),
        before,
        "status polls asked Step Functions"
    );
    for _ in 0..10 {
        let ready = replica.anonymous(Method::GET, "/readyz", None).await;
        assert_eq!(ready.status, StatusCode::OK, "{}", ready.text);
    }
    assert!(
        sfn.calls(DESCRIBE) <= before + 1,
        "ten readiness probes asked Step Functions {} times",
        sfn.calls(DESCRIBE) - before
    );
    let history = replica.history("aws-polled").await;
    assert_eq!(
        history.last().map(String::as_str),
        Some("ExecutionSucceeded")
    );
    assert!(sfn.calls("AWSStepFunctions.GetExecutionHistory") > 0);
    replica.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn trust_boundaries_hold_across_replicas_on_the_aws_backend() {
    let stack = AwsStack::start().await;
    let limited = ["--rate-limit", "1", "--rate-limit-burst", "10"];
    let a = stack.replica(&limited);
    let b = stack.replica(&limited);
    let alice = stack.keys_create("alice-shop", "client");
    let alice_spare = stack.keys_create("alice-shop", "client");
    let bob = stack.keys_create("bob-shop", "client");
    a.stock("aws-trust-book", 5, 1_500).await;

    // Alice's order is hers: Bob gets what an unknown id gets, on either replica, and his
    // placing the same id tells him nothing of it.
    let mine = order("aws-alice-1", "aws-trust-book", 1, 1_500, "pm_card_visa");
    let placed = a.place_as(&mine, &alice).await;
    assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
    let seen = b
        .send(
            Method::GET,
            "/orders/aws-alice-1/status",
            None,
            Some(&alice_spare),
        )
        .await;
    assert_eq!(
        seen.status,
        StatusCode::OK,
        "any of alice's keys: {}",
        seen.text
    );
    for (server, path) in [
        (&a, "/orders/aws-alice-1"),
        (&b, "/orders/aws-alice-1/status"),
    ] {
        let r = server.send(Method::GET, path, None, Some(&bob)).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{path}: {}", r.text);
        assert_eq!(r.problem().as_deref(), Some("order-not-found"));
    }
    let decided = b
        .send(
            Method::POST,
            "/orders/aws-alice-1/approval",
            Some(&json!({"decision": "reject"})),
            Some(&bob),
        )
        .await;
    assert_eq!(decided.status, StatusCode::FORBIDDEN, "{}", decided.text);
    let taken = b.place_as(&mine, &bob).await;
    assert_eq!(taken.status, StatusCode::CONFLICT, "{}", taken.text);
    assert_eq!(taken.problem().as_deref(), Some("order-id-taken"));
    assert!(!taken.text.contains("alice-shop"), "{}", taken.text);
    // Listings: alice's own on either replica, none of hers in bob's, all in an operator's.
    assert_eq!(listed(&b, &alice_spare).await, ["aws-alice-1"]);
    assert!(listed(&a, &bob).await.is_empty());
    assert!(
        listed(&a, blackbox::TOKEN)
            .await
            .contains(&"aws-alice-1".to_owned())
    );

    // A price the catalog does not say: refused, nothing stored on either replica.
    let cheap = order("aws-cheap", "aws-trust-book", 3, 1, "pm_card_visa");
    let refused = b.place_as(&cheap, &alice).await;
    assert_eq!(
        refused.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        refused.text
    );
    assert_eq!(refused.problem().as_deref(), Some("price-mismatch"));
    let none = a.request(Method::GET, "/orders/aws-cheap", None).await;
    assert_eq!(none.status, StatusCode::NOT_FOUND, "{}", none.text);
    // Five on the shelf; Alice's order takes one (held or shipped by now), the refusal none.
    let (available, _) = a.stock_of("aws-trust-book").await;
    assert!(available >= 4, "the refusal took stock: {available} left");

    // Revoked in the table: replica b, which checked the spare key a moment ago, refuses it
    // within ten seconds; replica a, which never saw it, at once.
    let spare_id = alice_spare.split('_').nth(1).unwrap();
    stack.keys(&["revoke", spare_id]);
    let refused_now = a
        .send(
            Method::GET,
            "/orders/aws-alice-1/status",
            None,
            Some(&alice_spare),
        )
        .await;
    assert_eq!(
        refused_now.status,
        StatusCode::UNAUTHORIZED,
        "{}",
        refused_now.text
    );
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let r = b
            .send(
                Method::GET,
                "/orders/aws-alice-1/status",
                None,
                Some(&alice_spare),
            )
            .await;
        if r.status == StatusCode::UNAUTHORIZED {
            break;
        }
        assert!(
            std::time::Instant::now() < until,
            "still served: {}",
            r.text
        );
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }

    // Alice past her rate on replica a is refused; Bob is served there in full meanwhile.
    let refusal = a.until_refused("/inventory", &alice, 60).await;
    let refusal = refusal.expect("alice is refused past her burst");
    assert_eq!(
        refusal.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        refusal.text
    );
    assert!(
        refusal.header("retry-after").is_some(),
        "{:?}",
        refusal.headers
    );
    for n in 0..10 {
        let r = a.send(Method::GET, "/inventory", None, Some(&bob)).await;
        assert_eq!(r.status, StatusCode::OK, "bob's request {n}: {}", r.text);
    }

    for replica in [a, b] {
        replica.stop();
    }
}

/// The ids of the first page of `GET /orders` for `key`.
async fn listed(server: &Server, key: &str) -> Vec<String> {
    let r = server
        .send(Method::GET, "/orders?limit=100", None, Some(key))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    r.json()["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|o| o["orderId"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// A gauge or counter of a replica's `/metrics`.
async fn metric(server: &Server, name: &str) -> u64 {
    let text = server.metrics().await;
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("fulfillment_{name} ")))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map_or_else(|| panic!("no {name} in {text}"), |v| v as u64)
}

/// Two replicas share the approval keeper: the queue's shards are split between them, each
/// parked approval is kept by one of them, and when one is killed the other takes its shards
/// over before any token's heartbeat lapses. Approved, every order ships.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_share_the_approval_keeper_and_one_takes_over_when_the_other_dies() {
    use store_dynamodb::{APPROVAL_SHARDS, approval_shard};
    let stack = AwsStack::start().await;
    // A short heartbeat: rounds every 4 s, leases of 8 s. A takeover takes up to a lease and a
    // round after the last heartbeat a round before the kill: 0.8 of the heartbeat, so the
    // margin is a fifth of it (4 s here; at 10 s, 2 s proved too thin on a loaded 2-core host).
    let args = ["--approval-heartbeat", "20s", "--approval-timeout", "1h"];
    let mut a = stack.replica(&args);
    let b = stack.replica(&args);
    // Orders whose ids fall in every shard of the queue: both replicas keep some.
    let mut ids: Vec<String> = Vec::new();
    let mut covered = vec![false; APPROVAL_SHARDS as usize];
    for i in 0.. {
        let id = format!("aws-kept-{i}");
        let shard = approval_shard(&id) as usize;
        if !covered[shard] {
            covered[shard] = true;
            ids.push(id);
        }
        if ids.len() == APPROVAL_SHARDS as usize {
            break;
        }
    }
    a.stock("aws-organ", ids.len() as u64, 300_000).await;
    for id in &ids {
        let placed = a
            .place(&order(id, "aws-organ", 1, 300_000, "pm_card_visa"))
            .await;
        assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
    }
    for id in &ids {
        b.reaches(id, "AWAITING_APPROVAL").await;
    }
    let parked = ids.len() as u64;
    let shards = u64::from(APPROVAL_SHARDS);

    // Balanced: the shards are split, and each parked approval is kept by one replica a round.
    let until = std::time::Instant::now() + blackbox::DEADLINE;
    loop {
        let held = (
            metric(&a, "approval_keeper_shards").await,
            metric(&b, "approval_keeper_shards").await,
        );
        let kept = (
            metric(&a, "approval_keeper_last_round_approvals").await,
            metric(&b, "approval_keeper_last_round_approvals").await,
        );
        let split = held.0 + held.1 == shards && held.0 > 0 && held.1 > 0;
        if split && kept.0 + kept.1 == parked && kept.0 > 0 && kept.1 > 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < until,
            "never split: shards {held:?}, kept {kept:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    a.kill();
    let until = std::time::Instant::now() + blackbox::DEADLINE;
    loop {
        let held = metric(&b, "approval_keeper_shards").await;
        let kept = metric(&b, "approval_keeper_last_round_approvals").await;
        if held == shards && kept == parked {
            break;
        }
        assert!(
            std::time::Instant::now() < until,
            "never taken over: {held} shards, {kept} kept"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Taken over in time: no approval's heartbeat lapsed, none was re-issued.
    for id in &ids {
        let history = b.history(id).await;
        assert!(
            !history.iter().any(|e| e == "ActivityTimedOut"),
            "{id}: {history:?}"
        );
    }
    for id in &ids {
        let decided = b.decide(id, "approve").await;
        assert_eq!(decided.status, StatusCode::OK, "{}", decided.text);
    }
    for id in &ids {
        b.ends(id, "COMPLETED", "SUCCEEDED").await;
    }
    b.stop();
}

/// On AWS a lapsed heartbeat and the window's end are both `States.Timeout` in the history, so
/// nothing may be told from it: after the replica that parked an approval is killed and its
/// token lapses, the task re-issued to another replica keeps the deadline the first park put
/// on the order, and an approval then takes effect and ships the order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_approval_on_a_token_reissued_after_a_kill_takes_effect_on_the_aws_backend() {
    let stack = AwsStack::start().await;
    let args = ["--approval-heartbeat", "2s", "--approval-timeout", "1h"];
    let mut first = stack.replica(&args);
    first.stock("aws-lute", 1, 300_000).await;
    let placed = first
        .place(&order(
            "aws-reissued",
            "aws-lute",
            1,
            300_000,
            "pm_card_visa",
        ))
        .await;
    assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
    let parked = first.reaches("aws-reissued", "AWAITING_APPROVAL").await;
    first.kill();

    // Its keeper gone, the parked token lapses; the next replica's worker takes the task again
    // and parks a fresh token. The next replica starts once the token has lapsed: started at
    // once, its keeper could take the first one's shard in time to heartbeat the old token.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let second = stack.replica(&args);
    let until = std::time::Instant::now() + blackbox::DEADLINE;
    while !second
        .history("aws-reissued")
        .await
        .iter()
        .any(|e| e == "ActivityTimedOut")
    {
        assert!(std::time::Instant::now() < until, "the token never lapsed");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let reparked = second.reaches("aws-reissued", "AWAITING_APPROVAL").await;
    assert_eq!(
        reparked["approval"]["deadline"], parked["approval"]["deadline"],
        "the window did not move"
    );
    let decided = second.decide("aws-reissued", "approve").await;
    assert_eq!(decided.status, StatusCode::OK, "{}", decided.text);
    second.ends("aws-reissued", "COMPLETED", "SUCCEEDED").await;
    second.stop();
}

/// Webhooks and the status stream on the AWS backend: an endpoint registered on one replica
/// gets the events of an order placed on the other (the outbox in the order's item, the loop
/// on whichever replica holds its lease), each event once per id, in the delivery log of
/// either replica; the stream on either follows the order to its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn webhooks_and_the_status_stream_work_across_replicas_on_the_aws_backend() {
    use std::sync::{Arc, Mutex};
    /// Each delivery's `webhook-id` and body.
    type Received = Arc<Mutex<Vec<(String, String)>>>;
    let received: Received = Arc::default();
    let app = axum::Router::new()
        .route(
            "/hook",
            axum::routing::post(
                |axum::extract::State(got): axum::extract::State<Received>,
                 headers: axum::http::HeaderMap,
                 body: String| async move {
                    let id = headers
                        .get("webhook-id")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    got.lock().unwrap().push((id, body));
                    axum::http::StatusCode::NO_CONTENT
                },
            ),
        )
        .with_state(received.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let stack = AwsStack::start().await;
    let allow = ["--webhook-allow-private"];
    let a = stack.replica(&allow);
    let b = stack.replica(&allow);
    let alice = stack.keys_create("alice-shop", "client");
    a.stock("aws-hook-book", 5, 1_500).await;
    let registered = a
        .send(
            Method::POST,
            "/webhooks/endpoints",
            Some(&json!({ "url": url })),
            Some(&alice),
        )
        .await;
    assert_eq!(
        registered.status,
        StatusCode::CREATED,
        "{}",
        registered.text
    );
    let endpoint = registered.json()["id"].as_str().unwrap().to_owned();

    let placed = b
        .place_as(
            &order("aws-hook-1", "aws-hook-book", 1, 1_500, "pm_card_visa"),
            &alice,
        )
        .await;
    assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
    // The stream, opened on replica a, follows the order placed on b to its end.
    let stream = a
        .client
        .get(a.url("/orders/aws-hook-1/events"))
        .bearer_auth(&alice)
        .header("last-event-id", "ACCEPTED")
        .send()
        .await
        .expect("open the stream");
    assert_eq!(stream.status(), StatusCode::OK);
    let text = tokio::time::timeout(Duration::from_secs(60), stream.text())
        .await
        .expect("the stream ends after the final status")
        .expect("read the stream");
    let ids: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("id:").map(str::trim))
        .collect();
    assert_eq!(ids.last(), Some(&"COMPLETED"), "{text}");
    assert!(!ids.contains(&"ACCEPTED"), "resumed after it: {text}");

    let wanted = ["msg_aws-hook-1.accepted", "msg_aws-hook-1.completed"];
    let until = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let got: Vec<String> = received
            .lock()
            .unwrap()
            .iter()
            .map(|(id, _)| id.clone())
            .collect();
        if wanted.iter().all(|w| got.iter().any(|g| g == w)) {
            break;
        }
        assert!(std::time::Instant::now() < until, "received {got:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let log = b
        .send(
            Method::GET,
            &format!("/webhooks/endpoints/{endpoint}/deliveries"),
            None,
            Some(&alice),
        )
        .await;
    assert_eq!(log.status, StatusCode::OK, "{}", log.text);
    let items = log.json()["items"].as_array().unwrap().clone();
    for w in wanted {
        let d = items
            .iter()
            .find(|d| d["webhookId"] == w)
            .unwrap_or_else(|| panic!("{w} in the log: {items:?}"));
        assert_eq!(d["state"], "DELIVERED", "{d}");
    }
    for replica in [a, b] {
        replica.stop();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_console_works_across_replicas_on_the_aws_backend() {
    use blackbox::console::{csrf_of, get, post, sign_in};
    let stack = AwsStack::start().await;
    let a = stack.replica(&[]);
    let b = stack.replica(&[]);
    let ops = stack.keys_create("ops-on-aws", "operator");
    a.stock("aws-console-piano", 2, 450_000).await;
    let placed = a
        .place(&order(
            "aws-console-1",
            "aws-console-piano",
            1,
            450_000,
            "pm_card_visa",
        ))
        .await;
    assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
    b.reaches("aws-console-1", "AWAITING_APPROVAL").await;

    // A session opened on one replica is known to the other (it lives in DynamoDB).
    let (status, cookie) = sign_in(&a, &ops).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let cookie = cookie.expect("a session cookie");
    let (status, _, dashboard) = get(&b, &cookie, "/console").await;
    assert_eq!(status, StatusCode::OK, "{dashboard}");
    // DynamoDB counts the approvals queue (a sparse index) exactly.
    assert!(
        dashboard.contains("Approvals waiting</a></dt><dd>1</dd>"),
        "{dashboard}"
    );
    let (status, _, page) = get(&b, &cookie, "/console/orders/aws-console-1").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(
        page.contains("AWAITING_APPROVAL") && page.contains("<svg"),
        "{page}"
    );
    let (status, _, list) = get(&a, &cookie, "/console/orders?status=AWAITING_APPROVAL").await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert!(list.contains("/console/orders/aws-console-1"), "{list}");

    // Approved from the console of the other replica: recorded with the operator's name.
    let token = csrf_of(&page);
    let (status, location) = post(
        &b,
        &cookie,
        "/console/orders/aws-console-1/approve",
        &[("csrf", &token), ("note", "approved on aws")],
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert!(
        location.starts_with("/console/orders/aws-console-1?done="),
        "{location}"
    );
    let done = a.reaches("aws-console-1", "COMPLETED").await;
    assert_eq!(done["approval"]["decidedBy"], "ops-on-aws", "{done}");

    // Signing out on one replica ends the session on both.
    let (status, _) = post(&b, &cookie, "/console/sign-out", &[("csrf", &token)]).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    for replica in [&a, &b] {
        let (status, location, _) = get(replica, &cookie, "/console").await;
        assert_eq!(
            (status, location.as_str()),
            (StatusCode::SEE_OTHER, "/console/sign-in")
        );
    }
    for replica in [a, b] {
        replica.stop();
    }
}

/// `provision` published this build's definition and routed `live` to it; a replica's start
/// keeps it there; `versions` lists and steers it beside the running replica, and orders
/// placed meanwhile run through `live`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn versions_are_listed_and_steered_beside_a_running_replica_on_the_aws_backend() {
    let stack = AwsStack::start().await;
    let a = stack.replica(&[]);
    let (code, listed, stderr) = stack.versions(&["list"]);
    assert_eq!(code, Some(0), "{stderr}");
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(lines.len(), 2, "one version: {listed}");
    let line: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(line[..2], ["1", "100%"], "{listed}");
    let (code, _, stderr) = stack.versions(&["rollback", "7"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("version 7 does not exist"), "{stderr}");
    let (code, promoted, stderr) = stack.versions(&["promote"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(promoted.trim(), "live: version 1 (this build's), unpinned");

    a.stock("aws-lute", 2, 1_000).await;
    let placed = a
        .place(&order(
            "aws-versioned",
            "aws-lute",
            1,
            1_000,
            "pm_card_visa",
        ))
        .await;
    assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
    a.ends("aws-versioned", "COMPLETED", "SUCCEEDED").await;
    let (_, listed, _) = stack.versions(&["list"]);
    assert_eq!(
        listed.lines().count(),
        2,
        "no version published since: {listed}"
    );
}
