use super::*;

fn run_pass(state: Value, input: Value) -> Harness {
    let mut h = Harness::new(single(state), input);
    h.start();
    h
}

#[test]
fn pass_without_fields_outputs_its_input() {
    let h = run_pass(json!({"Type": "Pass", "End": true}), json!({"a": 1}));
    assert_eq!(h.output(), json!({"a": 1}));
    assert_eq!(
        h.event_types(),
        [
            "ExecutionStarted",
            "PassStateEntered",
            "PassStateExited",
            "ExecutionSucceeded"
        ]
    );
}

#[test]
fn pass_result_replaces_the_input_and_is_not_evaluated() {
    let h = run_pass(
        json!({"Type": "Pass", "Result": {"x.$": "$.a", "y": 2}, "End": true}),
        json!({"a": 1}),
    );
    assert_eq!(h.output(), json!({"x.$": "$.a", "y": 2}));
}

#[test]
fn pass_result_is_merged_at_result_path() {
    let h = run_pass(
        json!({"Type": "Pass", "Result": 7, "ResultPath": "$.b.c", "End": true}),
        json!({"a": 1}),
    );
    assert_eq!(h.output(), json!({"a": 1, "b": {"c": 7}}));
}

#[test]
fn pass_parameters_are_rendered_against_the_effective_input() {
    let h = run_pass(
        json!({
            "Type": "Pass",
            "InputPath": "$.inner",
            "Parameters": {"v.$": "$.v", "name.$": "$$.State.Name", "lit": true},
            "End": true
        }),
        json!({"inner": {"v": [1, 2]}, "other": 0}),
    );
    assert_eq!(h.output(), json!({"v": [1, 2], "name": "S", "lit": true}));
}

#[test]
fn pass_input_path_result_path_and_output_path_compose() {
    // InputPath selects what Parameters see; ResultPath merges into the *raw* input; OutputPath
    // filters the merged document.
    let h = run_pass(
        json!({
            "Type": "Pass",
            "InputPath": "$.in",
            "Parameters": {"doubled.$": "States.MathAdd($.n, $.n)"},
            "ResultPath": "$.res",
            "OutputPath": "$.res",
            "End": true
        }),
        json!({"in": {"n": 4}, "keep": 1}),
    );
    assert_eq!(h.output(), json!({"doubled": 8}));
}

#[test]
fn null_input_path_gives_an_empty_object() {
    let h = run_pass(
        json!({"Type": "Pass", "InputPath": null, "End": true}),
        json!({"a": 1}),
    );
    assert_eq!(h.output(), json!({}));
}

#[test]
fn null_result_path_discards_the_result() {
    let h = run_pass(
        json!({"Type": "Pass", "Result": {"x": 1}, "ResultPath": null, "End": true}),
        json!({"a": 1}),
    );
    assert_eq!(h.output(), json!({"a": 1}));
}

#[test]
fn null_output_path_gives_an_empty_object() {
    let h = run_pass(
        json!({"Type": "Pass", "OutputPath": null, "End": true}),
        json!({"a": 1}),
    );
    assert_eq!(h.output(), json!({}));
}

#[test]
fn pass_output_becomes_the_next_state_input() {
    let def = json!({
        "StartAt": "A",
        "States": {
            "A": {"Type": "Pass", "Result": {"x": 1}, "Next": "B"},
            "B": {"Type": "Pass", "ResultPath": "$.copy", "End": true}
        }
    });
    let mut h = Harness::new(def, json!({}));
    h.start();
    let entered = h.events_of("PassStateEntered");
    let b_input = entered[1].details.as_ref().unwrap()["input"]
        .as_str()
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(b_input).unwrap(),
        json!({"x": 1})
    );
    assert_eq!(h.output(), json!({"x": 1, "copy": {"x": 1}}));
}

#[test]
fn result_path_through_a_non_object_fails_with_result_path_match_failure() {
    let h = run_pass(
        json!({"Type": "Pass", "Result": 1, "ResultPath": "$.a.b", "End": true}),
        json!({"a": 5}),
    );
    assert_eq!(h.error(), "States.ResultPathMatchFailure");
}

#[test]
fn missing_parameters_path_fails_with_a_runtime_error() {
    let h = run_pass(
        json!({"Type": "Pass", "Parameters": {"x.$": "$.missing"}, "End": true}),
        json!({"a": 1}),
    );
    let (error, cause) = h.failure();
    assert_eq!(error.as_deref(), Some("States.Runtime"));
    assert!(cause.unwrap().starts_with(
        "An error occurred while executing the state 'S' (entered at the event id #2)."
    ));
}

#[test]
fn context_object_shows_the_execution_state_machine_and_state() {
    let def = json!({
        "StartAt": "W",
        "States": {
            "W": {"Type": "Wait", "Seconds": 3, "Next": "S"},
            "S": {"Type": "Pass", "Parameters": {"ctx.$": "$$"}, "End": true}
        }
    });
    let mut h = Harness::new(def, json!({"in": 1}));
    h.start();
    h.fire_timer();
    assert_eq!(
        h.output()["ctx"],
        json!({
            "Execution": {
                "Id": "arn:aws:states:us-east-1:123456789012:execution:sm:ex",
                "Input": {"in": 1},
                "StartTime": "2024-01-01T00:00:00.000Z",
                "Name": "ex",
                "RoleArn": "arn:aws:iam::123456789012:role/r",
                "RedriveCount": 0
            },
            "StateMachine": {
                "Id": "arn:aws:states:us-east-1:123456789012:stateMachine:sm",
                "Name": "sm"
            },
            "State": {"Name": "S", "EnteredTime": "2024-01-01T00:00:03.000Z"}
        })
    );
}
