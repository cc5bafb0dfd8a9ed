//! The saga's steps, one per file, and [`for_activity`], the table that gives each activity of
//! the definition its step. A forward step loads the order by the id in its input, does its one
//! side effect idempotently (keyed by the order id, never by an attempt), moves the order's
//! status forward, and reports an outcome with an [`ErrorName`]; a compensation step runs its
//! undo from the `compensations` crate.

pub mod approval;
pub mod charge;
pub mod record_failure;
pub mod refund;
pub mod release;
pub mod reserve;
pub mod ship;

pub use approval::AwaitApproval;
pub use charge::ChargePayment;
pub use record_failure::RecordCompensationFailure;
pub use refund::RefundPayment;
pub use release::ReleaseInventory;
pub use reserve::ReserveInventory;
pub use ship::CreateShipment;

use crate::ErrorName;
use crate::definition::Activity;
use crate::workers::{Step, StepOutcome, StepTask};
use compensations::{CompensationError, failure_from};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;
use store::{GatewayError, Incident, Order, OrderId, OrderRepository, Ports, Shipment, StoreError};

/// The step that serves `activity`, over `ports`.
pub fn for_activity(activity: Activity, ports: &Ports) -> Arc<dyn Step> {
    let ports = ports.clone();
    match activity {
        Activity::ReserveInventory => Arc::new(ReserveInventory { ports }),
        Activity::ChargePayment => Arc::new(ChargePayment { ports }),
        Activity::AwaitApproval => Arc::new(AwaitApproval { ports }),
        Activity::CreateShipment => Arc::new(CreateShipment { ports }),
        Activity::RefundPayment => Arc::new(RefundPayment { ports }),
        Activity::ReleaseInventory => Arc::new(ReleaseInventory { ports }),
        Activity::RecordCompensationFailure => Arc::new(RecordCompensationFailure { ports }),
    }
}

/// The input every saga task gets (`Parameters: {"orderId.$": "$.orderId", …}`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OrderInput {
    pub order_id: OrderId,
    /// The `{Error, Cause}` that started a compensation, for compensation steps.
    #[serde(default)]
    pub failure: Option<Value>,
    /// `$$.State.RetryCount`, for compensation steps: the retries made before this attempt.
    #[serde(default)]
    pub attempt: Option<u32>,
    /// For compensation steps: whether this one is the last and ends the order `CANCELLED`.
    /// Absent in definitions from before it was passed, where the release came last.
    #[serde(default)]
    pub finishes_order: Option<bool>,
}

impl OrderInput {
    pub fn parse(task: &StepTask) -> Result<OrderInput, StepOutcome> {
        serde_json::from_value(task.input.clone())
            .map_err(|e| failed(ErrorName::OrderInvalid, format!("bad task input: {e}")))
    }
}

pub fn failed(error: ErrorName, cause: impl Into<String>) -> StepOutcome {
    StepOutcome::Failed {
        error: error.as_str().to_owned(),
        cause: cause.into(),
    }
}

/// A store failure as a step outcome: transient ones are retried by the definition.
pub fn store_failed(e: &StoreError) -> StepOutcome {
    let name = if e.is_transient() {
        ErrorName::StoreUnavailable
    } else {
        ErrorName::StepFailed
    };
    failed(name, e.to_string())
}

/// A provider's names for its own failures, for [`gateway_failed`].
pub struct ProviderErrors {
    /// Its final "no" (a decline, an undeliverable address).
    pub rejected: ErrorName,
    /// It did not answer, or answered that it is overloaded.
    pub unavailable: ErrorName,
    /// A request no retry can fix that is not a "no" of the customer's.
    pub invalid: ErrorName,
}

/// A gateway's failure as the step's outcome: the provider's own names for its refusals, the
/// shared ones for a reused key, the operator's misconfiguration and store trouble (behind a
/// sandbox gateway).
pub fn gateway_failed(e: GatewayError, names: ProviderErrors) -> StepOutcome {
    match e {
        GatewayError::Rejected(reason) => failed(names.rejected, reason),
        GatewayError::Unavailable(reason) => failed(names.unavailable, reason),
        GatewayError::Invalid(reason) => failed(names.invalid, reason),
        GatewayError::KeyReused(reason) => failed(ErrorName::PaymentKeyReused, reason),
        GatewayError::Misconfigured(reason) => failed(ErrorName::ProviderMisconfigured, reason),
        GatewayError::Store(s) => store_failed(&s),
    }
}

/// A compensation's failure as the step's outcome, named by whose failure it is.
fn compensation_failed(e: CompensationError) -> StepOutcome {
    match e {
        CompensationError::Store(e) => store_failed(&e),
        CompensationError::Payment(e) => gateway_failed(e, charge::PAYMENT_ERRORS),
        CompensationError::Shipping(e) => gateway_failed(e, ship::SHIPPING_ERRORS),
    }
}

/// A compensation step that could not finish. The definition retries transient errors; a
/// permanent one, or a transient one on the state's last attempt, first records the incident
/// on the order (the execution then fails at this state, where a redrive resumes). A
/// misconfigured provider is the operator's to fix and is retried for days: it records none
/// (when even those retries run out, the repair loop finds the failed execution). When the
/// incident cannot be recorded, the store's failure is reported instead, and retried.
async fn give_up_or_retry(
    ports: &Ports,
    state: &str,
    input: &OrderInput,
    e: CompensationError,
) -> StepOutcome {
    let outcome = compensation_failed(e);
    let StepOutcome::Failed { error, cause } = &outcome else {
        return outcome;
    };
    let name = ErrorName::ALL.into_iter().find(|n| n.as_str() == error);
    let retries = input.attempt.unwrap_or(0);
    let last = match name {
        Some(ErrorName::ProviderMisconfigured) => false,
        Some(n) if n.is_transient() => retries >= crate::definition::transient_retries(state),
        _ => true,
    };
    if !last {
        return outcome;
    }
    let incident = Incident {
        step: state.to_owned(),
        error: error.clone(),
        cause: cause.clone(),
        attempts: retries.saturating_add(1),
        since: chrono::Utc::now(),
    };
    let failure = failure_from(input.failure.as_ref());
    match compensations::give_up(ports.orders.as_ref(), &input.order_id, &incident, failure).await {
        Ok(_) => outcome,
        Err(e) => compensation_failed(e),
    }
}

/// Ends a compensation run when `input` says this step is the last: the order `CANCELLED`, and
/// the failure that started the compensation handed to the `Fail` state that ends the saga (a
/// cause filled in when the failure had none, e.g. a timeout's).
async fn finish_if_last(
    ports: &Ports,
    input: &OrderInput,
    last_by_default: bool,
    mut output: Value,
) -> StepOutcome {
    if !input.finishes_order.unwrap_or(last_by_default) {
        return StepOutcome::Done(output);
    }
    let failure = failure_from(input.failure.as_ref());
    let (error, cause) = (failure.error.clone(), failure.cause.clone());
    if let Err(e) = compensations::cancel(ports.orders.as_ref(), &input.order_id, failure).await {
        return compensation_failed(e);
    }
    output["error"] = json!(error);
    output["cause"] = json!(cause);
    StepOutcome::Done(output)
}

/// A compensation's output when the order turned out to have shipped: nothing was undone.
fn shipped(key: &str, shipment: &Shipment) -> Value {
    json!({ key: false, "reason": "the order had shipped; nothing is undone", "shipmentId": shipment.shipment_id })
}

/// `Order.Cancelled` when the order's cancellation is recorded: a forward step that sees it does
/// nothing and fails, and the saga's Catch runs the compensation.
pub fn cancelled(order: &Order) -> Option<StepOutcome> {
    let cancellation = order.cancellation.as_ref()?;
    Some(failed(ErrorName::OrderCancelled, cancellation.cause()))
}

/// Loads the order a task is about; a missing order is a bug, reported and never retried.
pub async fn load_order(orders: &dyn OrderRepository, id: &OrderId) -> Result<Order, StepOutcome> {
    match orders.get(id).await {
        Ok(Some(order)) => Ok(order),
        Ok(None) => Err(failed(
            ErrorName::OrderInvalid,
            format!("order {id} does not exist"),
        )),
        Err(e) => Err(store_failed(&e)),
    }
}

/// Unwraps a step's intermediate results: `Err` holds the outcome to report.
macro_rules! attempt {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(outcome) => return outcome,
        }
    };
}
pub(crate) use attempt;
