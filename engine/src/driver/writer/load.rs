//! What the writer loads: state machines (parsed once, then cached) and executions (taken from the
//! warm set the last commits left, else read from their row and snapshot), and the warm set
//! itself.

use super::timers::from_millis;
use super::{Batch, Sql, Writer};
use crate::core::snapshot;
use crate::core::{ExecInfo, ExecState, ExecutionEnd};
use crate::driver::Machine;
use crate::sfn::ExecutionStatus;
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

/// The most running executions kept warm (a few KB each); past it the set starts again empty.
const WARM_EXECUTIONS: usize = 2048;

impl Writer {
    pub(super) fn machine(&mut self, sm_arn: &str) -> Sql<Option<Arc<Machine>>> {
        if let Some(m) = self.machines.get(sm_arn) {
            return Ok(Some(m.clone()));
        }
        let Some(row) = self.store.state_machine(sm_arn)? else {
            return Ok(None);
        };
        let Ok(def) = crate::asl::parse(&row.definition) else {
            tracing::error!(state_machine = sm_arn, "stored definition no longer parses");
            return Ok(None);
        };
        let m = Arc::new(Machine {
            def,
            name: row.name,
            role_arn: row.role_arn,
        });
        self.machines.insert(sm_arn.to_owned(), m.clone());
        Ok(Some(m))
    }

    pub(super) fn load(&mut self, b: &mut Batch, exec_id: i64) -> Sql<bool> {
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
        let Some(machine) = self.machine(&row.sm_arn)? else {
            return Ok(false);
        };
        let state = match self.store.snapshot(exec_id)? {
            Some(bytes) => match snapshot::decode(&bytes) {
                Ok(s) => s,
                Err(e) => {
                    tracing::error!(execution_arn = %row.arn, error = %e, "unreadable execution snapshot");
                    return Ok(false);
                }
            },
            None => ExecState::default(),
        };
        let info = ExecInfo {
            execution_arn: row.arn.clone(),
            name: row.name.clone(),
            state_machine_arn: row.sm_arn.clone(),
            state_machine_name: machine.name.clone(),
            role_arn: machine.role_arn.clone(),
            start_time: from_millis(row.start_ms),
            input: serde_json::from_str(&row.input).unwrap_or(Value::Null),
        };
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
