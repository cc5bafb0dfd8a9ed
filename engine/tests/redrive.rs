//! `RedriveExecution` on a real SQLite file: where a redrive resumes, what it refuses (and why,
//! in AWS's words), what `DescribeExecution` and the history say, client tokens, the 14-day
//! window on an injected clock, and a redrive that outlives its engine.

use chrono::{DateTime, TimeDelta, Utc};
use engine::{
    Engine, EngineConfig, EngineError, ExecutionStatus, GetExecutionHistoryInput, HistoryEvent,
    RedriveStatus, StartExecutionInput,
};
use serde_json::{Value, json};
use std::time::Duration;

mod common;

use common::{Db, LONG, Skew, db};

async fn open(db: &Db, skew: &Skew) -> Engine {
    let config = EngineConfig {
        clock: skew.clock(),
        ..EngineConfig::new(&db.path)
    };
    Engine::open(config, None).await.unwrap()
}

/// `Prepare` (activity `prepare`) → `Charge` (activity `charge`, no Catch) → `Done`.
struct Fixture {
    engine: Engine,
    prepare: String,
    charge: String,
    machine: String,
}

async fn fixture(engine: Engine, extra: Value) -> Fixture {
    let prepare = engine
        .create_activity("prepare")
        .await
        .unwrap()
        .activity_arn;
    let charge = engine.create_activity("charge").await.unwrap().activity_arn;
    let mut definition = json!({
        "StartAt": "Prepare",
        "States": {
            "Prepare": {"Type": "Task", "Resource": prepare, "ResultPath": "$.prepared", "Next": "Charge"},
            "Charge": {
                "Type": "Task", "Resource": charge, "ResultPath": "$.charged", "Next": "Done",
                "Parameters": {"order.$": "$.order", "redrives.$": "$$.Execution.RedriveCount"}
            },
            "Done": {"Type": "Pass", "End": true}
        }
    });
    if let (Value::Object(d), Value::Object(e)) = (&mut definition, extra) {
        d.extend(e);
    }
    let machine = engine
        .create_state_machine("checkout", &definition.to_string(), None)
        .await
        .unwrap()
        .state_machine_arn;
    Fixture {
        engine,
        prepare,
        charge,
        machine,
    }
}

impl Fixture {
    async fn start(&self, name: &str) -> String {
        self.engine
            .start_execution(StartExecutionInput {
                state_machine_arn: self.machine.clone(),
                name: Some(name.to_owned()),
                input: Some(json!({"order": name}).to_string()),
            })
            .await
            .unwrap()
            .execution_arn
    }

    /// Takes the next task of `activity` and answers it; returns its input.
    async fn answer(&self, activity: &str, result: Result<Value, &str>) -> Value {
        let task = self
            .engine
            .get_activity_task(activity, Some("w"), LONG)
            .await
            .unwrap()
            .expect("a task");
        match result {
            Ok(output) => self
                .engine
                .send_task_success(&task.task_token, &output.to_string())
                .await
                .unwrap(),
            Err(error) => self
                .engine
                .send_task_failure(&task.task_token, Some(error), Some("it broke"))
                .await
                .unwrap(),
        }
        serde_json::from_str(&task.input).unwrap()
    }

    /// Runs an execution until `Charge` fails it.
    async fn failed_at_charge(&self, name: &str) -> String {
        let arn = self.start(name).await;
        self.answer(&self.prepare, Ok(json!("ready"))).await;
        self.answer(&self.charge, Err("CardDeclined")).await;
        let d = self.engine.wait_for_completion(&arn, LONG).await.unwrap();
        assert_eq!(d.status, ExecutionStatus::Failed);
        arn
    }

    async fn history(&self, arn: &str) -> Vec<HistoryEvent> {
        self.engine
            .get_execution_history(GetExecutionHistoryInput {
                execution_arn: arn.to_owned(),
                max_results: Some(1000),
                ..Default::default()
            })
            .await
            .unwrap()
            .events
    }

    async fn event_types(&self, arn: &str) -> Vec<String> {
        let events = self.history(arn).await;
        events.into_iter().map(|e| e.event_type).collect()
    }

    /// No task waits on `activity` (polled briefly).
    async fn idle(&self, activity: &str) -> bool {
        let polled = self
            .engine
            .get_activity_task(activity, Some("w"), Duration::from_millis(200));
        polled.await.unwrap().is_none()
    }
}

fn not_redrivable(result: Result<DateTime<Utc>, EngineError>) -> String {
    match result {
        Err(EngineError::ExecutionNotRedrivable(reason)) => reason,
        other => panic!("expected ExecutionNotRedrivable, got {other:?}"),
    }
}

#[tokio::test]
async fn a_task_that_failed_without_catch_is_resumed_there_and_can_then_succeed() {
    let db = db();
    let f = fixture(open(&db, &Skew::default()).await, json!({})).await;
    let arn = f.failed_at_charge("o-1").await;
    let before = f.event_types(&arn).await;
    assert_eq!(before.last().map(String::as_str), Some("ExecutionFailed"));

    let d = f.engine.describe_execution(&arn).await.unwrap();
    assert_eq!(
        (
            d.redrive_count,
            d.redrive_status,
            d.redrive_status_reason,
            d.redrive_date
        ),
        (0, RedriveStatus::Redrivable, None, None)
    );

    let redriven_at = f.engine.redrive_execution(&arn, None).await.unwrap();
    let d = f.engine.describe_execution(&arn).await.unwrap();
    assert_eq!(d.status, ExecutionStatus::Running);
    assert_eq!((d.error, d.cause, d.stop_date), (None, None, None));
    assert_eq!(d.redrive_count, 1);
    assert_eq!(d.redrive_date, Some(redriven_at));
    assert_eq!(d.redrive_status, RedriveStatus::NotRedrivable);
    assert_eq!(
        d.redrive_status_reason.as_deref(),
        Some("Execution is RUNNING and cannot be redriven.")
    );

    // Charge runs again with the input it had, and sees the redrive in its context object;
    // Prepare, which had succeeded, is not run again.
    let input = f.answer(&f.charge, Ok(json!("paid"))).await;
    assert_eq!(input, json!({"order": "o-1", "redrives": 1}));
    assert!(f.idle(&f.prepare).await, "Prepare ran again");
    let d = f.engine.wait_for_completion(&arn, LONG).await.unwrap();
    assert_eq!(d.status, ExecutionStatus::Succeeded);
    assert_eq!(
        serde_json::from_str::<Value>(d.output.as_deref().unwrap()).unwrap(),
        json!({"order": "o-1", "prepared": "ready", "charged": "paid"})
    );
    assert_eq!(
        d.redrive_status_reason.as_deref(),
        Some("Execution is SUCCEEDED and cannot be redriven.")
    );

    // The history goes on after ExecutionFailed, the same ids continuing.
    let events = f.history(&arn).await;
    let types: Vec<&str> = events.iter().map(|e| e.event_type.as_str()).collect();
    assert_eq!(
        types[before.len()..],
        [
            "ExecutionRedriven",
            "TaskStateEntered",
            "ActivityScheduled",
            "ActivityStarted",
            "ActivitySucceeded",
            "TaskStateExited",
            "PassStateEntered",
            "PassStateExited",
            "ExecutionSucceeded"
        ]
    );
    let redriven = &events[before.len()];
    assert_eq!(redriven.id, before.len() as u64 + 1);
    assert_eq!(redriven.details, Some(json!({"redriveCount": 1})));
    assert_eq!(
        redriven.clone().to_aws_json(engine::Timestamps::Rfc3339)["executionRedrivenEventDetails"],
        json!({"redriveCount": 1})
    );
    let ids: Vec<u64> = events.iter().map(|e| e.id).collect();
    assert_eq!(ids, (1..=events.len() as u64).collect::<Vec<_>>());
    assert_eq!(
        types.iter().filter(|t| **t == "ActivitySucceeded").count(),
        2,
        "Prepare once, Charge once"
    );
}

#[tokio::test]
async fn running_succeeded_and_unknown_executions_are_refused() {
    let db = db();
    let f = fixture(open(&db, &Skew::default()).await, json!({})).await;
    let running = f.start("o-running").await;
    assert_eq!(
        not_redrivable(f.engine.redrive_execution(&running, None).await),
        "Execution is RUNNING and cannot be redriven."
    );
    f.answer(&f.prepare, Ok(json!(1))).await;
    f.answer(&f.charge, Ok(json!(2))).await;
    f.engine.wait_for_completion(&running, LONG).await.unwrap();
    assert_eq!(
        not_redrivable(f.engine.redrive_execution(&running, None).await),
        "Execution is SUCCEEDED and cannot be redriven."
    );
    let unknown = running.replace("o-running", "o-nobody");
    let e = f.engine.redrive_execution(&unknown, None).await;
    assert!(
        matches!(e, Err(EngineError::ExecutionDoesNotExist(_))),
        "{e:?}"
    );
    assert_eq!(
        EngineError::ExecutionNotRedrivable(String::new()).aws_name(),
        "ExecutionNotRedrivable"
    );
}

#[tokio::test]
async fn an_execution_closed_more_than_fourteen_days_ago_is_not_redrivable() {
    let db = db();
    let skew = Skew::default();
    let f = fixture(open(&db, &skew).await, json!({})).await;
    let arn = f.failed_at_charge("o-old").await;
    skew.advance(TimeDelta::days(14) - TimeDelta::minutes(1));
    let d = f.engine.describe_execution(&arn).await.unwrap();
    assert_eq!(d.redrive_status, RedriveStatus::Redrivable);
    skew.advance(TimeDelta::minutes(2));
    let d = f.engine.describe_execution(&arn).await.unwrap();
    assert_eq!(d.redrive_status, RedriveStatus::NotRedrivable);
    assert_eq!(
        d.redrive_status_reason.as_deref(),
        Some("Execution redrivable period exceeded.")
    );
    assert_eq!(
        not_redrivable(f.engine.redrive_execution(&arn, None).await),
        "Execution redrivable period exceeded."
    );
    assert_eq!(
        f.engine.describe_execution(&arn).await.unwrap().status,
        ExecutionStatus::Failed
    );
}

#[tokio::test]
async fn a_second_redrive_counts_two_and_resumes_where_the_first_failed() {
    let db = db();
    let f = fixture(open(&db, &Skew::default()).await, json!({})).await;
    let arn = f.failed_at_charge("o-twice").await;
    f.engine.redrive_execution(&arn, None).await.unwrap();
    let input = f.answer(&f.charge, Err("CardDeclined")).await;
    assert_eq!(input["redrives"], json!(1));
    f.engine.wait_for_completion(&arn, LONG).await.unwrap();
    f.engine.redrive_execution(&arn, None).await.unwrap();
    let input = f.answer(&f.charge, Ok(json!("paid"))).await;
    assert_eq!(input["redrives"], json!(2));
    let d = f.engine.wait_for_completion(&arn, LONG).await.unwrap();
    assert_eq!((d.status, d.redrive_count), (ExecutionStatus::Succeeded, 2));
    let counts: Vec<Value> = f
        .history(&arn)
        .await
        .into_iter()
        .filter(|e| e.event_type == "ExecutionRedriven")
        .map(|e| e.details.unwrap()["redriveCount"].clone())
        .collect();
    assert_eq!(counts, [json!(1), json!(2)]);
}

#[tokio::test]
async fn aborted_and_timed_out_executions_are_redriven_at_the_task_they_waited_on() {
    let db = db();
    // The execution times out 1 s after it starts; the redrive arms that timeout afresh.
    let f = fixture(
        open(&db, &Skew::default()).await,
        json!({"TimeoutSeconds": 1}),
    )
    .await;
    let timed_out = f.start("o-slow").await;
    f.answer(&f.prepare, Ok(json!("ready"))).await;
    let d = f
        .engine
        .wait_for_completion(&timed_out, LONG)
        .await
        .unwrap();
    assert_eq!(d.status, ExecutionStatus::TimedOut);
    assert!(f.idle(&f.charge).await, "the timed-out task is closed");
    f.engine.redrive_execution(&timed_out, None).await.unwrap();
    let input = f.answer(&f.charge, Ok(json!("paid"))).await;
    assert_eq!(input["redrives"], json!(1));
    let d = f
        .engine
        .wait_for_completion(&timed_out, LONG)
        .await
        .unwrap();
    assert_eq!(d.status, ExecutionStatus::Succeeded);

    let aborted = f.start("o-stopped").await;
    f.answer(&f.prepare, Ok(json!("ready"))).await;
    f.engine
        .stop_execution(&aborted, Some("Operator"), None)
        .await
        .unwrap();
    let d = f.engine.wait_for_completion(&aborted, LONG).await.unwrap();
    assert_eq!(d.status, ExecutionStatus::Aborted);
    assert_eq!(d.redrive_status, RedriveStatus::Redrivable);
    f.engine.redrive_execution(&aborted, None).await.unwrap();
    f.answer(&f.charge, Ok(json!("paid"))).await;
    let d = f.engine.wait_for_completion(&aborted, LONG).await.unwrap();
    assert_eq!(d.status, ExecutionStatus::Succeeded);
    let types = f.event_types(&aborted).await;
    let at = types.iter().position(|t| t == "ExecutionAborted").unwrap();
    assert_eq!(
        types[at + 1..at + 3],
        ["ExecutionRedriven", "TaskStateEntered"]
    );
}

#[tokio::test]
async fn a_client_token_repeats_its_redrive_instead_of_redriving_again() {
    let db = db();
    let f = fixture(open(&db, &Skew::default()).await, json!({})).await;
    let arn = f.failed_at_charge("o-token").await;
    let first = f
        .engine
        .redrive_execution(&arn, Some("tok-1"))
        .await
        .unwrap();
    let again = f
        .engine
        .redrive_execution(&arn, Some("tok-1"))
        .await
        .unwrap();
    assert_eq!(first, again);
    assert_eq!(
        f.engine
            .describe_execution(&arn)
            .await
            .unwrap()
            .redrive_count,
        1
    );
    assert_eq!(
        not_redrivable(f.engine.redrive_execution(&arn, Some("tok-2")).await),
        "Execution is RUNNING and cannot be redriven."
    );
    let e = f.engine.redrive_execution(&arn, Some("has space")).await;
    assert!(matches!(e, Err(EngineError::Validation(_))), "{e:?}");
}

#[tokio::test]
async fn a_redrive_outlives_its_engine() {
    let db = db();
    let skew = Skew::default();
    let f = fixture(open(&db, &skew).await, json!({})).await;
    let arn = f.failed_at_charge("o-durable").await;
    // The redrive point outlives a restart...
    f.engine.shutdown().await;
    let f = fixture(open(&db, &skew).await, json!({})).await;
    f.engine.redrive_execution(&arn, None).await.unwrap();
    // ...and so does the redriven execution's scheduled task.
    f.engine.shutdown().await;
    let f = fixture(open(&db, &skew).await, json!({})).await;
    let d = f.engine.describe_execution(&arn).await.unwrap();
    assert_eq!((d.status, d.redrive_count), (ExecutionStatus::Running, 1));
    f.answer(&f.charge, Ok(json!("paid"))).await;
    let d = f.engine.wait_for_completion(&arn, LONG).await.unwrap();
    assert_eq!(d.status, ExecutionStatus::Succeeded);
}
