use super::*;

#[test]
fn assign_is_visible_to_the_next_state_not_the_same_one() {
    let def = json!({
        "StartAt": "A",
        "States": {
            "A": {"Type": "Pass", "Assign": {"x": 1}, "Next": "B"},
            "B": {
                "Type": "Pass",
                "Parameters": {"seen.$": "$x"},
                "Assign": {"x": 2, "old.$": "$x"},
                "Next": "C"
            },
            "C": {"Type": "Pass", "Parameters": {"x.$": "$x", "old.$": "$old", "prev.$": "$"}, "End": true}
        }
    });
    let mut h = Harness::new(def, json!({}));
    h.start();
    assert_eq!(h.output(), json!({"x": 2, "old": 1, "prev": {"seen": 1}}));
    let exited = h.events_of("PassStateExited");
    assert_eq!(
        exited[0].details.as_ref().unwrap()["assignedVariables"],
        json!({"x": "1"})
    );
}

#[test]
fn assign_reads_the_state_result() {
    let def = json!({
        "StartAt": "T",
        "States": {
            "T": {
                "Type": "Task",
                "Resource": ACTIVITY,
                "Assign": {"got.$": "$.value"},
                "ResultPath": null,
                "Next": "Use"
            },
            "Use": {"Type": "Pass", "Parameters": {"got.$": "$got"}, "End": true}
        }
    });
    let mut h = Harness::new(def, json!({"value": "input"}));
    h.start();
    h.succeed_task(json!({"value": "result"}));
    assert_eq!(h.output(), json!({"got": "result"}));
}

#[test]
fn choice_rule_assign_applies_on_that_branch() {
    let def = json!({
        "StartAt": "C",
        "States": {
            "C": {
                "Type": "Choice",
                "Choices": [{"Variable": "$.n", "NumericEquals": 1, "Assign": {"which": "one"}, "Next": "Out"}],
                "Default": "Out",
                "Assign": {"which": "default"}
            },
            "Out": {"Type": "Pass", "Parameters": {"which.$": "$which"}, "End": true}
        }
    });
    let mut h = Harness::new(def.clone(), json!({"n": 1}));
    h.start();
    assert_eq!(h.output(), json!({"which": "one"}));
    let mut h = Harness::new(def, json!({"n": 2}));
    h.start();
    assert_eq!(h.output(), json!({"which": "default"}));
}

#[test]
fn map_iterations_see_outer_variables() {
    let def = json!({
        "StartAt": "Set",
        "States": {
            "Set": {"Type": "Pass", "Assign": {"factor": 10}, "Next": "M"},
            "M": {
                "Type": "Map",
                "ItemProcessor": {
                    "StartAt": "P",
                    "States": {"P": {"Type": "Pass", "Parameters": {"f.$": "$factor", "v.$": "$"}, "End": true}}
                },
                "End": true
            }
        }
    });
    let mut h = Harness::new(def, json!([1, 2]));
    h.start();
    assert_eq!(h.output(), json!([{"f": 10, "v": 1}, {"f": 10, "v": 2}]));
}

#[test]
fn parallel_branches_see_outer_variables() {
    let def = json!({
        "StartAt": "Set",
        "States": {
            "Set": {"Type": "Pass", "Assign": {"k": "outer"}, "Next": "P"},
            "P": {
                "Type": "Parallel",
                "Branches": [
                    {"StartAt": "A", "States": {"A": {"Type": "Pass", "Parameters": {"k.$": "$k"}, "End": true}}}
                ],
                "End": true
            }
        }
    });
    let mut h = Harness::new(def, json!({}));
    h.start();
    assert_eq!(h.output(), json!([{"k": "outer"}]));
}

#[test]
fn assignments_inside_a_branch_do_not_leak_out() {
    let def = json!({
        "StartAt": "Set",
        "States": {
            "Set": {"Type": "Pass", "Assign": {"outer": 1}, "Next": "P"},
            "P": {
                "Type": "Parallel",
                "Branches": [
                    {"StartAt": "A", "States": {
                        "A": {"Type": "Pass", "Assign": {"inner": 2}, "Next": "B"},
                        "B": {"Type": "Pass", "Parameters": {"inner.$": "$inner"}, "End": true}
                    }}
                ],
                "Next": "Hold"
            },
            "Hold": {"Type": "Task", "Resource": ACTIVITY, "End": true}
        }
    });
    let mut h = Harness::new(def, json!({}));
    h.start();
    assert_eq!(h.task().input, json!([{"inner": 2}]));
    let root = &h.state.frames[&0];
    assert_eq!(root.variables.get("outer"), Some(&json!(1)));
    assert!(
        !root.variables.contains_key("inner"),
        "{:?}",
        root.variables
    );
}

#[test]
fn map_iterations_do_not_share_assignments() {
    let def = json!({
        "StartAt": "M",
        "States": {
            "M": {
                "Type": "Map",
                "ItemProcessor": {
                    "StartAt": "A",
                    "States": {
                        "A": {"Type": "Pass", "Assign": {"mine.$": "$"}, "Next": "T"},
                        "T": {"Type": "Task", "Resource": ACTIVITY, "Parameters": {"mine.$": "$mine"}, "End": true}
                    }
                },
                "End": true
            }
        }
    });
    let mut h = Harness::new(def, json!(["a", "b"]));
    h.start();
    let inputs: Vec<_> = h.open_tasks().into_iter().map(|t| t.input).collect();
    assert_eq!(inputs, [json!({"mine": "a"}), json!({"mine": "b"})]);
}

#[test]
fn variables_survive_a_wait() {
    let def = json!({
        "StartAt": "A",
        "States": {
            "A": {"Type": "Pass", "Assign": {"x": "kept"}, "Next": "W"},
            "W": {"Type": "Wait", "Seconds": 10, "Next": "B"},
            "B": {"Type": "Pass", "Parameters": {"x.$": "$x"}, "End": true}
        }
    });
    let mut h = Harness::new(def, json!({}));
    h.roundtrip = true;
    h.start();
    h.fire_timer();
    assert_eq!(h.output(), json!({"x": "kept"}));
}

#[test]
fn variables_are_kept_across_a_retry() {
    let def = json!({
        "StartAt": "A",
        "States": {
            "A": {"Type": "Pass", "Assign": {"v": "x"}, "Next": "T"},
            "T": {
                "Type": "Task",
                "Resource": ACTIVITY,
                "Parameters": {"v.$": "$v"},
                "Retry": [{"ErrorEquals": ["E"]}],
                "End": true
            }
        }
    });
    let mut h = Harness::new(def, json!({}));
    h.roundtrip = true;
    h.start();
    h.fail_task("E", "c");
    h.fire_timer();
    assert_eq!(h.task().input, json!({"v": "x"}));
}
