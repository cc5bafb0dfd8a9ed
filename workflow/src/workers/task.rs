//! One task's life in the pool: run its step (catching a panic), heartbeat the token while the
//! step runs, and report the outcome, retrying while the workflow service is unavailable.

use super::pool::ActivityWorker;
use super::{StepOutcome, StepTask};
use crate::port::{TaskHandle, WorkflowError};
use serde_json::Value;
use std::any::Any;
use std::sync::Arc;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{Instant, MissedTickBehavior};
use tracing::Instrument;

/// The longest `error` and `cause` a task failure may carry (Step Functions' limits).
const MAX_ERROR_CHARS: usize = 256;
const MAX_CAUSE_CHARS: usize = 32_768;

/// Runs the step for `handle` and reports its outcome; `_slot` is the activity's in-flight
/// slot, given back only when the answer has been sent (or given up).
pub(super) async fn run(
    worker: Arc<ActivityWorker>,
    handle: TaskHandle,
    _slot: OwnedSemaphorePermit,
) {
    let span = tracing::info_span!(
        "step",
        activity = %worker.activity,
        order_id = tracing::field::Empty,
    );
    match handle.input.get("orderId") {
        Some(Value::String(id)) => {
            span.record("order_id", id.as_str());
        }
        Some(other) => {
            span.record("order_id", tracing::field::display(other));
        }
        None => {}
    }
    async move {
        tracing::debug!("task taken");
        let outcome = run_with_heartbeats(&worker, handle.clone()).await;
        answer(&worker, &handle.task_token, outcome).await;
    }
    .instrument(span)
    .await
}

/// Runs the step in its own task (so a panic is caught as a `JoinError`) and heartbeats the
/// token until the step returns.
async fn run_with_heartbeats(worker: &ActivityWorker, handle: TaskHandle) -> StepOutcome {
    let token = handle.task_token.clone();
    let step = worker.step.clone();
    let task = StepTask {
        task_token: handle.task_token,
        input: handle.input,
    };
    let mut running = tokio::spawn(async move { step.run(task).await }.in_current_span());
    let every = worker.settings.heartbeat_interval;
    let mut heartbeats = tokio::time::interval_at(Instant::now() + every, every);
    heartbeats.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut heartbeating = true;
    loop {
        tokio::select! {
            joined = &mut running => {
                return match joined {
                    Ok(outcome) => outcome,
                    Err(e) => {
                        let cause = if e.is_panic() {
                            format!("the step panicked: {}", panic_message(e.into_panic()))
                        } else {
                            "the step was cancelled".to_owned()
                        };
                        tracing::error!(%cause, "step failed");
                        StepOutcome::Failed {
                            error: crate::ErrorName::StepFailed.as_str().to_owned(),
                            cause,
                        }
                    }
                };
            }
            _ = heartbeats.tick(), if heartbeating => {
                match worker.port.send_task_heartbeat(&token).await {
                    Ok(()) => {}
                    // The task is closed or was given to another worker: the step runs to its
                    // end (steps are idempotent), and its answer will be refused.
                    Err(e @ (WorkflowError::TaskTimedOut(_) | WorkflowError::InvalidToken(_))) => {
                        tracing::warn!(error = %e, "the task's token is dead; the step goes on, its answer will be refused");
                        heartbeating = false;
                    }
                    Err(e) => tracing::warn!(error = %e, "heartbeat failed"),
                }
            }
        }
    }
}

fn panic_message(payload: Box<dyn Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(payload) => match payload.downcast::<&'static str>() {
            Ok(s) => (*s).to_owned(),
            Err(_) => "a panic without a message".to_owned(),
        },
    }
}

/// What the workflow is told.
enum Report<'a> {
    Success(&'a Value),
    Failure { error: String, cause: String },
}

/// Reports `outcome`, retrying while the workflow service is unavailable.
async fn answer(worker: &ActivityWorker, token: &str, outcome: StepOutcome) {
    let settings = &worker.settings;
    let report = match &outcome {
        StepOutcome::Parked => {
            tracing::info!("step parked its task");
            return;
        }
        StepOutcome::Done(output) => Report::Success(output),
        StepOutcome::Failed { error, cause } => Report::Failure {
            error: truncate_chars(error, MAX_ERROR_CHARS),
            cause: truncate_chars(cause, MAX_CAUSE_CHARS),
        },
    };
    let mut pauses = store::retry::pauses(settings.retry_backoff, settings.max_retry_backoff, None);
    let attempts = settings.answer_attempts.max(1);
    for attempt in 1..=attempts {
        let sent = match &report {
            Report::Success(output) => worker.port.send_task_success(token, output).await,
            Report::Failure { error, cause } => {
                worker.port.send_task_failure(token, error, cause).await
            }
        };
        match sent {
            Ok(()) => {
                match &report {
                    // Every step of every order at `info` was most of a busy service's lines
                    // (and their cost); the execution's history keeps each step. Failures,
                    // parks and compensations stay at `info`.
                    Report::Success(_) => tracing::debug!("step succeeded"),
                    Report::Failure { error, .. } => tracing::info!(%error, "step failed"),
                }
                return;
            }
            Err(e @ (WorkflowError::TaskTimedOut(_) | WorkflowError::InvalidToken(_))) => {
                tracing::warn!(error = %e, "the answer was refused: the task is closed");
                return;
            }
            Err(e) if e.is_transient() && attempt < attempts => {
                let delay = pauses.next().unwrap_or(settings.max_retry_backoff);
                tracing::warn!(error = %e, attempt, ?delay, "answering failed; retrying");
                tokio::time::sleep(delay).await;
            }
            Err(e) => {
                tracing::error!(error = %e, attempt, "could not answer the task; it will time out");
                return;
            }
        }
    }
}

/// At most `max` characters of `s` (the limits are in characters, not bytes).
fn truncate_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((end, _)) => s[..end].to_owned(),
        None => s.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_counts_characters_not_bytes() {
        assert_eq!(truncate_chars("héllo", 2), "hé");
        assert_eq!(truncate_chars("héllo", 5), "héllo");
        assert_eq!(truncate_chars("héllo", 50), "héllo");
        assert_eq!(
            truncate_chars(&"é".repeat(300), MAX_ERROR_CHARS)
                .chars()
                .count(),
            256
        );
    }

    #[test]
    fn panic_messages_are_read_from_str_and_string_payloads() {
        assert_eq!(panic_message(Box::new("boom")), "boom");
        assert_eq!(panic_message(Box::new(String::from("bang"))), "bang");
        assert_eq!(panic_message(Box::new(42)), "a panic without a message");
    }
}
