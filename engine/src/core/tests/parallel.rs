use super::*;

fn branch(name: &str, resource: &str) -> Value {
    json!({"StartAt": name, "States": {name: {"Type": "Task", "Resource": resource, "End": true}}})
}

fn parallel_machine(extra: Value) -> Value {
    let mut p = json!({
        "Type": "Parallel",
        "Branches": [branch("B0", ACTIVITY), branch("B1", ACTIVITY), branch("B2", ACTIVITY)],
        "End": true
    });
    merge(&mut p, extra);
    let catches = p.get("Catch").is_some();
    let mut def = json!({"StartAt": "P", "States": {"P": p}});
    if catches {
        def["States"]["Caught"] = json!({"Type": "Pass", "End": true});
    }
    def
}

#[test]
fn parallel_runs_every_branch_on_the_same_input() {
    let mut h = Harness::new(parallel_machine(json!({})), json!({"x": 1}));
    h.start();
    let open = h.open_tasks();
    let names: Vec<_> = open.iter().map(|t| t.state_name.as_str()).collect();
    assert_eq!(names, ["B0", "B1", "B2"]);
    assert!(open.iter().all(|t| t.input == json!({"x": 1})));
    assert_eq!(
        h.event_types()[..3],
        [
            "ExecutionStarted",
            "ParallelStateEntered",
            "ParallelStateStarted"
        ]
    );
}

#[test]
fn parallel_results_are_in_branch_order_whatever_the_finishing_order() {
    let mut h = Harness::new(parallel_machine(json!({})), json!({}));
    h.start();
    for name in ["B2", "B0", "B1"] {
        let token = h.task_of(name).token;
        h.succeed_token(token, json!(name));
        if name != "B1" {
            assert_eq!(h.status(), ExecutionStatus::Running);
        }
    }
    assert_eq!(h.output(), json!(["B0", "B1", "B2"]));
    let types = h.event_types();
    assert_eq!(
        types[types.len() - 3..],
        [
            "ParallelStateSucceeded",
            "ParallelStateExited",
            "ExecutionSucceeded"
        ]
    );
}

#[test]
fn parallel_applies_parameters_result_selector_and_result_path() {
    let def = json!({
        "StartAt": "P",
        "States": {"P": {
            "Type": "Parallel",
            "Parameters": {"v.$": "$.v"},
            "ResultSelector": {"first.$": "$[0]", "second.$": "$[1].v"},
            "ResultPath": "$.out",
            "Branches": [
                {"StartAt": "A", "States": {"A": {"Type": "Pass", "Result": "a", "End": true}}},
                {"StartAt": "B", "States": {"B": {"Type": "Pass", "End": true}}}
            ],
            "End": true
        }}
    });
    let mut h = Harness::new(def, json!({"v": 5, "w": 6}));
    h.start();
    assert_eq!(
        h.output(),
        json!({"v": 5, "w": 6, "out": {"first": "a", "second": 5}})
    );
}

#[test]
fn failing_branch_fails_the_state_and_closes_sibling_tasks() {
    let mut h = Harness::new(parallel_machine(json!({})), json!({}));
    h.start();
    let t0 = h.task_of("B0").token;
    let t2 = h.task_of("B2").token;
    let t1 = h.task_of("B1").token;
    h.fail_token(t1, "Broken", "branch 1");
    assert!(h.last.actions.contains(&Action::CloseTask { token: t0 }));
    assert!(h.last.actions.contains(&Action::CloseTask { token: t2 }));
    assert!(h.open_tasks().is_empty());
    assert_eq!(
        h.failure(),
        (Some("Broken".into()), Some("branch 1".into()))
    );
    let types = h.event_types();
    assert_eq!(
        types[types.len() - 3..],
        ["ActivityFailed", "ParallelStateFailed", "ExecutionFailed"]
    );
}

#[test]
fn failing_branch_can_be_caught_on_the_parallel_state() {
    let mut h = Harness::new(
        parallel_machine(json!({
            "Catch": [{"ErrorEquals": ["Broken"], "ResultPath": "$.err", "Next": "Caught"}]
        })),
        json!({"in": 1}),
    );
    h.start();
    let t1 = h.task_of("B1").token;
    h.fail_token(t1, "Broken", "c");
    assert!(h.open_tasks().is_empty());
    assert_eq!(
        h.output(),
        json!({"in": 1, "err": {"Error": "Broken", "Cause": "c"}})
    );
    assert!(h.event_types().contains(&"ParallelStateExited"));
}

#[test]
fn answers_to_abandoned_branches_are_ignored() {
    let mut h = Harness::new(
        parallel_machine(json!({
            "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "Caught"}]
        })),
        json!({}),
    );
    h.start();
    let t0 = h.task_of("B0").token;
    let t1 = h.task_of("B1").token;
    h.fail_token(t1, "E", "c");
    let n = h.events.len();
    h.succeed_token(t0, json!("late"));
    assert!(h.last.events.is_empty() && h.last.actions.is_empty());
    assert_eq!(h.events.len(), n);
}

#[test]
fn all_pass_branches_complete_in_one_step() {
    let def = json!({
        "StartAt": "P",
        "States": {"P": {
            "Type": "Parallel",
            "Branches": [
                {"StartAt": "A", "States": {"A": {"Type": "Pass", "Result": 1, "End": true}}},
                {"StartAt": "B", "States": {"B": {"Type": "Pass", "Result": 2, "End": true}}}
            ],
            "End": true
        }}
    });
    let mut h = Harness::new(def, json!({}));
    h.start();
    assert_eq!(h.output(), json!([1, 2]));
}

#[test]
fn branch_events_chain_from_parallel_state_started() {
    let mut h = Harness::new(parallel_machine(json!({})), json!({}));
    h.start();
    let started = h.events_of("ParallelStateStarted")[0].id;
    let entered = h.events_of("TaskStateEntered");
    assert_eq!(entered.len(), 3);
    assert!(entered.iter().all(|e| e.previous_event_id == started));
    // Each branch's ActivityScheduled follows its own TaskStateEntered.
    let scheduled = h.events_of("ActivityScheduled");
    for (e, s) in entered.iter().zip(&scheduled) {
        assert_eq!(s.previous_event_id, e.id);
    }
}

#[test]
fn a_branch_failing_at_once_closes_a_task_scheduled_in_the_same_step() {
    let def = json!({
        "StartAt": "P",
        "States": {"P": {
            "Type": "Parallel",
            "Branches": [
                {"StartAt": "T", "States": {"T": {"Type": "Task", "Resource": ACTIVITY, "End": true}}},
                {"StartAt": "F", "States": {"F": {"Type": "Fail", "Error": "Nope"}}}
            ],
            "End": true
        }}
    });
    let mut h = Harness::new(def, json!({}));
    h.start();
    assert_eq!(h.error(), "Nope");
    assert_eq!(h.scheduled().len(), 1);
    assert!(h.open_tasks().is_empty());
}

#[test]
fn a_caught_parallel_can_be_entered_again() {
    // The catcher loops back to the Parallel state itself; the second run must start fresh.
    let def = json!({
        "StartAt": "P",
        "States": {
            "P": {
                "Type": "Parallel",
                "Branches": [
                    {"StartAt": "T", "States": {"T": {"Type": "Task", "Resource": ACTIVITY, "End": true}}},
                    {"StartAt": "U", "States": {"U": {"Type": "Task", "Resource": ACTIVITY, "End": true}}}
                ],
                "Catch": [{"ErrorEquals": ["Again"], "ResultPath": null, "Next": "P"}],
                "End": true
            }
        }
    });
    let mut h = Harness::new(def, json!({}));
    h.start();
    let t = h.task_of("T").token;
    h.fail_token(t, "Again", "c");
    assert_eq!(h.open_tasks().len(), 2);
    assert_eq!(h.events_of("ParallelStateEntered").len(), 2);
    let t = h.task_of("T").token;
    let u = h.task_of("U").token;
    h.succeed_token(u, json!("u"));
    h.succeed_token(t, json!("t"));
    assert_eq!(h.output(), json!(["t", "u"]));
}
