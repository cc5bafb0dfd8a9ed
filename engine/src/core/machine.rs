//! The execution state (what is persisted as a snapshot) and the transition machinery shared by
//! every state type: entering and leaving states, errors with Retry/Catch, child frames of
//! Parallel and Map, and the end of the execution.

use super::errors::{self, Failure};
use super::history;
use super::{Action, Applied, Event, ExecutionEnd, Interpreter, states};
use crate::asl::{Kind, State, StateMachine, Transition};
use crate::data::random::{Randomness, Seed};
use crate::data::{self, Scope};
use crate::sfn::{ExecutionStatus, HistoryEvent};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// The largest result a state may produce (AWS's 256 KiB payload quota).
const MAX_PAYLOAD: usize = 262_144;

/// Everything the engine must remember about a running execution between events.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExecState {
    pub status: ExecutionStatus,
    /// The id of the last history event recorded.
    pub last_event_id: u64,
    pub next_frame_id: u64,
    pub next_timer_id: u64,
    /// The threads of control: the root frame (id 0) and one per running Parallel branch or Map
    /// iteration.
    pub frames: BTreeMap<u64, Frame>,
    /// Once the execution is FAILED, ABORTED or TIMED_OUT: where its frames stood when it
    /// stopped (the failing state, the aborted tasks and waits, the Parallel and Map states
    /// with the results their finished children had given), which a redrive resumes. Empty
    /// while it runs, and after a success. Absent from snapshots written before redrive
    /// existed, which were all of running executions.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resume: BTreeMap<u64, Frame>,
    /// How many times the execution was redriven (`$$.Execution.RedriveCount`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub redrive_count: u32,
    /// When it was last redriven (`$$.Execution.RedriveTime`, absent until the first redrive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redrive_time: Option<DateTime<Utc>>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Default for ExecState {
    fn default() -> Self {
        ExecState {
            status: ExecutionStatus::Running,
            last_event_id: 0,
            next_frame_id: 1,
            next_timer_id: 1,
            frames: BTreeMap::new(),
            resume: BTreeMap::new(),
            redrive_count: 0,
            redrive_time: None,
        }
    }
}

/// One thread of control, positioned on a state of the root machine or of a nested one.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Frame {
    /// The parent frame and this frame's index among its children (branch or item index).
    pub parent: Option<(u64, usize)>,
    /// The way from the root machine to the machine this frame runs: (state name, branch).
    pub machine: Vec<(String, usize)>,
    pub state: String,
    pub entered_event_id: u64,
    pub entered_time: DateTime<Utc>,
    /// The last event of this frame (the next one's `previousEventId`).
    pub last_event_id: u64,
    /// The state's raw input.
    pub input: Value,
    /// Retry attempts made so far, per retrier of the current state.
    pub retry_counts: Vec<u32>,
    /// JSONPath variables visible here.
    pub variables: Map<String, Value>,
    pub wait: FrameWait,
}

/// What a frame is waiting for.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum FrameWait {
    /// Nothing: the frame is being moved along by the current step.
    Running,
    Task {
        token: String,
        resource: String,
        activity: bool,
        heartbeat_seconds: Option<u64>,
    },
    /// A Wait state's timer.
    Wait {
        timer_id: u64,
        effective: Value,
    },
    /// Back-off before the state runs again.
    Retry {
        timer_id: u64,
    },
    Children(Children),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChildKind {
    Parallel,
    Map,
}

/// The branches or iterations of a Parallel or Map state.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Children {
    pub kind: ChildKind,
    /// The id of the `…StateStarted` event that opened this group: tells one run of the state
    /// from the next (after a retry, or when the frame moved on to another Map).
    pub epoch: u64,
    /// Inputs of the children not started yet are kept here (Map items after ItemSelector).
    pub inputs: Vec<Value>,
    pub results: Vec<Option<Value>>,
    pub next_index: usize,
    pub running: usize,
    /// 0 means no limit.
    pub max_concurrency: usize,
    pub failures: usize,
    /// Failures allowed before the Map fails (`None`: none allowed).
    pub tolerated: Option<Tolerance>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Tolerance {
    pub count: Option<u64>,
    pub percentage: Option<f64>,
}

/// One application of an event: the interpreter, the state being changed, and what it produced.
pub(crate) struct Run<'i, 's> {
    pub it: &'i Interpreter<'i>,
    pub st: &'s mut ExecState,
    pub now: DateTime<Utc>,
    /// Everything random in this step (tokens, jitter, intrinsics) comes from here.
    pub random: Randomness,
    /// Parents whose children are being started right now (see `children::launch`).
    pub launching: Vec<u64>,
    /// While a failure (or a stop, or the execution's timeout) is being handled: each frame it
    /// has aborted or changed, as it was before (see [`Run::preserve`]). Kept as the redrive
    /// point if the execution ends, dropped as soon as a Retry, a Catch or a Map's tolerance
    /// handles the failure. Only the frames a failure touches are copied, so a Map that
    /// tolerates many failing iterations does not copy all of its iterations for each.
    pub failing: Option<BTreeMap<u64, Frame>>,
    out: Applied,
}

impl<'i, 's> Run<'i, 's> {
    pub fn new(
        it: &'i Interpreter<'i>,
        st: &'s mut ExecState,
        now: DateTime<Utc>,
        seed: Seed,
    ) -> Self {
        Run {
            it,
            st,
            now,
            random: Randomness::new(seed),
            launching: Vec::new(),
            failing: None,
            out: Applied::default(),
        }
    }

    pub fn finish(self) -> Applied {
        self.out
    }

    pub fn action(&mut self, action: Action) {
        self.out.actions.push(action);
    }

    /// Records a history event for a frame (or for the execution when `frame` is `None`).
    pub fn emit(&mut self, frame: Option<u64>, event_type: &str, details: Option<Value>) -> u64 {
        self.st.last_event_id += 1;
        let id = self.st.last_event_id;
        let prev = match frame.and_then(|f| self.st.frames.get_mut(&f)) {
            Some(fr) => std::mem::replace(&mut fr.last_event_id, id),
            None => id - 1,
        };
        self.out.events.push(HistoryEvent {
            id,
            previous_event_id: prev,
            timestamp: self.now,
            event_type: event_type.to_owned(),
            details,
        });
        id
    }

    pub fn new_timer(&mut self, due: DateTime<Utc>) -> u64 {
        let id = self.st.next_timer_id;
        self.st.next_timer_id += 1;
        self.action(Action::StartTimer { timer_id: id, due });
        id
    }

    pub fn frame(&self, id: u64) -> &Frame {
        &self.st.frames[&id]
    }

    pub fn frame_mut(&mut self, id: u64) -> &mut Frame {
        self.st.frames.get_mut(&id).expect("frame exists")
    }

    /// The machine a frame runs.
    pub fn machine_of(&self, frame: &Frame) -> &'i StateMachine {
        resolve_machine(self.it.definition, &frame.machine)
    }

    /// The state a frame is on.
    pub fn state_of(&self, id: u64) -> &'i State {
        let frame = self.frame(id);
        self.machine_of(frame)
            .state(&frame.state)
            .expect("validated state name")
    }

    /// The context object (`$$`) for a frame, with optional task token and Map item.
    pub fn context(&self, id: u64, token: Option<&str>, item: Option<(usize, &Value)>) -> Value {
        let retryable = matches!(
            self.state_of(id).kind,
            Kind::Task(_) | Kind::Parallel(_) | Kind::Map(_)
        );
        super::context::build(
            self.it.info,
            self.st,
            self.frame(id),
            retryable,
            token,
            item,
        )
    }

    /// Evaluates `f` with a scope whose `$` is `input`, for frame `id`.
    pub fn with_scope<T>(&self, id: u64, input: &Value, f: impl FnOnce(&Scope) -> T) -> T {
        let context = data::LazyContext::new(|| self.context(id, None, None));
        let frame = self.frame(id);
        let scope = Scope {
            input,
            context: &context,
            variables: &frame.variables,
            random: &self.random,
        };
        f(&scope)
    }

    /// Turns a data-flow error in the current state of `id` into a state failure, with AWS's
    /// "An error occurred while executing the state …" prefix.
    pub fn data_failure(&self, id: u64, err: data::DataError) -> Failure {
        let frame = self.frame(id);
        Failure::from_data(err, &frame.state, frame.entered_event_id)
    }

    // ---- events -------------------------------------------------------------------------

    pub fn handle(&mut self, event: Event) {
        if self.st.status.is_terminal() && !matches!(event, Event::Start | Event::Redrive) {
            return;
        }
        match event {
            Event::Start => self.start(),
            Event::TaskStarted { token, worker_name } => {
                states::task::started(self, &token, worker_name)
            }
            Event::TaskSucceeded { token, output } => states::task::succeeded(self, &token, output),
            Event::TaskFailed {
                token,
                error,
                cause,
            } => states::task::failed(self, &token, error, cause),
            Event::TaskTimedOut { token, kind } => states::task::timed_out(self, &token, kind),
            Event::TimerFired { timer_id } => self.timer_fired(timer_id),
            Event::ExecutionTimedOut => {
                self.failing = Some(BTreeMap::new());
                self.abort_all();
                self.emit(None, "ExecutionTimedOut", Some(json!({})));
                self.end(ExecutionStatus::TimedOut, None, None, None);
            }
            Event::Stop { error, cause } => {
                self.failing = Some(BTreeMap::new());
                self.abort_all();
                let details = history::error_details(error.as_deref(), cause.as_deref());
                self.emit(None, "ExecutionAborted", Some(details));
                self.end(ExecutionStatus::Aborted, None, error, cause);
            }
            Event::Redrive => super::redrive::resume(self),
        }
    }

    fn start(&mut self) {
        if !self.st.frames.is_empty() || self.st.last_event_id != 0 {
            return;
        }
        let input = self.it.info.input.clone();
        let mut details = history::payload("input", &input);
        details.insert(
            "roleArn".to_owned(),
            Value::String(self.it.info.role_arn.clone()),
        );
        // As AWS's ExecutionStartedEventDetails: present only for a start by version or alias.
        let info = &self.it.info;
        for (key, arn) in [
            ("stateMachineAliasArn", &info.state_machine_alias_arn),
            ("stateMachineVersionArn", &info.state_machine_version_arn),
        ] {
            if let Some(arn) = arn {
                details.insert(key.to_owned(), Value::String(arn.clone()));
            }
        }
        self.emit(None, "ExecutionStarted", Some(Value::Object(details)));
        let frame = Frame {
            parent: None,
            machine: Vec::new(),
            state: String::new(),
            entered_event_id: 0,
            entered_time: self.now,
            last_event_id: self.st.last_event_id,
            input: Value::Null,
            retry_counts: Vec::new(),
            variables: Map::new(),
            wait: FrameWait::Running,
        };
        self.st.frames.insert(0, frame);
        let start_at = self.it.definition.start_at.clone();
        self.enter(0, &start_at, input);
    }

    fn timer_fired(&mut self, timer_id: u64) {
        let found = self.st.frames.iter().find_map(|(id, f)| match &f.wait {
            FrameWait::Wait { timer_id: t, .. } | FrameWait::Retry { timer_id: t }
                if *t == timer_id =>
            {
                Some(*id)
            }
            _ => None,
        });
        let Some(id) = found else { return };
        match std::mem::replace(&mut self.frame_mut(id).wait, FrameWait::Running) {
            FrameWait::Wait { effective, .. } => states::wait::elapsed(self, id, effective),
            FrameWait::Retry { .. } => self.run_state(id),
            _ => unreachable!("matched above"),
        }
    }

    // ---- moving through states ------------------------------------------------------------

    /// Enters state `name` of the frame's machine with `input`.
    pub fn enter(&mut self, id: u64, name: &str, input: Value) {
        let frame = self.frame_mut(id);
        frame.state = name.to_owned();
        frame.input = input;
        frame.wait = FrameWait::Running;
        let state = self.state_of(id);
        self.frame_mut(id).retry_counts = vec![0; state.kind.retriers().len()];
        let mut details = Map::new();
        details.insert("name".to_owned(), Value::String(name.to_owned()));
        details.extend(history::payload("input", &self.frame(id).input));
        let event = format!("{}StateEntered", state.kind.type_name());
        let event_id = self.emit(Some(id), &event, Some(Value::Object(details)));
        let now = self.now;
        let frame = self.frame_mut(id);
        frame.entered_event_id = event_id;
        frame.entered_time = now;
        self.run_state(id);
    }

    /// Runs (or re-runs, after a retry back-off) the frame's current state.
    pub fn run_state(&mut self, id: u64) {
        let state = self.state_of(id);
        let result = match &state.kind {
            Kind::Pass(spec) => states::pass::run(self, id, state, spec),
            Kind::Task(spec) => states::task::run(self, id, state, spec),
            Kind::Choice(spec) => states::choice::run(self, id, state, spec),
            Kind::Wait(spec) => states::wait::run(self, id, state, spec),
            Kind::Succeed => states::terminal::succeed(self, id, state),
            Kind::Fail(spec) => states::terminal::fail(self, id, spec),
            Kind::Parallel(spec) => states::parallel::run(self, id, state, spec),
            Kind::Map(spec) => states::map::run(self, id, state, spec),
        };
        if let Err(failure) = result {
            self.state_failed(id, failure);
        }
    }

    /// Finishes a Task, Parallel or Map state with its `result`:
    /// ResultSelector → Assign → ResultPath → OutputPath, then leaves it.
    pub fn complete_with_result(&mut self, id: u64, result: Value) {
        if let Err(failure) = self.try_complete_with_result(id, result) {
            self.state_failed(id, failure);
        }
    }

    fn try_complete_with_result(&mut self, id: u64, result: Value) -> Result<(), Failure> {
        let state = self.state_of(id);
        let selected = match &state.result_selector {
            Some(template) => self
                .with_scope(id, &result, |s| data::payload::render(template, s))
                .map_err(|e| self.data_failure(id, e))?,
            None => result,
        };
        if history::json_text(&selected).len() > MAX_PAYLOAD {
            return Err(Failure {
                error: Some("States.DataLimitExceeded".to_owned()),
                cause: Some(format!(
                    "The state/task '{}' returned a result with a size exceeding the maximum number of bytes service limit.",
                    state.name
                )),
                terminal: true,
                heartbeat: false,
            });
        }
        let assigned = self.evaluate_assign(id, state.assign.as_ref(), &selected)?;
        let raw = self.frame(id).input.clone();
        let merged = data::apply_result_path(&state.result_path, &raw, selected)
            .map_err(|e| self.data_failure(id, e))?;
        let output = self
            .with_scope(id, &merged, |s| {
                data::apply_filter_path(&state.output_path, s)
            })
            .map_err(|e| self.data_failure(id, e))?;
        self.leave(id, output, assigned, state.transition.clone());
        Ok(())
    }

    /// Evaluates a JSONPath `Assign` block against `value`, with the variables as they were when
    /// the state was entered. The assignments take effect when the state is left.
    pub fn evaluate_assign(
        &self,
        id: u64,
        assign: Option<&Value>,
        value: &Value,
    ) -> Result<Option<Map<String, Value>>, Failure> {
        let Some(template) = assign else {
            return Ok(None);
        };
        let rendered = self
            .with_scope(id, value, |s| data::payload::render(template, s))
            .map_err(|e| self.data_failure(id, e))?;
        match rendered {
            Value::Object(map) => Ok(Some(map)),
            _ => Ok(None),
        }
    }

    /// Leaves the frame's state with `output`: records `…StateExited`, applies assignments and
    /// follows the transition.
    pub fn leave(
        &mut self,
        id: u64,
        output: Value,
        assigned: Option<Map<String, Value>>,
        transition: Transition,
    ) {
        let state = self.state_of(id);
        let mut details = Map::new();
        details.insert("name".to_owned(), Value::String(state.name.clone()));
        details.extend(history::payload("output", &output));
        if let Some(vars) = &assigned {
            details.insert(
                "assignedVariables".to_owned(),
                Value::Object(
                    vars.iter()
                        .map(|(k, v)| (k.clone(), Value::String(history::json_text(v))))
                        .collect(),
                ),
            );
        }
        let event = format!("{}StateExited", state.kind.type_name());
        self.emit(Some(id), &event, Some(Value::Object(details)));
        if let Some(vars) = assigned {
            self.frame_mut(id).variables.extend(vars);
        }
        match transition {
            Transition::Next(next) => self.enter(id, &next, output),
            Transition::End => self.frame_done(id, output),
        }
    }

    // ---- errors -------------------------------------------------------------------------

    /// The current state of frame `id` failed: retry, catch, or fail the frame.
    pub fn state_failed(&mut self, id: u64, failure: Failure) {
        let state = self.state_of(id);
        if !failure.terminal {
            let counts = &self.frame(id).retry_counts;
            if let Some((index, delay)) =
                errors::next_retry(state.kind.retriers(), counts, &failure, &self.random)
            {
                self.failing = None;
                self.frame_mut(id).retry_counts[index] += 1;
                let due = self.now + delay;
                let timer_id = self.new_timer(due);
                self.frame_mut(id).wait = FrameWait::Retry { timer_id };
                return;
            }
            if let Some(catcher) = errors::find_catcher(state.kind.catchers(), &failure) {
                self.failing = None;
                let error_output = failure.to_output();
                let assigned =
                    match self.evaluate_assign(id, catcher.assign.as_ref(), &error_output) {
                        Ok(a) => a,
                        Err(f) => return self.frame_failed(id, f),
                    };
                let raw = self.frame(id).input.clone();
                match data::apply_result_path(&catcher.result_path, &raw, error_output) {
                    Ok(output) => {
                        let next = Transition::Next(catcher.next.clone());
                        self.leave(id, output, assigned, next);
                    }
                    Err(e) => {
                        let f = self.data_failure(id, e);
                        self.frame_failed(id, f);
                    }
                }
                return;
            }
        }
        self.frame_failed(id, failure);
    }

    /// The frame cannot go on: fail its parent state, or the execution.
    pub fn frame_failed(&mut self, id: u64, failure: Failure) {
        if self.failing.is_none() {
            self.failing = Some(BTreeMap::new());
        }
        let parent = self.frame(id).parent;
        self.abort_frame(id);
        match parent {
            None => {
                self.abort_all();
                let details =
                    history::error_details(failure.error_name(), failure.cause.as_deref());
                self.emit(None, "ExecutionFailed", Some(details));
                self.end(
                    ExecutionStatus::Failed,
                    None,
                    failure.error_name().map(str::to_owned),
                    failure.cause.clone(),
                );
            }
            Some((parent_id, index)) => {
                states::children::child_failed(self, parent_id, index, failure)
            }
        }
    }

    /// The frame reached the end of its machine with `output`.
    pub fn frame_done(&mut self, id: u64, output: Value) {
        match self.frame(id).parent {
            None => {
                let details = history::payload("output", &output);
                self.emit(None, "ExecutionSucceeded", Some(Value::Object(details)));
                self.st.frames.clear();
                self.end(ExecutionStatus::Succeeded, Some(output), None, None);
            }
            Some((parent_id, index)) => {
                self.st.frames.remove(&id);
                states::children::child_done(self, parent_id, index, output);
            }
        }
    }

    /// Keeps frame `id` as it is now in the redrive point of the failure being handled, unless
    /// that failure already changed it: called before a failure changes or removes a frame, so
    /// that the redrive point holds every frame as it stood when the failure began.
    pub fn preserve(&mut self, id: u64) {
        if let (Some(kept), Some(frame)) = (&mut self.failing, self.st.frames.get(&id)) {
            kept.entry(id).or_insert_with(|| frame.clone());
        }
    }

    /// Removes a frame and everything below it, closing its tasks and timers.
    pub fn abort_frame(&mut self, id: u64) {
        self.preserve(id);
        let Some(frame) = self.st.frames.remove(&id) else {
            return;
        };
        match frame.wait {
            FrameWait::Task { token, .. } => self.action(Action::CloseTask { token }),
            FrameWait::Wait { timer_id, .. } | FrameWait::Retry { timer_id } => {
                self.action(Action::CancelTimer { timer_id })
            }
            FrameWait::Children(_) => {
                let children: Vec<u64> = self
                    .st
                    .frames
                    .iter()
                    .filter(|(_, f)| f.parent.map(|(p, _)| p) == Some(id))
                    .map(|(c, _)| *c)
                    .collect();
                for child in children {
                    self.abort_frame(child);
                }
            }
            FrameWait::Running => {}
        }
    }

    fn abort_all(&mut self) {
        let ids: Vec<u64> = self.st.frames.keys().copied().collect();
        for id in ids {
            self.abort_frame(id);
        }
    }

    fn end(
        &mut self,
        status: ExecutionStatus,
        output: Option<Value>,
        error: Option<String>,
        cause: Option<String>,
    ) {
        self.st.status = status;
        self.st.frames.clear();
        // An unsuccessful end keeps where it stopped; a success has nothing to redrive.
        self.st.resume = self.failing.take().unwrap_or_default();
        self.action(Action::Finish(ExecutionEnd {
            status,
            output,
            error,
            cause,
        }));
    }

    /// Starts a child frame running `machine` (a branch or item processor) of state `(name,
    /// branch)` in frame `parent`.
    pub fn spawn_child(&mut self, parent: u64, index: usize, branch: usize) -> u64 {
        let id = self.st.next_frame_id;
        self.st.next_frame_id += 1;
        let p = self.frame(parent);
        let mut machine = p.machine.clone();
        machine.push((p.state.clone(), branch));
        let frame = Frame {
            parent: Some((parent, index)),
            machine,
            state: String::new(),
            entered_event_id: 0,
            entered_time: self.now,
            last_event_id: p.last_event_id,
            input: Value::Null,
            retry_counts: Vec::new(),
            variables: p.variables.clone(),
            wait: FrameWait::Running,
        };
        self.st.frames.insert(id, frame);
        id
    }

    /// Enters the start state of a freshly spawned child frame.
    pub fn start_child(&mut self, id: u64, input: Value) {
        let start = self.machine_of(self.frame(id)).start_at.clone();
        self.enter(id, &start, input);
    }
}

/// Follows a frame's machine path from the root definition.
pub fn resolve_machine<'d>(root: &'d StateMachine, path: &[(String, usize)]) -> &'d StateMachine {
    let mut machine = root;
    for (state, branch) in path {
        machine = match &machine.state(state).expect("validated path").kind {
            Kind::Parallel(p) => &p.branches[*branch],
            Kind::Map(m) => &m.processor,
            _ => unreachable!("only Parallel and Map have nested machines"),
        };
    }
    machine
}
