//! What the audit asks of the workflow: which executions run, an execution's status, and
//! whether a parked approval token is still an open task of a running execution. Embedded:
//! read from the engine's file by the engine's read-only [`Inspector`], beside the running
//! service. AWS (any [`WorkflowPort`]): `ListExecutions` of the running ones, a thousand a
//! call, then `DescribeExecution` only for an unfinished order's execution not among them
//! (one that ended, or started after the listing), and for a token `SendTaskHeartbeat`, which succeeds
//! exactly while the task is open; Step Functions has no read-only way to ask. The heartbeat
//! only does what the service's approval keeper does to every parked token every few minutes
//! (it tells the workflow the task is still held), so it changes nothing an order depends on.

use super::AuditError;
use async_trait::async_trait;
use engine::Inspector;
use std::collections::HashSet;
use std::sync::Arc;
use workflow::{WorkflowError, WorkflowPort};

#[async_trait]
pub trait Executions: Send + Sync {
    /// The ARNs of every running execution of the saga, when listing them is cheaper than a
    /// lookup each; `None` to look each one up.
    async fn running(&self) -> Result<Option<HashSet<String>>, AuditError>;

    /// The status of the execution `arn` (`RUNNING`, `SUCCEEDED`, `FAILED`, `TIMED_OUT`,
    /// `ABORTED`); `None` when the workflow has no such execution.
    async fn status(&self, arn: &str) -> Result<Option<String>, AuditError>;

    /// Whether `token` is an open task of a running execution.
    async fn task_open(&self, token: &str) -> Result<bool, AuditError>;
}

/// The embedded engine's executions, read from its file.
pub struct EmbeddedExecutions {
    inspector: Arc<Inspector>,
}

impl EmbeddedExecutions {
    pub fn new(inspector: Inspector) -> EmbeddedExecutions {
        EmbeddedExecutions {
            inspector: Arc::new(inspector),
        }
    }

    /// Runs a read of the inspector off the runtime's threads (SQLite blocks).
    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Inspector) -> Result<T, engine::EngineError> + Send + 'static,
    ) -> Result<T, AuditError> {
        let inspector = self.inspector.clone();
        tokio::task::spawn_blocking(move || f(&inspector))
            .await
            .map_err(|e| AuditError::Executions(format!("engine read failed: {e}")))?
            .map_err(|e| AuditError::Executions(e.to_string()))
    }
}

#[async_trait]
impl Executions for EmbeddedExecutions {
    /// A lookup is a read of the local file: nothing to save.
    async fn running(&self) -> Result<Option<HashSet<String>>, AuditError> {
        Ok(None)
    }

    async fn status(&self, arn: &str) -> Result<Option<String>, AuditError> {
        let arn = arn.to_owned();
        let status = self.read(move |i| i.execution_status(&arn)).await?;
        Ok(status.map(|s| s.as_str().to_owned()))
    }

    async fn task_open(&self, token: &str) -> Result<bool, AuditError> {
        let token = token.to_owned();
        self.read(move |i| i.task_open(&token)).await
    }
}

/// The executions of a workflow service reached through its port (AWS Step Functions).
pub struct WorkflowExecutions {
    workflow: Arc<dyn WorkflowPort>,
}

impl WorkflowExecutions {
    pub fn new(workflow: Arc<dyn WorkflowPort>) -> WorkflowExecutions {
        WorkflowExecutions { workflow }
    }
}

#[async_trait]
impl Executions for WorkflowExecutions {
    /// `ListExecutions` with the RUNNING filter, page after page.
    async fn running(&self) -> Result<Option<HashSet<String>>, AuditError> {
        let mut running = HashSet::new();
        let mut next_token = None;
        loop {
            let page = self
                .workflow
                .list_running_executions(next_token)
                .await
                .map_err(|e| AuditError::Executions(e.to_string()))?;
            running.extend(page.execution_arns);
            match page.next_token {
                Some(next) => next_token = Some(next),
                None => return Ok(Some(running)),
            }
        }
    }

    async fn status(&self, arn: &str) -> Result<Option<String>, AuditError> {
        match self.workflow.describe_execution(arn).await {
            Ok(info) => Ok(Some(info.status)),
            Err(WorkflowError::ExecutionDoesNotExist(_)) => Ok(None),
            Err(e) => Err(AuditError::Executions(e.to_string())),
        }
    }

    /// `SendTaskHeartbeat`: accepted while the task is open; a dead token (its task closed,
    /// timed out, or its execution ended) is refused as timed out or unknown.
    async fn task_open(&self, token: &str) -> Result<bool, AuditError> {
        match self.workflow.send_task_heartbeat(token).await {
            Ok(()) => Ok(true),
            Err(WorkflowError::TaskTimedOut(_) | WorkflowError::InvalidToken(_)) => Ok(false),
            Err(e) => Err(AuditError::Executions(e.to_string())),
        }
    }
}
