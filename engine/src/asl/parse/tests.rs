use crate::asl::{
    FailSpec, FloatOrPath, Jitter, Kind, NumberOrPath, OptPath, Problem, StateMachine,
    StringOrPath, Transition, WaitSpec, parse, parse_value,
};
use proptest::prelude::*;
use serde_json::{Value, json};

/// A one-state machine around `state` (named `S`).
fn machine_with(state: Value) -> Value {
    json!({"StartAt": "S", "States": {"S": state}})
}

/// A machine starting at `state` (named `S`), with a terminal state `End` for it to target.
fn machine_to_end(state: Value) -> Value {
    json!({"StartAt": "S", "States": {"S": state, "End": {"Type": "Succeed"}}})
}

fn ok(definition: Value) -> StateMachine {
    parse_value(&definition).unwrap_or_else(|e| panic!("{e}"))
}

fn problems(definition: Value) -> Vec<Problem> {
    match parse_value(&definition) {
        Ok(_) => panic!("definition was accepted: {definition}"),
        Err(e) => e.problems,
    }
}

/// Asserts that some problem is about `state`/`field` and mentions `needle`.
#[track_caller]
fn assert_problem(problems: &[Problem], state: Option<&str>, field: Option<&str>, needle: &str) {
    let found = problems.iter().any(|p| {
        p.state.as_deref() == state && p.field.as_deref() == field && p.reason.contains(needle)
    });
    assert!(
        found,
        "no problem at {state:?}/{field:?} mentioning {needle:?} in {problems:#?}"
    );
}

#[test]
fn defaults_are_applied() {
    let m = ok(machine_to_end(json!({
        "Type": "Task",
        "Resource": "arn:aws:states:::activity:x",
        "Retry": [{"ErrorEquals": ["States.ALL"]}],
        "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "End"}],
        "Next": "End"
    })));
    assert_eq!(m.start_at, "S");
    let s = m.state("S").unwrap();
    assert_eq!(s.transition, Transition::Next("End".into()));
    assert_eq!(s.input_path, OptPath::dollar());
    assert_eq!(s.output_path, OptPath::dollar());
    assert_eq!(s.result_path, OptPath::dollar());
    let r = &s.kind.retriers()[0];
    assert_eq!(
        (r.interval_seconds, r.max_attempts, r.backoff_rate),
        (1, 3, 2.0)
    );
    assert_eq!((r.max_delay_seconds, r.jitter), (None, Jitter::None));
    let c = &s.kind.catchers()[0];
    assert_eq!(
        (c.next.as_str(), &c.result_path),
        ("End", &OptPath::dollar())
    );
    assert_eq!(m.state("End").unwrap().transition, Transition::End);
}

#[test]
fn explicit_null_paths_are_kept_apart_from_defaults() {
    let m = ok(machine_with(json!({
        "Type": "Pass", "InputPath": null, "OutputPath": null, "ResultPath": null, "End": true
    })));
    let s = m.state("S").unwrap();
    assert_eq!(
        (&s.input_path, &s.output_path, &s.result_path),
        (&OptPath::Null, &OptPath::Null, &OptPath::Null)
    );
}

#[test]
fn task_fields_are_read() {
    let m = ok(machine_with(json!({
        "Type": "Task",
        "Resource": "arn:aws:states:::activity:x",
        "TimeoutSecondsPath": "$.timeout",
        "HeartbeatSeconds": 5,
        "Credentials": {"RoleArn": "ignored"},
        "Retry": [{"ErrorEquals": ["A"], "IntervalSeconds": 2, "MaxAttempts": 0, "BackoffRate": 1.5,
                   "MaxDelaySeconds": 9, "JitterStrategy": "FULL"}],
        "End": true
    })));
    let Kind::Task(t) = &m.state("S").unwrap().kind else {
        panic!("not a task")
    };
    assert_eq!(t.resource, "arn:aws:states:::activity:x");
    assert_eq!(t.timeout, Some(NumberOrPath::Path("$.timeout".into())));
    assert_eq!(t.heartbeat, Some(NumberOrPath::Literal(5)));
    let r = &t.retry[0];
    assert_eq!(
        (r.interval_seconds, r.max_attempts, r.backoff_rate),
        (2, 0, 1.5)
    );
    assert_eq!((r.max_delay_seconds, r.jitter), (Some(9), Jitter::Full));
}

#[test]
fn wait_and_fail_forms_are_read() {
    let m = ok(machine_to_end(
        json!({"Type": "Wait", "Timestamp": "2016-03-14T01:59:00Z", "Next": "End"}),
    ));
    assert!(
        matches!(&m.state("S").unwrap().kind, Kind::Wait(WaitSpec::Timestamp(t)) if t == "2016-03-14T01:59:00Z")
    );
    let m = ok(machine_with(
        json!({"Type": "Wait", "SecondsPath": "$.s", "End": true}),
    ));
    assert!(
        matches!(&m.state("S").unwrap().kind, Kind::Wait(WaitSpec::SecondsPath(p)) if p == "$.s")
    );

    let m = ok(machine_with(
        json!({"Type": "Fail", "Error": "E", "CausePath": "$.cause"}),
    ));
    let Kind::Fail(FailSpec { error, cause }) = &m.state("S").unwrap().kind else {
        panic!("not a Fail")
    };
    assert!(matches!(error, Some(StringOrPath::Literal(e)) if e == "E"));
    assert!(matches!(cause, Some(StringOrPath::Path(p)) if p == "$.cause"));
}

#[test]
fn legacy_map_fields_become_their_modern_forms() {
    let m = ok(machine_with(json!({
        "Type": "Map",
        "ItemsPath": "$.items",
        "Parameters": {"x.$": "$$.Map.Item.Value"},
        "MaxConcurrency": 2,
        "ToleratedFailurePercentagePath": "$.pct",
        "Iterator": {"StartAt": "I", "States": {"I": {"Type": "Pass", "End": true}}},
        "End": true
    })));
    let s = m.state("S").unwrap();
    assert_eq!(s.parameters, None);
    let Kind::Map(map) = &s.kind else {
        panic!("not a Map")
    };
    assert_eq!(map.item_selector, Some(json!({"x.$": "$$.Map.Item.Value"})));
    assert_eq!(map.items_path, OptPath::Path("$.items".into()));
    assert_eq!(map.max_concurrency, Some(NumberOrPath::Literal(2)));
    assert_eq!(
        map.tolerated_failure_percentage,
        Some(FloatOrPath::Path("$.pct".into()))
    );
    assert_eq!(map.processor.start_at, "I");
}

#[test]
fn distributed_map_without_readers_is_accepted_and_readers_are_not() {
    let processor = json!({
        "ProcessorConfig": {"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"},
        "StartAt": "I", "States": {"I": {"Type": "Pass", "End": true}}
    });
    ok(machine_with(
        json!({"Type": "Map", "Label": "L", "ItemProcessor": processor.clone(), "End": true}),
    ));
    let p = problems(machine_with(json!({
        "Type": "Map", "ItemProcessor": processor, "ItemReader": {"Resource": "arn:aws:states:::s3:getObject"}, "End": true
    })));
    assert_problem(&p, Some("S"), Some("ItemReader"), "not supported");
}

#[test]
fn parallel_branches_are_nested_machines() {
    let m = ok(machine_with(json!({
        "Type": "Parallel",
        "Branches": [
            {"StartAt": "A", "States": {"A": {"Type": "Pass", "Next": "B"}, "B": {"Type": "Succeed"}}},
            {"StartAt": "C", "States": {"C": {"Type": "Pass", "End": true}}}
        ],
        "End": true
    })));
    let Kind::Parallel(p) = &m.state("S").unwrap().kind else {
        panic!("not Parallel")
    };
    assert_eq!(p.branches.len(), 2);
    assert_eq!(
        p.branches[0].state("A").unwrap().transition,
        Transition::Next("B".into())
    );
}

#[test]
fn branch_targets_resolve_only_within_the_branch() {
    let p = problems(machine_with(json!({
        "Type": "Parallel",
        "Branches": [{"StartAt": "A", "States": {"A": {"Type": "Pass", "Next": "End"}}}],
        "End": true
    })));
    assert_problem(&p, Some("A"), Some("Next"), "'End'");
}

#[test]
fn unknown_types_and_fields_are_rejected() {
    let p = problems(machine_with(json!({"Type": "Sleep", "End": true})));
    assert_problem(&p, Some("S"), Some("Type"), "'Sleep' is not a state type");
    let p = problems(machine_with(
        json!({"Type": "Pass", "Resource": "x", "End": true}),
    ));
    assert_problem(
        &p,
        Some("S"),
        Some("Resource"),
        "Field 'Resource' is not supported by state type 'Pass'",
    );
    let p = problems(machine_to_end(json!({"Type": "Succeed", "Next": "End"})));
    assert_problem(
        &p,
        Some("S"),
        Some("Next"),
        "not supported by state type 'Succeed'",
    );
    let p = problems(json!({"StartAt": "S", "States": {"S": {"Type": "Succeed"}}, "Extra": 1}));
    assert_problem(&p, None, Some("Extra"), "not supported");
}

#[test]
fn transitions_need_exactly_one_of_next_and_end() {
    let p = problems(machine_with(json!({"Type": "Pass"})));
    assert_problem(&p, Some("S"), Some("Next"), "either 'Next' or 'End: true'");
    let p = problems(machine_to_end(
        json!({"Type": "Pass", "Next": "End", "End": true}),
    ));
    assert_problem(&p, Some("S"), Some("Next"), "cannot both be set");
    let p = problems(machine_with(json!({"Type": "Pass", "End": false})));
    assert_problem(&p, Some("S"), Some("End"), "must be true");
}

#[test]
fn every_transition_target_must_exist() {
    let p = problems(json!({
        "StartAt": "Nowhere",
        "States": {
            "S": {"Type": "Task", "Resource": "r", "Next": "Missing1",
                  "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Missing2"}]},
            "C": {"Type": "Choice", "Choices": [{"Variable": "$.a", "IsNull": true, "Next": "Missing3"}],
                  "Default": "Missing4"}
        }
    }));
    assert_problem(&p, None, Some("StartAt"), "'Nowhere'");
    assert_problem(&p, Some("S"), Some("Next"), "'Missing1'");
    assert_problem(&p, Some("S"), Some("Catch[0].Next"), "'Missing2'");
    assert_problem(&p, Some("C"), Some("Choices[0].Next"), "'Missing3'");
    assert_problem(&p, Some("C"), Some("Default"), "'Missing4'");
}

#[test]
fn unreachable_states_are_rejected() {
    let p = problems(json!({
        "StartAt": "A",
        "States": {"A": {"Type": "Succeed"}, "Orphan": {"Type": "Pass", "End": true}}
    }));
    assert_eq!(p.len(), 1, "{p:#?}");
    assert_problem(&p, Some("Orphan"), None, "not reachable");
}

#[test]
fn states_reached_only_through_catch_or_choice_are_reachable() {
    ok(json!({
        "StartAt": "T",
        "States": {
            "T": {"Type": "Task", "Resource": "r", "Next": "C",
                  "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Caught"}]},
            "Caught": {"Type": "Fail"},
            "C": {"Type": "Choice", "Choices": [{"Variable": "$.a", "IsNull": true, "Next": "Yes"}], "Default": "No"},
            "Yes": {"Type": "Succeed"},
            "No": {"Type": "Succeed"}
        }
    }));
}

#[test]
fn duplicate_state_names_are_found_in_the_text() {
    let text = r#"{"StartAt": "A", "States": {
        "A": {"Type": "Pass", "End": true},
        "A": {"Type": "Succeed"}
    }}"#;
    let e = parse(text).unwrap_err();
    assert_problem(&e.problems, Some("A"), None, "more than once");
    // Duplicate keys inside a payload are no concern of the state-name check.
    let text = r#"{"StartAt": "A", "States": {"A": {"Type": "Pass", "Result": {"k": 1, "k": 2}, "End": true}}}"#;
    parse(text).unwrap();
}

#[test]
fn state_names_are_unique_across_branches() {
    let branch = json!({"StartAt": "S", "States": {"S": {"Type": "Succeed"}}});
    let p = problems(machine_with(
        json!({"Type": "Parallel", "Branches": [branch], "End": true}),
    ));
    assert_problem(&p, Some("S"), None, "used more than once");
}

#[test]
fn long_state_names_are_rejected() {
    let name = "x".repeat(81);
    let p =
        problems(json!({"StartAt": name.clone(), "States": {name.clone(): {"Type": "Succeed"}}}));
    assert_problem(&p, Some(&name), None, "at most 80 characters");
    let name = "é".repeat(80);
    ok(json!({"StartAt": name.clone(), "States": {name: {"Type": "Succeed"}}}));
}

#[test]
fn retry_and_catch_rules_are_checked() {
    let p = problems(machine_to_end(json!({
        "Type": "Task", "Resource": "r", "End": true,
        "Retry": [
            {"ErrorEquals": ["States.ALL", "X"]},
            {"ErrorEquals": []},
            {"ErrorEquals": ["E"], "BackoffRate": 0.5, "MaxAttempts": -1, "IntervalSeconds": 0},
            {"ErrorEquals": ["E"], "JitterStrategy": "SOME", "Extra": 1}
        ],
        "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "End"}, {"ErrorEquals": ["E"], "Next": "End"}]
    })));
    assert_problem(
        &p,
        Some("S"),
        Some("Retry[0].ErrorEquals"),
        "only error name",
    );
    assert_problem(&p, Some("S"), Some("Retry[1].ErrorEquals"), "non-empty");
    assert_problem(&p, Some("S"), Some("Retry[2].BackoffRate"), "at least 1.0");
    assert_problem(&p, Some("S"), Some("Retry[2].MaxAttempts"), "negative");
    assert_problem(
        &p,
        Some("S"),
        Some("Retry[2].IntervalSeconds"),
        "at least 1",
    );
    assert_problem(&p, Some("S"), Some("Retry[3].JitterStrategy"), "'SOME'");
    assert_problem(
        &p,
        Some("S"),
        Some("Retry[3].Extra"),
        "not supported in a Retrier",
    );
    assert_problem(
        &p,
        Some("S"),
        Some("Catch[0].ErrorEquals"),
        "must be the last one",
    );
}

#[test]
fn task_timeouts_are_checked() {
    let p = problems(machine_with(json!({
        "Type": "Task", "Resource": "r", "End": true, "TimeoutSeconds": 10, "HeartbeatSeconds": 10
    })));
    assert_problem(
        &p,
        Some("S"),
        Some("HeartbeatSeconds"),
        "smaller than TimeoutSeconds",
    );
    let p = problems(machine_with(json!({
        "Type": "Task", "Resource": "r", "End": true, "TimeoutSeconds": 10, "TimeoutSecondsPath": "$.t"
    })));
    assert_problem(&p, Some("S"), Some("TimeoutSeconds"), "cannot both be set");
    let p = problems(machine_with(
        json!({"Type": "Task", "End": true, "TimeoutSeconds": 0}),
    ));
    assert_problem(&p, Some("S"), Some("Resource"), "required");
    assert_problem(&p, Some("S"), Some("TimeoutSeconds"), "at least 1");
}

#[test]
fn wait_needs_exactly_one_valid_duration() {
    let p = problems(machine_with(json!({"Type": "Wait", "End": true})));
    assert_problem(&p, Some("S"), None, "exactly one of");
    let p = problems(machine_with(
        json!({"Type": "Wait", "Seconds": 1, "SecondsPath": "$.s", "End": true}),
    ));
    assert_problem(&p, Some("S"), Some("SecondsPath"), "exactly one of");
    let p = problems(machine_with(
        json!({"Type": "Wait", "Timestamp": "2016-03-14 01:59:00", "End": true}),
    ));
    assert_problem(
        &p,
        Some("S"),
        Some("Timestamp"),
        "not an RFC 3339 timestamp",
    );
}

#[test]
fn path_syntax_is_checked() {
    let p = problems(machine_with(
        json!({"Type": "Pass", "InputPath": "nope", "ResultPath": "$.a[*]", "End": true}),
    ));
    assert_problem(&p, Some("S"), Some("InputPath"), "not a valid JSONPath");
    assert_problem(
        &p,
        Some("S"),
        Some("ResultPath"),
        "not a valid reference path",
    );
}

#[test]
fn choice_rules_are_checked() {
    let p = problems(machine_with(json!({"Type": "Choice", "Choices": []})));
    assert_problem(&p, Some("S"), Some("Choices"), "non-empty");
    let p = problems(machine_to_end(
        json!({"Type": "Choice", "Default": "End", "Choices": [
            {"Not": {"Variable": "$.a", "IsNull": true, "Next": "End"}, "Next": "End"},
            {"Variable": "$.a", "Next": "End"},
            {"Variable": "$.a", "NumericEquals": "1", "StringEquals": "x", "Next": "End"},
            {"Variable": "$.a", "NumericEquals": "1", "Next": "End"},
            {"Variable": "$.a", "TimestampEquals": "yesterday", "Next": "End"},
            {"Variable": "$.a", "IsNullPath": "$.b", "Next": "End"},
            {"And": [], "Next": "End"},
            {"Variable": "$.a", "IsNull": true}
        ]}),
    ));
    assert_problem(
        &p,
        Some("S"),
        Some("Choices[0].Not.Next"),
        "only allowed on a top-level",
    );
    assert_problem(
        &p,
        Some("S"),
        Some("Choices[1]"),
        "needs one comparison operator",
    );
    assert_problem(
        &p,
        Some("S"),
        Some("Choices[2].StringEquals"),
        "single operator",
    );
    assert_problem(
        &p,
        Some("S"),
        Some("Choices[3].NumericEquals"),
        "must be a number",
    );
    assert_problem(
        &p,
        Some("S"),
        Some("Choices[4].TimestampEquals"),
        "RFC 3339",
    );
    assert_problem(
        &p,
        Some("S"),
        Some("Choices[5].IsNullPath"),
        "not supported in a Choice rule",
    );
    assert_problem(&p, Some("S"), Some("Choices[6].And"), "non-empty");
    assert_problem(&p, Some("S"), Some("Choices[7].Next"), "required");
}

#[test]
fn fail_takes_a_literal_or_a_path_not_both() {
    let p = problems(machine_with(
        json!({"Type": "Fail", "Error": "E", "ErrorPath": "$.e"}),
    ));
    assert_problem(&p, Some("S"), Some("Error"), "cannot both be set");
}

#[test]
fn jsonata_is_rejected_with_a_clear_message() {
    let p = problems(
        json!({"QueryLanguage": "JSONata", "StartAt": "S", "States": {"S": {"Type": "Pass", "Output": "{% 1 %}", "End": true}}}),
    );
    assert_eq!(p.len(), 1, "{p:#?}");
    assert_problem(&p, None, Some("QueryLanguage"), "JSONata is not supported");
    let p = problems(machine_with(
        json!({"Type": "Pass", "QueryLanguage": "JSONata", "Output": "{% 1 %}", "End": true}),
    ));
    assert_eq!(p.len(), 1, "{p:#?}");
    assert_problem(
        &p,
        Some("S"),
        Some("QueryLanguage"),
        "JSONata is not supported",
    );
    ok(json!({"QueryLanguage": "JSONPath", "StartAt": "S", "States": {"S": {"Type": "Succeed"}}}));
}

#[test]
fn all_problems_are_collected_in_definition_order() {
    let definition = json!({
        "StartAt": "A",
        "States": {
            "A": {"Type": "Pass", "Next": "B", "Bogus": 1},
            "B": {"Type": "Wait", "End": true},
            "C": {"Type": "Fail", "Error": 3}
        }
    });
    let p = problems(definition.clone());
    let located: Vec<(Option<&str>, Option<&str>)> = p
        .iter()
        .map(|p| (p.state.as_deref(), p.field.as_deref()))
        .collect();
    assert_eq!(
        located,
        vec![
            (Some("A"), Some("Bogus")),
            (Some("B"), None),
            (Some("C"), Some("Error")),
            (Some("C"), None)
        ]
    );
    assert_eq!(problems(definition), p, "the order is stable");
}

#[test]
fn invalid_json_text_is_one_problem() {
    let e = parse("{\"StartAt\": ").unwrap_err();
    assert_eq!(e.problems.len(), 1);
    assert!(e.problems[0].reason.contains("not valid JSON"), "{e}");
    assert!(
        e.to_string()
            .starts_with("Invalid State Machine Definition: ")
    );
}

/// Every JSONPath definition of the conformance corpus ran on AWS, so it must parse; every
/// JSONata one must be rejected with the JSONata problem.
#[test]
fn every_corpus_definition_is_judged_like_aws() {
    let root = crate::conformance_cases();
    let categories =
        std::fs::read_dir(&root).unwrap_or_else(|e| panic!("cannot read {}: {e}", root.display()));
    let mut paths: Vec<_> = categories
        .filter_map(|c| std::fs::read_dir(c.ok()?.path()).ok())
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    paths.sort();
    let mut failures = Vec::new();
    for path in &paths {
        let case: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let text = serde_json::to_string(&case["definition"]).unwrap();
        let jsonata = case["query_language"] == "JSONata";
        match (parse(&text), jsonata) {
            (Ok(_), false) => {}
            (Err(e), true) if e.problems.iter().any(|p| p.reason.contains("JSONata")) => {}
            (Err(e), false) => failures.push(format!("{}: rejected: {e}", path.display())),
            (Ok(_), true) => failures.push(format!("{}: JSONata accepted", path.display())),
            (Err(e), true) => failures.push(format!(
                "{}: JSONata rejected for another reason: {e}",
                path.display()
            )),
        }
    }
    assert!(paths.len() > 700, "found only {} cases", paths.len());
    assert!(
        failures.is_empty(),
        "{} of {} differ:\n{}",
        failures.len(),
        paths.len(),
        failures.join("\n")
    );
}

fn arbitrary_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
        prop::sample::select(vec![
            "$",
            "$.a",
            "$$.Execution",
            "$x",
            "States.ALL",
            "Pass",
            "Task",
            "Choice",
            "Map",
            "End",
            "S",
            "2016-03-14T01:59:00Z",
            "States.Format('{}', $.a)",
            "$.a[*]",
            "",
            "JSONata",
        ])
        .prop_map(|s| json!(s)),
        "\\PC{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        let keys = prop::sample::select(vec![
            "Type",
            "Next",
            "End",
            "StartAt",
            "States",
            "Choices",
            "Variable",
            "And",
            "Not",
            "Branches",
            "ItemProcessor",
            "Iterator",
            "Retry",
            "Catch",
            "ErrorEquals",
            "Parameters",
            "Assign",
            "x.$",
            "ResultPath",
            "Seconds",
            "Default",
            "S",
            "QueryLanguage",
            "TimeoutSeconds",
            "ErrorPath",
        ]);
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((keys, inner), 0..5).prop_map(|kv| Value::Object(
                kv.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
            )),
        ]
    })
}

proptest! {
    #[test]
    fn parse_value_never_panics(value in arbitrary_json()) {
        let _ = parse_value(&value);
    }

    #[test]
    fn parse_never_panics_on_text(text in "\\PC{0,64}") {
        let _ = parse(&text);
    }

    #[test]
    fn a_broken_state_inside_a_valid_machine_never_panics(state in arbitrary_json()) {
        let _ = parse_value(&machine_with(state));
    }
}
