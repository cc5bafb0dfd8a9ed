//! The repair loop's pass on the embedded backend (engine and store on SQLite files), one test
//! per kind of repair, each also run a second time to show it changes nothing then.

use super::harness::{Saga, small};
use engine::ExecutionStatus;
use intake::OrderIntake;
use ops::audit::WorkflowExecutions;
use ops::audit::{Scope, Sources};
use ops::repair::{Pass, Reconciler, RepairKind, RepairSettings};
use std::sync::Arc;
use std::time::Duration;
use store::{
    Charge, ChargeRequest, Created, Failure, Order, OrderStatus, ReservationStatus, ReservedLine,
    ShipmentRequest,
};
use telemetry::Metrics;
use workflow::{SagaSettings, WorkflowPort};

/// A reconciler over the saga's backend; orders left `ACCEPTED` are started after `grace`.
fn reconciler(saga: &Saga, grace: Duration) -> (Reconciler, Metrics) {
    reconciler_with(
        saga,
        RepairSettings {
            grace,
            // Nothing else moves in these tests: the second look need not wait.
            recheck_after: Duration::from_millis(50),
            sole_owner_since: None,
        },
    )
}

fn reconciler_with(saga: &Saga, settings: RepairSettings) -> (Reconciler, Metrics) {
    let intake = OrderIntake {
        orders: saga.ports.orders.clone(),
        inventory: saga.ports.inventory.clone(),
        workflow: saga.workflow.clone(),
        settings: SagaSettings::default(),
        queue: None,
    };
    let sources = Sources {
        ports: saga.ports.clone(),
        executions: Arc::new(WorkflowExecutions::new(saga.workflow.clone())),
        check_parked_tokens: false,
    };
    let metrics = Metrics::new();
    (
        Reconciler::new(sources, Arc::new(intake), settings, metrics.clone()),
        metrics,
    )
}

fn kinds(pass: &Pass) -> Vec<RepairKind> {
    pass.repairs.iter().map(|r| r.kind).collect()
}

fn counted(metrics: &Metrics, kind: &str) -> String {
    let text = metrics.render();
    text.lines()
        .find(|l| l.starts_with(&format!("fulfillment_repairs_total{{kind=\"{kind}\"}}")))
        .unwrap_or_else(|| panic!("no {kind} in {text}"))
        .rsplit(' ')
        .next()
        .unwrap()
        .to_owned()
}

/// A small order of one book at the catalog's price, as intake makes it, not stored yet.
fn new_order(saga: &Saga, id: &str) -> store::NewOrder {
    let request = small(id, "book", "pm_card_visa");
    let items = request
        .items
        .iter()
        .map(|l| store::LineItem {
            sku: l.sku.clone(),
            quantity: l.quantity,
            unit_price_cents: super::harness::catalog_cents(&l.sku),
        })
        .collect();
    saga.intake.new_order(request, items, "shop").unwrap()
}

/// `new` stored with its ARN and never started, as a crash between the two leaves it.
async fn stored(saga: &Saga, new: store::NewOrder) -> Order {
    let arn = saga.workflow.execution_arn(new.order_id.as_str());
    let Created::New(order) = saga.ports.orders.create(new, &arn).await.unwrap() else {
        panic!("stored before")
    };
    order
}

/// An order stored with its ARN and never started.
async fn stored_not_started(saga: &Saga, id: &str) -> Order {
    stored(saga, new_order(saga, id)).await
}

/// The order's charge at the provider, made as the charge step makes it.
async fn charge(saga: &Saga, order: &Order) -> Charge {
    saga.ports
        .payments
        .charge(&ChargeRequest::for_order(order))
        .await
        .unwrap()
}

fn failure() -> Failure {
    Failure {
        error: "Payment.Unavailable".to_owned(),
        cause: "the provider did not answer".to_owned(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_order_left_accepted_is_started_once_past_its_grace_and_then_completes() {
    let saga = Saga::default().await;
    saga.stock("book", 5).await;
    let order = stored_not_started(&saga, "o-left").await;

    // Within its grace its POST may still be starting it: left alone.
    let (patient, _) = reconciler(&saga, Duration::from_secs(3600));
    let pass = patient.pass(Scope::Whole).await.unwrap();
    assert_eq!(kinds(&pass), []);
    assert_eq!((pass.audit.violations.len(), pass.left), (1, 1));
    assert_eq!(saga.order("o-left").await.status, OrderStatus::Accepted);

    // A process that owns the backend alone since after it was stored: no POST of it is in
    // flight, the grace is not waited out (a restart's first pass starts what its start
    // queue lost).
    let (due, metrics) = reconciler_with(
        &saga,
        RepairSettings {
            grace: Duration::from_secs(3600),
            recheck_after: Duration::from_millis(50),
            sole_owner_since: Some(chrono::Utc::now()),
        },
    );
    let pass = due.pass(Scope::Whole).await.unwrap();
    assert_eq!(kinds(&pass), [RepairKind::Started], "{pass:?}");
    assert!(pass.all_repaired());
    assert_eq!(counted(&metrics, "started"), "1");
    assert_eq!(
        saga.finished(&order).await.status,
        ExecutionStatus::Succeeded
    );
    assert_eq!(saga.order("o-left").await.status, OrderStatus::Completed);

    let again = due.pass(Scope::Whole).await.unwrap();
    assert_eq!((again.audit.violations.len(), kinds(&again)), (0, vec![]));
    assert_eq!(counted(&metrics, "started"), "1");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_charge_its_cancelled_order_ended_without_is_refunded_once_and_recorded() {
    let mut saga = Saga::default().await;
    saga.stop_workers().await;
    saga.stock("book", 5).await;
    let order = saga.place(small("o-late", "book", "pm_card_visa")).await;
    // The charge landed, its answer was lost, and the compensation's lookup did not see it
    // (a provider's search lags): the order ended CANCELLED with the money kept.
    let charge = charge(&saga, &order).await;
    saga.ports
        .orders
        .advance(order.id(), OrderStatus::Cancelled, Some(failure()))
        .await
        .unwrap();

    let (reconciler, metrics) = reconciler(&saga, Duration::ZERO);
    let pass = reconciler.pass(Scope::Whole).await.unwrap();
    assert_eq!(kinds(&pass), [RepairKind::RefundedLateCharge], "{pass:?}");
    assert!(pass.repairs[0].what.contains(&charge.charge_id), "{pass:?}");
    let repaired = saga.order("o-late").await;
    assert_eq!(repaired.status, OrderStatus::Cancelled);
    assert_eq!(
        repaired.charge_id.as_deref(),
        Some(charge.charge_id.as_str())
    );
    let refund = repaired
        .refund
        .expect("the refund is recorded on the order");
    assert_eq!(refund.amount_cents, charge.amount_cents);
    assert_eq!(repaired.failure, Some(failure()), "its failure is kept");

    let again = reconciler.pass(Scope::Whole).await.unwrap();
    assert_eq!((again.audit.violations.len(), kinds(&again)), (0, vec![]));
    assert_eq!(counted(&metrics, "refunded_late_charge"), "1");
    let refunds = saga
        .ports
        .payments
        .list_refunds(None, None, 100)
        .await
        .unwrap();
    assert_eq!(refunds.items.len(), 1, "refunded once: {refunds:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pass_over_a_recent_window_repairs_its_orders_and_leaves_older_ones_to_the_whole_books() {
    let mut saga = Saga::default().await;
    saga.stop_workers().await;
    saga.stock("book", 5).await;
    // Two CANCELLED orders whose charges landed late, the first placed before the window.
    let mut since = None;
    for id in ["o-older", "o-recent"] {
        if id == "o-recent" {
            tokio::time::sleep(Duration::from_millis(5)).await;
            since = Some(chrono::Utc::now());
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let order = saga.place(small(id, "book", "pm_card_visa")).await;
        charge(&saga, &order).await;
        saga.ports
            .orders
            .advance(order.id(), OrderStatus::Cancelled, Some(failure()))
            .await
            .unwrap();
    }
    let since = since.unwrap();

    let (reconciler, metrics) = reconciler(&saga, Duration::ZERO);
    let recent = reconciler.pass(Scope::Since(since)).await.unwrap();
    assert_eq!(
        (recent.audit.orders, recent.audit.charges),
        (1, 1),
        "the window's order and its charge only: {recent:?}"
    );
    assert_eq!(kinds(&recent), [RepairKind::RefundedLateCharge]);
    assert_eq!(recent.repairs[0].subject, "order o-recent");
    assert!(
        saga.order("o-older").await.refund.is_none(),
        "not in the window"
    );

    let whole = reconciler.pass(Scope::Whole).await.unwrap();
    assert_eq!(whole.audit.orders, 2);
    assert_eq!(kinds(&whole), [RepairKind::RefundedLateCharge], "{whole:?}");
    assert_eq!(whole.repairs[0].subject, "order o-older");
    let again = reconciler.pass(Scope::Whole).await.unwrap();
    assert_eq!((again.audit.violations.len(), kinds(&again)), (0, vec![]));
    assert_eq!(counted(&metrics, "refunded_late_charge"), "2");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_window_pass_sees_the_charge_of_an_order_at_its_edge_timed_by_a_clock_behind_the_orders()
{
    let mut saga = Saga::default().await;
    saga.stop_workers().await;
    saga.stock("book", 5).await;
    // The order's replica's clock runs a second ahead of the provider's: the order is created
    // just inside the window, its charge (made after it) carries a time just before the window.
    let mut new = new_order(&saga, "o-edge");
    let charged = saga
        .ports
        .payments
        .charge(&ChargeRequest {
            idempotency_key: new.order_id.charge_key(),
            order_id: new.order_id.clone(),
            amount_cents: new.amount_cents,
            currency: new.currency.clone(),
            payment_method: new.payment_method.clone(),
        })
        .await
        .unwrap();
    let since = charged.created_at + chrono::Duration::milliseconds(500);
    new.created_at = charged.created_at + chrono::Duration::seconds(1);
    let order = stored(&saga, new).await;
    // The compensation's lookup missed the charge: the order ended CANCELLED with it.
    saga.ports
        .orders
        .advance(order.id(), OrderStatus::Cancelled, Some(failure()))
        .await
        .unwrap();

    let (reconciler, _) = reconciler(&saga, Duration::ZERO);
    let recent = reconciler.pass(Scope::Since(since)).await.unwrap();
    assert_eq!(recent.audit.orders, 1, "{recent:?}");
    assert_eq!(
        kinds(&recent),
        [RepairKind::RefundedLateCharge],
        "{recent:?}"
    );
    assert!(recent.repairs[0].what.contains(&charged.charge_id));
}

#[tokio::test(flavor = "multi_thread")]
async fn stock_a_cancelled_order_holds_is_released_and_a_completed_ones_marked_shipped() {
    let mut saga = Saga::default().await;
    saga.stop_workers().await;
    saga.stock("book", 5).await;
    let line = [ReservedLine {
        sku: "book".to_owned(),
        quantity: 1,
    }];
    let cancelled = saga.place(small("o-held", "book", "pm_card_visa")).await;
    saga.ports
        .inventory
        .reserve(cancelled.id(), &line)
        .await
        .unwrap();
    saga.ports
        .orders
        .advance(cancelled.id(), OrderStatus::Cancelled, Some(failure()))
        .await
        .unwrap();
    // Completed, charged and shipped, but its stock still counted as held.
    let shipped = saga.place(small("o-shipped", "book", "pm_card_visa")).await;
    saga.ports
        .inventory
        .reserve(shipped.id(), &line)
        .await
        .unwrap();
    let charge = charge(&saga, &shipped).await;
    saga.ports
        .orders
        .record_charge(shipped.id(), &charge)
        .await
        .unwrap();
    saga.ports
        .shipping
        .create_shipment(&ShipmentRequest {
            order_id: shipped.id().clone(),
            address: shipped.new.shipping_address.clone(),
            lines: line.to_vec(),
        })
        .await
        .unwrap();
    saga.ports
        .orders
        .advance(shipped.id(), OrderStatus::Completed, None)
        .await
        .unwrap();
    assert_eq!(saga.level("book").await, (3, 2, 0));

    let (reconciler, metrics) = reconciler(&saga, Duration::ZERO);
    let pass = reconciler.pass(Scope::Whole).await.unwrap();
    assert_eq!(
        kinds(&pass),
        [RepairKind::ReleasedStock, RepairKind::ReleasedStock],
        "{pass:?}"
    );
    assert_eq!(saga.level("book").await, (4, 0, 1));
    let inventory = saga.ports.inventory.clone();
    let reservation = |id: &str| {
        let (inventory, id) = (inventory.clone(), store::OrderId::parse(id).unwrap());
        async move { inventory.reservation(&id).await.unwrap().unwrap().status }
    };
    assert_eq!(reservation("o-held").await, ReservationStatus::Released);
    assert_eq!(reservation("o-shipped").await, ReservationStatus::Shipped);

    let again = reconciler.pass(Scope::Whole).await.unwrap();
    assert_eq!((again.audit.violations.len(), kinds(&again)), (0, vec![]));
    assert_eq!(counted(&metrics, "released_stock"), "2");
}

#[tokio::test(flavor = "multi_thread")]
async fn what_it_may_not_fix_is_reported_once_and_left_as_it_is() {
    let mut saga = Saga::default().await;
    saga.stop_workers().await;
    saga.stock("book", 5).await;
    // COMPLETED without a charge: refunding or charging is a person's decision.
    let order = saga.place(small("o-free", "book", "pm_card_visa")).await;
    saga.ports
        .inventory
        .reserve(
            order.id(),
            &[ReservedLine {
                sku: "book".to_owned(),
                quantity: 1,
            }],
        )
        .await
        .unwrap();
    saga.ports.inventory.mark_shipped(order.id()).await.unwrap();
    saga.ports
        .orders
        .advance(order.id(), OrderStatus::Completed, None)
        .await
        .unwrap();
    let before = saga.order("o-free").await;

    let (reconciler, metrics) = reconciler(&saga, Duration::ZERO);
    let pass = reconciler.pass(Scope::Whole).await.unwrap();
    assert_eq!(kinds(&pass), [RepairKind::Reported], "{pass:?}");
    assert_eq!(pass.repairs[0].subject, "order o-free");
    assert!(!pass.all_repaired());
    // Still there at the next pass, and not reported (nor counted) twice.
    let again = reconciler.pass(Scope::Whole).await.unwrap();
    assert_eq!(again.audit.violations.len(), 1);
    assert_eq!(kinds(&again), []);
    assert_eq!(counted(&metrics, "reported"), "1");
    assert_eq!(saga.order("o-free").await, before, "nothing was touched");
}

/// An execution that ended with its order unfinished (stopped by hand here; a compensation
/// whose misconfigured provider outlasted its retries ends the same way) becomes an incident,
/// for operators to redrive or resolve: the loop undoes nothing itself, and records it once.
#[tokio::test(flavor = "multi_thread")]
async fn an_execution_that_ended_under_an_unfinished_order_becomes_an_incident_once() {
    let saga = Saga::default().await;
    saga.stock("piano", 1).await;
    let order = saga
        .place(super::harness::large("o-stopped", "piano"))
        .await;
    saga.reaches("o-stopped", OrderStatus::AwaitingApproval)
        .await;
    let arn = order.execution_arn.clone().unwrap();
    saga.workflow
        .stop_execution(&arn, "Ops.Stopped", "stopped by hand")
        .await
        .unwrap();
    assert_eq!(saga.finished(&order).await.status, ExecutionStatus::Aborted);

    let (reconciler, metrics) = reconciler(&saga, Duration::ZERO);
    let pass = reconciler.pass(Scope::Whole).await.unwrap();
    // Its parked token, which no decision can reach now, is reported beside it.
    assert_eq!(
        kinds(&pass),
        [RepairKind::IncidentRecorded, RepairKind::Reported],
        "{pass:?}"
    );
    let failed = saga.order("o-stopped").await;
    assert_eq!(failed.status, OrderStatus::CompensationFailed);
    let incident = failed.incident.expect("an incident");
    assert_eq!(incident.step, "execution ABORTED");
    assert_eq!(incident.error, "Ops.Stopped");
    assert_eq!(
        saga.level("piano").await,
        (0, 1, 0),
        "nothing undone by the loop"
    );
    // Then the money it holds, a charge not refunded, is reported for the person who takes
    // the incident; the incident is not recorded twice.
    let again = reconciler.pass(Scope::Whole).await.unwrap();
    assert_eq!(kinds(&again), [RepairKind::Reported], "{again:?}");
    assert!(again.repairs[0].what.contains("refund"), "{again:?}");
    assert_eq!(counted(&metrics, "incident_recorded"), "1");
}

/// A pass finds which orders still run by listing the running executions (a thousand a call on
/// Step Functions), not by describing each order's execution: with parked approvals it makes no
/// DescribeExecution and no heartbeat (the keeper's), on AWS's quotas the difference between a
/// pass taking a page and one taking an hour at 100,000 parked orders.
#[tokio::test(flavor = "multi_thread")]
async fn a_pass_lists_running_executions_instead_of_describing_each_order() {
    let saga = Saga::default().await;
    saga.stock("piano", 5).await;
    for i in 0..3 {
        let id = format!("o-parked-{i}");
        saga.place(super::harness::large(&id, "piano")).await;
        saga.reaches(&id, OrderStatus::AwaitingApproval).await;
    }
    let counting = Arc::new(super::counting::CountingWorkflow::new(
        saga.workflow.clone(),
    ));
    let (reconciler, _) = reconciler(&saga, Duration::ZERO);
    let reconciler = reconciler.reading(Sources {
        ports: saga.ports.clone(),
        executions: Arc::new(WorkflowExecutions::new(counting.clone())),
        check_parked_tokens: false,
    });
    let pass = reconciler.pass(Scope::Whole).await.unwrap();
    assert!(
        pass.all_repaired() && pass.audit.violations.is_empty(),
        "{pass:?}"
    );
    assert_eq!(pass.audit.orders, 3);
    assert_eq!(counting.listings(), 1, "one page lists them all");
    assert_eq!(counting.describes(), 0, "no execution described one by one");
    assert_eq!(
        counting.heartbeats(),
        0,
        "the parked tokens are the keeper's to heartbeat"
    );

    // One whose execution ended under it is not listed, so it alone is described, and its
    // token is known dead without a heartbeat.
    let arn = saga.order("o-parked-0").await.execution_arn.unwrap();
    saga.workflow
        .stop_execution(&arn, "Ops.Stopped", "stopped by hand")
        .await
        .unwrap();
    let pass = reconciler.pass(Scope::Whole).await.unwrap();
    assert_eq!(
        kinds(&pass),
        [RepairKind::IncidentRecorded, RepairKind::Reported],
        "{pass:?}"
    );
    assert!(counting.describes() >= 1, "the unlisted one is described");
    assert!(counting.describes() <= 2, "and only it (once per look)");
    assert_eq!(counting.heartbeats(), 0);
}
