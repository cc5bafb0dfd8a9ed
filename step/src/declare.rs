//! How a step declares itself. The registry (`workflow::steps`) lists each step once, by its
//! type, whose name is also its Task state's; everything else about it is declared here, beside
//! its code: the activity it serves, the error names it may raise and the ports it needs. The
//! activity table, the deployment template's check, the definition's tests and the workers are
//! all derived from those declarations.

use crate::{ErrorName, Step};
use store::Ports;

/// What a step says of itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Declaration {
    /// The activity's name (the last part of its ARN).
    pub activity: &'static str,
    /// The error names the step may report beyond [`EVERY_STEP_RAISES`]. The definition must
    /// retry or catch each at the step's state (a test holds it to that).
    pub raises: &'static [ErrorName],
    /// The ports the step calls.
    pub needs: &'static [Port],
}

/// What any step may report, whatever it does: input it cannot read, the store out of reach, a
/// bug or a panic (the pool reports those for it).
pub const EVERY_STEP_RAISES: [ErrorName; 3] = [
    ErrorName::OrderInvalid,
    ErrorName::StoreUnavailable,
    ErrorName::StepFailed,
];

impl Declaration {
    /// Every error name the step may report: its own and [`EVERY_STEP_RAISES`].
    pub fn raised(&self) -> impl Iterator<Item = ErrorName> + '_ {
        self.raises.iter().copied().chain(EVERY_STEP_RAISES)
    }

    /// Whether the step calls a provider outside the service (a payment provider, a carrier),
    /// whose misconfiguration it must survive for days.
    pub fn calls_a_provider(&self) -> bool {
        self.needs.iter().any(|p| p.is_provider())
    }
}

/// The ports a step may need: the fields of [`store::Ports`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Port {
    Orders,
    Inventory,
    Payments,
    Shipping,
}

impl Port {
    /// A provider outside the service (behind a sandbox gateway in the embedded default).
    pub fn is_provider(self) -> bool {
        matches!(self, Port::Payments | Port::Shipping)
    }
}

/// What a step is built with.
#[derive(Clone)]
pub struct StepContext {
    pub ports: Ports,
    /// The Task state that runs the step (the step's type name).
    pub state: &'static str,
    /// How many retries the state's definition makes of a transient error (its retrier of
    /// `Store.Unavailable`): a step whose `$$.State.RetryCount` equals it runs its last attempt.
    pub transient_retries: u32,
    /// The service's metrics: a step that ends an order's saga counts it there
    /// (`fulfillment_sagas_finished_total`, [`StepContext::saga_ended`]).
    pub metrics: telemetry::Metrics,
}

impl StepContext {
    /// Counts the end of an order's saga when `order`, as a step's write left it, is in a
    /// terminal status. Steps are delivered at least once, so a redelivery after a crash,
    /// finding the order already there, counts it again: the count is of ends recorded, not of
    /// distinct orders.
    pub fn saga_ended(&self, order: &store::Order) {
        if order.status.is_terminal() {
            self.metrics.saga_finished(order.status);
        }
    }
}

/// A step as the registry knows it: declared, and built once at start for its state.
pub trait Declared: Step + Sized + 'static {
    const DECLARATION: Declaration;

    fn build(cx: &StepContext) -> Self;
}
