//! The AWS Step Functions adapter of the workflow port (`workflow::aws`) against the engine's Step
//! Functions endpoint (the router behind `fulfillment engine`) on a loopback socket, through a
//! real `aws-sdk-sfn` client: provisioning, then the saga's executions driven through the port.
//! Where the embedded adapter can see the same execution (it shares the endpoint's engine), the
//! two adapters must tell the same: descriptions, errors and every history event.

use aws_sdk_sfn::config::{BehaviorVersion, Credentials, Region};
use chrono::{SubsecRound, Utc};
use engine::{Engine, EngineConfig};
use serde_json::{Value, json};
use sfn_server::SfnSettings;
use std::time::{Duration, Instant};
use workflow::aws::{AwsWorkflow, provision};
use workflow::definition::{Activity, STATE_MACHINE_NAME};
use workflow::{EmbeddedWorkflow, TaskHandle, WorkflowError, WorkflowPort};

/// The role the engine gives a machine created without one, so the embedded adapter's setup
/// finds the provisioned machine as it is.
const ROLE: &str = "arn:aws:iam::123456789012:role/StepFunctionsEngine";
const DEADLINE: Duration = Duration::from_secs(20);

/// The engine's endpoint on 127.0.0.1, and an SDK client for it.
struct Endpoint {
    engine: Engine,
    client: aws_sdk_sfn::Client,
    _dir: tempfile::TempDir,
}

impl Endpoint {
    /// An endpoint that holds a poll for `poll_wait` when there is no work.
    async fn start(poll_wait: Duration) -> Endpoint {
        let dir = tempfile::tempdir().unwrap();
        let engine = Engine::open(EngineConfig::new(dir.path().join("engine.db")), None)
            .await
            .unwrap();
        let router = sfn_server::router(
            engine.clone(),
            SfnSettings {
                poll_wait,
                ..SfnSettings::default()
            },
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await });
        let config = aws_config::defaults(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("test", "test", None, None, "static"))
            .endpoint_url(format!("http://{addr}"))
            .load()
            .await;
        Endpoint {
            engine,
            client: aws_sdk_sfn::Client::new(&config),
            _dir: dir,
        }
    }

    /// Provisions the saga; the AWS adapter on it, and the embedded one on the same engine.
    async fn saga(&self) -> (AwsWorkflow, EmbeddedWorkflow) {
        let provisioned = provision(&self.client, ROLE).await.unwrap();
        let aws = AwsWorkflow::new(self.client.clone(), &provisioned.state_machine_arn).unwrap();
        let embedded = EmbeddedWorkflow::setup(self.engine.clone()).await.unwrap();
        (aws, embedded)
    }

    async fn finished(&self, arn: &str) {
        let d = self
            .engine
            .wait_for_completion(arn, DEADLINE)
            .await
            .unwrap();
        assert!(d.status.is_terminal(), "{d:?}");
    }
}

fn order(id: &str, requires_approval: bool) -> Value {
    json!({
        "orderId": id,
        "amountCents": 4200,
        "currency": "EUR",
        "requiresApproval": requires_approval,
        "approvalTimeoutSeconds": 3720,
        "approvalHeartbeatSeconds": 60,
        "approvalWindowSeconds": 3600,
    })
}

/// Polls `activity` until a task comes (each poll is held by the endpoint for its wait).
async fn task(aws: &AwsWorkflow, activity: Activity) -> TaskHandle {
    let started = Instant::now();
    loop {
        let polled = aws
            .get_activity_task(aws.activity_arn(activity), "worker-1", Duration::ZERO)
            .await
            .unwrap();
        if let Some(task) = polled {
            return task;
        }
        assert!(started.elapsed() < DEADLINE, "no {activity:?} task came");
    }
}

async fn succeed(aws: &AwsWorkflow, activity: Activity, output: Value) -> TaskHandle {
    let task = task(aws, activity).await;
    aws.send_task_success(&task.task_token, &output)
        .await
        .unwrap();
    task
}

/// The execution's history through the AWS adapter, read in pages of `max_results`.
async fn paged(aws: &AwsWorkflow, arn: &str, max_results: u32) -> Vec<Value> {
    let mut events = Vec::new();
    let mut token = None;
    loop {
        let page = aws
            .get_execution_history(arn, token, max_results)
            .await
            .unwrap();
        assert!(page.events.len() <= max_results as usize);
        events.extend(page.events);
        match page.next_token {
            Some(t) => token = Some(t),
            None => return events,
        }
    }
}

/// The history, which must be the same read in small pages or in one, and through either
/// adapter; its event types.
async fn history(aws: &AwsWorkflow, embedded: &EmbeddedWorkflow, arn: &str) -> Vec<Value> {
    let whole = aws.get_execution_history(arn, None, 1000).await.unwrap();
    assert_eq!(whole.next_token, None);
    assert_eq!(paged(aws, arn, 2).await, whole.events, "pages join up");
    let direct = embedded
        .get_execution_history(arn, None, 1000)
        .await
        .unwrap();
    assert_eq!(
        whole.events, direct.events,
        "both adapters tell the same history"
    );
    let ids: Vec<u64> = whole
        .events
        .iter()
        .map(|e| e["id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, (1..=whole.events.len() as u64).collect::<Vec<_>>());
    whole.events
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

fn details<'a>(events: &'a [Value], kind: &str) -> &'a Value {
    let event = events
        .iter()
        .find(|e| e["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {events:#?}"));
    let key = event
        .as_object()
        .unwrap()
        .keys()
        .find(|k| k.ends_with("EventDetails"))
        .unwrap_or_else(|| panic!("{kind} has no details"));
    &event[key]
}

/// Both adapters describe the execution alike; the description.
async fn described(
    aws: &AwsWorkflow,
    embedded: &EmbeddedWorkflow,
    arn: &str,
) -> workflow::ExecutionInfo {
    let d = aws.describe_execution(arn).await.unwrap();
    assert_eq!(d, embedded.describe_execution(arn).await.unwrap());
    d
}

#[tokio::test(flavor = "multi_thread")]
async fn provisioning_twice_finds_what_the_first_run_made() {
    let sfn = Endpoint::start(Duration::from_secs(1)).await;
    let first = provision(&sfn.client, ROLE).await.unwrap();
    let second = provision(&sfn.client, ROLE).await.unwrap();
    assert_eq!(first, second);
    assert_eq!(
        first.state_machine_arn,
        format!("arn:aws:states:us-east-1:123456789012:stateMachine:{STATE_MACHINE_NAME}")
    );
    assert_eq!(first.activity_arns.len(), Activity::ALL.len());
    // The service is configured with the machine's ARN alone: the adapter derives the rest.
    let aws = AwsWorkflow::new(sfn.client.clone(), &first.state_machine_arn).unwrap();
    let embedded = EmbeddedWorkflow::setup(sfn.engine.clone()).await.unwrap();
    assert_eq!(embedded.state_machine_arn(), first.state_machine_arn);
    for a in Activity::ALL {
        assert_eq!(aws.activity_arn(a), first.activity_arns[&a], "{a:?}");
        assert_eq!(embedded.activity_arn(a), first.activity_arns[&a], "{a:?}");
    }
    assert_eq!(aws.execution_arn("o-1"), embedded.execution_arn("o-1"));
}

#[tokio::test(flavor = "multi_thread")]
async fn provisioning_over_another_definition_updates_it_and_running_executions_keep_theirs() {
    let sfn = Endpoint::start(Duration::from_secs(1)).await;
    let old = r#"{"StartAt":"W","States":{"W":{"Type":"Wait","Seconds":1,"Next":"P"},"P":{"Type":"Pass","Result":"old","End":true}}}"#;
    let created = sfn
        .client
        .create_state_machine()
        .name(STATE_MACHINE_NAME)
        .definition(old)
        .role_arn(ROLE)
        .send()
        .await
        .unwrap();
    let running = sfn
        .client
        .start_execution()
        .state_machine_arn(created.state_machine_arn())
        .name("started-before")
        .send()
        .await
        .unwrap();
    let provisioned = provision(&sfn.client, ROLE).await.unwrap();
    assert_eq!(provisioned.state_machine_arn, created.state_machine_arn());
    let now = sfn
        .engine
        .describe_state_machine(created.state_machine_arn())
        .await
        .unwrap();
    assert_ne!(now.definition, old, "provisioning updated the machine");
    let kept = sfn
        .engine
        .describe_state_machine_for_execution(running.execution_arn())
        .await
        .unwrap();
    assert_eq!(kept.definition, old);
    let finished = sfn
        .engine
        .wait_for_completion(running.execution_arn(), DEADLINE)
        .await
        .unwrap();
    assert_eq!(finished.output.as_deref(), Some("\"old\""));
}

/// Where the machine's alias `live` routes, as (version ARN, weight) pairs.
async fn live(sfn: &Endpoint, machine: &str) -> Vec<(String, i32)> {
    sfn.client
        .describe_state_machine_alias()
        .state_machine_alias_arn(format!("{machine}:live"))
        .send()
        .await
        .unwrap()
        .routing_configuration()
        .iter()
        .map(|r| (r.state_machine_version_arn().to_owned(), r.weight()))
        .collect()
}

/// The start's upgrade over Step Functions: on a machine provisioned with an earlier release's
/// definition and no alias, it publishes this build's and creates `live`; executions start
/// through `live` and run the version; a second start changes nothing.
#[tokio::test(flavor = "multi_thread")]
async fn the_upgrade_publishes_this_builds_definition_and_starts_go_through_live() {
    let sfn = Endpoint::start(Duration::from_secs(1)).await;
    let provisioned = provision(&sfn.client, ROLE).await.unwrap();
    let machine = provisioned.state_machine_arn.clone();
    let mut aws = AwsWorkflow::new(sfn.client.clone(), &machine).unwrap();
    let upgraded = aws.upgrade(None).await.unwrap();
    assert_eq!(upgraded.decision, workflow::upgrade::Decision::Create);
    let version = upgraded.version_arn.clone().unwrap();
    assert_eq!(live(&sfn, &machine).await, [(version.clone(), 100)]);
    assert_eq!(aws.start_arn(), format!("{machine}:live"));
    let started = aws
        .start_execution("through-live", &order("through-live", false))
        .await
        .unwrap();
    let d = sfn
        .client
        .describe_execution()
        .execution_arn(&started.execution_arn)
        .send()
        .await
        .unwrap();
    assert_eq!(d.state_machine_version_arn(), Some(version.as_str()));
    assert_eq!(d.state_machine_alias_arn(), Some(aws.start_arn()));

    let again = aws.upgrade(None).await.unwrap();
    assert_eq!(again.decision, workflow::upgrade::Decision::Keep);
    assert_eq!(again.version_arn, Some(version));
    let versions = sfn
        .client
        .list_state_machine_versions()
        .state_machine_arn(&machine)
        .send()
        .await
        .unwrap();
    assert_eq!(versions.state_machine_versions().len(), 1);
}

/// The operators' verbs over Step Functions: list, rollback (pinned: the next start leaves it),
/// promote.
#[tokio::test(flavor = "multi_thread")]
async fn versions_are_listed_rolled_back_and_promoted_over_step_functions() {
    let sfn = Endpoint::start(Duration::from_secs(1)).await;
    let machine = provision(&sfn.client, ROLE)
        .await
        .unwrap()
        .state_machine_arn;
    let mut old = AwsWorkflow::new(sfn.client.clone(), &machine).unwrap();
    let earlier = r#"{"StartAt":"A","States":{"A":{"Type":"Pass","End":true}}}"#;
    let v1 = old
        .upgrade_to(earlier, "fulfillment 0.0.1 definition sha256:a", None)
        .await
        .unwrap()
        .version_arn
        .unwrap();
    let mut aws = AwsWorkflow::new(sfn.client.clone(), &machine).unwrap();
    let v2 = aws.upgrade(None).await.unwrap().version_arn.unwrap();
    let report = aws.versions(10).await.unwrap();
    let lines: Vec<_> = report
        .versions
        .iter()
        .map(|v| (v.version.number, v.live_weight))
        .collect();
    assert_eq!(lines, [(2, Some(100)), (1, None)]);

    let back = aws.rollback(None).await.unwrap();
    assert_eq!((back.from, back.to), (2, 1));
    let again = aws.upgrade(None).await.unwrap();
    assert_eq!(again.decision, workflow::upgrade::Decision::Pinned);
    assert_eq!(live(&sfn, &machine).await, [(v1, 100)]);
    assert_eq!(aws.promote().await.unwrap(), 2);
    assert_eq!(live(&sfn, &machine).await, [(v2, 100)]);
}

/// Two replicas of different builds starting at once: each publishes at most one version,
/// neither start fails, and `live` ends wholly on one of them.
#[tokio::test(flavor = "multi_thread")]
async fn replicas_of_two_builds_starting_at_once_each_publish_once_and_live_ends_on_one() {
    let sfn = Endpoint::start(Duration::from_secs(1)).await;
    let machine = provision(&sfn.client, ROLE)
        .await
        .unwrap()
        .state_machine_arn;
    let a_def = r#"{"StartAt":"A","States":{"A":{"Type":"Pass","End":true}}}"#;
    let b_def = r#"{"StartAt":"B","States":{"B":{"Type":"Pass","End":true}}}"#;
    for round in 0..5 {
        let mut a = AwsWorkflow::new(sfn.client.clone(), &machine).unwrap();
        let mut b = AwsWorkflow::new(sfn.client.clone(), &machine).unwrap();
        let (a_desc, b_desc) = (
            format!("fulfillment 1.{round}.0 definition sha256:a"),
            format!("fulfillment 1.{round}.0 definition sha256:b"),
        );
        let (ra, rb) = tokio::join!(
            a.upgrade_to(a_def, &a_desc, None),
            b.upgrade_to(b_def, &b_desc, None)
        );
        let (ra, rb) = (ra.unwrap(), rb.unwrap());
        let routed = live(&sfn, &machine).await;
        assert_eq!(routed.len(), 1, "{routed:?}");
        let published: Vec<_> = [&ra.version_arn, &rb.version_arn]
            .into_iter()
            .flatten()
            .collect();
        assert!(
            published.iter().any(|v| **v == routed[0].0),
            "live routes to one of the two: {routed:?}, {ra:?}, {rb:?}"
        );
        let versions = sfn
            .client
            .list_state_machine_versions()
            .state_machine_arn(&machine)
            .send()
            .await
            .unwrap();
        assert!(
            versions.state_machine_versions().len() <= 2 * (round + 1),
            "at most one version per build and round: {:?}",
            versions.state_machine_versions()
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_order_runs_to_completion_through_the_port() {
    let sfn = Endpoint::start(Duration::from_secs(1)).await;
    let (aws, embedded) = sfn.saga().await;
    let input = order("o-1", false);

    let started = aws.start_execution("o-1", &input).await.unwrap();
    assert!(!started.already_started);
    let arn = started.execution_arn;
    assert_eq!(arn, aws.execution_arn("o-1"));
    let running = described(&aws, &embedded, &arn).await;
    assert_eq!(running.status, "RUNNING");
    assert_eq!((running.stop_date, running.output), (None, None));

    // A repeat is told by its start date, in milliseconds: one in the same millisecond as the
    // start would look new.
    while Utc::now().trunc_subsecs(3) <= running.start_date {
        tokio::task::yield_now().await;
    }
    let again = aws.start_execution("o-1", &input).await.unwrap();
    assert!(again.already_started);
    assert_eq!(again.execution_arn, arn);
    let other = aws.start_execution("o-1", &order("o-1", true)).await;
    assert!(
        matches!(other, Err(WorkflowError::ExecutionAlreadyExists(_))),
        "{other:?}"
    );

    let reserve = task(&aws, Activity::ReserveInventory).await;
    assert_eq!(reserve.input, json!({"orderId": "o-1"}));
    aws.send_task_heartbeat(&reserve.task_token).await.unwrap();
    aws.send_task_success(&reserve.task_token, &json!({"reserved": true}))
        .await
        .unwrap();
    succeed(&aws, Activity::ChargePayment, json!({"chargeId": "ch_1"})).await;
    succeed(
        &aws,
        Activity::CreateShipment,
        json!({"trackingNumber": "1Z"}),
    )
    .await;
    sfn.finished(&arn).await;

    let done = described(&aws, &embedded, &arn).await;
    assert_eq!(done.status, "SUCCEEDED");
    assert!(done.stop_date.is_some());
    let output = done.output.unwrap();
    assert_eq!(output["shipment"], json!({"trackingNumber": "1Z"}));
    assert_eq!(output["payment"], json!({"chargeId": "ch_1"}));
    assert_eq!((done.error, done.cause), (None, None));

    // The closed task's token is dead; a token never issued is invalid.
    let token = &reserve.task_token;
    for answer in [
        aws.send_task_heartbeat(token).await,
        aws.send_task_success(token, &json!({})).await,
        aws.send_task_failure(token, "E", "c").await,
    ] {
        assert!(
            matches!(answer, Err(WorkflowError::TaskTimedOut(_))),
            "{answer:?}"
        );
    }
    let garbage = aws.send_task_heartbeat("not a token!").await;
    assert!(
        matches!(garbage, Err(WorkflowError::InvalidToken(_))),
        "{garbage:?}"
    );
    // A closed execution is "already started", whatever the input.
    for input in [input.clone(), order("o-1", true)] {
        let repeat = aws.start_execution("o-1", &input).await.unwrap();
        assert!(repeat.already_started);
        assert_eq!(repeat.execution_arn, arn);
    }

    let events = history(&aws, &embedded, &arn).await;
    let task_steps = [
        "TaskStateEntered",
        "ActivityScheduled",
        "ActivityStarted",
        "ActivitySucceeded",
        "TaskStateExited",
    ];
    let mut expected = vec!["ExecutionStarted"];
    expected.extend(task_steps);
    expected.extend(task_steps);
    expected.extend(["ChoiceStateEntered", "ChoiceStateExited"]);
    expected.extend(task_steps);
    expected.extend([
        "SucceedStateEntered",
        "SucceedStateExited",
        "ExecutionSucceeded",
    ]);
    assert_eq!(types(&events), expected);
    assert_eq!(
        details(&events, "ActivityStarted"),
        &json!({"workerName": "worker-1"})
    );
    let scheduled = details(&events, "ActivityScheduled");
    assert_eq!(
        scheduled["resource"],
        aws.activity_arn(Activity::ReserveInventory)
    );
    assert_eq!(
        (
            &scheduled["timeoutInSeconds"],
            &scheduled["heartbeatInSeconds"]
        ),
        (&json!(120), &json!(20))
    );
    assert_eq!(
        details(&events, "ChoiceStateEntered")["name"],
        "NeedsApproval"
    );
    let started = details(&events, "ExecutionStarted");
    assert_eq!(started["roleArn"], ROLE);
    assert_eq!(
        serde_json::from_str::<Value>(started["input"].as_str().unwrap()).unwrap(),
        input
    );
    assert!(events[0]["timestamp"].as_str().unwrap().ends_with('Z'));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_step_is_compensated_and_the_execution_fails_with_its_error() {
    let sfn = Endpoint::start(Duration::from_secs(1)).await;
    let (aws, embedded) = sfn.saga().await;
    let arn = aws
        .start_execution("o-2", &order("o-2", false))
        .await
        .unwrap()
        .execution_arn;
    let reserve = task(&aws, Activity::ReserveInventory).await;
    aws.send_task_failure(&reserve.task_token, "Inventory.OutOfStock", "sku-1: 0 left")
        .await
        .unwrap();
    // The release first, then the refund, which hands the failure on to the Fail state.
    let release = succeed(&aws, Activity::ReleaseInventory, json!({"released": false})).await;
    assert_eq!(
        release.input["failure"],
        json!({"Error": "Inventory.OutOfStock", "Cause": "sku-1: 0 left"})
    );
    succeed(
        &aws,
        Activity::RefundPayment,
        json!({"error": "Inventory.OutOfStock", "cause": "sku-1: 0 left"}),
    )
    .await;
    sfn.finished(&arn).await;

    let d = described(&aws, &embedded, &arn).await;
    assert_eq!(d.status, "FAILED");
    assert_eq!(d.error.as_deref(), Some("Inventory.OutOfStock"));
    assert_eq!(d.cause.as_deref(), Some("sku-1: 0 left"));
    assert_eq!(d.output, None);

    let events = history(&aws, &embedded, &arn).await;
    let kinds = types(&events);
    assert_eq!(
        kinds[..5],
        [
            "ExecutionStarted",
            "TaskStateEntered",
            "ActivityScheduled",
            "ActivityStarted",
            "ActivityFailed"
        ]
    );
    assert_eq!(
        kinds[kinds.len() - 2..],
        ["FailStateEntered", "ExecutionFailed"]
    );
    assert_eq!(
        details(&events, "ActivityFailed"),
        &json!({"error": "Inventory.OutOfStock", "cause": "sku-1: 0 left"})
    );
    assert_eq!(
        details(&events, "ExecutionFailed"),
        &json!({"error": "Inventory.OutOfStock", "cause": "sku-1: 0 left"})
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stopped_execution_is_aborted_and_its_task_token_dies() {
    let sfn = Endpoint::start(Duration::from_secs(1)).await;
    let (aws, embedded) = sfn.saga().await;
    let arn = aws
        .start_execution("o-3", &order("o-3", false))
        .await
        .unwrap()
        .execution_arn;
    let reserve = task(&aws, Activity::ReserveInventory).await;
    aws.stop_execution(&arn, "Operator.Cancelled", "by hand")
        .await
        .unwrap();
    sfn.finished(&arn).await;
    let d = described(&aws, &embedded, &arn).await;
    assert_eq!(d.status, "ABORTED");
    assert_eq!(d.error.as_deref(), Some("Operator.Cancelled"));
    assert_eq!(d.cause.as_deref(), Some("by hand"));
    let late = aws.send_task_success(&reserve.task_token, &json!({})).await;
    assert!(
        matches!(late, Err(WorkflowError::TaskTimedOut(_))),
        "{late:?}"
    );
    let events = history(&aws, &embedded, &arn).await;
    assert_eq!(types(&events).last(), Some(&"ExecutionAborted"));
    assert_eq!(
        details(&events, "ExecutionAborted"),
        &json!({"error": "Operator.Cancelled", "cause": "by hand"})
    );

    // Without an error or a cause, neither is set.
    let arn = aws
        .start_execution("o-4", &order("o-4", false))
        .await
        .unwrap()
        .execution_arn;
    aws.stop_execution(&arn, "", "").await.unwrap();
    sfn.finished(&arn).await;
    let d = described(&aws, &embedded, &arn).await;
    assert_eq!(
        (d.status.as_str(), d.error, d.cause),
        ("ABORTED", None, None)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_past_its_timeout_answers_task_timed_out() {
    let sfn = Endpoint::start(Duration::from_secs(1)).await;
    let (aws, embedded) = sfn.saga().await;
    let mut input = order("o-5", true);
    input["approvalTimeoutSeconds"] = json!(2);
    input["approvalHeartbeatSeconds"] = json!(1);
    let arn = aws
        .start_execution("o-5", &input)
        .await
        .unwrap()
        .execution_arn;
    succeed(&aws, Activity::ReserveInventory, json!({})).await;
    succeed(&aws, Activity::ChargePayment, json!({})).await;
    let approval = task(&aws, Activity::AwaitApproval).await;
    // Heartbeats keep the heartbeat clock from firing, never the task's own timeout.
    let started = Instant::now();
    let dead = loop {
        match aws.send_task_heartbeat(&approval.task_token).await {
            Ok(()) => assert!(started.elapsed() < DEADLINE, "the task never timed out"),
            Err(e) => break e,
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(matches!(dead, WorkflowError::TaskTimedOut(_)), "{dead:?}");
    // The timeout is caught: the saga compensates.
    succeed(&aws, Activity::ReleaseInventory, json!({})).await;
    succeed(
        &aws,
        Activity::RefundPayment,
        json!({"error": "States.Timeout", "cause": "approval timed out"}),
    )
    .await;
    sfn.finished(&arn).await;
    let events = history(&aws, &embedded, &arn).await;
    assert!(types(&events).contains(&"ActivityTimedOut"), "{events:#?}");
    assert_eq!(
        details(&events, "ActivityTimedOut")["error"],
        "States.Timeout"
    );
    assert_eq!(
        described(&aws, &embedded, &arn).await.error.as_deref(),
        Some("States.Timeout")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn polls_wait_for_work_and_several_pollers_share_it() {
    let sfn = Endpoint::start(Duration::from_secs(1)).await;
    let (aws, _) = sfn.saga().await;
    let reserve = aws.activity_arn(Activity::ReserveInventory).to_owned();
    let started = Instant::now();
    let idle = aws
        .get_activity_task(&reserve, "w", Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(idle, None);
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "the poll was held"
    );

    let pollers: Vec<_> = (0..3)
        .map(|i| {
            let (aws, reserve) = (aws.clone(), reserve.clone());
            tokio::spawn(async move {
                aws.get_activity_task(&reserve, &format!("w-{i}"), Duration::ZERO)
                    .await
                    .unwrap()
            })
        })
        .collect();
    for id in ["o-a", "o-b"] {
        aws.start_execution(id, &order(id, false)).await.unwrap();
    }
    let mut tasks = Vec::new();
    for poller in pollers {
        tasks.extend(poller.await.unwrap());
    }
    assert!(tasks.len() <= 2, "each task is handed out once: {tasks:?}");
    // A poller that came back empty before the starts missed nothing: the tasks wait.
    while tasks.len() < 2 {
        tasks.push(task(&aws, Activity::ReserveInventory).await);
    }
    let mut orders: Vec<_> = tasks.iter().map(|t| t.input["orderId"].clone()).collect();
    orders.sort_by_key(|o| o.to_string());
    assert_eq!(orders, ["o-a", "o-b"]);
    assert_ne!(tasks[0].task_token, tasks[1].task_token);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_poll_held_longer_than_the_sdks_stall_grace_period_still_answers() {
    // aws-sdk-sfn's stalled-stream protection gives up on a silent stream after 5 s; a
    // GetActivityTask is silent for up to 60 s.
    let sfn = Endpoint::start(Duration::from_secs(7)).await;
    let (aws, _) = sfn.saga().await;
    let started = Instant::now();
    let polled = aws
        .get_activity_task(
            aws.activity_arn(Activity::CreateShipment),
            "w",
            Duration::ZERO,
        )
        .await;
    assert_eq!(polled, Ok(None));
    assert!(started.elapsed() >= Duration::from_secs(6));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stopped_execution_is_redriven_through_either_adapter_and_a_running_one_refused() {
    let sfn = Endpoint::start(Duration::from_secs(1)).await;
    let (aws, embedded) = sfn.saga().await;
    let arn = aws
        .start_execution("o-8", &order("o-8", false))
        .await
        .unwrap()
        .execution_arn;
    let adapters: [&dyn WorkflowPort; 2] = [&aws, &embedded];
    for port in adapters {
        let refused = port.redrive_execution(&arn).await;
        match refused {
            Err(WorkflowError::NotRedrivable(m)) => assert!(m.contains("RUNNING"), "{m}"),
            other => panic!("{other:?}"),
        }
    }
    let d = described(&aws, &embedded, &arn).await;
    assert_eq!(d.redrive_status.as_deref(), Some("NOT_REDRIVABLE"));
    assert_eq!(d.redrive_count, 0);

    for (round, port) in adapters.into_iter().enumerate() {
        port.stop_execution(&arn, "Operator", "paused")
            .await
            .unwrap();
        sfn.finished(&arn).await;
        let d = described(&aws, &embedded, &arn).await;
        assert_eq!(d.status, "ABORTED");
        assert_eq!(d.redrive_status.as_deref(), Some("REDRIVABLE"));
        assert_eq!(d.redrive_status_reason, None);
        let outcome = port.redrive_execution(&arn).await.unwrap();
        let d = described(&aws, &embedded, &arn).await;
        assert_eq!(d.status, "RUNNING");
        assert_eq!(d.redrive_count, round as u32 + 1);
        assert_eq!(d.redrive_date, Some(outcome.redrive_date));
    }
    // Both redrives are in the history, told alike by both adapters.
    let events = history(&aws, &embedded, &arn).await;
    let redriven: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "ExecutionRedriven")
        .collect();
    assert_eq!(redriven.len(), 2);
    assert_eq!(
        redriven[1]["executionRedrivenEventDetails"],
        json!({"redriveCount": 2})
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_executions_and_tokens_fail_alike_through_both_adapters() {
    let sfn = Endpoint::start(Duration::from_secs(1)).await;
    let (aws, embedded) = sfn.saga().await;
    let nowhere = aws.execution_arn("never-started");
    let adapters: [&dyn WorkflowPort; 2] = [&aws, &embedded];
    for port in adapters {
        let described = port.describe_execution(&nowhere).await;
        assert!(
            matches!(described, Err(WorkflowError::ExecutionDoesNotExist(_))),
            "{described:?}"
        );
        let history = port.get_execution_history(&nowhere, None, 10).await;
        assert!(
            matches!(history, Err(WorkflowError::ExecutionDoesNotExist(_))),
            "{history:?}"
        );
        let stopped = port.stop_execution(&nowhere, "E", "c").await;
        assert!(
            matches!(stopped, Err(WorkflowError::ExecutionDoesNotExist(_))),
            "{stopped:?}"
        );
        let redriven = port.redrive_execution(&nowhere).await;
        assert!(
            matches!(redriven, Err(WorkflowError::ExecutionDoesNotExist(_))),
            "{redriven:?}"
        );
        for token in ["not a token!", ""] {
            let answered = port.send_task_success(token, &json!({})).await;
            assert!(
                matches!(answered, Err(WorkflowError::InvalidToken(_))),
                "{token:?}: {answered:?}"
            );
        }
    }
    // A token-shaped text no task ever had: the engine answers TaskDoesNotExist, which the
    // embedded adapter calls invalid and the AWS one dead (on AWS it means a task that is gone);
    // callers treat both the same.
    let unknown = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
    let aws_says = aws.send_task_heartbeat(unknown).await;
    assert!(
        matches!(aws_says, Err(WorkflowError::TaskTimedOut(_))),
        "{aws_says:?}"
    );
    let embedded_says = embedded.send_task_heartbeat(unknown).await;
    assert!(
        matches!(embedded_says, Err(WorkflowError::InvalidToken(_))),
        "{embedded_says:?}"
    );

    // A page token that is not one.
    let arn = aws
        .start_execution("o-6", &order("o-6", false))
        .await
        .unwrap()
        .execution_arn;
    let bad = aws
        .get_execution_history(&arn, Some("nonsense".to_owned()), 10)
        .await;
    assert!(
        matches!(
            bad,
            Err(WorkflowError::Other(_) | WorkflowError::InvalidToken(_))
        ),
        "{bad:?}"
    );
}

/// The running executions are listed alike through both adapters, a stopped one not among them.
#[tokio::test(flavor = "multi_thread")]
async fn the_running_executions_are_listed_alike_through_both_adapters() {
    let sfn = Endpoint::start(Duration::from_secs(1)).await;
    let (aws, embedded) = sfn.saga().await;
    let mut arns = Vec::new();
    for id in ["o-l1", "o-l2", "o-l3"] {
        let started = aws.start_execution(id, &order(id, false)).await.unwrap();
        arns.push(started.execution_arn);
    }
    aws.stop_execution(&arns[2], "", "").await.unwrap();
    sfn.finished(&arns[2]).await;
    for port in [&aws as &dyn WorkflowPort, &embedded] {
        let page = port.list_running_executions(None).await.unwrap();
        let mut listed = page.execution_arns;
        listed.sort();
        assert_eq!(listed, arns[..2], "the running ones only");
        assert_eq!(page.next_token, None);
    }
}
