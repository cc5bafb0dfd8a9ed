use super::*;

fn map_machine(extra: Value, resource: &str) -> Value {
    let mut m = json!({
        "Type": "Map",
        "ItemsPath": "$.items",
        "ItemProcessor": {
            "ProcessorConfig": {"Mode": "INLINE"},
            "StartAt": "Work",
            "States": {"Work": {"Type": "Task", "Resource": resource, "End": true}}
        },
        "End": true
    });
    merge(&mut m, extra);
    let catches = m.get("Catch").is_some();
    let mut def = json!({"StartAt": "M", "States": {"M": m}});
    if catches {
        def["States"]["Caught"] = json!({"Type": "Pass", "End": true});
    }
    def
}

fn pass_map(extra: Value) -> Value {
    let mut m = json!({
        "Type": "Map",
        "ItemProcessor": {
            "StartAt": "P",
            "States": {"P": {"Type": "Pass", "End": true}}
        },
        "End": true
    });
    merge(&mut m, extra);
    single(m)
}

fn items(n: usize) -> Value {
    json!({"items": (0..n).map(|i| json!({"i": i})).collect::<Vec<_>>()})
}

#[test]
fn map_runs_the_processor_on_every_item_of_items_path() {
    let mut h = Harness::new(map_machine(json!({}), ACTIVITY), items(3));
    h.start();
    let inputs: Vec<_> = h.open_tasks().into_iter().map(|t| t.input).collect();
    assert_eq!(inputs, [json!({"i": 0}), json!({"i": 1}), json!({"i": 2})]);
    assert_eq!(h.details("MapStateStarted"), json!({"length": 3}));
    let iterations = h.events_of("MapIterationStarted");
    let detail: Vec<_> = iterations
        .iter()
        .map(|e| e.details.clone().unwrap())
        .collect();
    assert_eq!(
        detail,
        [
            json!({"name": "M", "index": 0}),
            json!({"name": "M", "index": 1}),
            json!({"name": "M", "index": 2})
        ]
    );
}

#[test]
fn map_results_are_in_item_order_whatever_the_finishing_order() {
    let mut h = Harness::new(map_machine(json!({}), ACTIVITY), items(3));
    h.start();
    let tasks = h.open_tasks();
    for i in [2, 0, 1] {
        let t = &tasks[i];
        let out = json!(t.input["i"].as_u64().unwrap() * 10);
        h.succeed_token(t.token.clone(), out);
    }
    assert_eq!(h.output(), json!([0, 10, 20]));
    let types = h.event_types();
    assert_eq!(
        types[types.len() - 4..],
        [
            "MapIterationSucceeded",
            "MapStateSucceeded",
            "MapStateExited",
            "ExecutionSucceeded"
        ]
    );
}

#[test]
fn item_selector_sees_the_item_index_and_value_and_the_state_input() {
    let mut h = Harness::new(
        pass_map(json!({
            "ItemsPath": "$.xs",
            "ItemSelector": {
                "index.$": "$$.Map.Item.Index",
                "value.$": "$$.Map.Item.Value",
                "tag.$": "$.tag"
            }
        })),
        json!({"xs": ["a", "b"], "tag": "t"}),
    );
    h.start();
    assert_eq!(
        h.output(),
        json!([
            {"index": 0, "value": "a", "tag": "t"},
            {"index": 1, "value": "b", "tag": "t"}
        ])
    );
}

#[test]
fn legacy_iterator_and_parameters_work_like_item_processor_and_item_selector() {
    let def = single(json!({
        "Type": "Map",
        "Parameters": {"v.$": "$$.Map.Item.Value"},
        "Iterator": {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": true}}},
        "End": true
    }));
    let mut h = Harness::new(def, json!([1, 2]));
    h.start();
    assert_eq!(h.output(), json!([{"v": 1}, {"v": 2}]));
}

#[test]
fn max_concurrency_one_schedules_one_item_at_a_time() {
    let mut h = Harness::new(
        map_machine(json!({"MaxConcurrency": 1}), ACTIVITY),
        items(3),
    );
    h.start();
    for i in 0..3 {
        let t = h.task();
        assert_eq!(t.input, json!({"i": i}));
        h.succeed_task(json!(i));
    }
    assert_eq!(h.output(), json!([0, 1, 2]));
    assert_eq!(h.events_of("MapIterationStarted").len(), 3);
}

#[test]
fn max_concurrency_two_keeps_two_items_running() {
    let mut h = Harness::new(
        map_machine(json!({"MaxConcurrency": 2}), ACTIVITY),
        items(4),
    );
    h.start();
    assert_eq!(h.open_tasks().len(), 2);
    let second = h.open_tasks()[1].token.clone();
    h.succeed_token(second, json!("b"));
    let open: Vec<_> = h.open_tasks().into_iter().map(|t| t.input).collect();
    assert_eq!(open, [json!({"i": 0}), json!({"i": 2})]);
    for _ in 0..3 {
        let t = h.open_tasks()[0].clone();
        h.succeed_token(t.token, t.input["i"].clone());
    }
    assert_eq!(h.output(), json!([0, "b", 2, 3]));
}

#[test]
fn max_concurrency_path_reads_the_input() {
    let mut h = Harness::new(
        map_machine(json!({"MaxConcurrencyPath": "$.mc"}), ACTIVITY),
        json!({"items": [1, 2, 3], "mc": 2}),
    );
    h.start();
    assert_eq!(h.open_tasks().len(), 2);
}

#[test]
fn empty_array_succeeds_at_once_with_an_empty_result() {
    let mut h = Harness::new(map_machine(json!({}), ACTIVITY), json!({"items": []}));
    h.start();
    assert_eq!(h.output(), json!([]));
    assert_eq!(h.details("MapStateStarted"), json!({"length": 0}));
    assert!(h.scheduled().is_empty());
    assert_eq!(
        h.event_types(),
        [
            "ExecutionStarted",
            "MapStateEntered",
            "MapStateStarted",
            "MapStateSucceeded",
            "MapStateExited",
            "ExecutionSucceeded"
        ]
    );
}

#[test]
fn items_path_to_a_non_array_is_a_runtime_error() {
    let mut h = Harness::new(map_machine(json!({}), ACTIVITY), json!({"items": {"a": 1}}));
    h.start();
    assert_eq!(h.error(), "States.Runtime");
}

#[test]
fn one_failed_iteration_fails_the_map_and_closes_the_others() {
    let mut h = Harness::new(map_machine(json!({}), ACTIVITY), items(3));
    h.start();
    let tasks = h.open_tasks();
    h.fail_token(tasks[1].token.clone(), "ItemError", "bad item");
    assert!(h.open_tasks().is_empty());
    assert_eq!(
        h.failure(),
        (Some("ItemError".into()), Some("bad item".into()))
    );
    let types = h.event_types();
    assert_eq!(
        types[types.len() - 4..],
        [
            "ActivityFailed",
            "MapIterationFailed",
            "MapStateFailed",
            "ExecutionFailed"
        ]
    );
    assert_eq!(
        h.details("MapIterationFailed"),
        json!({"name": "M", "index": 1})
    );
}

#[test]
fn failures_within_the_tolerated_count_let_the_map_succeed() {
    let mut h = Harness::new(
        map_machine(json!({"ToleratedFailureCount": 1}), ACTIVITY),
        items(3),
    );
    h.start();
    let tasks = h.open_tasks();
    h.fail_token(tasks[0].token.clone(), "E", "c");
    h.succeed_token(tasks[1].token.clone(), json!(1));
    h.succeed_token(tasks[2].token.clone(), json!(2));
    let out = h.output();
    assert_eq!(out[1], json!(1));
    assert_eq!(out[2], json!(2));
}

#[test]
fn failures_beyond_the_tolerated_count_fail_the_map() {
    let mut h = Harness::new(
        map_machine(json!({"ToleratedFailureCount": 1}), ACTIVITY),
        items(3),
    );
    h.start();
    let tasks = h.open_tasks();
    h.fail_token(tasks[0].token.clone(), "E", "c");
    assert_eq!(h.status(), ExecutionStatus::Running);
    h.fail_token(tasks[2].token.clone(), "E", "c");
    assert_eq!(h.error(), "States.ExceedToleratedFailureThreshold");
    assert!(h.open_tasks().is_empty());
}

#[test]
fn tolerated_failure_percentage_is_checked_against_the_item_count() {
    // 2 of 4 = 50 % is tolerated, 3 of 4 is not.
    let mut h = Harness::new(
        map_machine(json!({"ToleratedFailurePercentage": 50}), ACTIVITY),
        items(4),
    );
    h.start();
    let tasks = h.open_tasks();
    h.fail_token(tasks[0].token.clone(), "E", "c");
    h.fail_token(tasks[1].token.clone(), "E", "c");
    assert_eq!(h.status(), ExecutionStatus::Running);
    h.fail_token(tasks[2].token.clone(), "E", "c");
    assert_eq!(h.error(), "States.ExceedToleratedFailureThreshold");

    let mut h = Harness::new(
        map_machine(json!({"ToleratedFailurePercentage": 50}), ACTIVITY),
        items(4),
    );
    h.start();
    let tasks = h.open_tasks();
    h.fail_token(tasks[0].token.clone(), "E", "c");
    h.fail_token(tasks[1].token.clone(), "E", "c");
    h.succeed_token(tasks[2].token.clone(), json!(2));
    h.succeed_token(tasks[3].token.clone(), json!(3));
    assert_eq!(h.output()[3], json!(3));
}

#[test]
fn map_failure_can_be_caught() {
    let mut h = Harness::new(
        map_machine(
            json!({"Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.e", "Next": "Caught"}]}),
            ACTIVITY,
        ),
        items(2),
    );
    h.start();
    let t = h.open_tasks()[0].token.clone();
    h.fail_token(t, "E", "c");
    assert_eq!(h.output()["e"], json!({"Error": "E", "Cause": "c"}));
}

#[test]
fn map_result_selector_and_result_path_apply_to_the_array() {
    let mut h = Harness::new(
        pass_map(json!({
            "ItemsPath": "$.xs",
            "ResultSelector": {"n.$": "States.ArrayLength($)"},
            "ResultPath": "$.count"
        })),
        json!({"xs": [1, 2, 3]}),
    );
    h.start();
    assert_eq!(h.output(), json!({"xs": [1, 2, 3], "count": {"n": 3}}));
}

#[test]
fn a_long_all_pass_map_finishes_in_one_step() {
    let xs: Vec<u32> = (0..2000).collect();
    let mut h = Harness::new(pass_map(json!({})), json!(xs));
    h.start();
    assert_eq!(h.output(), json!(xs));
    let ids: Vec<u64> = h.events.iter().map(|e| e.id).collect();
    assert_eq!(ids, (1..=h.events.len() as u64).collect::<Vec<_>>());
}

#[test]
fn iteration_events_chain_from_map_state_started() {
    let mut h = Harness::new(map_machine(json!({}), ACTIVITY), items(2));
    h.start();
    let started = h.events_of("MapStateStarted")[0].id;
    for e in h.events_of("MapIterationStarted") {
        assert_eq!(e.previous_event_id, started);
    }
}

#[test]
fn a_tolerated_failure_lets_the_next_item_start() {
    let mut h = Harness::new(
        map_machine(
            json!({"MaxConcurrency": 1, "ToleratedFailureCount": 1}),
            ACTIVITY,
        ),
        items(3),
    );
    h.start();
    h.fail_task("E", "c");
    assert_eq!(h.task().input, json!({"i": 1}));
    h.succeed_task(json!(1));
    h.succeed_task(json!(2));
    assert_eq!(h.output().as_array().unwrap()[1..], [json!(1), json!(2)]);
}

#[test]
fn items_not_started_yet_are_never_scheduled_after_a_failure() {
    let mut h = Harness::new(
        map_machine(json!({"MaxConcurrency": 1}), ACTIVITY),
        items(3),
    );
    h.start();
    h.fail_task("E", "c");
    assert_eq!(h.error(), "E");
    assert_eq!(h.scheduled().len(), 1);
    assert_eq!(h.events_of("MapIterationStarted").len(), 1);
}

#[test]
fn map_retry_runs_every_item_again_and_ignores_the_first_run() {
    let mut h = Harness::new(
        map_machine(
            json!({"Retry": [{"ErrorEquals": ["E"], "MaxAttempts": 1}]}),
            ACTIVITY,
        ),
        items(2),
    );
    h.start();
    let first = h.open_tasks();
    h.fail_token(first[0].token.clone(), "E", "c");
    assert!(h.open_tasks().is_empty());
    h.fire_timer();
    assert_eq!(h.open_tasks().len(), 2);
    assert_eq!(h.details("MapStateStarted"), json!({"length": 2}));
    assert_eq!(h.events_of("MapStateStarted").len(), 2);
    // An answer for the abandoned first run is stale.
    let n = h.events.len();
    h.succeed_token(first[1].token.clone(), json!("stale"));
    assert_eq!(h.events.len(), n);
    for t in h.open_tasks() {
        h.succeed_token(t.token, t.input["i"].clone());
    }
    assert_eq!(h.output(), json!([0, 1]));
}

#[test]
fn nested_map_items_see_their_own_index() {
    let def = single(json!({
        "Type": "Map",
        "ItemSelector": {"outer.$": "$$.Map.Item.Index", "xs.$": "$$.Map.Item.Value"},
        "ItemProcessor": {
            "StartAt": "Inner",
            "States": {"Inner": {
                "Type": "Map",
                "ItemsPath": "$.xs",
                "ItemSelector": {"outer.$": "$.outer", "inner.$": "$$.Map.Item.Index"},
                "ItemProcessor": {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": true}}},
                "End": true
            }}
        },
        "End": true
    }));
    let mut h = Harness::new(def, json!([["a", "b"], ["c"]]));
    h.start();
    assert_eq!(
        h.output(),
        json!([
            [{"outer": 0, "inner": 0}, {"outer": 0, "inner": 1}],
            [{"outer": 1, "inner": 0}]
        ])
    );
}

#[test]
fn a_failure_deep_inside_closes_every_nested_task() {
    let def = single(json!({
        "Type": "Map",
        "ItemProcessor": {
            "StartAt": "Par",
            "States": {"Par": {
                "Type": "Parallel",
                "Branches": [
                    {"StartAt": "X", "States": {"X": {"Type": "Task", "Resource": ACTIVITY, "End": true}}},
                    {"StartAt": "Y", "States": {"Y": {"Type": "Task", "Resource": ACTIVITY, "End": true}}}
                ],
                "End": true
            }}
        },
        "End": true
    }));
    let mut h = Harness::new(def, json!([1, 2]));
    h.start();
    assert_eq!(h.open_tasks().len(), 4);
    let victim = h.open_tasks()[3].token.clone();
    h.fail_token(victim, "E", "c");
    assert!(h.open_tasks().is_empty(), "{:?}", h.open_tasks());
    assert_eq!(h.error(), "E");
    assert!(h.state.frames.is_empty());
}

#[test]
fn exceeding_either_tolerated_threshold_fails_the_map() {
    // 1 failure of 4 is within the count (5) but above the percentage (10 %).
    let mut h = Harness::new(
        map_machine(
            json!({"ToleratedFailureCount": 5, "ToleratedFailurePercentage": 10}),
            ACTIVITY,
        ),
        items(4),
    );
    h.start();
    let t = h.open_tasks()[0].token.clone();
    h.fail_token(t, "E", "c");
    assert_eq!(h.error(), "States.ExceedToleratedFailureThreshold");
}
