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
use compensations::CompensationError;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;
use store::{GatewayError, Order, OrderId, OrderRepository, Ports, Shipment, StoreError};

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

/// A compensation that could not finish: transient failures are retried by the definition.
fn compensation_failed(e: &CompensationError) -> StepOutcome {
    let name = if e.is_transient() {
        ErrorName::StoreUnavailable
    } else {
        ErrorName::StepFailed
    };
    failed(name, e.to_string())
}

/// A compensation's output when the order turned out to have shipped: nothing was undone.
fn shipped(key: &str, shipment: &Shipment) -> Value {
    json!({ key: false, "reason": "the order had shipped; nothing is undone", "shipmentId": shipment.shipment_id })
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
