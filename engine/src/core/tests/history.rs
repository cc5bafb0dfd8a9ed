use super::*;

fn assert_ids_are_sequential(h: &Harness) {
    let ids: Vec<u64> = h.events.iter().map(|e| e.id).collect();
    assert_eq!(ids, (1..=h.events.len() as u64).collect::<Vec<_>>());
}

#[test]
fn activity_success_sequence_matches_aws() {
    let mut h = Harness::new(task_machine(ACTIVITY, json!({})), json!({"in": 1}));
    h.start();
    h.start_task("w");
    h.succeed_task(json!({"out": 2}));
    assert_eq!(
        h.event_types(),
        [
            "ExecutionStarted",
            "TaskStateEntered",
            "ActivityScheduled",
            "ActivityStarted",
            "ActivitySucceeded",
            "TaskStateExited",
            "ExecutionSucceeded"
        ]
    );
    assert_ids_are_sequential(&h);
    let prev: Vec<u64> = h.events.iter().map(|e| e.previous_event_id).collect();
    assert_eq!(prev, [0, 1, 2, 3, 4, 5, 6]);
    assert_eq!(h.payload("ExecutionStarted", "input"), json!({"in": 1}));
    assert_eq!(
        h.details("ExecutionStarted")["roleArn"],
        json!("arn:aws:iam::123456789012:role/r")
    );
    assert_eq!(h.payload("ExecutionSucceeded", "output"), json!({"out": 2}));
    assert_eq!(
        h.details("TaskStateEntered")["inputDetails"],
        json!({"truncated": false})
    );
    assert_eq!(h.details("TaskStateExited")["name"], json!("S"));
}

#[test]
fn worker_failure_without_catch_ends_without_task_state_exited() {
    let mut h = Harness::new(task_machine(ACTIVITY, json!({})), json!({}));
    h.start();
    h.start_task("w");
    h.fail_task("WorkerError", "it broke");
    assert_eq!(
        h.event_types(),
        [
            "ExecutionStarted",
            "TaskStateEntered",
            "ActivityScheduled",
            "ActivityStarted",
            "ActivityFailed",
            "ExecutionFailed"
        ]
    );
    assert_eq!(
        h.details("ActivityFailed"),
        json!({"error": "WorkerError", "cause": "it broke"})
    );
    assert_eq!(
        h.details("ExecutionFailed"),
        json!({"error": "WorkerError", "cause": "it broke"})
    );
    assert_eq!(
        h.failure(),
        (Some("WorkerError".into()), Some("it broke".into()))
    );
    assert_ids_are_sequential(&h);
}

#[test]
fn worker_failure_without_error_or_cause_omits_them() {
    let mut h = Harness::new(task_machine(ACTIVITY, json!({})), json!({}));
    h.start();
    let token = h.token();
    h.apply(Event::TaskFailed {
        token,
        error: None,
        cause: None,
    });
    assert_eq!(h.details("ActivityFailed"), json!({}));
    assert_eq!(h.failure(), (None, None));
}

#[test]
fn event_timestamps_are_the_time_of_the_step() {
    let mut h = Harness::new(task_machine(ACTIVITY, json!({})), json!({}));
    h.start();
    h.advance(42);
    h.succeed_task(json!({}));
    let last = h.events.last().unwrap();
    assert_eq!(last.timestamp, t0() + TimeDelta::seconds(42));
    assert_eq!(h.events[0].timestamp, t0());
}

#[test]
fn ids_keep_increasing_across_steps_and_branches() {
    let def = json!({
        "StartAt": "P",
        "States": {
            "P": {
                "Type": "Parallel",
                "Branches": [
                    {"StartAt": "A", "States": {"A": {"Type": "Task", "Resource": ACTIVITY, "End": true}}},
                    {"StartAt": "B", "States": {"B": {"Type": "Task", "Resource": ACTIVITY, "End": true}}}
                ],
                "Next": "Done"
            },
            "Done": {"Type": "Pass", "End": true}
        }
    });
    let mut h = Harness::new(def, json!({}));
    h.start();
    let b = h.task_of("B").token;
    h.succeed_token(b, json!(1));
    let a = h.task_of("A").token;
    h.succeed_token(a, json!(2));
    assert_eq!(h.output(), json!([2, 1]));
    assert_ids_are_sequential(&h);
    // Every previousEventId names an earlier event.
    assert!(h.events.iter().all(|e| e.previous_event_id < e.id));
    // The branch's Succeeded event follows its own Scheduled event, not the other branch's.
    let b_scheduled = h.events_of("ActivityScheduled")[1].id;
    let b_succeeded = h.events_of("ActivitySucceeded")[0];
    assert_eq!(b_succeeded.previous_event_id, b_scheduled);
}

#[test]
fn stale_task_answers_change_nothing() {
    let mut h = Harness::new(task_machine(ACTIVITY, json!({})), json!({}));
    h.start();
    let before = h.state.clone();
    for event in [
        Event::TaskSucceeded {
            token: "unknown".into(),
            output: json!(1),
        },
        Event::TaskFailed {
            token: "unknown".into(),
            error: None,
            cause: None,
        },
        Event::TaskStarted {
            token: "unknown".into(),
            worker_name: None,
        },
        Event::TaskTimedOut {
            token: "unknown".into(),
            kind: TimeoutKind::Task,
        },
        Event::TimerFired { timer_id: 99 },
    ] {
        let step = h.apply(event);
        assert!(step.events.is_empty() && step.actions.is_empty());
    }
    assert_eq!(
        serde_json::to_value(&h.state).unwrap(),
        serde_json::to_value(&before).unwrap()
    );
}

#[test]
fn answering_a_closed_token_changes_nothing() {
    let def = json!({
        "StartAt": "A",
        "States": {
            "A": {"Type": "Task", "Resource": ACTIVITY, "Next": "B"},
            "B": {"Type": "Task", "Resource": ACTIVITY, "End": true}
        }
    });
    let mut h = Harness::new(def, json!({}));
    h.start();
    let a = h.token();
    h.succeed_task(json!({}));
    let n = h.events.len();
    h.succeed_token(a.clone(), json!({}));
    h.fail_token(a, "E", "c");
    assert_eq!(h.events.len(), n);
    assert_eq!(h.status(), ExecutionStatus::Running);
}

#[test]
fn a_cancelled_timer_firing_changes_nothing() {
    let def = json!({
        "StartAt": "P",
        "States": {"P": {
            "Type": "Parallel",
            "Branches": [
                {"StartAt": "A", "States": {"A": {"Type": "Task", "Resource": ACTIVITY, "End": true}}},
                {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 100, "End": true}}}
            ],
            "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Hold"}],
            "End": true
        },
        "Hold": {"Type": "Task", "Resource": ACTIVITY, "End": true}}
    });
    let mut h = Harness::new(def, json!({}));
    h.start();
    let (timer, _) = h.timer();
    h.fail_task("E", "c");
    assert!(h.actions.contains(&Action::CancelTimer { timer_id: timer }));
    assert_eq!(h.task().state_name, "Hold");
    let n = h.events.len();
    h.fire(timer);
    assert!(h.last.events.is_empty() && h.last.actions.is_empty());
    assert_eq!(h.events.len(), n);
}

#[test]
fn events_after_the_end_change_nothing() {
    let mut h = Harness::new(
        json!({"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 5, "End": true}}}),
        json!({}),
    );
    h.start();
    let (timer, _) = h.timer();
    h.apply(Event::Stop {
        error: None,
        cause: None,
    });
    let n = h.events.len();
    for event in [
        Event::TimerFired { timer_id: timer },
        Event::Start,
        Event::ExecutionTimedOut,
        Event::Stop {
            error: None,
            cause: None,
        },
    ] {
        let step = h.apply(event);
        assert!(step.events.is_empty() && step.actions.is_empty());
    }
    assert_eq!(h.events.len(), n);
    assert_eq!(h.state.status, ExecutionStatus::Aborted);
}

#[test]
fn a_second_start_changes_nothing() {
    let mut h = Harness::new(task_machine(ACTIVITY, json!({})), json!({}));
    h.start();
    let step = h.start();
    assert!(step.events.is_empty() && step.actions.is_empty());
    assert_eq!(h.scheduled().len(), 1);
}
