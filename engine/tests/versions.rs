//! Revisions, versions and aliases, as AWS has them: an execution runs to its end on the
//! definition it started with, whatever is updated, published or deleted meanwhile and across a
//! reopening; versions are published once per revision and never renumbered; aliases route
//! starts by weight and are recorded on the executions they start; and a database written by
//! 0.1.0 (`fixtures/engine-0.1.0.db`) opens with its executions running on, as revision
//! `INITIAL`.

use engine::{
    CreateStateMachineAliasInput, CreateStateMachineInput, Engine, EngineConfig, EngineError,
    ExecutionStatus, GetExecutionHistoryInput, ListExecutionsInput, RoutingConfiguration,
    StartExecutionInput, SyncPolicy, UpdateStateMachineAliasInput, UpdateStateMachineInput,
};
use serde_json::{Value, json};
use std::collections::HashMap;

mod common;

use common::{Db, LONG, db};

async fn open(db: &Db) -> Engine {
    let mut config = EngineConfig::new(&db.path);
    config.sync = SyncPolicy::Normal;
    Engine::open(config, None).await.unwrap()
}

/// A task on `activity`, then a Pass that writes `tag` to `$.definition`: which revision an
/// execution ran shows in its output.
fn tagged(activity: &str, tag: &str) -> String {
    json!({
        "StartAt": "Work",
        "States": {
            "Work": {"Type": "Task", "Resource": activity, "ResultPath": "$.work", "Next": "Done"},
            "Done": {"Type": "Pass", "Result": tag, "ResultPath": "$.definition", "End": true}
        }
    })
    .to_string()
}

struct Setup {
    engine: Engine,
    activity: String,
    machine: String,
}

async fn setup(db: &Db) -> Setup {
    let engine = open(db).await;
    let activity = engine.create_activity("work").await.unwrap().activity_arn;
    let machine = engine
        .create_state_machine("orders", &tagged(&activity, "v1"), None)
        .await
        .unwrap()
        .state_machine_arn;
    Setup {
        engine,
        activity,
        machine,
    }
}

async fn start(engine: &Engine, arn: &str, name: &str) -> Result<String, EngineError> {
    engine
        .start_execution(StartExecutionInput {
            state_machine_arn: arn.to_owned(),
            name: Some(name.to_owned()),
            input: Some(json!({"order": name}).to_string()),
        })
        .await
        .map(|s| s.execution_arn)
}

async fn update(
    engine: &Engine,
    machine: &str,
    definition: String,
    publish: bool,
) -> Option<String> {
    engine
        .update_state_machine(UpdateStateMachineInput {
            state_machine_arn: machine.to_owned(),
            definition: Some(definition),
            publish,
            ..Default::default()
        })
        .await
        .unwrap()
        .state_machine_version_arn
}

async fn publish(engine: &Engine, machine: &str) -> String {
    engine
        .publish_state_machine_version(machine, None, None)
        .await
        .unwrap()
        .state_machine_version_arn
}

fn routes(pairs: &[(&str, u32)]) -> Vec<RoutingConfiguration> {
    pairs
        .iter()
        .map(|(arn, weight)| RoutingConfiguration {
            state_machine_version_arn: (*arn).to_owned(),
            weight: *weight,
        })
        .collect()
}

async fn alias(engine: &Engine, name: &str, pairs: &[(&str, u32)]) -> String {
    engine
        .create_state_machine_alias(CreateStateMachineAliasInput {
            name: name.to_owned(),
            description: None,
            routing_configuration: routes(pairs),
        })
        .await
        .unwrap()
        .state_machine_alias_arn
}

/// Answers every task of `activity` with `{}` until `count` were answered.
async fn work(engine: &Engine, activity: &str, count: usize) {
    for _ in 0..count {
        let task = engine
            .get_activity_task(activity, None, LONG)
            .await
            .unwrap()
            .expect("a task to work");
        engine
            .send_task_success(&task.task_token, "{}")
            .await
            .unwrap();
    }
}

/// The revision tag a finished execution's output carries.
async fn ran(engine: &Engine, execution: &str) -> String {
    let d = engine.wait_for_completion(execution, LONG).await.unwrap();
    assert_eq!(d.status, ExecutionStatus::Succeeded, "{execution}: {d:?}");
    let output: Value = serde_json::from_str(&d.output.unwrap()).unwrap();
    output["definition"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn executions_finish_on_the_definition_they_started_with_across_an_update_and_a_reopening() {
    let db = db();
    let s = setup(&db).await;
    let old = start(&s.engine, &s.machine, "old").await.unwrap();
    let updated = s
        .engine
        .update_state_machine(UpdateStateMachineInput {
            state_machine_arn: s.machine.clone(),
            definition: Some(tagged(&s.activity, "v2")),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(updated.state_machine_version_arn.is_none());
    let new = start(&s.engine, &s.machine, "new").await.unwrap();
    let described = s.engine.describe_state_machine(&s.machine).await.unwrap();
    assert_eq!(described.definition, tagged(&s.activity, "v2"));
    assert_eq!(
        described.revision_id.as_deref(),
        Some(updated.revision_id.as_str())
    );

    s.engine.shutdown().await;
    let engine = open(&db).await;
    let for_old = engine
        .describe_state_machine_for_execution(&old)
        .await
        .unwrap();
    assert_eq!(for_old.definition, tagged(&s.activity, "v1"));
    assert_eq!(for_old.revision_id, None, "the created revision is INITIAL");
    let for_new = engine
        .describe_state_machine_for_execution(&new)
        .await
        .unwrap();
    assert_eq!(
        for_new.revision_id.as_deref(),
        Some(updated.revision_id.as_str())
    );
    work(&engine, &s.activity, 2).await;
    assert_eq!(ran(&engine, &old).await, "v1");
    assert_eq!(ran(&engine, &new).await, "v2");
}

#[tokio::test]
async fn an_update_that_changes_nothing_adds_no_revision_and_an_update_needs_a_change_to_name() {
    let db = db();
    let s = setup(&db).await;
    let first = s
        .engine
        .update_state_machine(UpdateStateMachineInput {
            state_machine_arn: s.machine.clone(),
            definition: Some(tagged(&s.activity, "v2")),
            ..Default::default()
        })
        .await
        .unwrap();
    let again = s
        .engine
        .update_state_machine(UpdateStateMachineInput {
            state_machine_arn: s.machine.clone(),
            definition: Some(tagged(&s.activity, "v2")),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(first.revision_id, again.revision_id);
    let nothing = s
        .engine
        .update_state_machine(UpdateStateMachineInput {
            state_machine_arn: s.machine.clone(),
            ..Default::default()
        })
        .await;
    assert!(
        matches!(nothing, Err(EngineError::MissingRequiredParameter(_))),
        "{nothing:?}"
    );
    let described = UpdateStateMachineInput {
        state_machine_arn: s.machine.clone(),
        definition: Some(tagged(&s.activity, "v3")),
        version_description: Some("no publish".to_owned()),
        ..Default::default()
    };
    let refused = s.engine.update_state_machine(described).await;
    assert!(
        matches!(refused, Err(EngineError::Validation(_))),
        "{refused:?}"
    );
    let bad = s
        .engine
        .update_state_machine(UpdateStateMachineInput {
            state_machine_arn: s.machine.clone(),
            definition: Some("{\"StartAt\": \"Nowhere\", \"States\": {}}".to_owned()),
            ..Default::default()
        })
        .await;
    assert!(
        matches!(bad, Err(EngineError::InvalidDefinition(_))),
        "{bad:?}"
    );
    let of_version = s
        .engine
        .update_state_machine(UpdateStateMachineInput {
            state_machine_arn: format!("{}:1", s.machine),
            definition: Some(tagged(&s.activity, "v3")),
            ..Default::default()
        })
        .await;
    assert!(
        matches!(of_version, Err(EngineError::InvalidArn(_))),
        "{of_version:?}"
    );
    // Nothing refused changed the machine.
    let now = s.engine.describe_state_machine(&s.machine).await.unwrap();
    assert_eq!(now.definition, tagged(&s.activity, "v2"));
    assert_eq!(now.revision_id, Some(first.revision_id));
}

#[tokio::test]
async fn publishing_is_idempotent_per_revision_and_checks_the_revision_id() {
    let db = db();
    let s = setup(&db).await;
    let v1 = s
        .engine
        .publish_state_machine_version(&s.machine, Some("INITIAL"), Some("first"))
        .await
        .unwrap();
    assert_eq!(v1.state_machine_version_arn, format!("{}:1", s.machine));
    let again = s
        .engine
        .publish_state_machine_version(&s.machine, None, None)
        .await
        .unwrap();
    assert_eq!(again, v1, "the same revision is the same version");
    let stale = s
        .engine
        .publish_state_machine_version(&s.machine, Some("not-the-current-one"), None)
        .await;
    assert!(matches!(stale, Err(EngineError::Conflict(_))), "{stale:?}");

    let v2 = update(&s.engine, &s.machine, tagged(&s.activity, "v2"), true).await;
    assert_eq!(v2, Some(format!("{}:2", s.machine)));
    let described = s
        .engine
        .describe_state_machine(&format!("{}:1", s.machine))
        .await
        .unwrap();
    assert_eq!(described.state_machine_arn, format!("{}:1", s.machine));
    assert_eq!(described.definition, tagged(&s.activity, "v1"));
    assert_eq!(described.description.as_deref(), Some("first"));
    let missing = s
        .engine
        .describe_state_machine(&format!("{}:9", s.machine))
        .await;
    assert!(
        matches!(missing, Err(EngineError::ResourceNotFound(_))),
        "{missing:?}"
    );
}

#[tokio::test]
async fn create_state_machine_can_publish_version_one() {
    let db = db();
    let engine = open(&db).await;
    let activity = engine.create_activity("work").await.unwrap().activity_arn;
    let created = engine
        .create_state_machine_with(CreateStateMachineInput {
            name: "orders".to_owned(),
            definition: tagged(&activity, "v1"),
            publish: true,
            version_description: Some("release 1".to_owned()),
            ..Default::default()
        })
        .await
        .unwrap();
    let version = created.state_machine_version_arn.unwrap();
    assert_eq!(version, format!("{}:1", created.state_machine_arn));
    let described = engine.describe_state_machine(&version).await.unwrap();
    assert_eq!(described.description.as_deref(), Some("release 1"));
}

#[tokio::test]
async fn deleted_versions_leave_their_executions_running_and_their_numbers_unused() {
    let db = db();
    let s = setup(&db).await;
    let v1 = publish(&s.engine, &s.machine).await;
    let on_v1 = start(&s.engine, &v1, "on-v1").await.unwrap();
    s.engine.delete_state_machine_version(&v1).await.unwrap();
    // Deleting what is gone is answered as AWS does: success.
    s.engine.delete_state_machine_version(&v1).await.unwrap();
    let gone = start(&s.engine, &v1, "after-delete").await;
    assert!(
        matches!(gone, Err(EngineError::ResourceNotFound(_))),
        "{gone:?}"
    );
    let v2 = update(&s.engine, &s.machine, tagged(&s.activity, "v2"), true).await;
    assert_eq!(v2, Some(format!("{}:2", s.machine)), "1 is not given again");
    let listed = s
        .engine
        .list_state_machine_versions(&s.machine, None, None)
        .await
        .unwrap();
    assert_eq!(
        listed
            .items
            .iter()
            .map(|v| v.state_machine_version_arn.as_str())
            .collect::<Vec<_>>(),
        [format!("{}:2", s.machine)]
    );
    work(&s.engine, &s.activity, 1).await;
    assert_eq!(ran(&s.engine, &on_v1).await, "v1");
}

#[tokio::test]
async fn a_version_an_alias_routes_to_cannot_be_deleted_until_the_alias_moves() {
    let db = db();
    let s = setup(&db).await;
    let v1 = publish(&s.engine, &s.machine).await;
    let v2 = update(&s.engine, &s.machine, tagged(&s.activity, "v2"), true)
        .await
        .unwrap();
    let live = alias(&s.engine, "live", &[(&v1, 100)]).await;
    let refused = s.engine.delete_state_machine_version(&v1).await;
    assert!(
        matches!(refused, Err(EngineError::Conflict(_))),
        "{refused:?}"
    );
    s.engine
        .update_state_machine_alias(UpdateStateMachineAliasInput {
            state_machine_alias_arn: live.clone(),
            routing_configuration: Some(routes(&[(&v2, 100)])),
            ..Default::default()
        })
        .await
        .unwrap();
    s.engine.delete_state_machine_version(&v1).await.unwrap();
    let described = s.engine.describe_state_machine_alias(&live).await.unwrap();
    assert_eq!(described.routing_configuration, routes(&[(&v2, 100)]));
    assert!(described.update_date >= described.creation_date);
}

#[tokio::test]
async fn a_start_through_an_alias_records_the_version_and_the_alias_it_ran() {
    let db = db();
    let s = setup(&db).await;
    let v1 = publish(&s.engine, &s.machine).await;
    let live = alias(&s.engine, "live", &[(&v1, 100)]).await;
    let exec = start(&s.engine, &live, "through-live").await.unwrap();
    assert_eq!(
        exec,
        s.machine.replace(":stateMachine:", ":execution:") + ":through-live",
        "an execution's ARN names its machine, not the alias"
    );
    // A later update does not change what the alias starts, nor what was started.
    update(&s.engine, &s.machine, tagged(&s.activity, "v2"), false).await;
    let again = start(&s.engine, &live, "through-live-again").await.unwrap();
    let d = s.engine.describe_execution(&exec).await.unwrap();
    assert_eq!(d.state_machine_arn, s.machine);
    assert_eq!(d.state_machine_version_arn.as_deref(), Some(v1.as_str()));
    assert_eq!(d.state_machine_alias_arn.as_deref(), Some(live.as_str()));
    let history = s
        .engine
        .get_execution_history(GetExecutionHistoryInput {
            execution_arn: exec.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    let started = history.events[0].details.clone().unwrap();
    assert_eq!(started["stateMachineVersionArn"], json!(v1));
    assert_eq!(started["stateMachineAliasArn"], json!(live));
    let by_alias = s
        .engine
        .list_executions(ListExecutionsInput {
            state_machine_arn: live.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(by_alias.executions.len(), 2);
    let unversioned = start(&s.engine, &s.machine, "direct").await.unwrap();
    let d = s.engine.describe_execution(&unversioned).await.unwrap();
    assert_eq!(
        (d.state_machine_version_arn, d.state_machine_alias_arn),
        (None, None)
    );
    work(&s.engine, &s.activity, 3).await;
    assert_eq!(ran(&s.engine, &exec).await, "v1");
    assert_eq!(ran(&s.engine, &again).await, "v1");
    assert_eq!(ran(&s.engine, &unversioned).await, "v2");
}

#[tokio::test]
async fn an_alias_with_two_versions_splits_starts_by_weight_and_moving_it_moves_new_starts_only() {
    let db = db();
    let s = setup(&db).await;
    let v1 = publish(&s.engine, &s.machine).await;
    let v2 = update(&s.engine, &s.machine, tagged(&s.activity, "v2"), true)
        .await
        .unwrap();
    let live = alias(&s.engine, "live", &[(&v1, 50), (&v2, 50)]).await;
    let mut by_version: HashMap<String, usize> = HashMap::new();
    for i in 0..200 {
        let exec = start(&s.engine, &live, &format!("split-{i}"))
            .await
            .unwrap();
        let d = s.engine.describe_execution(&exec).await.unwrap();
        *by_version
            .entry(d.state_machine_version_arn.unwrap())
            .or_default() += 1;
    }
    // Each side's count is Binomial(200, 1/2): below 50 once in ~10^13 runs.
    assert!(
        by_version[&v1] >= 50 && by_version[&v2] >= 50,
        "{by_version:?}"
    );
    s.engine
        .update_state_machine_alias(UpdateStateMachineAliasInput {
            state_machine_alias_arn: live.clone(),
            routing_configuration: Some(routes(&[(&v1, 0), (&v2, 100)])),
            ..Default::default()
        })
        .await
        .unwrap();
    for i in 0..20 {
        let exec = start(&s.engine, &live, &format!("all-new-{i}"))
            .await
            .unwrap();
        let d = s.engine.describe_execution(&exec).await.unwrap();
        assert_eq!(d.state_machine_version_arn.as_deref(), Some(v2.as_str()));
    }
    let by_v1 = s
        .engine
        .list_executions(ListExecutionsInput {
            state_machine_arn: v1.clone(),
            max_results: Some(1000),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(by_v1.executions.len(), by_version[&v1]);
}

#[tokio::test]
async fn alias_requests_are_checked_before_anything_is_stored() {
    let db = db();
    let s = setup(&db).await;
    let v1 = publish(&s.engine, &s.machine).await;
    let other = s
        .engine
        .create_state_machine("other", &tagged(&s.activity, "o"), None)
        .await
        .unwrap()
        .state_machine_arn;
    let other_v1 = publish(&s.engine, &other).await;
    let attempt = |name: &str, pairs: &[(&str, u32)]| CreateStateMachineAliasInput {
        name: name.to_owned(),
        description: None,
        routing_configuration: routes(pairs),
    };
    let cases = [
        attempt("live", &[(&v1, 60)]),
        attempt("live", &[(&v1, 50), (&v1, 50)]),
        attempt("live", &[(&v1, 50), (&other_v1, 50)]),
        attempt("live", &[]),
        attempt("live", &[(&s.machine, 100)]),
        attempt("42", &[(&v1, 100)]),
    ];
    for case in cases {
        let refused = s.engine.create_state_machine_alias(case.clone()).await;
        assert!(
            matches!(
                refused,
                Err(EngineError::Validation(_) | EngineError::InvalidName(_))
            ),
            "{case:?}: {refused:?}"
        );
    }
    let missing = s
        .engine
        .create_state_machine_alias(attempt("live", &[(&format!("{}:7", s.machine), 100)]))
        .await;
    assert!(
        matches!(missing, Err(EngineError::ResourceNotFound(_))),
        "{missing:?}"
    );
    let listed = s
        .engine
        .list_state_machine_aliases(&s.machine, None, None)
        .await
        .unwrap();
    assert!(listed.items.is_empty(), "{listed:?}");

    let live = alias(&s.engine, "live", &[(&v1, 100)]).await;
    assert_eq!(
        alias(&s.engine, "live", &[(&v1, 100)]).await,
        live,
        "the same request again"
    );
    let v2 = update(&s.engine, &s.machine, tagged(&s.activity, "v2"), true)
        .await
        .unwrap();
    let conflict = s
        .engine
        .create_state_machine_alias(attempt("live", &[(&v2, 100)]))
        .await;
    assert!(
        matches!(conflict, Err(EngineError::Conflict(_))),
        "{conflict:?}"
    );
    s.engine.delete_state_machine_alias(&live).await.unwrap();
    let gone = s.engine.describe_state_machine_alias(&live).await;
    assert!(
        matches!(gone, Err(EngineError::ResourceNotFound(_))),
        "{gone:?}"
    );
    let start_gone = start(&s.engine, &live, "x").await;
    assert!(
        matches!(start_gone, Err(EngineError::ResourceNotFound(_))),
        "{start_gone:?}"
    );
}

#[tokio::test]
async fn listings_page_versions_newest_first_and_aliases_by_name() {
    let db = db();
    let s = setup(&db).await;
    let mut versions = vec![publish(&s.engine, &s.machine).await];
    for tag in ["v2", "v3", "v4"] {
        versions.push(
            update(&s.engine, &s.machine, tagged(&s.activity, tag), true)
                .await
                .unwrap(),
        );
    }
    let mut seen = Vec::new();
    let mut token = None;
    loop {
        let page = s
            .engine
            .list_state_machine_versions(&s.machine, Some(3), token.as_deref())
            .await
            .unwrap();
        seen.extend(page.items.into_iter().map(|v| v.state_machine_version_arn));
        token = page.next_token;
        if token.is_none() {
            break;
        }
    }
    versions.reverse();
    assert_eq!(seen, versions);
    for name in ["live", "canary", "blue"] {
        alias(&s.engine, name, &[(&versions[0], 100)]).await;
    }
    let first = s
        .engine
        .list_state_machine_aliases(&s.machine, Some(2), None)
        .await
        .unwrap();
    let rest = s
        .engine
        .list_state_machine_aliases(&s.machine, Some(2), first.next_token.as_deref())
        .await
        .unwrap();
    let names: Vec<_> = first
        .items
        .iter()
        .chain(&rest.items)
        .map(|a| {
            a.state_machine_alias_arn
                .rsplit(':')
                .next()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(names, ["blue", "canary", "live"]);
    assert!(rest.next_token.is_none());
}

#[tokio::test]
async fn a_machine_has_at_most_a_thousand_versions() {
    let db = db();
    let s = setup(&db).await;
    publish(&s.engine, &s.machine).await;
    for i in 2..=1000 {
        update(
            &s.engine,
            &s.machine,
            tagged(&s.activity, &format!("v{i}")),
            true,
        )
        .await;
    }
    let definition = Some(tagged(&s.activity, "one too many"));
    let refused = s
        .engine
        .update_state_machine(UpdateStateMachineInput {
            state_machine_arn: s.machine.clone(),
            definition,
            publish: true,
            ..Default::default()
        })
        .await;
    assert!(
        matches!(refused, Err(EngineError::ServiceQuotaExceeded(_))),
        "{refused:?}"
    );
    // The refused publish took the update with it: one call, one answer.
    let now = s.engine.describe_state_machine(&s.machine).await.unwrap();
    assert_eq!(now.definition, tagged(&s.activity, "v1000"));
    s.engine
        .delete_state_machine_version(&format!("{}:1", s.machine))
        .await
        .unwrap();
    let v1001 = update(&s.engine, &s.machine, tagged(&s.activity, "v1001"), true).await;
    assert_eq!(v1001, Some(format!("{}:1001", s.machine)));
}

/// `fixtures/engine-0.1.0.db`: what release 0.1.0's engine wrote (schema version 1): machine
/// `legacy` (a task on activity `work`, then a Pass writing `"old"` to `$.definition`) with two
/// executions parked on the task, `parked-1` and `parked-2`.
#[tokio::test]
async fn a_database_of_release_0_1_0_opens_and_its_executions_finish_on_their_definition() {
    let db = db();
    let fixture =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/engine-0.1.0.db");
    std::fs::copy(&fixture, &db.path).unwrap();
    let engine = open(&db).await;
    let machine = "arn:aws:states:us-east-1:123456789012:stateMachine:legacy";
    let activity = "arn:aws:states:us-east-1:123456789012:activity:work";
    let parked: Vec<String> = ["parked-1", "parked-2"]
        .iter()
        .map(|n| format!("arn:aws:states:us-east-1:123456789012:execution:legacy:{n}"))
        .collect();
    let described = engine.describe_state_machine(machine).await.unwrap();
    assert_eq!(described.revision_id, None);
    for exec in &parked {
        let d = engine.describe_execution(exec).await.unwrap();
        assert_eq!(d.status, ExecutionStatus::Running);
        assert_eq!(
            (d.state_machine_version_arn, d.state_machine_alias_arn),
            (None, None)
        );
    }
    // The upgrade a release does: publish what runs, publish the new definition, route to it.
    let v1 = engine
        .publish_state_machine_version(machine, Some("INITIAL"), None)
        .await
        .unwrap()
        .state_machine_version_arn;
    let v2 = update(&engine, machine, tagged(activity, "new"), true)
        .await
        .unwrap();
    let live = alias(&engine, "live", &[(&v2, 100)]).await;
    let fresh = start(&engine, &live, "fresh").await.unwrap();
    engine.shutdown().await;
    let engine = open(&db).await;
    work(&engine, activity, 3).await;
    for exec in &parked {
        assert_eq!(ran(&engine, exec).await, "old");
    }
    assert_eq!(ran(&engine, &fresh).await, "new");
    let d = engine.describe_state_machine(&v1).await.unwrap();
    assert_eq!(d.definition, described.definition);
}
