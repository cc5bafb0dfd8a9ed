//! Scenario tests of the pure interpreter: a definition, an input and a sequence of events in,
//! history drafts and actions out. [`Harness`] plays the driver: it keeps the `ExecState`,
//! controls the clock, gives every step a seed, and answers tasks and timers with the tokens and
//! ids the interpreter handed out.

mod choice;
mod determinism;
mod history;
mod map;
mod parallel;
mod pass;
mod properties;
mod redrive;
mod retry_catch;
mod task;
mod terminal;
mod timeouts;
mod variables;
mod wait;

use super::snapshot;
use super::{
    Action, Applied, Event, ExecInfo, ExecState, ExecutionEnd, Interpreter, ScheduledTask, Seed,
    TimeoutKind,
};
use crate::asl::{self, StateMachine};
use crate::sfn::{ExecutionStatus, HistoryEvent};
use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use serde_json::{Value, json};
use std::collections::BTreeSet;

pub const ACTIVITY: &str = "arn:aws:states:us-east-1:123456789012:activity:work";
pub const LAMBDA: &str = "arn:aws:lambda:us-east-1:123456789012:function:fn";
pub const SERVICE: &str = "arn:aws:states:::sqs:sendMessage";

/// The time every harness starts at.
pub fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2024, 1, 1, 0, 0, 0).unwrap()
}

pub struct Harness {
    pub definition: StateMachine,
    pub info: ExecInfo,
    pub state: ExecState,
    pub now: DateTime<Utc>,
    /// Every history event recorded so far.
    pub events: Vec<HistoryEvent>,
    /// Every action, in order.
    pub actions: Vec<Action>,
    /// The output of the last `apply`.
    pub last: Applied,
    /// Pass the `ExecState` through its snapshot before every event (a restart from the snapshot).
    pub roundtrip: bool,
    /// Mixed into every step's seed: harnesses with different salts draw different tokens.
    pub salt: u64,
    /// Every step applied so far, with the inputs it was given.
    pub log: Vec<Logged>,
    fired: BTreeSet<u64>,
    /// Actions before this index belong to runs a redrive has since resumed.
    run_from: usize,
}

/// One step the harness applied: the event with its time and seed, and the state it left.
#[derive(Debug, Clone)]
pub struct Logged {
    pub event: Event,
    pub now: DateTime<Utc>,
    pub seed: Seed,
    /// The `ExecState` after the step, as its snapshot.
    pub state_after: Vec<u8>,
}

impl Harness {
    pub fn new(definition: Value, input: Value) -> Self {
        let definition = asl::parse(&definition.to_string()).unwrap_or_else(|e| panic!("{e}"));
        let info = ExecInfo {
            execution_arn: "arn:aws:states:us-east-1:123456789012:execution:sm:ex".to_owned(),
            name: "ex".to_owned(),
            state_machine_arn: "arn:aws:states:us-east-1:123456789012:stateMachine:sm".to_owned(),
            state_machine_name: "sm".to_owned(),
            role_arn: "arn:aws:iam::123456789012:role/r".to_owned(),
            state_machine_version_arn: None,
            state_machine_alias_arn: None,
            start_time: t0(),
            input,
        };
        Harness {
            definition,
            info,
            state: ExecState::default(),
            now: t0(),
            events: Vec::new(),
            actions: Vec::new(),
            last: Applied::default(),
            roundtrip: false,
            salt: 0,
            log: Vec::new(),
            fired: BTreeSet::new(),
            run_from: 0,
        }
    }

    /// Applies one event at the current time, with a seed of its own, and records what it
    /// produced.
    pub fn apply(&mut self, event: Event) -> &Applied {
        // Distinct per step (and per salt), so tokens of different steps differ as in the driver.
        let mut seed = [0u8; 32];
        seed[..8].copy_from_slice(&self.salt.to_le_bytes());
        seed[8..16].copy_from_slice(&(self.log.len() as u64).to_le_bytes());
        self.apply_with(event, self.now, Seed(seed))
    }

    /// Applies one event at `now` with `seed`, and records what it produced.
    pub fn apply_with(&mut self, event: Event, now: DateTime<Utc>, seed: Seed) -> &Applied {
        if self.roundtrip {
            let bytes = snapshot::encode(&self.state);
            self.state = snapshot::decode(&bytes).expect("the snapshot decodes");
        }
        let is_activity = |r: &str| r.contains(":activity:");
        let it = Interpreter {
            definition: &self.definition,
            info: &self.info,
            is_activity: &is_activity,
        };
        let step = it.apply(&mut self.state, event.clone(), now, seed);
        self.log.push(Logged {
            event,
            now,
            seed,
            state_after: snapshot::encode(&self.state),
        });
        self.events.extend(step.events.iter().cloned());
        self.actions.extend(step.actions.iter().cloned());
        self.last = step;
        &self.last
    }

    pub fn start(&mut self) -> &Applied {
        self.apply(Event::Start)
    }

    /// Redrives the execution: what it did before stays in `events` and `actions`, and its
    /// outcome is the next one.
    pub fn redrive(&mut self) -> &Applied {
        self.run_from = self.actions.len();
        self.apply(Event::Redrive)
    }

    pub fn advance(&mut self, seconds: i64) {
        self.now += TimeDelta::seconds(seconds);
    }

    // ---- tasks ----------------------------------------------------------------------------

    /// Every task scheduled so far, in order.
    pub fn scheduled(&self) -> Vec<ScheduledTask> {
        self.actions
            .iter()
            .filter_map(|a| match a {
                Action::ScheduleTask(t) => Some(t.clone()),
                _ => None,
            })
            .collect()
    }

    /// Tokens closed so far.
    pub fn closed(&self) -> BTreeSet<String> {
        self.actions
            .iter()
            .filter_map(|a| match a {
                Action::CloseTask { token } => Some(token.clone()),
                _ => None,
            })
            .collect()
    }

    /// Scheduled tasks not closed yet, in scheduling order.
    pub fn open_tasks(&self) -> Vec<ScheduledTask> {
        let closed = self.closed();
        self.scheduled()
            .into_iter()
            .filter(|t| !closed.contains(&t.token))
            .collect()
    }

    /// The only open task (panics when there are none or several).
    pub fn task(&self) -> ScheduledTask {
        let open = self.open_tasks();
        assert_eq!(open.len(), 1, "expected exactly one open task: {open:#?}");
        open.into_iter().next().unwrap()
    }

    /// The open task of state `name` (panics unless there is exactly one).
    pub fn task_of(&self, name: &str) -> ScheduledTask {
        let open: Vec<_> = self
            .open_tasks()
            .into_iter()
            .filter(|t| t.state_name == name)
            .collect();
        assert_eq!(open.len(), 1, "expected one open task of {name}: {open:#?}");
        open.into_iter().next().unwrap()
    }

    pub fn token(&self) -> String {
        self.task().token
    }

    pub fn start_task(&mut self, worker: &str) -> &Applied {
        let token = self.token();
        self.apply(Event::TaskStarted {
            token,
            worker_name: Some(worker.to_owned()),
        })
    }

    pub fn succeed_task(&mut self, output: Value) -> &Applied {
        let token = self.token();
        self.succeed_token(token, output)
    }

    pub fn succeed_token(&mut self, token: String, output: Value) -> &Applied {
        self.apply(Event::TaskSucceeded { token, output })
    }

    pub fn fail_task(&mut self, error: &str, cause: &str) -> &Applied {
        let token = self.token();
        self.fail_token(token, error, cause)
    }

    pub fn fail_token(&mut self, token: String, error: &str, cause: &str) -> &Applied {
        self.apply(Event::TaskFailed {
            token,
            error: Some(error.to_owned()),
            cause: Some(cause.to_owned()),
        })
    }

    pub fn time_out_task(&mut self, kind: TimeoutKind) -> &Applied {
        let token = self.token();
        self.apply(Event::TaskTimedOut { token, kind })
    }

    // ---- timers ---------------------------------------------------------------------------

    /// Timers started and neither cancelled nor fired, as `(id, due)`, in start order.
    pub fn pending_timers(&self) -> Vec<(u64, DateTime<Utc>)> {
        let mut pending: Vec<(u64, DateTime<Utc>)> = Vec::new();
        for a in &self.actions {
            match a {
                Action::StartTimer { timer_id, due } => pending.push((*timer_id, *due)),
                Action::CancelTimer { timer_id } => pending.retain(|(t, _)| t != timer_id),
                _ => {}
            }
        }
        let fired = &self.fired;
        pending.retain(|(t, _)| !fired.contains(t));
        pending
    }

    /// The only pending timer.
    pub fn timer(&self) -> (u64, DateTime<Utc>) {
        let pending = self.pending_timers();
        assert_eq!(pending.len(), 1, "expected exactly one pending timer");
        pending[0]
    }

    /// Moves the clock to the only pending timer's due time and fires it.
    pub fn fire_timer(&mut self) -> &Applied {
        let (id, due) = self.timer();
        if due > self.now {
            self.now = due;
        }
        self.fire(id)
    }

    pub fn fire(&mut self, timer_id: u64) -> &Applied {
        self.fired.insert(timer_id);
        self.apply(Event::TimerFired { timer_id })
    }

    // ---- results --------------------------------------------------------------------------

    pub fn outcome(&self) -> Option<ExecutionEnd> {
        self.actions[self.run_from..].iter().find_map(|a| match a {
            Action::Finish(o) => Some(o.clone()),
            _ => None,
        })
    }

    pub fn status(&self) -> ExecutionStatus {
        self.outcome()
            .map(|o| o.status)
            .unwrap_or(ExecutionStatus::Running)
    }

    /// The output of a succeeded execution (panics otherwise).
    pub fn output(&self) -> Value {
        let o = self.outcome().expect("execution finished");
        assert_eq!(o.status, ExecutionStatus::Succeeded, "outcome: {o:?}");
        o.output.expect("succeeded with output")
    }

    /// `(error, cause)` of a failed execution (panics otherwise).
    pub fn failure(&self) -> (Option<String>, Option<String>) {
        let o = self.outcome().expect("execution finished");
        assert_eq!(o.status, ExecutionStatus::Failed, "outcome: {o:?}");
        (o.error, o.cause)
    }

    pub fn error(&self) -> String {
        self.failure().0.unwrap_or_default()
    }

    pub fn event_types(&self) -> Vec<&str> {
        self.events.iter().map(|e| e.event_type.as_str()).collect()
    }

    /// Events of one type, in order.
    pub fn events_of(&self, event_type: &str) -> Vec<&HistoryEvent> {
        self.events
            .iter()
            .filter(|e| e.event_type == event_type)
            .collect()
    }

    /// Details of the first event of a type.
    pub fn details(&self, event_type: &str) -> Value {
        self.events_of(event_type)
            .first()
            .unwrap_or_else(|| panic!("no {event_type} event in {:?}", self.event_types()))
            .details
            .clone()
            .unwrap_or(Value::Null)
    }

    /// The parsed JSON text of a payload field (`input`, `output`, …) of the first event of a type.
    pub fn payload(&self, event_type: &str, field: &str) -> Value {
        let details = self.details(event_type);
        let text = details[field]
            .as_str()
            .unwrap_or_else(|| panic!("{event_type} has no text field {field}: {details}"));
        serde_json::from_str(text).expect("payload is JSON text")
    }
}

/// A one-state machine.
pub fn single(state: Value) -> Value {
    json!({"StartAt": "S", "States": {"S": state}})
}

/// A machine with a single Task state on `resource` plus `extra` fields.
pub fn task_machine(resource: &str, extra: Value) -> Value {
    let mut state = json!({"Type": "Task", "Resource": resource, "End": true});
    merge(&mut state, extra);
    single(state)
}

/// Shallow-merges the fields of `extra` into `target`.
pub fn merge(target: &mut Value, extra: Value) {
    if let (Value::Object(t), Value::Object(e)) = (target, extra) {
        t.extend(e);
    }
}
