use super::*;

#[test]
fn activity_task_records_activity_events_and_waits_for_a_worker() {
    let mut h = Harness::new(task_machine(ACTIVITY, json!({})), json!({"a": 1}));
    h.start();
    assert_eq!(
        h.event_types(),
        ["ExecutionStarted", "TaskStateEntered", "ActivityScheduled"]
    );
    assert_eq!(h.status(), ExecutionStatus::Running);
    let task = h.task();
    assert_eq!(task.resource, ACTIVITY);
    assert_eq!(task.state_name, "S");
    assert_eq!(task.input, json!({"a": 1}));
    let d = h.details("ActivityScheduled");
    assert_eq!(d["resource"], json!(ACTIVITY));
    assert_eq!(h.payload("ActivityScheduled", "input"), json!({"a": 1}));
    assert!(d.get("timeoutInSeconds").is_none());
    assert!(d.get("heartbeatInSeconds").is_none());

    h.start_task("worker-1");
    assert_eq!(
        h.details("ActivityStarted"),
        json!({"workerName": "worker-1"})
    );
    h.succeed_task(json!({"r": 2}));
    assert_eq!(h.output(), json!({"r": 2}));
    assert_eq!(h.payload("ActivitySucceeded", "output"), json!({"r": 2}));
}

#[test]
fn service_task_records_task_events_started_at_once() {
    let mut h = Harness::new(task_machine(SERVICE, json!({})), json!({"m": 1}));
    h.start();
    assert_eq!(
        h.event_types(),
        [
            "ExecutionStarted",
            "TaskStateEntered",
            "TaskScheduled",
            "TaskStarted"
        ]
    );
    let d = h.details("TaskScheduled");
    assert_eq!(d["resourceType"], json!("sqs"));
    assert_eq!(d["resource"], json!("sendMessage"));
    assert_eq!(d["region"], json!("us-east-1"));
    assert_eq!(
        serde_json::from_str::<Value>(d["parameters"].as_str().unwrap()).unwrap(),
        json!({"m": 1})
    );
    assert_eq!(
        h.details("TaskStarted"),
        json!({"resourceType": "sqs", "resource": "sendMessage"})
    );
    h.succeed_task(json!("done"));
    assert_eq!(h.output(), json!("done"));
    assert_eq!(
        h.event_types()[4..],
        ["TaskSucceeded", "TaskStateExited", "ExecutionSucceeded"]
    );
    assert_eq!(h.details("TaskSucceeded")["resourceType"], json!("sqs"));
}

#[test]
fn lambda_task_records_lambda_function_events() {
    let mut h = Harness::new(task_machine(LAMBDA, json!({})), json!({}));
    h.start();
    h.succeed_task(json!(1));
    assert_eq!(
        h.event_types(),
        [
            "ExecutionStarted",
            "TaskStateEntered",
            "LambdaFunctionScheduled",
            "LambdaFunctionStarted",
            "LambdaFunctionSucceeded",
            "TaskStateExited",
            "ExecutionSucceeded"
        ]
    );
    assert_eq!(
        h.details("LambdaFunctionScheduled")["resource"],
        json!(LAMBDA)
    );
}

#[test]
fn lambda_failure_records_lambda_function_failed() {
    let mut h = Harness::new(task_machine(LAMBDA, json!({})), json!({}));
    h.start();
    h.fail_task("Boom", "bad");
    assert_eq!(
        h.details("LambdaFunctionFailed"),
        json!({"error": "Boom", "cause": "bad"})
    );
    assert_eq!(h.failure(), (Some("Boom".into()), Some("bad".into())));
}

#[test]
fn task_started_is_ignored_for_in_process_tasks() {
    let mut h = Harness::new(task_machine(SERVICE, json!({})), json!({}));
    h.start();
    let n = h.events.len();
    h.start_task("w");
    assert!(h.last.events.is_empty() && h.last.actions.is_empty());
    assert_eq!(h.events.len(), n);
}

#[test]
fn parameters_shape_the_task_input() {
    let mut h = Harness::new(
        task_machine(
            ACTIVITY,
            json!({"InputPath": "$.in", "Parameters": {"x.$": "$.v", "c": "k"}}),
        ),
        json!({"in": {"v": 3}}),
    );
    h.start();
    assert_eq!(h.task().input, json!({"x": 3, "c": "k"}));
}

#[test]
fn task_token_in_parameters_is_the_scheduled_token() {
    let mut h = Harness::new(
        task_machine(
            ACTIVITY,
            json!({"Parameters": {"token.$": "$$.Task.Token"}}),
        ),
        json!({}),
    );
    h.start();
    let task = h.task();
    assert!(!task.token.is_empty());
    assert_eq!(task.input, json!({"token": task.token}));
}

#[test]
fn each_task_gets_a_fresh_token() {
    let def = json!({
        "StartAt": "A",
        "States": {
            "A": {"Type": "Task", "Resource": ACTIVITY, "Next": "B"},
            "B": {"Type": "Task", "Resource": ACTIVITY, "End": true}
        }
    });
    let mut h = Harness::new(def, json!({}));
    h.start();
    let first = h.token();
    h.succeed_task(json!({}));
    let second = h.token();
    assert_ne!(first, second);
}

#[test]
fn result_selector_then_result_path_then_output_path() {
    let mut h = Harness::new(
        task_machine(
            ACTIVITY,
            json!({
                "ResultSelector": {"picked.$": "$.body.value", "from.$": "$$.State.Name"},
                "ResultPath": "$.result",
                "OutputPath": "$.result"
            }),
        ),
        json!({"orig": true}),
    );
    h.start();
    h.succeed_task(json!({"body": {"value": 42}, "noise": 1}));
    assert_eq!(h.output(), json!({"picked": 42, "from": "S"}));
    // The Succeeded event records the raw result.
    assert_eq!(
        h.payload("ActivitySucceeded", "output"),
        json!({"body": {"value": 42}, "noise": 1})
    );
}

#[test]
fn result_path_merges_the_task_result_into_the_raw_input() {
    let mut h = Harness::new(
        task_machine(
            ACTIVITY,
            json!({"InputPath": "$.a", "ResultPath": "$.a.out"}),
        ),
        json!({"a": {"x": 1}, "b": 2}),
    );
    h.start();
    assert_eq!(h.task().input, json!({"x": 1}));
    h.succeed_task(json!("r"));
    assert_eq!(h.output(), json!({"a": {"x": 1, "out": "r"}, "b": 2}));
}

#[test]
fn timeout_and_heartbeat_seconds_reach_the_scheduled_task_and_history() {
    let mut h = Harness::new(
        task_machine(
            ACTIVITY,
            json!({"TimeoutSeconds": 30, "HeartbeatSeconds": 10}),
        ),
        json!({}),
    );
    h.start();
    let task = h.task();
    assert_eq!(task.timeout_seconds, Some(30));
    assert_eq!(task.heartbeat_seconds, Some(10));
    let d = h.details("ActivityScheduled");
    assert_eq!(d["timeoutInSeconds"], json!(30));
    assert_eq!(d["heartbeatInSeconds"], json!(10));
}

#[test]
fn timeout_and_heartbeat_paths_are_read_from_the_input() {
    let mut h = Harness::new(
        task_machine(
            ACTIVITY,
            json!({"TimeoutSecondsPath": "$.t", "HeartbeatSecondsPath": "$.hb"}),
        ),
        json!({"t": 600, "hb": 60}),
    );
    h.start();
    let task = h.task();
    assert_eq!(task.timeout_seconds, Some(600));
    assert_eq!(task.heartbeat_seconds, Some(60));
    let d = h.details("ActivityScheduled");
    assert_eq!(d["timeoutInSeconds"], json!(600));
    assert_eq!(d["heartbeatInSeconds"], json!(60));
}

#[test]
fn timeout_seconds_path_to_a_non_positive_value_is_a_runtime_error() {
    let mut h = Harness::new(
        task_machine(
            ACTIVITY,
            json!({
                "TimeoutSecondsPath": "$.t",
                "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "S"}]
            }),
        ),
        json!({"t": 0}),
    );
    h.start();
    assert_eq!(h.error(), "States.Runtime");
    assert!(h.scheduled().is_empty());
}

#[test]
fn heartbeat_clock_starts_when_the_worker_takes_the_task() {
    let mut h = Harness::new(
        task_machine(ACTIVITY, json!({"HeartbeatSeconds": 5})),
        json!({}),
    );
    h.start();
    assert!(
        !h.actions
            .iter()
            .any(|a| matches!(a, Action::StartHeartbeat { .. }))
    );
    let token = h.token();
    h.start_task("w");
    assert_eq!(
        h.last.actions,
        [Action::StartHeartbeat {
            token,
            heartbeat_seconds: 5
        }]
    );
}

#[test]
fn activity_without_heartbeat_starts_no_heartbeat_clock() {
    let mut h = Harness::new(task_machine(ACTIVITY, json!({})), json!({}));
    h.start();
    h.start_task("w");
    assert!(h.last.actions.is_empty());
    assert_eq!(h.event_types().last(), Some(&"ActivityStarted"));
}

#[test]
fn answering_a_task_closes_its_token() {
    let mut h = Harness::new(task_machine(ACTIVITY, json!({})), json!({}));
    h.start();
    let token = h.token();
    h.succeed_task(json!({}));
    assert!(h.last.actions.contains(&Action::CloseTask { token }));
}

#[test]
fn oversized_task_result_fails_with_data_limit_exceeded_uncaught() {
    let mut h = Harness::new(
        task_machine(
            ACTIVITY,
            json!({"Catch": [{"ErrorEquals": ["States.ALL"], "Next": "S"}]}),
        ),
        json!({}),
    );
    h.start();
    h.succeed_task(json!("x".repeat(300_000)));
    assert_eq!(h.error(), "States.DataLimitExceeded");
}

#[test]
fn retry_count_is_zero_on_a_task_without_retry() {
    let mut h = Harness::new(
        task_machine(
            ACTIVITY,
            json!({"Parameters": {"n.$": "$$.State.RetryCount"}}),
        ),
        json!({}),
    );
    h.start();
    assert_eq!(h.status(), ExecutionStatus::Running, "{:?}", h.outcome());
    assert_eq!(h.task().input, json!({"n": 0}));
}

#[test]
fn result_path_match_failure_of_a_task_can_be_caught() {
    let def = json!({
        "StartAt": "T",
        "States": {
            "T": {
                "Type": "Task",
                "Resource": ACTIVITY,
                "ResultPath": "$.a.b",
                "Catch": [{"ErrorEquals": ["States.ALL"], "Next": "H"}],
                "End": true
            },
            "H": {"Type": "Pass", "End": true}
        }
    });
    let mut h = Harness::new(def, json!({"a": 1}));
    h.start();
    h.succeed_task(json!(2));
    assert_eq!(h.output()["Error"], json!("States.ResultPathMatchFailure"));
}
