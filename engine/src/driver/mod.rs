//! The durable driver: owns the SQLite database, feeds events to the pure interpreter, commits
//! what it decides in grouped transactions, and only then acts (hands out tasks, arms timers,
//! answers).

mod versions;
mod writer;

use crate::arn;
use crate::core::{history, redrive};
use crate::db::{StartedBy, Store};
use crate::error::EngineError;
use crate::sfn::*;
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use writer::{Answer, Command, Writer};

/// How hard a commit is pushed to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyncPolicy {
    /// A commit survives power loss (the default): the writer's syncer flushes the WAL after
    /// it and only then answers (the `durable` crate).
    #[default]
    Full,
    /// No flush after a commit (SQLite's `synchronous=NORMAL` alone): survives a process crash,
    /// may lose the last commits on power loss.
    Normal,
}

/// Where the engine reads the time: the system clock, or one a test moves.
#[derive(Clone)]
pub struct Clock(Arc<dyn Fn() -> DateTime<Utc> + Send + Sync>);

impl Clock {
    pub fn system() -> Clock {
        Clock(Arc::new(Utc::now))
    }

    /// A clock that reads `now` (e.g. the system time plus an offset a test advances).
    pub fn from_fn(now: impl Fn() -> DateTime<Utc> + Send + Sync + 'static) -> Clock {
        Clock(Arc::new(now))
    }

    pub fn now(&self) -> DateTime<Utc> {
        (self.0)()
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::system()
    }
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Clock")
    }
}

#[derive(Debug, Clone)]
pub struct EngineConfig {
    pub db_path: PathBuf,
    /// Region in the ARNs the engine makes. Default `us-east-1`.
    pub region: String,
    /// Account id in the ARNs. Default `123456789012`.
    pub account_id: String,
    pub sync: SyncPolicy,
    /// The most events one grouped commit takes. Default 4096.
    pub max_batch: usize,
    /// Called on the writer thread before it runs: e.g. to lower its scheduling priority
    /// below the threads that answer requests. Default none.
    pub on_writer_start: Option<fn()>,
    /// The time every step, timer and redrive check reads. Default the system clock.
    pub clock: Clock,
    /// How long a closed execution is kept: past it, its row, history, tasks and timers are
    /// deleted (AWS keeps a closed Standard execution for 90 days). `None` keeps everything.
    /// Default `None`.
    pub retention: Option<Duration>,
    /// How many bytes of the JSON the engine stores (history details, payloads, snapshots)
    /// it samples to train the zstd dictionary that packs the rest, once per database; `0`
    /// never packs. Default 2 MiB (the first ~700 executions of a saga like ours).
    pub dictionary_samples: usize,
    /// How long a closed task's token is remembered: a late `SendTask*` with it is answered
    /// `TaskTimedOut` for this long, then `TaskDoesNotExist` (as AWS answers for a token it no
    /// longer has; callers treat both as "the task is gone"). Default 15 minutes.
    pub task_tombstones: Duration,
}

impl EngineConfig {
    pub fn new(db_path: impl Into<PathBuf>) -> Self {
        EngineConfig {
            db_path: db_path.into(),
            region: "us-east-1".to_owned(),
            account_id: "123456789012".to_owned(),
            sync: SyncPolicy::Full,
            max_batch: 4096,
            on_writer_start: None,
            clock: Clock::system(),
            retention: None,
            dictionary_samples: 2 * 1024 * 1024,
            task_tombstones: Duration::from_secs(15 * 60),
        }
    }
}

/// A parsed state machine the writer runs.
pub(crate) struct Machine {
    pub def: crate::asl::StateMachine,
    pub name: String,
    pub role_arn: String,
}

/// Counters the engine keeps about itself (for benchmarks and metrics).
#[derive(Debug, Default)]
pub struct Stats {
    /// Grouped transactions committed that wrote (an idle pass commits nothing to disk).
    pub commits: AtomicU64,
    /// States entered.
    pub transitions: AtomicU64,
    /// Closed executions deleted past the retention.
    pub pruned: AtomicU64,
}

/// The largest execution input, task output or history payload, as in AWS (256 KiB).
const MAX_PAYLOAD: usize = 262_144;

struct Inner {
    tx: mpsc::Sender<Command>,
    readers: Arc<Readers>,
    config: EngineConfig,
    stats: Arc<Stats>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// The read connections, beside the writer's. A read takes a permit before it goes to a
/// blocking thread, so there is always a free connection for it there: a burst of reads (every
/// start describes its execution first) waits as tasks, not as blocking threads parked on a
/// connection's lock (Tokio would start one a read, up to 512).
struct Readers {
    conns: Vec<Mutex<Store>>,
    permits: tokio::sync::Semaphore,
}

/// Read connections: reads are point lookups and history pages, a few at a time.
const READERS: usize = 2;

impl Readers {
    fn new(conns: Vec<Store>) -> Readers {
        Readers {
            permits: tokio::sync::Semaphore::new(conns.len()),
            conns: conns.into_iter().map(Mutex::new).collect(),
        }
    }

    /// A connection nobody holds (the caller has a permit, so there is one), else the first.
    fn free(&self) -> std::sync::MutexGuard<'_, Store> {
        self.conns
            .iter()
            .find_map(|c| match c.try_lock() {
                Ok(g) => Some(g),
                Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) => None,
            })
            .unwrap_or_else(|| self.conns[0].lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let _ = self.tx.send(Command::Shutdown { reply: None });
    }
}

/// A handle to a running engine. Cheap to clone.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

/// Claims the database for this engine: an exclusive advisory lock (`flock`) on the file, held
/// by the writer thread. A second engine on the same file, in this process or another (two
/// `fulfillment serve` started on one `--db`), would hand out the same tasks twice and fire the
/// same timers from stale copies of the state; it is refused instead. The lock dies with the
/// process, so a restart after a crash is never refused. Readers that do not run executions
/// (an audit, `sqlite3`) are not affected: SQLite's own locking does not use it.
fn claim(path: &std::path::Path) -> Result<std::fs::File, EngineError> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| EngineError::Internal(format!("cannot open {}: {e}", path.display())))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(EngineError::Unavailable(format!(
            "{} is in use by another engine (is another fulfillment process running on it?)",
            path.display()
        ))),
        Err(std::fs::TryLockError::Error(e)) => Err(EngineError::Internal(format!(
            "cannot lock {}: {e}",
            path.display()
        ))),
    }
}

fn unavailable() -> EngineError {
    EngineError::Unavailable("the engine is shut down".to_owned())
}

impl Engine {
    /// Opens (creating if needed) the database and resumes every running execution: timers
    /// fire when due (late, never lost), handed-out activity tasks keep their tokens, and
    /// unanswered handler tasks are invoked again. Must be called within a Tokio runtime.
    /// `task_handler` runs Task states whose resource is not an activity ARN.
    pub async fn open(
        config: EngineConfig,
        task_handler: Option<Arc<dyn TaskHandler>>,
    ) -> Result<Engine, EngineError> {
        let runtime = tokio::runtime::Handle::current();
        let (tx, rx) = mpsc::channel();
        let stats = Arc::new(Stats::default());
        let cfg = config.clone();
        let writer_tx = tx.clone();
        let writer_stats = stats.clone();
        let claim = claim(&config.db_path)?;
        let (store, readers) = tokio::task::spawn_blocking(move || {
            let store = Store::open(&cfg.db_path, cfg.sync, cfg.dictionary_samples)?;
            let readers = (0..READERS)
                .map(|_| Store::open_reader(&cfg.db_path))
                .collect::<Result<Vec<_>, _>>()?;
            Ok::<_, rusqlite::Error>((store, readers))
        })
        .await
        .map_err(|e| EngineError::Internal(e.to_string()))?
        .map_err(EngineError::storage)?;
        let mut writer = Writer::new(
            store,
            config.clone(),
            rx,
            writer_tx,
            runtime,
            task_handler,
            writer_stats,
        )
        .map_err(EngineError::storage)?;
        let recovered = writer.recover().map_err(EngineError::storage)?;
        if recovered > 0 {
            tracing::info!(tasks = recovered, "re-invoked unanswered handler tasks");
        }
        let on_writer_start = config.on_writer_start;
        let thread = std::thread::Builder::new()
            .name("sfn-engine-writer".to_owned())
            .spawn(move || {
                if let Some(hook) = on_writer_start {
                    hook();
                }
                // Held for as long as the writer runs: the database is this engine's until then.
                let _claim = claim;
                writer.run()
            })
            .map_err(|e| EngineError::Internal(e.to_string()))?;
        Ok(Engine {
            inner: Arc::new(Inner {
                tx,
                readers: Arc::new(Readers::new(readers)),
                config,
                stats,
                thread: Mutex::new(Some(thread)),
            }),
        })
    }

    pub fn config(&self) -> &EngineConfig {
        &self.inner.config
    }

    pub fn stats(&self) -> &Stats {
        &self.inner.stats
    }

    async fn call<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<T, EngineError>>) -> Command,
    ) -> Result<T, EngineError> {
        let (reply, rx) = oneshot::channel();
        self.inner.tx.send(make(reply)).map_err(|_| unavailable())?;
        rx.await.map_err(|_| unavailable())?
    }

    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Store) -> Result<T, rusqlite::Error> + Send + 'static,
    ) -> Result<T, EngineError> {
        // Never closed, so never an error. Held until the answer is back here, so the next
        // read finds the blocking thread this one used idle instead of starting another.
        let _permit = self.inner.readers.permits.acquire().await.ok();
        let readers = self.inner.readers.clone();
        tokio::task::spawn_blocking(move || f(&readers.free()))
            .await
            .map_err(|e| EngineError::Internal(e.to_string()))?
            .map_err(EngineError::storage)
    }

    /// Creates a STANDARD state machine. The same name with the same definition returns the
    /// existing one; a different definition is `StateMachineAlreadyExists` (change it with
    /// [`Engine::update_state_machine`]).
    pub async fn create_state_machine(
        &self,
        name: &str,
        definition: &str,
        role_arn: Option<&str>,
    ) -> Result<StateMachineInfo, EngineError> {
        let created = self
            .create_state_machine_with(CreateStateMachineInput {
                name: name.to_owned(),
                definition: definition.to_owned(),
                role_arn: role_arn.map(str::to_owned),
                ..Default::default()
            })
            .await?;
        self.describe_state_machine(&created.state_machine_arn)
            .await
    }

    /// `CreateStateMachine` with its optional members (`publish`, `versionDescription`).
    pub async fn create_state_machine_with(
        &self,
        input: CreateStateMachineInput,
    ) -> Result<CreateStateMachineOutput, EngineError> {
        arn::validate_name(&input.name).map_err(EngineError::InvalidName)?;
        crate::asl::parse(&input.definition)
            .map_err(|e| EngineError::InvalidDefinition(e.to_string()))?;
        versions::check_version_description(input.publish, input.version_description.as_deref())?;
        let role_arn = input.role_arn.unwrap_or_else(|| self.default_role());
        self.call(|reply| Command::CreateStateMachine {
            name: input.name,
            definition: input.definition,
            role_arn,
            publish: input.publish,
            version_description: input.version_description,
            reply,
        })
        .await
    }

    fn default_role(&self) -> String {
        format!(
            "arn:aws:iam::{}:role/StepFunctionsEngine",
            self.inner.config.account_id
        )
    }

    /// Creates an activity (idempotent by name).
    pub async fn create_activity(&self, name: &str) -> Result<ActivityInfo, EngineError> {
        arn::validate_name(name).map_err(EngineError::InvalidName)?;
        let name = name.to_owned();
        self.call(|reply| Command::CreateActivity { name, reply })
            .await
    }

    /// Starts an execution. The same name with the same input while it runs returns the same
    /// ARN; otherwise a reused name is `ExecutionAlreadyExists`.
    pub async fn start_execution(
        &self,
        input: StartExecutionInput,
    ) -> Result<StartExecutionOutput, EngineError> {
        if arn::MachineRef::parse(&input.state_machine_arn).is_none() {
            return Err(EngineError::InvalidArn(format!(
                "Invalid Arn: '{}'",
                input.state_machine_arn
            )));
        }
        let name = input
            .name
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        arn::validate_name(&name).map_err(EngineError::InvalidName)?;
        let input_text = input.input.unwrap_or_else(|| "{}".to_owned());
        if input_text.len() > MAX_PAYLOAD {
            return Err(EngineError::InvalidExecutionInput(format!(
                "Input is {} bytes; the limit is {MAX_PAYLOAD}",
                input_text.len()
            )));
        }
        let value: Value = serde_json::from_str(&input_text).map_err(|e| {
            EngineError::InvalidExecutionInput(format!(
                "Invalid State Machine Execution Input: {e}"
            ))
        })?;
        let sm_arn = input.state_machine_arn;
        self.call(|reply| Command::Start {
            sm_arn,
            name,
            input_text,
            input: value,
            reply,
        })
        .await
    }

    pub async fn describe_execution(&self, arn: &str) -> Result<ExecutionDescription, EngineError> {
        let key = arn.to_owned();
        let found = self
            .read(move |s| match s.execution_by_arn(&key)? {
                // Only a closed execution's history length can matter to a redrive.
                Some(row) if row.status.is_terminal() => {
                    let events = s.last_event_id(row.id)?;
                    Ok(Some((row, events)))
                }
                Some(row) => Ok(Some((row, 0))),
                None => Ok(None),
            })
            .await?;
        let (row, events) = found.ok_or_else(|| {
            EngineError::ExecutionDoesNotExist(format!("Execution Does Not Exist: '{arn}'"))
        })?;
        let refusal = redrive::refusal(
            &redrive::Facts {
                status: row.status,
                start: from_millis(row.start_ms),
                stop: row.stop_ms.map(from_millis),
                events,
                resumable: row.has_snapshot,
            },
            self.inner.config.clock.now(),
        );
        let (state_machine_version_arn, state_machine_alias_arn) =
            (row.version_arn(), row.alias_arn());
        Ok(ExecutionDescription {
            execution_arn: row.arn,
            state_machine_arn: row.sm_arn,
            name: row.name,
            status: row.status,
            start_date: from_millis(row.start_ms),
            stop_date: row.stop_ms.and_then(DateTime::from_timestamp_millis),
            input: row.input,
            output: row.output,
            error: row.error,
            cause: row.cause,
            redrive_count: row.redrive_count,
            redrive_date: row.redrive_ms.map(from_millis),
            redrive_status: match refusal {
                None => RedriveStatus::Redrivable,
                Some(_) => RedriveStatus::NotRedrivable,
            },
            redrive_status_reason: refusal.map(str::to_owned),
            state_machine_version_arn,
            state_machine_alias_arn,
        })
    }

    /// Waits until the execution is no longer RUNNING, or `timeout` passes (then returns its
    /// current description).
    pub async fn wait_for_completion(
        &self,
        arn: &str,
        timeout: Duration,
    ) -> Result<ExecutionDescription, EngineError> {
        let (reply, rx) = oneshot::channel();
        self.inner
            .tx
            .send(Command::WatchCompletion {
                arn: arn.to_owned(),
                reply,
            })
            .map_err(|_| unavailable())?;
        let _ = tokio::time::timeout(timeout, rx).await;
        self.describe_execution(arn).await
    }

    /// Executions of a state machine, newest first, optionally by status.
    pub async fn list_executions(
        &self,
        input: ListExecutionsInput,
    ) -> Result<ListExecutionsOutput, EngineError> {
        let limit = page_size(input.max_results)?;
        let before = parse_token(input.next_token.as_deref())?;
        // A version or alias ARN lists the executions started by it (as AWS does).
        let target = arn::MachineRef::parse(&input.state_machine_arn).ok_or_else(|| {
            EngineError::InvalidArn(format!("Invalid Arn: '{}'", input.state_machine_arn))
        })?;
        let started = match target.qualifier {
            arn::Qualifier::None => StartedBy::Any,
            arn::Qualifier::Version(n) => StartedBy::Version(n),
            arn::Qualifier::Alias(a) => StartedBy::Alias(a),
        };
        let sm_arn = target.machine;
        let status = input.status_filter;
        let (exists, rows) = self
            .read(move |s| {
                let exists = s.state_machine(&sm_arn)?.is_some();
                Ok((
                    exists,
                    s.list_executions(&sm_arn, status, &started, before, limit + 1)?,
                ))
            })
            .await?;
        if !exists {
            return Err(EngineError::StateMachineDoesNotExist(format!(
                "State Machine Does Not Exist: '{}'",
                input.state_machine_arn
            )));
        }
        let more = rows.len() > limit as usize;
        let rows: Vec<_> = rows.into_iter().take(limit as usize).collect();
        let next_token = if more {
            rows.last().map(|r| r.id.to_string())
        } else {
            None
        };
        Ok(ListExecutionsOutput {
            executions: rows
                .into_iter()
                .map(|r| ExecutionListItem {
                    execution_arn: r.arn,
                    state_machine_arn: r.sm_arn,
                    name: r.name,
                    status: r.status,
                    start_date: from_millis(r.start_ms),
                    stop_date: r.stop_ms.and_then(DateTime::from_timestamp_millis),
                    redrive_count: r.redrive_count,
                    redrive_date: r.redrive_ms.map(from_millis),
                })
                .collect(),
            next_token,
        })
    }

    /// The execution's history, oldest first unless `reverse_order`, a page at a time.
    pub async fn get_execution_history(
        &self,
        input: GetExecutionHistoryInput,
    ) -> Result<GetExecutionHistoryOutput, EngineError> {
        let limit = page_size(input.max_results)?;
        let cursor = parse_token(input.next_token.as_deref())?;
        let arn = input.execution_arn.clone();
        let reverse = input.reverse_order;
        let (found, rows) = self
            .read(move |s| match s.execution_by_arn(&arn)? {
                None => Ok((false, Vec::new())),
                Some(row) => Ok((true, s.events(row.id, cursor, reverse, limit + 1)?)),
            })
            .await?;
        if !found {
            return Err(EngineError::ExecutionDoesNotExist(format!(
                "Execution Does Not Exist: '{}'",
                input.execution_arn
            )));
        }
        let more = rows.len() > limit as usize;
        let include_data = input.include_execution_data.unwrap_or(true);
        let events: Vec<HistoryEvent> = rows
            .into_iter()
            .take(limit as usize)
            .map(|(id, prev, ts, event_type, details)| {
                let mut details = details.and_then(|d| serde_json::from_str::<Value>(&d).ok());
                if !include_data && let Some(d) = details.as_mut() {
                    history::strip_execution_data(d);
                }
                HistoryEvent {
                    timestamp: from_millis(ts),
                    event_type,
                    id: id as u64,
                    previous_event_id: prev as u64,
                    details,
                }
            })
            .collect();
        let next_token = if more {
            events.last().map(|e| e.id.to_string())
        } else {
            None
        };
        Ok(GetExecutionHistoryOutput { events, next_token })
    }

    /// Stops a running execution (ABORTED). Stopping a closed execution changes nothing.
    pub async fn stop_execution(
        &self,
        arn: &str,
        error: Option<&str>,
        cause: Option<&str>,
    ) -> Result<DateTime<chrono::Utc>, EngineError> {
        check_error_fields(error, cause)?;
        let (arn, error, cause) = (
            arn.to_owned(),
            error.map(str::to_owned),
            cause.map(str::to_owned),
        );
        self.call(|reply| Command::Stop {
            arn,
            error,
            cause,
            reply,
        })
        .await
    }

    /// Redrives a FAILED, ABORTED or TIMED_OUT execution closed less than 14 days ago: it runs
    /// again from the states where it stopped (see [`crate::core::redrive`]), under the same
    /// ARN, input and definition, and its history goes on with `ExecutionRedriven`. Returns
    /// the redrive date. A `client_token` makes the call idempotent: the same token answers
    /// the same date for 15 minutes, among the execution's 10 latest tokens.
    pub async fn redrive_execution(
        &self,
        arn: &str,
        client_token: Option<&str>,
    ) -> Result<DateTime<Utc>, EngineError> {
        if let Some(token) = client_token {
            check_client_token(token)?;
        }
        let (arn, client_token) = (arn.to_owned(), client_token.map(str::to_owned));
        self.call(|reply| Command::Redrive {
            arn,
            client_token,
            reply,
        })
        .await
    }

    /// Long-polls for a task of `activity_arn` for at most `wait`; `None` when there was none.
    pub async fn get_activity_task(
        &self,
        activity_arn: &str,
        worker_name: Option<&str>,
        wait: Duration,
    ) -> Result<Option<ActivityTask>, EngineError> {
        let deadline = Instant::now() + wait;
        let (activity_arn, worker) = (activity_arn.to_owned(), worker_name.map(str::to_owned));
        self.call(|reply| Command::Poll {
            activity_arn,
            worker,
            deadline,
            reply,
        })
        .await
    }

    pub async fn send_task_success(&self, token: &str, output: &str) -> Result<(), EngineError> {
        check_token(token)?;
        if output.len() > MAX_PAYLOAD {
            return Err(EngineError::InvalidOutput(format!(
                "Output is {} bytes; the limit is {MAX_PAYLOAD}",
                output.len()
            )));
        }
        let value: Value = serde_json::from_str(output)
            .map_err(|e| EngineError::InvalidOutput(format!("Invalid Output: {e}")))?;
        let token = token.to_owned();
        self.call(|reply| Command::Answer {
            token,
            answer: Answer::Success(value),
            reply: Some(reply),
        })
        .await
    }

    pub async fn send_task_failure(
        &self,
        token: &str,
        error: Option<&str>,
        cause: Option<&str>,
    ) -> Result<(), EngineError> {
        check_token(token)?;
        check_error_fields(error, cause)?;
        let answer = Answer::Failure {
            error: error.map(str::to_owned),
            cause: cause.map(str::to_owned),
        };
        let token = token.to_owned();
        self.call(|reply| Command::Answer {
            token,
            answer,
            reply: Some(reply),
        })
        .await
    }

    /// Resets the task's heartbeat clock (never its TimeoutSeconds).
    pub async fn send_task_heartbeat(&self, token: &str) -> Result<(), EngineError> {
        check_token(token)?;
        let token = token.to_owned();
        self.call(|reply| Command::Heartbeat { token, reply }).await
    }

    /// Times out now, as if their workers had stopped heartbeating, the tasks of these
    /// activities that workers hold (a lapsed heartbeat: `States.Timeout`, which a Retry naming
    /// `States.HeartbeatTimeout` hands out again); tasks with no heartbeat are left alone. For an owner whose workers
    /// are known to be gone — the process that polled them died — so that their tasks need not
    /// wait out `HeartbeatSeconds`. Returns how many tasks it timed out.
    pub async fn expire_heartbeats(&self, activity_arns: &[String]) -> Result<u64, EngineError> {
        let activity_arns = activity_arns.to_vec();
        self.call(|reply| Command::ExpireHeartbeats {
            activity_arns,
            reply,
        })
        .await
    }

    /// Stops the writer after the commands already queued; running executions stay in the
    /// database and continue on the next open.
    pub async fn shutdown(&self) {
        let (reply, rx) = oneshot::channel();
        if self
            .inner
            .tx
            .send(Command::Shutdown { reply: Some(reply) })
            .is_ok()
        {
            let _ = rx.await;
        }
        let handle = self
            .inner
            .thread
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(h) = handle {
            let _ = tokio::task::spawn_blocking(move || h.join()).await;
        }
    }
}

fn page_size(max_results: Option<u32>) -> Result<u32, EngineError> {
    match max_results {
        None | Some(0) => Ok(100),
        Some(n) if n <= 1000 => Ok(n),
        Some(n) => Err(EngineError::Validation(format!(
            "maxResults must be at most 1000, got {n}"
        ))),
    }
}

fn parse_token(token: Option<&str>) -> Result<Option<i64>, EngineError> {
    token
        .map(|t| {
            t.parse()
                .map_err(|_| EngineError::Validation("Invalid nextToken".to_owned()))
        })
        .transpose()
}

/// Tokens are base64url text of bounded length; anything else cannot be one of ours.
fn check_token(token: &str) -> Result<(), EngineError> {
    let ok = !token.is_empty()
        && token.len() <= 2048
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(EngineError::InvalidToken("Invalid Token".to_owned()))
    }
}

/// AWS's `clientToken`: 1 to 64 printable ASCII characters, no space.
fn check_client_token(token: &str) -> Result<(), EngineError> {
    let ok = (1..=64).contains(&token.len()) && token.bytes().all(|b| (b'!'..=b'~').contains(&b));
    if ok {
        Ok(())
    } else {
        Err(EngineError::Validation(
            "clientToken must be 1 to 64 printable ASCII characters without spaces".to_owned(),
        ))
    }
}

fn from_millis(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or_default()
}

fn check_error_fields(error: Option<&str>, cause: Option<&str>) -> Result<(), EngineError> {
    if error.is_some_and(|e| e.chars().count() > 256) {
        return Err(EngineError::Validation(
            "error must be at most 256 characters".to_owned(),
        ));
    }
    if cause.is_some_and(|c| c.chars().count() > 32_768) {
        return Err(EngineError::Validation(
            "cause must be at most 32768 characters".to_owned(),
        ));
    }
    Ok(())
}
