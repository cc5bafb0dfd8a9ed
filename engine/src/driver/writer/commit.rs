//! One grouped transaction: every command taken in one pass, the events they cause and the timers
//! due, committed together (one fsync for many transitions); only once the commit is durable are
//! callers answered and handlers invoked (by the syncer, the `durable` crate, while the next
//! batch runs).

use super::timers::millis;
use super::{Command, Loaded, Reply, Sql, Writer};
use crate::core::{Event, snapshot};
use crate::error::EngineError;
use crate::sfn::TaskRequest;
use chrono::{DateTime, Utc};
use durable::After;
use std::collections::{HashMap, VecDeque};

/// An answer to a caller, given the commit's error if it failed.
pub(super) type Notify = Box<dyn FnOnce(Option<&EngineError>) + Send>;

/// What one grouped transaction accumulates.
#[derive(Default)]
pub(super) struct Batch {
    pub(super) loaded: HashMap<i64, Loaded>,
    pub(super) events: VecDeque<(i64, Event)>,
    /// Answers to send once the commit is durable (or the error when it failed).
    pub(super) replies: Vec<Notify>,
    pub(super) invocations: Vec<TaskRequest>,
    pub(super) finished: Vec<String>,
    pub(super) new_activities: Vec<String>,
    pub(super) transitions: u64,
}

impl Batch {
    pub(super) fn reply<T: Send + 'static>(
        &mut self,
        reply: Reply<T>,
        value: Result<T, EngineError>,
    ) {
        self.replies.push(Box::new(move |failed| {
            let _ = reply.send(match failed {
                Some(e) => Err(e.clone()),
                None => value,
            });
        }));
    }
}

impl Writer {
    pub(super) fn batch(&mut self, commands: Vec<Command>) {
        let now = self.config.clock.now();
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
                self.activities.extend(b.new_activities);
                let mut owed: Vec<After> = Vec::with_capacity(b.replies.len());
                owed.extend(
                    b.replies
                        .into_iter()
                        .map(|r| Box::new(move || r(None)) as After),
                );
                owed.extend(b.invocations.into_iter().map(|r| self.invocation(r)));
                for arn in b.finished {
                    for w in self.watchers.remove(&arn).unwrap_or_default() {
                        owed.push(Box::new(move || {
                            let _ = w.send(());
                        }));
                    }
                }
                self.syncer.after_sync(owed);
                self.keep_warm(b.loaded);
            }
            Err(e) => {
                tracing::error!(error = %e, "engine commit failed; the batch is rolled back");
                self.store.rollback();
                // Ids of rows the rollback undid may be given again to other rows.
                self.machines.clear();
                self.targets.clear();
                let err = EngineError::storage(e);
                // After the answers of the commits before, as every answer is.
                self.syncer.after_sync(
                    b.replies
                        .into_iter()
                        .map(|r| {
                            let err = err.clone();
                            Box::new(move || r(Some(&err))) as After
                        })
                        .collect(),
                );
            }
        }
        self.next_due = self.store.next_due().unwrap_or(self.next_due);
        self.expire_pollers();
    }

    fn flush(&mut self, b: &mut Batch, now: DateTime<Utc>) -> Sql<()> {
        for (id, l) in b.loaded.iter_mut() {
            if !l.dirty {
                continue;
            }
            match &l.ended {
                Some(o) => {
                    let output = o.output.as_ref().map(|v| v.to_string());
                    // An unsuccessful end keeps where it stopped, for a redrive.
                    let redrive_point =
                        (!l.state.resume.is_empty()).then(|| snapshot::encode(&l.state));
                    self.store.close_execution(
                        *id,
                        o.status,
                        output.as_deref(),
                        o.error.as_deref(),
                        o.cause.as_deref(),
                        millis(now),
                        redrive_point.as_deref(),
                    )?;
                }
                None => {
                    self.store.save_snapshot(*id, &snapshot::encode(&l.state))?;
                }
            }
            l.dirty = false;
        }
        Ok(())
    }
}
