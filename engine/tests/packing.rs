//! Packing on a real SQLite file: once the engine has trained its dictionary, the JSON it
//! stores (history details, payloads, snapshots, inputs and outputs) is packed, and nothing a
//! caller reads changes: the same executions run on an engine that never packs give the same
//! histories and descriptions, before and after a restart, and an execution parked on a packed
//! snapshot resumes from it.

use engine::{Engine, EngineConfig, GetExecutionHistoryInput, StartExecutionInput};
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

mod common;

use common::{LONG, db};

const EXECUTIONS: usize = 300;
/// Small enough that the first fifty or so executions train the dictionary.
const SAMPLES: usize = 64 * 1024;

async fn open(path: &Path, samples: usize) -> Engine {
    let config = EngineConfig {
        dictionary_samples: samples,
        ..EngineConfig::new(path)
    };
    Engine::open(config, None).await.unwrap()
}

fn arn(kind: &str, name: &str) -> String {
    format!("arn:aws:states:us-east-1:123456789012:{kind}:{name}")
}

/// Creates the machine and activities on a fresh engine.
async fn define(engine: &Engine) {
    let work = engine.create_activity("work").await.unwrap().activity_arn;
    let park = engine.create_activity("park").await.unwrap().activity_arn;
    engine
        .create_state_machine(
            "order",
            &json!({"StartAt": "Reserve", "States": {
                "Reserve": {"Type": "Task", "Resource": work, "ResultPath": "$.reservation", "Next": "Shape"},
                "Shape": {"Type": "Pass", "Parameters": {
                    "orderId.$": "$.orderId", "lines.$": "$.reservation.lines",
                    "large.$": "$.large", "note": "shaped by the Pass state"
                }, "Next": "Large?"},
                "Large?": {"Type": "Choice", "Choices": [
                    {"Variable": "$.large", "BooleanEquals": true, "Next": "Approve"}
                ], "Default": "Done"},
                "Approve": {"Type": "Task", "Resource": park, "ResultPath": "$.approval", "Next": "Done"},
                "Done": {"Type": "Succeed"}
            }})
            .to_string(),
            None,
        )
        .await
        .unwrap();
}

/// Runs the executions: each reserves (answered at once); every third parks for approval.
async fn run(engine: &Engine) {
    let machine = arn("stateMachine", "order");
    for i in 0..EXECUTIONS {
        let input = json!({
            "orderId": format!("order-{i:05}"),
            "customerId": format!("cus_{}", i % 7),
            "large": i % 3 == 0,
            "amountCents": 1500 * (i + 1),
        });
        engine
            .start_execution(StartExecutionInput {
                state_machine_arn: machine.clone(),
                name: Some(format!("order-{i:05}")),
                input: Some(input.to_string()),
            })
            .await
            .unwrap();
        let task = engine
            .get_activity_task(&arn("activity", "work"), Some("worker-1"), LONG)
            .await
            .unwrap()
            .expect("the reservation's task");
        let output = json!({"lines": [{"sku": format!("sku-{}", i % 11), "quantity": 1 + i % 4}], "status": "HELD"});
        engine
            .send_task_success(&task.task_token, &output.to_string())
            .await
            .unwrap();
        let exec = arn("execution", &format!("order:order-{i:05}"));
        if i % 3 != 0 {
            engine.wait_for_completion(&exec, LONG).await.unwrap();
        }
    }
}

/// Approves every parked execution, oldest first.
async fn approve_all(engine: &Engine) {
    for _ in (0..EXECUTIONS).step_by(3) {
        let task = engine
            .get_activity_task(&arn("activity", "park"), Some("operator"), LONG)
            .await
            .unwrap()
            .expect("a parked approval");
        let input: Value = serde_json::from_str(&task.input).unwrap();
        let approval = json!({"approvedBy": "operator", "orderId": input["orderId"]});
        engine
            .send_task_success(&task.task_token, &approval.to_string())
            .await
            .unwrap();
    }
}

/// What a caller reads of every execution: its description and its history (timestamps aside:
/// the two engines ran at different moments).
async fn observed(engine: &Engine) -> Vec<Value> {
    let mut out = Vec::new();
    for i in 0..EXECUTIONS {
        let exec = arn("execution", &format!("order:order-{i:05}"));
        let d = engine.describe_execution(&exec).await.unwrap();
        let history = engine
            .get_execution_history(GetExecutionHistoryInput {
                execution_arn: exec.clone(),
                max_results: Some(1000),
                next_token: None,
                reverse_order: false,
                include_execution_data: None,
            })
            .await
            .unwrap();
        let events: Vec<Value> = history
            .events
            .iter()
            .map(|e| json!([e.event_type, e.id, e.previous_event_id, e.details]))
            .collect();
        out.push(json!({
            "status": d.status.as_str(), "input": d.input, "output": d.output, "events": events
        }));
    }
    out
}

/// The history's details in the packed file against the same rows in the plain one:
/// `(rows packed, rows, bytes of the packed rows, bytes of the same rows stored plain)`.
fn stored(packed: &Path, plain: &Path) -> (i64, i64, i64, i64) {
    let conn = rusqlite::Connection::open(packed).unwrap();
    conn.execute("ATTACH ?1 AS plain", [plain.to_str().unwrap()])
        .unwrap();
    conn.query_row(
        "SELECT sum(typeof(p.details) = 'blob'), count(*), \
                sum(iif(typeof(p.details) = 'blob', length(p.details), 0)), \
                sum(iif(typeof(p.details) = 'blob', length(CAST(q.details AS BLOB)), 0)) \
         FROM history p JOIN plain.history q USING (exec_id, id)",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )
    .unwrap()
}

#[tokio::test]
async fn packed_json_reads_back_as_the_plain_engine_wrote_it_across_a_restart() {
    let (packed_db, plain_db) = (db(), db());
    let packed = open(&packed_db.path, SAMPLES).await;
    let plain = open(&plain_db.path, 0).await;
    for engine in [&packed, &plain] {
        define(engine).await;
        run(engine).await;
    }
    assert_eq!(
        observed(&packed).await,
        observed(&plain).await,
        "a packing engine answers as one that never packs"
    );

    // Restarted, the parked executions resume from their (packed) snapshots.
    packed.shutdown().await;
    plain.shutdown().await;
    let packed = open(&packed_db.path, SAMPLES).await;
    let plain = open(&plain_db.path, 0).await;
    for engine in [&packed, &plain] {
        approve_all(engine).await;
        for i in (0..EXECUTIONS).step_by(3) {
            let exec = arn("execution", &format!("order:order-{i:05}"));
            let done = engine.wait_for_completion(&exec, LONG).await.unwrap();
            assert_eq!(done.status.as_str(), "SUCCEEDED", "{exec}");
        }
    }
    assert_eq!(observed(&packed).await, observed(&plain).await);
    packed.shutdown().await;
    plain.shutdown().await;

    let conn = rusqlite::Connection::open(&packed_db.path).unwrap();
    let dictionaries: i64 = conn
        .query_row("SELECT count(*) FROM dictionaries", [], |r| r.get(0))
        .unwrap();
    assert_eq!(
        dictionaries, 1,
        "one dictionary, trained once, kept across the restart"
    );
    let (packed_rows, rows, packed_bytes, plain_bytes) = stored(&packed_db.path, &plain_db.path);
    assert!(
        packed_rows * 4 > rows * 3,
        "most events come after the dictionary and are packed: {packed_rows} of {rows}"
    );
    assert!(
        packed_bytes * 3 < plain_bytes * 2,
        "packed details take less than two thirds of the bytes (each holds a payload key, 8 \
         random bytes, which nothing compresses): {packed_bytes} against {plain_bytes}"
    );
    let conn = rusqlite::Connection::open(&plain_db.path).unwrap();
    let plain_blobs: i64 = conn
        .query_row(
            "SELECT count(*) FROM history WHERE typeof(details) = 'blob'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(plain_blobs, 0, "an engine told never to pack stores text");
}

#[tokio::test]
async fn a_torn_packed_snapshot_fails_its_execution_visibly_and_holds_up_no_other() {
    let db = db();
    let engine = open(&db.path, SAMPLES).await;
    define(&engine).await;
    run(&engine).await;
    engine.shutdown().await;

    // The last parked execution's snapshot, packed, cut in half as a torn write would.
    let torn = (0..EXECUTIONS).step_by(3).last().unwrap();
    let name = format!("order-{torn:05}");
    let conn = rusqlite::Connection::open(&db.path).unwrap();
    let first_byte: String = conn
        .query_row(
            "SELECT hex(substr(snapshot, 1, 1)) FROM executions WHERE name = ?",
            [&name],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(first_byte, "00", "the snapshot is packed");
    conn.execute(
        "UPDATE executions SET snapshot = substr(snapshot, 1, length(snapshot) / 2) WHERE name = ?",
        [&name],
    )
    .unwrap();
    drop(conn);

    let engine = open(&db.path, SAMPLES).await;
    // Every parked task a worker is handed is answered; the torn one's is never handed out.
    while let Some(task) = engine
        .get_activity_task(
            &arn("activity", "park"),
            Some("operator"),
            Duration::from_millis(500),
        )
        .await
        .unwrap()
    {
        engine
            .send_task_success(&task.task_token, "{}")
            .await
            .unwrap();
    }
    for i in (0..EXECUTIONS).step_by(3) {
        let exec = arn("execution", &format!("order:order-{i:05}"));
        let done = engine.wait_for_completion(&exec, LONG).await.unwrap();
        if i == torn {
            assert_eq!(done.status.as_str(), "FAILED");
            assert_eq!(done.error.as_deref(), Some("States.Runtime"));
        } else {
            assert_eq!(done.status.as_str(), "SUCCEEDED", "{exec}");
        }
    }
    engine.shutdown().await;
}
