//! The durable driver: owns the SQLite store, feeds events to the pure interpreter, commits what
//! it decides in grouped transactions, and only then acts (hands out tasks, arms timers, answers).

use crate::api::*;
use crate::error::EngineError;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How hard a commit is pushed to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyncPolicy {
    /// `synchronous=FULL`: a commit survives power loss (the default).
    #[default]
    Full,
    /// `synchronous=NORMAL` in WAL mode: survives a process crash, may lose the last commits on
    /// power loss.
    Normal,
}

#[derive(Debug, Clone)]
pub struct EngineConfig {
    pub db_path: PathBuf,
    /// Region in the ARNs the engine makes. Default `us-east-1`.
    pub region: String,
    /// Account id in the ARNs. Default `123456789012`.
    pub account_id: String,
    pub sync: SyncPolicy,
    /// The most events one grouped commit takes. Default 4096.
    pub max_batch: usize,
}

impl EngineConfig {
    pub fn new(db_path: impl Into<PathBuf>) -> Self {
        EngineConfig {
            db_path: db_path.into(),
            region: "us-east-1".to_owned(),
            account_id: "123456789012".to_owned(),
            sync: SyncPolicy::Full,
            max_batch: 4096,
        }
    }
}

/// A handle to a running engine. Cheap to clone.
#[derive(Clone)]
pub struct Engine {
    _inner: Arc<()>,
}

impl Engine {
    /// Opens (creating if needed) the database and resumes every running execution.
    /// `task_handler` runs Task states whose resource is not an activity ARN.
    pub async fn open(
        config: EngineConfig,
        task_handler: Option<Arc<dyn TaskHandler>>,
    ) -> Result<Engine, EngineError> {
        let _ = (config, task_handler);
        todo!()
    }

    /// Creates a STANDARD state machine. The same name with the same definition returns the
    /// existing one; a different definition is `StateMachineAlreadyExists`.
    pub async fn create_state_machine(
        &self,
        name: &str,
        definition: &str,
        role_arn: Option<&str>,
    ) -> Result<StateMachineInfo, EngineError> {
        let _ = (name, definition, role_arn);
        todo!()
    }

    /// Creates an activity (idempotent by name).
    pub async fn create_activity(&self, name: &str) -> Result<ActivityInfo, EngineError> {
        let _ = name;
        todo!()
    }

    pub async fn start_execution(
        &self,
        input: StartExecutionInput,
    ) -> Result<StartExecutionOutput, EngineError> {
        let _ = input;
        todo!()
    }

    pub async fn describe_execution(&self, arn: &str) -> Result<ExecutionDescription, EngineError> {
        let _ = arn;
        todo!()
    }

    /// Waits until the execution is no longer RUNNING, or `timeout` passes (then returns its
    /// current description).
    pub async fn wait_for_completion(
        &self,
        arn: &str,
        timeout: Duration,
    ) -> Result<ExecutionDescription, EngineError> {
        let _ = (arn, timeout);
        todo!()
    }

    pub async fn get_execution_history(
        &self,
        input: GetExecutionHistoryInput,
    ) -> Result<GetExecutionHistoryOutput, EngineError> {
        let _ = input;
        todo!()
    }

    /// Long-polls for a task of `activity_arn` for at most `wait`; `None` when there was none.
    pub async fn get_activity_task(
        &self,
        activity_arn: &str,
        worker_name: Option<&str>,
        wait: Duration,
    ) -> Result<Option<ActivityTask>, EngineError> {
        let _ = (activity_arn, worker_name, wait);
        todo!()
    }

    pub async fn send_task_success(&self, token: &str, output: &str) -> Result<(), EngineError> {
        let _ = (token, output);
        todo!()
    }

    pub async fn send_task_failure(
        &self,
        token: &str,
        error: Option<&str>,
        cause: Option<&str>,
    ) -> Result<(), EngineError> {
        let _ = (token, error, cause);
        todo!()
    }

    pub async fn send_task_heartbeat(&self, token: &str) -> Result<(), EngineError> {
        let _ = token;
        todo!()
    }

    pub async fn shutdown(&self) {
        todo!()
    }
}
