//! A small driver for the pure interpreter running the saga definition: it keeps the
//! `ExecState`, a virtual clock, the retry timers, and answers tasks the way the saga's workers
//! do (the release step hands the original failure on as `{"error","cause"}`).

use chrono::{DateTime, TimeDelta, TimeZone, Utc};
use engine::asl::StateMachine;
use engine::core::{
    Action, Applied, Event, ExecInfo, ExecState, ExecutionEnd, Interpreter, ScheduledTask, Seed,
    TimeoutKind,
};
use engine::{ExecutionStatus, HistoryEvent};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::LazyLock;
use workflow::definition::{Activity, activity_substitutions, render};

/// The approval window and heartbeat the harness's input asks for (as the service's settings
/// would), distinct from every literal in the definition.
pub const APPROVAL_TIMEOUT: u64 = 7_200;
pub const APPROVAL_HEARTBEAT: u64 = 45;

/// The forward task states, in the order the registry lists them.
pub fn forward() -> [&'static str; Activity::FORWARD.len()] {
    Activity::FORWARD.map(Activity::state)
}

/// The compensation task states, in the order they run.
pub fn compensations() -> [&'static str; Activity::COMPENSATIONS.len()] {
    Activity::COMPENSATIONS.map(Activity::state)
}

static RENDERED: LazyLock<String> = LazyLock::new(|| {
    render(&activity_substitutions(|name| {
        format!("arn:aws:states:us-east-1:123456789012:activity:{name}")
    }))
    .expect("the definition renders")
});

static DEFINITION: LazyLock<Value> =
    LazyLock::new(|| serde_json::from_str(&RENDERED).expect("the definition is JSON"));

/// An execution input as order intake makes it.
pub fn input(large: bool) -> Value {
    json!({
        "orderId": "o-1",
        "amountCents": if large { 250_000 } else { 2_500 },
        "currency": "EUR",
        "requiresApproval": large,
        "approvalTimeoutSeconds": APPROVAL_TIMEOUT,
        "approvalHeartbeatSeconds": APPROVAL_HEARTBEAT,
        "approvalWindowSeconds": APPROVAL_TIMEOUT - 2 * APPROVAL_HEARTBEAT,
    })
}

pub fn is_timeout(error: &str) -> bool {
    matches!(error, "States.Timeout" | "States.HeartbeatTimeout")
}

/// The error the execution records for a fault the harness names `error`: a lapsed heartbeat
/// (`States.HeartbeatTimeout`, the name only Retry and Catch use) is recorded as
/// `States.Timeout`, as AWS does.
pub fn recorded(error: &str) -> &str {
    if is_timeout(error) {
        "States.Timeout"
    } else {
        error
    }
}

/// The cause the harness reports with `error` (timeouts have none; the release step hands on
/// an empty one).
pub fn cause_of(error: &str) -> String {
    if is_timeout(error) {
        String::new()
    } else {
        format!("cause of {error}")
    }
}

/// What a Catch's ResultPath receives for `error` as the harness reports it.
pub fn catch_output(error: &str) -> Value {
    if is_timeout(error) {
        json!({"Error": error})
    } else {
        json!({"Error": error, "Cause": cause_of(error)})
    }
}

/// The activity name serving a task state.
pub fn activity_of(state: &str) -> &'static str {
    Activity::of_state(state)
        .unwrap_or_else(|| panic!("no activity for {state}"))
        .name()
}

/// A retrier of the definition, as written (defaults filled in as ASL defines them).
#[derive(Debug, Clone, PartialEq)]
pub struct Retrier {
    pub interval_seconds: f64,
    pub max_attempts: u32,
    pub backoff_rate: f64,
    pub max_delay_seconds: Option<f64>,
}

impl Retrier {
    /// The longest delay before retry number `attempt + 1` (FULL jitter draws below it).
    pub fn bound(&self, attempt: u32) -> f64 {
        let raw = self.interval_seconds * self.backoff_rate.powi(attempt as i32);
        self.max_delay_seconds.map_or(raw, |m| raw.min(m))
    }
}

/// The retrier of `state` that `error` meets first, if it allows any attempt.
pub fn retrier(state: &str, error: &str) -> Option<Retrier> {
    let retriers = DEFINITION["States"][state]["Retry"].as_array()?;
    let r = retriers.iter().find(|r| {
        r["ErrorEquals"].as_array().unwrap().iter().any(|e| {
            let e = e.as_str().unwrap();
            e == error
                || e == "States.ALL"
                // A lapsed heartbeat is recorded as `States.Timeout`, which TaskFailed skips.
                || (e == "States.TaskFailed" && !is_timeout(error))
                || (e == "States.Timeout" && error == "States.HeartbeatTimeout")
        })
    })?;
    let retrier = Retrier {
        interval_seconds: r["IntervalSeconds"].as_f64().unwrap_or(1.0),
        max_attempts: r["MaxAttempts"].as_u64().unwrap_or(3) as u32,
        backoff_rate: r["BackoffRate"].as_f64().unwrap_or(2.0),
        max_delay_seconds: r["MaxDelaySeconds"].as_f64(),
    };
    (retrier.max_attempts > 0).then_some(retrier)
}

/// A timer the interpreter started.
#[derive(Debug, Clone, Copy)]
pub struct Timer {
    pub id: u64,
    pub due: DateTime<Utc>,
    pub set_at: DateTime<Utc>,
}

pub struct Execution {
    definition: StateMachine,
    info: ExecInfo,
    state: ExecState,
    pub now: DateTime<Utc>,
    events: Vec<HistoryEvent>,
    actions: Vec<Action>,
    timers: Vec<Timer>,
    done_timers: BTreeSet<u64>,
    started: BTreeSet<String>,
    /// Steps applied so far: each gets its own seed, so tokens of different steps differ.
    applied: u64,
}

impl Execution {
    /// Starts an execution of the saga with `input` at a fixed virtual time.
    pub fn start(input: Value) -> Execution {
        let t0 = Utc.with_ymd_and_hms(2024, 1, 1, 0, 0, 0).unwrap();
        let definition = engine::asl::parse(&RENDERED).expect("the definition validates");
        let info = ExecInfo {
            execution_arn:
                "arn:aws:states:us-east-1:123456789012:execution:fulfillment-order-saga:o-1"
                    .to_owned(),
            name: "o-1".to_owned(),
            state_machine_arn:
                "arn:aws:states:us-east-1:123456789012:stateMachine:fulfillment-order-saga"
                    .to_owned(),
            state_machine_name: "fulfillment-order-saga".to_owned(),
            role_arn: "arn:aws:iam::123456789012:role/fulfillment".to_owned(),
            state_machine_version_arn: None,
            state_machine_alias_arn: None,
            start_time: t0,
            input,
        };
        let mut x = Execution {
            definition,
            info,
            state: ExecState::default(),
            now: t0,
            events: Vec::new(),
            actions: Vec::new(),
            timers: Vec::new(),
            done_timers: BTreeSet::new(),
            started: BTreeSet::new(),
            applied: 0,
        };
        x.apply(Event::Start);
        x
    }

    /// Applies one event at the current virtual time and records what it produced.
    pub fn apply(&mut self, event: Event) -> Applied {
        let is_activity = |r: &str| r.contains(":activity:");
        let it = Interpreter {
            definition: &self.definition,
            info: &self.info,
            is_activity: &is_activity,
        };
        self.applied += 1;
        let step = it.apply(
            &mut self.state,
            event,
            self.now,
            Seed::from_u64(self.applied),
        );
        for a in &step.actions {
            match a {
                Action::StartTimer { timer_id, due } => self.timers.push(Timer {
                    id: *timer_id,
                    due: *due,
                    set_at: self.now,
                }),
                Action::CancelTimer { timer_id } => {
                    self.done_timers.insert(*timer_id);
                }
                _ => {}
            }
        }
        self.events.extend(step.events.iter().cloned());
        self.actions.extend(step.actions.iter().cloned());
        step
    }

    /// Moves the virtual clock on.
    pub fn advance(&mut self, seconds: i64) {
        self.now += TimeDelta::seconds(seconds);
    }

    // ---- tasks ----------------------------------------------------------------------------

    pub fn scheduled(&self) -> Vec<ScheduledTask> {
        self.actions
            .iter()
            .filter_map(|a| match a {
                Action::ScheduleTask(t) => Some(t.clone()),
                _ => None,
            })
            .collect()
    }

    /// Every task scheduled for `state` (one per attempt).
    pub fn scheduled_of(&self, state: &str) -> Vec<ScheduledTask> {
        self.scheduled()
            .into_iter()
            .filter(|t| t.state_name == state)
            .collect()
    }

    pub fn open_tasks(&self) -> Vec<ScheduledTask> {
        let closed: BTreeSet<&str> = self
            .actions
            .iter()
            .filter_map(|a| match a {
                Action::CloseTask { token } => Some(token.as_str()),
                _ => None,
            })
            .collect();
        self.scheduled()
            .into_iter()
            .filter(|t| !closed.contains(t.token.as_str()))
            .collect()
    }

    /// The one open task, which must be `state`'s.
    pub fn task(&self, state: &str) -> ScheduledTask {
        let open = self.open_tasks();
        assert_eq!(
            open.iter()
                .map(|t| t.state_name.as_str())
                .collect::<Vec<_>>(),
            [state],
            "expected the one open task to be {state}'s; entered {:?}, outcome {:?}",
            self.entered(),
            self.outcome()
        );
        open.into_iter().next().unwrap()
    }

    /// A worker takes `state`'s task (once); returns the actions that produced.
    pub fn take(&mut self, state: &str) -> Vec<Action> {
        let token = self.task(state).token;
        if !self.started.insert(token.clone()) {
            return Vec::new();
        }
        self.apply(Event::TaskStarted {
            token,
            worker_name: Some(format!("{}-worker", activity_of(state))),
        })
        .actions
    }

    pub fn succeed(&mut self, state: &str, output: Value) {
        self.take(state);
        self.advance(1);
        let token = self.task(state).token;
        self.succeed_token(&token, output);
    }

    pub fn succeed_token(&mut self, token: &str, output: Value) -> Applied {
        self.apply(Event::TaskSucceeded {
            token: token.to_owned(),
            output,
        })
    }

    pub fn fail_token(&mut self, token: &str, error: &str) -> Applied {
        self.apply(Event::TaskFailed {
            token: token.to_owned(),
            error: Some(error.to_owned()),
            cause: Some(cause_of(error)),
        })
    }

    /// `state`'s task ends in `error`: `States.Timeout` / `States.HeartbeatTimeout` are the
    /// driver timing it out, anything else a worker's `SendTaskFailure`.
    pub fn fault(&mut self, state: &str, error: &str) {
        self.take(state);
        self.advance(1);
        let token = self.task(state).token;
        match error {
            "States.Timeout" => {
                self.apply(Event::TaskTimedOut {
                    token,
                    kind: TimeoutKind::Task,
                });
            }
            "States.HeartbeatTimeout" => {
                self.apply(Event::TaskTimedOut {
                    token,
                    kind: TimeoutKind::Heartbeat,
                });
            }
            _ => {
                self.fail_token(&token, error);
            }
        }
    }

    /// Answers `state`'s task the way its step answers when all goes well.
    pub fn complete(&mut self, state: &str) {
        let task = self.task(state);
        let output = match state {
            "ReserveInventory" => json!({"reserved": true}),
            "ChargePayment" => {
                json!({"chargeId": "ch_1", "amountCents": task.input["amountCents"]})
            }
            "AwaitApproval" => json!({"decision": "approve"}),
            "CreateShipment" => json!({"trackingNumber": "1ZTEST"}),
            compensation if compensations().contains(&compensation) => {
                let mut output = json!({"undone": compensation});
                // As the steps do: the last one hands the original failure on to the Fail state.
                if task.input["finishesOrder"] == true {
                    let field = |k: &str| {
                        task.input["failure"][k]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned()
                    };
                    output["error"] = json!(field("Error"));
                    output["cause"] = json!(field("Cause"));
                }
                output
            }
            // A step the harness has no answer of its own for: a success with nothing to say.
            _ => json!({}),
        };
        self.succeed(state, output);
    }

    /// Completes forward tasks until `state`'s task is the open one.
    pub fn forward_to(&mut self, state: &str) {
        for _ in 0..10 {
            let open = self.open_tasks();
            assert_eq!(open.len(), 1, "entered {:?}", self.entered());
            if open[0].state_name == state {
                return;
            }
            self.complete(&open[0].state_name.clone());
        }
        panic!("{state} never scheduled; entered {:?}", self.entered());
    }

    /// Completes every task and fires every timer until the execution ends.
    pub fn run_to_end(&mut self) {
        for _ in 0..10_000 {
            if self.outcome().is_some() {
                return;
            }
            if let Some(t) = self.open_tasks().first() {
                self.complete(&t.state_name.clone());
            } else if let Some(timer) = self.pending_timers().first().copied() {
                self.fire(timer);
            } else {
                panic!("stuck: no task, no timer; entered {:?}", self.entered());
            }
        }
        panic!("never ended; entered {:?}", self.entered());
    }

    // ---- timers ---------------------------------------------------------------------------

    /// Timers started and neither cancelled nor fired, earliest first.
    pub fn pending_timers(&self) -> Vec<Timer> {
        let mut pending: Vec<Timer> = self
            .timers
            .iter()
            .filter(|t| !self.done_timers.contains(&t.id))
            .copied()
            .collect();
        pending.sort_by_key(|t| (t.due, t.id));
        pending
    }

    /// Moves the clock to the timer's due time and fires it.
    pub fn fire(&mut self, timer: Timer) -> Applied {
        if timer.due > self.now {
            self.now = timer.due;
        }
        self.done_timers.insert(timer.id);
        self.apply(Event::TimerFired { timer_id: timer.id })
    }

    /// The one pending timer is `state`'s back-off after `error` on retry number `attempt + 1`:
    /// checks its delay is within the definition's bounds, fires it, and checks the task is
    /// scheduled again without re-entering the state.
    pub fn fire_retry(&mut self, state: &str, error: &str, attempt: u32) {
        let r = retrier(state, error).unwrap_or_else(|| panic!("{state} retries {error}"));
        assert!(attempt < r.max_attempts, "{state}: {error}: {attempt}");
        let pending = self.pending_timers();
        assert_eq!(pending.len(), 1, "{state}: {error}: one back-off timer");
        assert!(
            self.open_tasks().is_empty(),
            "{state}: no task during back-off"
        );
        let timer = pending[0];
        let delay = (timer.due - timer.set_at).num_milliseconds() as f64 / 1000.0;
        let bound = r.bound(attempt);
        assert!(
            (0.0..=bound + 0.001).contains(&delay),
            "{state}: {error}: retry {} after {delay}s, bound {bound}s",
            attempt + 1
        );
        let entered = self.entered().len();
        self.fire(timer);
        self.task(state);
        assert_eq!(self.entered().len(), entered, "a retry does not re-enter");
    }

    // ---- results --------------------------------------------------------------------------

    /// Redrives the ended execution (`RedriveExecution`): its end is forgotten, so `outcome`
    /// reports the next one.
    pub fn redrive(&mut self) -> Applied {
        self.actions.retain(|a| !matches!(a, Action::Finish(_)));
        self.apply(Event::Redrive)
    }

    /// The names of the states entered, in order.
    pub fn entered(&self) -> Vec<String> {
        self.events
            .iter()
            .filter(|e| e.event_type.ends_with("StateEntered"))
            .map(|e| {
                e.details.as_ref().unwrap()["name"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect()
    }

    pub fn outcome(&self) -> Option<ExecutionEnd> {
        self.actions.iter().find_map(|a| match a {
            Action::Finish(o) => Some(o.clone()),
            _ => None,
        })
    }

    /// The output of a succeeded execution.
    pub fn output(&self) -> Value {
        let o = self.outcome().expect("the execution ended");
        assert_eq!(o.status, ExecutionStatus::Succeeded, "{o:?}");
        o.output.expect("an output")
    }

    /// `(error, cause)` of a failed execution.
    pub fn failure(&self) -> (String, String) {
        let o = self.outcome().expect("the execution ended");
        assert_eq!(o.status, ExecutionStatus::Failed, "{o:?}");
        (o.error.unwrap_or_default(), o.cause.unwrap_or_default())
    }
}
