//! One file per state type. Each `run` takes the frame positioned on the state and either leaves
//! the state, starts waiting (task, timer, children), or returns the [`Failure`] to handle.

pub mod children;
pub mod choice;
pub mod map;
pub mod parallel;
pub mod pass;
pub mod task;
pub mod terminal;
pub mod wait;

use super::errors::Failure;
use super::machine::Run;
use crate::asl::State;
use crate::data;
use serde_json::Value;

/// Applies the state's `InputPath` to its raw input.
pub(crate) fn effective_input(run: &Run, id: u64, state: &State) -> Result<Value, Failure> {
    let raw = &run.frame(id).input;
    run.with_scope(id, raw, |s| data::apply_filter_path(&state.input_path, s))
        .map_err(|e| run.data_failure(id, e))
}

/// `InputPath` then `Parameters`.
pub(crate) fn parameters_input(run: &Run, id: u64, state: &State) -> Result<Value, Failure> {
    let effective = effective_input(run, id, state)?;
    match &state.parameters {
        Some(template) => run
            .with_scope(id, &effective, |s| data::payload::render(template, s))
            .map_err(|e| run.data_failure(id, e)),
        None => Ok(effective),
    }
}

/// Applies `OutputPath` to a value.
pub(crate) fn output(run: &Run, id: u64, state: &State, value: &Value) -> Result<Value, Failure> {
    run.with_scope(id, value, |s| {
        data::apply_filter_path(&state.output_path, s)
    })
    .map_err(|e| run.data_failure(id, e))
}

/// A failure of the state's own evaluation (bad path value, bad number), which AWS reports as
/// `States.Runtime` and lets no Retry or Catch see.
pub(crate) fn runtime(run: &Run, id: u64, message: String) -> Failure {
    run.data_failure(id, data::DataError::runtime(message))
}

/// A value as AWS quotes it in messages: a string's text, anything else as JSON.
pub(crate) fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
