//! A read-only look into an engine's SQLite file from outside the engine: what
//! `fulfillment audit` asks of the embedded backend while the service runs in another process.
//! It opens the file read-only (WAL lets it read beside the engine's writer, which it never
//! blocks) and answers from what the engine has committed.

use crate::db::{Store, TaskStatus};
use crate::error::EngineError;
use crate::sfn::ExecutionStatus;
use std::path::Path;
use std::sync::Mutex;

/// A read-only view of an engine's state. Every call is one short read on its own connection;
/// it blocks, so call it off the async runtime's threads (`spawn_blocking`).
pub struct Inspector {
    store: Mutex<Store>,
}

impl std::fmt::Debug for Inspector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inspector").finish_non_exhaustive()
    }
}

impl Inspector {
    /// Opens the engine file at `path`, which must exist and hold this build's schema.
    pub fn open(path: impl AsRef<Path>) -> Result<Inspector, EngineError> {
        let store = Store::open_read_only(path.as_ref()).map_err(EngineError::storage)?;
        Ok(Inspector {
            store: Mutex::new(store),
        })
    }

    fn store(&self) -> std::sync::MutexGuard<'_, Store> {
        // A panic during a read leaves nothing half-done: the connection only reads.
        self.store
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The status of the execution `arn`; `None` when the engine has no such execution.
    pub fn execution_status(&self, arn: &str) -> Result<Option<ExecutionStatus>, EngineError> {
        let row = self
            .store()
            .execution_by_arn(arn)
            .map_err(EngineError::storage)?;
        Ok(row.map(|r| r.status))
    }

    /// Whether `token` is the token of a task still open (scheduled or handed out, not yet
    /// answered or timed out) in a `RUNNING` execution: a token an answer can still reach.
    /// A task whose timeout has passed while the engine was down stays open here until the
    /// engine, running again, fires the timeout.
    pub fn task_open(&self, token: &str) -> Result<bool, EngineError> {
        let store = self.store();
        let Some(task) = store.task(token).map_err(EngineError::storage)? else {
            return Ok(false);
        };
        if task.status == TaskStatus::Closed {
            return Ok(false);
        }
        let execution = store
            .execution_by_id(task.exec_id)
            .map_err(EngineError::storage)?;
        Ok(execution.is_some_and(|e| e.status == ExecutionStatus::Running))
    }
}
