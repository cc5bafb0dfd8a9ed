//! Wait: holds the frame until a number of seconds have passed or a timestamp is reached.

use super::super::errors::Failure;
use super::super::machine::{FrameWait, Run};
use super::{effective_input, output, runtime};
use crate::asl::timestamp::parse_timestamp;
use crate::asl::{State, WaitSpec};
use crate::data::jsonpath;
use chrono::{DateTime, TimeDelta, Utc};
use serde_json::Value;

pub fn run(run: &mut Run, id: u64, state: &State, spec: &WaitSpec) -> Result<(), Failure> {
    let effective = effective_input(run, id, state)?;
    let due = due_time(run, id, spec, &effective)?;
    if due <= run.now {
        elapsed(run, id, effective);
        return Ok(());
    }
    let timer_id = run.new_timer(due);
    run.frame_mut(id).wait = FrameWait::Wait {
        timer_id,
        effective,
    };
    Ok(())
}

/// The wait is over: leave the state.
pub fn elapsed(run: &mut Run, id: u64, effective: Value) {
    let state = run.state_of(id);
    let result = run
        .evaluate_assign(id, state.assign.as_ref(), &effective)
        .and_then(|assigned| Ok((assigned, output(run, id, state, &effective)?)));
    match result {
        Ok((assigned, out)) => run.leave(id, out, assigned, state.transition.clone()),
        Err(failure) => run.state_failed(id, failure),
    }
}

fn due_time(
    run: &Run,
    id: u64,
    spec: &WaitSpec,
    effective: &Value,
) -> Result<DateTime<Utc>, Failure> {
    let select = |path: &str| {
        run.with_scope(id, effective, |s| jsonpath::select_for_field(path, path, s))
            .map_err(|e| run.data_failure(id, e))
    };
    match spec {
        WaitSpec::Seconds(n) => Ok(run.now + seconds(*n)),
        WaitSpec::Timestamp(text) => parse_timestamp(text).map(|t| t.to_utc()).ok_or_else(|| {
            runtime(
                run,
                id,
                format!("The Timestamp field is not a valid timestamp: {text}"),
            )
        }),
        WaitSpec::SecondsPath(path) => {
            let value = select(path)?;
            match value.as_i64() {
                Some(n) if n >= 0 => Ok(run.now + seconds(n as u64)),
                Some(_) => Err(runtime(
                    run,
                    id,
                    format!(
                        "The SecondsPath parameter references a negative value: {path} == {value}"
                    ),
                )),
                None => Err(runtime(
                    run,
                    id,
                    format!(
                        "The SecondsPath parameter cannot be parsed as a long value: {path} == {value}"
                    ),
                )),
            }
        }
        WaitSpec::TimestampPath(path) => {
            let value = select(path)?;
            value.as_str().and_then(parse_timestamp).map(|t| t.to_utc()).ok_or_else(|| {
                let shown = super::text_of(&value);
                runtime(
                    run,
                    id,
                    format!(
                        "The TimestampPath parameter does not reference a valid ISO-8601 extended offset date-time format string: {path} == {shown}"
                    ),
                )
            })
        }
    }
}

fn seconds(n: u64) -> TimeDelta {
    TimeDelta::seconds(n.min(i64::MAX as u64 / 1000) as i64)
}
