//! `Retry` and `Catch`, shared by Task, Parallel and Map.

use super::fields::{self, Loc, Problems};
use crate::asl::{Catcher, Jitter, Retrier};
use serde_json::{Map, Value};

/// `ErrorEquals`: a non-empty array of strings in which `States.ALL` may only appear alone.
fn error_equals(obj: &Map<String, Value>, loc: &Loc, problems: &mut Problems) -> Vec<String> {
    let names: Vec<String> = match obj.get("ErrorEquals") {
        Some(Value::Array(items)) if !items.is_empty() => items
            .iter()
            .filter_map(|v| match v {
                Value::String(s) => Some(s.clone()),
                _ => {
                    problems.at(loc, "ErrorEquals", "must contain only error-name strings");
                    None
                }
            })
            .collect(),
        Some(_) => {
            problems.at(
                loc,
                "ErrorEquals",
                "must be a non-empty array of error names",
            );
            Vec::new()
        }
        None => {
            problems.at(loc, "ErrorEquals", "is required");
            Vec::new()
        }
    };
    if names.len() > 1 && names.iter().any(|n| n == "States.ALL") {
        problems.at(
            loc,
            "ErrorEquals",
            "'States.ALL' must be the only error name in its ErrorEquals",
        );
    }
    names
}

/// Reports a `States.ALL` retrier or catcher that is followed by another one. `entries` pairs
/// each parsed entry's index in the block with its error names; `len` is the block's length.
fn check_states_all_last(
    entries: &[(usize, &[String])],
    len: usize,
    block: &str,
    loc: &Loc,
    problems: &mut Problems,
) {
    for &(i, names) in entries {
        if i + 1 < len && names.iter().any(|n| n == "States.ALL") {
            problems.at(
                loc,
                &format!("{block}[{i}].ErrorEquals"),
                format!("A {block} entry matching 'States.ALL' must be the last one"),
            );
        }
    }
}

pub fn retriers(obj: &Map<String, Value>, loc: &Loc, problems: &mut Problems) -> Vec<Retrier> {
    let Some(items) = fields::array(obj, "Retry", loc, problems) else {
        return Vec::new();
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let rloc = loc.nested(&format!("Retry[{i}]"));
        let Some(r) = item.as_object() else {
            problems.at(&rloc, "", "A Retrier must be an object");
            continue;
        };
        fields::check_fields(
            r,
            &[
                "ErrorEquals",
                "IntervalSeconds",
                "MaxAttempts",
                "BackoffRate",
                "MaxDelaySeconds",
                "JitterStrategy",
                "Comment",
            ],
            &rloc,
            problems,
            |k| format!("Field '{k}' is not supported in a Retrier"),
        );
        let error_equals = error_equals(r, &rloc, problems);
        let interval_seconds = fields::uint(r, "IntervalSeconds", 1, &rloc, problems).unwrap_or(1);
        let max_attempts = match fields::uint(r, "MaxAttempts", 0, &rloc, problems) {
            None => 3,
            Some(n) => u32::try_from(n).unwrap_or_else(|_| {
                problems.at(&rloc, "MaxAttempts", "is too large");
                0
            }),
        };
        let backoff_rate = fields::number(r, "BackoffRate", &rloc, problems).unwrap_or(2.0);
        if backoff_rate < 1.0 {
            problems.at(&rloc, "BackoffRate", "must be at least 1.0");
        }
        let max_delay_seconds = fields::uint(r, "MaxDelaySeconds", 1, &rloc, problems);
        let jitter = match fields::string(r, "JitterStrategy", &rloc, problems).as_deref() {
            None | Some("NONE") => Jitter::None,
            Some("FULL") => Jitter::Full,
            Some(other) => {
                problems.at(
                    &rloc,
                    "JitterStrategy",
                    format!("'{other}' is not FULL or NONE"),
                );
                Jitter::None
            }
        };
        out.push((
            i,
            Retrier {
                error_equals,
                interval_seconds,
                max_attempts,
                backoff_rate,
                max_delay_seconds,
                jitter,
            },
        ));
    }
    let entries: Vec<(usize, &[String])> = out
        .iter()
        .map(|(i, r)| (*i, r.error_equals.as_slice()))
        .collect();
    check_states_all_last(&entries, items.len(), "Retry", loc, problems);
    out.into_iter().map(|(_, r)| r).collect()
}

pub fn catchers(obj: &Map<String, Value>, loc: &Loc, problems: &mut Problems) -> Vec<Catcher> {
    let Some(items) = fields::array(obj, "Catch", loc, problems) else {
        return Vec::new();
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let cloc = loc.nested(&format!("Catch[{i}]"));
        let Some(c) = item.as_object() else {
            problems.at(&cloc, "", "A Catcher must be an object");
            continue;
        };
        fields::check_fields(
            c,
            &["ErrorEquals", "Next", "ResultPath", "Assign", "Comment"],
            &cloc,
            problems,
            |k| format!("Field '{k}' is not supported in a Catcher"),
        );
        out.push((
            i,
            Catcher {
                error_equals: error_equals(c, &cloc, problems),
                next: fields::required_string(c, "Next", &cloc, problems),
                result_path: fields::opt_path(c, "ResultPath", true, &cloc, problems),
                assign: fields::assign(c, &cloc, problems),
            },
        ));
    }
    let entries: Vec<(usize, &[String])> = out
        .iter()
        .map(|(i, c)| (*i, c.error_equals.as_slice()))
        .collect();
    check_states_all_last(&entries, items.len(), "Catch", loc, problems);
    out.into_iter().map(|(_, c)| c).collect()
}
