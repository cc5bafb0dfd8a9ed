//! Retention: deleting the executions closed longer ago than the engine keeps them, with every
//! row that belongs to them, and giving the freed pages back to the file system.

use super::{Result, Store};
use rusqlite::params;

impl Store {
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

    /// Gives at most `pages` free pages back to the file system (the file shrinks; the file is
    /// made with `auto_vacuum=INCREMENTAL`, see [`Store::open`]).
    pub fn release_free_pages(&self, pages: u32) -> Result<()> {
        // The pragma returns a row per page freed; step through them all.
        let mut stmt = self
            .conn
            .prepare(&format!("PRAGMA incremental_vacuum({pages})"))?;
        let mut rows = stmt.query([])?;
        while rows.next()?.is_some() {}
        Ok(())
    }
}
