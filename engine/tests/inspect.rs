//! The read-only inspector beside a running engine: it sees executions and open tasks as the
//! engine commits them, and never writes.

use engine::{Engine, EngineConfig, ExecutionStatus, Inspector, StartExecutionInput};
use serde_json::json;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(20);

#[tokio::test]
async fn the_inspector_sees_running_executions_and_open_tasks_beside_the_engine() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("engine.db");
    let engine = Engine::open(EngineConfig::new(&path), None).await.unwrap();
    let activity = engine.create_activity("work").await.unwrap().activity_arn;
    let definition = json!({"StartAt": "Work", "States": {
        "Work": {"Type": "Task", "Resource": activity, "End": true}}});
    let machine = engine
        .create_state_machine("m", &definition.to_string(), None)
        .await
        .unwrap()
        .state_machine_arn;
    let execution = engine
        .start_execution(StartExecutionInput {
            state_machine_arn: machine,
            name: Some("e1".to_owned()),
            input: None,
        })
        .await
        .unwrap()
        .execution_arn;
    let task = engine
        .get_activity_task(&activity, Some("w"), LONG)
        .await
        .unwrap()
        .expect("a task");

    let inspector = Inspector::open(&path).unwrap();
    assert_eq!(
        inspector.execution_status(&execution).unwrap(),
        Some(ExecutionStatus::Running)
    );
    assert!(inspector.task_open(&task.task_token).unwrap());
    assert_eq!(
        inspector
            .execution_status(&execution.replace(":e1", ":nope"))
            .unwrap(),
        None
    );
    assert!(!inspector.task_open("not-a-token").unwrap());

    engine
        .send_task_success(&task.task_token, "{}")
        .await
        .unwrap();
    engine.wait_for_completion(&execution, LONG).await.unwrap();
    assert!(
        !inspector.task_open(&task.task_token).unwrap(),
        "an answered task's token is dead"
    );
    assert_eq!(
        inspector.execution_status(&execution).unwrap(),
        Some(ExecutionStatus::Succeeded)
    );
    engine.shutdown().await;
}

#[tokio::test]
async fn the_inspector_needs_an_existing_engine_file_and_creates_none() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("missing.db");
    assert!(Inspector::open(&path).is_err());
    assert!(!path.exists(), "nothing was created");
}

#[tokio::test]
async fn a_task_of_an_ended_execution_is_not_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("engine.db");
    let engine = Engine::open(EngineConfig::new(&path), None).await.unwrap();
    let activity = engine.create_activity("work").await.unwrap().activity_arn;
    let definition = json!({"StartAt": "Work", "States": {
        "Work": {"Type": "Task", "Resource": activity, "End": true}}});
    let machine = engine
        .create_state_machine("m", &definition.to_string(), None)
        .await
        .unwrap()
        .state_machine_arn;
    let execution = engine
        .start_execution(StartExecutionInput {
            state_machine_arn: machine,
            name: Some("stopped".to_owned()),
            input: None,
        })
        .await
        .unwrap()
        .execution_arn;
    let task = engine
        .get_activity_task(&activity, Some("w"), LONG)
        .await
        .unwrap()
        .expect("a task");
    engine
        .stop_execution(&execution, Some("Stop"), Some("by the test"))
        .await
        .unwrap();
    let inspector = Inspector::open(&path).unwrap();
    assert_eq!(
        inspector.execution_status(&execution).unwrap(),
        Some(ExecutionStatus::Aborted)
    );
    assert!(!inspector.task_open(&task.task_token).unwrap());
    engine.shutdown().await;
}
