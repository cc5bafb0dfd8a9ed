//! The order saga, whole: its state machine definition (`order_saga.asl.json`, the one
//! definition for the embedded engine and AWS) with its input, the registry of the steps it
//! runs (the forward steps in `steps/`, the undos from `compensations`, each declared once), the
//! activity workers, and the workflow port with its adapters.

pub mod aws;
pub mod cancel;
pub mod definition;
pub mod embedded;
pub mod port;
pub mod steps;
pub mod upgrade;
pub mod versions;
pub mod workers;

pub use aws::AwsWorkflow;
pub use cancel::{CancelResult, cancel};
pub use definition::{ErrorName, SagaInput, SagaSettings};
pub use embedded::EmbeddedWorkflow;
pub use port::{
    ExecutionInfo, HistoryPage, RUNNING_PAGE, RedriveOutcome, RunningPage, StartedExecution,
    TaskHandle, WorkflowError, WorkflowPort,
};
pub use workers::{
    RunningPool, SagaWorkers, Step, StepOutcome, StepTask, WorkerPool, WorkerSettings,
};
