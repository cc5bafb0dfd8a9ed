//! What the writer loads: state machines (parsed once, then cached) and executions (from the warm
//! set the last commits left, else from their row and snapshot; one whose snapshot cannot be read
//! is failed), and the warm set itself.

use super::timers::{from_millis, millis};
use super::{Batch, Sql, Writer};
use crate::core::history;
use crate::core::snapshot::{self, SnapshotError};
use crate::core::{ExecInfo, ExecState, ExecutionEnd};
use crate::db::ExecutionRow;
use crate::driver::Machine;
use crate::sfn::{ExecutionStatus, HistoryEvent};
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// An execution loaded into the current batch.
pub(super) struct Loaded {
    pub(super) arn: String,
    pub(super) state: ExecState,
    pub(super) info: ExecInfo,
    pub(super) machine: Arc<Machine>,
    pub(super) dirty: bool,
    pub(super) ended: Option<ExecutionEnd>,
}

/// The fixed facts of an execution, from its row and machine (`input` parsed from the row's).
pub(super) fn exec_info(row: &ExecutionRow, machine: &Machine, input: Value) -> ExecInfo {
    ExecInfo {
        execution_arn: row.arn.clone(),
        name: row.name.clone(),
        state_machine_arn: row.sm_arn.clone(),
        state_machine_name: machine.name.clone(),
        role_arn: machine.role_arn.clone(),
        state_machine_version_arn: row.version_arn(),
        state_machine_alias_arn: row.alias_arn(),
        start_time: from_millis(row.start_ms),
        input,
    }
}

/// The name in a machine's ARN.
pub(super) fn machine_name(sm_arn: &str) -> &str {
    sm_arn.rsplit_once(':').map_or(sm_arn, |(_, name)| name)
}

/// The error an execution whose snapshot cannot be read fails with: the engine's own runtime
/// error, which no Retry or Catch sees.
const UNREADABLE_ERROR: &str = "States.Runtime";

/// The most running executions kept warm (a few KB each); past it the set starts again empty.
const WARM_EXECUTIONS: usize = 2048;

impl Writer {
    /// The parsed revision `definition` of the machine named `name` (revisions never change,
    /// so a parsed one is kept for good).
    pub(super) fn machine(&mut self, definition: i64, name: &str) -> Sql<Option<Arc<Machine>>> {
        if let Some(m) = self.machines.get(&definition) {
            return Ok(Some(m.clone()));
        }
        let Some(row) = self.store.definition(definition)? else {
            return Ok(None);
        };
        let Ok(def) = crate::asl::parse(&row.body) else {
            tracing::error!(
                state_machine = name,
                definition,
                "stored definition no longer parses"
            );
            return Ok(None);
        };
        let m = Arc::new(Machine {
            def,
            name: name.to_owned(),
            role_arn: row.role_arn,
        });
        self.machines.insert(definition, m.clone());
        Ok(Some(m))
    }

    /// Loads a running execution into the batch; `false` when there is none to run (it ended,
    /// its machine is gone, or its snapshot was unreadable, which fails it here).
    pub(super) fn load(&mut self, b: &mut Batch, exec_id: i64, now: DateTime<Utc>) -> Sql<bool> {
        if b.loaded.contains_key(&exec_id) {
            return Ok(true);
        }
        if let Some(warm) = self.warm.remove(&exec_id) {
            b.loaded.insert(exec_id, warm);
            return Ok(true);
        }
        let Some(row) = self.store.execution_by_id(exec_id)? else {
            return Ok(false);
        };
        if row.status != ExecutionStatus::Running {
            return Ok(false);
        }
        let Some(machine) = self.machine(row.definition, machine_name(&row.sm_arn))? else {
            return Ok(false);
        };
        let state = match self.store.snapshot(exec_id)? {
            Some(bytes) => match snapshot::decode(&bytes) {
                Ok(s) => s,
                Err(e) => {
                    self.fail_unreadable(b, &row, &e, now)?;
                    return Ok(false);
                }
            },
            None => ExecState::default(),
        };
        let input = serde_json::from_str(&row.input).unwrap_or(Value::Null);
        let info = exec_info(&row, &machine, input);
        b.loaded.insert(
            exec_id,
            Loaded {
                arn: row.arn,
                state,
                info,
                machine,
                dirty: false,
                ended: None,
            },
        );
        Ok(true)
    }

    /// Ends an execution whose snapshot cannot be read: FAILED with `States.Runtime`, recorded in
    /// its history, its tasks closed and its timers dropped. Left RUNNING it would never move
    /// again (every event for it would find no state to apply to), and nobody would be told.
    fn fail_unreadable(
        &mut self,
        b: &mut Batch,
        row: &ExecutionRow,
        error: &SnapshotError,
        now: DateTime<Utc>,
    ) -> Sql<()> {
        tracing::error!(execution_arn = %row.arn, error = %error, "unreadable execution snapshot; failing the execution");
        // The decoder's words stay in the log, as for an interpreter panic: a cause may be shown
        // further than to the engine's operators.
        let cause = "The engine could not read this execution's stored state (its snapshot); the \
                     execution cannot continue. See the engine log.";
        let last = self.store.last_event_id(row.id)?;
        let failed = HistoryEvent {
            id: last + 1,
            previous_event_id: last,
            timestamp: now,
            event_type: "ExecutionFailed".to_owned(),
            details: Some(history::error_details(Some(UNREADABLE_ERROR), Some(cause))),
        };
        self.store.append_events(row.id, &[failed])?;
        self.store.delete_timers_of(row.id)?;
        self.store.close_tasks_of(row.id, millis(now))?;
        self.store.close_execution(
            row.id,
            ExecutionStatus::Failed,
            None,
            Some(UNREADABLE_ERROR),
            Some(cause),
            millis(now),
            None,
        )?;
        b.finished.push(row.arn.clone());
        Ok(())
    }

    /// Keeps the executions a committed batch leaves running for the next batches.
    pub(super) fn keep_warm(&mut self, loaded: HashMap<i64, Loaded>) {
        for (id, l) in loaded {
            if l.ended.is_some() {
                continue;
            }
            if self.warm.len() >= WARM_EXECUTIONS {
                self.warm.clear();
            }
            self.warm.insert(id, l);
        }
    }
}
