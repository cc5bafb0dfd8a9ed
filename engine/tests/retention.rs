//! Retention on a real SQLite file: an execution closed longer ago than the engine's retention
//! is deleted with its history, tasks and timers (AWS answers `ExecutionDoesNotExist` for one
//! past its 90 days), a running one and a recently closed one are kept, and the file gives the
//! space back.

use chrono::TimeDelta;
use engine::{Engine, EngineConfig, EngineError, GetExecutionHistoryInput, StartExecutionInput};
use serde_json::json;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

mod common;

use common::{LONG, Skew, db};

const RETENTION: Duration = Duration::from_secs(60);

async fn open(path: &std::path::Path, skew: &Skew, retention: Option<Duration>) -> Engine {
    let config = EngineConfig {
        clock: skew.clock(),
        retention,
        ..EngineConfig::new(path)
    };
    Engine::open(config, None).await.unwrap()
}

async fn start(engine: &Engine, machine: &str, name: &str, input: &str) -> String {
    engine
        .start_execution(StartExecutionInput {
            state_machine_arn: machine.to_owned(),
            name: Some(name.to_owned()),
            input: Some(input.to_owned()),
        })
        .await
        .unwrap()
        .execution_arn
}

async fn history(engine: &Engine, arn: &str) -> Result<usize, EngineError> {
    engine
        .get_execution_history(GetExecutionHistoryInput {
            execution_arn: arn.to_owned(),
            max_results: Some(1000),
            next_token: None,
            reverse_order: false,
            include_execution_data: None,
        })
        .await
        .map(|page| page.events.len())
}

/// Polls until `arn` is gone (the pruner runs between batches, every tenth of the retention
/// at most 30 s apart once idle).
async fn until_gone(engine: &Engine, arn: &str) {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        match engine.describe_execution(arn).await {
            Err(EngineError::ExecutionDoesNotExist(_)) => return,
            Ok(_) if Instant::now() < until => tokio::time::sleep(Duration::from_millis(50)).await,
            other => panic!("{arn} was not pruned: {other:?}"),
        }
    }
}

fn pages(path: &std::path::Path) -> (i64, i64) {
    let conn = rusqlite::Connection::open(path).unwrap();
    let count = conn
        .query_row("PRAGMA page_count", [], |r| r.get(0))
        .unwrap();
    let free = conn
        .query_row("PRAGMA freelist_count", [], |r| r.get(0))
        .unwrap();
    (count, free)
}

#[tokio::test]
async fn an_execution_closed_longer_ago_than_the_retention_is_deleted_and_its_space_given_back() {
    let db = db();
    let skew = Skew::default();
    let engine = open(&db.path, &skew, Some(RETENTION)).await;
    let activity = engine.create_activity("work").await.unwrap().activity_arn;
    let pass = engine
        .create_state_machine(
            "pass",
            &json!({"StartAt": "A", "States": {
                "A": {"Type": "Pass", "Next": "B"},
                "B": {"Type": "Pass", "End": true}
            }})
            .to_string(),
            None,
        )
        .await
        .unwrap()
        .state_machine_arn;
    let waits = engine
        .create_state_machine(
            "waits",
            &json!({"StartAt": "Work", "States": {
                "Work": {"Type": "Task", "Resource": activity, "End": true}
            }})
            .to_string(),
            None,
        )
        .await
        .unwrap()
        .state_machine_arn;

    // Old closed executions with large inputs, one running on an activity nobody polls.
    let big = json!({ "blob": "x".repeat(60_000) }).to_string();
    let mut old = Vec::new();
    for i in 0..100 {
        let arn = start(&engine, &pass, &format!("old-{i}"), &big).await;
        let done = engine.wait_for_completion(&arn, LONG).await.unwrap();
        assert_eq!(done.status.as_str(), "SUCCEEDED");
        old.push(arn);
    }
    let running = start(&engine, &waits, "running", "{}").await;
    let (pages_before, _) = pages(&db.path);

    // Past the retention for those; then one more that closes now.
    skew.advance(TimeDelta::hours(2));
    let recent = start(&engine, &pass, "recent", "{}").await;
    engine.wait_for_completion(&recent, LONG).await.unwrap();

    for arn in &old {
        until_gone(&engine, arn).await;
        assert!(
            matches!(
                history(&engine, arn).await,
                Err(EngineError::ExecutionDoesNotExist(_))
            ),
            "the history of a pruned execution is gone with it"
        );
    }
    assert_eq!(engine.stats().pruned.load(Ordering::Relaxed), 100);
    assert_eq!(
        engine
            .describe_execution(&running)
            .await
            .unwrap()
            .status
            .as_str(),
        "RUNNING",
        "a running execution is never pruned, however old"
    );
    assert!(history(&engine, &running).await.unwrap() > 0);
    assert!(
        history(&engine, &recent).await.unwrap() > 0,
        "a recently closed one is kept"
    );
    // Its task is still there to be worked.
    let task = engine
        .get_activity_task(&activity, None, Duration::from_secs(5))
        .await
        .unwrap()
        .expect("the running execution's task survives the pruning");
    engine
        .send_task_success(&task.task_token, "{}")
        .await
        .unwrap();
    assert_eq!(
        engine
            .wait_for_completion(&running, LONG)
            .await
            .unwrap()
            .status
            .as_str(),
        "SUCCEEDED"
    );

    // The file shrank: the pages are given back, not only put on the free list.
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let (pages_now, free) = pages(&db.path);
        if pages_now * 2 < pages_before && free < 1024 {
            break;
        }
        assert!(
            Instant::now() < until,
            "{pages_before} pages before pruning, {pages_now} after ({free} free)"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    engine.shutdown().await;
}

#[tokio::test]
async fn an_engine_without_retention_keeps_every_closed_execution() {
    let db = db();
    let skew = Skew::default();
    let engine = open(&db.path, &skew, None).await;
    let pass = engine
        .create_state_machine(
            "pass",
            &json!({"StartAt": "A", "States": {"A": {"Type": "Pass", "End": true}}}).to_string(),
            None,
        )
        .await
        .unwrap()
        .state_machine_arn;
    let arn = start(&engine, &pass, "kept", "{}").await;
    engine.wait_for_completion(&arn, LONG).await.unwrap();
    skew.advance(TimeDelta::days(3650));
    // A batch for the writer to run (the pruner would run after it).
    let other = start(&engine, &pass, "other", "{}").await;
    engine.wait_for_completion(&other, LONG).await.unwrap();
    assert!(history(&engine, &arn).await.unwrap() > 0);
    assert_eq!(engine.stats().pruned.load(Ordering::Relaxed), 0);
    engine.shutdown().await;
}

/// Counts the tasks table's rows (tombstones included).
fn task_rows(path: &std::path::Path) -> i64 {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.query_row("SELECT count(*) FROM tasks", [], |r| r.get(0))
        .unwrap()
}

#[tokio::test]
async fn a_closed_tasks_token_answers_timed_out_within_the_tombstone_window_and_does_not_exist_after()
 {
    let db = db();
    let skew = Skew::default();
    let config = EngineConfig {
        clock: skew.clock(),
        retention: None,
        task_tombstones: Duration::from_secs(60),
        ..EngineConfig::new(&db.path)
    };
    let engine = Engine::open(config, None).await.unwrap();
    let work = engine.create_activity("work").await.unwrap().activity_arn;
    let park = engine.create_activity("park").await.unwrap().activity_arn;
    let machine = engine
        .create_state_machine(
            "two-steps",
            &json!({"StartAt": "Work", "States": {
                "Work": {"Type": "Task", "Resource": work, "Next": "Park"},
                "Park": {"Type": "Task", "Resource": park, "End": true}
            }})
            .to_string(),
            None,
        )
        .await
        .unwrap()
        .state_machine_arn;
    let arn = start(&engine, &machine, "parked", "{}").await;
    let first = engine
        .get_activity_task(&work, None, LONG)
        .await
        .unwrap()
        .expect("the first task");
    engine
        .send_task_success(&first.task_token, "{}")
        .await
        .unwrap();
    let parked = engine
        .get_activity_task(&park, None, LONG)
        .await
        .unwrap()
        .expect("the parked task");

    // Within the window: the repeat is told the task timed out.
    assert!(matches!(
        engine.send_task_success(&first.task_token, "{}").await,
        Err(EngineError::TaskTimedOut(_))
    ));
    assert_eq!(task_rows(&db.path), 2, "the closed task is a tombstone");

    // Past it, the tombstone goes (the execution waits on): the token no longer exists.
    skew.advance(TimeDelta::minutes(2));
    let until = Instant::now() + Duration::from_secs(60);
    while task_rows(&db.path) > 1 {
        assert!(Instant::now() < until, "the tombstone was not deleted");
        // A batch for the writer to run; the pruner runs between batches.
        let _ = engine.send_task_heartbeat(&parked.task_token).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(matches!(
        engine.send_task_success(&first.task_token, "{}").await,
        Err(EngineError::TaskDoesNotExist(_))
    ));

    // The parked task is untouched and finishes its execution.
    engine
        .send_task_success(&parked.task_token, "{\"approved\":true}")
        .await
        .unwrap();
    let done = engine.wait_for_completion(&arn, LONG).await.unwrap();
    assert_eq!(done.status.as_str(), "SUCCEEDED");
    engine.shutdown().await;
}
