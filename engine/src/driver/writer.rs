//! The writer thread: the only code that changes the database. It takes every queued command,
//! applies them and the events they cause to the interpreter, commits the lot in one
//! transaction (one fsync for many transitions), and only then answers callers, hands out
//! tasks, and invokes handlers.

use super::{EngineConfig, Machine};
use crate::api::*;
use crate::arn;
use crate::core::{Action, Event, ExecInfo, ExecState, Interpreter, Outcome, TimeoutKind};
use crate::error::EngineError;
use crate::store::{ExecutionRow, StateMachineRow, Store, TaskRow, TaskStatus, TimerKind};
use chrono::{DateTime, TimeDelta, Utc};
use serde_json::Value;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::Instant;
use tokio::sync::oneshot;

pub type Reply<T> = oneshot::Sender<Result<T, EngineError>>;

/// A worker's answer to a task.
#[derive(Debug)]
pub enum Answer {
    Success(Value),
    Failure {
        error: Option<String>,
        cause: Option<String>,
    },
}

pub enum Command {
    CreateStateMachine {
        name: String,
        definition: String,
        parsed: Arc<crate::asl::StateMachine>,
        role_arn: String,
        reply: Reply<StateMachineInfo>,
    },
    CreateActivity {
        name: String,
        reply: Reply<ActivityInfo>,
    },
    Start {
        sm_arn: String,
        name: String,
        input_text: String,
        input: Value,
        reply: Reply<StartExecutionOutput>,
    },
    Stop {
        arn: String,
        error: Option<String>,
        cause: Option<String>,
        reply: Reply<DateTime<Utc>>,
    },
    Poll {
        activity_arn: String,
        worker: Option<String>,
        deadline: Instant,
        reply: Reply<Option<ActivityTask>>,
    },
    Answer {
        token: String,
        answer: Answer,
        /// `None` for in-process handlers, whose results nobody waits for.
        reply: Option<Reply<()>>,
    },
    Heartbeat {
        token: String,
        reply: Reply<()>,
    },
    ExpireHeartbeats {
        activity_arns: Vec<String>,
        reply: Reply<u64>,
    },
    WatchCompletion {
        arn: String,
        reply: oneshot::Sender<()>,
    },
    Shutdown {
        reply: Option<oneshot::Sender<()>>,
    },
}

struct Poller {
    worker: Option<String>,
    deadline: Instant,
    reply: Reply<Option<ActivityTask>>,
}

/// An execution loaded into the current batch.
struct Loaded {
    arn: String,
    state: ExecState,
    info: ExecInfo,
    machine: Arc<Machine>,
    dirty: bool,
    outcome: Option<Outcome>,
}

/// An answer to a caller, given the commit's error if it failed.
type Notify = Box<dyn FnOnce(Option<&EngineError>) + Send>;

/// What one grouped transaction accumulates.
#[derive(Default)]
struct Batch {
    loaded: HashMap<i64, Loaded>,
    events: VecDeque<(i64, Event)>,
    /// Answers to send once the commit is durable (or the error when it failed).
    replies: Vec<Notify>,
    invocations: Vec<TaskRequest>,
    finished: Vec<String>,
    new_machines: Vec<(String, Arc<Machine>)>,
    new_activities: Vec<String>,
    transitions: u64,
}

impl Batch {
    fn reply<T: Send + 'static>(&mut self, reply: Reply<T>, value: Result<T, EngineError>) {
        self.replies.push(Box::new(move |failed| {
            let _ = reply.send(match failed {
                Some(e) => Err(e.clone()),
                None => value,
            });
        }));
    }
}

pub struct Writer {
    pub store: Store,
    pub config: EngineConfig,
    pub rx: Receiver<Command>,
    pub tx: Sender<Command>,
    pub runtime: tokio::runtime::Handle,
    pub handler: Option<Arc<dyn TaskHandler>>,
    pub machines: HashMap<String, Arc<Machine>>,
    pub activities: HashSet<String>,
    pub stats: Arc<super::Stats>,
    pollers: HashMap<String, VecDeque<Poller>>,
    watchers: HashMap<String, Vec<oneshot::Sender<()>>>,
    next_due: Option<i64>,
    /// Running executions as the last commit left them, so the next event of one is applied
    /// without reading and parsing its row and snapshot again. Only this thread writes the
    /// database, so an entry stays true until the execution is loaded into a batch (it is
    /// taken out then, and put back only once that batch has committed).
    warm: HashMap<i64, Loaded>,
}

/// The most running executions kept warm (a few KB each); past it the set starts again empty.
const WARM_EXECUTIONS: usize = 2048;

type Sql<T> = Result<T, rusqlite::Error>;

fn millis(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

/// The due time of a timer `seconds` after `now`, in epoch milliseconds: every timeout and
/// heartbeat deadline is set through it. It saturates at the latest time chrono represents
/// (ASL bounds timeouts far below it), so no number in a definition can overflow it.
fn due_after(now: DateTime<Utc>, seconds: u64) -> i64 {
    let delta = i64::try_from(seconds)
        .ok()
        .and_then(TimeDelta::try_seconds)
        .unwrap_or(TimeDelta::MAX);
    millis(
        now.checked_add_signed(delta)
            .unwrap_or(DateTime::<Utc>::MAX_UTC),
    )
}

fn from_millis(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or_default()
}

impl Writer {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        store: Store,
        config: EngineConfig,
        rx: Receiver<Command>,
        tx: Sender<Command>,
        runtime: tokio::runtime::Handle,
        handler: Option<Arc<dyn TaskHandler>>,
        stats: Arc<super::Stats>,
    ) -> Sql<Writer> {
        let activities = store.activity_arns()?.into_iter().collect();
        let next_due = store.next_due()?;
        Ok(Writer {
            store,
            config,
            rx,
            tx,
            runtime,
            handler,
            machines: HashMap::new(),
            activities,
            stats,
            pollers: HashMap::new(),
            watchers: HashMap::new(),
            next_due,
            warm: HashMap::new(),
        })
    }

    /// Re-invokes the handler tasks a previous process left unanswered (at-least-once).
    pub fn recover(&mut self) -> Sql<usize> {
        let tasks = self.store.open_handler_tasks()?;
        let n = tasks.len();
        for task in tasks {
            if let Some(request) = self.request_for(&task)? {
                self.invoke(request);
            }
        }
        Ok(n)
    }

    fn request_for(&self, task: &TaskRow) -> Sql<Option<TaskRequest>> {
        let Some(row) = self.store.execution_by_id(task.exec_id)? else {
            return Ok(None);
        };
        let input = task
            .input
            .as_deref()
            .and_then(|i| serde_json::from_str(i).ok());
        Ok(Some(TaskRequest {
            resource: task.resource.clone(),
            input: input.unwrap_or(Value::Null),
            task_token: task.token.clone(),
            execution_arn: row.arn,
            state_name: task.state_name.clone(),
        }))
    }

    pub fn run(mut self) {
        loop {
            let first = match self.wake_in() {
                None => self.rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                Some(d) => self.rx.recv_timeout(d),
            };
            let mut commands = Vec::new();
            match first {
                Ok(c) => commands.push(c),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            while commands.len() < self.config.max_batch {
                match self.rx.try_recv() {
                    Ok(c) => commands.push(c),
                    Err(_) => break,
                }
            }
            let mut shutdown = None;
            commands.retain_mut(|c| match c {
                Command::Shutdown { reply } => {
                    shutdown = Some(reply.take());
                    false
                }
                _ => true,
            });
            self.batch(commands);
            if let Some(reply) = shutdown {
                self.close_pollers();
                if let Some(r) = reply {
                    let _ = r.send(());
                }
                break;
            }
        }
        self.close_pollers();
    }

    fn close_pollers(&mut self) {
        for (_, queue) in self.pollers.drain() {
            for p in queue {
                let _ = p.reply.send(Ok(None));
            }
        }
    }

    /// How long the loop may sleep: until the next timer or poll deadline.
    fn wake_in(&self) -> Option<std::time::Duration> {
        let now = Instant::now();
        let poll = self
            .pollers
            .values()
            .flatten()
            .map(|p| p.deadline.saturating_duration_since(now))
            .min();
        let timer = self.next_due.map(|due| {
            let ms = (due - millis(Utc::now())).max(0) as u64;
            std::time::Duration::from_millis(ms)
        });
        match (poll, timer) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn batch(&mut self, commands: Vec<Command>) {
        let now = Utc::now();
        let mut b = Batch::default();
        let changes_before = self.store.total_changes();
        let result = self.store.begin().and_then(|()| {
            for command in commands {
                self.command(&mut b, command, now)?;
                self.drain(&mut b, now)?;
            }
            self.fire_timers(&mut b, now)?;
            self.flush(&mut b, now)?;
            self.store.commit()
        });
        match result {
            Ok(()) => {
                // Only a commit that wrote counts (one fsync): an idle pass (a poll that timed
                // out, no timer due) commits an empty transaction, which touches no disk.
                if self.store.total_changes() != changes_before {
                    self.stats
                        .commits
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                self.stats
                    .transitions
                    .fetch_add(b.transitions, std::sync::atomic::Ordering::Relaxed);
                for r in b.replies {
                    r(None);
                }
                self.machines.extend(b.new_machines);
                self.activities.extend(b.new_activities);
                for request in b.invocations {
                    self.invoke(request);
                }
                for arn in b.finished {
                    for w in self.watchers.remove(&arn).unwrap_or_default() {
                        let _ = w.send(());
                    }
                }
                self.keep_warm(b.loaded);
            }
            Err(e) => {
                tracing::error!(error = %e, "engine commit failed; the batch is rolled back");
                self.store.rollback();
                let err = EngineError::storage(e);
                for r in b.replies {
                    r(Some(&err));
                }
            }
        }
        self.next_due = self.store.next_due().unwrap_or(self.next_due);
        self.expire_pollers();
    }

    /// Keeps the executions a committed batch leaves running for the next batches.
    fn keep_warm(&mut self, loaded: HashMap<i64, Loaded>) {
        for (id, l) in loaded {
            if l.outcome.is_some() {
                continue;
            }
            if self.warm.len() >= WARM_EXECUTIONS {
                self.warm.clear();
            }
            self.warm.insert(id, l);
        }
    }

    /// Answers "no task" to every poll whose deadline has passed (and forgets polls whose
    /// caller went away). Deadlines differ per poll, so the whole queue is scanned.
    fn expire_pollers(&mut self) {
        let now = Instant::now();
        for queue in self.pollers.values_mut() {
            let mut kept = VecDeque::with_capacity(queue.len());
            for p in queue.drain(..) {
                if p.reply.is_closed() {
                    continue;
                }
                if p.deadline <= now {
                    let _ = p.reply.send(Ok(None));
                } else {
                    kept.push_back(p);
                }
            }
            *queue = kept;
        }
        self.pollers.retain(|_, q| !q.is_empty());
    }

    fn invoke(&self, request: TaskRequest) {
        let tx = self.tx.clone();
        let token = request.task_token.clone();
        match &self.handler {
            Some(handler) => {
                let fut = handler.invoke(request);
                self.runtime.spawn(async move {
                    let answer = match fut.await {
                        Ok(v) => Answer::Success(v),
                        Err(f) => Answer::Failure {
                            error: Some(f.error),
                            cause: Some(f.cause),
                        },
                    };
                    let _ = tx.send(Command::Answer {
                        token,
                        answer,
                        reply: None,
                    });
                });
            }
            None => {
                let answer = Answer::Failure {
                    error: Some("States.TaskFailed".to_owned()),
                    cause: Some(format!(
                        "No task handler is registered for resource '{}'",
                        request.resource
                    )),
                };
                let _ = tx.send(Command::Answer {
                    token,
                    answer,
                    reply: None,
                });
            }
        }
    }

    fn machine(&mut self, sm_arn: &str) -> Sql<Option<Arc<Machine>>> {
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

    // ---- commands -----------------------------------------------------------------------

    fn command(&mut self, b: &mut Batch, command: Command, now: DateTime<Utc>) -> Sql<()> {
        match command {
            Command::CreateStateMachine {
                name,
                definition,
                parsed,
                role_arn,
                reply,
            } => {
                let sm_arn = arn::make(
                    &self.config.region,
                    &self.config.account_id,
                    "stateMachine",
                    &name,
                );
                let result = match self.store.state_machine(&sm_arn)? {
                    Some(row) if row.definition == definition && row.role_arn == role_arn => {
                        Ok(info_of(row))
                    }
                    Some(_) => Err(EngineError::StateMachineAlreadyExists(format!(
                        "State Machine Already Exists: '{sm_arn}'"
                    ))),
                    None => {
                        let row = StateMachineRow {
                            arn: sm_arn.clone(),
                            name: name.clone(),
                            definition,
                            role_arn: role_arn.clone(),
                            created_ms: millis(now),
                        };
                        self.store.insert_state_machine(&row)?;
                        let machine = Machine {
                            def: (*parsed).clone(),
                            name,
                            role_arn,
                        };
                        b.new_machines.push((sm_arn, Arc::new(machine)));
                        Ok(info_of(row))
                    }
                };
                b.reply(reply, result);
            }
            Command::CreateActivity { name, reply } => {
                let activity_arn = arn::make(
                    &self.config.region,
                    &self.config.account_id,
                    "activity",
                    &name,
                );
                let created = match self.store.activity_created(&activity_arn)? {
                    Some(ms) => ms,
                    None => {
                        self.store
                            .insert_activity(&activity_arn, &name, millis(now))?;
                        b.new_activities.push(activity_arn.clone());
                        millis(now)
                    }
                };
                let info = ActivityInfo {
                    activity_arn,
                    name,
                    creation_date: from_millis(created),
                };
                b.reply(reply, Ok(info));
            }
            Command::Start {
                sm_arn,
                name,
                input_text,
                input,
                reply,
            } => {
                let result = self.start(b, &sm_arn, &name, input_text, input, now)?;
                b.reply(reply, result);
            }
            Command::Stop {
                arn,
                error,
                cause,
                reply,
            } => {
                let result = match self.store.execution_by_arn(&arn)? {
                    None => Err(EngineError::ExecutionDoesNotExist(format!(
                        "Execution Does Not Exist: '{arn}'"
                    ))),
                    Some(row) => {
                        if row.status == ExecutionStatus::Running {
                            b.events.push_back((row.id, Event::Stop { error, cause }));
                        }
                        Ok(now)
                    }
                };
                b.reply(reply, result);
            }
            Command::Poll {
                activity_arn,
                worker,
                deadline,
                reply,
            } => {
                if !self.activities.contains(&activity_arn) {
                    let e = EngineError::ActivityDoesNotExist(format!(
                        "Activity Does Not Exist: '{activity_arn}'"
                    ));
                    b.reply(reply, Err(e));
                } else if let Some(task) = self.store.next_scheduled(&activity_arn)? {
                    self.hand_out(b, &task.token, task.exec_id, task.input, worker, reply)?;
                } else {
                    self.pollers
                        .entry(activity_arn)
                        .or_default()
                        .push_back(Poller {
                            worker,
                            deadline,
                            reply,
                        });
                }
            }
            Command::Answer {
                token,
                answer,
                reply,
            } => {
                let result = match self.open_task(&token)? {
                    Err(e) => Err(e),
                    Ok(task) => {
                        let event = match answer {
                            Answer::Success(output) => Event::TaskSucceeded { token, output },
                            Answer::Failure { error, cause } => Event::TaskFailed {
                                token,
                                error,
                                cause,
                            },
                        };
                        b.events.push_back((task.exec_id, event));
                        Ok(())
                    }
                };
                if let Some(reply) = reply {
                    b.reply(reply, result);
                }
            }
            Command::Heartbeat { token, reply } => {
                let result = match self.open_task(&token)? {
                    Err(e) => Err(e),
                    Ok(task) => {
                        // The clock runs once a worker holds the task (handlers hold it at once).
                        let held =
                            task.status == TaskStatus::Started || task.activity_arn.is_none();
                        if let (Some(h), true) = (task.heartbeat_s, held) {
                            let due = due_after(now, u64::try_from(h).unwrap_or(0));
                            self.store.set_timer(
                                task.exec_id,
                                TimerKind::Heartbeat,
                                &token,
                                due,
                            )?;
                        }
                        Ok(())
                    }
                };
                b.reply(reply, result);
            }
            Command::ExpireHeartbeats {
                activity_arns,
                reply,
            } => {
                let expired = self
                    .store
                    .expire_started_heartbeats(&activity_arns, millis(now))?;
                b.reply(reply, Ok(expired));
            }
            Command::WatchCompletion { arn, reply } => {
                let done = match self.store.execution_by_arn(&arn)? {
                    None => true,
                    Some(row) => row.status.is_terminal(),
                };
                if done {
                    let _ = reply.send(());
                } else {
                    let watchers = self.watchers.entry(arn).or_default();
                    watchers.retain(|w| !w.is_closed());
                    watchers.push(reply);
                }
            }
            Command::Shutdown { .. } => {}
        }
        Ok(())
    }

    fn start(
        &mut self,
        b: &mut Batch,
        sm_arn: &str,
        name: &str,
        input_text: String,
        input: Value,
        now: DateTime<Utc>,
    ) -> Sql<Result<StartExecutionOutput, EngineError>> {
        let Some(machine) = self.machine(sm_arn)? else {
            return Ok(Err(EngineError::StateMachineDoesNotExist(format!(
                "State Machine Does Not Exist: '{sm_arn}'"
            ))));
        };
        let exec_arn = arn::make(
            &self.config.region,
            &self.config.account_id,
            "execution",
            &format!("{}:{}", machine.name, name),
        );
        if let Some(row) = self.store.execution_by_arn(&exec_arn)? {
            let same_input =
                serde_json::from_str::<Value>(&row.input).ok().as_ref() == Some(&input);
            return Ok(if row.status == ExecutionStatus::Running && same_input {
                Ok(StartExecutionOutput {
                    execution_arn: row.arn,
                    start_date: from_millis(row.start_ms),
                })
            } else {
                Err(EngineError::ExecutionAlreadyExists(format!(
                    "Execution Already Exists: '{exec_arn}'"
                )))
            });
        }
        let row = ExecutionRow {
            id: 0,
            arn: exec_arn.clone(),
            sm_arn: sm_arn.to_owned(),
            name: name.to_owned(),
            status: ExecutionStatus::Running,
            input: input_text,
            output: None,
            error: None,
            cause: None,
            start_ms: millis(now),
            stop_ms: None,
        };
        let id = self.store.insert_execution(&row)?;
        if let Some(t) = machine.def.timeout_seconds {
            self.store
                .set_timer(id, TimerKind::ExecutionTimeout, "", due_after(now, t))?;
        }
        let info = ExecInfo {
            execution_arn: exec_arn.clone(),
            name: name.to_owned(),
            state_machine_arn: sm_arn.to_owned(),
            state_machine_name: machine.name.clone(),
            role_arn: machine.role_arn.clone(),
            start_time: from_millis(millis(now)),
            input,
        };
        b.loaded.insert(
            id,
            Loaded {
                arn: exec_arn.clone(),
                state: ExecState::default(),
                info,
                machine,
                dirty: true,
                outcome: None,
            },
        );
        b.events.push_back((id, Event::Start));
        Ok(Ok(StartExecutionOutput {
            execution_arn: exec_arn,
            start_date: from_millis(millis(now)),
        }))
    }

    /// The task behind a token a caller presented, when it can still be answered.
    fn open_task(&self, token: &str) -> Sql<Result<TaskRow, EngineError>> {
        Ok(match self.store.task(token)? {
            None => Err(EngineError::TaskDoesNotExist(
                "Task Does Not Exist".to_owned(),
            )),
            Some(t) if t.status == TaskStatus::Closed => {
                Err(EngineError::TaskTimedOut("Task Timed Out".to_owned()))
            }
            Some(t) => Ok(t),
        })
    }

    fn hand_out(
        &mut self,
        b: &mut Batch,
        token: &str,
        exec_id: i64,
        input: Option<String>,
        worker: Option<String>,
        reply: Reply<Option<ActivityTask>>,
    ) -> Sql<()> {
        self.store.mark_started(token, worker.as_deref())?;
        b.events.push_back((
            exec_id,
            Event::TaskStarted {
                token: token.to_owned(),
                worker_name: worker,
            },
        ));
        let task = ActivityTask {
            task_token: token.to_owned(),
            input: input.unwrap_or_else(|| "{}".to_owned()),
        };
        b.reply(reply, Ok(Some(task)));
        Ok(())
    }

    // ---- events -------------------------------------------------------------------------

    fn drain(&mut self, b: &mut Batch, now: DateTime<Utc>) -> Sql<()> {
        while let Some((exec_id, event)) = b.events.pop_front() {
            self.apply(b, exec_id, event, now)?;
        }
        Ok(())
    }

    fn load(&mut self, b: &mut Batch, exec_id: i64) -> Sql<bool> {
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
        let state: ExecState = match self.store.snapshot(exec_id)? {
            Some(bytes) => match serde_json::from_slice(&bytes) {
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
                outcome: None,
            },
        );
        Ok(true)
    }

    fn apply(&mut self, b: &mut Batch, exec_id: i64, event: Event, now: DateTime<Utc>) -> Sql<()> {
        if !self.load(b, exec_id)? {
            return Ok(());
        }
        let loaded = b.loaded.get_mut(&exec_id).expect("loaded above");
        let activities = &self.activities;
        let is_activity = |r: &str| activities.contains(r);
        let interpreter = Interpreter {
            definition: &loaded.machine.def,
            info: &loaded.info,
            is_activity: &is_activity,
        };
        // A bug in the interpreter must cost one execution, not the engine: the writer thread
        // would otherwise die and take every other execution with it.
        let applied = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            interpreter.apply(&mut loaded.state, event, now)
        }));
        let exec_arn = loaded.arn.clone();
        let step = match applied {
            Ok(step) => step,
            Err(panic) => {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                tracing::error!(execution_arn = %exec_arn, panic = %what, "interpreter panicked; failing the execution");
                b.loaded.remove(&exec_id);
                self.store.delete_timers_of(exec_id)?;
                self.store.close_tasks_of(exec_id)?;
                self.store.close_execution(
                    exec_id,
                    crate::api::ExecutionStatus::Failed,
                    None,
                    Some("States.Runtime"),
                    Some("The engine failed while running this execution (an internal error); see the engine log."),
                    millis(now),
                )?;
                b.finished.push(exec_arn);
                return Ok(());
            }
        };
        loaded.dirty = true;
        let _span = tracing::debug_span!("transition", execution_arn = %exec_arn).entered();
        b.transitions += step
            .events
            .iter()
            .filter(|e| e.event_type.ends_with("StateEntered"))
            .count() as u64;
        self.store.append_events(exec_id, &step.events)?;
        for action in step.actions {
            self.act(b, exec_id, &exec_arn, action, now)?;
        }
        Ok(())
    }

    fn act(
        &mut self,
        b: &mut Batch,
        exec_id: i64,
        exec_arn: &str,
        action: Action,
        now: DateTime<Utc>,
    ) -> Sql<()> {
        match action {
            Action::ScheduleTask(t) => {
                let activity = self.activities.contains(&t.resource);
                let input_text = t.input.to_string();
                self.store.insert_task(
                    &t.token,
                    exec_id,
                    activity.then_some(t.resource.as_str()),
                    &t.resource,
                    &t.state_name,
                    &input_text,
                    t.heartbeat_seconds,
                )?;
                if let Some(secs) = t.timeout_seconds {
                    let due = due_after(now, secs);
                    self.store
                        .set_timer(exec_id, TimerKind::TaskTimeout, &t.token, due)?;
                }
                if activity {
                    if let Some(poller) = self.live_poller(&t.resource) {
                        self.hand_out(
                            b,
                            &t.token,
                            exec_id,
                            Some(input_text),
                            poller.worker,
                            poller.reply,
                        )?;
                    }
                } else {
                    if let Some(h) = t.heartbeat_seconds {
                        let due = due_after(now, h);
                        self.store
                            .set_timer(exec_id, TimerKind::Heartbeat, &t.token, due)?;
                    }
                    b.invocations.push(TaskRequest {
                        resource: t.resource,
                        input: t.input,
                        task_token: t.token,
                        execution_arn: exec_arn.to_owned(),
                        state_name: t.state_name,
                    });
                }
            }
            Action::CloseTask { token } => self.store.close_task(&token)?,
            Action::StartHeartbeat {
                token,
                heartbeat_seconds,
            } => {
                self.store.set_timer(
                    exec_id,
                    TimerKind::Heartbeat,
                    &token,
                    due_after(now, heartbeat_seconds),
                )?;
            }
            Action::StartTimer { timer_id, due } => {
                self.store.set_timer(
                    exec_id,
                    TimerKind::Timer,
                    &timer_id.to_string(),
                    millis(due),
                )?;
            }
            Action::CancelTimer { timer_id } => {
                self.store
                    .delete_timer(exec_id, TimerKind::Timer, &timer_id.to_string())?;
            }
            Action::Finish(outcome) => {
                self.store.delete_timers_of(exec_id)?;
                if let Some(l) = b.loaded.get_mut(&exec_id) {
                    l.outcome = Some(outcome);
                }
                b.finished.push(exec_arn.to_owned());
            }
        }
        Ok(())
    }

    fn live_poller(&mut self, activity_arn: &str) -> Option<Poller> {
        let queue = self.pollers.get_mut(activity_arn)?;
        while let Some(p) = queue.pop_front() {
            if !p.reply.is_closed() {
                return Some(p);
            }
        }
        None
    }

    fn fire_timers(&mut self, b: &mut Batch, now: DateTime<Utc>) -> Sql<()> {
        let now_ms = millis(now);
        if self.next_due.is_none_or(|d| d > now_ms) {
            return Ok(());
        }
        loop {
            let due = self.store.take_due(now_ms, 1024)?;
            if due.is_empty() {
                break;
            }
            for t in due {
                let event = match t.kind {
                    TimerKind::Timer => match t.reference.parse() {
                        Ok(timer_id) => Event::TimerFired { timer_id },
                        Err(_) => continue,
                    },
                    TimerKind::TaskTimeout => Event::TaskTimedOut {
                        token: t.reference,
                        kind: TimeoutKind::Task,
                    },
                    TimerKind::Heartbeat => Event::TaskTimedOut {
                        token: t.reference,
                        kind: TimeoutKind::Heartbeat,
                    },
                    TimerKind::ExecutionTimeout => Event::ExecutionTimedOut,
                };
                b.events.push_back((t.exec_id, event));
            }
            self.drain(b, now)?;
        }
        Ok(())
    }

    fn flush(&mut self, b: &mut Batch, now: DateTime<Utc>) -> Sql<()> {
        for (id, l) in b.loaded.iter_mut() {
            if !l.dirty {
                continue;
            }
            match &l.outcome {
                Some(o) => {
                    let output = o.output.as_ref().map(|v| v.to_string());
                    self.store.close_execution(
                        *id,
                        o.status,
                        output.as_deref(),
                        o.error.as_deref(),
                        o.cause.as_deref(),
                        millis(now),
                    )?;
                }
                None => {
                    let bytes = serde_json::to_vec(&l.state).unwrap_or_default();
                    self.store.save_snapshot(*id, &bytes)?;
                }
            }
            l.dirty = false;
        }
        Ok(())
    }
}

fn info_of(row: StateMachineRow) -> StateMachineInfo {
    StateMachineInfo {
        state_machine_arn: row.arn,
        name: row.name,
        definition: row.definition,
        role_arn: row.role_arn,
        creation_date: from_millis(row.created_ms),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_due_time_is_seconds_after_now_and_never_overflows() {
        let now = from_millis(1_700_000_000_000);
        assert_eq!(due_after(now, 0), 1_700_000_000_000);
        assert_eq!(due_after(now, 90), 1_700_000_090_000);
        let latest = DateTime::<Utc>::MAX_UTC.timestamp_millis();
        assert_eq!(due_after(now, u64::MAX), latest);
        assert_eq!(due_after(now, i64::MAX as u64 / 1000), latest);
    }
}
