//! The schema of the engine's SQLite file and its migrations: a list of steps applied in order,
//! each once, in its own transaction, with the file's `PRAGMA user_version` counting the steps
//! applied so far.

use super::Result;
use rusqlite::Connection;
use std::path::Path;

/// Each entry moves the schema one version forward; a file is at version `MIGRATIONS.len()`
/// once open. Never edit a step that has shipped: add one. The steps use plain `CREATE TABLE`
/// (no `IF NOT EXISTS`), so a step applied twice fails loudly instead of passing unnoticed.
///
/// Step 1 is the baseline of release 0.1.0: the whole schema as that release writes it. Every
/// later change of the schema is a step after it that also migrates the rows it changes (the
/// 0.1.0 fixture in `engine/tests/fixtures/` is opened by every later build).
const MIGRATIONS: &[&str] = &[BASELINE, VERSIONS];

/// Version 1, the schema of 0.1.0.
const BASELINE: &str = r#"
-- `id` is explicit because executions name their machine by it (a VACUUM may renumber an
-- implicit rowid).
CREATE TABLE state_machines (
    id         INTEGER PRIMARY KEY,
    arn        TEXT NOT NULL UNIQUE,
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
-- An execution names its machine by the machine's id, and its own ARN is made from the
-- machine's and its name (`db/executions.rs`): stored, the two ARNs would be ~170 bytes of
-- every row, held again by the indexes.
CREATE TABLE executions (
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
    -- The interpreter's state while RUNNING; once FAILED, ABORTED or TIMED_OUT, where it
    -- stopped, which a redrive resumes; NULL otherwise.
    snapshot      BLOB,
    redrive_count INTEGER NOT NULL DEFAULT 0,
    redrive_ms    INTEGER
);
CREATE UNIQUE INDEX executions_by_name ON executions (machine, name);
CREATE INDEX executions_by_machine ON executions (machine, id);
CREATE INDEX executions_by_status ON executions (machine, status, id);
-- Retention: closed executions by when they closed (a redrive reopens one: its stop_ms is NULL
-- again).
CREATE INDEX executions_closed ON executions (stop_ms) WHERE stop_ms IS NOT NULL;
-- The events one transition appends are one row (one insert, one packed value): `id` is its
-- first event's, `last` its last event's (NULL: a row of one event), and `details` holds every
-- event (see `db/history.rs`).
CREATE TABLE history (
    exec_id INTEGER NOT NULL,
    id      INTEGER NOT NULL,
    prev    INTEGER NOT NULL,
    ts_ms   INTEGER NOT NULL,
    type    TEXT NOT NULL,
    details TEXT,
    last    INTEGER,
    PRIMARY KEY (exec_id, id)
) WITHOUT ROWID;
-- status: 0 scheduled (waiting for a worker), 1 started (handed out), 2 closed. A closed task
-- is kept as a tombstone (its token, to answer a late `Send*` with TaskTimedOut) until
-- `closed_ms` is older than the engine's tombstone window; then deleted, and a late answer gets
-- TaskDoesNotExist, as AWS gives for a token it no longer has. The pruner deletes an
-- execution's tasks with it.
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
    worker        TEXT,
    closed_ms     INTEGER
);
CREATE INDEX tasks_queue ON tasks (activity_arn, seq) WHERE status = 0;
CREATE INDEX tasks_open_handlers ON tasks (seq) WHERE status < 2 AND activity_arn IS NULL;
CREATE INDEX tasks_by_execution ON tasks (exec_id);
CREATE INDEX tasks_closed ON tasks (closed_ms) WHERE status = 2;
-- kind: 1 interpreter timer (ref = its timer id), 2 task timeout and 3 heartbeat (ref = the
-- task's seq: its 60-byte token would be held twice, by the timer and its index), 4 execution
-- timeout (ref = '').
CREATE TABLE timers (
    exec_id INTEGER NOT NULL,
    kind    INTEGER NOT NULL,
    ref     TEXT NOT NULL,
    due_ms  INTEGER NOT NULL,
    PRIMARY KEY (exec_id, kind, ref)
) WITHOUT ROWID;
CREATE INDEX timers_by_due ON timers (due_ms);
-- The client tokens of successful redrives, answered again for 15 minutes.
CREATE TABLE redrive_tokens (
    exec_id INTEGER NOT NULL,
    token   TEXT NOT NULL,
    used_ms INTEGER NOT NULL,
    PRIMARY KEY (exec_id, token)
) WITHOUT ROWID;
-- The history's large payloads (an event's `input` or `output`), each stored once per
-- execution and referenced from the events by its key (see `db/payloads.rs`).
CREATE TABLE payloads (
    exec_id INTEGER NOT NULL,
    key     INTEGER NOT NULL,
    body    TEXT NOT NULL,
    PRIMARY KEY (exec_id, key)
) WITHOUT ROWID;
-- The zstd dictionaries the stored JSON is packed with (see `db/codec.rs`); never deleted.
CREATE TABLE dictionaries (
    id         INTEGER PRIMARY KEY,
    body       BLOB NOT NULL,
    created_ms INTEGER NOT NULL
);
"#;

/// Version 2: revisions, versions and aliases. A machine's definition moves to `definitions`
/// (one row per revision: what `CreateStateMachine` stored is revision `INITIAL`, each
/// `UpdateStateMachine` that changes the definition or role adds one); `state_machines.current`
/// names the revision new executions of the machine run. A version is a numbered, immutable
/// name for a revision; an alias routes starts to one or two versions by weight. Every
/// execution names the revision it runs (`executions.definition`), so nothing a later update,
/// publish or delete does can change it; `version` and `alias` record how it was started.
/// The executions of 0.1.0 run the machine's only revision.
const VERSIONS: &str = r#"
CREATE TABLE definitions (
    id         INTEGER PRIMARY KEY,
    machine    INTEGER NOT NULL,
    body       TEXT NOT NULL,
    role_arn   TEXT NOT NULL,
    revision   TEXT NOT NULL,
    created_ms INTEGER NOT NULL
);
CREATE INDEX definitions_by_machine ON definitions (machine);
CREATE TABLE versions (
    machine     INTEGER NOT NULL,
    number      INTEGER NOT NULL,
    definition  INTEGER NOT NULL,
    description TEXT,
    created_ms  INTEGER NOT NULL,
    PRIMARY KEY (machine, number)
) WITHOUT ROWID;
-- routing: JSON, [[version number, weight], ...], one or two entries.
CREATE TABLE aliases (
    machine     INTEGER NOT NULL,
    name        TEXT NOT NULL,
    description TEXT,
    routing     TEXT NOT NULL,
    created_ms  INTEGER NOT NULL,
    updated_ms  INTEGER NOT NULL,
    PRIMARY KEY (machine, name)
) WITHOUT ROWID;
ALTER TABLE state_machines ADD COLUMN current INTEGER;
ALTER TABLE state_machines ADD COLUMN updated_ms INTEGER;
-- The highest version number ever published: numbers are never reused after a delete.
ALTER TABLE state_machines ADD COLUMN last_version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE executions ADD COLUMN definition INTEGER;
ALTER TABLE executions ADD COLUMN version INTEGER;
ALTER TABLE executions ADD COLUMN alias TEXT;
INSERT INTO definitions (machine, body, role_arn, revision, created_ms)
    SELECT id, definition, role_arn, 'INITIAL', created_ms FROM state_machines;
UPDATE state_machines
    SET current = (SELECT d.id FROM definitions d WHERE d.machine = state_machines.id);
UPDATE executions
    SET definition = (SELECT m.current FROM state_machines m WHERE m.id = executions.machine);
ALTER TABLE state_machines DROP COLUMN definition;
ALTER TABLE state_machines DROP COLUMN role_arn;
"#;

/// The schema version of this build.
fn current() -> i64 {
    MIGRATIONS.len() as i64
}

fn version(conn: &Connection) -> Result<i64> {
    conn.pragma_query_value(None, "user_version", |r| r.get(0))
}

/// A file whose schema this build cannot use, as SQLite reports a mismatch.
fn mismatch(path: &Path, found: i64) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_MISMATCH),
        Some(format!(
            "{} has engine schema version {found}, this build reads {}",
            path.display(),
            current()
        )),
    )
}

/// Applies the steps the file has not had yet. A file of a newer schema is refused: this
/// build's queries would run on tables it does not know.
pub(super) fn migrate(conn: &Connection, path: &Path) -> Result<()> {
    let found = version(conn)?;
    if found > current() {
        return Err(mismatch(path, found));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        let tx = conn.unchecked_transaction()?;
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)?;
        tx.commit()?;
    }
    Ok(())
}

/// Refuses a file that does not hold exactly this build's schema (one opened read-only cannot
/// be migrated).
pub(super) fn require_current(conn: &Connection, path: &Path) -> Result<()> {
    let found = version(conn)?;
    if found != current() {
        return Err(mismatch(path, found));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_file_gets_every_step_and_keeps_its_version_when_reopened() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.db");
        for _ in 0..2 {
            let conn = Connection::open(&path).unwrap();
            migrate(&conn, &path).unwrap();
            assert_eq!(version(&conn).unwrap(), 2);
            assert_eq!(current(), 2);
            require_current(&conn, &path).unwrap();
        }
    }

    #[test]
    fn a_file_of_a_newer_schema_is_refused_by_the_writer_and_the_read_only_reader() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("e.db");
        let conn = Connection::open(&path).unwrap();
        migrate(&conn, &path).unwrap();
        conn.pragma_update(None, "user_version", current() + 1)
            .unwrap();
        for refused in [migrate(&conn, &path), require_current(&conn, &path)] {
            let message = refused.unwrap_err().to_string();
            let newer = format!("engine schema version {}", current() + 1);
            assert!(message.contains(&newer), "{message}");
        }
    }
}
