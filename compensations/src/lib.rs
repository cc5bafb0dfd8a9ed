//! The saga's compensations. Each is idempotent by the order id and safe to run when the forward
//! step's outcome is unknown: undoing something that never happened is a recorded no-op.
//! Order status moves with them: `COMPENSATING` while they run, `CANCELLED` once the last one is
//! done ([`cancel`]), or `COMPENSATION_FAILED` with an incident when one gives up ([`give_up`]).
//! Every compensation first voids the order's shipping: an order that turns out to have shipped
//! is kept, not undone.

mod failure;
mod refund;
mod release;
mod void_shipping;

pub use failure::{cancel, give_up};
pub use refund::refund;
pub use release::release;

use store::{Failure, GatewayError, Shipment, StoreError};

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

/// The `{Error, Cause}` a Catch put in the execution, as the order's failure.
pub fn failure_from(value: Option<&serde_json::Value>) -> Failure {
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
