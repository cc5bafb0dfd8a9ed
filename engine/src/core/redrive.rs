//! `RedriveExecution`: which closed executions may run again (and AWS's reason when one may
//! not), and the resumption itself. A redrive continues an unsuccessful execution from the states
//! where it stopped, with their inputs and the variables they saw; states that had finished are
//! not run again, and the finished branches and iterations of a Parallel or Map keep their
//! results. Rules from AWS's developer guide ("Restarting state machine executions with redrive")
//! and the `RedriveExecution` / `DescribeExecution` API reference.

use super::machine::{FrameWait, Run};
use super::states::children;
use crate::sfn::ExecutionStatus;
use chrono::{DateTime, TimeDelta, Utc};
use serde_json::json;

/// How long after it closed an execution may be redriven (AWS's "redrivable period").
const REDRIVABLE_DAYS: i64 = 14;
/// The longest an execution may be open, counted from its start (Standard: one year).
const MAX_OPEN_DAYS: i64 = 365;
/// A redrive appends `ExecutionRedriven` and at least one more event to a history of at most
/// 25,000 events, so AWS redrives only histories of fewer than 24,999 events.
const REDRIVABLE_EVENTS: u64 = 24_999;
/// The engine's own reason, for an execution it kept no redrive point of (not one of AWS's
/// reasons: AWS has no execution it cannot resume).
pub const UNRESUMABLE: &str =
    "Execution has no recorded point to resume from and cannot be redriven.";

/// What decides whether an execution may be redriven.
#[derive(Debug, Clone, Copy)]
pub struct Facts {
    pub status: ExecutionStatus,
    pub start: DateTime<Utc>,
    pub stop: Option<DateTime<Utc>>,
    /// Events in its history so far.
    pub events: u64,
    /// The engine kept where the execution stopped. It does for every execution that failed,
    /// was stopped or timed out, except those the engine itself had to fail (an internal error,
    /// an unreadable snapshot).
    pub resumable: bool,
}

/// Why the execution cannot be redriven at `now`, in AWS's words (`redriveStatusReason`, and the
/// message of `ExecutionNotRedrivable`); `None` when it can.
pub fn refusal(facts: &Facts, now: DateTime<Utc>) -> Option<&'static str> {
    match facts.status {
        ExecutionStatus::Running => return Some("Execution is RUNNING and cannot be redriven."),
        ExecutionStatus::Succeeded => {
            return Some("Execution is SUCCEEDED and cannot be redriven.");
        }
        ExecutionStatus::Failed | ExecutionStatus::Aborted | ExecutionStatus::TimedOut => {}
    }
    if facts.events >= REDRIVABLE_EVENTS {
        return Some("Execution history event limit exceeded.");
    }
    if now - facts.start > TimeDelta::days(MAX_OPEN_DAYS) {
        return Some("Execution has exceeded the max execution time.");
    }
    if facts
        .stop
        .is_some_and(|stop| now - stop > TimeDelta::days(REDRIVABLE_DAYS))
    {
        return Some("Execution redrivable period exceeded.");
    }
    if !facts.resumable {
        return Some(UNRESUMABLE);
    }
    None
}

/// Applies a redrive: the execution is RUNNING again, `ExecutionRedriven` is recorded, and every
/// frame where it stopped re-enters its state (a Task is scheduled again with a new token and a
/// fresh `TimeoutSeconds`, a Choice is evaluated again, a Fail state fails again), its retry
/// counts back at 0. Parallel and Map states waiting on children are not re-entered: the
/// children that had not finished re-enter their own states, those not started yet start, and
/// the results of the finished ones are kept. Anything else than a redrivable execution with a
/// redrive point is left as it is.
pub(crate) fn resume(run: &mut Run) {
    let redrivable = matches!(
        run.st.status,
        ExecutionStatus::Failed | ExecutionStatus::Aborted | ExecutionStatus::TimedOut
    );
    if !redrivable || run.st.resume.is_empty() {
        return;
    }
    run.st.status = ExecutionStatus::Running;
    run.st.frames = std::mem::take(&mut run.st.resume);
    run.st.redrive_count += 1;
    run.st.redrive_time = Some(run.now);
    let details = json!({ "redriveCount": run.st.redrive_count });
    let redriven = run.emit(None, "ExecutionRedriven", Some(details));
    let ids: Vec<u64> = run.st.frames.keys().copied().collect();
    let mut parents = Vec::new();
    for id in &ids {
        let frame = run.frame_mut(*id);
        frame.last_event_id = redriven;
        frame.retry_counts.iter_mut().for_each(|c| *c = 0);
        if matches!(frame.wait, FrameWait::Children(_)) {
            parents.push(*id);
        }
    }
    // A parent whose re-entered children finish at once must not complete, nor start more
    // children, before all of its unfinished children are back in their states.
    run.launching.extend(parents.iter().copied());
    for id in ids {
        if run.st.status.is_terminal() {
            // It failed again on the way; that failure's redrive point is already kept.
            return;
        }
        // A frame a sibling's failure abandoned is gone; a parent is resumed below.
        let Some(frame) = run.st.frames.get(&id) else {
            continue;
        };
        if matches!(frame.wait, FrameWait::Children(_)) {
            continue;
        }
        let (state, input) = (frame.state.clone(), frame.input.clone());
        run.enter(id, &state, input);
    }
    run.launching.retain(|p| !parents.contains(p));
    // Innermost first (children have larger ids than their parents): an inner Parallel that
    // completes hands its result to the outer one before the outer one is looked at.
    for parent in parents.into_iter().rev() {
        if run.st.status.is_terminal() {
            return;
        }
        let waiting = run
            .st
            .frames
            .get(&parent)
            .is_some_and(|f| matches!(f.wait, FrameWait::Children(_)));
        if waiting {
            children::launch(run, parent);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn facts(status: ExecutionStatus) -> Facts {
        let start = Utc.with_ymd_and_hms(2024, 1, 1, 0, 0, 0).unwrap();
        Facts {
            status,
            start,
            stop: Some(start + TimeDelta::hours(1)),
            events: 10,
            resumable: true,
        }
    }

    #[test]
    fn only_failed_aborted_and_timed_out_executions_are_redrivable() {
        let f = facts(ExecutionStatus::Failed);
        let now = f.stop.unwrap() + TimeDelta::minutes(1);
        for status in [
            ExecutionStatus::Failed,
            ExecutionStatus::Aborted,
            ExecutionStatus::TimedOut,
        ] {
            assert_eq!(refusal(&facts(status), now), None, "{status:?}");
        }
        assert_eq!(
            refusal(&facts(ExecutionStatus::Running), now),
            Some("Execution is RUNNING and cannot be redriven.")
        );
        assert_eq!(
            refusal(&facts(ExecutionStatus::Succeeded), now),
            Some("Execution is SUCCEEDED and cannot be redriven.")
        );
    }

    #[test]
    fn the_redrivable_period_is_fourteen_days_from_the_close() {
        let f = facts(ExecutionStatus::Failed);
        let stop = f.stop.unwrap();
        assert_eq!(refusal(&f, stop + TimeDelta::days(14)), None);
        assert_eq!(
            refusal(&f, stop + TimeDelta::days(14) + TimeDelta::seconds(1)),
            Some("Execution redrivable period exceeded.")
        );
    }

    #[test]
    fn a_full_history_or_a_year_open_is_not_redrivable() {
        let mut f = facts(ExecutionStatus::Failed);
        let now = f.stop.unwrap();
        f.events = 24_998;
        assert_eq!(refusal(&f, now), None);
        f.events = 24_999;
        assert_eq!(
            refusal(&f, now),
            Some("Execution history event limit exceeded.")
        );
        let mut f = facts(ExecutionStatus::TimedOut);
        f.stop = Some(f.start + TimeDelta::days(360));
        assert_eq!(
            refusal(&f, f.start + TimeDelta::days(366)),
            Some("Execution has exceeded the max execution time.")
        );
    }

    #[test]
    fn an_execution_without_a_redrive_point_is_not_redrivable() {
        let mut f = facts(ExecutionStatus::Failed);
        f.resumable = false;
        assert!(refusal(&f, f.stop.unwrap()).is_some());
    }
}
