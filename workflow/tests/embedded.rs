//! The workflow port over the real embedded engine, on a temporary SQLite file.

use engine::{Engine, EngineConfig};
use serde_json::json;
use std::time::Duration;
use workflow::definition::{Activity, STATE_MACHINE_NAME};
use workflow::{EmbeddedWorkflow, WorkflowError, WorkflowPort};

async fn open_engine(dir: &tempfile::TempDir) -> Engine {
    Engine::open(EngineConfig::new(dir.path().join("engine.db")), None)
        .await
        .expect("engine opens")
}

fn order_input(order_id: &str) -> serde_json::Value {
    json!({ "orderId": order_id, "requiresApproval": false })
}

#[tokio::test(flavor = "multi_thread")]
async fn setup_is_idempotent_and_creates_every_activity() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let engine = open_engine(&dir).await;
    let first = EmbeddedWorkflow::setup(engine.clone()).await?;
    let second = EmbeddedWorkflow::setup(engine.clone()).await?;
    assert_eq!(first.state_machine_arn(), second.state_machine_arn());
    assert!(
        first
            .state_machine_arn()
            .ends_with(&format!(":stateMachine:{STATE_MACHINE_NAME}"))
    );
    for activity in Activity::ALL {
        let arn = first.activity_arn(activity);
        assert_eq!(arn, second.activity_arn(activity));
        assert!(arn.ends_with(&format!(":activity:{}", activity.name())));
        // Polling an activity that does not exist would be an error.
        let task = first
            .get_activity_task(arn, "probe", Duration::ZERO)
            .await?;
        assert!(task.is_none(), "{activity:?} has no task yet");
    }
    let definition = engine
        .describe_state_machine(first.state_machine_arn())
        .await?
        .definition;
    assert!(!definition.contains("${"));
    Ok(())
}

/// A release with another definition, on the database an earlier one left: setup updates the
/// machine, publishes the new definition and moves `live`; an execution the earlier release
/// started finishes on its own definition, new orders start on the new version.
#[tokio::test(flavor = "multi_thread")]
async fn setup_over_an_earlier_releases_definition_publishes_it_and_moves_live()
-> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let engine = open_engine(&dir).await;
    // What the earlier release left: the machine with its definition, published and routed,
    // and an order still running on it.
    let earlier = r#"{"StartAt":"W","States":{"W":{"Type":"Wait","Seconds":1,"Next":"P"},"P":{"Type":"Pass","Result":"earlier","End":true}}}"#;
    let created = engine
        .create_state_machine_with(engine::CreateStateMachineInput {
            name: STATE_MACHINE_NAME.to_owned(),
            definition: earlier.to_owned(),
            publish: true,
            version_description: Some("fulfillment 0.0.9".to_owned()),
            ..Default::default()
        })
        .await?;
    let v1 = created.state_machine_version_arn.unwrap();
    engine
        .create_state_machine_alias(engine::CreateStateMachineAliasInput {
            name: "live".to_owned(),
            description: None,
            routing_configuration: vec![engine::RoutingConfiguration {
                state_machine_version_arn: v1.clone(),
                weight: 100,
            }],
        })
        .await?;
    let old = engine
        .start_execution(engine::StartExecutionInput {
            state_machine_arn: format!("{}:live", created.state_machine_arn),
            name: Some("old-order".to_owned()),
            input: Some("{}".to_owned()),
        })
        .await?
        .execution_arn;

    let wf = EmbeddedWorkflow::setup(engine.clone()).await?;
    let v2_arn = wf.version_arn().expect("published").to_owned();
    assert_eq!(v2_arn, format!("{}:2", created.state_machine_arn));
    assert_eq!(
        wf.alias_arn(),
        format!("{}:live", created.state_machine_arn)
    );
    let live = engine.describe_state_machine_alias(wf.alias_arn()).await?;
    assert_eq!(
        live.routing_configuration
            .iter()
            .map(|r| (r.state_machine_version_arn.as_str(), r.weight))
            .collect::<Vec<_>>(),
        [(v2_arn.as_str(), 100)]
    );
    let v2 = engine.describe_state_machine(&v2_arn).await?;
    let description = v2.description.unwrap();
    assert!(
        description.starts_with(&format!(
            "fulfillment {} definition sha256:",
            env!("CARGO_PKG_VERSION")
        )),
        "{description}"
    );

    let new = wf
        .start_execution("new-order", &order_input("new-order"))
        .await?;
    let d = engine.describe_execution(&new.execution_arn).await?;
    assert_eq!(
        d.state_machine_version_arn.as_deref(),
        Some(v2_arn.as_str())
    );
    assert_eq!(d.state_machine_alias_arn.as_deref(), Some(wf.alias_arn()));
    let finished = engine
        .wait_for_completion(&old, Duration::from_secs(20))
        .await?;
    assert_eq!(finished.output.as_deref(), Some("\"earlier\""));

    // A second start of the same build changes nothing.
    let again = EmbeddedWorkflow::setup(engine.clone()).await?;
    assert_eq!(again.version_arn(), wf.version_arn());
    let versions = engine
        .list_state_machine_versions(wf.state_machine_arn(), None, None)
        .await?;
    assert_eq!(versions.items.len(), 2);
    Ok(())
}

/// Where `live` routes, as (version, weight) pairs.
async fn live_routing(engine: &Engine, wf: &EmbeddedWorkflow) -> Vec<(String, u32)> {
    engine
        .describe_state_machine_alias(wf.alias_arn())
        .await
        .expect("live exists")
        .routing_configuration
        .into_iter()
        .map(|r| (r.state_machine_version_arn, r.weight))
        .collect()
}

/// Makes the machine hold `definition` as a published version described `description`, routed
/// by `live` wholly (what an earlier or a later build's start leaves).
async fn publish_as_live(
    engine: &Engine,
    wf: &EmbeddedWorkflow,
    definition: &str,
    description: &str,
    alias_description: Option<&str>,
) -> String {
    let version = engine
        .update_state_machine(engine::UpdateStateMachineInput {
            state_machine_arn: wf.state_machine_arn().to_owned(),
            definition: Some(definition.to_owned()),
            publish: true,
            version_description: Some(description.to_owned()),
            ..Default::default()
        })
        .await
        .expect("published")
        .state_machine_version_arn
        .unwrap();
    engine
        .update_state_machine_alias(engine::UpdateStateMachineAliasInput {
            state_machine_alias_arn: wf.alias_arn().to_owned(),
            description: alias_description.map(str::to_owned),
            routing_configuration: Some(vec![engine::RoutingConfiguration {
                state_machine_version_arn: version.clone(),
                weight: 100,
            }]),
        })
        .await
        .expect("routed");
    version
}

const OTHER: &str = r#"{"StartAt":"Other","States":{"Other":{"Type":"Pass","End":true}}}"#;

/// An operator's rollback pins `live`: a restart of the newer build leaves it where the
/// operator put it, and publishes nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_restart_does_not_undo_a_rollback_that_pinned_live() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let engine = open_engine(&dir).await;
    let wf = EmbeddedWorkflow::setup(engine.clone()).await?;
    let old = publish_as_live(
        &engine,
        &wf,
        OTHER,
        "fulfillment 0.0.1 definition sha256:00",
        Some("pinned: rolled back by an operator"),
    )
    .await;
    let restarted = EmbeddedWorkflow::setup(engine.clone()).await?;
    assert_eq!(restarted.version_arn(), None);
    assert_eq!(live_routing(&engine, &restarted).await, [(old, 100)]);
    let versions = engine
        .list_state_machine_versions(wf.state_machine_arn(), None, None)
        .await?;
    assert_eq!(versions.items.len(), 2, "nothing published by the restart");
    Ok(())
}

/// An older build restarting while a newer release is live (a rolling deploy) leaves `live`
/// on the newer one; a newer build takes it from an older one, with a canary's share when asked.
#[tokio::test(flavor = "multi_thread")]
async fn a_restart_never_routes_live_back_to_an_older_release_and_a_canary_takes_its_share()
-> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let engine = open_engine(&dir).await;
    let wf = EmbeddedWorkflow::setup(engine.clone()).await?;
    let newer = publish_as_live(
        &engine,
        &wf,
        OTHER,
        "fulfillment 99.0.0 definition sha256:00",
        None,
    )
    .await;
    let restarted = EmbeddedWorkflow::setup(engine.clone()).await?;
    assert_eq!(restarted.version_arn(), None);
    assert_eq!(live_routing(&engine, &restarted).await, [(newer, 100)]);

    // (Another definition again: the same one would answer the version already published.)
    let earlier = OTHER.replace("Other", "Earlier");
    let older = publish_as_live(
        &engine,
        &wf,
        &earlier,
        "fulfillment 0.0.1 definition sha256:00",
        None,
    )
    .await;
    let canary = EmbeddedWorkflow::setup_with(engine.clone(), Some(10)).await?;
    let ours = canary.version_arn().expect("published").to_owned();
    assert_eq!(
        live_routing(&engine, &canary).await,
        [(older.clone(), 90), (ours.clone(), 10)]
    );
    // A restart during the canary keeps it, with or without the flag.
    let again = EmbeddedWorkflow::setup(engine.clone()).await?;
    assert_eq!(again.version_arn(), Some(ours.as_str()));
    assert_eq!(
        live_routing(&engine, &again).await,
        [(older, 90), (ours, 10)]
    );
    Ok(())
}

/// Operators' verbs: the list shows each version with its share of `live` and its running
/// orders; a rollback routes `live` back and pins it (a restart leaves it); a promotion routes
/// it to this build's version again; a bad target changes nothing.
#[tokio::test(flavor = "multi_thread")]
async fn versions_are_listed_rolled_back_and_pinned_and_promoted() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let engine = open_engine(&dir).await;
    let first = EmbeddedWorkflow::setup(engine.clone()).await?;
    let waits = r#"{"StartAt":"W","States":{"W":{"Type":"Wait","Seconds":3600,"End":true}}}"#;
    let v2 = publish_as_live(
        &engine,
        &first,
        waits,
        "fulfillment 0.0.1 definition sha256:00",
        None,
    )
    .await;
    let parked = engine
        .start_execution(engine::StartExecutionInput {
            state_machine_arn: first.alias_arn().to_owned(),
            name: Some("on-v2".to_owned()),
            input: Some("{}".to_owned()),
        })
        .await?;
    let wf = EmbeddedWorkflow::setup(engine.clone()).await?;
    let v3 = wf.version_arn().expect("published").to_owned();
    assert!(v3.ends_with(":3"), "{v3}");

    let report = wf.versions(10).await?;
    let lines: Vec<_> = report
        .versions
        .iter()
        .map(|v| (v.version.number, v.live_weight, v.running))
        .collect();
    assert_eq!(lines, [(3, Some(100), 0), (2, None, 1), (1, None, 0)]);
    assert!(!report.pinned);
    assert_eq!(
        report.versions[1].version.description.as_deref(),
        Some("fulfillment 0.0.1 definition sha256:00")
    );

    let back = wf.rollback(None).await?;
    assert_eq!((back.from, back.to), (3, 2));
    assert_eq!(live_routing(&engine, &wf).await, [(v2.clone(), 100)]);
    let restarted = EmbeddedWorkflow::setup(engine.clone()).await?;
    assert_eq!(live_routing(&engine, &restarted).await, [(v2.clone(), 100)]);
    assert!(restarted.versions(1).await?.pinned);

    for (to, refused) in [(Some(99), "does not exist"), (Some(2), "already")] {
        let e = wf.rollback(to).await.unwrap_err();
        assert!(e.to_string().contains(refused), "{e}");
    }
    assert_eq!(live_routing(&engine, &wf).await, [(v2, 100)]);

    assert_eq!(wf.promote().await?, 3);
    assert_eq!(live_routing(&engine, &wf).await, [(v3, 100)]);
    assert!(!wf.versions(1).await?.pinned);
    let d = engine.describe_execution(&parked.execution_arn).await?;
    assert!(
        d.state_machine_version_arn.unwrap().ends_with(":2"),
        "the parked order keeps its version"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_repeat_start_is_already_started_while_running_and_after_closing() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let wf = EmbeddedWorkflow::setup(open_engine(&dir).await).await?;
    let input = order_input("order-1");

    let first = wf.start_execution("order-1", &input).await?;
    assert!(!first.already_started);
    assert_eq!(first.execution_arn, wf.execution_arn("order-1"));

    let again = wf.start_execution("order-1", &input).await?;
    assert!(again.already_started);
    assert_eq!(again.execution_arn, first.execution_arn);

    wf.stop_execution(&first.execution_arn, "Test.Stopped", "by the test")
        .await?;
    let info = wf.describe_execution(&first.execution_arn).await?;
    assert_eq!(info.status, "ABORTED");
    assert_eq!(info.error.as_deref(), Some("Test.Stopped"));
    assert!(info.stop_date.is_some());

    let after_close = wf.start_execution("order-1", &input).await?;
    assert!(after_close.already_started);
    assert_eq!(after_close.execution_arn, first.execution_arn);

    let other = wf
        .start_execution("order-2", &order_input("order-2"))
        .await?;
    assert!(!other.already_started);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_saga_step_is_served_through_the_port() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let wf = EmbeddedWorkflow::setup(open_engine(&dir).await).await?;
    let started = wf
        .start_execution("order-7", &order_input("order-7"))
        .await?;

    let task = wf
        .get_activity_task(
            wf.activity_arn(Activity::ReserveInventory),
            "test-worker",
            Duration::from_secs(5),
        )
        .await?
        .expect("ReserveInventory is scheduled");
    assert_eq!(task.input, json!({ "orderId": "order-7" }));
    wf.send_task_heartbeat(&task.task_token).await?;
    wf.send_task_success(&task.task_token, &json!({ "reservationId": "r-7" }))
        .await?;
    // The token is spent now.
    let spent = wf.send_task_success(&task.task_token, &json!({})).await;
    assert!(
        matches!(spent, Err(WorkflowError::TaskTimedOut(_))),
        "{spent:?}"
    );

    let charge = wf
        .get_activity_task(
            wf.activity_arn(Activity::ChargePayment),
            "test-worker",
            Duration::from_secs(5),
        )
        .await?
        .expect("ChargePayment is scheduled");
    wf.send_task_failure(&charge.task_token, "Payment.Declined", "card declined")
        .await?;

    let page = wf
        .get_execution_history(&started.execution_arn, None, 1000)
        .await?;
    assert!(page.next_token.is_none());
    let first = &page.events[0];
    assert_eq!(first["type"], "ExecutionStarted");
    assert_eq!(first["id"], 1);
    assert_eq!(first["previousEventId"], 0);
    assert!(
        first["timestamp"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );
    assert!(first["executionStartedEventDetails"]["input"].is_string());
    let failed = page
        .events
        .iter()
        .find(|e| e["type"] == "ActivityFailed")
        .expect("the failure is in the history");
    assert_eq!(
        failed["activityFailedEventDetails"]["error"],
        "Payment.Declined"
    );
    assert!(
        page.events
            .iter()
            .any(|e| e["type"] == "TaskStateEntered" && e["stateEnteredEventDetails"].is_object())
    );

    let paged = wf
        .get_execution_history(&started.execution_arn, None, 2)
        .await?;
    assert_eq!(paged.events.len(), 2);
    let rest = wf
        .get_execution_history(&started.execution_arn, paged.next_token, 1000)
        .await?;
    assert_eq!(rest.events[0]["id"], 3);
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn engine_errors_map_to_port_errors() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let wf = EmbeddedWorkflow::setup(open_engine(&dir).await).await?;
    let missing = wf.describe_execution(&wf.execution_arn("nope")).await;
    assert!(matches!(
        missing,
        Err(WorkflowError::ExecutionDoesNotExist(_))
    ));
    let missing = wf
        .get_execution_history(&wf.execution_arn("nope"), None, 10)
        .await;
    assert!(matches!(
        missing,
        Err(WorkflowError::ExecutionDoesNotExist(_))
    ));
    // Malformed, and well formed but never issued: both are not our tokens.
    let malformed = wf.send_task_heartbeat("not a token!").await;
    assert!(
        matches!(malformed, Err(WorkflowError::InvalidToken(_))),
        "{malformed:?}"
    );
    let unknown = wf.send_task_success("AAAAAAAAAAAAAAAA", &json!({})).await;
    assert!(
        matches!(unknown, Err(WorkflowError::InvalidToken(_))),
        "{unknown:?}"
    );
    let bad_name = wf.start_execution("has space", &json!({})).await;
    assert!(
        matches!(bad_name, Err(WorkflowError::Other(_))),
        "{bad_name:?}"
    );

    wf.engine().shutdown().await;
    let down = wf.start_execution("order-9", &json!({})).await;
    assert!(
        matches!(down, Err(WorkflowError::Unavailable(_))),
        "{down:?}"
    );
    Ok(())
}
