//! Parsing and validation of ASL definitions (JSONPath dialect) into [`super::StateMachine`].
//!
//! The parser never stops at the first problem: it walks the whole definition, records every
//! [`Problem`] in a stable order (definition order of states, then a fixed order of fields within
//! a state) and only returns the typed machine when there are none. While problems are being
//! collected it fills the model with placeholders; they are never observed because any problem
//! turns the result into an error.
//!
//! Layout:
//! * this file — entry points, state machines (top level, Parallel branches, Map processors),
//!   transition targets, reachability and state-name uniqueness;
//! * [`fields`] — typed field readers that report problems (paths, templates, numbers, …);
//! * [`states`] — one parser per state type;
//! * [`errors`] — Retry and Catch;
//! * [`rules`] — Choice rules;
//! * [`duplicates`] — duplicate state names, which `serde_json::Value` cannot represent.

mod duplicates;
mod errors;
mod fields;
mod rules;
mod states;
#[cfg(test)]
mod tests;

use super::{DefinitionError, Problem, State, StateMachine, Transition};
use fields::{Loc, Problems};
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet, VecDeque};

/// Longest state name AWS accepts, in characters.
const MAX_STATE_NAME_CHARS: usize = 80;

/// Parses and validates a definition given as JSON text.
pub fn parse(text: &str) -> Result<StateMachine, DefinitionError> {
    let value: Value = serde_json::from_str(text).map_err(|e| DefinitionError {
        problems: vec![Problem {
            state: None,
            field: None,
            reason: format!("The definition is not valid JSON: {e}"),
        }],
    })?;
    let mut problems = Problems::default();
    // `Value` keeps only the last of duplicate keys, so duplicate state names must be found in
    // the text itself.
    for name in duplicates::duplicate_state_names(text) {
        problems.push(Problem {
            reason: format!(
                "State name '{name}' is defined more than once in the same States object"
            ),
            state: Some(name),
            field: None,
        });
    }
    parse_with(&value, problems)
}

/// Parses and validates a definition given as a JSON value.
pub fn parse_value(value: &Value) -> Result<StateMachine, DefinitionError> {
    parse_with(value, Problems::default())
}

fn parse_with(value: &Value, mut problems: Problems) -> Result<StateMachine, DefinitionError> {
    let machine = parse_top(value, &mut problems);
    match machine {
        Some(m) if problems.is_empty() => Ok(m),
        _ => Err(DefinitionError {
            problems: problems.into_vec(),
        }),
    }
}

/// Top-level fields AWS accepts.
const TOP_FIELDS: &[&str] = &[
    "StartAt",
    "States",
    "Comment",
    "TimeoutSeconds",
    "Version",
    "QueryLanguage",
];
/// Fields of a Parallel branch.
const BRANCH_FIELDS: &[&str] = &["StartAt", "States", "Comment"];
/// Fields of a Map `ItemProcessor` or of its legacy form `Iterator`.
const PROCESSOR_FIELDS: &[&str] = &["StartAt", "States", "Comment", "ProcessorConfig"];

fn parse_top(value: &Value, problems: &mut Problems) -> Option<StateMachine> {
    let Some(obj) = value.as_object() else {
        problems.push(Problem {
            state: None,
            field: None,
            reason: "The definition must be a JSON object".to_owned(),
        });
        return None;
    };
    let loc = Loc::top();
    // A JSONata definition would otherwise drown in "unknown field" problems: say it once.
    if fields::query_language_is_jsonata(obj, &loc, problems) {
        return None;
    }
    let timeout_seconds = fields::uint(obj, "TimeoutSeconds", 1, &loc, problems);
    if let Some(v) = obj.get("Version")
        && !v.is_string()
    {
        problems.at(&loc, "Version", "must be a string");
    }
    let mut machine = parse_machine(obj, TOP_FIELDS, &loc, problems, "the state machine")?;
    machine.timeout_seconds = timeout_seconds;
    Some(machine)
}

/// Parses a nested state machine: a Parallel branch or a Map processor. `loc` names the
/// enclosing state and the field (e.g. `Branches[0]`, `ItemProcessor`).
pub(super) fn parse_nested(
    value: &Value,
    allowed: &[&str],
    loc: &Loc,
    problems: &mut Problems,
) -> Option<StateMachine> {
    let Some(obj) = value.as_object() else {
        problems.at(loc, "", "must be an object with StartAt and States");
        return None;
    };
    let what = format!("'{}'", loc.field(""));
    parse_machine(obj, allowed, loc, problems, &what)
}

/// Common part of top-level and nested machines: StartAt, States, targets and reachability.
fn parse_machine(
    obj: &Map<String, Value>,
    allowed: &[&str],
    loc: &Loc,
    problems: &mut Problems,
    what: &str,
) -> Option<StateMachine> {
    for key in obj.keys().filter(|k| !allowed.contains(&k.as_str())) {
        problems.at(
            loc,
            key,
            format!("Field '{key}' is not supported in {what}"),
        );
    }
    let start_at = match obj.get("StartAt") {
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            problems.at(loc, "StartAt", "must be a string naming a state");
            None
        }
        None => {
            problems.at(loc, "StartAt", "is required");
            None
        }
    };
    let states_obj = match obj.get("States") {
        Some(Value::Object(m)) if !m.is_empty() => m,
        Some(Value::Object(_)) => {
            problems.at(loc, "States", "must contain at least one state");
            return None;
        }
        Some(_) => {
            problems.at(
                loc,
                "States",
                "must be an object mapping state names to states",
            );
            return None;
        }
        None => {
            problems.at(loc, "States", "is required");
            return None;
        }
    };

    let mut states = HashMap::with_capacity(states_obj.len());
    for (name, state_value) in states_obj {
        check_state_name(name, problems);
        if let Some(state) = states::parse_state(name, state_value, problems) {
            states.insert(name.clone(), state);
        }
    }

    if let Some(start) = &start_at
        && !states_obj.contains_key(start)
    {
        problems.at(
            loc,
            "StartAt",
            format!("refers to state '{start}', which does not exist"),
        );
    }
    for name in states_obj.keys() {
        if let Some(state) = states.get(name) {
            check_targets(state, states_obj, problems);
        }
    }
    if let Some(start) = &start_at
        && states_obj.contains_key(start)
    {
        for name in unreachable_states(start, states_obj) {
            problems.push(Problem {
                reason: format!("State '{name}' is not reachable from StartAt '{start}'"),
                state: Some(name),
                field: None,
            });
        }
    }
    Some(StateMachine {
        start_at: start_at.unwrap_or_default(),
        states,
        timeout_seconds: None,
    })
}

/// Length, and uniqueness across the whole state machine (nested machines included: history
/// events name states without saying which branch they are in).
fn check_state_name(name: &str, problems: &mut Problems) {
    if name.is_empty() {
        problems.push(Problem {
            state: Some(name.to_owned()),
            field: None,
            reason: "State names must not be empty".to_owned(),
        });
    }
    let chars = name.chars().count();
    if chars > MAX_STATE_NAME_CHARS {
        problems.push(Problem {
            state: Some(name.to_owned()),
            field: None,
            reason: format!(
                "State names must be at most {MAX_STATE_NAME_CHARS} characters long (this one has {chars})"
            ),
        });
    }
    if !problems.note_state_name(name) {
        problems.push(Problem {
            state: Some(name.to_owned()),
            field: None,
            reason: format!("State name '{name}' is used more than once in the state machine"),
        });
    }
}

/// Every `Next`, `Default` and Catch `Next` of `state` must name a state of the same machine.
fn check_targets(state: &State, siblings: &Map<String, Value>, problems: &mut Problems) {
    let loc = Loc::state(&state.name);
    let mut check = |field: String, target: &str| {
        if !siblings.contains_key(target) {
            problems.at(
                &loc,
                &field,
                format!("refers to state '{target}', which does not exist"),
            );
        }
    };
    if let Transition::Next(next) = &state.transition {
        check("Next".to_owned(), next);
    }
    if let super::Kind::Choice(choice) = &state.kind {
        for (i, branch) in choice.choices.iter().enumerate() {
            check(format!("Choices[{i}].Next"), &branch.next);
        }
        if let Some(default) = &choice.default {
            check("Default".to_owned(), default);
        }
    }
    for (i, catcher) in state.kind.catchers().iter().enumerate() {
        check(format!("Catch[{i}].Next"), &catcher.next);
    }
}

/// States of `states` that no path of transitions from `start` reaches, in definition order.
/// Works on the raw JSON so that it also covers states that failed to parse.
fn unreachable_states(start: &str, states: &Map<String, Value>) -> Vec<String> {
    let mut seen: HashSet<&str> = HashSet::from([start]);
    let mut queue = VecDeque::from([start]);
    while let Some(name) = queue.pop_front() {
        let Some(state) = states.get(name) else {
            continue;
        };
        for target in raw_targets(state) {
            if let Some((key, _)) = states.get_key_value(target)
                && seen.insert(key.as_str())
            {
                queue.push_back(key.as_str());
            }
        }
    }
    states
        .keys()
        .filter(|k| !seen.contains(k.as_str()))
        .cloned()
        .collect()
}

/// The transition targets named anywhere in a raw state.
fn raw_targets(state: &Value) -> Vec<&str> {
    let mut targets = Vec::new();
    fn str_at<'v>(v: &'v Value, key: &str) -> Option<&'v str> {
        v.get(key).and_then(Value::as_str)
    }
    targets.extend(str_at(state, "Next"));
    targets.extend(str_at(state, "Default"));
    for list in ["Choices", "Catch"] {
        if let Some(items) = state.get(list).and_then(Value::as_array) {
            targets.extend(items.iter().filter_map(|item| str_at(item, "Next")));
        }
    }
    targets
}
