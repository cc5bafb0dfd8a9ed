use super::*;

fn activity(extra: Value) -> Harness {
    let mut h = Harness::new(task_machine(ACTIVITY, extra), json!({}));
    h.start();
    h
}

/// As AWS records it: a lapsed heartbeat is `States.Timeout` in the history and in the
/// execution's failure, like the task's own timeout.
#[test]
fn a_lapsed_heartbeat_fails_with_states_timeout() {
    let mut h = activity(json!({"HeartbeatSeconds": 5}));
    let token = h.token();
    h.start_task("w");
    h.time_out_task(TimeoutKind::Heartbeat);
    assert_eq!(h.failure(), (Some("States.Timeout".into()), None));
    assert_eq!(
        h.details("ActivityTimedOut"),
        json!({"error": "States.Timeout"})
    );
    assert!(h.actions.contains(&Action::CloseTask { token }));
    assert_eq!(
        h.event_types()[3..],
        ["ActivityStarted", "ActivityTimedOut", "ExecutionFailed"]
    );
}

#[test]
fn task_timeout_fails_with_states_timeout() {
    let mut h = activity(json!({"TimeoutSeconds": 5}));
    h.time_out_task(TimeoutKind::Task);
    assert_eq!(h.error(), "States.Timeout");
    assert_eq!(
        h.details("ActivityTimedOut"),
        json!({"error": "States.Timeout"})
    );
}

#[test]
fn service_task_timeout_records_task_timed_out() {
    let mut h = Harness::new(
        task_machine(SERVICE, json!({"TimeoutSeconds": 5})),
        json!({}),
    );
    h.start();
    h.time_out_task(TimeoutKind::Task);
    assert_eq!(
        h.details("TaskTimedOut"),
        json!({"resourceType": "sqs", "resource": "sendMessage", "error": "States.Timeout"})
    );
}

#[test]
fn a_lapsed_heartbeat_is_retried_by_states_heartbeat_timeout() {
    let mut h = activity(json!({
        "HeartbeatSeconds": 5,
        "Retry": [{"ErrorEquals": ["States.HeartbeatTimeout"], "MaxAttempts": 1}]
    }));
    h.time_out_task(TimeoutKind::Heartbeat);
    assert_eq!(h.status(), ExecutionStatus::Running);
    h.fire_timer();
    h.succeed_task(json!(1));
    assert_eq!(h.output(), json!(1));
}

#[test]
fn a_task_timeout_is_not_retried_by_states_heartbeat_timeout() {
    let mut h = activity(json!({
        "TimeoutSeconds": 5,
        "HeartbeatSeconds": 2,
        "Retry": [{"ErrorEquals": ["States.HeartbeatTimeout"], "MaxAttempts": 1}]
    }));
    h.time_out_task(TimeoutKind::Task);
    assert_eq!(h.error(), "States.Timeout");
}

/// One state, both names: the heartbeat's retrier comes first and takes the lapsed heartbeat;
/// the task's own timeout passes it by and the `States.Timeout` catcher takes it.
#[test]
fn heartbeat_and_task_timeouts_take_their_own_retrier_and_catcher() {
    let extra = json!({
        "TimeoutSeconds": 5,
        "HeartbeatSeconds": 2,
        "Retry": [{"ErrorEquals": ["States.HeartbeatTimeout"], "MaxAttempts": 1}],
        "Catch": [{"ErrorEquals": ["States.Timeout"], "Next": "Caught"}]
    });
    let def = |extra: &Value| {
        let mut def = task_machine(ACTIVITY, extra.clone());
        def["States"]["S"]["Next"] = json!("Caught");
        def["States"]["S"].as_object_mut().unwrap().remove("End");
        def["States"]["Caught"] = json!({"Type": "Pass", "End": true});
        def
    };
    let mut h = Harness::new(def(&extra), json!({}));
    h.start();
    h.time_out_task(TimeoutKind::Heartbeat);
    assert_eq!(h.status(), ExecutionStatus::Running, "retried");
    h.fire_timer();
    h.time_out_task(TimeoutKind::Heartbeat);
    assert_eq!(h.output(), json!({"Error": "States.Timeout"}), "caught");
    let mut h = Harness::new(def(&extra), json!({}));
    h.start();
    h.time_out_task(TimeoutKind::Task);
    assert_eq!(
        h.output(),
        json!({"Error": "States.Timeout"}),
        "caught at once"
    );
    let scheduled = h
        .event_types()
        .iter()
        .filter(|t| **t == "ActivityScheduled")
        .count();
    assert_eq!(scheduled, 1, "never retried");
}

#[test]
fn a_timed_out_token_is_dead() {
    let mut h = activity(json!({
        "TimeoutSeconds": 5,
        "Retry": [{"ErrorEquals": ["States.Timeout"], "MaxAttempts": 1}]
    }));
    let old = h.token();
    h.time_out_task(TimeoutKind::Task);
    let n = h.events.len();
    h.succeed_token(old.clone(), json!("late"));
    assert!(h.last.events.is_empty() && h.last.actions.is_empty());
    h.fire_timer();
    assert_ne!(h.token(), old);
    assert_eq!(h.events.len(), n + 1);
}

#[test]
fn execution_timeout_ends_with_timed_out_and_closes_open_tasks() {
    let def = json!({
        "StartAt": "P",
        "States": {"P": {
            "Type": "Parallel",
            "Branches": [
                {"StartAt": "A", "States": {"A": {"Type": "Task", "Resource": ACTIVITY, "End": true}}},
                {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 100, "End": true}}}
            ],
            "End": true
        }}
    });
    let mut h = Harness::new(def, json!({}));
    h.start();
    let token = h.token();
    let (timer, _) = h.timer();
    h.advance(50);
    h.apply(Event::ExecutionTimedOut);
    let o = h.outcome().unwrap();
    assert_eq!(o.status, ExecutionStatus::TimedOut);
    assert_eq!(o.output, None);
    assert!(h.last.actions.contains(&Action::CloseTask { token }));
    assert!(
        h.last
            .actions
            .contains(&Action::CancelTimer { timer_id: timer })
    );
    assert_eq!(h.event_types().last(), Some(&"ExecutionTimedOut"));
    assert!(h.state.frames.is_empty());
}

#[test]
fn stop_aborts_with_the_given_error_and_cause() {
    let mut h = activity(json!({}));
    let token = h.token();
    h.apply(Event::Stop {
        error: Some("Stopped".into()),
        cause: Some("by test".into()),
    });
    let o = h.outcome().unwrap();
    assert_eq!(o.status, ExecutionStatus::Aborted);
    assert_eq!(o.error.as_deref(), Some("Stopped"));
    assert_eq!(o.cause.as_deref(), Some("by test"));
    assert_eq!(
        h.details("ExecutionAborted"),
        json!({"error": "Stopped", "cause": "by test"})
    );
    assert!(h.last.actions.contains(&Action::CloseTask { token }));
}

#[test]
fn stop_without_error_or_cause_records_empty_details() {
    let mut h = activity(json!({}));
    h.apply(Event::Stop {
        error: None,
        cause: None,
    });
    assert_eq!(h.status(), ExecutionStatus::Aborted);
    assert_eq!(h.details("ExecutionAborted"), json!({}));
}

#[test]
fn stop_during_a_retry_back_off_cancels_its_timer() {
    let mut h = activity(json!({"Retry": [{"ErrorEquals": ["States.ALL"]}]}));
    h.fail_task("E", "c");
    let (timer, _) = h.timer();
    h.apply(Event::Stop {
        error: None,
        cause: None,
    });
    assert!(
        h.last
            .actions
            .contains(&Action::CancelTimer { timer_id: timer })
    );
}

#[test]
fn a_service_tasks_lapsed_heartbeat_records_states_timeout_too() {
    let mut h = Harness::new(
        task_machine(
            SERVICE,
            json!({
                "TimeoutSeconds": 50,
                "HeartbeatSeconds": 5,
                "Retry": [{"ErrorEquals": ["States.HeartbeatTimeout"], "MaxAttempts": 1}]
            }),
        ),
        json!({}),
    );
    h.start();
    h.time_out_task(TimeoutKind::Heartbeat);
    assert_eq!(
        h.details("TaskTimedOut"),
        json!({"resourceType": "sqs", "resource": "sendMessage", "error": "States.Timeout"})
    );
    assert_eq!(
        h.status(),
        ExecutionStatus::Running,
        "retried by the heartbeat's name"
    );
    h.fire_timer();
    h.time_out_task(TimeoutKind::Heartbeat);
    assert_eq!(h.failure(), (Some("States.Timeout".into()), None));
}
