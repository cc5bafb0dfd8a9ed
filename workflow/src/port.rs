//! The workflow port: the Step Functions verbs the service needs, for one state machine.
//! Adapters: `embedded` (the in-process engine) and `aws` (AWS Step Functions, or anything
//! speaking its API). Adapters map their errors into [`WorkflowError`]; no engine or SDK error
//! leaves them.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkflowError {
    /// The task's token is dead: its task closed, timed out, or was abandoned.
    #[error("task timed out: {0}")]
    TaskTimedOut(String),
    /// Not a token this workflow service ever issued.
    #[error("invalid task token: {0}")]
    InvalidToken(String),
    #[error("execution does not exist: {0}")]
    ExecutionDoesNotExist(String),
    /// A name was reused for another execution with a different input.
    #[error("execution already exists: {0}")]
    ExecutionAlreadyExists(String),
    /// `redrive_execution` refused: the execution is running or succeeded, closed too long
    /// ago, or its history is full. The text is the workflow service's reason. Not transient:
    /// the same call is refused again.
    #[error("execution not redrivable: {0}")]
    NotRedrivable(String),
    /// Throttled, unreachable or shutting down: the same call may work later.
    #[error("workflow service unavailable: {0}")]
    Unavailable(String),
    /// Anything else (a bad request, a bug).
    #[error("workflow service error: {0}")]
    Other(String),
}

impl WorkflowError {
    pub fn is_transient(&self) -> bool {
        matches!(self, WorkflowError::Unavailable(_))
    }
}

/// The result of starting (or finding) an execution.
#[derive(Debug, Clone, PartialEq)]
pub struct StartedExecution {
    pub execution_arn: String,
    /// The execution existed already (a repeat start of the same order).
    pub already_started: bool,
}

/// What `describe_execution` tells.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionInfo {
    pub execution_arn: String,
    /// `RUNNING`, `SUCCEEDED`, `FAILED`, `TIMED_OUT` or `ABORTED`.
    pub status: String,
    pub start_date: DateTime<Utc>,
    pub stop_date: Option<DateTime<Utc>>,
    pub output: Option<Value>,
    pub error: Option<String>,
    pub cause: Option<String>,
    /// Times the execution was redriven.
    pub redrive_count: u32,
    /// When it was last redriven.
    pub redrive_date: Option<DateTime<Utc>>,
    /// `REDRIVABLE` or `NOT_REDRIVABLE` (whether `redrive_execution` would accept it now), when
    /// the workflow service tells.
    pub redrive_status: Option<String>,
    /// Why not, when `NOT_REDRIVABLE`.
    pub redrive_status_reason: Option<String>,
}

/// What a redrive did.
#[derive(Debug, Clone, PartialEq)]
pub struct RedriveOutcome {
    /// When the execution was redriven (for a repeated request, the redrive it repeats).
    pub redrive_date: DateTime<Utc>,
}

/// A page of the saga's running executions (Step Functions' `ListExecutions` with the
/// `RUNNING` filter).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RunningPage {
    pub execution_arns: Vec<String>,
    /// Where the next page starts; `None` after the last.
    pub next_token: Option<String>,
}

/// The most executions one `ListExecutions` call returns.
pub const RUNNING_PAGE: u32 = 1000;

/// A task handed to a worker.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskHandle {
    pub task_token: String,
    pub input: Value,
}

/// One page of an execution's history, as AWS-shaped JSON events.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryPage {
    pub events: Vec<Value>,
    pub next_token: Option<String>,
}

#[async_trait]
pub trait WorkflowPort: Send + Sync {
    /// The ARN the execution named `name` has (whether or not it exists).
    fn execution_arn(&self, name: &str) -> String;

    /// Starts the saga execution `name` with `input`. Starting an order that already has an
    /// execution (running with the same input, or closed) is `already_started`, not an error.
    async fn start_execution(
        &self,
        name: &str,
        input: &Value,
    ) -> Result<StartedExecution, WorkflowError>;

    async fn describe_execution(&self, execution_arn: &str)
    -> Result<ExecutionInfo, WorkflowError>;

    /// A page of up to [`RUNNING_PAGE`] of the saga's running executions, from `next_token`:
    /// one call lists a thousand. On AWS's default quotas (ListExecutions refilled at 5 a
    /// second, DescribeExecution at 15) that is over 300 times the executions a second of a
    /// lookup each; the repair loop's way of finding which orders still run.
    async fn list_running_executions(
        &self,
        next_token: Option<String>,
    ) -> Result<RunningPage, WorkflowError>;

    async fn get_execution_history(
        &self,
        execution_arn: &str,
        next_token: Option<String>,
        max_results: u32,
    ) -> Result<HistoryPage, WorkflowError>;

    async fn stop_execution(
        &self,
        execution_arn: &str,
        error: &str,
        cause: &str,
    ) -> Result<(), WorkflowError>;

    /// Step Functions' RedriveExecution: a FAILED, ABORTED or TIMED_OUT execution closed less
    /// than 14 days ago runs again from the states where it stopped, under the same ARN, input
    /// and definition; the states that had finished are not run again. `NotRedrivable` when it
    /// may not be redriven.
    async fn redrive_execution(&self, execution_arn: &str)
    -> Result<RedriveOutcome, WorkflowError>;

    /// Long-polls `activity_arn` for at most `wait`; `None` when no task came.
    async fn get_activity_task(
        &self,
        activity_arn: &str,
        worker_name: &str,
        wait: Duration,
    ) -> Result<Option<TaskHandle>, WorkflowError>;

    async fn send_task_success(
        &self,
        task_token: &str,
        output: &Value,
    ) -> Result<(), WorkflowError>;

    async fn send_task_failure(
        &self,
        task_token: &str,
        error: &str,
        cause: &str,
    ) -> Result<(), WorkflowError>;

    async fn send_task_heartbeat(&self, task_token: &str) -> Result<(), WorkflowError>;
}
