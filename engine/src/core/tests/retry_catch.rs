use super::*;

fn retry_machine(retry: Value, catch: Value) -> Value {
    let catches = catch.as_array().is_some_and(|c| !c.is_empty());
    let mut def = json!({
        "StartAt": "T",
        "States": {
            "T": {
                "Type": "Task",
                "Resource": ACTIVITY,
                "Retry": retry,
                "Catch": catch,
                "End": true
            }
        }
    });
    if catches {
        def["States"]["Handler"] = json!({"Type": "Pass", "End": true});
    }
    def
}

#[test]
fn retry_delays_grow_by_backoff_rate_and_are_capped_by_max_delay() {
    let mut h = Harness::new(
        retry_machine(
            json!([{
                "ErrorEquals": ["E"],
                "IntervalSeconds": 2,
                "BackoffRate": 3,
                "MaxAttempts": 4,
                "MaxDelaySeconds": 10
            }]),
            json!([]),
        ),
        json!({}),
    );
    h.start();
    for expected in [2, 6, 10, 10] {
        let before = h.now;
        h.advance(1);
        h.fail_task("E", "c");
        assert!(h.open_tasks().is_empty());
        let (_, due) = h.timer();
        assert_eq!(due, before + TimeDelta::seconds(1 + expected));
        h.fire_timer();
    }
    h.fail_task("E", "last");
    assert_eq!(h.failure(), (Some("E".into()), Some("last".into())));
    assert_eq!(h.scheduled().len(), 5);
}

#[test]
fn retry_runs_the_task_again_without_reentering_the_state() {
    let mut h = Harness::new(
        retry_machine(json!([{"ErrorEquals": ["States.ALL"]}]), json!([])),
        json!({}),
    );
    h.start();
    let first = h.token();
    h.fail_task("E", "c");
    h.fire_timer();
    let second = h.token();
    assert_ne!(first, second);
    h.succeed_task(json!("ok"));
    assert_eq!(h.output(), json!("ok"));
    assert_eq!(
        h.event_types(),
        [
            "ExecutionStarted",
            "TaskStateEntered",
            "ActivityScheduled",
            "ActivityFailed",
            "ActivityScheduled",
            "ActivitySucceeded",
            "TaskStateExited",
            "ExecutionSucceeded"
        ]
    );
}

#[test]
fn default_retrier_waits_one_second_then_doubles_three_times() {
    let mut h = Harness::new(
        retry_machine(json!([{"ErrorEquals": ["E"]}]), json!([])),
        json!({}),
    );
    h.start();
    for expected in [1, 2, 4] {
        let before = h.now;
        h.fail_task("E", "c");
        assert_eq!(h.timer().1, before + TimeDelta::seconds(expected));
        h.fire_timer();
    }
    h.fail_task("E", "c");
    assert_eq!(h.error(), "E");
}

#[test]
fn retry_count_in_the_context_object_increments() {
    let mut def = retry_machine(json!([{"ErrorEquals": ["E"], "MaxAttempts": 2}]), json!([]));
    def["States"]["T"]["Parameters"] = json!({"retry.$": "$$.State.RetryCount"});
    let mut h = Harness::new(def, json!({}));
    h.start();
    h.fail_task("E", "c");
    h.fire_timer();
    h.fail_task("E", "c");
    h.fire_timer();
    let counts: Vec<_> = h
        .scheduled()
        .into_iter()
        .map(|t| t.input["retry"].clone())
        .collect();
    assert_eq!(counts, [json!(0), json!(1), json!(2)]);
}

#[test]
fn max_attempts_zero_never_retries() {
    let mut h = Harness::new(
        retry_machine(
            json!([{"ErrorEquals": ["E"], "MaxAttempts": 0}]),
            json!([{"ErrorEquals": ["E"], "Next": "Handler"}]),
        ),
        json!({}),
    );
    h.start();
    h.fail_task("E", "c");
    assert!(h.pending_timers().is_empty());
    assert_eq!(h.output(), json!({"Error": "E", "Cause": "c"}));
}

#[test]
fn first_matching_retrier_decides_even_when_exhausted() {
    let mut h = Harness::new(
        retry_machine(
            json!([
                {"ErrorEquals": ["E"], "MaxAttempts": 1},
                {"ErrorEquals": ["States.ALL"], "MaxAttempts": 5}
            ]),
            json!([]),
        ),
        json!({}),
    );
    h.start();
    h.fail_task("E", "c");
    h.fire_timer();
    h.fail_task("E", "c");
    assert_eq!(h.error(), "E");
    assert_eq!(h.scheduled().len(), 2);
}

#[test]
fn retriers_count_attempts_separately() {
    let mut h = Harness::new(
        retry_machine(
            json!([
                {"ErrorEquals": ["A"], "MaxAttempts": 1},
                {"ErrorEquals": ["B"], "MaxAttempts": 1}
            ]),
            json!([]),
        ),
        json!({}),
    );
    h.start();
    h.fail_task("A", "c");
    h.fire_timer();
    h.fail_task("B", "c");
    h.fire_timer();
    h.fail_task("A", "c");
    assert_eq!(h.error(), "A");
    assert_eq!(h.scheduled().len(), 3);
}

#[test]
fn retry_counts_reset_when_the_state_is_left() {
    // T retries once at most; it loops through Check until its result is "done".
    let def = json!({
        "StartAt": "T",
        "States": {
            "T": {
                "Type": "Task",
                "Resource": ACTIVITY,
                "Retry": [{"ErrorEquals": ["E"], "MaxAttempts": 1}],
                "ResultPath": "$.r",
                "Next": "Check"
            },
            "Check": {
                "Type": "Choice",
                "Choices": [{"Variable": "$.r", "StringEquals": "done", "Next": "End"}],
                "Default": "T"
            },
            "End": {"Type": "Succeed"}
        }
    });
    let mut h = Harness::new(def, json!({}));
    h.start();
    h.fail_task("E", "c");
    h.fire_timer();
    h.succeed_task(json!("again"));
    // Back in T: its one retry is available again.
    h.fail_task("E", "c");
    assert_eq!(h.status(), ExecutionStatus::Running);
    h.fire_timer();
    h.succeed_task(json!("done"));
    assert_eq!(h.output(), json!({"r": "done"}));
}

#[test]
fn catch_puts_the_error_output_at_its_result_path() {
    let mut h = Harness::new(
        retry_machine(
            json!([]),
            json!([{"ErrorEquals": ["E"], "ResultPath": "$.error", "Next": "Handler"}]),
        ),
        json!({"orig": 1}),
    );
    h.start();
    h.fail_task("E", "why");
    assert_eq!(
        h.output(),
        json!({"orig": 1, "error": {"Error": "E", "Cause": "why"}})
    );
    assert_eq!(
        h.event_types(),
        [
            "ExecutionStarted",
            "TaskStateEntered",
            "ActivityScheduled",
            "ActivityFailed",
            "TaskStateExited",
            "PassStateEntered",
            "PassStateExited",
            "ExecutionSucceeded"
        ]
    );
}

#[test]
fn catch_result_path_defaults_to_replacing_the_input() {
    let mut h = Harness::new(
        retry_machine(
            json!([]),
            json!([{"ErrorEquals": ["States.ALL"], "Next": "Handler"}]),
        ),
        json!({"orig": 1}),
    );
    h.start();
    h.fail_task("Anything", "c");
    assert_eq!(h.output(), json!({"Error": "Anything", "Cause": "c"}));
}

#[test]
fn catchers_are_scanned_in_order() {
    let def = json!({
        "StartAt": "T",
        "States": {
            "T": {
                "Type": "Task",
                "Resource": ACTIVITY,
                "Catch": [
                    {"ErrorEquals": ["Other"], "Next": "A"},
                    {"ErrorEquals": ["E"], "Next": "B"},
                    {"ErrorEquals": ["States.ALL"], "Next": "A"}
                ],
                "End": true
            },
            "A": {"Type": "Pass", "Result": "a", "End": true},
            "B": {"Type": "Pass", "Result": "b", "End": true}
        }
    });
    let mut h = Harness::new(def, json!({}));
    h.start();
    h.fail_task("E", "c");
    assert_eq!(h.output(), json!("b"));
}

#[test]
fn catch_applies_only_after_retries_are_exhausted() {
    let mut h = Harness::new(
        retry_machine(
            json!([{"ErrorEquals": ["E"], "MaxAttempts": 1}]),
            json!([{"ErrorEquals": ["E"], "Next": "Handler"}]),
        ),
        json!({}),
    );
    h.start();
    h.fail_task("E", "first");
    assert_eq!(h.status(), ExecutionStatus::Running);
    h.fire_timer();
    h.fail_task("E", "second");
    assert_eq!(h.output(), json!({"Error": "E", "Cause": "second"}));
}

#[test]
fn task_failed_does_not_catch_a_timeout() {
    let mut h = Harness::new(
        retry_machine(
            json!([]),
            json!([{"ErrorEquals": ["States.TaskFailed"], "Next": "Handler"}]),
        ),
        json!({}),
    );
    h.start();
    h.time_out_task(TimeoutKind::Task);
    assert_eq!(h.error(), "States.Timeout");
}

/// `States.TaskFailed` matches every error but `States.Timeout`, and a lapsed heartbeat is
/// recorded as `States.Timeout`: a worker's error is caught, a lapsed heartbeat is not.
#[test]
fn task_failed_catches_a_worker_error_but_not_a_lapsed_heartbeat() {
    for heartbeat in [false, true] {
        let mut h = Harness::new(
            retry_machine(
                json!([]),
                json!([{"ErrorEquals": ["States.TaskFailed"], "Next": "Handler"}]),
            ),
            json!({}),
        );
        h.start();
        if heartbeat {
            h.time_out_task(TimeoutKind::Heartbeat);
            assert_eq!(h.error(), "States.Timeout");
        } else {
            h.fail_task("Custom", "c");
            assert_eq!(h.status(), ExecutionStatus::Succeeded);
        }
    }
}

#[test]
fn timeout_is_caught_by_name_and_by_states_all() {
    for name in ["States.Timeout", "States.ALL"] {
        let mut h = Harness::new(
            retry_machine(
                json!([]),
                json!([{"ErrorEquals": [name], "Next": "Handler"}]),
            ),
            json!({}),
        );
        h.start();
        h.time_out_task(TimeoutKind::Task);
        assert_eq!(h.output()["Error"], json!("States.Timeout"), "{name}");
    }
}

#[test]
fn runtime_errors_from_a_bad_output_path_are_not_caught_or_retried() {
    let mut h = Harness::new(
        json!({
            "StartAt": "T",
            "States": {
                "T": {
                    "Type": "Task",
                    "Resource": ACTIVITY,
                    "OutputPath": "$.missing",
                    "Retry": [{"ErrorEquals": ["States.ALL"]}],
                    "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Handler"}],
                    "End": true
                },
                "Handler": {"Type": "Pass", "End": true}
            }
        }),
        json!({}),
    );
    h.start();
    h.succeed_task(json!({"present": 1}));
    let (error, cause) = h.failure();
    assert_eq!(error.as_deref(), Some("States.Runtime"));
    assert!(cause.unwrap().contains("'T' (entered at the event id #2)"));
    assert!(h.pending_timers().is_empty());
    assert!(!h.event_types().contains(&"PassStateEntered"));
}

#[test]
fn runtime_errors_are_not_caught_even_by_name() {
    let mut h = Harness::new(
        json!({
            "StartAt": "T",
            "States": {
                "T": {
                    "Type": "Task",
                    "Resource": ACTIVITY,
                    "OutputPath": "$.missing",
                    "Catch": [{"ErrorEquals": ["States.Runtime"], "Next": "Handler"}],
                    "End": true
                },
                "Handler": {"Type": "Pass", "End": true}
            }
        }),
        json!({}),
    );
    h.start();
    h.succeed_task(json!({}));
    assert_eq!(h.error(), "States.Runtime");
}

#[test]
fn result_selector_missing_path_is_an_uncaught_runtime_error() {
    // A missing path in ResultSelector is a States.Runtime failure too.
    let mut h = Harness::new(
        task_machine(
            ACTIVITY,
            json!({
                "ResultSelector": {"x.$": "$.nope"},
                "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "S"}]
            }),
        ),
        json!({}),
    );
    h.start();
    h.succeed_task(json!({}));
    assert_eq!(h.error(), "States.Runtime");
}

#[test]
fn catcher_assign_sees_the_error_output() {
    let def = json!({
        "StartAt": "T",
        "States": {
            "T": {
                "Type": "Task",
                "Resource": ACTIVITY,
                "Catch": [{
                    "ErrorEquals": ["States.ALL"],
                    "Assign": {"lastError.$": "$.Error"},
                    "ResultPath": null,
                    "Next": "Report"
                }],
                "End": true
            },
            "Report": {"Type": "Pass", "Parameters": {"e.$": "$lastError"}, "End": true}
        }
    });
    let mut h = Harness::new(def, json!({}));
    h.start();
    h.fail_task("Oops", "c");
    assert_eq!(h.output(), json!({"e": "Oops"}));
}

#[test]
fn parallel_retry_reruns_every_branch() {
    let def = json!({
        "StartAt": "P",
        "States": {"P": {
            "Type": "Parallel",
            "Retry": [{"ErrorEquals": ["E"], "MaxAttempts": 1, "IntervalSeconds": 5}],
            "Branches": [
                {"StartAt": "A", "States": {"A": {"Type": "Task", "Resource": ACTIVITY, "End": true}}},
                {"StartAt": "B", "States": {"B": {"Type": "Task", "Resource": ACTIVITY, "End": true}}}
            ],
            "End": true
        }}
    });
    let mut h = Harness::new(def, json!({}));
    h.start();
    let a = h.task_of("A").token;
    h.fail_token(a, "E", "c");
    assert!(h.open_tasks().is_empty());
    assert_eq!(h.timer().1, t0() + TimeDelta::seconds(5));
    h.fire_timer();
    assert_eq!(h.open_tasks().len(), 2);
    assert_eq!(h.events_of("ParallelStateStarted").len(), 2);
    let a = h.task_of("A").token;
    let b = h.task_of("B").token;
    h.succeed_token(b, json!("b"));
    h.succeed_token(a, json!("a"));
    assert_eq!(h.output(), json!(["a", "b"]));
}

#[test]
fn fractional_backoff_rates_give_millisecond_delays() {
    let mut h = Harness::new(
        retry_machine(
            json!([{"ErrorEquals": ["E"], "IntervalSeconds": 1, "BackoffRate": 1.5, "MaxAttempts": 3}]),
            json!([]),
        ),
        json!({}),
    );
    h.start();
    for expected_ms in [1000, 1500, 2250] {
        let before = h.now;
        h.fail_task("E", "c");
        assert_eq!(h.timer().1, before + TimeDelta::milliseconds(expected_ms));
        h.fire_timer();
    }
}

#[test]
fn full_jitter_keeps_the_delay_within_the_back_off() {
    for _ in 0..20 {
        let mut h = Harness::new(
            retry_machine(
                json!([{"ErrorEquals": ["E"], "IntervalSeconds": 10, "JitterStrategy": "FULL"}]),
                json!([]),
            ),
            json!({}),
        );
        h.start();
        h.fail_task("E", "c");
        let due = h.timer().1;
        assert!(due >= t0() && due <= t0() + TimeDelta::seconds(10), "{due}");
    }
}

#[test]
fn a_retry_timer_fires_only_once() {
    let mut h = Harness::new(
        retry_machine(json!([{"ErrorEquals": ["E"]}]), json!([])),
        json!({}),
    );
    h.start();
    h.fail_task("E", "c");
    let (timer, _) = h.timer();
    h.fire(timer);
    assert_eq!(h.scheduled().len(), 2);
    let step = h.fire(timer);
    assert!(step.events.is_empty() && step.actions.is_empty());
    assert_eq!(h.scheduled().len(), 2);
}
