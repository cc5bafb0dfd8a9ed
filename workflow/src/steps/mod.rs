//! The saga's forward steps, one per file. Each loads the order by the id in its input, does its
//! one side effect idempotently (keyed by the order id, never by an attempt), moves the order's
//! status forward, and reports an outcome with an error name from `store::ErrorName`.

pub mod approval;
pub mod charge;
pub mod reserve;
pub mod ship;

use crate::runtime::{StepOutcome, StepTask};
use serde::Deserialize;
use serde_json::Value;
use store::{ErrorName, GatewayError, Order, OrderId, OrderRepository, StoreError};

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

/// A gateway failure that is not specific to the step (store trouble behind a sandbox gateway).
pub fn gateway_store_failed(e: &GatewayError) -> StepOutcome {
    match e {
        GatewayError::Store(s) => store_failed(s),
        other => failed(ErrorName::StepFailed, other.to_string()),
    }
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
