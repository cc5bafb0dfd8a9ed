//! Invariants over generated machines.

use super::*;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Linear {
    Pass { value: i64, result_path: usize },
    Choice,
}

const RESULT_PATHS: [Option<&str>; 4] = [Some("$"), Some("$.a"), Some("$.b.c"), None];

fn linear_state() -> impl Strategy<Value = Linear> {
    prop_oneof![
        (any::<i64>(), 0..RESULT_PATHS.len())
            .prop_map(|(value, result_path)| Linear::Pass { value, result_path }),
        Just(Linear::Choice),
    ]
}

fn name(i: usize) -> String {
    format!("S{i}")
}

/// A chain S0 → S1 → … → Done, and the output it must produce from `{}`.
fn linear_machine(states: &[Linear]) -> (Value, Value) {
    let mut map = serde_json::Map::new();
    let mut expected = json!({});
    for (i, s) in states.iter().enumerate() {
        let next = if i + 1 == states.len() {
            "Done".to_owned()
        } else {
            name(i + 1)
        };
        let state = match s {
            Linear::Pass { value, result_path } => {
                let result = json!({"k": value});
                match RESULT_PATHS[*result_path] {
                    Some("$") => expected = result.clone(),
                    Some("$.a") => expected["a"] = result.clone(),
                    Some("$.b.c") => {
                        if !expected["b"].is_object() {
                            expected["b"] = json!({});
                        }
                        expected["b"]["c"] = result.clone();
                    }
                    _ => {}
                }
                json!({
                    "Type": "Pass",
                    "Result": result,
                    "ResultPath": RESULT_PATHS[*result_path],
                    "Next": next
                })
            }
            Linear::Choice => json!({
                "Type": "Choice",
                "Choices": [{"Not": {"Variable": "$.zzz", "IsPresent": true}, "Next": next}],
                "Default": next
            }),
        };
        map.insert(name(i), state);
    }
    map.insert("Done".to_owned(), json!({"Type": "Succeed"}));
    (json!({"StartAt": "S0", "States": map}), expected)
}

#[derive(Debug, Clone)]
enum Durable {
    Task { activity: bool, retry: bool },
    Wait(u64),
    Parallel,
    Map { items: usize, max_concurrency: u64 },
    Pass(i64),
}

fn durable_state() -> impl Strategy<Value = Durable> {
    prop_oneof![
        3 => (any::<bool>(), any::<bool>())
            .prop_map(|(activity, retry)| Durable::Task { activity, retry }),
        1 => (0u64..5).prop_map(Durable::Wait),
        1 => Just(Durable::Parallel),
        1 => (0usize..4, 0u64..3)
            .prop_map(|(items, max_concurrency)| Durable::Map { items, max_concurrency }),
        1 => any::<i64>().prop_map(Durable::Pass),
    ]
}

fn durable_machine(states: &[Durable]) -> Value {
    let mut map = serde_json::Map::new();
    for (i, s) in states.iter().enumerate() {
        let next = if i + 1 == states.len() {
            "Done".to_owned()
        } else {
            name(i + 1)
        };
        let state = match s {
            Durable::Task { activity, retry } => {
                let mut t = json!({
                    "Type": "Task",
                    "Resource": if *activity { ACTIVITY } else { SERVICE },
                    "ResultPath": format!("$.r{i}"),
                    "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": format!("$.e{i}"), "Next": next}],
                    "Next": next
                });
                if *retry {
                    t["Retry"] =
                        json!([{"ErrorEquals": ["E"], "MaxAttempts": 2, "IntervalSeconds": 3}]);
                }
                t
            }
            Durable::Wait(seconds) => json!({"Type": "Wait", "Seconds": seconds, "Next": next}),
            Durable::Parallel => json!({
                "Type": "Parallel",
                "ResultPath": format!("$.p{i}"),
                "Branches": [
                    {"StartAt": format!("{i}A"), "States": {format!("{i}A"): {"Type": "Task", "Resource": ACTIVITY, "End": true}}},
                    {"StartAt": format!("{i}B"), "States": {format!("{i}B"): {"Type": "Task", "Resource": SERVICE, "End": true}}}
                ],
                "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": null, "Next": next}],
                "Next": next
            }),
            Durable::Map {
                items,
                max_concurrency,
            } => json!({
                "Type": "Map",
                "ItemsPath": format!("$.lists[{items}]"),
                "Parameters": {"i.$": "$$.Map.Item.Index"},
                "MaxConcurrency": max_concurrency,
                "Iterator": {
                    "StartAt": format!("{i}M"),
                    "States": {format!("{i}M"): {"Type": "Task", "Resource": ACTIVITY, "End": true}}
                },
                "ResultPath": format!("$.m{i}"),
                "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": null, "Next": next}],
                "Next": next
            }),
            Durable::Pass(v) => {
                json!({"Type": "Pass", "Result": v, "ResultPath": format!("$.v{i}"), "Next": next})
            }
        };
        map.insert(name(i), state);
    }
    map.insert("Done".to_owned(), json!({"Type": "Succeed"}));
    json!({"StartAt": "S0", "States": map})
}

/// Drives a machine to its end: answers the oldest open task (success or failure, from
/// `answers` in turn), else fires the earliest timer.
fn drive(
    definition: &Value,
    answers: &[(bool, i64)],
    roundtrip: bool,
    stop_at: Option<usize>,
) -> Harness {
    let input = json!({"lists": [[], ["a"], ["a", "b"], ["a", "b", "c"]]});
    let mut h = Harness::new(definition.clone(), input);
    h.roundtrip = roundtrip;
    h.start();
    let mut next = 0;
    for _ in 0..500 {
        if h.outcome().is_some() {
            break;
        }
        h.advance(1);
        if stop_at == Some(next) {
            h.apply(Event::Stop {
                error: Some("Stop".into()),
                cause: None,
            });
        } else if let Some(task) = h.open_tasks().into_iter().next() {
            let (ok, value) = answers[next % answers.len()];
            next += 1;
            if ok {
                h.succeed_token(task.token, json!(value));
            } else {
                h.fail_token(task.token, "E", &value.to_string());
            }
        } else if let Some(&(id, due)) = h.pending_timers().iter().min_by_key(|(_, due)| *due) {
            h.now = h.now.max(due);
            h.fire(id);
        } else {
            panic!("execution stuck: {:?}", h.event_types());
        }
    }
    h
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn linear_pass_and_choice_chains_succeed_in_one_step(
        states in proptest::collection::vec(linear_state(), 1..=30)
    ) {
        let (definition, expected) = linear_machine(&states);
        let mut h = Harness::new(definition, json!({}));
        let step = h.start();
        let finished = step.actions.iter().any(|a| matches!(
            a,
            Action::Finish(ExecutionEnd { status: ExecutionStatus::Succeeded, .. })
        ));
        prop_assert!(finished);
        prop_assert_eq!(h.output(), expected);
        let n = 2 + 2 * (states.len() as u64 + 1);
        let ids: Vec<u64> = h.events.iter().map(|e| e.id).collect();
        prop_assert_eq!(ids, (1..=n).collect::<Vec<_>>());
        let prev: Vec<u64> = h.events.iter().map(|e| e.previous_event_id).collect();
        prop_assert_eq!(prev, (0..n).collect::<Vec<_>>());
    }

    #[test]
    fn restarting_from_serialized_snapshots_changes_nothing(
        states in proptest::collection::vec(durable_state(), 1..=8),
        answers in proptest::collection::vec((any::<bool>(), -5i64..5), 1..=6),
    ) {
        let definition = durable_machine(&states);
        let live = drive(&definition, &answers, false, None);
        let replayed = drive(&definition, &answers, true, None);
        prop_assert!(live.outcome().is_some(), "{:?}", live.event_types());
        prop_assert_eq!(live.outcome(), replayed.outcome());
        prop_assert_eq!(&live.events, &replayed.events);
        let ids: Vec<u64> = live.events.iter().map(|e| e.id).collect();
        prop_assert_eq!(ids, (1..=live.events.len() as u64).collect::<Vec<_>>());
    }

    #[test]
    fn a_finished_execution_leaves_no_open_task_or_timer(
        states in proptest::collection::vec(durable_state(), 1..=8),
        answers in proptest::collection::vec((any::<bool>(), -5i64..5), 1..=6),
        stop_at in proptest::option::of(0usize..6),
    ) {
        let definition = durable_machine(&states);
        let h = drive(&definition, &answers, false, stop_at);
        prop_assert!(h.outcome().is_some(), "{:?}", h.event_types());
        prop_assert!(h.open_tasks().is_empty(), "{:?}", h.event_types());
        prop_assert!(h.pending_timers().is_empty(), "{:?}", h.event_types());
        prop_assert!(h.state.frames.is_empty());
        let ids: Vec<u64> = h.events.iter().map(|e| e.id).collect();
        prop_assert_eq!(ids, (1..=h.events.len() as u64).collect::<Vec<_>>());
        prop_assert!(h.events.iter().all(|e| e.previous_event_id < e.id));
        let finishes = h.actions.iter().filter(|a| matches!(a, Action::Finish(_))).count();
        prop_assert_eq!(finishes, 1);
    }
}
