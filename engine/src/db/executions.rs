//! The `executions` table: an execution's row from its start to its end, a redrive's reopening,
//! the snapshot of where it stands, and the listing of a machine's executions. A row names its
//! machine by id and stores no ARN: an execution's ARN is made from its machine's and its name.

use super::{Result, Store, codec};
use crate::sfn::ExecutionStatus;
use rusqlite::{OptionalExtension, params};

/// Which of a machine's executions a listing takes, by how they were started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartedBy {
    Any,
    Version(u32),
    Alias(String),
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
    /// The revision it runs (`definitions.id`), whatever its machine has become since.
    pub definition: i64,
    /// The version it was started on (by its ARN or through an alias).
    pub version: Option<u32>,
    /// The alias it was started through.
    pub alias: Option<String>,
}

/// An execution's columns, with its machine's ARN: `SELECT {EXECUTION_COLUMNS} FROM
/// {EXECUTIONS} WHERE …`.
const EXECUTION_COLUMNS: &str = "e.id, m.arn, e.name, e.status, e.input, e.output, e.error, \
     e.cause, e.start_ms, e.stop_ms, e.redrive_count, e.redrive_ms, e.snapshot IS NOT NULL, \
     e.definition, e.version, e.alias";
const EXECUTIONS: &str = "executions e JOIN state_machines m ON m.id = e.machine";

impl ExecutionRow {
    /// The ARN of the version it was started on, if any.
    pub fn version_arn(&self) -> Option<String> {
        self.version
            .map(|n| crate::arn::MachineRef::version_arn(&self.sm_arn, n))
    }

    /// The ARN of the alias it was started through, if any.
    pub fn alias_arn(&self) -> Option<String> {
        self.alias
            .as_deref()
            .map(|a| crate::arn::MachineRef::alias_arn(&self.sm_arn, a))
    }
}

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
        definition: r.get(13)?,
        version: r.get(14)?,
        alias: r.get(15)?,
    })
}

impl Store {
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
                "INSERT INTO executions \
                 (machine, name, status, input, start_ms, definition, version, alias) \
                 SELECT id, ?, ?, ?, ?, ?, ?, ? FROM state_machines WHERE arn = ?",
            )?
            .execute(params![
                row.name,
                row.status.as_str(),
                self.pack(row.input.as_bytes())?,
                row.start_ms,
                row.definition,
                row.version,
                row.alias,
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

    /// Executions of a state machine, newest first, after the `before` id.
    /// A machine's executions, newest first, below `before` (an id), optionally only those of
    /// one status and only those started on one version or through one alias.
    pub fn list_executions(
        &self,
        sm_arn: &str,
        status: Option<ExecutionStatus>,
        started: &StartedBy,
        before: Option<i64>,
        limit: u32,
    ) -> Result<Vec<ExecutionRow>> {
        let mut sql = format!("SELECT {EXECUTION_COLUMNS} FROM {EXECUTIONS} WHERE m.arn = ?1");
        let status = status.map(|s| s.as_str());
        if status.is_some() {
            sql.push_str(" AND e.status = ?2");
        }
        let (version, alias) = match started {
            StartedBy::Any => (None, None),
            StartedBy::Version(n) => (Some(*n), None),
            StartedBy::Alias(a) => (None, Some(a.as_str())),
        };
        if version.is_some() {
            sql.push_str(" AND e.version = ?3");
        }
        if alias.is_some() {
            sql.push_str(" AND e.alias = ?4");
        }
        sql.push_str(" AND e.id < ?5 ORDER BY e.id DESC LIMIT ?6");
        let mut stmt = self.conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(
            params![
                sm_arn,
                status,
                version,
                alias,
                before.unwrap_or(i64::MAX),
                limit
            ],
            |r| execution_row(self, r),
        )?;
        rows.collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
