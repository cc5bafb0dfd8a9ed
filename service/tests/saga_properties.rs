//! The saga's money-and-stock property, on the real stack (embedded engine, SQLite store,
//! sandbox gateways, workers, keeper): random mixes of orders and faults, placed concurrently,
//! with an operator approving or rejecting large orders. Whatever happens, once every saga is
//! over, stock is conserved (initial = available + reserved + shipped, nothing left reserved)
//! and every charge is either shipped or refunded.

#[allow(dead_code)]
#[path = "saga/harness.rs"]
mod harness;
#[path = "saga_properties/ledger.rs"]
mod ledger;

#[path = "http_router/counting.rs"]
mod counting;

use counting::CountingPayments;

use engine::ExecutionStatus;
use harness::{Saga, catalog_cents, request};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use providers::sandbox::{
    PM_DECLINED, PM_LOST_RESPONSE, PM_SUCCEEDS, PM_UNAVAILABLE_ONCE, POSTAL_REJECTED,
    POSTAL_UNAVAILABLE_ONCE,
};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};
use store::{Decision, OrderStatus, Refunded};
use tokio::sync::watch;
use workflow::SagaSettings;
use workflow::steps::approval::decide;

const SKUS: [&str; 3] = ["sku-a", "sku-b", "sku-c"];
/// The SKU a large order adds (priced for an approval).
const PIANO: &str = "piano";
const PAYMENTS: [&str; 4] = [
    PM_SUCCEEDS,
    PM_DECLINED,
    PM_UNAVAILABLE_ONCE,
    PM_LOST_RESPONSE,
];
const POSTAL_OK: &str = "10115";
const POSTALS: [&str; 3] = [POSTAL_OK, POSTAL_REJECTED, POSTAL_UNAVAILABLE_ONCE];

/// One order of the plan and what the world does to it.
#[derive(Debug, Clone)]
struct OrderPlan {
    /// (index into SKUS, quantity)
    lines: Vec<(usize, u32)>,
    payment: &'static str,
    postal: &'static str,
    /// Large orders need an operator, who approves or rejects per `approve`.
    large: bool,
    approve: bool,
}

impl OrderPlan {
    /// The error the saga must fail with if the order gets its stock, or `None` if it completes.
    fn expected_failure(&self) -> Option<&'static str> {
        if self.payment == PM_DECLINED {
            Some("Payment.Declined")
        } else if self.large && !self.approve {
            Some("Order.Rejected")
        } else if self.postal == POSTAL_REJECTED {
            Some("Shipment.Rejected")
        } else {
            None
        }
    }

    /// Units of each SKU the order asks for.
    fn demand(&self) -> BTreeMap<usize, u64> {
        let mut demand = BTreeMap::new();
        for (sku, q) in &self.lines {
            *demand.entry(*sku).or_default() += u64::from(*q);
        }
        demand
    }
}

#[derive(Debug, Clone)]
struct Plan {
    /// Initial available stock per SKU (SKUS[..stock.len()]).
    stock: Vec<u64>,
    orders: Vec<OrderPlan>,
}

fn order_plan(skus: usize) -> impl Strategy<Value = OrderPlan> {
    (
        prop::collection::vec((0..skus, 1u32..=3), 1..=2),
        prop::sample::select(PAYMENTS.to_vec()),
        prop::sample::select(POSTALS.to_vec()),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(lines, payment, postal, large, approve)| OrderPlan {
            lines,
            payment,
            postal,
            large,
            approve,
        })
}

fn plan() -> impl Strategy<Value = Plan> {
    (2usize..=3).prop_flat_map(|skus| {
        (
            prop::collection::vec(0u64..=5, skus),
            prop::collection::vec(order_plan(skus), 8..=15),
        )
            .prop_map(|(stock, orders)| Plan { stock, orders })
    })
}

fn order_id(i: usize) -> String {
    format!("o-{i:02}")
}

/// Watches the pending approvals and decides each per the plan, until told to stop.
fn spawn_operator(
    saga: &Saga,
    decisions: HashMap<String, bool>,
    mut stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<usize> {
    let orders = saga.ports.orders.clone();
    let workflow = saga.workflow.clone();
    tokio::spawn(async move {
        let mut applied = 0;
        loop {
            match orders.pending_approvals(None, 100).await {
                Ok(pending) => {
                    for p in pending.items {
                        let approve = *decisions
                            .get(p.order_id.as_str())
                            .unwrap_or_else(|| panic!("{} was not planned large", p.order_id));
                        let (decision, reason) = if approve {
                            (Decision::Approve, None)
                        } else {
                            (Decision::Reject, Some("the plan says no"))
                        };
                        match decide(
                            orders.as_ref(),
                            workflow.as_ref(),
                            &p.order_id,
                            decision,
                            "operator@example.com",
                            reason,
                        )
                        .await
                        {
                            Ok(_) => applied += 1,
                            // A busy store: the order stays pending and is decided next round.
                            Err(e) => eprintln!("operator: {}: {e}", p.order_id),
                        }
                    }
                }
                Err(e) => eprintln!("operator: pending approvals: {e}"),
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                _ = stop.wait_for(|s| *s) => return applied,
            }
        }
    })
}

/// Runs the plan on a fresh stack and checks the properties.
async fn run(plan: Plan) {
    let started = Instant::now();
    let saga = Saga::start(SagaSettings::default()).await;
    let skus = &SKUS[..plan.stock.len()];
    for (sku, available) in skus.iter().zip(&plan.stock) {
        saga.stock(sku, *available).await;
    }
    // What makes an order large: one piano on top of its lines (the catalog prices the SKUs at
    // 25.00 and a piano at 2,500.00). Pianos are stocked for every order, so they never run
    // out and the stock the orders race for stays the SKUs'.
    saga.stock(PIANO, plan.orders.len() as u64).await;
    let decisions: HashMap<String, bool> = plan
        .orders
        .iter()
        .enumerate()
        .filter(|(_, o)| o.large)
        .map(|(i, o)| (order_id(i), o.approve))
        .collect();
    let (stop_operator, stop) = watch::channel(false);
    let operator = spawn_operator(&saga, decisions, stop);

    // Place every order at once.
    let saga = Arc::new(saga);
    let placing: Vec<_> = plan
        .orders
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let mut lines: Vec<(&str, u32, u64)> = o
                .lines
                .iter()
                .map(|(sku, q)| (SKUS[*sku], *q, catalog_cents(SKUS[*sku])))
                .collect();
            if o.large {
                lines.push((PIANO, 1, catalog_cents(PIANO)));
            }
            let req = request(&order_id(i), &lines, o.payment, o.postal);
            let saga = saga.clone();
            tokio::spawn(async move { saga.place(req).await })
        })
        .collect();
    let mut placed = Vec::new();
    for (i, p) in placing.into_iter().enumerate() {
        let order = p.await.expect("placing does not panic");
        assert_eq!(order.new.requires_approval, plan.orders[i].large, "{i}");
        placed.push(order);
    }

    // Every execution ends: succeeded or failed, never stuck.
    let mut executions = Vec::new();
    for order in &placed {
        let d = saga.finished(order).await;
        assert!(
            matches!(
                d.status,
                ExecutionStatus::Succeeded | ExecutionStatus::Failed
            ),
            "{}: {d:?}",
            order.id()
        );
        executions.push(d);
    }
    let _ = stop_operator.send(true);
    operator.await.expect("the operator does not panic");

    // The ledger, before the checks below add refunds of their own.
    let store_db = ledger::store_path(&saga.workflow.engine().config().db_path);
    let money = ledger::read(&store_db);

    let mut shipped_by_orders: BTreeMap<&str, u64> = BTreeMap::new();
    for (i, (order, done)) in placed.iter().zip(&executions).enumerate() {
        let id = order.id();
        let o = &plan.orders[i];
        let now = saga.order(id.as_str()).await;
        let succeeded = done.status == ExecutionStatus::Succeeded;
        // COMPLETED orders are exactly the SUCCEEDED executions, CANCELLED the FAILED ones.
        let expected_status = if succeeded {
            OrderStatus::Completed
        } else {
            OrderStatus::Cancelled
        };
        assert_eq!(now.status, expected_status, "{id}: {o:?}: {done:?}");

        // The outcome is the plan's, or out of stock (the orders race for the stock).
        let error = done.error.as_deref();
        match o.expected_failure() {
            None => assert!(
                succeeded || error == Some("Inventory.OutOfStock"),
                "{id}: {o:?}: {done:?}"
            ),
            Some(planned) => assert!(
                error == Some(planned) || error == Some("Inventory.OutOfStock"),
                "{id}: {o:?}: {done:?}"
            ),
        }
        // An order asking for more than a SKU ever had never gets it.
        if o.demand().iter().any(|(sku, q)| *q > plan.stock[*sku]) {
            assert_eq!(error, Some("Inventory.OutOfStock"), "{id}: {o:?}");
        }
        // An order no other order competes with, whose demand fits the stock, gets its stock.
        let alone = o.demand().iter().all(|(sku, q)| {
            *q <= plan.stock[*sku]
                && plan
                    .orders
                    .iter()
                    .enumerate()
                    .all(|(j, other)| j == i || !other.demand().contains_key(sku))
        });
        if alone {
            assert_ne!(error, Some("Inventory.OutOfStock"), "{id}: {o:?}");
        }
        if !succeeded {
            let failure = now
                .failure
                .as_ref()
                .expect("a cancelled order has its failure");
            assert_eq!(Some(failure.error.as_str()), error, "{id}");
        }

        // No order has more than one charge; every charge is shipped or refunded, in full.
        let m = money.get(id.as_str()).cloned().unwrap_or_default();
        assert!(m.charges.len() <= 1, "{id}: {m:?}");
        assert!(m.refunds.len() <= m.charges.len(), "{id}: {m:?}");
        let charge = saga.ports.payments.find_charge(id).await.unwrap();
        assert_eq!(charge.is_some(), !m.charges.is_empty(), "{id}");
        // A charge id recorded on the order is the provider's charge of the order.
        if let Some(recorded) = &now.charge_id {
            assert_eq!(
                Some(recorded),
                charge.as_ref().map(|c| &c.charge_id),
                "{id}"
            );
        }
        let shipment = saga.ports.shipping.shipment(id).await.unwrap();
        if succeeded {
            let charge = charge.as_ref().expect("a completed order was charged");
            assert_eq!(charge.amount_cents, order.new.amount_cents, "{id}");
            assert_eq!(
                now.charge_id.as_ref(),
                Some(&charge.charge_id),
                "{id}: the charge step reported success without recording its charge"
            );
            assert!(shipment.is_some(), "{id}: completed without a shipment");
            assert!(m.refunds.is_empty(), "{id}: completed and refunded: {m:?}");
            for (sku, q) in o.demand() {
                *shipped_by_orders.entry(SKUS[sku]).or_default() += q;
            }
        } else {
            assert!(shipment.is_none(), "{id}: cancelled but shipped");
            if let Some(charge) = &charge {
                assert_eq!(charge.amount_cents, order.new.amount_cents, "{id}");
                assert_eq!(m.refunds, [charge.amount_cents], "{id}: refunded in full");
                let again = saga
                    .ports
                    .payments
                    .refund(id, now.charge_id.as_deref(), &id.refund_key())
                    .await
                    .unwrap();
                assert!(
                    matches!(again, Refunded::Already(_)),
                    "{id}: a charge neither shipped nor refunded: {again:?}"
                );
            }
        }
    }

    // Stock is conserved, nothing is left reserved, and what shipped is what completed.
    for (sku, initial) in skus.iter().zip(&plan.stock) {
        let (available, reserved, shipped) = saga.level(sku).await;
        assert_eq!(
            available + reserved + shipped,
            *initial,
            "{sku}: {available} + {reserved} + {shipped}"
        );
        assert_eq!(reserved, 0, "{sku}: every saga is over");
        assert_eq!(
            shipped,
            shipped_by_orders.get(sku).copied().unwrap_or(0),
            "{sku}"
        );
    }

    let Ok(mut saga) = Arc::try_unwrap(saga) else {
        panic!("the saga is still shared")
    };
    saga.stop_workers().await;
    saga.workflow.engine().shutdown().await;
    eprintln!(
        "{} orders, stock {:?}: {} completed in {:.1?}",
        plan.orders.len(),
        plan.stock,
        executions
            .iter()
            .filter(|d| d.status == ExecutionStatus::Succeeded)
            .count(),
        started.elapsed()
    );
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 6,
        // Each case runs real sagas: shrink a little, not for minutes.
        max_shrink_iters: 16,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "tests/saga_properties/regressions.txt",
        ))),
        ..ProptestConfig::default()
    })]

    /// The property: random mixes of orders and faults conserve stock
    /// (initial = available + reserved + shipped) and every charge is shipped or refunded.
    #[test]
    fn stock_is_conserved_and_every_charge_is_shipped_or_refunded(plan in plan()) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(run(plan));
    }
}

// ---- a late step -------------------------------------------------------------------------------

/// A saga whose workers are stopped, with a small order `id` placed on 5 books in stock: its
/// steps are run by hand, as a hung worker would run them late.
async fn placed_without_workers(id: &str) -> (Saga, store::OrderId) {
    let mut saga = Saga::default().await;
    saga.stop_workers().await;
    saga.stock("book", 5).await;
    let order = saga.place(harness::small(id, "book", PM_SUCCEEDS)).await;
    let id = order.id().clone();
    (saga, id)
}

/// A task of a step, with `input`.
fn task(input: serde_json::Value) -> workflow::StepTask {
    workflow::StepTask {
        task_token: "t".into(),
        input,
    }
}

/// Runs each of `activities`' steps once with `input`; each must succeed.
async fn run_done(
    saga: &Saga,
    activities: &[workflow::definition::Activity],
    input: &serde_json::Value,
) {
    for activity in activities {
        let outcome = saga.step(*activity).run(task(input.clone())).await;
        assert!(
            matches!(outcome, workflow::StepOutcome::Done(_)),
            "{activity:?}: {outcome:?}"
        );
    }
}

/// The compensations the saga runs when a forward step timed out for good, in the definition's
/// order and with its parameters: the stock goes back first, then the refund ends the order.
async fn compensate(saga: &Saga, id: &store::OrderId) {
    use workflow::definition::Activity;
    for (activity, finishes_order) in [
        (Activity::ReleaseInventory, false),
        (Activity::RefundPayment, true),
    ] {
        let input = serde_json::json!({
            "orderId": id.as_str(),
            "failure": {"Error": "States.Timeout"},
            "attempt": 0,
            "finishesOrder": finishes_order,
        });
        run_done(saga, &[activity], &input).await;
    }
}

/// The saga gives up on a CreateShipment task whose worker hangs (its attempts time out) and
/// compensates: release, refund, CANCELLED. Then the hung worker wakes up and runs its step.
/// Charges have a guard for this (a refund that found nothing voids the order) and so do
/// reservations (a release is recorded, a late reserve is refused); a late shipment must be
/// refused too, or the goods leave for an order that was refunded and whose stock is counted
/// as available again.
#[tokio::test(flavor = "multi_thread")]
async fn a_shipment_after_the_compensation_is_refused() {
    use serde_json::json;
    use workflow::definition::Activity;

    let (saga, id) = placed_without_workers("o-late-ship").await;
    let forward = json!({"orderId": id.as_str()});
    run_done(
        &saga,
        &[Activity::ReserveInventory, Activity::ChargePayment],
        &forward,
    )
    .await;
    // CreateShipment timed out for good: the saga compensates.
    compensate(&saga, &id).await;
    assert_eq!(saga.order(id.as_str()).await.status, OrderStatus::Cancelled);
    assert_eq!(saga.level("book").await, (5, 0, 0));

    // The hung CreateShipment worker runs its step now.
    let late = saga.step(Activity::CreateShipment).run(task(forward)).await;
    let shipment = saga.ports.shipping.shipment(&id).await.unwrap();
    assert!(
        shipment.is_none(),
        "a cancelled, refunded order was shipped: {shipment:?} (the step answered {late:?}); \
         stock {:?}",
        saga.level("book").await
    );
    assert_eq!(saga.order(id.as_str()).await.status, OrderStatus::Cancelled);
    assert_eq!(saga.level("book").await, (5, 0, 0));
}

/// The saga gives up on a ChargePayment task whose worker hangs before it charges, and
/// compensates: the stock is released, the refund finds nothing, CANCELLED. Then the hung worker
/// wakes up. It must not ask the provider for a charge at all: the sandbox refuses one for a
/// voided order, but a real provider (Stripe) would take the money, after the refund that was
/// to undo it.
#[tokio::test(flavor = "multi_thread")]
async fn a_charge_after_the_compensation_asks_the_provider_nothing() {
    use serde_json::json;
    use workflow::StepOutcome;
    use workflow::definition::Activity;

    let (saga, id) = placed_without_workers("o-late-charge").await;
    let forward = json!({"orderId": id.as_str()});
    run_done(&saga, &[Activity::ReserveInventory], &forward).await;
    // ChargePayment timed out for good: the saga compensates.
    compensate(&saga, &id).await;
    assert_eq!(saga.order(id.as_str()).await.status, OrderStatus::Cancelled);

    // The hung ChargePayment worker runs its step now, against a provider that counts.
    let payments = Arc::new(CountingPayments::new(saga.ports.payments.clone()));
    let ports = store::Ports {
        payments: payments.clone(),
        ..saga.ports.clone()
    };
    let late =
        workflow::steps::for_activity(Activity::ChargePayment, &ports, &telemetry::Metrics::new())
            .run(task(forward))
            .await;
    assert!(
        matches!(&late, StepOutcome::Failed { error, .. } if error == "Order.Invalid"),
        "{late:?}"
    );
    assert_eq!(
        payments.charges(),
        0,
        "the provider was asked to charge a cancelled order"
    );
    assert_eq!(saga.ports.payments.find_charge(&id).await.unwrap(), None);
    assert_eq!(saga.order(id.as_str()).await.status, OrderStatus::Cancelled);
    assert_eq!(saga.level("book").await, (5, 0, 0));
}
