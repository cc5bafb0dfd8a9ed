//! Events applied to the interpreter, and the actions it returns carried out inside the batch:
//! tasks inserted (and handed to a waiting poller), timers set and cancelled, executions ended.

use super::timers::{due_after, millis};
use super::{Batch, Sql, Writer};
use crate::core::{Action, Event, Interpreter, Seed};
use crate::db::TimerKind;
use crate::sfn::TaskRequest;
use chrono::{DateTime, Utc};

impl Writer {
    pub(super) fn drain(&mut self, b: &mut Batch, now: DateTime<Utc>) -> Sql<()> {
        while let Some((exec_id, event)) = b.events.pop_front() {
            self.apply(b, exec_id, event, now)?;
        }
        Ok(())
    }

    fn apply(&mut self, b: &mut Batch, exec_id: i64, event: Event, now: DateTime<Utc>) -> Sql<()> {
        if !self.load(b, exec_id, now)? {
            return Ok(());
        }
        let loaded = b.loaded.get_mut(&exec_id).expect("loaded above");
        let activities = &self.activities;
        let is_activity = |r: &str| activities.contains(r);
        let interpreter = Interpreter {
            definition: &loaded.machine.def,
            info: &loaded.info,
            is_activity: &is_activity,
        };
        // The interpreter reads no random source itself: task tokens must be unguessable, so
        // every step gets a fresh seed from the thread's CSPRNG (seeded from the OS).
        let seed = Seed(rand::random());
        // A bug in the interpreter must cost one execution, not the engine: the writer thread
        // would otherwise die and take every other execution with it.
        let applied = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            interpreter.apply(&mut loaded.state, event, now, seed)
        }));
        let exec_arn = loaded.arn.clone();
        let step = match applied {
            Ok(step) => step,
            Err(panic) => {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                tracing::error!(execution_arn = %exec_arn, panic = %what, "interpreter panicked; failing the execution");
                b.loaded.remove(&exec_id);
                self.store.delete_timers_of(exec_id)?;
                self.store.close_tasks_of(exec_id, millis(now))?;
                self.store.close_execution(
                    exec_id,
                    crate::sfn::ExecutionStatus::Failed,
                    None,
                    Some("States.Runtime"),
                    Some("The engine failed while running this execution (an internal error); see the engine log."),
                    millis(now),
                    None,
                )?;
                b.finished.push(exec_arn);
                return Ok(());
            }
        };
        loaded.dirty = true;
        let _span = tracing::debug_span!("transition", execution_arn = %exec_arn).entered();
        b.transitions += step
            .events
            .iter()
            .filter(|e| e.event_type.ends_with("StateEntered"))
            .count() as u64;
        self.store.append_events(exec_id, &step.events)?;
        for action in step.actions {
            self.act(b, exec_id, &exec_arn, action, now)?;
        }
        Ok(())
    }

    fn act(
        &mut self,
        b: &mut Batch,
        exec_id: i64,
        exec_arn: &str,
        action: Action,
        now: DateTime<Utc>,
    ) -> Sql<()> {
        match action {
            Action::ScheduleTask(t) => {
                let activity = self.activities.contains(&t.resource);
                let input_text = t.input.to_string();
                self.store.insert_task(
                    &t.token,
                    exec_id,
                    activity.then_some(t.resource.as_str()),
                    &t.resource,
                    &t.state_name,
                    &input_text,
                    t.heartbeat_seconds,
                )?;
                if let Some(secs) = t.timeout_seconds {
                    let due = due_after(now, secs);
                    self.store
                        .set_timer(exec_id, TimerKind::TaskTimeout, &t.token, due)?;
                }
                if activity {
                    if let Some(poller) = self.live_poller(&t.resource) {
                        self.hand_out(
                            b,
                            &t.token,
                            exec_id,
                            Some(input_text),
                            poller.worker,
                            poller.reply,
                        )?;
                    }
                } else {
                    if let Some(h) = t.heartbeat_seconds {
                        let due = due_after(now, h);
                        self.store
                            .set_timer(exec_id, TimerKind::Heartbeat, &t.token, due)?;
                    }
                    b.invocations.push(TaskRequest {
                        resource: t.resource,
                        input: t.input,
                        task_token: t.token,
                        execution_arn: exec_arn.to_owned(),
                        state_name: t.state_name,
                    });
                }
            }
            Action::CloseTask { token } => self.store.close_task(&token, millis(now))?,
            Action::StartHeartbeat {
                token,
                heartbeat_seconds,
            } => {
                self.store.set_timer(
                    exec_id,
                    TimerKind::Heartbeat,
                    &token,
                    due_after(now, heartbeat_seconds),
                )?;
            }
            Action::StartTimer { timer_id, due } => {
                self.store.set_timer(
                    exec_id,
                    TimerKind::Timer,
                    &timer_id.to_string(),
                    millis(due),
                )?;
            }
            Action::CancelTimer { timer_id } => {
                self.store
                    .delete_timer(exec_id, TimerKind::Timer, &timer_id.to_string())?;
            }
            Action::Finish(end) => {
                self.store.delete_timers_of(exec_id)?;
                if let Some(l) = b.loaded.get_mut(&exec_id) {
                    l.ended = Some(end);
                }
                b.finished.push(exec_arn.to_owned());
            }
        }
        Ok(())
    }
}
