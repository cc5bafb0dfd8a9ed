use super::*;

/// `A` (Pass) → `T` (activity Task, one retry) → `B` (Pass).
fn pass_task_pass() -> Value {
    json!({
        "StartAt": "A",
        "States": {
            "A": {"Type": "Pass", "Result": {"from": "A"}, "ResultPath": "$.a", "Next": "T"},
            "T": {
                "Type": "Task", "Resource": ACTIVITY, "ResultPath": "$.t", "Next": "B",
                "Retry": [{"ErrorEquals": ["Boom"], "IntervalSeconds": 1, "MaxAttempts": 1}]
            },
            "B": {"Type": "Pass", "End": true}
        }
    })
}

/// Fails `T` twice (its one retry used up): the execution fails.
fn failed_at_t(roundtrip: bool) -> Harness {
    let mut h = Harness::new(pass_task_pass(), json!({"n": 1}));
    h.roundtrip = roundtrip;
    h.start();
    h.fail_task("Boom", "first");
    h.fire_timer();
    h.fail_task("Boom", "second");
    assert_eq!(h.error(), "Boom");
    h
}

#[test]
fn a_failed_task_is_entered_again_with_its_input_and_the_states_before_it_are_not_rerun() {
    for roundtrip in [false, true] {
        let mut h = failed_at_t(roundtrip);
        let failed_at = h.events.len();
        h.advance(60);
        h.redrive();
        assert_eq!(h.status(), ExecutionStatus::Running);
        let after: Vec<&str> = h.event_types()[failed_at..].to_vec();
        assert_eq!(
            after,
            ["ExecutionRedriven", "TaskStateEntered", "ActivityScheduled"]
        );
        assert_eq!(
            h.details("ExecutionRedriven"),
            json!({"redriveCount": 1}),
            "roundtrip {roundtrip}"
        );
        let entered = h.events_of("TaskStateEntered");
        assert_eq!(entered.len(), 2);
        assert_eq!(entered[1].details, entered[0].details, "the same input");
        assert_eq!(h.task().input, json!({"n": 1, "a": {"from": "A"}}));
        h.succeed_task(json!("ok"));
        assert_eq!(h.output(), json!({"n": 1, "a": {"from": "A"}, "t": "ok"}));
        assert_eq!(h.events_of("PassStateEntered").len(), 2, "A once, B once");
    }
}

#[test]
fn history_ids_go_on_and_the_redriven_state_follows_execution_redriven() {
    let mut h = failed_at_t(false);
    let last = h.events.last().unwrap().id;
    h.redrive();
    let redriven = h.events_of("ExecutionRedriven")[0].clone();
    assert_eq!(redriven.id, last + 1);
    assert_eq!(redriven.previous_event_id, last);
    let entered = h.events_of("TaskStateEntered")[1].clone();
    assert_eq!(entered.id, last + 2);
    assert_eq!(entered.previous_event_id, redriven.id);
    let ids: Vec<u64> = h.events.iter().map(|e| e.id).collect();
    assert_eq!(ids, (1..=h.events.len() as u64).collect::<Vec<_>>());
}

#[test]
fn the_redriven_state_gets_its_retries_again() {
    let mut h = failed_at_t(false);
    h.redrive();
    h.fail_task("Boom", "third");
    assert_eq!(h.status(), ExecutionStatus::Running, "retried, not failed");
    assert_eq!(h.pending_timers().len(), 1);
    h.fire_timer();
    h.fail_task("Boom", "fourth");
    assert_eq!(h.failure().1.as_deref(), Some("fourth"));
}

#[test]
fn a_second_redrive_counts_two() {
    let mut h = failed_at_t(false);
    h.redrive();
    h.fail_task("Boom", "third");
    h.fire_timer();
    h.fail_task("Boom", "fourth");
    h.redrive();
    let counts: Vec<Value> = h
        .events_of("ExecutionRedriven")
        .iter()
        .map(|e| e.details.clone().unwrap()["redriveCount"].clone())
        .collect();
    assert_eq!(counts, [json!(1), json!(2)]);
    assert_eq!(h.state.redrive_count, 2);
}

#[test]
fn the_context_object_shows_the_redrive_count_and_time() {
    let def = task_machine(
        ACTIVITY,
        json!({"Parameters": {"execution.$": "$$.Execution"}}),
    );
    let mut h = Harness::new(def, json!({}));
    h.start();
    let first = h.task().input["execution"].clone();
    assert_eq!(first["RedriveCount"], json!(0));
    assert!(first.get("RedriveTime").is_none(), "{first}");
    h.fail_task("E", "c");
    h.advance(90);
    h.redrive();
    let second = h.task().input["execution"].clone();
    assert_eq!(second["RedriveCount"], json!(1));
    assert_eq!(second["RedriveTime"], json!("2024-01-01T00:01:30.000Z"));
}

#[test]
fn an_execution_that_failed_in_a_fail_state_fails_there_again() {
    let def = json!({
        "StartAt": "A",
        "States": {
            "A": {"Type": "Pass", "Next": "F"},
            "F": {"Type": "Fail", "Error": "Nope", "Cause": "always"}
        }
    });
    let mut h = Harness::new(def, json!({}));
    h.start();
    assert_eq!(h.error(), "Nope");
    let before = h.events.len();
    h.redrive();
    assert_eq!(
        h.event_types()[before..],
        ["ExecutionRedriven", "FailStateEntered", "ExecutionFailed"]
    );
    assert_eq!(h.error(), "Nope");
    assert!(!h.state.resume.is_empty(), "it can be redriven again");
}

#[test]
fn a_parallel_state_reruns_only_its_failed_and_aborted_branches() {
    let branch = |name: &str| json!({"StartAt": name, "States": {name: {"Type": "Task", "Resource": ACTIVITY, "End": true}}});
    let def = json!({
        "StartAt": "P",
        "States": {"P": {
            "Type": "Parallel", "Branches": [branch("B0"), branch("B1"), branch("B2")],
            "End": true
        }}
    });
    let mut h = Harness::new(def, json!({}));
    h.roundtrip = true;
    h.start();
    let b0 = h.task_of("B0").token;
    h.succeed_token(b0, json!("zero"));
    let b1 = h.task_of("B1").token;
    h.fail_token(b1, "E", "c");
    assert_eq!(h.error(), "E");
    assert!(h.open_tasks().is_empty(), "B2 was aborted");
    h.redrive();
    let mut names: Vec<String> = h.open_tasks().into_iter().map(|t| t.state_name).collect();
    names.sort();
    assert_eq!(names, ["B1", "B2"], "B0 is not run again");
    for name in ["B2", "B1"] {
        let token = h.task_of(name).token;
        h.succeed_token(token, json!(name));
    }
    assert_eq!(h.output(), json!(["zero", "B1", "B2"]));
    assert_eq!(h.events_of("ParallelStateEntered").len(), 1);
}

/// A Map (with `extra` fields) whose iterations are one activity Task each.
fn map_of_tasks(extra: Value) -> Value {
    let mut map = json!({
        "Type": "Map", "End": true,
        "ItemProcessor": {"StartAt": "W", "States": {
            "W": {"Type": "Task", "Resource": ACTIVITY, "End": true}
        }}
    });
    merge(&mut map, extra);
    json!({"StartAt": "M", "States": {"M": map}})
}

#[test]
fn a_map_reruns_its_failed_iteration_then_starts_those_it_had_not_started() {
    let mut h = Harness::new(
        map_of_tasks(json!({"MaxConcurrency": 1})),
        json!([10, 20, 30]),
    );
    h.start();
    h.succeed_task(json!(1));
    assert_eq!(h.task().input, json!(20));
    h.fail_task("E", "c");
    assert_eq!(h.error(), "E");
    h.redrive();
    assert_eq!(h.task().input, json!(20), "the failed item, once more");
    h.succeed_task(json!(2));
    assert_eq!(h.task().input, json!(30), "then the item never started");
    h.succeed_task(json!(3));
    assert_eq!(h.output(), json!([1, 2, 3]));
    assert_eq!(h.events_of("MapIterationStarted").len(), 3);
}

#[test]
fn a_stopped_or_timed_out_execution_reschedules_the_task_it_was_waiting_on() {
    for event in [
        Event::Stop {
            error: Some("Stopped".into()),
            cause: None,
        },
        Event::ExecutionTimedOut,
    ] {
        let mut h = Harness::new(pass_task_pass(), json!({}));
        h.start();
        let old = h.token();
        h.apply(event.clone());
        assert!(h.open_tasks().is_empty(), "{event:?}");
        h.redrive();
        assert_ne!(h.token(), old, "a new token");
        h.succeed_task(json!(1));
        assert_eq!(h.output()["t"], json!(1), "{event:?}");
    }
}

#[test]
fn a_waiting_execution_stopped_during_its_wait_waits_again() {
    let def = json!({
        "StartAt": "W",
        "States": {"W": {"Type": "Wait", "Seconds": 30, "End": true}}
    });
    let mut h = Harness::new(def, json!({}));
    h.start();
    h.apply(Event::Stop {
        error: None,
        cause: None,
    });
    assert!(h.pending_timers().is_empty());
    h.redrive();
    let (_, due) = h.timer();
    assert_eq!(due, h.now + TimeDelta::seconds(30));
    h.fire_timer();
    assert_eq!(h.output(), json!({}));
}

#[test]
fn a_redrive_changes_nothing_in_a_running_or_succeeded_execution() {
    let mut h = Harness::new(pass_task_pass(), json!({}));
    h.start();
    let before = h.events.len();
    h.apply(Event::Redrive);
    assert_eq!(h.events.len(), before);
    h.succeed_task(json!(1));
    let done = h.events.len();
    h.apply(Event::Redrive);
    assert_eq!(h.events.len(), done);
    assert!(h.state.resume.is_empty());
}

#[test]
fn a_caught_failure_keeps_no_redrive_point_of_its_own() {
    let def = json!({
        "StartAt": "T",
        "States": {
            "T": {"Type": "Task", "Resource": ACTIVITY, "Next": "U",
                  "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "U"}]},
            "U": {"Type": "Task", "Resource": ACTIVITY, "End": true}
        }
    });
    let mut h = Harness::new(def, json!({}));
    h.start();
    h.fail_task("Caught", "c");
    h.fail_task("Uncaught", "c");
    assert_eq!(h.error(), "Uncaught");
    let resume: Vec<&str> = h.state.resume.values().map(|f| f.state.as_str()).collect();
    assert_eq!(resume, ["U"]);
}

#[test]
fn a_map_past_its_tolerance_reruns_the_iteration_that_broke_it_and_those_it_abandoned() {
    let def = map_of_tasks(json!({"ToleratedFailureCount": 1}));
    let mut h = Harness::new(def, json!([10, 20, 30, 40]));
    h.start();
    let token_of = |h: &Harness, item: i64| {
        h.open_tasks()
            .into_iter()
            .find(|t| t.input == json!(item))
            .unwrap()
            .token
    };
    let first = token_of(&h, 10);
    h.fail_token(first, "E", "tolerated");
    let second = token_of(&h, 20);
    h.fail_token(second, "E", "one too many");
    assert_eq!(h.error(), "States.ExceedToleratedFailureThreshold");
    h.redrive();
    let mut inputs: Vec<Value> = h.open_tasks().into_iter().map(|t| t.input).collect();
    inputs.sort_by_key(|v| v.as_i64());
    assert_eq!(inputs, [json!(20), json!(30), json!(40)]);
    for item in [20, 30, 40] {
        let token = token_of(&h, item);
        h.succeed_token(token, json!(item));
    }
    assert_eq!(
        h.output(),
        json!([{"Error": "E", "Cause": "tolerated"}, 20, 30, 40]),
        "the tolerated failure stays as it was"
    );
}
