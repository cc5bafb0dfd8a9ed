//! The order saga end to end on the embedded engine and real SQLite files, one test per path:
//! completion, approval, every failure with its compensations, retries that must not charge
//! twice, duplicate deliveries, and a worker that dies mid-step.

#[path = "http_router/counting.rs"]
mod counting;
#[path = "saga/harness.rs"]
mod harness;
#[path = "saga/repair.rs"]
mod repair;

use counting::CountingPayments;
use engine::ExecutionStatus;
use harness::{Saga, catalog_cents, large, request, small};
use intake::Placed;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use store::{
    ChargeRequest, Created, Decision, GatewayError, OrderStatus, Refunded, ReservationStatus,
    Reserved,
};
use workflow::SagaSettings;
use workflow::definition::Activity;
use workflow::steps::approval::{DecisionResult, decide};
use workflow::{StepOutcome, StepTask, WorkflowPort};

/// Whether the order's recorded charge was refunded.
async fn refunded(saga: &Saga, id: &str) -> bool {
    let order = saga.order(id).await;
    let recorded = order.charge_id.as_deref();
    // Refunding again under the same key replays the earlier refund, if there was one.
    matches!(
        saga.ports
            .payments
            .refund(order.id(), recorded, &order.id().refund_key())
            .await
            .unwrap(),
        Refunded::Already(r) if Some(r.charge_id.as_str()) == recorded
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn small_order_completes_without_approval() {
    let saga = Saga::default().await;
    saga.stock("book", 5).await;
    let order = saga.place(small("o-small", "book", "pm_card_visa")).await;
    assert!(!order.new.requires_approval);
    let done = saga.finished(&order).await;
    assert_eq!(done.status, ExecutionStatus::Succeeded, "{done:?}");
    let order = saga.order("o-small").await;
    assert_eq!(order.status, OrderStatus::Completed);
    assert_eq!(saga.level("book").await, (4, 0, 1));
    assert_eq!(saga.charges("o-small").await, 1);
    let shipment = saga
        .ports
        .shipping
        .shipment(order.id())
        .await
        .unwrap()
        .unwrap();
    assert!(shipment.tracking_number.starts_with("1Z"));
    let tasks = saga
        .event_types(&order)
        .await
        .iter()
        .filter(|e| *e == "TaskStateEntered")
        .count();
    assert_eq!(tasks, 3, "reserve, charge and ship; no approval");
}

#[tokio::test(flavor = "multi_thread")]
async fn large_order_waits_for_approval_then_completes() {
    let saga = Saga::default().await;
    saga.stock("piano", 1).await;
    let order = saga.place(large("o-large", "piano")).await;
    assert!(order.new.requires_approval);
    let parked = saga.reaches("o-large", OrderStatus::AwaitingApproval).await;
    assert!(parked.approval.as_ref().unwrap().task_token.is_some());
    let pending = saga.ports.orders.pending_approvals(None, 10).await.unwrap();
    assert_eq!(pending.items.len(), 1);

    let result = decide(
        saga.ports.orders.as_ref(),
        saga.workflow.as_ref(),
        order.id(),
        Decision::Approve,
        "ops@example.com",
        None,
    )
    .await
    .unwrap();
    assert!(matches!(result, DecisionResult::Applied(_)), "{result:?}");
    let done = saga.finished(&order).await;
    assert_eq!(done.status, ExecutionStatus::Succeeded, "{done:?}");
    let order = saga.order("o-large").await;
    assert_eq!(order.status, OrderStatus::Completed);
    let approval = order.approval.clone().unwrap();
    assert_eq!(approval.decision, Some(Decision::Approve));
    assert_eq!(approval.decided_by.as_deref(), Some("ops@example.com"));
    assert_eq!(saga.level("piano").await, (0, 0, 1));
    // The same decision again is a replay; the other one a conflict.
    let again = decide(
        saga.ports.orders.as_ref(),
        saga.workflow.as_ref(),
        order.id(),
        Decision::Approve,
        "ops@example.com",
        None,
    )
    .await
    .unwrap();
    assert!(matches!(again, DecisionResult::Replayed(_)), "{again:?}");
    let other = decide(
        saga.ports.orders.as_ref(),
        saga.workflow.as_ref(),
        order.id(),
        Decision::Reject,
        "ops@example.com",
        None,
    )
    .await
    .unwrap();
    assert!(matches!(other, DecisionResult::Conflict(_)), "{other:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn out_of_stock_fails_with_nothing_to_undo() {
    let saga = Saga::default().await;
    saga.stock("rare", 0).await;
    let order = saga.place(small("o-oos", "rare", "pm_card_visa")).await;
    let done = saga.finished(&order).await;
    assert_eq!(done.status, ExecutionStatus::Failed);
    assert_eq!(done.error.as_deref(), Some("Inventory.OutOfStock"));
    let order = saga.order("o-oos").await;
    assert_eq!(order.status, OrderStatus::Cancelled);
    assert_eq!(order.failure.unwrap().error, "Inventory.OutOfStock");
    assert_eq!(saga.charges("o-oos").await, 0);
    assert_eq!(saga.level("rare").await, (0, 0, 0));
    assert!(!refunded(&saga, "o-oos").await);
}

#[tokio::test(flavor = "multi_thread")]
async fn declined_card_releases_the_stock() {
    let saga = Saga::default().await;
    saga.stock("book", 5).await;
    let order = saga
        .place(small("o-declined", "book", "pm_card_chargeDeclined"))
        .await;
    let done = saga.finished(&order).await;
    assert_eq!(done.status, ExecutionStatus::Failed);
    assert_eq!(done.error.as_deref(), Some("Payment.Declined"), "{done:?}");
    assert_eq!(
        saga.order("o-declined").await.status,
        OrderStatus::Cancelled
    );
    assert_eq!(saga.level("book").await, (5, 0, 0));
    assert_eq!(saga.charges("o-declined").await, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn transient_payment_failure_is_retried_and_charged_once() {
    let saga = Saga::default().await;
    saga.stock("book", 5).await;
    let order = saga
        .place(small("o-flaky", "book", "pm_card_unavailable_once"))
        .await;
    let done = saga.finished(&order).await;
    assert_eq!(done.status, ExecutionStatus::Succeeded, "{done:?}");
    assert_eq!(saga.charges("o-flaky").await, 1);
    let failures = saga
        .event_types(&order)
        .await
        .iter()
        .filter(|e| *e == "ActivityFailed")
        .count();
    assert_eq!(
        failures, 1,
        "the first charge attempt failed and was retried"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn lost_response_is_retried_and_still_charged_once() {
    let saga = Saga::default().await;
    saga.stock("book", 5).await;
    let order = saga
        .place(small("o-lost", "book", "pm_card_lost_response"))
        .await;
    let done = saga.finished(&order).await;
    assert_eq!(done.status, ExecutionStatus::Succeeded, "{done:?}");
    assert_eq!(saga.charges("o-lost").await, 1);
    let output: serde_json::Value = serde_json::from_str(done.output.as_deref().unwrap()).unwrap();
    let charge = saga
        .ports
        .payments
        .find_charge(order.id())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        output["payment"]["chargeId"],
        json!(charge.charge_id),
        "the retry saw the existing charge"
    );
    assert_eq!(
        saga.order("o-lost").await.charge_id,
        Some(charge.charge_id),
        "and recorded it"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn rejected_approval_refunds_and_releases() {
    let saga = Saga::default().await;
    saga.stock("piano", 1).await;
    let order = saga.place(large("o-rejected", "piano")).await;
    saga.reaches("o-rejected", OrderStatus::AwaitingApproval)
        .await;
    let result = decide(
        saga.ports.orders.as_ref(),
        saga.workflow.as_ref(),
        order.id(),
        Decision::Reject,
        "ops@example.com",
        Some("fraud check failed"),
    )
    .await
    .unwrap();
    assert!(matches!(result, DecisionResult::Applied(_)));
    let done = saga.finished(&order).await;
    assert_eq!(done.status, ExecutionStatus::Failed);
    assert_eq!(done.error.as_deref(), Some("Order.Rejected"));
    assert!(
        done.cause
            .as_deref()
            .unwrap()
            .contains("fraud check failed")
    );
    assert_eq!(
        saga.order("o-rejected").await.status,
        OrderStatus::Cancelled
    );
    assert!(refunded(&saga, "o-rejected").await);
    assert_eq!(saga.level("piano").await, (1, 0, 0));
}

/// A window of `window` seconds whose lapsed heartbeats are noticed within a second.
fn short_window(window: u64) -> SagaSettings {
    SagaSettings {
        approval_timeout: Duration::from_secs(window),
        approval_heartbeat: Duration::from_secs(1),
        ..SagaSettings::default()
    }
}

/// The deadline fixed on the order when its approval was first parked.
fn deadline_of(order: &store::Order) -> chrono::DateTime<chrono::Utc> {
    order
        .approval
        .as_ref()
        .and_then(|a| a.deadline)
        .expect("a deadline")
}

async fn decide_now(saga: &Saga, id: &str, decision: Decision) -> DecisionResult {
    decide(
        saga.ports.orders.as_ref(),
        saga.workflow.as_ref(),
        &store::OrderId::parse(id).unwrap(),
        decision,
        "ops",
        None,
    )
    .await
    .unwrap()
}

/// How many times the approval's task was re-issued after its heartbeat lapsed.
async fn lapses(saga: &Saga, order: &store::Order) -> usize {
    saga.event_types(order)
        .await
        .iter()
        .filter(|e| *e == "ActivityTimedOut")
        .count()
}

#[tokio::test(flavor = "multi_thread")]
async fn expired_approval_window_refunds_and_releases() {
    let saga = Saga::start(short_window(2)).await;
    saga.stock("piano", 1).await;
    let order = saga.place(large("o-expired", "piano")).await;
    let parked = saga
        .reaches("o-expired", OrderStatus::AwaitingApproval)
        .await;
    let deadline = deadline_of(&parked);
    let done = saga.finished(&order).await;
    assert_eq!(done.status, ExecutionStatus::Failed);
    // The keeper closed the window, with our error and the deadline in the cause.
    assert_eq!(
        done.error.as_deref(),
        Some("Order.ApprovalExpired"),
        "{done:?}"
    );
    let cause = done.cause.clone().unwrap();
    let stamp = deadline.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    assert!(cause.contains(&stamp), "{cause} names {stamp}");
    let after = saga.order("o-expired").await;
    assert_eq!(after.status, OrderStatus::Cancelled);
    assert_eq!(
        after.failure.as_ref().unwrap().error,
        "Order.ApprovalExpired"
    );
    assert!(refunded(&saga, "o-expired").await);
    assert_eq!(saga.level("piano").await, (1, 0, 0));
    let late = decide_now(&saga, "o-expired", Decision::Approve).await;
    assert!(matches!(late, DecisionResult::Expired(_)), "{late:?}");
}

/// The deadline passes while nothing runs (workers and keeper stopped): a decision after it
/// takes no effect, whatever it is and however often; the keeper closes the window when it
/// runs again.
#[tokio::test(flavor = "multi_thread")]
async fn a_decision_after_the_deadline_takes_no_effect() {
    let mut saga = Saga::start(short_window(2)).await;
    saga.stock("piano", 1).await;
    let order = saga.place(large("o-too-late", "piano")).await;
    let parked = saga
        .reaches("o-too-late", OrderStatus::AwaitingApproval)
        .await;
    saga.stop_workers().await;
    let deadline = deadline_of(&parked);
    while chrono::Utc::now() <= deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for decision in [Decision::Approve, Decision::Approve, Decision::Reject] {
        let late = decide_now(&saga, "o-too-late", decision).await;
        assert!(matches!(late, DecisionResult::Expired(_)), "{late:?}");
    }
    let unchanged = saga.order("o-too-late").await;
    assert_eq!(unchanged.approval.as_ref().unwrap().decision, None);

    saga.start_workers();
    let done = saga.finished(&order).await;
    assert_eq!(
        done.error.as_deref(),
        Some("Order.ApprovalExpired"),
        "{done:?}"
    );
    assert_eq!(
        saga.order("o-too-late").await.status,
        OrderStatus::Cancelled
    );
    assert!(refunded(&saga, "o-too-late").await);
    assert_eq!(saga.level("piano").await, (1, 0, 0));
}

/// A crash (here: workers and keeper stopped) lets the parked token's heartbeat lapse. A
/// decision made before the deadline on that dead token is recorded and takes effect: the
/// re-issued task answers from it, and the order ships.
#[tokio::test(flavor = "multi_thread")]
async fn a_decision_on_a_token_lost_in_a_crash_takes_effect_through_the_reissued_task() {
    let mut saga = Saga::start(short_window(600)).await;
    saga.stock("piano", 1).await;
    let order = saga.place(large("o-lost", "piano")).await;
    saga.reaches("o-lost", OrderStatus::AwaitingApproval).await;
    saga.stop_workers().await;
    let deadline = std::time::Instant::now() + harness::DEADLINE;
    while lapses(&saga, &order).await == 0 {
        assert!(std::time::Instant::now() < deadline, "never lapsed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let decided = decide_now(&saga, "o-lost", Decision::Approve).await;
    assert!(matches!(decided, DecisionResult::Applied(_)), "{decided:?}");
    saga.start_workers();
    let done = saga.finished(&order).await;
    assert_eq!(done.status, ExecutionStatus::Succeeded, "{done:?}");
    assert_eq!(saga.order("o-lost").await.status, OrderStatus::Completed);
    assert_eq!(saga.level("piano").await, (0, 0, 1));
}

/// Restarts, each long enough for the parked token's heartbeat to lapse, more of them than
/// the approval's retries once allowed (10): the task is re-issued each time, the deadline
/// stays where the first park put it, and an approval made after them all ships the order.
#[tokio::test(flavor = "multi_thread")]
async fn restarts_never_move_the_window_nor_use_up_its_retries() {
    let mut saga = Saga::start(short_window(600)).await;
    saga.stock("piano", 1).await;
    let order = saga.place(large("o-restarts", "piano")).await;
    let first = saga
        .reaches("o-restarts", OrderStatus::AwaitingApproval)
        .await;
    let deadline = deadline_of(&first);
    let mut token = first.approval.as_ref().unwrap().task_token.clone();
    for restart in 1..=11 {
        saga.stop_workers().await;
        let until = std::time::Instant::now() + harness::DEADLINE;
        while lapses(&saga, &order).await < restart {
            assert!(std::time::Instant::now() < until, "restart {restart}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        saga.start_workers();
        // The re-issued task parks its fresh token; the window stays as it was.
        let until = std::time::Instant::now() + harness::DEADLINE;
        let reparked = loop {
            let now = saga.order("o-restarts").await;
            let parked = now.approval.as_ref().unwrap().task_token.clone();
            if parked != token {
                break now;
            }
            assert!(std::time::Instant::now() < until, "restart {restart}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert_eq!(deadline_of(&reparked), deadline, "restart {restart}");
        assert_eq!(reparked.status, OrderStatus::AwaitingApproval);
        token = reparked.approval.as_ref().unwrap().task_token.clone();
    }
    let decided = decide_now(&saga, "o-restarts", Decision::Approve).await;
    assert!(matches!(decided, DecisionResult::Applied(_)), "{decided:?}");
    let done = saga.finished(&order).await;
    assert_eq!(done.status, ExecutionStatus::Succeeded, "{done:?}");
    assert_eq!(
        saga.order("o-restarts").await.status,
        OrderStatus::Completed
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn rejected_shipment_refunds_and_releases() {
    let saga = Saga::default().await;
    saga.stock("book", 5).await;
    let order = saga
        .place(request(
            "o-noship",
            &[("book", 2, 2_500)],
            "pm_card_visa",
            "00000",
        ))
        .await;
    let done = saga.finished(&order).await;
    assert_eq!(done.status, ExecutionStatus::Failed);
    assert_eq!(done.error.as_deref(), Some("Shipment.Rejected"));
    assert_eq!(saga.order("o-noship").await.status, OrderStatus::Cancelled);
    assert!(refunded(&saga, "o-noship").await);
    assert_eq!(saga.level("book").await, (5, 0, 0));
}

#[tokio::test(flavor = "multi_thread")]
async fn unavailable_carrier_is_retried_and_ships_once() {
    let saga = Saga::default().await;
    saga.stock("book", 5).await;
    let order = saga
        .place(request(
            "o-carrier",
            &[("book", 1, 2_500)],
            "pm_card_visa",
            "99999",
        ))
        .await;
    let done = saga.finished(&order).await;
    assert_eq!(done.status, ExecutionStatus::Succeeded, "{done:?}");
    assert_eq!(saga.level("book").await, (4, 0, 1));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_repeated_order_replays_and_a_different_one_conflicts() {
    let saga = Saga::default().await;
    saga.stock("book", 5).await;
    let first = saga
        .intake
        .place(small("o-dup", "book", "pm_card_visa"), "shop")
        .await
        .unwrap();
    let Placed::Accepted(first) = first else {
        panic!("{first:?}")
    };
    let again = saga
        .intake
        .place(small("o-dup", "book", "pm_card_visa"), "shop")
        .await
        .unwrap();
    let Placed::Replayed(again) = again else {
        panic!("{again:?}")
    };
    assert_eq!(first.execution_arn, again.execution_arn);
    let other = saga
        .intake
        .place(small("o-dup", "book", "pm_card_chargeDeclined"), "shop")
        .await
        .unwrap();
    assert!(matches!(other, Placed::Conflict(_)), "{other:?}");
    // The same body from another principal: its id is taken, and nothing is told of it.
    let taken = saga
        .intake
        .place(small("o-dup", "book", "pm_card_visa"), "another-shop")
        .await
        .unwrap();
    assert_eq!(taken, Placed::IdTaken);
    saga.finished(&first).await;
    assert_eq!(saga.charges("o-dup").await, 1);
    assert_eq!(saga.level("book").await, (4, 0, 1));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_order_stored_but_never_started_is_started_by_its_retry() {
    let saga = Saga::default().await;
    saga.stock("book", 5).await;
    // A crash between "order stored" and "execution started".
    let request = small("o-repair", "book", "pm_card_visa");
    let items = request
        .items
        .iter()
        .map(|l| store::LineItem {
            sku: l.sku.clone(),
            quantity: l.quantity,
            unit_price_cents: catalog_cents(&l.sku),
        })
        .collect();
    let stored = saga.intake.new_order(request, items, "shop").unwrap();
    assert!(matches!(
        saga.ports
            .orders
            .create(stored, &saga.workflow.execution_arn("o-repair"))
            .await
            .unwrap(),
        Created::New(_)
    ));
    let placed = saga
        .intake
        .place(small("o-repair", "book", "pm_card_visa"), "shop")
        .await
        .unwrap();
    let Placed::Replayed(order) = placed else {
        panic!("{placed:?}")
    };
    assert!(order.execution_arn.is_some());
    assert_eq!(
        saga.finished(&order).await.status,
        ExecutionStatus::Succeeded
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_step_delivered_twice_has_no_double_effect() {
    let mut saga = Saga::default().await;
    saga.stop_workers().await;
    saga.stock("book", 5).await;
    saga.place(small("o-twice", "book", "pm_card_visa")).await;
    let task = StepTask {
        task_token: "t".into(),
        input: json!({"orderId": "o-twice"}),
    };
    for activity in [
        Activity::ReserveInventory,
        Activity::ChargePayment,
        Activity::CreateShipment,
    ] {
        let step = saga.step(activity);
        let first = step.run(task.clone()).await;
        let second = step.run(task.clone()).await;
        assert!(
            matches!(first, StepOutcome::Done(_)),
            "{activity:?}: {first:?}"
        );
        assert_eq!(
            first, second,
            "{activity:?} answers the same the second time"
        );
    }
    assert_eq!(saga.level("book").await, (4, 0, 1));
    assert_eq!(saga.charges("o-twice").await, 1);
    assert_eq!(saga.order("o-twice").await.status, OrderStatus::Completed);
    // Compensations twice, on an order charged but not shipped: one refund, one release.
    saga.place(small("o-undo-twice", "book", "pm_card_visa"))
        .await;
    let forward = StepTask {
        task_token: "t".into(),
        input: json!({"orderId": "o-undo-twice"}),
    };
    for activity in [Activity::ReserveInventory, Activity::ChargePayment] {
        saga.step(activity).run(forward.clone()).await;
    }
    assert_eq!(saga.level("book").await, (3, 1, 1));
    for activity in Activity::COMPENSATIONS {
        let undo = Saga::undo_task(
            activity,
            "o-undo-twice",
            json!({"Error": "Test", "Cause": "twice"}),
        );
        let step = saga.step(activity);
        let first = step.run(undo.clone()).await;
        assert!(
            matches!(first, StepOutcome::Done(_)),
            "{activity:?}: {first:?}"
        );
        assert_eq!(
            first,
            step.run(undo.clone()).await,
            "{activity:?} answers the same again"
        );
    }
    assert!(refunded(&saga, "o-undo-twice").await);
    assert_eq!(saga.level("book").await, (4, 0, 1));
    assert_eq!(
        saga.order("o-undo-twice").await.status,
        OrderStatus::Cancelled
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn compensations_of_steps_that_never_happened_are_recorded_no_ops() {
    let mut saga = Saga::default().await;
    saga.stop_workers().await;
    saga.stock("book", 5).await;
    let order = saga.place(small("o-noop", "book", "pm_card_visa")).await;
    let failure = json!({"Error": "States.Timeout", "Cause": "unknown outcome"});
    let task = |activity| Saga::undo_task(activity, "o-noop", failure.clone());
    let release = saga
        .step(Activity::ReleaseInventory)
        .run(task(Activity::ReleaseInventory))
        .await;
    assert_eq!(
        release,
        StepOutcome::Done(json!({"released": false, "reason": "nothing was reserved"}))
    );
    let refund = saga
        .step(Activity::RefundPayment)
        .run(task(Activity::RefundPayment))
        .await;
    assert_eq!(
        refund,
        StepOutcome::Done(json!({
            "refunded": false,
            "reason": "nothing was charged",
            "error": "States.Timeout",
            "cause": "unknown outcome"
        }))
    );
    // The release is recorded: a reserve arriving late cannot take stock any more.
    let late = saga
        .ports
        .inventory
        .reserve(
            order.id(),
            &[store::ReservedLine {
                sku: "book".into(),
                quantity: 1,
            }],
        )
        .await
        .unwrap();
    assert!(
        matches!(&late, Reserved::Existing(r) if r.status == ReservationStatus::Released),
        "{late:?}"
    );
    assert_eq!(saga.level("book").await, (5, 0, 0));
    let order = saga.order("o-noop").await;
    assert_eq!(order.status, OrderStatus::Cancelled);
    assert_eq!(order.failure.unwrap().error, "States.Timeout");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_charge_the_order_never_recorded_is_found_and_refunded() {
    let mut saga = Saga::default().await;
    saga.stop_workers().await;
    saga.stock("book", 5).await;
    let order = saga
        .place(small("o-unrecorded", "book", "pm_card_visa"))
        .await;
    // A charge step that charged, then timed out before it could record the charge.
    let charge = saga
        .ports
        .payments
        .charge(&ChargeRequest::for_order(&order))
        .await
        .unwrap();
    assert_eq!(saga.order("o-unrecorded").await.charge_id, None);
    let task = Saga::undo_task(
        Activity::RefundPayment,
        "o-unrecorded",
        json!({"Error": "States.Timeout", "Cause": "charge timed out"}),
    );
    let StepOutcome::Done(output) = saga.step(Activity::RefundPayment).run(task).await else {
        panic!("the refund step must succeed");
    };
    assert_eq!(
        (&output["refunded"], &output["amountCents"]),
        (&json!(true), &json!(charge.amount_cents)),
        "{output}"
    );
    let again = saga
        .ports
        .payments
        .refund(order.id(), None, &order.id().refund_key())
        .await
        .unwrap();
    assert!(
        matches!(&again, Refunded::Already(r) if r.charge_id == charge.charge_id),
        "{again:?}"
    );
}

/// A worker that takes a task, does the side effect, and dies before answering.
async fn die_mid_step(saga: &Saga, activity: Activity) {
    let arn = saga.workflow.activity_arn(activity).to_owned();
    let task = saga
        .workflow
        .get_activity_task(&arn, "doomed-worker", Duration::from_secs(20))
        .await
        .unwrap()
        .expect("a task to take");
    let _ = saga
        .step(activity)
        .run(StepTask {
            task_token: task.task_token,
            input: task.input,
        })
        .await;
}

/// Takes a task and answers it like a healthy worker.
async fn work_one(saga: &Saga, activity: Activity) {
    let arn = saga.workflow.activity_arn(activity).to_owned();
    let task = saga
        .workflow
        .get_activity_task(&arn, "test", Duration::from_secs(20))
        .await
        .unwrap()
        .unwrap();
    let token = task.task_token.clone();
    match saga
        .step(activity)
        .run(StepTask {
            task_token: task.task_token,
            input: task.input,
        })
        .await
    {
        StepOutcome::Done(v) => saga.workflow.send_task_success(&token, &v).await.unwrap(),
        other => panic!("{activity:?}: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_worker_killed_mid_charge_is_redelivered_and_charges_once() {
    let mut saga = Saga::default().await;
    saga.stop_workers().await;
    saga.stock("book", 5).await;
    let order = saga.place(small("o-killed", "book", "pm_card_visa")).await;
    work_one(&saga, Activity::ReserveInventory).await;
    die_mid_step(&saga, Activity::ChargePayment).await;
    assert_eq!(saga.charges("o-killed").await, 1, "the dead worker charged");
    // The task's heartbeat runs out (HeartbeatSeconds), the definition retries it, and a
    // healthy worker charges again under the same key: still one charge.
    saga.start_workers();
    let done = saga.finished(&order).await;
    assert_eq!(done.status, ExecutionStatus::Succeeded, "{done:?}");
    assert_eq!(saga.charges("o-killed").await, 1);
    assert!(
        saga.event_types(&order)
            .await
            .contains(&"ActivityTimedOut".to_owned())
    );
    assert_eq!(saga.level("book").await, (4, 0, 1));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approval_token_lost_in_a_crash_is_reissued_and_parked() {
    // A window short enough for the heartbeat (as `serve` checks: see `SagaSettings::check`).
    let settings = SagaSettings {
        approval_timeout: Duration::from_secs(60),
        approval_heartbeat: Duration::from_secs(2),
        ..SagaSettings::default()
    };
    let mut saga = Saga::start(settings).await;
    saga.stop_workers().await;
    saga.stock("piano", 1).await;
    let order = saga.place(large("o-lost-token", "piano")).await;
    work_one(&saga, Activity::ReserveInventory).await;
    work_one(&saga, Activity::ChargePayment).await;
    // The approval worker takes the token and dies before parking it.
    let arn = saga
        .workflow
        .activity_arn(Activity::AwaitApproval)
        .to_owned();
    let lost = saga
        .workflow
        .get_activity_task(&arn, "doomed", Duration::from_secs(20))
        .await
        .unwrap()
        .unwrap();
    saga.start_workers();
    let parked = saga
        .reaches("o-lost-token", OrderStatus::AwaitingApproval)
        .await;
    let token = parked.approval.unwrap().task_token.unwrap();
    assert_ne!(
        token, lost.task_token,
        "the engine re-issued the task with a fresh token"
    );
    decide(
        saga.ports.orders.as_ref(),
        saga.workflow.as_ref(),
        order.id(),
        Decision::Approve,
        "ops",
        None,
    )
    .await
    .unwrap();
    assert_eq!(
        saga.finished(&order).await.status,
        ExecutionStatus::Succeeded
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_keeper_keeps_a_parked_approval_alive_past_its_heartbeat() {
    // A window short enough for the heartbeat (as `serve` checks: see `SagaSettings::check`).
    let settings = SagaSettings {
        approval_timeout: Duration::from_secs(60),
        approval_heartbeat: Duration::from_secs(1),
        ..SagaSettings::default()
    };
    let saga = Saga::start(settings).await;
    saga.stock("piano", 1).await;
    let order = saga.place(large("o-kept", "piano")).await;
    let parked = saga.reaches("o-kept", OrderStatus::AwaitingApproval).await;
    let token = parked.approval.unwrap().task_token.unwrap();
    // Several heartbeat windows pass; the keeper's heartbeats hold the same token.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let still = saga.order("o-kept").await;
    assert_eq!(
        still.approval.unwrap().task_token.as_deref(),
        Some(token.as_str())
    );
    assert!(
        !saga
            .event_types(&order)
            .await
            .contains(&"ActivityTimedOut".to_owned())
    );
    decide(
        saga.ports.orders.as_ref(),
        saga.workflow.as_ref(),
        order.id(),
        Decision::Approve,
        "ops",
        None,
    )
    .await
    .unwrap();
    assert_eq!(
        saga.finished(&order).await.status,
        ExecutionStatus::Succeeded
    );
}

/// A token the keeper heartbeat less than two fifths of the heartbeat ago waits for the next
/// round: while rounds are quick, each parked approval costs a heartbeat every other round.
#[tokio::test(flavor = "multi_thread")]
async fn the_keeper_heartbeats_a_token_again_only_once_two_fifths_of_the_heartbeat_have_passed() {
    use workflow::steps::approval::{ApprovalKeeper, KeeperSettings};
    let saga = Saga::default().await;
    saga.stock("piano", 1).await;
    saga.place(large("o-beaten", "piano")).await;
    saga.reaches("o-beaten", OrderStatus::AwaitingApproval)
        .await;
    let counting = Arc::new(counting::CountingWorkflow::new(saga.workflow.clone()));
    let lapse = Duration::from_secs(3);
    let keeper = ApprovalKeeper::new(
        saga.ports.orders.clone(),
        counting.clone(),
        KeeperSettings::unshared(Duration::from_secs(1), lapse),
    );
    let shards = (0..saga.ports.orders.approval_shards()).collect();
    let (_held_tx, held) = tokio::sync::watch::channel(shards);
    let round = keeper.beat_once(&held).await.unwrap();
    assert_eq!((round.alive, counting.heartbeats()), (1, 1));
    let round = keeper.beat_once(&held).await.unwrap();
    assert_eq!(
        (round.alive, counting.heartbeats()),
        (1, 1),
        "heartbeaten just now: left for the next round"
    );
    tokio::time::sleep(lapse * 2 / 5 + Duration::from_millis(100)).await;
    keeper.beat_once(&held).await.unwrap();
    assert_eq!(
        counting.heartbeats(),
        2,
        "two fifths of the heartbeat later"
    );
}

/// A window closes at its deadline, not at the keeper's next round: a round that leaves a
/// window open comes back by its deadline. Here the rounds are an hour apart and the window
/// three seconds long (its tokens lapsing and re-parked meanwhile, as after a restart).
#[tokio::test(flavor = "multi_thread")]
async fn a_window_closes_at_its_deadline_however_far_apart_the_keepers_rounds_are() {
    use workflow::steps::approval::{ApprovalKeeper, KeeperSettings};
    use workflow::{SagaWorkers, WorkerSettings};
    let mut saga = Saga::start(short_window(3)).await;
    saga.stock("piano", 1).await;
    let order = saga.place(large("o-hourly", "piano")).await;
    let parked = saga
        .reaches("o-hourly", OrderStatus::AwaitingApproval)
        .await;
    let deadline = deadline_of(&parked);
    saga.stop_workers().await;

    // The round's own pause: by the deadline while it is ahead, a second once it is past.
    let hour = Duration::from_secs(3600);
    let keeper = ApprovalKeeper::new(
        saga.ports.orders.clone(),
        saga.workflow.clone(),
        KeeperSettings::unshared(hour, hour * 5),
    );
    let shards = (0..saga.ports.orders.approval_shards()).collect();
    let (_held_tx, held) = tokio::sync::watch::channel(shards);
    let round = keeper.beat_once(&held).await.unwrap();
    assert_eq!(round.next_deadline, Some(deadline), "{round:?}");
    let before = deadline - chrono::TimeDelta::seconds(2);
    assert_eq!(keeper.pause_after(&round, before), Duration::from_secs(2));
    let after = deadline + chrono::TimeDelta::seconds(30);
    assert_eq!(keeper.pause_after(&round, after), Duration::from_secs(1));
    let idle = workflow::steps::approval::KeeperRound::default();
    assert_eq!(keeper.pause_after(&idle, after), hour);

    // And the keeper running so: the order is compensated within the test's deadline, an
    // hour before its next scheduled round.
    let _hourly = SagaWorkers::start_embedded(
        &saga.ports,
        &saga.app.state.metrics,
        saga.workflow.clone(),
        WorkerSettings::default(),
        hour,
    );
    let done = saga.finished(&order).await;
    assert_eq!(
        done.error.as_deref(),
        Some("Order.ApprovalExpired"),
        "{done:?}"
    );
    assert_eq!(saga.order("o-hourly").await.status, OrderStatus::Cancelled);
    assert_eq!(saga.level("piano").await, (1, 0, 0));
}

#[tokio::test(flavor = "multi_thread")]
async fn compensating_an_order_that_already_shipped_keeps_the_sale() {
    let mut saga = Saga::default().await;
    saga.stop_workers().await;
    saga.stock("book", 5).await;
    saga.place(small("o-gone", "book", "pm_card_visa")).await;
    let forward = StepTask {
        task_token: "t".into(),
        input: json!({"orderId": "o-gone"}),
    };
    for activity in [
        Activity::ReserveInventory,
        Activity::ChargePayment,
        Activity::CreateShipment,
    ] {
        let outcome = saga.step(activity).run(forward.clone()).await;
        assert!(
            matches!(outcome, StepOutcome::Done(_)),
            "{activity:?}: {outcome:?}"
        );
    }
    // The workflow had given up on the shipment step (its answer never arrived) and compensates.
    for activity in Activity::COMPENSATIONS {
        let compensation = Saga::undo_task(
            activity,
            "o-gone",
            json!({"Error": "States.Timeout", "Cause": "lost answer"}),
        );
        let outcome = saga.step(activity).run(compensation).await;
        assert!(
            matches!(outcome, StepOutcome::Done(_)),
            "{activity:?}: {outcome:?}"
        );
    }
    // The goods had left: the order completed in the world, so nothing is undone.
    let order = saga.order("o-gone").await;
    assert_eq!(order.status, OrderStatus::Completed, "{order:?}");
    assert!(
        !refunded(&saga, "o-gone").await,
        "a shipped order is not refunded"
    );
    assert_eq!(saga.charges("o-gone").await, 1);
    assert_eq!(saga.level("book").await, (4, 0, 1));
}

/// A saga whose payments go through a [`CountingPayments`], to refuse refunds at will.
async fn with_refusable_refunds() -> (Saga, Arc<CountingPayments>) {
    let mut counting = None;
    let saga = Saga::with_payments(SagaSettings::default(), |inner| {
        let payments = Arc::new(CountingPayments::new(inner));
        counting = Some(payments.clone());
        payments
    })
    .await;
    (saga, counting.expect("wrapped"))
}

/// A refund the provider refuses for good (here: a disputed charge) is not retried: the stock
/// goes back first all the same, the order becomes an incident saying which step failed, why
/// and after how many attempts, and the execution fails at that step. Once the cause is gone, a
/// redrive runs the refund again from there and the order ends cancelled, the incident closed.
#[tokio::test(flavor = "multi_thread")]
async fn a_refund_refused_for_good_still_releases_the_stock_and_a_redrive_finishes_it() {
    let (saga, payments) = with_refusable_refunds().await;
    saga.stock("book", 5).await;
    let refusal = "charge ch_1 has been disputed; it cannot be refunded";
    payments.refuse_refunds(Some(GatewayError::Invalid(refusal.to_owned())));
    let order = saga
        .place(request(
            "o-disputed",
            &[("book", 2, 2_500)],
            "pm_card_visa",
            "00000",
        ))
        .await;
    let done = saga.finished(&order).await;
    assert_eq!(done.status, ExecutionStatus::Failed);
    assert_eq!(done.error.as_deref(), Some("Payment.Invalid"), "{done:?}");
    let failed = saga.order("o-disputed").await;
    assert_eq!(failed.status, OrderStatus::CompensationFailed);
    let incident = failed.incident.clone().expect("an incident");
    assert_eq!(
        (
            incident.step.as_str(),
            incident.error.as_str(),
            incident.attempts
        ),
        ("RefundPayment", "Payment.Invalid", 1)
    );
    assert!(incident.cause.contains("disputed"), "{incident:?}");
    assert_eq!(failed.failure.unwrap().error, "Shipment.Rejected");
    assert_eq!(
        saga.level("book").await,
        (5, 0, 0),
        "released before the refund"
    );
    assert_eq!(failed.refund, None);
    let attempts = saga
        .event_types(&order)
        .await
        .iter()
        .filter(|e| *e == "ActivityFailed")
        .count();
    assert_eq!(
        attempts, 2,
        "the shipment and the refund, each once: no retry"
    );

    payments.refuse_refunds(None);
    let arn = order.execution_arn.as_deref().unwrap();
    saga.workflow.redrive_execution(arn).await.expect("redrive");
    let done = saga.finished(&order).await;
    assert_eq!(done.status, ExecutionStatus::Failed);
    assert_eq!(done.error.as_deref(), Some("Shipment.Rejected"), "{done:?}");
    let cancelled = saga.order("o-disputed").await;
    assert_eq!(cancelled.status, OrderStatus::Cancelled);
    assert_eq!(cancelled.incident, None);
    assert!(refunded(&saga, "o-disputed").await);
    assert_eq!(saga.level("book").await, (5, 0, 0));
}

/// A compensation step run by hand as the definition runs it: with its attempt and whether it
/// is the last.
fn refund_task(id: &str, attempt: u32) -> StepTask {
    StepTask {
        task_token: format!("t-{attempt}"),
        input: json!({
            "orderId": id,
            "failure": {"Error": "Shipment.Rejected", "Cause": "undeliverable"},
            "attempt": attempt,
            "finishesOrder": true,
        }),
    }
}

/// A transient failure is left to the definition's retries until the last of them; only then
/// is the incident recorded. A misconfigured provider never records one: it is retried for
/// days and shows on `/readyz` meanwhile.
#[tokio::test(flavor = "multi_thread")]
async fn a_compensation_records_its_incident_only_when_it_gives_up() {
    let (mut saga, payments) = with_refusable_refunds().await;
    saga.stop_workers().await;
    saga.stock("book", 5).await;
    saga.place(small("o-outage", "book", "pm_card_visa")).await;
    let refund = saga.step(Activity::RefundPayment);
    let last = workflow::definition::transient_retries("RefundPayment");

    payments.refuse_refunds(Some(GatewayError::Misconfigured("401 from Stripe".into())));
    let outcome = refund.run(refund_task("o-outage", last)).await;
    assert!(
        matches!(&outcome, StepOutcome::Failed { error, .. } if error == "Provider.Misconfigured"),
        "{outcome:?}"
    );
    assert_eq!(saga.order("o-outage").await.incident, None);

    payments.refuse_refunds(Some(GatewayError::Unavailable("503 from Stripe".into())));
    let outcome = refund.run(refund_task("o-outage", last - 1)).await;
    assert!(
        matches!(&outcome, StepOutcome::Failed { error, .. } if error == "Payment.Unavailable"),
        "{outcome:?}"
    );
    let order = saga.order("o-outage").await;
    assert_eq!(
        (order.status, order.incident),
        (OrderStatus::Compensating, None)
    );

    let outcome = refund.run(refund_task("o-outage", last)).await;
    assert!(
        matches!(&outcome, StepOutcome::Failed { error, .. } if error == "Payment.Unavailable"),
        "{outcome:?}"
    );
    let order = saga.order("o-outage").await;
    assert_eq!(order.status, OrderStatus::CompensationFailed);
    let incident = order.incident.expect("recorded on the last attempt");
    assert_eq!(
        (incident.step.as_str(), incident.attempts),
        ("RefundPayment", last + 1)
    );

    // The provider is back (a redrive): the same step ends the order and closes the incident.
    payments.refuse_refunds(None);
    let outcome = refund.run(refund_task("o-outage", 0)).await;
    assert!(matches!(outcome, StepOutcome::Done(_)), "{outcome:?}");
    let order = saga.order("o-outage").await;
    assert_eq!(
        (order.status, order.incident),
        (OrderStatus::Cancelled, None)
    );
}
