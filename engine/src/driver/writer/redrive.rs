//! `RedriveExecution` on the writer: the eligibility check, the client token, the execution's
//! row RUNNING again with its redrive counted, the execution timeout armed afresh, and the
//! `Redrive` event handed to the interpreter, all in the batch's one transaction.

use super::load::{exec_info, machine_name};
use super::timers::{due_after, from_millis, millis};
use super::{Batch, Loaded, Sql, Writer};
use crate::core::redrive::{self, Facts};
use crate::core::{Event, snapshot};
use crate::db::TimerKind;
use crate::error::EngineError;
use chrono::{DateTime, TimeDelta, Utc};
use serde_json::Value;

/// How long a client token answers the redrive it made (AWS: 15 minutes)...
const TOKEN_LIFETIME: TimeDelta = TimeDelta::minutes(15);
/// ...among the execution's latest tokens (AWS: the last 10).
const TOKENS_KEPT: u32 = 10;

impl Writer {
    pub(super) fn redrive(
        &mut self,
        b: &mut Batch,
        arn: &str,
        client_token: Option<String>,
        now: DateTime<Utc>,
    ) -> Sql<Result<DateTime<Utc>, EngineError>> {
        let not_redrivable =
            |reason: &str| Ok(Err(EngineError::ExecutionNotRedrivable(reason.to_owned())));
        let Some(row) = self.store.execution_by_arn(arn)? else {
            return Ok(Err(EngineError::ExecutionDoesNotExist(format!(
                "Execution Does Not Exist: '{arn}'"
            ))));
        };
        let now_ms = millis(now);
        let tokens_since = millis(now - TOKEN_LIFETIME);
        if let Some(token) = &client_token
            && let Some(redriven_ms) = self.store.redrive_by_token(row.id, token, tokens_since)?
        {
            return Ok(Ok(from_millis(redriven_ms)));
        }
        let facts = Facts {
            status: row.status,
            start: from_millis(row.start_ms),
            stop: row.stop_ms.map(from_millis),
            events: self.store.last_event_id(row.id)?,
            resumable: row.has_snapshot,
        };
        if let Some(reason) = redrive::refusal(&facts, now) {
            return not_redrivable(reason);
        }
        let Some(machine) = self.machine(row.definition, machine_name(&row.sm_arn))? else {
            return not_redrivable(redrive::UNRESUMABLE);
        };
        let state = match self.store.snapshot(row.id)?.map(|s| snapshot::decode(&s)) {
            Some(Ok(state)) if !state.resume.is_empty() => state,
            _ => return not_redrivable(redrive::UNRESUMABLE),
        };
        self.store.reopen_execution(row.id, now_ms)?;
        // AWS: a redrive resets the state machine's TimeoutSeconds.
        if let Some(t) = machine.def.timeout_seconds {
            self.store
                .set_timer(row.id, TimerKind::ExecutionTimeout, "", due_after(now, t))?;
        }
        if let Some(token) = &client_token {
            self.store
                .record_redrive_token(row.id, token, now_ms, TOKENS_KEPT, tokens_since)?;
        }
        let input = serde_json::from_str(&row.input).unwrap_or(Value::Null);
        let info = exec_info(&row, &machine, input);
        b.loaded.insert(
            row.id,
            Loaded {
                arn: row.arn.clone(),
                state,
                info,
                machine,
                dirty: true,
                ended: None,
            },
        );
        b.events.push_back((row.id, Event::Redrive));
        Ok(Ok(from_millis(now_ms)))
    }
}
