use super::*;

fn choice_machine(default: bool) -> Value {
    let choice = json!({
        "Type": "Choice",
        "Choices": [
            {"Variable": "$.n", "NumericGreaterThan": 10, "Next": "Big"},
            {"Variable": "$.n", "NumericGreaterThan": 5, "Next": "Medium"}
        ]
    });
    let mut def = json!({
        "StartAt": "C",
        "States": {
            "C": choice,
            "Big": {"Type": "Pass", "Result": "big", "End": true},
            "Medium": {"Type": "Pass", "Result": "medium", "End": true}
        }
    });
    if default {
        def["States"]["C"]["Default"] = json!("Small");
        def["States"]["Small"] = json!({"Type": "Pass", "Result": "small", "End": true});
    }
    def
}

fn run(default: bool, input: Value) -> Harness {
    let mut h = Harness::new(choice_machine(default), input);
    h.start();
    h
}

#[test]
fn choice_follows_the_first_matching_rule() {
    assert_eq!(run(true, json!({"n": 20})).output(), json!("big"));
    assert_eq!(run(true, json!({"n": 7})).output(), json!("medium"));
}

#[test]
fn choice_falls_back_to_default() {
    let h = run(true, json!({"n": 1}));
    assert_eq!(h.output(), json!("small"));
    assert_eq!(
        h.event_types(),
        [
            "ExecutionStarted",
            "ChoiceStateEntered",
            "ChoiceStateExited",
            "PassStateEntered",
            "PassStateExited",
            "ExecutionSucceeded"
        ]
    );
}

#[test]
fn choice_without_match_or_default_fails_with_no_choice_matched() {
    let h = run(false, json!({"n": 1}));
    let (error, cause) = h.failure();
    assert_eq!(error.as_deref(), Some("States.NoChoiceMatched"));
    assert!(cause.unwrap().contains("'C' (entered at the event id #2)"));
    assert_eq!(
        h.event_types(),
        ["ExecutionStarted", "ChoiceStateEntered", "ExecutionFailed"]
    );
    assert_eq!(
        h.details("ExecutionFailed")["error"],
        json!("States.NoChoiceMatched")
    );
}

#[test]
fn choice_passes_its_input_through_input_and_output_path() {
    let def = json!({
        "StartAt": "C",
        "States": {
            "C": {
                "Type": "Choice",
                "InputPath": "$.in",
                "OutputPath": "$.keep",
                "Choices": [{"Variable": "$.flag", "BooleanEquals": true, "Next": "End"}]
            },
            "End": {"Type": "Succeed"}
        }
    });
    let mut h = Harness::new(def, json!({"in": {"flag": true, "keep": {"k": 1}}}));
    h.start();
    assert_eq!(h.output(), json!({"k": 1}));
}

#[test]
fn missing_choice_variable_is_a_runtime_error() {
    let h = run(true, json!({"other": 1}));
    assert_eq!(h.error(), "States.Runtime");
}
