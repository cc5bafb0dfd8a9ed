//! The interpreter is a function of its inputs: the same events at the same times with the same
//! seeds give the same history, actions and states, task tokens and jittered delays included.

use super::*;

/// A Parallel whose branches draw on every random source: activity tasks in a Map with a
/// FULL-jitter retry, and a Pass making a UUID and an unseeded random number.
fn machine() -> Value {
    json!({
        "StartAt": "Fan",
        "States": {
            "Fan": {
                "Type": "Parallel",
                "End": true,
                "Branches": [
                    {
                        "StartAt": "Items",
                        "States": {
                            "Items": {
                                "Type": "Map",
                                "ItemsPath": "$.items",
                                "End": true,
                                "ItemProcessor": {
                                    "StartAt": "Work",
                                    "States": {
                                        "Work": {
                                            "Type": "Task",
                                            "Resource": ACTIVITY,
                                            "Retry": [{
                                                "ErrorEquals": ["Flaky"],
                                                "IntervalSeconds": 30,
                                                "MaxAttempts": 2,
                                                "JitterStrategy": "FULL"
                                            }],
                                            "End": true
                                        }
                                    }
                                }
                            }
                        }
                    },
                    {
                        "StartAt": "Draw",
                        "States": {
                            "Draw": {
                                "Type": "Pass",
                                "Parameters": {
                                    "id.$": "States.UUID()",
                                    "n.$": "States.MathRandom(1, 1000000000)"
                                },
                                "End": true
                            }
                        }
                    }
                ]
            }
        }
    })
}

fn input() -> Value {
    json!({"items": [1, 2, 3]})
}

/// Runs the machine to its end: every task fails once with a retried error, then succeeds; the
/// clock moves a second between steps.
fn run_live(salt: u64) -> Harness {
    let mut h = Harness::new(machine(), input());
    h.salt = salt;
    h.start();
    let mut failed = BTreeSet::new();
    for _ in 0..100 {
        if h.outcome().is_some() {
            return h;
        }
        h.advance(1);
        if let Some(task) = h.open_tasks().into_iter().next() {
            if failed.insert(task.input.to_string()) {
                h.fail_token(task.token, "Flaky", "try again");
            } else {
                h.succeed_token(task.token, task.input);
            }
        } else {
            let (timer, due) = h.pending_timers()[0];
            h.now = h.now.max(due);
            h.fire(timer);
        }
    }
    panic!("the execution never ended: {:?}", h.event_types());
}

#[test]
fn replaying_the_same_events_times_and_seeds_gives_the_same_history_actions_and_states() {
    let live = run_live(0);
    assert_eq!(live.status(), ExecutionStatus::Succeeded);
    let retries = live
        .actions
        .iter()
        .filter(|a| matches!(a, Action::StartTimer { .. }))
        .count();
    assert_eq!(retries, 3, "one jittered back-off per item");

    let mut replay = Harness::new(machine(), input());
    for step in &live.log {
        replay.apply_with(step.event.clone(), step.now, step.seed);
        let after = &replay.log.last().expect("logged").state_after;
        assert_eq!(after, &step.state_after, "state after {:?}", step.event);
    }
    assert_eq!(replay.events, live.events);
    assert_eq!(replay.actions, live.actions);
    assert_eq!(replay.output(), live.output());
}

#[test]
fn different_seeds_give_different_tokens_and_random_values() {
    let (a, b) = (run_live(1), run_live(2));
    let tokens =
        |h: &Harness| -> Vec<String> { h.scheduled().into_iter().map(|t| t.token).collect() };
    assert_eq!(tokens(&a).len(), 6, "three items, each tried twice");
    assert!(
        tokens(&a).iter().all(|t| !tokens(&b).contains(t)),
        "no token repeats across seeds"
    );
    let drawn = |h: &Harness| h.output()[1].clone();
    assert_ne!(drawn(&a)["id"], drawn(&b)["id"]);
    assert_ne!(drawn(&a)["n"], drawn(&b)["n"]);
}
