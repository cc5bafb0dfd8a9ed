//! The activity workers: a pool with pollers per activity and bounded concurrency, heartbeats
//! while a step runs, step outcomes reported to the workflow, and a graceful stop; and the
//! saga's workers started on it ([`SagaWorkers`]).

pub use step::{Step, StepOutcome, StepTask};

mod pool;
mod saga;
mod task;

pub use pool::{RunningPool, WorkerPool, WorkerSettings};
pub use saga::SagaWorkers;
