use super::*;

fn wait_machine(wait: Value) -> Value {
    let mut state = json!({"Type": "Wait", "Next": "Done"});
    merge(&mut state, wait);
    json!({"StartAt": "W", "States": {"W": state, "Done": {"Type": "Succeed"}}})
}

fn started(wait: Value, input: Value) -> Harness {
    let mut h = Harness::new(wait_machine(wait), input);
    h.start();
    h
}

#[test]
fn wait_seconds_arms_a_timer_due_after_that_many_seconds() {
    let mut h = started(json!({"Seconds": 90}), json!({"a": 1}));
    assert_eq!(h.timer().1, t0() + TimeDelta::seconds(90));
    assert_eq!(h.event_types(), ["ExecutionStarted", "WaitStateEntered"]);
    assert_eq!(h.status(), ExecutionStatus::Running);
    h.fire_timer();
    assert_eq!(h.output(), json!({"a": 1}));
    let exited = h.events_of("WaitStateExited")[0];
    assert_eq!(exited.timestamp, t0() + TimeDelta::seconds(90));
}

#[test]
fn wait_timestamp_arms_a_timer_due_at_that_time() {
    let h = started(json!({"Timestamp": "2024-01-02T03:04:05Z"}), json!({}));
    assert_eq!(
        h.timer().1,
        Utc.with_ymd_and_hms(2024, 1, 2, 3, 4, 5).unwrap()
    );
}

#[test]
fn wait_seconds_path_reads_the_input() {
    let h = started(json!({"SecondsPath": "$.s"}), json!({"s": 15}));
    assert_eq!(h.timer().1, t0() + TimeDelta::seconds(15));
}

#[test]
fn wait_timestamp_path_reads_the_input() {
    let h = started(
        json!({"TimestampPath": "$.at"}),
        json!({"at": "2024-01-01T00:10:00+01:00"}),
    );
    // 00:10 at +01:00 is 23:10 the day before, i.e. already past: continue at once.
    assert!(h.pending_timers().is_empty());
    assert_eq!(h.status(), ExecutionStatus::Succeeded);

    let h = started(
        json!({"TimestampPath": "$.at"}),
        json!({"at": "2024-01-01T00:10:00.500Z"}),
    );
    assert_eq!(
        h.timer().1,
        t0() + TimeDelta::seconds(600) + TimeDelta::milliseconds(500)
    );
}

#[test]
fn wait_in_the_past_continues_at_once() {
    let h = started(
        json!({"Timestamp": "2000-01-01T00:00:00Z"}),
        json!({"x": 1}),
    );
    assert!(h.pending_timers().is_empty());
    assert_eq!(h.output(), json!({"x": 1}));
    assert_eq!(
        h.event_types(),
        [
            "ExecutionStarted",
            "WaitStateEntered",
            "WaitStateExited",
            "SucceedStateEntered",
            "SucceedStateExited",
            "ExecutionSucceeded"
        ]
    );
}

#[test]
fn wait_zero_seconds_continues_at_once() {
    let h = started(json!({"Seconds": 0}), json!({}));
    assert!(h.pending_timers().is_empty());
    assert_eq!(h.status(), ExecutionStatus::Succeeded);
}

#[test]
fn wait_seconds_path_to_a_negative_number_is_a_runtime_error() {
    let h = started(json!({"SecondsPath": "$.s"}), json!({"s": -1}));
    assert_eq!(h.error(), "States.Runtime");
}

#[test]
fn wait_timestamp_path_to_a_non_timestamp_is_a_runtime_error() {
    let h = started(json!({"TimestampPath": "$.s"}), json!({"s": "tomorrow"}));
    assert_eq!(h.error(), "States.Runtime");
}

#[test]
fn wait_output_path_applies_when_the_timer_fires() {
    let mut h = started(
        json!({"Seconds": 1, "InputPath": "$.a", "OutputPath": "$.b"}),
        json!({"a": {"b": 2}}),
    );
    h.fire_timer();
    assert_eq!(h.output(), json!(2));
}
