//! Timers: due times in epoch milliseconds, and the pass that turns every due timer (Wait and
//! retry timers, task timeouts, heartbeats, execution timeouts) into its event.

use super::{Batch, Sql, Writer};
use crate::core::{Event, TimeoutKind};
use crate::db::TimerKind;
use chrono::{DateTime, TimeDelta, Utc};

pub(super) fn millis(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

/// The due time of a timer `seconds` after `now`, in epoch milliseconds: every timeout and
/// heartbeat deadline is set through it. It saturates at the latest time chrono represents
/// (ASL bounds timeouts far below it), so no number in a definition can overflow it.
pub(super) fn due_after(now: DateTime<Utc>, seconds: u64) -> i64 {
    let delta = i64::try_from(seconds)
        .ok()
        .and_then(TimeDelta::try_seconds)
        .unwrap_or(TimeDelta::MAX);
    millis(
        now.checked_add_signed(delta)
            .unwrap_or(DateTime::<Utc>::MAX_UTC),
    )
}

pub(super) fn from_millis(ms: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(ms).unwrap_or_default()
}

impl Writer {
    pub(super) fn fire_timers(&mut self, b: &mut Batch, now: DateTime<Utc>) -> Sql<()> {
        let now_ms = millis(now);
        if self.next_due.is_none_or(|d| d > now_ms) {
            return Ok(());
        }
        loop {
            let due = self.store.take_due(now_ms, 1024)?;
            if due.is_empty() {
                break;
            }
            for t in due {
                let event = match t.kind {
                    TimerKind::Timer => match t.reference.parse() {
                        Ok(timer_id) => Event::TimerFired { timer_id },
                        Err(_) => continue,
                    },
                    TimerKind::TaskTimeout => Event::TaskTimedOut {
                        token: t.reference,
                        kind: TimeoutKind::Task,
                    },
                    TimerKind::Heartbeat => Event::TaskTimedOut {
                        token: t.reference,
                        kind: TimeoutKind::Heartbeat,
                    },
                    TimerKind::ExecutionTimeout => Event::ExecutionTimedOut,
                };
                b.events.push_back((t.exec_id, event));
            }
            self.drain(b, now)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_due_time_is_seconds_after_now_and_never_overflows() {
        let now = from_millis(1_700_000_000_000);
        assert_eq!(due_after(now, 0), 1_700_000_000_000);
        assert_eq!(due_after(now, 90), 1_700_000_090_000);
        let latest = DateTime::<Utc>::MAX_UTC.timestamp_millis();
        assert_eq!(due_after(now, u64::MAX), latest);
        assert_eq!(due_after(now, i64::MAX as u64 / 1000), latest);
    }
}
