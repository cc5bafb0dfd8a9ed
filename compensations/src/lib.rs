//! Every undo of the saga, each step beside its logic: [`ReleaseInventory`] ([`release`]),
//! [`RefundPayment`] ([`refund`]), and the void of the order's shipping that each starts with.
//! Each is idempotent by the order id and safe to run when the forward step's outcome is
//! unknown: undoing something that never happened is a recorded no-op. Order status moves with
//! them: `COMPENSATING` while they run, `CANCELLED` once the last one is done ([`cancel`]), or
//! `COMPENSATION_FAILED` with an incident when one gives up ([`give_up`]). An order that turns
//! out to have shipped is kept, not undone. The repair loop runs the same undos outside a saga.

mod failure;
mod refund;
mod release;
mod void_shipping;

pub use failure::{cancel, give_up};
pub use refund::{RefundPayment, refund};
pub use release::{ReleaseInventory, release};

use serde::Deserialize;
use serde_json::Value;
use store::{Failure, GatewayError, OrderId, Shipment, StoreError};

/// What a compensation did.
#[derive(Debug, Clone, PartialEq)]
pub enum Compensated<T> {
    /// Undone (or a recorded no-op when the forward step never happened).
    Undone(T),
    /// The order had shipped: it completed in the world and nothing was undone.
    Shipped(Shipment),
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CompensationError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The payment provider's failure (a refund).
    #[error(transparent)]
    Payment(GatewayError),
    /// The carrier's failure (voiding the shipping).
    #[error(transparent)]
    Shipping(GatewayError),
}

impl CompensationError {
    /// Compensations are retried long and patiently by the workflow; this tells the log which
    /// failures are expected to pass.
    pub fn is_transient(&self) -> bool {
        match self {
            CompensationError::Store(e) => e.is_transient(),
            CompensationError::Payment(e) | CompensationError::Shipping(e) => e.is_transient(),
        }
    }
}

/// The input every compensation task gets (`Parameters` of `ReleaseInventory` and
/// `RefundPayment` in the definition).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompensationInput {
    pub order_id: OrderId,
    /// The `{Error, Cause}` that started the compensation.
    #[serde(default)]
    pub failure: Option<Value>,
    /// `$$.State.RetryCount`: the retries made before this attempt.
    #[serde(default)]
    pub attempt: u32,
    /// Whether this compensation is the last and ends the order `CANCELLED`.
    pub finishes_order: bool,
}

/// The `{Error, Cause}` a Catch put in the execution, as the order's failure.
pub fn failure_from(value: Option<&Value>) -> Failure {
    let field = |k: &str| {
        value
            .and_then(|v| v.get(k))
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_owned()
    };
    Failure {
        error: field("Error"),
        cause: field("Cause"),
    }
}
