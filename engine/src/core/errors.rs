//! State failures and AWS's rules for matching them against Retry and Catch.

use crate::asl::{Catcher, Jitter, Retrier};
use crate::data::DataError;
use crate::data::random::Randomness;
use chrono::TimeDelta;
use serde_json::{Map, Value};

/// A state failed with `error` / `cause`.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// `None` for a Fail state without `Error`.
    pub error: Option<String>,
    pub cause: Option<String>,
    /// Runtime errors of the state's own data flow end the execution: AWS lets neither Retry
    /// nor Catch see them (not even a catcher naming `States.Runtime`).
    pub terminal: bool,
    /// A task whose heartbeat lapsed. Its error is `States.Timeout`, as AWS records it; only
    /// a Retry or Catch naming `States.HeartbeatTimeout` tells it from the task's own timeout.
    pub heartbeat: bool,
}

impl Failure {
    pub fn new(error: impl Into<String>, cause: impl Into<String>) -> Self {
        Failure {
            error: Some(error.into()),
            cause: Some(cause.into()),
            terminal: false,
            heartbeat: false,
        }
    }

    /// A task timed out: `States.Timeout` without a cause, whichever the timeout.
    pub fn timed_out(heartbeat: bool) -> Self {
        Failure {
            error: Some(TIMEOUT.to_owned()),
            cause: None,
            terminal: false,
            heartbeat,
        }
    }

    pub fn from_data(err: DataError, state: &str, entered_event_id: u64) -> Self {
        let terminal = matches!(
            err.error.as_str(),
            "States.Runtime" | "States.DataLimitExceeded"
        );
        Failure {
            cause: Some(format!(
                "An error occurred while executing the state '{state}' (entered at the event id #{entered_event_id}). {}",
                err.message
            )),
            error: Some(err.error),
            terminal,
            heartbeat: false,
        }
    }

    pub fn error_name(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// The error output a catcher's ResultPath receives: `{"Error": …, "Cause": …}`.
    pub fn to_output(&self) -> Value {
        let mut map = Map::new();
        if let Some(e) = &self.error {
            map.insert("Error".to_owned(), Value::String(e.clone()));
        }
        if let Some(c) = &self.cause {
            map.insert("Cause".to_owned(), Value::String(c.clone()));
        }
        Value::Object(map)
    }
}

/// The error of every task timeout, the task's own and a lapsed heartbeat alike.
pub const TIMEOUT: &str = "States.Timeout";

/// The name a Retry or Catch gives to match only a lapsed heartbeat. No failure carries it as
/// its error (unless a worker reports it by that name).
pub const HEARTBEAT_TIMEOUT: &str = "States.HeartbeatTimeout";

/// Whether an `ErrorEquals` list matches a failure.
fn matches(error_equals: &[String], failure: &Failure) -> bool {
    let Some(error) = failure.error_name() else {
        return false;
    };
    error_equals.iter().any(|e| match e.as_str() {
        "States.ALL" => !matches!(error, "States.Runtime" | "States.DataLimitExceeded"),
        "States.TaskFailed" => !matches!(
            error,
            TIMEOUT | "States.Runtime" | "States.DataLimitExceeded"
        ),
        HEARTBEAT_TIMEOUT if failure.heartbeat => true,
        name => name == error,
    })
}

/// The first retrier that matches decides: `Some((index, delay))` when it allows another
/// attempt, `None` when no retrier matches or the matching one is exhausted. FULL jitter draws
/// from `random`.
pub fn next_retry(
    retriers: &[Retrier],
    counts: &[u32],
    failure: &Failure,
    random: &Randomness,
) -> Option<(usize, TimeDelta)> {
    let (index, retrier) = retriers
        .iter()
        .enumerate()
        .find(|(_, r)| matches(&r.error_equals, failure))?;
    let attempts = counts.get(index).copied().unwrap_or(0);
    if attempts >= retrier.max_attempts {
        return None;
    }
    Some((index, backoff(retrier, attempts, random)))
}

/// Delay before retry number `attempts + 1`: IntervalSeconds × BackoffRate^attempts, capped by
/// MaxDelaySeconds, then drawn uniformly from [0, delay] under FULL jitter.
pub fn backoff(retrier: &Retrier, attempts: u32, random: &Randomness) -> TimeDelta {
    let mut seconds =
        retrier.interval_seconds as f64 * retrier.backoff_rate.powi(attempts.min(1000) as i32);
    if let Some(max) = retrier.max_delay_seconds {
        seconds = seconds.min(max as f64);
    }
    // A year is the longest a Standard execution lives; anything above is as good as never.
    seconds = seconds.min(366.0 * 86_400.0);
    if retrier.jitter == Jitter::Full {
        seconds *= random.fraction();
    }
    TimeDelta::milliseconds((seconds * 1000.0).round() as i64)
}

pub fn find_catcher<'c>(catchers: &'c [Catcher], failure: &Failure) -> Option<&'c Catcher> {
    catchers.iter().find(|c| matches(&c.error_equals, failure))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::random::Seed;

    fn random() -> Randomness {
        Randomness::new(Seed::from_u64(0))
    }

    fn retrier(errors: &[&str], max_attempts: u32) -> Retrier {
        Retrier {
            error_equals: errors.iter().map(|s| s.to_string()).collect(),
            interval_seconds: 2,
            max_attempts,
            backoff_rate: 3.0,
            max_delay_seconds: None,
            jitter: Jitter::None,
        }
    }

    fn named(error: &str) -> Failure {
        Failure::new(error, "c")
    }

    fn all(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn states_all_does_not_match_runtime_errors() {
        assert!(matches(&all(&["States.ALL"]), &named("Custom")));
        assert!(!matches(&all(&["States.ALL"]), &named("States.Runtime")));
        let no_error = Failure {
            error: None,
            ..named("x")
        };
        assert!(!matches(&all(&["States.ALL"]), &no_error));
    }

    #[test]
    fn task_failed_matches_everything_but_timeouts() {
        let task_failed = all(&["States.TaskFailed"]);
        assert!(matches(&task_failed, &named("Lambda.Unknown")));
        assert!(!matches(&task_failed, &Failure::timed_out(false)));
        assert!(!matches(&task_failed, &Failure::timed_out(true)));
    }

    /// AWS records a lapsed heartbeat as `States.Timeout`: `States.Timeout` and `States.ALL`
    /// match it, `States.HeartbeatTimeout` matches it and nothing else.
    #[test]
    fn a_lapsed_heartbeat_is_a_timeout_that_heartbeat_timeout_alone_singles_out() {
        let heartbeat = Failure::timed_out(true);
        let task = Failure::timed_out(false);
        assert_eq!(heartbeat.error_name(), Some(TIMEOUT));
        assert_eq!(heartbeat.to_output(), serde_json::json!({"Error": TIMEOUT}));
        for names in [&["States.Timeout"][..], &["States.ALL"]] {
            assert!(matches(&all(names), &heartbeat), "{names:?}");
            assert!(matches(&all(names), &task), "{names:?}");
        }
        let by_name = all(&[HEARTBEAT_TIMEOUT]);
        assert!(matches(&by_name, &heartbeat));
        assert!(!matches(&by_name, &task));
        assert!(!matches(&by_name, &named("Custom")));
        // A worker may still report an error of that name, matched by name.
        assert!(matches(&by_name, &named(HEARTBEAT_TIMEOUT)));
    }

    #[test]
    fn first_matching_retrier_decides_even_when_exhausted() {
        let retriers = [retrier(&["A"], 1), retrier(&["States.ALL"], 5)];
        let failure = Failure::new("A", "x");
        assert!(next_retry(&retriers, &[0, 0], &failure, &random()).is_some());
        assert_eq!(next_retry(&retriers, &[1, 0], &failure, &random()), None);
    }

    #[test]
    fn backoff_grows_geometrically_and_is_capped() {
        let mut r = retrier(&["A"], 5);
        assert_eq!(backoff(&r, 0, &random()), TimeDelta::seconds(2));
        assert_eq!(backoff(&r, 2, &random()), TimeDelta::seconds(18));
        r.max_delay_seconds = Some(5);
        assert_eq!(backoff(&r, 2, &random()), TimeDelta::seconds(5));
    }

    #[test]
    fn full_jitter_stays_within_the_delay() {
        let mut r = retrier(&["A"], 5);
        r.jitter = Jitter::Full;
        let random = random();
        for _ in 0..100 {
            let d = backoff(&r, 1, &random);
            assert!(d >= TimeDelta::zero() && d <= TimeDelta::seconds(6));
        }
    }

    #[test]
    fn data_errors_carry_the_state_and_entered_event() {
        let f = Failure::from_data(DataError::runtime("Invalid path"), "S", 4);
        assert!(f.terminal);
        assert_eq!(
            f.cause.as_deref(),
            Some(
                "An error occurred while executing the state 'S' (entered at the event id #4). Invalid path"
            )
        );
    }
}
