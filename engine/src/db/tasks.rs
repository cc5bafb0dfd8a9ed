//! The `tasks` table: the tasks Task states schedule, from the activity queue (or an in-process
//! handler) through a worker's hands to their close, and the tombstone a closed task leaves.

use super::{Result, Store, TimerKind};
use rusqlite::{OptionalExtension, params};

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

impl Store {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::SyncPolicy;

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
}
