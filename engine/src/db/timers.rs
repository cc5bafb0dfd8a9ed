//! The `timers` table: every clock an execution waits on (a Wait state or retry delay, a task's
//! timeout and heartbeat, the execution's own timeout), taken by the writer when due.

use super::{Result, Store};
use rusqlite::{OptionalExtension, params};

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
pub struct DueTimer {
    pub exec_id: i64,
    pub kind: TimerKind,
    pub reference: String,
}

impl Store {
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
            // A task's timer holds its seq: the event names the token. A task deleted since has
            // nothing left to time out.
            let reference = if kind.is_task() {
                let token = match stored.parse::<i64>() {
                    Ok(seq) => token_of.query_row([seq], |r| r.get(0)).optional()?,
                    Err(_) => None,
                };
                let Some(token) = token else {
                    continue;
                };
                token
            } else {
                stored
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
