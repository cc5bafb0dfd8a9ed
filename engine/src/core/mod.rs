//! The pure interpreter. [`Interpreter::apply`] takes an execution's state, one event, the time
//! and a [`Seed`] for anything random, and returns, as data, the history events to record and the
//! actions to perform. It does no I/O and reads no clock or random source: the same inputs give
//! the same output, and crash recovery is a matter of reloading the last snapshot.

mod context;
mod errors;
pub mod history;
mod machine;
pub mod redrive;
pub mod snapshot;
mod states;
#[cfg(test)]
mod tests;

pub use crate::data::random::Seed;
pub use machine::{ExecState, Frame, FrameWait};

use crate::asl::StateMachine;
use crate::sfn::{ExecutionStatus, HistoryEvent};
use chrono::{DateTime, Utc};
use serde_json::Value;

/// Fixed facts about one execution, visible through the context object.
#[derive(Debug, Clone)]
pub struct ExecInfo {
    pub execution_arn: String,
    pub name: String,
    pub state_machine_arn: String,
    pub state_machine_name: String,
    pub role_arn: String,
    /// The version it was started on, by its ARN or through an alias.
    pub state_machine_version_arn: Option<String>,
    /// The alias it was started through.
    pub state_machine_alias_arn: Option<String>,
    pub start_time: DateTime<Utc>,
    pub input: Value,
}

/// Why a task stopped waiting without an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutKind {
    /// `TimeoutSeconds` passed → `States.Timeout`.
    Task,
    /// No heartbeat within `HeartbeatSeconds` → `States.HeartbeatTimeout`.
    Heartbeat,
}

/// Something that happened to an execution.
#[derive(Debug, Clone)]
pub enum Event {
    Start,
    /// An activity worker took the task.
    TaskStarted {
        token: String,
        worker_name: Option<String>,
    },
    TaskSucceeded {
        token: String,
        output: Value,
    },
    TaskFailed {
        token: String,
        error: Option<String>,
        cause: Option<String>,
    },
    TaskTimedOut {
        token: String,
        kind: TimeoutKind,
    },
    TimerFired {
        timer_id: u64,
    },
    ExecutionTimedOut,
    Stop {
        error: Option<String>,
        cause: Option<String>,
    },
    /// `RedriveExecution`: a FAILED, ABORTED or TIMED_OUT execution runs again from where it
    /// stopped (see [`redrive`]).
    Redrive,
}

/// A task the interpreter scheduled, which the driver must make available (activity queue or
/// in-process handler). Not the Task state's definition: that is [`crate::asl::TaskSpec`].
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduledTask {
    pub token: String,
    pub resource: String,
    pub state_name: String,
    pub input: Value,
    pub timeout_seconds: Option<u64>,
    pub heartbeat_seconds: Option<u64>,
}

/// What the driver must do once the step is committed.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    ScheduleTask(ScheduledTask),
    /// The task is over (answered, timed out, or its branch was abandoned): its token is dead.
    CloseTask {
        token: String,
    },
    /// The heartbeat clock of an activity task starts when a worker takes it.
    StartHeartbeat {
        token: String,
        heartbeat_seconds: u64,
    },
    StartTimer {
        timer_id: u64,
        due: DateTime<Utc>,
    },
    CancelTimer {
        timer_id: u64,
    },
    Finish(ExecutionEnd),
}

/// How an execution ended: its final status, and its output or error.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionEnd {
    pub status: ExecutionStatus,
    pub output: Option<Value>,
    pub error: Option<String>,
    pub cause: Option<String>,
}

/// What applying one event produced: the history events to record and the actions to take, in
/// order. (Not a saga step: those are `workflow`'s.)
#[derive(Debug, Default)]
pub struct Applied {
    pub events: Vec<HistoryEvent>,
    pub actions: Vec<Action>,
}

/// The interpreter for one execution: its definition and fixed facts.
pub struct Interpreter<'a> {
    pub definition: &'a StateMachine,
    pub info: &'a ExecInfo,
    /// Whether a `Resource` names an activity of this engine (activity tasks get `Activity*`
    /// history events and go to the activity queue).
    pub is_activity: &'a dyn Fn(&str) -> bool,
}

impl Interpreter<'_> {
    /// Applies one event at time `now`, drawing whatever it needs at random (task tokens, retry
    /// jitter, `States.UUID`, an unseeded `States.MathRandom`) from `seed`: the same state, event,
    /// time and seed give the same result. An event that no longer concerns the execution (a
    /// stale token, a cancelled timer, anything after the end) changes nothing.
    pub fn apply(
        &self,
        state: &mut ExecState,
        event: Event,
        now: DateTime<Utc>,
        seed: Seed,
    ) -> Applied {
        let mut run = machine::Run::new(self, state, now, seed);
        run.handle(event);
        run.finish()
    }
}
