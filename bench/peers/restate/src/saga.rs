//! `OrderSaga`: the order saga of `bench peers` as a Restate workflow, keyed by the order id.
//!
//! `run` executes once per order id (Restate refuses a second `run` for a workflow key), which is
//! what makes submitting an order idempotent. Each step is a durable call to a virtual object
//! (`Sku`, `Payments`) or a journaled `ctx.run`; after a crash Restate replays the journal, so a
//! step that finished is never done again, and one in flight is retried until it answers.
//!
//! The compensations follow Restate's saga pattern (its sagas guide and the `BookingWorkflow`
//! examples): before each step, push its undo action on a list; when a step fails with a
//! `TerminalError` (a failure we do not want retried), run the list in reverse and rethrow. The
//! undo actions (`Sku/release`, `Payments/refund`) are idempotent, so registering one before its
//! step is safe even when the step then did nothing.
//!
//! State of `OrderSaga/<orderId>` (JSON, read by `status` and by the admin SQL): `status`,
//! `reason` (only once `CANCELLED`), `totalCents`, `shipment`.

use restate_sdk::prelude::*;
use serde::{Deserialize, Serialize};

use crate::payments::{ChargeRequest, PaymentsClient};
use crate::sku::{ReleaseRequest, ReserveRequest, SkuClient};

/// The order, as `POST /orders` of the service takes it. Fields the saga does not use
/// (`customerId`, `currency`, the caller's `unitPriceCents`, the rest of the address) are
/// accepted and ignored: prices come from the catalog.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Order {
    pub items: Vec<Line>,
    pub payment_method: String,
    pub shipping_address: Address,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Line {
    pub sku: String,
    pub quantity: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Address {
    pub postal_code: String,
}

/// `approve`'s body: `"approve"` or `"reject"`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Decision {
    pub decision: String,
}

/// What `status` (and `run`, when it completes) answers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StatusView {
    pub status: String,
    pub reason: Option<String>,
}

/// The shipment record, the `ship` step's journaled result, kept in the workflow's state.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Shipment {
    pub shipment_id: String,
    pub postal_code: String,
}

/// The statuses a client sees.
pub const ACCEPTED: &str = "ACCEPTED";
pub const RESERVED: &str = "RESERVED";
pub const CHARGED: &str = "CHARGED";
pub const AWAITING_APPROVAL: &str = "AWAITING_APPROVAL";
pub const COMPLETED: &str = "COMPLETED";
pub const CANCELLED: &str = "CANCELLED";

/// The cancellation reasons (the `TerminalError` message that ended the steps).
const OUT_OF_STOCK: &str = "OUT_OF_STOCK";
const REJECTED: &str = "REJECTED";
const SHIPMENT_REJECTED: &str = "SHIPMENT_REJECTED";
const INVALID_ORDER: &str = "INVALID_ORDER";

/// The durable promise the operator's decision resolves.
const APPROVAL: &str = "approval";

/// The postal code the simulated carrier refuses.
const UNDELIVERABLE_POSTAL_CODE: &str = "00000";

/// An undo action of the saga. Data rather than closures: the list then needs no borrow of the
/// context, and running it is one `match`.
enum Undo {
    Release { sku: String },
    Refund,
}

pub struct OrderSaga {
    /// Orders whose catalog total is at least this many cents wait for an operator. Read once at
    /// the endpoint's start: it must not change while sagas are in flight, or a replay would take
    /// another branch than the journal recorded (Restate then stops the invocation with a
    /// non-determinism error). The bench starts each run on a fresh server.
    pub approval_threshold_cents: i64,
}

#[restate_sdk::workflow(name = "OrderSaga")]
impl OrderSaga {
    /// Runs the saga of one order to `COMPLETED`, or compensates and ends `CANCELLED`. A
    /// cancelled order ends the invocation with its `TerminalError` (the reason), rethrown after
    /// the compensations as Restate's saga pattern does.
    #[handler]
    async fn run(
        &self,
        ctx: WorkflowContext<'_>,
        Json(order): Json<Order>,
    ) -> Result<Json<StatusView>, HandlerError> {
        set_status(&ctx, ACCEPTED, None);
        let mut undo = Vec::new();
        match self.steps(&ctx, &order, &mut undo).await {
            Ok(()) => {
                set_status(&ctx, COMPLETED, None);
                Ok(Json(StatusView {
                    status: COMPLETED.into(),
                    reason: None,
                }))
            }
            Err(failure) => {
                // Reverse order of the steps done. Each compensation is a durable call: a crash
                // in the middle of this loop replays the ones already made and goes on.
                for action in undo.iter().rev() {
                    match action {
                        Undo::Release { sku } => {
                            ctx.object_client::<SkuClient>(sku.as_str())
                                .release(Json(ReleaseRequest {
                                    order_id: ctx.key().to_owned(),
                                }))
                                .call()
                                .await?
                        }
                        Undo::Refund => {
                            ctx.object_client::<PaymentsClient>(ctx.key())
                                .refund()
                                .call()
                                .await?
                        }
                    }
                }
                set_status(&ctx, CANCELLED, Some(failure.message()));
                Err(failure.into())
            }
        }
    }

    /// The operator's decision for an order waiting for approval. It resolves the workflow's
    /// durable promise, which may happen before `run` reaches the wait (the value is kept until
    /// `run` asks for it); only the first decision counts, a promise resolves once.
    #[handler]
    async fn approve(
        &self,
        ctx: SharedWorkflowContext<'_>,
        Json(decision): Json<Decision>,
    ) -> Result<(), HandlerError> {
        match decision.decision.as_str() {
            "approve" | "reject" => {
                ctx.resolve_promise::<String>(APPROVAL, decision.decision);
                Ok(())
            }
            other => Err(TerminalError::new_with_code(
                400,
                format!("decision must be \"approve\" or \"reject\", not {other:?}"),
            )
            .into()),
        }
    }

    /// The order's status and, once cancelled, why. Shared: it runs beside a `run` that waits
    /// for approval, reading the state `run` last wrote. 404 until `run` has started (just after
    /// the submit, or for an order never submitted).
    #[handler]
    async fn status(
        &self,
        ctx: SharedWorkflowContext<'_>,
    ) -> Result<Json<StatusView>, HandlerError> {
        let Some(status) = ctx.get::<String>("status").await? else {
            return Err(
                TerminalError::new_with_code(404, "no such order (or not started yet)").into(),
            );
        };
        let reason = ctx.get::<String>("reason").await?;
        Ok(Json(StatusView { status, reason }))
    }
}

impl OrderSaga {
    /// The saga's steps. A `TerminalError` out of here is the order's cancellation, its message
    /// the reason; `undo` then holds the compensations of the steps begun.
    async fn steps(
        &self,
        ctx: &WorkflowContext<'_>,
        order: &Order,
        undo: &mut Vec<Undo>,
    ) -> Result<(), TerminalError> {
        if order.items.is_empty() || order.items.iter().any(|line| line.quantity <= 0) {
            return Err(TerminalError::new_with_code(400, INVALID_ORDER));
        }
        let order_id = ctx.key().to_owned();

        // 1. Reserve each line, 2. price it from the catalog (the price `reserve` answers).
        let mut total_cents = 0i64;
        for line in &order.items {
            // Registered before the call, as the pattern has it: had the reserve taken effect
            // but its answer been lost, the release still gives the stock back.
            undo.push(Undo::Release {
                sku: line.sku.clone(),
            });
            let Json(reserved) = ctx
                .object_client::<SkuClient>(line.sku.as_str())
                .reserve(Json(ReserveRequest {
                    order_id: order_id.clone(),
                    quantity: line.quantity,
                }))
                .call()
                .await?;
            if !reserved.ok {
                return Err(TerminalError::new_with_code(409, OUT_OF_STOCK));
            }
            total_cents += line.quantity * reserved.price_cents;
        }
        set_status(ctx, RESERVED, None);
        ctx.set("totalCents", total_cents);

        // 3. Charge, the order id as the idempotency key (it is the `Payments` object's key).
        // A decline comes back as the callee's TerminalError, reason PAYMENT_DECLINED.
        undo.push(Undo::Refund);
        ctx.object_client::<PaymentsClient>(order_id.as_str())
            .charge(Json(ChargeRequest {
                amount_cents: total_cents,
                payment_method: order.payment_method.clone(),
            }))
            .call()
            .await?;
        set_status(ctx, CHARGED, None);

        // 4. Approval. A durable promise rather than an awakeable, as Restate's docs recommend
        // for workflows: it is named within the workflow, so the `approve` handler resolves it
        // by the order id alone (an awakeable's generated id would have to be stored and handed
        // out first), it may be resolved before `run` gets here, and it lives as long as the
        // workflow, surviving restarts while the order waits, for days if need be.
        if total_cents >= self.approval_threshold_cents {
            set_status(ctx, AWAITING_APPROVAL, None);
            let decision = ctx.promise::<String>(APPROVAL).await?;
            if decision != "approve" {
                return Err(TerminalError::new_with_code(409, REJECTED));
            }
        }

        // 5. Ship. The carrier call is a journaled step: done once, its record replayed after a
        // crash. Its shipment id derives from the order id, so the record is keyed by the order.
        let postal_code = order.shipping_address.postal_code.clone();
        let Json(shipment) = ctx
            .run(|| async move {
                if postal_code == UNDELIVERABLE_POSTAL_CODE {
                    return Err(TerminalError::new_with_code(422, SHIPMENT_REJECTED).into());
                }
                Ok(Json(Shipment {
                    shipment_id: format!("shp_{order_id}"),
                    postal_code,
                }))
            })
            .name("ship")
            .await?;
        ctx.set("shipment", Json(shipment));
        Ok(())
    }
}

/// Records the order's status (and reason) in the workflow's state, where `status` and the
/// admin SQL read it.
fn set_status(ctx: &WorkflowContext<'_>, status: &str, reason: Option<&str>) {
    ctx.set("status", status.to_owned());
    if let Some(reason) = reason {
        ctx.set("reason", reason.to_owned());
    }
}
