//! The engine's own SQLite database (not the service's `store` crate): schema, migrations and
//! every query. Writes happen only on the driver's writer thread inside its grouped
//! transactions; reads use their own connection (WAL lets them run beside the writer).

mod codec;

use crate::core::history::{EventDraft, untruncated};
use crate::driver::SyncPolicy;
use crate::sfn::ExecutionStatus;
use codec::Codec;
use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;
use std::fmt::Write as _;
use std::path::Path;

pub type Result<T> = std::result::Result<T, rusqlite::Error>;

/// The fields of an event's details that hold payloads, and the size from which one is stored
/// apart (see [`Store::append_events`]).
const SHARED_FIELDS: [&str; 2] = ["input", "output"];
const SHARED_PAYLOAD_MIN: usize = 64;
/// The key of a payload's reference in an event's stored details: `{"$payload": key}`, with
/// `"$bare": true` when the event had no `…Details` beside the payload.
const PAYLOAD_REF: &str = "$payload";
const BARE: &str = "$bare";

/// A payload's key: the first 8 bytes of its SHA-256 (stable across builds, so a payload stored
/// by one is found again by the next).
fn payload_key(text: &str) -> i64 {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(text.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_le_bytes(first)
}

/// The history's event types, each stored as its index here (one byte) instead of its name
/// (about 16): append only, never reorder, as stored rows hold these numbers. A type not
/// listed is stored as its name, which reads back the same.
const EVENT_TYPES: &[&str] = &[
    "ActivityFailed",
    "ActivityScheduleFailed",
    "ActivityScheduled",
    "ActivityStarted",
    "ActivitySucceeded",
    "ActivityTimedOut",
    "ChoiceStateEntered",
    "ChoiceStateExited",
    "ExecutionAborted",
    "ExecutionFailed",
    "ExecutionStarted",
    "ExecutionSucceeded",
    "ExecutionTimedOut",
    "ExecutionRedriven",
    "FailStateEntered",
    "LambdaFunctionFailed",
    "LambdaFunctionScheduleFailed",
    "LambdaFunctionScheduled",
    "LambdaFunctionStartFailed",
    "LambdaFunctionStarted",
    "LambdaFunctionSucceeded",
    "LambdaFunctionTimedOut",
    "MapIterationAborted",
    "MapIterationFailed",
    "MapIterationStarted",
    "MapIterationSucceeded",
    "MapStateAborted",
    "MapStateEntered",
    "MapStateExited",
    "MapStateFailed",
    "MapStateStarted",
    "MapStateSucceeded",
    "ParallelStateAborted",
    "ParallelStateEntered",
    "ParallelStateExited",
    "ParallelStateFailed",
    "ParallelStateStarted",
    "ParallelStateSucceeded",
    "PassStateEntered",
    "PassStateExited",
    "SucceedStateEntered",
    "SucceedStateExited",
    "TaskFailed",
    "TaskScheduled",
    "TaskStartFailed",
    "TaskStarted",
    "TaskStateAborted",
    "TaskStateEntered",
    "TaskStateExited",
    "TaskSubmitFailed",
    "TaskSubmitted",
    "TaskSucceeded",
    "TaskTimedOut",
    "WaitStateAborted",
    "WaitStateEntered",
    "WaitStateExited",
];

/// An event type as stored: its index in [`EVENT_TYPES`] (the column's TEXT affinity keeps
/// it as one or two digits), else its name.
fn stored_event_type(name: &str) -> std::borrow::Cow<'_, str> {
    match EVENT_TYPES.iter().position(|t| *t == name) {
        Some(i) => i.to_string().into(),
        None => name.into(),
    }
}

/// An event type as read: a stored index, or a name as it was stored (no name is digits).
fn event_type_of(r: &rusqlite::Row, i: usize) -> Result<String> {
    event_type_named(r.get(i)?, i)
}

fn event_type_named(stored: String, i: usize) -> Result<String> {
    match stored.parse::<usize>() {
        Ok(n) => EVENT_TYPES.get(n).map(|t| (*t).to_owned()).ok_or_else(|| {
            rusqlite::Error::FromSqlConversionFailure(
                i,
                rusqlite::types::Type::Text,
                format!("unknown event type {n}").into(),
            )
        }),
        Err(_) => Ok(stored),
    }
}

/// One event of a row of several (`Store::append_events`): `id`, previous id, time, type and
/// details (empty: none), tab-separated.
fn event_line(line: &str) -> Result<EventRow> {
    let bad = || {
        rusqlite::Error::FromSqlConversionFailure(
            4,
            rusqlite::types::Type::Text,
            format!("a history line that does not read: {line:.80}").into(),
        )
    };
    let mut fields = line.splitn(5, '\t');
    let mut number =
        || -> Result<i64> { fields.next().and_then(|f| f.parse().ok()).ok_or_else(bad) };
    let (id, prev, ts) = (number()?, number()?, number()?);
    let kind = event_type_named(fields.next().ok_or_else(bad)?.to_owned(), 3)?;
    let details = fields.next().ok_or_else(bad)?;
    Ok((
        id,
        prev,
        ts,
        kind,
        (!details.is_empty()).then(|| details.to_owned()),
    ))
}

/// Each entry moves the schema one version forward; applied in order, once.
const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE state_machines (
    arn        TEXT PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    definition TEXT NOT NULL,
    role_arn   TEXT NOT NULL,
    created_ms INTEGER NOT NULL
);
CREATE TABLE activities (
    arn        TEXT PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    created_ms INTEGER NOT NULL
);
CREATE TABLE executions (
    id       INTEGER PRIMARY KEY,
    arn      TEXT NOT NULL UNIQUE,
    sm_arn   TEXT NOT NULL,
    name     TEXT NOT NULL,
    status   TEXT NOT NULL,
    input    TEXT NOT NULL,
    output   TEXT,
    error    TEXT,
    cause    TEXT,
    start_ms INTEGER NOT NULL,
    stop_ms  INTEGER,
    -- The interpreter's state while RUNNING; NULL once the execution has ended.
    snapshot BLOB
);
CREATE INDEX executions_by_machine ON executions (sm_arn, id);
CREATE INDEX executions_by_status ON executions (sm_arn, status, id);
CREATE TABLE history (
    exec_id INTEGER NOT NULL,
    id      INTEGER NOT NULL,
    prev    INTEGER NOT NULL,
    ts_ms   INTEGER NOT NULL,
    type    TEXT NOT NULL,
    details TEXT,
    PRIMARY KEY (exec_id, id)
) WITHOUT ROWID;
-- status: 0 scheduled (waiting for a worker), 1 started (handed out), 2 closed.
CREATE TABLE tasks (
    seq           INTEGER PRIMARY KEY,
    token         TEXT NOT NULL UNIQUE,
    exec_id       INTEGER NOT NULL,
    activity_arn  TEXT,
    resource      TEXT NOT NULL,
    state_name    TEXT NOT NULL,
    input         TEXT,
    status        INTEGER NOT NULL,
    heartbeat_s   INTEGER,
    worker        TEXT
);
CREATE INDEX tasks_queue ON tasks (activity_arn, seq) WHERE status = 0;
CREATE INDEX tasks_open_handlers ON tasks (seq) WHERE status < 2 AND activity_arn IS NULL;
-- kind: 1 interpreter timer (ref = timer id), 2 task timeout, 3 heartbeat (ref = token; the
-- task's seq since migration 5),
-- 4 execution timeout.
CREATE TABLE timers (
    exec_id INTEGER NOT NULL,
    kind    INTEGER NOT NULL,
    ref     TEXT NOT NULL,
    due_ms  INTEGER NOT NULL,
    PRIMARY KEY (exec_id, kind, ref)
) WITHOUT ROWID;
CREATE INDEX timers_by_due ON timers (due_ms);
"#,
    r#"
-- RedriveExecution. A FAILED, ABORTED or TIMED_OUT execution keeps its snapshot: where it
-- stopped, which a redrive resumes.
ALTER TABLE executions ADD COLUMN redrive_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE executions ADD COLUMN redrive_ms INTEGER;
-- The client tokens of successful redrives, answered again for 15 minutes.
CREATE TABLE redrive_tokens (
    exec_id INTEGER NOT NULL,
    token   TEXT NOT NULL,
    used_ms INTEGER NOT NULL,
    PRIMARY KEY (exec_id, token)
) WITHOUT ROWID;
"#,
    r#"
-- Retention: closed executions by when they closed (a redrive reopens one: its stop_ms is NULL
-- again), and each execution's tasks, which the pruner deletes with it.
CREATE INDEX executions_closed ON executions (stop_ms) WHERE stop_ms IS NOT NULL;
CREATE INDEX tasks_by_execution ON tasks (exec_id);
-- The history's large payloads (an event's `input` or `output`), each stored once per
-- execution and referenced from the events by its key (see `Store::append_events`).
CREATE TABLE payloads (
    exec_id INTEGER NOT NULL,
    key     INTEGER NOT NULL,
    body    TEXT NOT NULL,
    PRIMARY KEY (exec_id, key)
) WITHOUT ROWID;
"#,
    r#"
-- The zstd dictionaries the stored JSON is packed with (see `db/codec.rs`); never deleted.
CREATE TABLE dictionaries (
    id         INTEGER PRIMARY KEY,
    body       BLOB NOT NULL,
    created_ms INTEGER NOT NULL
);
"#,
    r#"
-- A closed task is kept as a tombstone (its token, to answer a late `Send*` with TaskTimedOut)
-- until `closed_ms` is older than the engine's tombstone window; then deleted, and a late
-- answer gets TaskDoesNotExist, as AWS gives for a token it no longer has. The tasks closed
-- before this version have no time: they are past any window.
ALTER TABLE tasks ADD COLUMN closed_ms INTEGER;
UPDATE tasks SET closed_ms = 0 WHERE status = 2;
CREATE INDEX tasks_closed ON tasks (closed_ms) WHERE status = 2;
-- A task's timers (task timeout, heartbeat) name the task by its seq, not its 60-byte token
-- (the timer and its index held the token twice).
UPDATE timers SET ref = COALESCE((SELECT CAST(seq AS TEXT) FROM tasks WHERE tasks.token = timers.ref), ref)
    WHERE kind IN (2, 3);
"#,
    r#"
-- An execution names its state machine by the machine's id, not its ARN's text, and its own ARN
-- is made from the machine's and its name (`execution_arn`): the two ARNs were ~170 bytes of
-- every row and were held again by three indexes. The machines get an explicit id (a VACUUM
-- may renumber an implicit rowid).
CREATE TABLE state_machines_v6 (
    id         INTEGER PRIMARY KEY,
    arn        TEXT NOT NULL UNIQUE,
    name       TEXT NOT NULL UNIQUE,
    definition TEXT NOT NULL,
    role_arn   TEXT NOT NULL,
    created_ms INTEGER NOT NULL
);
INSERT INTO state_machines_v6 (arn, name, definition, role_arn, created_ms)
    SELECT arn, name, definition, role_arn, created_ms FROM state_machines ORDER BY created_ms, arn;
DROP TABLE state_machines;
ALTER TABLE state_machines_v6 RENAME TO state_machines;
CREATE TABLE executions_v6 (
    id            INTEGER PRIMARY KEY,
    machine       INTEGER NOT NULL,
    name          TEXT NOT NULL,
    status        TEXT NOT NULL,
    input         TEXT NOT NULL,
    output        TEXT,
    error         TEXT,
    cause         TEXT,
    start_ms      INTEGER NOT NULL,
    stop_ms       INTEGER,
    snapshot      BLOB,
    redrive_count INTEGER NOT NULL DEFAULT 0,
    redrive_ms    INTEGER
);
INSERT INTO executions_v6
    SELECT e.id, m.id, e.name, e.status, e.input, e.output, e.error, e.cause, e.start_ms,
           e.stop_ms, e.snapshot, e.redrive_count, e.redrive_ms
    FROM executions e JOIN state_machines m ON m.arn = e.sm_arn;
DROP TABLE executions;
ALTER TABLE executions_v6 RENAME TO executions;
CREATE UNIQUE INDEX executions_by_name ON executions (machine, name);
CREATE INDEX executions_by_machine ON executions (machine, id);
CREATE INDEX executions_by_status ON executions (machine, status, id);
CREATE INDEX executions_closed ON executions (stop_ms) WHERE stop_ms IS NOT NULL;
"#,
    r#"
-- The events one transition appends are stored as one row (one insert, one packed value):
-- `id` is its first event's, `last` its last event's, and `details` holds every event (see
-- `Store::append_events`). NULL: a row of one event, as every row was before.
ALTER TABLE history ADD COLUMN last INTEGER;
"#,
];

/// An execution's ARN: its machine's, as `execution`, with its name after the machine's.
fn execution_arn(sm_arn: &str, name: &str) -> String {
    format!(
        "{}:{name}",
        sm_arn.replacen(":stateMachine:", ":execution:", 1)
    )
}

/// The machine's ARN and the execution's name in an execution's ARN (`None`: not one).
fn split_execution_arn(arn: &str) -> Option<(String, &str)> {
    crate::arn::parts(arn, "execution").filter(|p| p.len() == 2)?;
    let (head, name) = arn.rsplit_once(':')?;
    let (prefix, machine) = head.rsplit_once(':')?;
    let prefix = prefix.strip_suffix(":execution")?;
    Some((format!("{prefix}:stateMachine:{machine}"), name))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimerKind {
    Timer = 1,
    TaskTimeout = 2,
    Heartbeat = 3,
    ExecutionTimeout = 4,
}

impl TimerKind {
    /// A timer of a task (its ref is the task's seq).
    fn is_task(self) -> bool {
        matches!(self, TimerKind::TaskTimeout | TimerKind::Heartbeat)
    }

    fn from_i64(v: i64) -> Option<Self> {
        Some(match v {
            1 => TimerKind::Timer,
            2 => TimerKind::TaskTimeout,
            3 => TimerKind::Heartbeat,
            4 => TimerKind::ExecutionTimeout,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone)]
pub struct StateMachineRow {
    pub arn: String,
    pub name: String,
    pub definition: String,
    pub role_arn: String,
    pub created_ms: i64,
}

#[derive(Debug, Clone)]
pub struct ExecutionRow {
    pub id: i64,
    pub arn: String,
    pub sm_arn: String,
    pub name: String,
    pub status: ExecutionStatus,
    pub input: String,
    pub output: Option<String>,
    pub error: Option<String>,
    pub cause: Option<String>,
    pub start_ms: i64,
    pub stop_ms: Option<i64>,
    pub redrive_count: u32,
    pub redrive_ms: Option<i64>,
    /// A snapshot is stored: while RUNNING, the state; once closed, the redrive point.
    pub has_snapshot: bool,
}

/// Where a task is, as the `tasks` table's `status` column holds it (the queries name these
/// numbers: `status = 0` is the queue, `status < 2` the open tasks).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskStatus {
    /// Waiting for a worker to poll it.
    Scheduled = 0,
    /// Handed out to a worker (or, for a callback, to its handler).
    Started = 1,
    /// Answered, timed out, or its execution ended: its token is dead.
    Closed = 2,
}

impl rusqlite::types::FromSql for TaskStatus {
    fn column_result(value: rusqlite::types::ValueRef<'_>) -> rusqlite::types::FromSqlResult<Self> {
        match value.as_i64()? {
            0 => Ok(TaskStatus::Scheduled),
            1 => Ok(TaskStatus::Started),
            2 => Ok(TaskStatus::Closed),
            n => Err(rusqlite::types::FromSqlError::OutOfRange(n)),
        }
    }
}

#[derive(Debug, Clone)]
pub struct TaskRow {
    pub token: String,
    pub exec_id: i64,
    pub activity_arn: Option<String>,
    pub resource: String,
    pub state_name: String,
    pub input: Option<String>,
    pub status: TaskStatus,
    pub heartbeat_s: Option<i64>,
}

#[derive(Debug, Clone)]
pub struct DueTimer {
    pub exec_id: i64,
    pub kind: TimerKind,
    pub reference: String,
}

pub struct Store {
    conn: Connection,
    /// Packs the JSON the writer stores and unpacks what any connection reads (`codec.rs`).
    codec: std::cell::RefCell<Codec>,
    /// With [`SyncPolicy::Full`], the WAL the writer's syncer flushes after each commit before
    /// anyone is answered (the `durable` crate); taken by the writer.
    wal: Option<std::fs::File>,
}

/// A history row: id, previous event id, timestamp (ms), type, details (JSON).
pub type EventRow = (i64, i64, i64, String, Option<String>);

/// An execution's columns, with its machine's ARN: `SELECT {EXECUTION_COLUMNS} FROM
/// {EXECUTIONS} WHERE …`.
const EXECUTION_COLUMNS: &str = "e.id, m.arn, e.name, e.status, e.input, e.output, e.error, \
     e.cause, e.start_ms, e.stop_ms, e.redrive_count, e.redrive_ms, e.snapshot IS NOT NULL";
const EXECUTIONS: &str = "executions e JOIN state_machines m ON m.id = e.machine";

fn execution_row(store: &Store, r: &rusqlite::Row) -> Result<ExecutionRow> {
    let status: String = r.get(3)?;
    let sm_arn: String = r.get(1)?;
    let name: String = r.get(2)?;
    Ok(ExecutionRow {
        id: r.get(0)?,
        arn: execution_arn(&sm_arn, &name),
        sm_arn,
        name,
        status: ExecutionStatus::parse(&status).unwrap_or(ExecutionStatus::Failed),
        input: store.lenient_text(r, 4)?.unwrap_or_default(),
        output: store.lenient_text(r, 5)?,
        error: r.get(6)?,
        cause: r.get(7)?,
        start_ms: r.get(8)?,
        stop_ms: r.get(9)?,
        redrive_count: r.get(10)?,
        redrive_ms: r.get(11)?,
        has_snapshot: r.get(12)?,
    })
}

/// What closing a task leaves of its row: its token, its execution, the closed status and
/// when it closed (the first parameter).
const CLOSED_TASK: &str = "status = 2, closed_ms = ?, input = NULL, worker = NULL, \
     activity_arn = NULL, resource = '', state_name = ''";

const TASK_COLUMNS: &str =
    "token, exec_id, activity_arn, resource, state_name, input, status, heartbeat_s";

fn task_row(r: &rusqlite::Row) -> Result<TaskRow> {
    Ok(TaskRow {
        token: r.get(0)?,
        exec_id: r.get(1)?,
        activity_arn: r.get(2)?,
        resource: r.get(3)?,
        state_name: r.get(4)?,
        input: r.get(5)?,
        status: r.get(6)?,
        heartbeat_s: r.get(7)?,
    })
}

/// An I/O failure outside SQLite, as SQLite would report one.
pub(crate) fn io_failure(what: String) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_IOERR),
        Some(what),
    )
}

impl Store {
    /// Opens the database, sets WAL and the sync policy, and brings the schema up to date.
    /// The first `dictionary_samples` bytes of JSON it stores train the dictionary that packs
    /// the rest (`0`: stored as text; see `codec.rs`).
    /// With [`SyncPolicy::Full`] SQLite still runs with `synchronous=NORMAL`: the writer flushes
    /// the WAL itself, on another thread, before it answers for a commit ([`Store::take_wal`]).
    pub fn open(path: &Path, sync: SyncPolicy, dictionary_samples: usize) -> Result<Store> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        // Checkpoints run on the writer thread between batches; keep the WAL bounded.
        conn.pragma_update(None, "wal_autocheckpoint", 4000)?;
        // A reader that holds a snapshot long (`fulfillment backup`) holds checkpoints back and
        // the WAL grows meanwhile; once checkpointed, it is cut back to this size.
        conn.pragma_update(None, "journal_size_limit", 64 * 1024 * 1024)?;
        conn.set_prepared_statement_cache_capacity(64);
        let mut store = Store {
            conn,
            codec: std::cell::RefCell::new(Codec::reader()),
            wal: None,
        };
        store.incremental_vacuum_on()?;
        store.migrate()?;
        *store.codec.borrow_mut() = Codec::writer(&store.conn, dictionary_samples)?;
        if sync == SyncPolicy::Full {
            store.wal = Some(durable::wal_of(path).map_err(|e| {
                io_failure(format!("cannot open the WAL of {}: {e}", path.display()))
            })?);
        }
        Ok(store)
    }

    /// The WAL to flush after each commit, once (see the field).
    pub fn take_wal(&mut self) -> Option<std::fs::File> {
        self.wal.take()
    }

    /// A second connection for reads.
    pub fn open_reader(path: &Path) -> Result<Store> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.set_prepared_statement_cache_capacity(32);
        Ok(Store {
            conn,
            codec: std::cell::RefCell::new(Codec::reader()),
            wal: None,
        })
    }

    /// A read-only connection to an existing file, for another process than the engine's
    /// (WAL lets it read beside the writer): nothing is created, migrated or written. The file
    /// must hold this build's schema.
    pub fn open_read_only(path: &Path) -> Result<Store> {
        use rusqlite::OpenFlags;
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
        if version != MIGRATIONS.len() as i64 {
            return Err(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_MISMATCH),
                Some(format!(
                    "{} has engine schema version {version}, this build reads {}",
                    path.display(),
                    MIGRATIONS.len()
                )),
            ));
        }
        conn.set_prepared_statement_cache_capacity(8);
        Ok(Store {
            conn,
            codec: std::cell::RefCell::new(Codec::reader()),
            wal: None,
        })
    }

    /// Makes the file give freed pages back to the file system on request
    /// (`auto_vacuum=INCREMENTAL`, see [`Store::release_free_pages`]). A file made before this
    /// setting existed is rewritten once (`VACUUM`), which takes time in proportion to its size.
    fn incremental_vacuum_on(&self) -> Result<()> {
        let mode: i64 = self
            .conn
            .pragma_query_value(None, "auto_vacuum", |r| r.get(0))?;
        if mode == 2 {
            return Ok(());
        }
        self.conn
            .pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
        let pages: i64 = self
            .conn
            .pragma_query_value(None, "page_count", |r| r.get(0))?;
        if pages > 0 {
            let started = std::time::Instant::now();
            self.conn.execute_batch("VACUUM")?;
            tracing::info!(
                pages,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "engine database rewritten once for incremental vacuum"
            );
        }
        Ok(())
    }

    fn migrate(&self) -> Result<()> {
        let version: i64 = self
            .conn
            .pragma_query_value(None, "user_version", |r| r.get(0))?;
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            let tx = self.conn.unchecked_transaction()?;
            tx.execute_batch(sql)?;
            tx.pragma_update(None, "user_version", (i + 1) as i64)?;
            tx.commit()?;
        }
        Ok(())
    }

    pub fn begin(&self) -> Result<()> {
        self.conn.execute_batch("BEGIN IMMEDIATE")
    }

    pub fn commit(&self) -> Result<()> {
        self.conn.execute_batch("COMMIT")?;
        self.codec.borrow_mut().committed();
        Ok(())
    }

    /// Rows inserted, updated or deleted on this connection since it opened: a transaction that
    /// leaves it unchanged wrote nothing (and its commit wrote nothing to disk).
    pub fn total_changes(&self) -> u64 {
        self.conn.total_changes()
    }

    pub fn rollback(&self) {
        let _ = self.conn.execute_batch("ROLLBACK");
        self.codec.borrow_mut().rolled_back();
    }

    /// `text` as it is to be stored: packed once a dictionary exists (`codec.rs`).
    fn pack<'a>(&self, text: &'a [u8]) -> Result<codec::Packed<'a>> {
        self.codec.borrow_mut().pack(&self.conn, text)
    }

    /// Column `i` as text, bytes that are not UTF-8 replaced: an execution's input or output,
    /// which the writer reads to run it (a corrupt one reads as what it is, not JSON, as a
    /// corrupt text value would, rather than stopping the writer).
    fn lenient_text(&self, r: &rusqlite::Row, i: usize) -> Result<Option<String>> {
        let bytes = self.codec.borrow_mut().unpack(&self.conn, r.get_ref(i)?)?;
        Ok(bytes.map(|b| match String::from_utf8(b) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        }))
    }

    /// Column `i` of a row as text: stored plain or packed (`codec.rs`).
    fn text(&self, r: &rusqlite::Row, i: usize) -> Result<Option<String>> {
        let bytes = self.codec.borrow_mut().unpack(&self.conn, r.get_ref(i)?)?;
        bytes
            .map(|b| {
                String::from_utf8(b).map_err(|e| {
                    rusqlite::Error::FromSqlConversionFailure(
                        i,
                        rusqlite::types::Type::Text,
                        e.into(),
                    )
                })
            })
            .transpose()
    }

    // ---- state machines and activities ------------------------------------------------------

    pub fn state_machine(&self, arn: &str) -> Result<Option<StateMachineRow>> {
        self.conn
            .prepare_cached(
                "SELECT arn, name, definition, role_arn, created_ms FROM state_machines WHERE arn = ?",
            )?
            .query_row([arn], |r| {
                Ok(StateMachineRow {
                    arn: r.get(0)?,
                    name: r.get(1)?,
                    definition: r.get(2)?,
                    role_arn: r.get(3)?,
                    created_ms: r.get(4)?,
                })
            })
            .optional()
    }

    pub fn insert_state_machine(&self, row: &StateMachineRow) -> Result<()> {
        self.conn
            .prepare_cached(
                "INSERT INTO state_machines (arn, name, definition, role_arn, created_ms) VALUES (?, ?, ?, ?, ?)",
            )?
            .execute(params![row.arn, row.name, row.definition, row.role_arn, row.created_ms])?;
        Ok(())
    }

    pub fn activity_created(&self, arn: &str) -> Result<Option<i64>> {
        self.conn
            .prepare_cached("SELECT created_ms FROM activities WHERE arn = ?")?
            .query_row([arn], |r| r.get(0))
            .optional()
    }

    pub fn insert_activity(&self, arn: &str, name: &str, created_ms: i64) -> Result<()> {
        self.conn
            .prepare_cached("INSERT INTO activities (arn, name, created_ms) VALUES (?, ?, ?)")?
            .execute(params![arn, name, created_ms])?;
        Ok(())
    }

    pub fn activity_arns(&self) -> Result<Vec<String>> {
        let mut stmt = self.conn.prepare("SELECT arn FROM activities")?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        rows.collect()
    }

    // ---- executions -------------------------------------------------------------------------

    pub fn execution_by_arn(&self, arn: &str) -> Result<Option<ExecutionRow>> {
        let Some((sm_arn, name)) = split_execution_arn(arn) else {
            return Ok(None);
        };
        self.conn
            .prepare_cached(&format!(
                "SELECT {EXECUTION_COLUMNS} FROM {EXECUTIONS} WHERE m.arn = ? AND e.name = ?"
            ))?
            .query_row(params![sm_arn, name], |r| execution_row(self, r))
            .optional()
    }

    pub fn execution_by_id(&self, id: i64) -> Result<Option<ExecutionRow>> {
        self.conn
            .prepare_cached(&format!(
                "SELECT {EXECUTION_COLUMNS} FROM {EXECUTIONS} WHERE e.id = ?"
            ))?
            .query_row([id], |r| execution_row(self, r))
            .optional()
    }

    pub fn snapshot(&self, id: i64) -> Result<Option<Vec<u8>>> {
        self.conn
            .prepare_cached("SELECT snapshot FROM executions WHERE id = ?")?
            .query_row([id], |r| {
                self.codec.borrow_mut().unpack(&self.conn, r.get_ref(0)?)
            })
            .optional()
            .map(Option::flatten)
    }

    /// Inserts an execution of an existing machine (`row.sm_arn`); its id.
    pub fn insert_execution(&self, row: &ExecutionRow) -> Result<i64> {
        let inserted = self
            .conn
            .prepare_cached(
                "INSERT INTO executions (machine, name, status, input, start_ms) \
                 SELECT id, ?, ?, ?, ? FROM state_machines WHERE arn = ?",
            )?
            .execute(params![
                row.name,
                row.status.as_str(),
                self.pack(row.input.as_bytes())?,
                row.start_ms,
                row.sm_arn
            ])?;
        if inserted != 1 {
            return Err(rusqlite::Error::QueryReturnedNoRows);
        }
        Ok(self.conn.last_insert_rowid())
    }

    pub fn save_snapshot(&self, id: i64, snapshot: &[u8]) -> Result<()> {
        self.conn
            .prepare_cached("UPDATE executions SET snapshot = ? WHERE id = ?")?
            .execute(params![self.pack(snapshot)?.into_blob(), id])?;
        Ok(())
    }

    /// Closes an execution; `redrive_point` is the snapshot a redrive would resume (kept for an
    /// unsuccessful end that has one), else the snapshot is dropped.
    #[allow(clippy::too_many_arguments)]
    pub fn close_execution(
        &self,
        id: i64,
        status: ExecutionStatus,
        output: Option<&str>,
        error: Option<&str>,
        cause: Option<&str>,
        stop_ms: i64,
        redrive_point: Option<&[u8]>,
    ) -> Result<()> {
        self.conn
            .prepare_cached(
                "UPDATE executions SET status = ?, output = ?, error = ?, cause = ?, stop_ms = ?, snapshot = ? WHERE id = ?",
            )?
            .execute(params![
                status.as_str(),
                output.map(|o| self.pack(o.as_bytes())).transpose()?,
                error,
                cause,
                stop_ms,
                redrive_point.map(|p| self.pack(p)).transpose()?.map(codec::Packed::into_blob),
                id
            ])?;
        Ok(())
    }

    /// A redriven execution is RUNNING again: its end is forgotten, its redrive counted.
    pub fn reopen_execution(&self, id: i64, redrive_ms: i64) -> Result<()> {
        self.conn
            .prepare_cached(
                "UPDATE executions SET status = 'RUNNING', output = NULL, error = NULL, cause = NULL, \
                 stop_ms = NULL, redrive_count = redrive_count + 1, redrive_ms = ? WHERE id = ?",
            )?
            .execute(params![redrive_ms, id])?;
        Ok(())
    }

    /// When the redrive that `token` made happened, if it was at `since_ms` or later.
    pub fn redrive_by_token(
        &self,
        exec_id: i64,
        token: &str,
        since_ms: i64,
    ) -> Result<Option<i64>> {
        self.conn
            .prepare_cached(
                "SELECT used_ms FROM redrive_tokens WHERE exec_id = ? AND token = ? AND used_ms >= ?",
            )?
            .query_row(params![exec_id, token, since_ms], |r| r.get(0))
            .optional()
    }

    /// Remembers the client token of a successful redrive, keeping only the execution's `keep`
    /// latest tokens and none used before `since_ms`.
    pub fn record_redrive_token(
        &self,
        exec_id: i64,
        token: &str,
        used_ms: i64,
        keep: u32,
        since_ms: i64,
    ) -> Result<()> {
        self.conn
            .prepare_cached(
                "INSERT INTO redrive_tokens (exec_id, token, used_ms) VALUES (?, ?, ?) \
                 ON CONFLICT (exec_id, token) DO UPDATE SET used_ms = excluded.used_ms",
            )?
            .execute(params![exec_id, token, used_ms])?;
        self.conn
            .prepare_cached(
                "DELETE FROM redrive_tokens WHERE exec_id = ?1 AND (used_ms < ?2 OR token NOT IN \
                 (SELECT token FROM redrive_tokens WHERE exec_id = ?1 ORDER BY used_ms DESC LIMIT ?3))",
            )?
            .execute(params![exec_id, since_ms, keep])?;
        Ok(())
    }

    /// Executions of a state machine, newest first, after the `before` id.
    pub fn list_executions(
        &self,
        sm_arn: &str,
        status: Option<ExecutionStatus>,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Vec<ExecutionRow>> {
        let before = before.unwrap_or(i64::MAX);
        match status {
            Some(s) => {
                let mut stmt = self.conn.prepare_cached(&format!(
                    "SELECT {EXECUTION_COLUMNS} FROM {EXECUTIONS} WHERE m.arn = ? AND e.status = ? \
                     AND e.id < ? ORDER BY e.id DESC LIMIT ?"
                ))?;
                let rows = stmt.query_map(params![sm_arn, s.as_str(), before, limit], |r| {
                    execution_row(self, r)
                })?;
                rows.collect()
            }
            None => {
                let mut stmt = self.conn.prepare_cached(&format!(
                    "SELECT {EXECUTION_COLUMNS} FROM {EXECUTIONS} WHERE m.arn = ? AND e.id < ? \
                     ORDER BY e.id DESC LIMIT ?"
                ))?;
                let rows =
                    stmt.query_map(params![sm_arn, before, limit], |r| execution_row(self, r))?;
                rows.collect()
            }
        }
    }

    // ---- retention --------------------------------------------------------------------------

    /// Deletes at most `limit` executions that closed before `before_ms`, oldest first, with
    /// their history, tasks, timers and redrive tokens: as AWS forgets a closed execution after
    /// its retention. Returns how many it deleted.
    pub fn prune_closed(&self, before_ms: i64, limit: u32) -> Result<usize> {
        let ids: Vec<i64> = {
            let mut stmt = self.conn.prepare_cached(
                "SELECT id FROM executions WHERE stop_ms IS NOT NULL AND stop_ms < ? \
                 ORDER BY stop_ms LIMIT ?",
            )?;
            let rows = stmt.query_map(params![before_ms, limit], |r| r.get(0))?;
            rows.collect::<Result<_>>()?
        };
        for sql in [
            "DELETE FROM history WHERE exec_id = ?",
            "DELETE FROM tasks WHERE exec_id = ?",
            "DELETE FROM timers WHERE exec_id = ?",
            "DELETE FROM redrive_tokens WHERE exec_id = ?",
            "DELETE FROM payloads WHERE exec_id = ?",
            "DELETE FROM executions WHERE id = ?",
        ] {
            let mut stmt = self.conn.prepare_cached(sql)?;
            for id in &ids {
                stmt.execute([id])?;
            }
        }
        Ok(ids.len())
    }

    /// Pages on the file's free list (freed by deletes, not yet given back).
    pub fn free_pages(&self) -> Result<u64> {
        self.conn
            .pragma_query_value(None, "freelist_count", |r| r.get::<_, i64>(0))
            .map(|n| n as u64)
    }

    /// Gives at most `pages` free pages back to the file system (the file shrinks).
    pub fn release_free_pages(&self, pages: u32) -> Result<()> {
        // The pragma returns a row per page freed; step through them all.
        let mut stmt = self
            .conn
            .prepare(&format!("PRAGMA incremental_vacuum({pages})"))?;
        let mut rows = stmt.query([])?;
        while rows.next()?.is_some() {}
        Ok(())
    }

    // ---- history ----------------------------------------------------------------------------

    /// Appends events to the execution's history. An event's `input` or `output` of at least
    /// [`SHARED_PAYLOAD_MIN`] bytes is stored once per execution (`payloads`) and the event
    /// holds `{"$payload": key}` in its place: a state's output is the next state's input, and
    /// a task's input is often its state's, so each would otherwise be stored two or three
    /// times. [`Store::events`] puts them back.
    ///
    /// The events of one call (one transition: a task's result, its state's exit, the next
    /// state's entry and its task, ~4 events) are stored as one row: one insert and one packed
    /// value instead of one each, which was a quarter of the engine writer's time. The row's
    /// `details` holds a line per event (`id`, previous id, time, type and details, tab-separated:
    /// JSON text holds no raw tab or newline), read back by [`Store::events`].
    pub fn append_events(&self, exec_id: i64, events: &[EventDraft]) -> Result<()> {
        let (Some(first), Some(last)) = (events.first(), events.last()) else {
            return Ok(());
        };
        // The payloads this call has stored: the next state's input is the last one's output,
        // stored a line before, and needs no second trip to the database.
        let mut stored = Vec::new();
        let details = if events.len() == 1 {
            match &first.details {
                Some(d) => Some(self.share_payloads(exec_id, d, &mut stored)?),
                None => None,
            }
        } else {
            let mut lines = String::new();
            for e in events {
                let details = match &e.details {
                    Some(d) => self.share_payloads(exec_id, d, &mut stored)?,
                    None => String::new(),
                };
                // Writing to a String cannot fail.
                let _ = writeln!(
                    lines,
                    "{}\t{}\t{}\t{}\t{details}",
                    e.id,
                    e.previous_event_id,
                    e.timestamp.timestamp_millis(),
                    stored_event_type(&e.event_type),
                );
            }
            Some(lines)
        };
        self.conn
            .prepare_cached(
                "INSERT INTO history (exec_id, id, prev, ts_ms, type, details, last) \
                 VALUES (?, ?, ?, ?, ?, ?, ?)",
            )?
            .execute(params![
                exec_id,
                first.id as i64,
                first.previous_event_id as i64,
                first.timestamp.timestamp_millis(),
                stored_event_type(&first.event_type).as_ref(),
                details
                    .as_deref()
                    .map(|d| self.pack(d.as_bytes()))
                    .transpose()?,
                (events.len() > 1).then_some(last.id as i64),
            ])?;
        Ok(())
    }

    /// The details' text with each large payload stored apart and referenced. A referenced
    /// payload's `…Details` (`{"truncated": false}`, on every payload the engine writes) is
    /// left out too and put back on reading; a payload without one says so (`$bare`).
    /// `stored`: the payloads stored so far by the same append, with their keys.
    fn share_payloads<'a>(
        &self,
        exec_id: i64,
        details: &'a Value,
        stored: &mut Vec<(&'a str, i64)>,
    ) -> Result<String> {
        let Value::Object(map) = details else {
            return Ok(details.to_string());
        };
        let mut shared: Option<serde_json::Map<String, Value>> = None;
        for field in SHARED_FIELDS {
            let Some(Value::String(text)) = map.get(field) else {
                continue;
            };
            if text.len() < SHARED_PAYLOAD_MIN {
                continue;
            }
            let key = match stored.iter().find(|(t, _)| *t == text.as_str()) {
                Some((_, key)) => *key,
                None => {
                    let Some(key) = self.put_payload(exec_id, text)? else {
                        continue;
                    };
                    stored.push((text.as_str(), key));
                    key
                }
            };
            let out = shared.get_or_insert_with(|| map.clone());
            let mut reference = serde_json::Map::new();
            reference.insert(PAYLOAD_REF.to_owned(), key.into());
            let details_key = format!("{field}Details");
            match map.get(&details_key) {
                Some(d) if *d == untruncated() => {
                    out.shift_remove(&details_key);
                }
                Some(_) => {}
                None => {
                    reference.insert(BARE.to_owned(), Value::Bool(true));
                }
            }
            out.insert(field.to_owned(), Value::Object(reference));
        }
        Ok(match shared {
            Some(m) => Value::Object(m).to_string(),
            None => details.to_string(),
        })
    }

    /// Stores `text` once for the execution: its key, or `None` in the (vanishingly rare)
    /// case that another payload of the execution has the same key (it then stays inline).
    fn put_payload(&self, exec_id: i64, text: &str) -> Result<Option<i64>> {
        let key = payload_key(text);
        let inserted = self
            .conn
            .prepare_cached(
                "INSERT INTO payloads (exec_id, key, body) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            )?
            .execute(params![exec_id, key, self.pack(text.as_bytes())?])?;
        if inserted == 1 {
            return Ok(Some(key));
        }
        let stored = self
            .conn
            .prepare_cached("SELECT body FROM payloads WHERE exec_id = ? AND key = ?")?
            .query_row(params![exec_id, key], |r| self.text(r, 0))?;
        Ok((stored.as_deref() == Some(text)).then_some(key))
    }

    /// The details' text with every referenced payload (and its `…Details`) put back where
    /// it was.
    fn resolve_payloads(&self, exec_id: i64, details: String) -> Result<String> {
        if !details.contains(PAYLOAD_REF) {
            return Ok(details);
        }
        let Ok(Value::Object(map)) = serde_json::from_str::<Value>(&details) else {
            return Ok(details);
        };
        let mut out = serde_json::Map::with_capacity(map.len() + 2);
        for (name, value) in map {
            let reference = SHARED_FIELDS
                .contains(&name.as_str())
                .then(|| value.get(PAYLOAD_REF).and_then(Value::as_i64))
                .flatten();
            let Some(key) = reference else {
                out.insert(name, value);
                continue;
            };
            let body: Option<String> = self
                .conn
                .prepare_cached("SELECT body FROM payloads WHERE exec_id = ? AND key = ?")?
                .query_row(params![exec_id, key], |r| self.text(r, 0))
                .optional()?
                .flatten();
            let bare = value.get(BARE).is_some();
            out.insert(name.clone(), body.map_or(value, Value::String));
            if !bare {
                out.entry(format!("{name}Details"))
                    .or_insert_with(untruncated);
            }
        }
        Ok(Value::Object(out).to_string())
    }

    /// The id of the execution's last history event (0 before the first).
    pub fn last_event_id(&self, exec_id: i64) -> Result<u64> {
        let id: i64 = self
            .conn
            .prepare_cached(
                "SELECT COALESCE(last, id) FROM history WHERE exec_id = ? ORDER BY id DESC LIMIT 1",
            )?
            .query_row([exec_id], |r| r.get(0))
            .optional()?
            .unwrap_or(0);
        Ok(id as u64)
    }

    /// Events after (or, in reverse, before) `cursor`, at most `limit`.
    pub fn events(
        &self,
        exec_id: i64,
        cursor: Option<i64>,
        reverse: bool,
        limit: u32,
    ) -> Result<Vec<EventRow>> {
        const COLUMNS: &str = "id, prev, ts_ms, type, details, last";
        let mut events = Vec::new();
        if reverse {
            // Every row that starts before the cursor holds at least one event before it.
            let before = cursor.unwrap_or(i64::MAX);
            let rows = self.history_rows(
                &format!(
                    "SELECT {COLUMNS} FROM history WHERE exec_id = ? AND id < ? ORDER BY id DESC LIMIT ?"
                ),
                params![exec_id, before, limit],
            )?;
            for row in rows {
                events.extend(row.into_iter().rev().filter(|e| e.0 < before));
            }
        } else {
            let after = cursor.unwrap_or(0);
            // The row holding the event after the cursor may start at or before it.
            if after > 0 {
                let rows = self.history_rows(
                    &format!(
                        "SELECT {COLUMNS} FROM history WHERE exec_id = ? AND id <= ? ORDER BY id DESC LIMIT 1"
                    ),
                    params![exec_id, after],
                )?;
                events.extend(rows.into_iter().flatten().filter(|e| e.0 > after));
            }
            let rows = self.history_rows(
                &format!(
                    "SELECT {COLUMNS} FROM history WHERE exec_id = ? AND id > ? ORDER BY id LIMIT ?"
                ),
                params![exec_id, after, limit],
            )?;
            events.extend(rows.into_iter().flatten());
        }
        events.truncate(limit as usize);
        events
            .into_iter()
            .map(|(id, prev, ts, kind, details)| {
                let details = details
                    .map(|d| self.resolve_payloads(exec_id, d))
                    .transpose()?;
                Ok((id, prev, ts, kind, details))
            })
            .collect()
    }

    /// The events of the history rows a query selects (`events`' columns), each row's in order.
    fn history_rows(
        &self,
        sql: &str,
        params: &[&dyn rusqlite::ToSql],
    ) -> Result<Vec<Vec<EventRow>>> {
        let mut stmt = self.conn.prepare_cached(sql)?;
        let rows = stmt.query_map(params, |r| {
            let details = self.text(r, 4)?;
            match r.get::<_, Option<i64>>(5)? {
                None => Ok(vec![(
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    event_type_of(r, 3)?,
                    details,
                )]),
                Some(_) => details
                    .unwrap_or_default()
                    .lines()
                    .map(event_line)
                    .collect(),
            }
        })?;
        rows.collect()
    }

    // ---- tasks ------------------------------------------------------------------------------

    #[allow(clippy::too_many_arguments)]
    pub fn insert_task(
        &self,
        token: &str,
        exec_id: i64,
        activity_arn: Option<&str>,
        resource: &str,
        state_name: &str,
        input: &str,
        heartbeat_s: Option<u64>,
    ) -> Result<()> {
        self.conn
            .prepare_cached(
                "INSERT INTO tasks (token, exec_id, activity_arn, resource, state_name, input, status, heartbeat_s) VALUES (?, ?, ?, ?, ?, ?, 0, ?)",
            )?
            .execute(params![
                token,
                exec_id,
                activity_arn,
                resource,
                state_name,
                input,
                heartbeat_s.map(|h| h as i64)
            ])?;
        Ok(())
    }

    pub fn task(&self, token: &str) -> Result<Option<TaskRow>> {
        self.conn
            .prepare_cached(&format!("SELECT {TASK_COLUMNS} FROM tasks WHERE token = ?"))?
            .query_row([token], task_row)
            .optional()
    }

    /// The oldest task of an activity that no worker has taken yet.
    pub fn next_scheduled(&self, activity_arn: &str) -> Result<Option<TaskRow>> {
        self.conn
            .prepare_cached(&format!(
                "SELECT {TASK_COLUMNS} FROM tasks WHERE activity_arn = ? AND status = 0 ORDER BY seq LIMIT 1"
            ))?
            .query_row([activity_arn], task_row)
            .optional()
    }

    pub fn mark_started(&self, token: &str, worker: Option<&str>) -> Result<()> {
        self.conn
            .prepare_cached("UPDATE tasks SET status = 1, worker = ? WHERE token = ?")?
            .execute(params![worker, token])?;
        Ok(())
    }

    /// Makes the heartbeat of every task of these activities that a worker holds due at
    /// `now_ms` (the timers then fire as heartbeat timeouts); returns how many. One pass over
    /// the timers: a held task is one with a heartbeat timer.
    pub fn expire_started_heartbeats(&self, activity_arns: &[String], now_ms: i64) -> Result<u64> {
        let arns = serde_json::to_string(activity_arns).unwrap_or_else(|_| "[]".to_owned());
        let changed = self
            .conn
            .prepare_cached(
                "UPDATE timers SET due_ms = ?1 WHERE kind = ?2 AND due_ms > ?1 AND EXISTS \
                 (SELECT 1 FROM tasks WHERE tasks.seq = timers.ref AND tasks.status = 1 \
                 AND tasks.activity_arn IN (SELECT value FROM json_each(?3)))",
            )?
            .execute(params![now_ms, TimerKind::Heartbeat as i64, arns])?;
        Ok(changed as u64)
    }

    /// Closes a task: its token is dead from now on. Only the token and the execution are
    /// kept (to answer a late worker that its task timed out, until
    /// [`Store::prune_tombstones`] deletes it); the rest is dropped to save space.
    pub fn close_task(&self, token: &str, now_ms: i64) -> Result<()> {
        self.conn
            .prepare_cached(&format!("UPDATE tasks SET {CLOSED_TASK} WHERE token = ?"))?
            .execute(params![now_ms, token])?;
        self.conn
            .prepare_cached(
                "DELETE FROM timers WHERE (exec_id, kind, ref) IN (SELECT exec_id, k.value, CAST(seq AS TEXT) \
                 FROM tasks, json_each('[2,3]') k WHERE token = ?)",
            )?
            .execute([token])?;
        Ok(())
    }

    /// Closes every open task of an execution (it ended without the interpreter closing them).
    pub fn close_tasks_of(&self, exec_id: i64, now_ms: i64) -> Result<()> {
        self.conn
            .prepare_cached(&format!(
                "UPDATE tasks SET {CLOSED_TASK} WHERE exec_id = ? AND status < 2"
            ))?
            .execute(params![now_ms, exec_id])?;
        Ok(())
    }

    /// Deletes at most `limit` closed tasks that closed before `before_ms`, oldest first: their
    /// tokens answer TaskDoesNotExist from now on. Returns how many it deleted.
    pub fn prune_tombstones(&self, before_ms: i64, limit: u32) -> Result<usize> {
        self.conn
            .prepare_cached(
                "DELETE FROM tasks WHERE seq IN (SELECT seq FROM tasks WHERE status = 2 \
                 AND closed_ms < ? ORDER BY closed_ms LIMIT ?)",
            )?
            .execute(params![before_ms, limit])
    }

    /// Tasks for in-process handlers that were scheduled but not answered (to re-invoke after
    /// a restart).
    pub fn open_handler_tasks(&self) -> Result<Vec<TaskRow>> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT {TASK_COLUMNS} FROM tasks WHERE status < 2 AND activity_arn IS NULL ORDER BY seq"
        ))?;
        let rows = stmt.query_map([], task_row)?;
        rows.collect()
    }

    // ---- timers -----------------------------------------------------------------------------

    /// Sets (or moves) a timer. A task's timers (task timeout, heartbeat) take its token and
    /// store its seq; one for a task that no longer exists is not set.
    pub fn set_timer(
        &self,
        exec_id: i64,
        kind: TimerKind,
        reference: &str,
        due_ms: i64,
    ) -> Result<()> {
        let sql = if kind.is_task() {
            "INSERT INTO timers (exec_id, kind, ref, due_ms) \
             SELECT ?1, ?2, CAST(seq AS TEXT), ?4 FROM tasks WHERE token = ?3 \
             ON CONFLICT (exec_id, kind, ref) DO UPDATE SET due_ms = excluded.due_ms"
        } else {
            "INSERT INTO timers (exec_id, kind, ref, due_ms) VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT (exec_id, kind, ref) DO UPDATE SET due_ms = excluded.due_ms"
        };
        self.conn
            .prepare_cached(sql)?
            .execute(params![exec_id, kind as i64, reference, due_ms])?;
        Ok(())
    }

    pub fn delete_timer(&self, exec_id: i64, kind: TimerKind, reference: &str) -> Result<()> {
        self.conn
            .prepare_cached("DELETE FROM timers WHERE exec_id = ? AND kind = ? AND ref = ?")?
            .execute(params![exec_id, kind as i64, reference])?;
        Ok(())
    }

    pub fn delete_timers_of(&self, exec_id: i64) -> Result<()> {
        self.conn
            .prepare_cached("DELETE FROM timers WHERE exec_id = ?")?
            .execute([exec_id])?;
        Ok(())
    }

    pub fn next_due(&self) -> Result<Option<i64>> {
        self.conn
            .prepare_cached("SELECT MIN(due_ms) FROM timers")?
            .query_row([], |r| r.get(0))
    }

    /// Removes and returns timers due at `now_ms`, oldest first.
    pub fn take_due(&self, now_ms: i64, limit: u32) -> Result<Vec<DueTimer>> {
        let due: Vec<(i64, i64, String)> = {
            let mut stmt = self.conn.prepare_cached(
                "SELECT exec_id, kind, ref FROM timers WHERE due_ms <= ? ORDER BY due_ms LIMIT ?",
            )?;
            let rows = stmt.query_map(params![now_ms, limit], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })?;
            rows.collect::<Result<_>>()?
        };
        let mut out = Vec::with_capacity(due.len());
        let mut delete = self
            .conn
            .prepare_cached("DELETE FROM timers WHERE exec_id = ? AND kind = ? AND ref = ?")?;
        let mut token_of = self
            .conn
            .prepare_cached("SELECT token FROM tasks WHERE seq = ?")?;
        for (exec_id, kind, stored) in due {
            delete.execute(params![exec_id, kind, stored])?;
            let Some(kind) = TimerKind::from_i64(kind) else {
                continue;
            };
            // A task's timer holds its seq: the event names the token.
            let reference = match stored.parse::<i64>() {
                Ok(seq) if kind.is_task() => {
                    match token_of.query_row([seq], |r| r.get(0)).optional()? {
                        Some(token) => token,
                        None => continue,
                    }
                }
                _ => stored,
            };
            out.push(DueTimer {
                exec_id,
                kind,
                reference,
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_is_scheduled_then_started_then_closed_as_its_queries_count_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("e.db"), SyncPolicy::Normal, 0).unwrap();
        store
            .insert_task(
                "t1",
                7,
                Some("arn:act"),
                "arn:act",
                "Reserve",
                "{}",
                Some(60),
            )
            .unwrap();
        let status = |store: &Store| store.task("t1").unwrap().unwrap().status;
        assert_eq!(status(&store), TaskStatus::Scheduled);
        assert_eq!(
            store.next_scheduled("arn:act").unwrap().map(|t| t.token),
            Some("t1".to_owned()),
            "a scheduled task is in the queue"
        );
        store.mark_started("t1", Some("worker-1")).unwrap();
        assert_eq!(status(&store), TaskStatus::Started);
        assert!(store.next_scheduled("arn:act").unwrap().is_none());
        store.close_task("t1", 0).unwrap();
        assert_eq!(status(&store), TaskStatus::Closed);
    }

    #[test]
    fn an_execution_arn_is_made_from_its_machines_and_split_back() {
        let sm = "arn:aws:states:eu-west-1:111122223333:stateMachine:orders";
        let arn = execution_arn(sm, "o-1");
        assert_eq!(
            arn,
            "arn:aws:states:eu-west-1:111122223333:execution:orders:o-1"
        );
        assert_eq!(split_execution_arn(&arn), Some((sm.to_owned(), "o-1")));
        assert_eq!(split_execution_arn(sm), None);
        assert_eq!(split_execution_arn(&format!("{arn}:extra")), None);
        assert_eq!(
            split_execution_arn("arn:aws:states:r:a:execution:orders"),
            None
        );
    }

    #[test]
    fn a_file_of_schema_three_keeps_its_executions_task_timers_and_tombstones_through_the_migrations()
     {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.db");
        {
            // The file as the build before migrations 4 and 5 left it: timers keyed by token.
            let conn = Connection::open(&path).unwrap();
            for sql in &MIGRATIONS[..3] {
                conn.execute_batch(sql).unwrap();
            }
            conn.execute_batch(
                "PRAGMA user_version = 3;
                 INSERT INTO tasks (token, exec_id, resource, state_name, status)
                     VALUES ('open-token', 1, 'arn:act', 'Wait', 1), ('dead-token', 1, '', '', 2);
                 INSERT INTO timers (exec_id, kind, ref, due_ms)
                     VALUES (1, 2, 'open-token', 10), (1, 3, 'open-token', 20), (1, 1, '7', 30);
                 INSERT INTO history (exec_id, id, prev, ts_ms, type, details)
                     VALUES (1, 1, 0, 5, 'ExecutionStarted', '{}');
                 INSERT INTO state_machines (arn, name, definition, role_arn, created_ms)
                     VALUES ('arn:aws:states:us-east-1:1:stateMachine:sm', 'sm', '{}', 'r', 1);
                 INSERT INTO executions (id, arn, sm_arn, name, status, input, start_ms)
                     VALUES (1, 'arn:aws:states:us-east-1:1:execution:sm:o-1',
                             'arn:aws:states:us-east-1:1:stateMachine:sm', 'o-1', 'RUNNING', '{\"a\":1}', 1);",
            )
            .unwrap();
        }
        let store = Store::open(&path, SyncPolicy::Normal, 0).unwrap();
        let due = store.take_due(100, 10).unwrap();
        let refs: Vec<(TimerKind, &str)> =
            due.iter().map(|t| (t.kind, t.reference.as_str())).collect();
        assert_eq!(
            refs,
            [
                (TimerKind::TaskTimeout, "open-token"),
                (TimerKind::Heartbeat, "open-token"),
                (TimerKind::Timer, "7")
            ],
            "a task's timers still name its token"
        );
        assert_eq!(
            store.prune_tombstones(1, 10).unwrap(),
            1,
            "a task closed before closing times were kept is past any tombstone window"
        );
        assert_eq!(
            store.task("open-token").unwrap().unwrap().status,
            TaskStatus::Started
        );
        let events = store.events(1, None, false, 10).unwrap();
        assert_eq!(
            events[0].3, "ExecutionStarted",
            "event types stored by name read back"
        );
    }
    fn event(id: u64, kind: &str, details: Value) -> EventDraft {
        EventDraft {
            id,
            previous_event_id: id.saturating_sub(1),
            timestamp: chrono::Utc::now(),
            event_type: kind.to_owned(),
            details: Some(details),
        }
    }

    fn stored_details(store: &Store) -> Vec<String> {
        let mut stmt = store
            .conn
            .prepare("SELECT details FROM history WHERE details IS NOT NULL ORDER BY exec_id, id")
            .unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_>>()
            .unwrap()
    }

    fn payload_rows(store: &Store) -> i64 {
        store
            .conn
            .query_row("SELECT count(*) FROM payloads", [], |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn a_payload_repeated_in_a_history_is_stored_once_and_read_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("e.db"), SyncPolicy::Normal, 0).unwrap();
        let state = serde_json::json!({ "order": "o-1", "lines": "x".repeat(200) }).to_string();
        let events = [
            event(
                1,
                "TaskStateEntered",
                serde_json::json!({ "name": "A", "input": state, "inputDetails": untruncated() }),
            ),
            event(
                2,
                "TaskStateExited",
                serde_json::json!({ "name": "A", "output": state, "outputDetails": untruncated() }),
            ),
            event(
                3,
                "PassStateEntered",
                serde_json::json!({ "name": "B", "input": state }),
            ),
            // Small payloads stay where they are.
            event(
                4,
                "PassStateExited",
                serde_json::json!({ "name": "B", "output": "{}" }),
            ),
        ];
        // One transition each: a row each.
        for e in &events {
            store.append_events(7, std::slice::from_ref(e)).unwrap();
        }
        assert_eq!(payload_rows(&store), 1, "one copy of the repeated payload");
        let stored = stored_details(&store);
        assert!(
            stored[..3].iter().all(|d| !d.contains("xxxx")),
            "{stored:?}"
        );
        assert!(stored[3].contains("\"output\":\"{}\""), "{}", stored[3]);
        let read = store.events(7, None, false, 100).unwrap();
        for (row, event) in read.iter().zip(&events) {
            // Exactly as written, keys in their order.
            assert_eq!(
                row.4.as_deref(),
                event.details.as_ref().map(|d| d.to_string()).as_deref()
            );
        }
        // Another execution's identical payload is its own (pruned with it).
        store.append_events(8, &events[..1]).unwrap();
        assert_eq!(payload_rows(&store), 2);
    }

    #[test]
    fn the_events_of_one_transition_share_a_row_and_page_as_single_events() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("e.db"), SyncPolicy::Normal, 0).unwrap();
        let big = "z".repeat(200);
        let all: Vec<EventDraft> = (1..=9)
            .map(|id| match id {
                4 => EventDraft {
                    details: None,
                    ..event(id, "ActivityStarted", Value::Null)
                },
                _ => event(
                    id,
                    if id % 2 == 0 { "TaskStateExited" } else { "NotAnAwsEventType" },
                    serde_json::json!({ "name": format!("S{id}"), "output": big, "tab": "a\tb\nc" }),
                ),
            })
            .collect();
        // Rows of 3, 1 and 5 events, as three transitions would append them.
        store.append_events(5, &all[..3]).unwrap();
        store.append_events(5, &all[3..4]).unwrap();
        store.append_events(5, &all[4..]).unwrap();
        let rows: i64 = store
            .conn
            .query_row("SELECT count(*) FROM history WHERE exec_id = 5", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(rows, 3);
        assert_eq!(
            payload_rows(&store),
            1,
            "the repeated payload is stored once"
        );
        let stored = stored_details(&store);
        assert!(stored.iter().all(|d| !d.contains("zzzz")), "{stored:?}");
        assert_eq!(store.last_event_id(5).unwrap(), 9);
        assert_eq!(store.last_event_id(6).unwrap(), 0);

        let whole = store.events(5, None, false, 100).unwrap();
        assert_eq!(whole.len(), 9);
        for (row, event) in whole.iter().zip(&all) {
            assert_eq!(row.0, event.id as i64);
            assert_eq!(row.1, event.previous_event_id as i64);
            assert_eq!(row.2, event.timestamp.timestamp_millis());
            assert_eq!(row.3, event.event_type);
            assert_eq!(
                row.4.as_deref(),
                event.details.as_ref().map(|d| d.to_string()).as_deref(),
                "exactly as written"
            );
        }
        let ids = |rows: Vec<EventRow>| rows.iter().map(|r| r.0).collect::<Vec<_>>();
        for cursor in 0..=10 {
            for limit in 1..=10u32 {
                let after: Vec<i64> = (cursor + 1..=9).take(limit as usize).collect();
                let forward = store.events(5, (cursor > 0).then_some(cursor), false, limit);
                assert_eq!(
                    ids(forward.unwrap()),
                    after,
                    "after {cursor}, {limit} a page"
                );
                let before: Vec<i64> = (1..cursor.min(10)).rev().take(limit as usize).collect();
                let backward = store.events(5, Some(cursor), true, limit);
                assert_eq!(
                    ids(backward.unwrap()),
                    before,
                    "before {cursor}, {limit} a page"
                );
            }
        }
        let newest = store.events(5, None, true, 2).unwrap();
        assert_eq!(ids(newest), [9, 8]);
    }

    #[test]
    fn a_payload_whose_key_another_payload_holds_stays_inline() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("e.db"), SyncPolicy::Normal, 0).unwrap();
        let text = "y".repeat(100);
        // A different body under the key `text` will have: as a collision would leave it.
        store
            .conn
            .execute(
                "INSERT INTO payloads (exec_id, key, body) VALUES (3, ?, 'other')",
                [payload_key(&text)],
            )
            .unwrap();
        let events = [event(
            1,
            "PassStateEntered",
            serde_json::json!({ "name": "A", "input": text }),
        )];
        store.append_events(3, &events).unwrap();
        let stored = stored_details(&store);
        assert!(stored[0].contains(&text), "kept inline: {}", stored[0]);
        let read = store.events(3, None, false, 10).unwrap();
        let details: Value = serde_json::from_str(read[0].4.as_deref().unwrap()).unwrap();
        assert_eq!(Some(&details), events[0].details.as_ref());
    }
}
