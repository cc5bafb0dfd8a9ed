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
}

impl Failure {
    pub fn new(error: impl Into<String>, cause: impl Into<String>) -> Self {
        Failure {
            error: Some(error.into()),
            cause: Some(cause.into()),
            terminal: false,
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

/// Whether an `ErrorEquals` list matches an error name.
fn matches(error_equals: &[String], error: Option<&str>) -> bool {
    let Some(error) = error else { return false };
    error_equals.iter().any(|e| match e.as_str() {
        "States.ALL" => !matches!(error, "States.Runtime" | "States.DataLimitExceeded"),
        "States.TaskFailed" => !matches!(
            error,
            "States.Timeout" | "States.Runtime" | "States.DataLimitExceeded"
        ),
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
        .find(|(_, r)| matches(&r.error_equals, failure.error_name()))?;
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
    catchers
        .iter()
        .find(|c| matches(&c.error_equals, failure.error_name()))
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

    #[test]
    fn states_all_does_not_match_runtime_errors() {
        assert!(matches(&["States.ALL".into()], Some("Custom")));
        assert!(!matches(&["States.ALL".into()], Some("States.Runtime")));
        assert!(!matches(&["States.ALL".into()], None));
    }

    #[test]
    fn task_failed_matches_everything_but_timeout() {
        assert!(matches(
            &["States.TaskFailed".into()],
            Some("Lambda.Unknown")
        ));
        assert!(matches(
            &["States.TaskFailed".into()],
            Some("States.HeartbeatTimeout")
        ));
        assert!(!matches(
            &["States.TaskFailed".into()],
            Some("States.Timeout")
        ));
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
