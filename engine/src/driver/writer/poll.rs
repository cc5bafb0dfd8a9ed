//! Activity polls: a poll with no task waiting queues until its deadline; a task scheduled while
//! one waits is handed out to it at once (as `ActivityStarted`).

use super::{Batch, Reply, Sql, Writer};
use crate::core::Event;
use crate::db::{TaskRow, TaskStatus};
use crate::sfn::ActivityTask;
use chrono::{DateTime, Utc};
use std::collections::VecDeque;
use std::time::Instant;

pub(super) struct Poller {
    pub(super) worker: Option<String>,
    pub(super) deadline: Instant,
    pub(super) reply: Reply<Option<ActivityTask>>,
}

impl Writer {
    /// The oldest task of the activity a worker may be handed. Its execution is loaded first (the
    /// `ActivityStarted` event loads it in any case): one whose snapshot cannot be read fails
    /// there, which closes its tasks, and the next task is taken instead, so that no worker does
    /// the work of an execution that has ended.
    pub(super) fn next_task(
        &mut self,
        b: &mut Batch,
        activity_arn: &str,
        now: DateTime<Utc>,
    ) -> Sql<Option<TaskRow>> {
        while let Some(task) = self.store.next_scheduled(activity_arn)? {
            if self.load(b, task.exec_id, now)? {
                return Ok(Some(task));
            }
            // Not loaded, yet still open: its execution ended or lost its machine before, and the
            // task is handed out as it always was. Closed: loading failed the execution.
            let open = self
                .store
                .task(&task.token)?
                .is_some_and(|t| t.status != TaskStatus::Closed);
            if open {
                return Ok(Some(task));
            }
        }
        Ok(None)
    }

    pub(super) fn hand_out(
        &mut self,
        b: &mut Batch,
        token: &str,
        exec_id: i64,
        input: Option<String>,
        worker: Option<String>,
        reply: Reply<Option<ActivityTask>>,
    ) -> Sql<()> {
        self.store.mark_started(token, worker.as_deref())?;
        b.events.push_back((
            exec_id,
            Event::TaskStarted {
                token: token.to_owned(),
                worker_name: worker,
            },
        ));
        let task = ActivityTask {
            task_token: token.to_owned(),
            input: input.unwrap_or_else(|| "{}".to_owned()),
        };
        b.reply(reply, Ok(Some(task)));
        Ok(())
    }

    pub(super) fn live_poller(&mut self, activity_arn: &str) -> Option<Poller> {
        let queue = self.pollers.get_mut(activity_arn)?;
        while let Some(p) = queue.pop_front() {
            if !p.reply.is_closed() {
                return Some(p);
            }
        }
        None
    }

    pub(super) fn close_pollers(&mut self) {
        for (_, queue) in self.pollers.drain() {
            for p in queue {
                let _ = p.reply.send(Ok(None));
            }
        }
    }

    /// Answers "no task" to every poll whose deadline has passed (and forgets polls whose
    /// caller went away). Deadlines differ per poll, so the whole queue is scanned.
    pub(super) fn expire_pollers(&mut self) {
        let now = Instant::now();
        for queue in self.pollers.values_mut() {
            let mut kept = VecDeque::with_capacity(queue.len());
            for p in queue.drain(..) {
                if p.reply.is_closed() {
                    continue;
                }
                if p.deadline <= now {
                    let _ = p.reply.send(Ok(None));
                } else {
                    kept.push_back(p);
                }
            }
            *queue = kept;
        }
        self.pollers.retain(|_, q| !q.is_empty());
    }
}
