//! What every step does with its order: read the task's input, load the order, see a
//! cancellation, and name its failures the way the definition matches them.

use crate::{ErrorName, ProviderErrors, StepOutcome, StepTask};
use serde::Deserialize;
use store::{GatewayError, Order, OrderId, OrderRepository, StoreError};

/// The input every forward task gets (`Parameters: {"orderId.$": "$.orderId", …}`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OrderInput {
    pub order_id: OrderId,
}

impl OrderInput {
    pub fn parse(task: &StepTask) -> Result<OrderInput, StepOutcome> {
        parse_input(task)
    }
}

/// A task's input as `T`; input no step can read is `Order.Invalid`, never retried.
pub fn parse_input<T: serde::de::DeserializeOwned>(task: &StepTask) -> Result<T, StepOutcome> {
    serde_json::from_value(task.input.clone())
        .map_err(|e| failed(ErrorName::OrderInvalid, format!("bad task input: {e}")))
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
