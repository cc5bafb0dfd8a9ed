//! The `redrive_tokens` table: the client tokens of successful redrives, so that a
//! `RedriveExecution` retried with the same token is answered with the redrive it made.

use super::{Result, Store};
use rusqlite::{OptionalExtension, params};

impl Store {
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
}
