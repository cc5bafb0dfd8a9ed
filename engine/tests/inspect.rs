//! The read-only inspector beside a running engine: it sees executions and open tasks as the
//! engine commits them, and never writes.

use engine::{ActivityTask, Engine, EngineConfig, ExecutionStatus, Inspector, StartExecutionInput};
use serde_json::json;
use std::time::Duration;

const LONG: Duration = Duration::from_secs(20);

/// An engine on `engine.db` in a new directory, one execution named `name` started, and its one
/// activity task handed to a worker.
async fn one_task_handed_out(name: &str) -> (tempfile::TempDir, Engine, String, ActivityTask) {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(EngineConfig::new(dir.path().join("engine.db")), None)
        .await
        .unwrap();
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
            name: Some(name.to_owned()),
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
    (dir, engine, execution, task)
}

#[tokio::test]
async fn the_inspector_sees_running_executions_and_open_tasks_beside_the_engine() {
    let (dir, engine, execution, task) = one_task_handed_out("e1").await;
    let path = dir.path().join("engine.db");

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
    let (dir, engine, execution, task) = one_task_handed_out("stopped").await;
    let path = dir.path().join("engine.db");
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
