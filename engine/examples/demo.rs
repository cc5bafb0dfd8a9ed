//! A tour of the embedded engine: an order-shaped state machine whose steps are activities,
//! served by a worker in this process, with a retry and a compensation. Its state lives in a
//! SQLite file, so running it again shows the earlier executions are still there.
//!
//! ```text
//! cargo run --release -p engine --example demo [-- DB_PATH]
//! ```

use anyhow::Result;
use engine::{
    Engine, EngineConfig, GetExecutionHistoryInput, ListExecutionsInput, StartExecutionInput,
};
use serde_json::{Value, json};
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<()> {
    let db = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "engine-demo.db".to_owned());
    let engine = Engine::open(EngineConfig::new(&db), None).await?;

    let reserve = engine.create_activity("demo-reserve").await?.activity_arn;
    let charge = engine.create_activity("demo-charge").await?.activity_arn;
    let definition = json!({
        "Comment": "Reserve, charge (retrying a flaky gateway), release the stock when the charge fails",
        "StartAt": "Reserve",
        "States": {
            "Reserve": {
                "Type": "Task", "Resource": reserve, "ResultPath": "$.reservation",
                "HeartbeatSeconds": 30, "TimeoutSeconds": 300, "Next": "Charge"
            },
            "Charge": {
                "Type": "Task", "Resource": charge, "ResultPath": "$.payment",
                "HeartbeatSeconds": 30, "TimeoutSeconds": 300,
                "Retry": [{"ErrorEquals": ["Payment.Unavailable"], "IntervalSeconds": 1, "MaxAttempts": 3}],
                "Catch": [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.failure", "Next": "Release"}],
                "Next": "Done"
            },
            "Release": {"Type": "Pass", "Result": "released", "ResultPath": "$.reservation", "Next": "Cancelled"},
            "Cancelled": {"Type": "Fail", "Error": "Order.Cancelled", "Cause": "the charge failed"},
            "Done": {"Type": "Succeed"}
        }
    });
    let sm = engine
        .create_state_machine("demo-order", &definition.to_string(), None)
        .await?
        .state_machine_arn;

    // The worker: reserves anything, fails the first charge attempt of every order transiently,
    // and declines card "declined".
    let worker = {
        let engine = engine.clone();
        let (reserve, charge) = (reserve.clone(), charge.clone());
        tokio::spawn(async move {
            let mut attempts = std::collections::HashMap::<String, u32>::new();
            loop {
                for activity in [&reserve, &charge] {
                    let Ok(Some(task)) = engine
                        .get_activity_task(
                            activity,
                            Some("demo-worker"),
                            Duration::from_millis(100),
                        )
                        .await
                    else {
                        continue;
                    };
                    let input: Value = serde_json::from_str(&task.input).unwrap_or_default();
                    let order = input["orderId"].as_str().unwrap_or_default().to_owned();
                    if activity == &reserve {
                        let _ = engine
                            .send_task_success(
                                &task.task_token,
                                &json!({"reserved": true}).to_string(),
                            )
                            .await;
                        continue;
                    }
                    let n = attempts.entry(order.clone()).or_default();
                    *n += 1;
                    let result = if *n == 1 {
                        engine
                            .send_task_failure(
                                &task.task_token,
                                Some("Payment.Unavailable"),
                                Some("gateway timeout"),
                            )
                            .await
                    } else if input["card"] == "declined" {
                        engine
                            .send_task_failure(
                                &task.task_token,
                                Some("Payment.Declined"),
                                Some("card declined"),
                            )
                            .await
                    } else {
                        engine
                            .send_task_success(
                                &task.task_token,
                                &json!({"chargeId": format!("ch_{order}")}).to_string(),
                            )
                            .await
                    };
                    result.ok();
                }
            }
        })
    };

    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    for (suffix, card) in [("ok", "visa"), ("declined", "declined")] {
        let order_id = format!("order-{run}-{suffix}");
        let started = engine
            .start_execution(StartExecutionInput {
                state_machine_arn: sm.clone(),
                name: Some(order_id.clone()),
                input: Some(json!({"orderId": order_id, "card": card}).to_string()),
            })
            .await?;
        let done = engine
            .wait_for_completion(&started.execution_arn, Duration::from_secs(30))
            .await?;
        println!("\n{} → {}", started.execution_arn, done.status.as_str());
        if let Some(output) = &done.output {
            println!("  output: {output}");
        }
        if let (Some(error), Some(cause)) = (&done.error, &done.cause) {
            println!("  error: {error} ({cause})");
        }
        let history = engine
            .get_execution_history(GetExecutionHistoryInput {
                execution_arn: started.execution_arn.clone(),
                include_execution_data: Some(false),
                ..Default::default()
            })
            .await?;
        for e in history.events {
            println!("  {:>3} {}", e.id, e.event_type);
        }
    }
    worker.abort();

    let all = engine
        .list_executions(ListExecutionsInput {
            state_machine_arn: sm,
            max_results: Some(1000),
            ..Default::default()
        })
        .await?;
    println!(
        "\n{} executions of demo-order are stored in {db}",
        all.executions.len()
    );
    engine.shutdown().await;
    Ok(())
}
