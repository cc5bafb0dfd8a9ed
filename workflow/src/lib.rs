//! The order saga as a workflow: its state machine definition (`order_saga.asl.json`, the one
//! definition for the embedded engine and AWS), the workflow port with its adapters, the
//! activity-worker runtime that runs steps, and the forward steps themselves.

pub mod aws;
pub mod definition;
pub mod embedded;
pub mod port;
pub mod runtime;
pub mod steps;

pub use aws::AwsWorkflow;
pub use embedded::EmbeddedWorkflow;
pub use port::{
    ExecutionInfo, HistoryPage, StartedExecution, TaskHandle, WorkflowError, WorkflowPort,
};
pub use runtime::{RunningPool, Step, StepOutcome, StepTask, WorkerPool, WorkerSettings};
