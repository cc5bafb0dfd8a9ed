//! One parser per state type.

use super::errors::{catchers, retriers};
use super::fields::{self, Loc, Problems};
use super::{BRANCH_FIELDS, PROCESSOR_FIELDS, parse_nested, rules};
use crate::asl::timestamp::parse_timestamp;
use crate::asl::{
    ChoiceSpec, FailSpec, FloatOrPath, Kind, MapSpec, NumberOrPath, OptPath, ParallelSpec,
    PassSpec, State, StringOrPath, TaskSpec, Transition, WaitSpec,
};
use serde_json::{Map, Value};

/// Fields every state type accepts.
const COMMON: &[&str] = &["Type", "Comment", "QueryLanguage"];

/// The fields each state type accepts besides [`COMMON`] (AWS rejects any other).
fn allowed_fields(type_name: &str) -> Option<&'static [&'static str]> {
    Some(match type_name {
        "Pass" => &[
            "Next",
            "End",
            "InputPath",
            "OutputPath",
            "ResultPath",
            "Parameters",
            "Result",
            "Assign",
        ],
        "Task" => &[
            "Next",
            "End",
            "InputPath",
            "OutputPath",
            "ResultPath",
            "Parameters",
            "ResultSelector",
            "Resource",
            "TimeoutSeconds",
            "TimeoutSecondsPath",
            "HeartbeatSeconds",
            "HeartbeatSecondsPath",
            "Retry",
            "Catch",
            "Credentials",
            "Assign",
        ],
        "Choice" => &["InputPath", "OutputPath", "Choices", "Default", "Assign"],
        "Wait" => &[
            "Next",
            "End",
            "InputPath",
            "OutputPath",
            "Seconds",
            "Timestamp",
            "SecondsPath",
            "TimestampPath",
            "Assign",
        ],
        "Succeed" => &["InputPath", "OutputPath"],
        "Fail" => &["Error", "ErrorPath", "Cause", "CausePath"],
        "Parallel" => &[
            "Next",
            "End",
            "InputPath",
            "OutputPath",
            "ResultPath",
            "Parameters",
            "ResultSelector",
            "Retry",
            "Catch",
            "Branches",
            "Assign",
        ],
        "Map" => &[
            "Next",
            "End",
            "InputPath",
            "OutputPath",
            "ResultPath",
            "Parameters",
            "ResultSelector",
            "Retry",
            "Catch",
            "ItemsPath",
            "ItemSelector",
            "ItemProcessor",
            "Iterator",
            "MaxConcurrency",
            "MaxConcurrencyPath",
            "ToleratedFailureCount",
            "ToleratedFailureCountPath",
            "ToleratedFailurePercentage",
            "ToleratedFailurePercentagePath",
            "Label",
            // Distributed-Map features: recognised so that the problem says what is missing.
            "ItemReader",
            "ResultWriter",
            "ItemBatcher",
        ],
        _ => return None,
    })
}

/// Parses one state. `None` when it is too broken to describe (not an object, bad `Type`, or
/// JSONata); the problems say why.
pub fn parse_state(name: &str, value: &Value, problems: &mut Problems) -> Option<State> {
    let loc = Loc::state(name);
    let Some(obj) = value.as_object() else {
        problems.at(&loc, "", "A state must be a JSON object");
        return None;
    };
    let type_name = match obj.get("Type") {
        Some(Value::String(t)) => t.as_str(),
        Some(_) => {
            problems.at(&loc, "Type", "must be a string");
            return None;
        }
        None => {
            problems.at(&loc, "Type", "is required");
            return None;
        }
    };
    let Some(allowed) = allowed_fields(type_name) else {
        problems.at(
            &loc,
            "Type",
            format!(
                "'{type_name}' is not a state type (expected Pass, Task, Choice, Wait, Succeed, Fail, Parallel or Map)"
            ),
        );
        return None;
    };
    if fields::query_language_is_jsonata(obj, &loc, problems) {
        return None;
    }
    for key in obj.keys() {
        if !COMMON.contains(&key.as_str()) && !allowed.contains(&key.as_str()) {
            problems.at(
                &loc,
                key,
                format!("Field '{key}' is not supported by state type '{type_name}'"),
            );
        }
    }

    let mut state = State {
        name: name.to_owned(),
        transition: Transition::End,
        input_path: OptPath::dollar(),
        output_path: OptPath::dollar(),
        result_path: OptPath::dollar(),
        parameters: None,
        result_selector: None,
        assign: None,
        kind: Kind::Succeed,
    };
    if allowed.contains(&"Next") {
        state.transition = transition(obj, &loc, problems);
    }
    if allowed.contains(&"InputPath") {
        state.input_path = fields::opt_path(obj, "InputPath", false, &loc, problems);
        state.output_path = fields::opt_path(obj, "OutputPath", false, &loc, problems);
    }
    if allowed.contains(&"ResultPath") {
        state.result_path = fields::opt_path(obj, "ResultPath", true, &loc, problems);
    }
    // Map's `Parameters` is the legacy spelling of `ItemSelector`; `map` reads it.
    if allowed.contains(&"Parameters") && type_name != "Map" {
        state.parameters = fields::template(obj, "Parameters", &loc, problems);
    }
    if allowed.contains(&"ResultSelector") {
        state.result_selector = fields::template(obj, "ResultSelector", &loc, problems);
    }
    if allowed.contains(&"Assign") {
        state.assign = fields::assign(obj, &loc, problems);
    }

    state.kind = match type_name {
        "Pass" => Kind::Pass(PassSpec {
            result: obj.get("Result").cloned(),
        }),
        "Task" => Kind::Task(task(obj, &loc, problems)),
        "Choice" => Kind::Choice(choice(obj, &loc, problems)),
        "Wait" => Kind::Wait(wait(obj, &loc, problems)),
        "Succeed" => Kind::Succeed,
        "Fail" => Kind::Fail(fail(obj, &loc, problems)),
        "Parallel" => Kind::Parallel(parallel(obj, &loc, problems)),
        _ => Kind::Map(map(obj, &loc, problems)),
    };
    Some(state)
}

/// Exactly one of `Next` (a string) and `End: true`.
fn transition(obj: &Map<String, Value>, loc: &Loc, problems: &mut Problems) -> Transition {
    let next = fields::string(obj, "Next", loc, problems);
    let end = match obj.get("End") {
        None => false,
        Some(Value::Bool(true)) => true,
        Some(Value::Bool(false)) => {
            problems.at(
                loc,
                "End",
                "must be true when present (use Next to continue)",
            );
            false
        }
        Some(_) => {
            problems.at(loc, "End", "must be the boolean true");
            false
        }
    };
    match (next, end) {
        (Some(_), true) => {
            problems.at(loc, "Next", "'Next' and 'End' cannot both be set");
            Transition::End
        }
        (Some(next), false) => Transition::Next(next),
        (None, true) => Transition::End,
        (None, false) => {
            if !obj.contains_key("Next") && !obj.contains_key("End") {
                problems.at(
                    loc,
                    "Next",
                    "A state of this type needs either 'Next' or 'End: true'",
                );
            }
            Transition::End
        }
    }
}

fn task(obj: &Map<String, Value>, loc: &Loc, problems: &mut Problems) -> TaskSpec {
    let resource = fields::required_string(obj, "Resource", loc, problems);
    let timeout = fields::number_or_path(
        obj,
        "TimeoutSeconds",
        "TimeoutSecondsPath",
        1,
        loc,
        problems,
    );
    let heartbeat = fields::number_or_path(
        obj,
        "HeartbeatSeconds",
        "HeartbeatSecondsPath",
        1,
        loc,
        problems,
    );
    if let (Some(NumberOrPath::Literal(t)), Some(NumberOrPath::Literal(h))) = (&timeout, &heartbeat)
        && h >= t
    {
        problems.at(
            loc,
            "HeartbeatSeconds",
            format!("HeartbeatSeconds ({h}) must be smaller than TimeoutSeconds ({t})"),
        );
    }
    TaskSpec {
        resource,
        timeout,
        heartbeat,
        retry: retriers(obj, loc, problems),
        catch: catchers(obj, loc, problems),
    }
}

fn choice(obj: &Map<String, Value>, loc: &Loc, problems: &mut Problems) -> ChoiceSpec {
    let mut choices = Vec::new();
    match obj.get("Choices") {
        Some(Value::Array(items)) if !items.is_empty() => {
            for (i, item) in items.iter().enumerate() {
                choices.extend(rules::parse_branch(
                    item,
                    &loc.nested(&format!("Choices[{i}]")),
                    problems,
                ));
            }
        }
        Some(_) => problems.at(loc, "Choices", "must be a non-empty array of Choice rules"),
        None => problems.at(loc, "Choices", "is required"),
    }
    let default = fields::string(obj, "Default", loc, problems);
    ChoiceSpec { choices, default }
}

fn wait(obj: &Map<String, Value>, loc: &Loc, problems: &mut Problems) -> WaitSpec {
    const KEYS: [&str; 4] = ["Seconds", "Timestamp", "SecondsPath", "TimestampPath"];
    let present: Vec<&str> = KEYS.into_iter().filter(|k| obj.contains_key(*k)).collect();
    match present.as_slice() {
        [] => problems.at(loc, "", "A Wait state needs exactly one of Seconds, Timestamp, SecondsPath, TimestampPath"),
        [_] => {}
        several => problems.at(
            loc,
            several[1],
            format!(
                "A Wait state takes exactly one of Seconds, Timestamp, SecondsPath, TimestampPath (found {})",
                several.join(", ")
            ),
        ),
    }
    if let Some(seconds) = fields::uint(obj, "Seconds", 0, loc, problems) {
        return WaitSpec::Seconds(seconds);
    }
    if let Some(ts) = fields::string(obj, "Timestamp", loc, problems) {
        if parse_timestamp(&ts).is_none() {
            problems.at(
                loc,
                "Timestamp",
                format!("'{ts}' is not an RFC 3339 timestamp such as 2016-03-14T01:59:00Z"),
            );
        }
        return WaitSpec::Timestamp(ts);
    }
    if let Some(p) = fields::path(obj, "SecondsPath", loc, problems) {
        return WaitSpec::SecondsPath(p);
    }
    if let Some(p) = fields::path(obj, "TimestampPath", loc, problems) {
        return WaitSpec::TimestampPath(p);
    }
    WaitSpec::Seconds(0)
}

fn fail(obj: &Map<String, Value>, loc: &Loc, problems: &mut Problems) -> FailSpec {
    let mut string_or_path = |literal_key: &str, path_key: &str| {
        if obj.contains_key(literal_key) && obj.contains_key(path_key) {
            problems.at(
                loc,
                literal_key,
                format!("'{literal_key}' and '{path_key}' cannot both be set"),
            );
        }
        let literal = fields::string(obj, literal_key, loc, problems).map(StringOrPath::Literal);
        let by_path = fields::expression(obj, path_key, loc, problems).map(StringOrPath::Path);
        literal.or(by_path)
    };
    let error = string_or_path("Error", "ErrorPath");
    let cause = string_or_path("Cause", "CausePath");
    FailSpec { error, cause }
}

fn parallel(obj: &Map<String, Value>, loc: &Loc, problems: &mut Problems) -> ParallelSpec {
    let mut branches = Vec::new();
    match obj.get("Branches") {
        Some(Value::Array(items)) if !items.is_empty() => {
            for (i, item) in items.iter().enumerate() {
                let branch_loc = loc.nested(&format!("Branches[{i}]"));
                branches.extend(parse_nested(item, BRANCH_FIELDS, &branch_loc, problems));
            }
        }
        Some(_) => problems.at(
            loc,
            "Branches",
            "must be a non-empty array of state machines",
        ),
        None => problems.at(loc, "Branches", "is required"),
    }
    ParallelSpec {
        branches,
        retry: retriers(obj, loc, problems),
        catch: catchers(obj, loc, problems),
    }
}

fn map(obj: &Map<String, Value>, loc: &Loc, problems: &mut Problems) -> MapSpec {
    for key in ["ItemReader", "ResultWriter", "ItemBatcher"] {
        if obj.contains_key(key) {
            problems.at(
                loc,
                key,
                format!(
                    "'{key}' (Distributed Map over external data) is not supported by this engine"
                ),
            );
        }
    }
    let processor = match (obj.get("ItemProcessor"), obj.get("Iterator")) {
        (Some(_), Some(_)) => {
            problems.at(
                loc,
                "Iterator",
                "'ItemProcessor' and its legacy form 'Iterator' cannot both be set",
            );
            None
        }
        // The legacy `Iterator` takes the same fields, `ProcessorConfig` included.
        (Some(p), None) | (None, Some(p)) => {
            let key = if obj.contains_key("ItemProcessor") {
                "ItemProcessor"
            } else {
                "Iterator"
            };
            let processor_loc = loc.nested(key);
            if let Some(config) = p.get("ProcessorConfig") {
                processor_config(config, &processor_loc, problems);
            }
            parse_nested(p, PROCESSOR_FIELDS, &processor_loc, problems)
        }
        (None, None) => {
            problems.at(loc, "ItemProcessor", "is required");
            None
        }
    };
    let item_selector = match (
        obj.contains_key("ItemSelector"),
        obj.contains_key("Parameters"),
    ) {
        (true, true) => {
            problems.at(
                loc,
                "Parameters",
                "'ItemSelector' and its legacy form 'Parameters' cannot both be set",
            );
            None
        }
        (true, false) => fields::template(obj, "ItemSelector", loc, problems),
        (false, true) => fields::template(obj, "Parameters", loc, problems),
        (false, false) => None,
    };
    let label = fields::string(obj, "Label", loc, problems);
    if label.as_ref().is_some_and(|l| l.chars().count() > 40) {
        problems.at(loc, "Label", "must be at most 40 characters long");
    }
    let tolerated_failure_percentage = {
        if obj.contains_key("ToleratedFailurePercentage")
            && obj.contains_key("ToleratedFailurePercentagePath")
        {
            problems.at(
                loc,
                "ToleratedFailurePercentage",
                "'ToleratedFailurePercentage' and 'ToleratedFailurePercentagePath' cannot both be set",
            );
        }
        let literal = fields::number(obj, "ToleratedFailurePercentage", loc, problems);
        if literal.is_some_and(|p| !(0.0..=100.0).contains(&p)) {
            problems.at(
                loc,
                "ToleratedFailurePercentage",
                "must be between 0 and 100",
            );
        }
        literal.map(FloatOrPath::Literal).or_else(|| {
            fields::path(obj, "ToleratedFailurePercentagePath", loc, problems)
                .map(FloatOrPath::Path)
        })
    };
    MapSpec {
        processor: Box::new(processor.unwrap_or_else(placeholder_machine)),
        items_path: fields::opt_path(obj, "ItemsPath", false, loc, problems),
        item_selector,
        max_concurrency: fields::number_or_path(
            obj,
            "MaxConcurrency",
            "MaxConcurrencyPath",
            0,
            loc,
            problems,
        ),
        tolerated_failure_count: fields::number_or_path(
            obj,
            "ToleratedFailureCount",
            "ToleratedFailureCountPath",
            0,
            loc,
            problems,
        ),
        tolerated_failure_percentage,
        retry: retriers(obj, loc, problems),
        catch: catchers(obj, loc, problems),
    }
}

/// `ProcessorConfig` is accepted and otherwise ignored: a DISTRIBUTED Map without an item reader
/// or result writer runs here exactly like an inline one.
fn processor_config(config: &Value, loc: &Loc, problems: &mut Problems) {
    let Some(obj) = config.as_object() else {
        problems.at(loc, "ProcessorConfig", "must be an object");
        return;
    };
    let loc = loc.nested("ProcessorConfig");
    fields::check_fields(obj, &["Mode", "ExecutionType"], &loc, problems, |k| {
        format!("Field '{k}' is not supported in ProcessorConfig")
    });
    if let Some(mode) = fields::string(obj, "Mode", &loc, problems)
        && mode != "INLINE"
        && mode != "DISTRIBUTED"
    {
        problems.at(
            &loc,
            "Mode",
            format!("'{mode}' is not INLINE or DISTRIBUTED"),
        );
    }
    if let Some(kind) = fields::string(obj, "ExecutionType", &loc, problems)
        && kind != "STANDARD"
        && kind != "EXPRESS"
    {
        problems.at(
            &loc,
            "ExecutionType",
            format!("'{kind}' is not STANDARD or EXPRESS"),
        );
    }
}

/// Stands in for a processor that failed to parse; the definition is rejected anyway.
fn placeholder_machine() -> crate::asl::StateMachine {
    crate::asl::StateMachine {
        start_at: String::new(),
        states: Default::default(),
        timeout_seconds: None,
    }
}
