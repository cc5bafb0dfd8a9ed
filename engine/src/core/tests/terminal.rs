use super::*;

#[test]
fn succeed_ends_the_execution_with_its_filtered_input() {
    let mut h = Harness::new(
        single(json!({"Type": "Succeed", "InputPath": "$.a", "OutputPath": "$.b"})),
        json!({"a": {"b": [1]}}),
    );
    h.start();
    assert_eq!(h.output(), json!([1]));
    assert_eq!(
        h.event_types(),
        [
            "ExecutionStarted",
            "SucceedStateEntered",
            "SucceedStateExited",
            "ExecutionSucceeded"
        ]
    );
}

#[test]
fn fail_ends_the_execution_with_its_error_and_cause() {
    let mut h = Harness::new(
        single(json!({"Type": "Fail", "Error": "E", "Cause": "C"})),
        json!({}),
    );
    h.start();
    assert_eq!(h.failure(), (Some("E".into()), Some("C".into())));
    assert_eq!(
        h.event_types(),
        ["ExecutionStarted", "FailStateEntered", "ExecutionFailed"]
    );
    assert_eq!(
        h.details("ExecutionFailed"),
        json!({"error": "E", "cause": "C"})
    );
    assert_eq!(h.outcome().unwrap().output, None);
}

#[test]
fn fail_without_error_or_cause_omits_them() {
    let mut h = Harness::new(single(json!({"Type": "Fail"})), json!({}));
    h.start();
    assert_eq!(h.failure(), (None, None));
    assert_eq!(h.details("ExecutionFailed"), json!({}));
}

#[test]
fn fail_error_path_and_cause_path_read_the_input() {
    let mut h = Harness::new(
        single(json!({"Type": "Fail", "ErrorPath": "$.e", "CausePath": "$.c"})),
        json!({"e": "Err", "c": "because"}),
    );
    h.start();
    assert_eq!(h.failure(), (Some("Err".into()), Some("because".into())));
}

#[test]
fn fail_cause_path_may_be_an_intrinsic() {
    let mut h = Harness::new(
        single(json!({
            "Type": "Fail",
            "Error": "E",
            "CausePath": "States.Format('item {} failed', $.id)"
        })),
        json!({"id": 7}),
    );
    h.start();
    assert_eq!(h.failure().1.as_deref(), Some("item 7 failed"));
}

#[test]
fn fail_error_path_to_a_missing_field_is_a_runtime_error() {
    let mut h = Harness::new(
        single(json!({"Type": "Fail", "ErrorPath": "$.missing"})),
        json!({}),
    );
    h.start();
    assert_eq!(h.error(), "States.Runtime");
}
