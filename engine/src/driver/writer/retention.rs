//! Retention: executions closed longer ago than the engine's retention are deleted, with their
//! history, tasks and timers, in small transactions of their own between batches (a batch of
//! work never waits behind more than one of them), and the pages they held are given back to
//! the file system. The same transactions delete the tombstones of tasks closed longer ago
//! than the tombstone window (a parked execution's earlier tasks, which would otherwise stay
//! as long as it waits).

use super::Writer;
use super::timers::millis;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Executions deleted per transaction: about 20 history rows and a few tasks each, a few
/// milliseconds of the writer's time.
pub(super) const PRUNE_BATCH: u32 = 64;
/// Task tombstones deleted per transaction (a token and a few integers each).
const TOMBSTONE_BATCH: u32 = 512;
/// The pause between two prune transactions while more is due: the writer's own batches run
/// in between, so a backlog (a first start with a long history) is worked off at up to
/// 64 executions per 20 ms without crowding out the running sagas.
const PRUNE_BUSY: Duration = Duration::from_millis(20);
/// How often to look again once nothing is due: a tenth of the retention, within these bounds.
const PRUNE_IDLE_MIN: Duration = Duration::from_millis(100);
const PRUNE_IDLE_MAX: Duration = Duration::from_secs(30);
/// Free pages (4 KiB) that make it worth shrinking the file, and how many to give back at once.
const RELEASE_AT: u64 = 1024;
const RELEASE_PAGES: u32 = 2048;

impl Writer {
    /// Deletes one batch of executions past the retention, if a pass is due; then shrinks the
    /// file when enough pages are free.
    pub(super) fn prune_if_due(&mut self) {
        let now = Instant::now();
        if self.next_prune > now {
            return;
        }
        let now_ms = millis(self.config.clock.now());
        let before =
            |d: Duration| now_ms.saturating_sub(i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let (retention, tombstones) = (self.config.retention, self.config.task_tombstones);
        let pruned = self.store.begin().and_then(|()| {
            let executions = match retention {
                Some(r) => self.store.prune_closed(before(r), PRUNE_BATCH)?,
                None => 0,
            };
            let tasks = self
                .store
                .prune_tombstones(before(tombstones), TOMBSTONE_BATCH)?;
            self.store.commit()?;
            Ok((executions, tasks))
        });
        let (pruned, tombstones_pruned) = match pruned {
            Ok(n) => n,
            Err(e) => {
                self.store.rollback();
                tracing::warn!(error = %e, "pruning closed executions failed; retried later");
                (0, 0)
            }
        };
        self.stats
            .pruned
            .fetch_add(pruned as u64, Ordering::Relaxed);
        // Free pages left over (from this pass or an earlier one) go back a slice at a time.
        let more_free = self.release_free_pages();
        self.next_prune = now
            + if pruned as u32 == PRUNE_BATCH
                || tombstones_pruned as u32 == TOMBSTONE_BATCH
                || more_free
            {
                PRUNE_BUSY
            } else {
                (retention.unwrap_or(tombstones).min(tombstones) / 10)
                    .clamp(PRUNE_IDLE_MIN, PRUNE_IDLE_MAX)
            };
    }

    /// Gives up to `RELEASE_PAGES` free pages back when at least `RELEASE_AT` are free;
    /// whether enough are still free to do it again.
    fn release_free_pages(&self) -> bool {
        let released = self.store.free_pages().and_then(|free| {
            if free < RELEASE_AT {
                return Ok(false);
            }
            self.store.release_free_pages(RELEASE_PAGES)?;
            Ok(free.saturating_sub(RELEASE_PAGES as u64) >= RELEASE_AT)
        });
        released.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "giving free pages back failed; retried later");
            false
        })
    }

    /// When the next prune pass is due.
    pub(super) fn prune_due(&self) -> Option<Instant> {
        Some(self.next_prune)
    }
}
