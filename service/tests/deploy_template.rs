//! `deploy/template.yaml` matches the code it deploys: the activities the service derives from
//! the state machine's ARN, the definition's placeholders, the state machine's name and the
//! DynamoDB table's shape, and what the service's and the audit's policies allow. (cfn-lint
//! checks the template itself, in `.ci/run cfn`.)

use workflow::definition::{Activity, STATE_MACHINE_NAME, TEMPLATE};

const DEPLOY: &str = include_str!("../../deploy/template.yaml");

/// The text of the resource `logical_id`: its line and the more indented lines after it.
fn resource(logical_id: &str) -> String {
    let mut lines = DEPLOY
        .lines()
        .skip_while(|l| *l != format!("  {logical_id}:"));
    let head = lines
        .next()
        .unwrap_or_else(|| panic!("no resource {logical_id}"));
    let body = lines.take_while(|l| l.is_empty() || l.starts_with("   "));
    std::iter::once(head)
        .chain(body)
        .flat_map(|l| [l, "\n"])
        .collect()
}

fn logical_id(activity: Activity) -> String {
    let placeholder = activity.placeholder();
    format!(
        "{}Activity",
        placeholder
            .strip_suffix("ActivityArn")
            .expect("placeholders end in ActivityArn")
    )
}

#[test]
fn every_activity_is_deployed_under_the_name_the_service_derives() {
    for activity in Activity::ALL {
        let block = resource(&logical_id(activity));
        assert!(
            block.contains("Type: AWS::StepFunctions::Activity"),
            "{block}"
        );
        assert!(
            block.contains(&format!("Name: {}\n", activity.name())),
            "{activity:?}: {block}"
        );
    }
}

#[test]
fn the_state_machine_is_the_one_definition_with_every_placeholder_substituted() {
    let block = resource("StateMachine");
    assert!(
        block.contains(&format!("Name: {STATE_MACHINE_NAME}\n")),
        "{block}"
    );
    assert!(block.contains("Type: STANDARD\n"), "{block}");
    assert!(
        block.contains("DefinitionUri: ../workflow/order_saga.asl.json\n"),
        "{block}"
    );
    for activity in Activity::ALL {
        let line = format!(
            "{}: !Ref {}\n",
            activity.placeholder(),
            logical_id(activity)
        );
        let placeholder = format!("${{{}}}", activity.placeholder());
        assert!(block.contains(&line), "{line:?} in {block}");
        assert!(TEMPLATE.contains(&placeholder), "{placeholder}");
    }
    assert_eq!(
        TEMPLATE.matches("${").count(),
        Activity::ALL.len(),
        "the definition has no placeholder the template does not fill"
    );
}

/// The template deploys no activity the registry does not serve: one left behind would be
/// polled by nobody.
#[test]
fn the_template_deploys_only_the_registered_activities() {
    let deployed = DEPLOY
        .lines()
        .filter(|l| l.trim() == "Type: AWS::StepFunctions::Activity")
        .count();
    assert_eq!(deployed, Activity::ALL.len(), "activities in the template");
}

#[test]
fn the_service_may_poll_every_activity_and_nothing_else() {
    let block = resource("ServicePolicy");
    for activity in Activity::ALL {
        assert!(
            block.contains(&format!("- !Ref {}\n", logical_id(activity))),
            "{activity:?} not in the policy"
        );
    }
    assert!(!block.contains("states:*") && !block.contains("dynamodb:*"));
    assert!(!block.contains("Action: \"*\""));
    // Operators redrive an execution whose compensation gave up, and list open incidents.
    assert!(block.contains("- states:RedriveExecution\n"), "{block}");
    assert!(
        block.contains("Resource: !Sub \"${Table.Arn}/index/open-incidents\"\n"),
        "{block}"
    );
    // Every index is queried by the service (the queues, the repair loop, GET /orders).
    for (index, _, _) in store_dynamodb::INDEXES {
        assert!(
            block.contains(&format!("!Sub \"${{Table.Arn}}/index/{index}\"\n")),
            "the service may not query {index}: {block}"
        );
    }
    // The repair loop's frequent passes query what was created within their window.
    assert!(
        block.contains("Resource: !Sub \"${Table.Arn}/index/created\"\n"),
        "{block}"
    );
}

/// `serve` runs the audit's reads in its repair loop, and `audit --repair` runs under the
/// service's policy: every action the audit may take, the service may too.
#[test]
fn the_service_may_read_all_the_audit_reads_for_its_repair_loop() {
    let (service, audit) = (resource("ServicePolicy"), resource("AuditPolicy"));
    let actions = |block: &str| -> Vec<String> {
        block
            .split(|c: char| c.is_whitespace() || c == '"')
            .filter(|w| w.starts_with("states:") || w.starts_with("dynamodb:"))
            .map(str::to_owned)
            .collect()
    };
    let audit_actions = actions(&audit);
    assert!(audit_actions.len() >= 4, "{audit_actions:?}");
    let service_actions = actions(&service);
    for action in &audit_actions {
        assert!(
            service_actions.contains(action),
            "{action} is the audit's, not the service's: {service}"
        );
    }
}

#[test]
fn the_audit_may_read_and_heartbeat_and_nothing_more() {
    let block = resource("AuditPolicy");
    for action in [
        "states:DescribeExecution",
        "states:ListExecutions",
        "states:SendTaskHeartbeat",
        "dynamodb:GetItem",
        "dynamodb:Scan",
    ] {
        assert!(block.contains(action), "{action} not in {block}");
    }
    for write in [
        "StartExecution",
        "StopExecution",
        "SendTaskSuccess",
        "SendTaskFailure",
        "GetActivityTask",
        "PutItem",
        "UpdateItem",
        "DeleteItem",
        "states:*",
        "dynamodb:*",
        "Action: \"*\"",
    ] {
        assert!(!block.contains(write), "{write} in {block}");
    }
    assert!(
        DEPLOY.contains("Value: !Ref AuditPolicy\n"),
        "an output names it"
    );
}

#[test]
fn the_table_has_the_shape_the_dynamodb_adapter_uses() {
    use store_dynamodb as schema;
    let block = resource("Table");
    assert!(block.contains("BillingMode: PAY_PER_REQUEST"), "{block}");
    let key = format!(
        "KeySchema:\n        - AttributeName: {}\n          KeyType: HASH\n",
        schema::PARTITION_KEY
    );
    assert!(block.contains(&key), "table key: {block}");
    for (name, hash, range) in schema::INDEXES {
        let index = format!(
            "- IndexName: {name}\n          KeySchema:\n            - AttributeName: {hash}\n              KeyType: HASH\n            - AttributeName: {range}\n              KeyType: RANGE\n          Projection:\n            ProjectionType: {}\n",
            schema::PENDING_APPROVALS_PROJECTION.as_str()
        );
        assert!(block.contains(&index), "index {name}: {block}");
    }
    let index_keys = schema::INDEXES
        .iter()
        .flat_map(|(_, hash, range)| [*hash, *range]);
    for attribute in std::iter::once(schema::PARTITION_KEY).chain(index_keys) {
        assert!(
            block.contains(&format!(
                "- AttributeName: {attribute}\n          AttributeType: S\n"
            )),
            "attribute {attribute}: {block}"
        );
    }
}

/// Orders start through the alias `live` only, the alias and a version of the deployed
/// definition are declared, and the service may make each start's upgrade.
#[test]
fn the_service_starts_orders_through_live_only_and_may_upgrade_the_saga() {
    let block = resource("ServicePolicy");
    let start = block
        .split("- Sid: ")
        .find(|s| s.contains("states:StartExecution"))
        .expect("a statement allows StartExecution");
    assert!(
        start.contains(&format!(
            "states:StateMachineQualifier: {}\n",
            workflow::definition::LIVE_ALIAS
        )),
        "{start}"
    );
    for action in [
        "DescribeStateMachine",
        "UpdateStateMachine",
        "PublishStateMachineVersion",
        "ListStateMachineVersions",
        "DescribeStateMachineAlias",
        "CreateStateMachineAlias",
        "UpdateStateMachineAlias",
    ] {
        assert!(
            block.contains(&format!("- states:{action}\n")),
            "{action}: {block}"
        );
    }
    let alias = resource("LiveAlias");
    assert!(
        alias.contains("Type: AWS::StepFunctions::StateMachineAlias\n"),
        "{alias}"
    );
    assert!(
        alias.contains(&format!("Name: {}\n", workflow::definition::LIVE_ALIAS)),
        "{alias}"
    );
    assert!(
        alias.contains("StateMachineVersionArn: !Ref StateMachineVersion\n"),
        "{alias}"
    );
    let version = resource("StateMachineVersion");
    assert!(
        version.contains("StateMachineRevisionId: !GetAtt StateMachine.StateMachineRevisionId\n"),
        "{version}"
    );
}
