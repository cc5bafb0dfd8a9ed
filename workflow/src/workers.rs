//! The activity workers: a pool with pollers per activity and bounded concurrency, heartbeats
//! while a step runs, step outcomes reported to the workflow, and a graceful stop; and the
//! saga's workers started on it ([`SagaWorkers`]).

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
    /// Report `SendTaskFailure` (`error` is a name from [`crate::ErrorName`]).
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

mod pool;
mod saga;
mod task;

pub use pool::{RunningPool, WorkerPool, WorkerSettings};
pub use saga::SagaWorkers;
