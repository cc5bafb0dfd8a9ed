//! The engine's verbs against a real SQLite file: activities and task tokens, timeouts and
//! heartbeats, idempotent starts, AWS error names, history and listing, and reopening.

use engine::{
    Engine, EngineConfig, EngineError, ExecutionStatus, GetExecutionHistoryInput,
    ListExecutionsInput, StartExecutionInput, TaskFailure, TaskFuture, TaskHandler, TaskRequest,
};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

mod common;

use common::{Db, LONG, db};

async fn open(db: &Db) -> Engine {
    Engine::open(EngineConfig::new(&db.path), None)
        .await
        .unwrap()
}

async fn machine(engine: &Engine, name: &str, definition: Value) -> String {
    engine
        .create_state_machine(name, &definition.to_string(), None)
        .await
        .unwrap()
        .state_machine_arn
}

async fn start(engine: &Engine, sm: &str, name: &str, input: Value) -> String {
    engine
        .start_execution(StartExecutionInput {
            state_machine_arn: sm.to_owned(),
            name: Some(name.to_owned()),
            input: Some(input.to_string()),
        })
        .await
        .unwrap()
        .execution_arn
}

async fn event_types(engine: &Engine, arn: &str) -> Vec<String> {
    let page = engine
        .get_execution_history(GetExecutionHistoryInput {
            execution_arn: arn.to_owned(),
            max_results: Some(1000),
            ..Default::default()
        })
        .await
        .unwrap();
    page.events.into_iter().map(|e| e.event_type).collect()
}

fn one_activity_task(activity: &str, extra: Value) -> Value {
    let mut task = json!({"Type": "Task", "Resource": activity, "End": true});
    if let (Value::Object(t), Value::Object(e)) = (&mut task, extra) {
        t.extend(e);
    }
    json!({"StartAt": "Work", "States": {"Work": task}})
}

#[tokio::test]
async fn activity_round_trip_records_the_aws_event_sequence() {
    let db = db();
    let engine = open(&db).await;
    let activity = engine.create_activity("work").await.unwrap().activity_arn;
    assert!(activity.ends_with(":activity:work"));
    let sm = machine(&engine, "m", one_activity_task(&activity, json!({}))).await;
    let exec = start(&engine, &sm, "e1", json!({"n": 1})).await;
    assert!(exec.ends_with(":execution:m:e1"));

    let task = engine
        .get_activity_task(&activity, Some("w1"), LONG)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&task.input).unwrap(),
        json!({"n": 1})
    );
    engine
        .send_task_success(&task.task_token, r#"{"done": true}"#)
        .await
        .unwrap();

    let d = engine.wait_for_completion(&exec, LONG).await.unwrap();
    assert_eq!(d.status, ExecutionStatus::Succeeded);
    assert_eq!(
        serde_json::from_str::<Value>(d.output.as_deref().unwrap()).unwrap(),
        json!({"done": true})
    );
    assert_eq!(
        event_types(&engine, &exec).await,
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
    // The token is dead once its task closed.
    let again = engine.send_task_success(&task.task_token, "{}").await;
    assert!(
        matches!(again, Err(EngineError::TaskTimedOut(_))),
        "{again:?}"
    );
}

#[tokio::test]
async fn worker_failure_without_catch_fails_the_execution_with_its_error() {
    let db = db();
    let engine = open(&db).await;
    let activity = engine.create_activity("work").await.unwrap().activity_arn;
    let sm = machine(&engine, "m", one_activity_task(&activity, json!({}))).await;
    let exec = start(&engine, &sm, "e1", json!({})).await;
    let task = engine
        .get_activity_task(&activity, None, LONG)
        .await
        .unwrap()
        .unwrap();
    engine
        .send_task_failure(
            &task.task_token,
            Some("Payment.Declined"),
            Some("card declined"),
        )
        .await
        .unwrap();
    let d = engine.wait_for_completion(&exec, LONG).await.unwrap();
    assert_eq!(d.status, ExecutionStatus::Failed);
    assert_eq!(d.error.as_deref(), Some("Payment.Declined"));
    assert_eq!(d.cause.as_deref(), Some("card declined"));
    let types = event_types(&engine, &exec).await;
    assert_eq!(
        types[types.len() - 2..],
        ["ActivityFailed", "ExecutionFailed"]
    );
}

#[tokio::test]
async fn starting_twice_while_running_returns_the_same_execution() {
    let db = db();
    let engine = open(&db).await;
    let activity = engine.create_activity("work").await.unwrap().activity_arn;
    let sm = machine(&engine, "m", one_activity_task(&activity, json!({}))).await;
    let first = start(&engine, &sm, "order-1", json!({"a": 1})).await;
    let second = start(&engine, &sm, "order-1", json!({"a": 1})).await;
    assert_eq!(first, second);

    let different = engine
        .start_execution(StartExecutionInput {
            state_machine_arn: sm.clone(),
            name: Some("order-1".into()),
            input: Some(r#"{"a": 2}"#.into()),
        })
        .await;
    assert!(
        matches!(different, Err(EngineError::ExecutionAlreadyExists(_))),
        "{different:?}"
    );

    let task = engine
        .get_activity_task(&activity, None, LONG)
        .await
        .unwrap()
        .unwrap();
    engine
        .send_task_success(&task.task_token, "{}")
        .await
        .unwrap();
    engine.wait_for_completion(&first, LONG).await.unwrap();
    let after_close = engine
        .start_execution(StartExecutionInput {
            state_machine_arn: sm,
            name: Some("order-1".into()),
            input: Some(r#"{"a": 1}"#.into()),
        })
        .await;
    assert!(
        matches!(after_close, Err(EngineError::ExecutionAlreadyExists(_))),
        "{after_close:?}"
    );
}

#[tokio::test]
async fn bad_requests_get_aws_error_names() {
    let db = db();
    let engine = open(&db).await;
    let sm = machine(
        &engine,
        "m",
        json!({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": true}}}),
    )
    .await;
    let start_with = |name: &str, input: &str| {
        engine.start_execution(StartExecutionInput {
            state_machine_arn: sm.clone(),
            name: Some(name.to_owned()),
            input: Some(input.to_owned()),
        })
    };
    assert!(matches!(
        start_with("has space", "{}").await,
        Err(EngineError::InvalidName(_))
    ));
    assert!(matches!(
        start_with("ok", "{not json").await,
        Err(EngineError::InvalidExecutionInput(_))
    ));
    let missing = engine
        .start_execution(StartExecutionInput {
            state_machine_arn: sm.replace(":m", ":nope"),
            ..Default::default()
        })
        .await;
    assert!(
        matches!(missing, Err(EngineError::StateMachineDoesNotExist(_))),
        "{missing:?}"
    );
    assert!(matches!(
        engine.send_task_success("not a token!", "{}").await,
        Err(EngineError::InvalidToken(_))
    ));
    assert!(matches!(
        engine.send_task_success("abcdef", "{}").await,
        Err(EngineError::TaskDoesNotExist(_))
    ));
    assert!(matches!(
        engine.send_task_heartbeat("abcdef").await,
        Err(EngineError::TaskDoesNotExist(_))
    ));
    assert!(matches!(
        engine
            .describe_execution("arn:aws:states:us-east-1:123456789012:execution:m:none")
            .await,
        Err(EngineError::ExecutionDoesNotExist(_))
    ));
    let poll = engine
        .get_activity_task(
            "arn:aws:states:us-east-1:123456789012:activity:none",
            None,
            LONG,
        )
        .await;
    assert!(
        matches!(poll, Err(EngineError::ActivityDoesNotExist(_))),
        "{poll:?}"
    );
}

#[tokio::test]
async fn invalid_definitions_are_rejected_with_the_state_and_field() {
    let db = db();
    let engine = open(&db).await;
    let bad = json!({"StartAt": "A", "States": {"A": {"Type": "Pass", "Next": "Nowhere"}}});
    match engine
        .create_state_machine("bad", &bad.to_string(), None)
        .await
    {
        Err(EngineError::InvalidDefinition(msg)) => {
            assert!(msg.contains("'A'") && msg.contains("Next"), "{msg}");
        }
        other => panic!("expected InvalidDefinition, got {other:?}"),
    }
    let good = json!({"StartAt": "A", "States": {"A": {"Type": "Pass", "End": true}}});
    let a = engine
        .create_state_machine("m", &good.to_string(), None)
        .await
        .unwrap();
    let b = engine
        .create_state_machine("m", &good.to_string(), None)
        .await
        .unwrap();
    assert_eq!(a.state_machine_arn, b.state_machine_arn);
    let other = json!({"StartAt": "B", "States": {"B": {"Type": "Pass", "End": true}}});
    let conflict = engine
        .create_state_machine("m", &other.to_string(), None)
        .await;
    assert!(
        matches!(conflict, Err(EngineError::StateMachineAlreadyExists(_))),
        "{conflict:?}"
    );
}

#[tokio::test]
async fn a_missed_heartbeat_retries_the_task_with_a_fresh_token() {
    let db = db();
    let engine = open(&db).await;
    let activity = engine.create_activity("work").await.unwrap().activity_arn;
    let extra = json!({
        "HeartbeatSeconds": 1,
        "TimeoutSeconds": 60,
        "Retry": [{"ErrorEquals": ["States.HeartbeatTimeout"], "IntervalSeconds": 1, "MaxAttempts": 2}]
    });
    let sm = machine(&engine, "m", one_activity_task(&activity, extra)).await;
    let exec = start(&engine, &sm, "e1", json!({})).await;

    // The first worker takes the task and dies silently.
    let lost = engine
        .get_activity_task(&activity, Some("dead"), LONG)
        .await
        .unwrap()
        .unwrap();
    let retry = engine
        .get_activity_task(&activity, Some("alive"), LONG)
        .await
        .unwrap()
        .unwrap();
    assert_ne!(lost.task_token, retry.task_token);
    let late = engine.send_task_success(&lost.task_token, "{}").await;
    assert!(
        matches!(late, Err(EngineError::TaskTimedOut(_))),
        "{late:?}"
    );
    engine
        .send_task_success(&retry.task_token, r#""ok""#)
        .await
        .unwrap();
    let d = engine.wait_for_completion(&exec, LONG).await.unwrap();
    assert_eq!(d.status, ExecutionStatus::Succeeded);
    assert!(
        event_types(&engine, &exec)
            .await
            .contains(&"ActivityTimedOut".to_owned())
    );
}

#[tokio::test]
async fn heartbeats_keep_a_slow_task_alive() {
    let db = db();
    let engine = open(&db).await;
    let activity = engine.create_activity("work").await.unwrap().activity_arn;
    let sm = machine(
        &engine,
        "m",
        one_activity_task(&activity, json!({"HeartbeatSeconds": 1})),
    )
    .await;
    let exec = start(&engine, &sm, "e1", json!({})).await;
    let task = engine
        .get_activity_task(&activity, None, LONG)
        .await
        .unwrap()
        .unwrap();
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        engine.send_task_heartbeat(&task.task_token).await.unwrap();
    }
    engine
        .send_task_success(&task.task_token, "1")
        .await
        .unwrap();
    let d = engine.wait_for_completion(&exec, LONG).await.unwrap();
    assert_eq!(d.status, ExecutionStatus::Succeeded);
}

#[tokio::test]
async fn an_unanswered_task_times_out_into_its_catch() {
    let db = db();
    let engine = open(&db).await;
    let activity = engine.create_activity("nobody").await.unwrap().activity_arn;
    let definition = json!({
        "StartAt": "Work",
        "States": {
            "Work": {
                "Type": "Task", "Resource": activity, "TimeoutSecondsPath": "$.window",
                "Catch": [{"ErrorEquals": ["States.Timeout"], "ResultPath": "$.error", "Next": "Compensate"}],
                "End": true
            },
            "Compensate": {"Type": "Pass", "End": true}
        }
    });
    let sm = machine(&engine, "m", definition).await;
    let exec = start(&engine, &sm, "e1", json!({"window": 1})).await;
    let d = engine.wait_for_completion(&exec, LONG).await.unwrap();
    assert_eq!(d.status, ExecutionStatus::Succeeded);
    let output: Value = serde_json::from_str(d.output.as_deref().unwrap()).unwrap();
    assert_eq!(output["error"]["Error"], "States.Timeout");
    // Nobody can pick the timed-out task up any more.
    assert!(
        engine
            .get_activity_task(&activity, None, Duration::from_millis(50))
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn execution_timeout_ends_with_timed_out() {
    let db = db();
    let engine = open(&db).await;
    let definition = json!({
        "TimeoutSeconds": 1,
        "StartAt": "W",
        "States": {"W": {"Type": "Wait", "Seconds": 60, "End": true}}
    });
    let sm = machine(&engine, "m", definition).await;
    let exec = start(&engine, &sm, "e1", json!({})).await;
    let d = engine.wait_for_completion(&exec, LONG).await.unwrap();
    assert_eq!(d.status, ExecutionStatus::TimedOut);
    assert_eq!(
        event_types(&engine, &exec).await.last().unwrap(),
        "ExecutionTimedOut"
    );
}

#[tokio::test]
async fn stopping_aborts_and_kills_the_open_task() {
    let db = db();
    let engine = open(&db).await;
    let activity = engine.create_activity("work").await.unwrap().activity_arn;
    let sm = machine(&engine, "m", one_activity_task(&activity, json!({}))).await;
    let exec = start(&engine, &sm, "e1", json!({})).await;
    let task = engine
        .get_activity_task(&activity, None, LONG)
        .await
        .unwrap()
        .unwrap();
    engine
        .stop_execution(&exec, Some("Operator"), Some("stopped by test"))
        .await
        .unwrap();
    let d = engine.describe_execution(&exec).await.unwrap();
    assert_eq!(d.status, ExecutionStatus::Aborted);
    assert_eq!(d.error.as_deref(), Some("Operator"));
    let late = engine.send_task_success(&task.task_token, "{}").await;
    assert!(
        matches!(late, Err(EngineError::TaskTimedOut(_))),
        "{late:?}"
    );
}

#[tokio::test]
async fn listing_filters_by_status_and_pages_newest_first() {
    let db = db();
    let engine = open(&db).await;
    let activity = engine.create_activity("work").await.unwrap().activity_arn;
    let parked = machine(&engine, "parked", one_activity_task(&activity, json!({}))).await;
    for i in 0..5 {
        start(&engine, &parked, &format!("run-{i}"), json!({})).await;
    }
    let exec = start(&engine, &parked, "stopped", json!({})).await;
    engine.stop_execution(&exec, None, None).await.unwrap();

    let running = engine
        .list_executions(ListExecutionsInput {
            state_machine_arn: parked.clone(),
            status_filter: Some(ExecutionStatus::Running),
            max_results: Some(2),
            next_token: None,
        })
        .await
        .unwrap();
    assert_eq!(running.executions.len(), 2);
    assert_eq!(running.executions[0].name, "run-4");
    let rest = engine
        .list_executions(ListExecutionsInput {
            state_machine_arn: parked.clone(),
            status_filter: Some(ExecutionStatus::Running),
            max_results: Some(10),
            next_token: running.next_token,
        })
        .await
        .unwrap();
    let names: Vec<_> = rest.executions.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["run-2", "run-1", "run-0"]);
    assert!(rest.next_token.is_none());
    let aborted = engine
        .list_executions(ListExecutionsInput {
            state_machine_arn: parked,
            status_filter: Some(ExecutionStatus::Aborted),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(aborted.executions.len(), 1);
}

#[tokio::test]
async fn history_pages_forward_and_backward() {
    let db = db();
    let engine = open(&db).await;
    let states: serde_json::Map<String, Value> = (0..10)
        .map(|i| {
            let next = if i == 9 {
                json!({"Type": "Pass", "End": true})
            } else {
                json!({"Type": "Pass", "Next": format!("S{}", i + 1)})
            };
            (format!("S{i}"), next)
        })
        .collect();
    let sm = machine(&engine, "m", json!({"StartAt": "S0", "States": states})).await;
    let exec = start(&engine, &sm, "e1", json!({})).await;
    engine.wait_for_completion(&exec, LONG).await.unwrap();

    let mut ids = Vec::new();
    let mut token = None;
    loop {
        let page = engine
            .get_execution_history(GetExecutionHistoryInput {
                execution_arn: exec.clone(),
                max_results: Some(7),
                next_token: token,
                ..Default::default()
            })
            .await
            .unwrap();
        ids.extend(page.events.iter().map(|e| e.id));
        token = page.next_token;
        if token.is_none() {
            break;
        }
    }
    assert_eq!(ids, (1..=22).collect::<Vec<u64>>());
    let newest = engine
        .get_execution_history(GetExecutionHistoryInput {
            execution_arn: exec.clone(),
            max_results: Some(1),
            reverse_order: true,
            include_execution_data: Some(false),
            ..Default::default()
        })
        .await
        .unwrap();
    let last = &newest.events[0];
    assert_eq!(
        (last.id, last.event_type.as_str()),
        (22, "ExecutionSucceeded")
    );
    assert!(last.details.as_ref().unwrap().get("output").is_none());
}

#[tokio::test]
async fn a_long_poll_with_no_work_returns_nothing_at_its_deadline() {
    let db = db();
    let engine = open(&db).await;
    let activity = engine.create_activity("idle").await.unwrap().activity_arn;
    let got = engine
        .get_activity_task(&activity, None, Duration::from_millis(200))
        .await
        .unwrap();
    assert!(got.is_none());
}

#[tokio::test]
async fn parked_tasks_and_timers_survive_a_reopen() {
    let db = db();
    let (task_exec, wait_exec, activity, token);
    {
        let engine = open(&db).await;
        activity = engine.create_activity("work").await.unwrap().activity_arn;
        let sm = machine(&engine, "m", one_activity_task(&activity, json!({}))).await;
        task_exec = start(&engine, &sm, "parked", json!({"x": 1})).await;
        token = engine
            .get_activity_task(&activity, None, LONG)
            .await
            .unwrap()
            .unwrap()
            .task_token;
        let waiter = machine(
            &engine,
            "w",
            json!({"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 1, "End": true}}}),
        )
        .await;
        wait_exec = start(&engine, &waiter, "waiting", json!({"w": true})).await;
        engine.shutdown().await;
    }
    let engine = open(&db).await;
    // The handed-out token is still good after the restart, and the timer still fires.
    engine
        .send_task_success(&token, r#"{"after": "restart"}"#)
        .await
        .unwrap();
    let d = engine.wait_for_completion(&task_exec, LONG).await.unwrap();
    assert_eq!(d.status, ExecutionStatus::Succeeded);
    let w = engine.wait_for_completion(&wait_exec, LONG).await.unwrap();
    assert_eq!(w.status, ExecutionStatus::Succeeded);
    assert_eq!(w.output.as_deref(), Some(r#"{"w":true}"#));
    let _ = activity;
}

#[tokio::test]
async fn expiring_heartbeats_after_a_reopen_hands_held_tasks_out_again_at_once() {
    let db = db();
    let (exec, parked_exec, held, parked);
    let extra = json!({
        // Far longer than the test: only the expiry can time the held task out in time.
        "HeartbeatSeconds": 3600,
        "Retry": [{"ErrorEquals": ["States.HeartbeatTimeout"], "IntervalSeconds": 1, "MaxAttempts": 2}]
    });
    {
        let engine = open(&db).await;
        let work = engine.create_activity("work").await.unwrap().activity_arn;
        let park = engine.create_activity("park").await.unwrap().activity_arn;
        let sm = machine(&engine, "m", one_activity_task(&work, extra.clone())).await;
        let parking = machine(&engine, "p", one_activity_task(&park, extra)).await;
        exec = start(&engine, &sm, "held", json!({})).await;
        parked_exec = start(&engine, &parking, "parked", json!({})).await;
        held = engine
            .get_activity_task(&work, Some("dies"), LONG)
            .await
            .unwrap()
            .unwrap();
        parked = engine
            .get_activity_task(&park, Some("parks"), LONG)
            .await
            .unwrap()
            .unwrap();
        engine.shutdown().await;
    }
    let engine = open(&db).await;
    let work = engine.create_activity("work").await.unwrap().activity_arn;
    assert_eq!(
        engine
            .expire_heartbeats(std::slice::from_ref(&work))
            .await
            .unwrap(),
        1
    );
    let again = engine
        .get_activity_task(&work, Some("new"), LONG)
        .await
        .unwrap()
        .expect("the held task is handed out again");
    assert_ne!(again.task_token, held.task_token);
    let late = engine.send_task_success(&held.task_token, "{}").await;
    assert!(
        matches!(late, Err(EngineError::TaskTimedOut(_))),
        "{late:?}"
    );
    engine
        .send_task_success(&again.task_token, "{}")
        .await
        .unwrap();
    let d = engine.wait_for_completion(&exec, LONG).await.unwrap();
    assert_eq!(d.status, ExecutionStatus::Succeeded);
    // Another activity's held task keeps its token.
    engine
        .send_task_success(&parked.task_token, "{}")
        .await
        .unwrap();
    let p = engine
        .wait_for_completion(&parked_exec, LONG)
        .await
        .unwrap();
    assert_eq!(p.status, ExecutionStatus::Succeeded);
}

/// Counts invocations; fails the first `fail_first` calls with a transient error.
struct Counting {
    calls: AtomicUsize,
    fail_first: usize,
}

impl TaskHandler for Counting {
    fn invoke(&self, request: TaskRequest) -> TaskFuture {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        let fail = n < self.fail_first;
        Box::pin(async move {
            if fail {
                Err(TaskFailure {
                    error: "Transient".into(),
                    cause: format!("call {n}"),
                })
            } else {
                Ok(json!({"resource": request.resource, "input": request.input}))
            }
        })
    }
}

#[tokio::test]
async fn in_process_handlers_run_non_activity_resources_with_retries() {
    let db = db();
    let handler = Arc::new(Counting {
        calls: AtomicUsize::new(0),
        fail_first: 2,
    });
    let engine = Engine::open(EngineConfig::new(&db.path), Some(handler.clone()))
        .await
        .unwrap();
    let definition = json!({
        "StartAt": "Call",
        "States": {"Call": {
            "Type": "Task", "Resource": "local:echo", "Parameters": {"v.$": "$.v"},
            "Retry": [{"ErrorEquals": ["Transient"], "IntervalSeconds": 1, "BackoffRate": 1.0, "MaxAttempts": 3}],
            "End": true
        }}
    });
    let sm = machine(&engine, "m", definition).await;
    let exec = start(&engine, &sm, "e1", json!({"v": 7})).await;
    let d = engine.wait_for_completion(&exec, LONG).await.unwrap();
    assert_eq!(d.status, ExecutionStatus::Succeeded, "{d:?}");
    assert_eq!(
        serde_json::from_str::<Value>(d.output.as_deref().unwrap()).unwrap(),
        json!({"resource": "local:echo", "input": {"v": 7}})
    );
    assert_eq!(handler.calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_second_engine_on_a_database_in_use_is_refused_until_the_first_shuts_down() {
    let db = db();
    let first = open(&db).await;
    let refused = Engine::open(EngineConfig::new(&db.path), None).await;
    match refused {
        Err(EngineError::Unavailable(message)) => {
            assert!(message.contains("in use by another engine"), "{message}")
        }
        Err(other) => panic!("refused for another reason: {other}"),
        Ok(_) => panic!("two engines opened one database"),
    }
    first.shutdown().await;
    let second = open(&db).await;
    second.shutdown().await;
}

/// Threads of this process whose name starts with `prefix` (Linux: `/proc/self/task`).
#[cfg(target_os = "linux")]
fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|n| n.starts_with(prefix))
        })
        .count()
}

/// Every read waits for one of the engine's few read connections as a task, not as a blocking
/// thread parked on a connection's lock: a burst of reads does not make the runtime start a
/// thread for each (it would, up to 512, each keeping its stack and allocator heap).
#[cfg(target_os = "linux")]
#[test]
fn a_burst_of_reads_waits_for_a_read_connection_without_a_thread_each() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("engine-burst")
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let db = db();
        let engine = open(&db).await;
        let activity = engine.create_activity("work").await.unwrap().activity_arn;
        let sm = machine(&engine, "m", one_activity_task(&activity, json!({}))).await;
        let arn = start(&engine, &sm, "burst", json!({})).await;
        let mut reads = tokio::task::JoinSet::new();
        for _ in 0..400 {
            let (engine, arn) = (engine.clone(), arn.clone());
            reads.spawn(async move { engine.describe_execution(&arn).await });
        }
        while let Some(read) = reads.join_next().await {
            assert_eq!(read.unwrap().unwrap().status, ExecutionStatus::Running);
        }
        // Two workers and the blocking threads the reads used: a few for each of the two read
        // connections (a thread finishing one read may not be idle yet when the next starts),
        // never one a read.
        let threads = threads_named("engine-burst");
        assert!(threads <= 24, "{threads} threads served 400 reads");
    });
}
