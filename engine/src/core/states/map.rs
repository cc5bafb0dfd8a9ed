//! Map (inline): runs the item processor once per item of `ItemsPath`, at most MaxConcurrency
//! at a time, and outputs the results in item order.

use super::super::errors::Failure;
use super::super::machine::{ChildKind, Children, FrameWait, Run, Tolerance};
use super::{children, effective_input, runtime};
use crate::asl::{FloatOrPath, MapSpec, NumberOrPath, State};
use crate::data::{self, Scope, jsonpath};
use serde_json::{Value, json};

pub fn run(run: &mut Run, id: u64, state: &State, spec: &MapSpec) -> Result<(), Failure> {
    let effective = effective_input(run, id, state)?;
    let items = run
        .with_scope(id, &effective, |s| {
            data::apply_filter_path(&spec.items_path, s)
        })
        .map_err(|e| run.data_failure(id, e))?;
    let Value::Array(items) = items else {
        let path = match &spec.items_path {
            crate::asl::OptPath::Path(p) => p.clone(),
            crate::asl::OptPath::Null => "null".to_owned(),
        };
        return Err(runtime(
            run,
            id,
            format!("Invalid path '{path}': The ItemsPath does not reference an array: {items}"),
        ));
    };
    let max_concurrency = match &spec.max_concurrency {
        None => 0,
        Some(NumberOrPath::Literal(n)) => *n as usize,
        Some(NumberOrPath::Path(path)) => {
            let value = select(run, id, &effective, path, "MaxConcurrencyPath")?;
            match as_integer(&value) {
                Some(n) if n >= 0 => n as usize,
                _ => {
                    return Err(not_valid(
                        run,
                        id,
                        "MaxConcurrencyPath",
                        &value,
                        "integer",
                        path,
                    ));
                }
            }
        }
    };
    let count = match &spec.tolerated_failure_count {
        None => None,
        Some(NumberOrPath::Literal(n)) => Some(*n),
        Some(NumberOrPath::Path(path)) => {
            let value = select(run, id, &effective, path, "ToleratedFailureCountPath")?;
            match as_integer(&value) {
                Some(n) if n < 0 => {
                    return Err(runtime(
                        run,
                        id,
                        "ToleratedFailureCount cannot be negative.".into(),
                    ));
                }
                Some(n) => Some(n as u64),
                None => {
                    return Err(not_valid(
                        run,
                        id,
                        "ToleratedFailureCountPath",
                        &value,
                        "integer",
                        path,
                    ));
                }
            }
        }
    };
    let percentage = match &spec.tolerated_failure_percentage {
        None => None,
        Some(FloatOrPath::Literal(p)) => Some(*p),
        Some(FloatOrPath::Path(path)) => {
            let value = select(run, id, &effective, path, "ToleratedFailurePercentagePath")?;
            let number = match &value {
                Value::String(s) => s.trim().parse::<f64>().ok(),
                other => other.as_f64(),
            };
            match number {
                Some(p) => Some(p),
                None => {
                    return Err(not_valid(
                        run,
                        id,
                        "ToleratedFailurePercentagePath",
                        &value,
                        "float",
                        path,
                    ));
                }
            }
        }
    };
    if let Some(p) = percentage
        && !(0.0..=100.0).contains(&p)
    {
        return Err(runtime(
            run,
            id,
            "ToleratedFailurePercentage must be between 0 and 100.".into(),
        ));
    }
    let tolerated =
        (count.is_some() || percentage.is_some()).then_some(Tolerance { count, percentage });

    let mut inputs = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        inputs.push(match &spec.item_selector {
            None => item.clone(),
            Some(template) => {
                let context = data::LazyContext::new(|| run.context(id, None, Some((index, item))));
                let frame = run.frame(id);
                let scope = Scope {
                    input: &effective,
                    context: &context,
                    variables: &frame.variables,
                    random: &run.random,
                };
                data::payload::render(template, &scope).map_err(|e| run.data_failure(id, e))?
            }
        });
    }
    let n = inputs.len();
    let epoch = run.emit(Some(id), "MapStateStarted", Some(json!({ "length": n })));
    run.frame_mut(id).wait = FrameWait::Children(Children {
        kind: ChildKind::Map,
        epoch,
        inputs,
        results: vec![None; n],
        next_index: 0,
        running: 0,
        max_concurrency,
        failures: 0,
        tolerated,
    });
    children::launch(run, id);
    Ok(())
}

fn select(
    run: &Run,
    id: u64,
    effective: &Value,
    path: &str,
    field: &str,
) -> Result<Value, Failure> {
    run.with_scope(id, effective, |s| {
        jsonpath::select_for_field(path, field, s)
    })
    .map_err(|e| run.data_failure(id, e))
}

/// AWS's message for a `…Path` field whose value has the wrong type.
fn not_valid(run: &Run, id: u64, field: &str, value: &Value, kind: &str, path: &str) -> Failure {
    let shown = super::text_of(value);
    runtime(
        run,
        id,
        format!(
            "The {field} field refers to value \"{shown}\" which is not a valid {kind}: {path}"
        ),
    )
}

/// An integer as AWS reads one from a `…Path` field: a JSON integer or a string holding one.
fn as_integer(value: &Value) -> Option<i64> {
    match value {
        Value::String(s) => s.trim().parse().ok(),
        other => other.as_i64(),
    }
}
