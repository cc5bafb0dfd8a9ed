//! The contract every step of the saga keeps, whichever crate it lives in (`workflow` for the
//! forward steps, `compensations` for the undos): the task a step is given ([`StepTask`]), what
//! it reports ([`StepOutcome`], under an [`ErrorName`]), and how it declares itself to the
//! registry in `workflow::steps` ([`Declared`]: its activity, the errors it may raise, the ports
//! it needs), from which every list of activities, states and error names is derived.

mod declare;
mod errors;
mod order;

pub use declare::{Declaration, Declared, EVERY_STEP_RAISES, Port, StepContext};
pub use errors::{ErrorName, PAYMENT_ERRORS, ProviderErrors, SHIPPING_ERRORS};
pub use order::{
    OrderInput, cancelled, failed, gateway_failed, load_order, parse_input, store_failed,
};

use async_trait::async_trait;
use serde_json::Value;

/// A task as a step sees it.
#[derive(Debug, Clone)]
pub struct StepTask {
    pub task_token: String,
    pub input: Value,
}

/// How a step ended.
#[derive(Debug, Clone, PartialEq)]
pub enum StepOutcome {
    /// Report `SendTaskSuccess` with this output.
    Done(Value),
    /// Report `SendTaskFailure` (`error` is a name from [`ErrorName`]).
    Failed { error: String, cause: String },
    /// Answer nothing: the step parked the task token for someone else to answer later (the
    /// approval step); the pool stops heartbeating it.
    Parked,
}

/// One kind of work, run for each task of its activity. Steps are at-least-once: they must be
/// idempotent by the order id.
#[async_trait]
pub trait Step: Send + Sync {
    async fn run(&self, task: StepTask) -> StepOutcome;
}

/// Unwraps a step's intermediate results: `Err` holds the outcome to report.
#[macro_export]
macro_rules! attempt {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(outcome) => return outcome,
        }
    };
}
