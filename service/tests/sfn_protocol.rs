//! The engine's Step Functions endpoint through its router (no socket), on a real engine over a
//! temporary SQLite file: every operation in AWS's JSON shapes, and every error in AWS's.

use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use engine::{Engine, EngineConfig};
use serde_json::{Value, json};
use service::config::{EngineSettings, LogFormat};
use service::startup::EngineServer;
use sfn_server::SfnSettings;
use std::time::Duration;
use tower::ServiceExt;

const CT: &str = "application/x-amz-json-1.0";

struct Sfn {
    engine: Engine,
    router: axum::Router,
    _dir: tempfile::TempDir,
}

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Value,
}

impl Answer {
    /// Asserts an AWS JSON error: 400, `__type` and `x-amzn-ErrorType` both `name`.
    fn assert_error(&self, name: &str) -> &str {
        assert_eq!(self.status, StatusCode::BAD_REQUEST, "{}", self.body);
        assert_eq!(self.body["__type"], name, "{}", self.body);
        assert_eq!(self.headers["x-amzn-errortype"], name);
        assert_eq!(self.headers["content-type"], CT);
        self.body["message"].as_str().unwrap()
    }

    fn ok(&self) -> &Value {
        assert_eq!(self.status, StatusCode::OK, "{}", self.body);
        assert_eq!(self.headers["content-type"], CT);
        &self.body
    }
}

impl Sfn {
    async fn start() -> Sfn {
        let dir = tempfile::tempdir().unwrap();
        let engine = Engine::open(EngineConfig::new(dir.path().join("e.db")), None)
            .await
            .unwrap();
        let settings = SfnSettings {
            poll_wait: Duration::from_secs(1),
            ..SfnSettings::default()
        };
        let router = sfn_server::router(engine.clone(), settings);
        Sfn {
            engine,
            router,
            _dir: dir,
        }
    }

    async fn raw(&self, target: Option<&str>, body: &str) -> Answer {
        let mut request = Request::post("/")
            .header("content-type", CT)
            // SigV4 signatures are accepted, whatever they say.
            .header("authorization", "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/states/aws4_request, SignedHeaders=host, Signature=00");
        if let Some(t) = target {
            request = request.header("x-amz-target", t);
        }
        let response = self
            .router
            .clone()
            .oneshot(request.body(Body::from(body.to_owned())).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        Answer {
            status,
            headers,
            body,
        }
    }

    async fn call(&self, operation: &str, body: Value) -> Answer {
        self.raw(
            Some(&format!("AWSStepFunctions.{operation}")),
            &body.to_string(),
        )
        .await
    }

    async fn activity(&self, name: &str) -> String {
        let r = self.call("CreateActivity", json!({ "name": name })).await;
        assert!(r.ok()["creationDate"].is_f64(), "{}", r.body);
        r.body["activityArn"].as_str().unwrap().to_owned()
    }

    async fn machine(&self, name: &str, definition: Value) -> String {
        let r = self
            .call(
                "CreateStateMachine",
                json!({
                    "name": name,
                    "definition": definition.to_string(),
                    "roleArn": "arn:aws:iam::123456789012:role/test",
                }),
            )
            .await;
        assert!(r.ok()["creationDate"].is_number(), "{}", r.body);
        r.body["stateMachineArn"].as_str().unwrap().to_owned()
    }

    /// A state machine of one Task on a new activity: (machine ARN, activity ARN).
    async fn activity_machine(&self, name: &str) -> (String, String) {
        let activity = self.activity(&format!("{name}-activity")).await;
        let sm = self
            .machine(
                name,
                json!({
                    "StartAt": "Work",
                    "States": { "Work": { "Type": "Task", "Resource": activity, "End": true } }
                }),
            )
            .await;
        (sm, activity)
    }

    async fn start_execution(&self, sm: &str, name: &str, input: Value) -> Answer {
        self.call(
            "StartExecution",
            json!({ "stateMachineArn": sm, "name": name, "input": input.to_string() }),
        )
        .await
    }

    /// Polls as `worker`; the task's (token, input).
    async fn task(&self, activity: &str, worker: &str) -> (String, Value) {
        let r = self
            .call(
                "GetActivityTask",
                json!({ "activityArn": activity, "workerName": worker }),
            )
            .await;
        let body = r.ok();
        let token = body["taskToken"].as_str().expect("a task").to_owned();
        let input = serde_json::from_str(body["input"].as_str().unwrap()).unwrap();
        (token, input)
    }

    async fn finished(&self, arn: &str) -> Value {
        let d = self
            .engine
            .wait_for_completion(arn, Duration::from_secs(20))
            .await
            .unwrap();
        assert!(d.status.is_terminal(), "{d:?}");
        self.call("DescribeExecution", json!({ "executionArn": arn }))
            .await
            .ok()
            .clone()
    }

    async fn history(&self, arn: &str, extra: Value) -> Value {
        let mut body = json!({ "executionArn": arn });
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        self.call("GetExecutionHistory", body).await.ok().clone()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_activity_task_runs_to_success_through_the_protocol() {
    let sfn = Sfn::start().await;
    let (sm, activity) = sfn.activity_machine("ok").await;

    let started = sfn.start_execution(&sm, "e-1", json!({"x": 1})).await;
    let arn = started.ok()["executionArn"].as_str().unwrap().to_owned();
    assert!(arn.ends_with(":execution:ok:e-1"), "{arn}");
    assert!(started.body["startDate"].is_f64());
    let again = sfn.start_execution(&sm, "e-1", json!({"x": 1})).await;
    assert_eq!(again.ok()["executionArn"], arn.as_str(), "idempotent");
    sfn.start_execution(&sm, "e-1", json!({"x": 2}))
        .await
        .assert_error("ExecutionAlreadyExists");

    let (token, input) = sfn.task(&activity, "worker-7").await;
    assert_eq!(input, json!({"x": 1}));
    let r = sfn
        .call("SendTaskHeartbeat", json!({ "taskToken": token }))
        .await;
    assert_eq!(r.ok(), &json!({}));
    let r = sfn
        .call(
            "SendTaskSuccess",
            json!({ "taskToken": token, "output": "{\"done\":true}" }),
        )
        .await;
    assert_eq!(r.ok(), &json!({}));

    let d = sfn.finished(&arn).await;
    assert_eq!(d["status"], "SUCCEEDED");
    assert_eq!(d["executionArn"], arn.as_str());
    assert_eq!(d["stateMachineArn"], sm.as_str());
    assert_eq!(d["name"], "e-1");
    assert_eq!(
        serde_json::from_str::<Value>(d["output"].as_str().unwrap()).unwrap(),
        json!({"done": true})
    );
    assert_eq!(d["input"], "{\"x\":1}");
    assert!(d["startDate"].is_f64() && d["stopDate"].is_f64(), "{d}");
    assert!(d.get("error").is_none() && d.get("cause").is_none());

    // The task is closed: its token is dead.
    sfn.call("SendTaskHeartbeat", json!({ "taskToken": token }))
        .await
        .assert_error("TaskTimedOut");

    let events = sfn.history(&arn, json!({})).await["events"].clone();
    let types: Vec<_> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "ExecutionStarted",
            "TaskStateEntered",
            "ActivityScheduled",
            "ActivityStarted",
            "ActivitySucceeded",
            "TaskStateExited",
            "ExecutionSucceeded"
        ]
    );
    let scheduled = &events[2];
    assert_eq!(
        scheduled["activityScheduledEventDetails"]["resource"],
        activity.as_str()
    );
    assert_eq!(scheduled["id"], 3);
    assert_eq!(scheduled["previousEventId"], 2);
    assert!(scheduled["timestamp"].is_f64());
    assert_eq!(
        events[3]["activityStartedEventDetails"]["workerName"],
        "worker-7"
    );
    assert!(events[1]["stateEnteredEventDetails"]["name"] == "Work");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_worker_failure_fails_the_execution_with_its_error_and_cause() {
    let sfn = Sfn::start().await;
    let (sm, activity) = sfn.activity_machine("fails").await;
    let arn = sfn.start_execution(&sm, "e-1", json!({})).await.ok()["executionArn"]
        .as_str()
        .unwrap()
        .to_owned();
    let (token, _) = sfn.task(&activity, "w").await;
    let r = sfn
        .call(
            "SendTaskFailure",
            json!({ "taskToken": token, "error": "Card.Declined", "cause": "insufficient funds" }),
        )
        .await;
    assert_eq!(r.ok(), &json!({}));
    let d = sfn.finished(&arn).await;
    assert_eq!(d["status"], "FAILED");
    assert_eq!(d["error"], "Card.Declined");
    assert_eq!(d["cause"], "insufficient funds");
    assert!(d.get("output").is_none());
    let events = sfn.history(&arn, json!({"reverseOrder": true})).await["events"].clone();
    assert_eq!(events[0]["type"], "ExecutionFailed");
    assert_eq!(
        events[0]["executionFailedEventDetails"]["error"],
        "Card.Declined"
    );
    assert_eq!(events[1]["type"], "ActivityFailed");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_execution_is_redriven_through_the_protocol() {
    let sfn = Sfn::start().await;
    let (sm, activity) = sfn.activity_machine("redrive").await;
    let arn = sfn.start_execution(&sm, "e-1", json!({"n": 1})).await.ok()["executionArn"]
        .as_str()
        .unwrap()
        .to_owned();
    let redrive = |token: Option<&str>| {
        let mut body = json!({ "executionArn": arn });
        if let Some(t) = token {
            body["clientToken"] = json!(t);
        }
        sfn.call("RedriveExecution", body)
    };
    let message = redrive(None)
        .await
        .assert_error("ExecutionNotRedrivable")
        .to_owned();
    assert_eq!(message, "Execution is RUNNING and cannot be redriven.");

    let (token, _) = sfn.task(&activity, "w").await;
    sfn.call(
        "SendTaskFailure",
        json!({ "taskToken": token, "error": "Boom", "cause": "first try" }),
    )
    .await
    .ok();
    let d = sfn.finished(&arn).await;
    assert_eq!(d["status"], "FAILED");
    assert_eq!(d["redriveCount"], 0);
    assert_eq!(d["redriveStatus"], "REDRIVABLE");
    assert!(d.get("redriveDate").is_none() && d.get("redriveStatusReason").is_none());

    let first = redrive(Some("token-1")).await;
    let date = first.ok()["redriveDate"].clone();
    assert!(date.is_f64(), "{}", first.body);
    assert_eq!(
        redrive(Some("token-1")).await.ok()["redriveDate"],
        date,
        "same token, same redrive"
    );
    let d = sfn
        .call("DescribeExecution", json!({ "executionArn": arn }))
        .await
        .ok()
        .clone();
    assert_eq!(d["status"], "RUNNING");
    assert_eq!(d["redriveCount"], 1);
    assert_eq!(d["redriveDate"], date);
    assert_eq!(d["redriveStatus"], "NOT_REDRIVABLE");
    assert_eq!(
        d["redriveStatusReason"],
        "Execution is RUNNING and cannot be redriven."
    );
    assert!(
        d.get("error").is_none() && d.get("stopDate").is_none(),
        "{d}"
    );

    let (token, input) = sfn.task(&activity, "w").await;
    assert_eq!(input, json!({"n": 1}));
    sfn.call(
        "SendTaskSuccess",
        json!({ "taskToken": token, "output": "{\"ok\":true}" }),
    )
    .await
    .ok();
    let d = sfn.finished(&arn).await;
    assert_eq!(d["status"], "SUCCEEDED");
    let events = sfn.history(&arn, json!({})).await["events"].clone();
    let redriven = events
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "ExecutionRedriven")
        .expect("an ExecutionRedriven event")
        .clone();
    assert_eq!(
        redriven["executionRedrivenEventDetails"],
        json!({"redriveCount": 1})
    );
    assert_eq!(redriven["id"], 7, "after ExecutionFailed (6)");
    let listed = sfn
        .call("ListExecutions", json!({ "stateMachineArn": sm }))
        .await
        .ok()["executions"][0]
        .clone();
    assert_eq!(listed["redriveCount"], 1);
    assert_eq!(listed["redriveDate"], date);

    sfn.call(
        "RedriveExecution",
        json!({ "executionArn": arn.replace("e-1", "e-none") }),
    )
    .await
    .assert_error("ExecutionDoesNotExist");
    sfn.call("RedriveExecution", json!({}))
        .await
        .assert_error("ValidationException");
}

#[tokio::test(flavor = "multi_thread")]
async fn no_work_answers_an_empty_object_after_the_wait() {
    let sfn = Sfn::start().await;
    let activity = sfn.activity("idle").await;
    let r = sfn
        .call("GetActivityTask", json!({ "activityArn": activity }))
        .await;
    assert_eq!(r.ok(), &json!({}));
    sfn.call(
        "GetActivityTask",
        json!({ "activityArn": "arn:aws:states:us-east-1:123456789012:activity:nope" }),
    )
    .await
    .assert_error("ActivityDoesNotExist");
}

#[tokio::test(flavor = "multi_thread")]
async fn task_tokens_are_checked() {
    let sfn = Sfn::start().await;
    for op in ["SendTaskSuccess", "SendTaskFailure", "SendTaskHeartbeat"] {
        sfn.call(op, json!({ "taskToken": "not a token!", "output": "{}" }))
            .await
            .assert_error("InvalidToken");
        let m = sfn
            .call(op, json!({ "output": "{}" }))
            .await
            .assert_error("ValidationException")
            .to_owned();
        assert!(m.contains("taskToken"), "{m}");
    }
    let (sm, activity) = sfn.activity_machine("m").await;
    sfn.start_execution(&sm, "e", json!({})).await.ok();
    let (token, _) = sfn.task(&activity, "w").await;
    sfn.call(
        "SendTaskSuccess",
        json!({ "taskToken": token, "output": "not json" }),
    )
    .await
    .assert_error("InvalidOutput");
}

#[tokio::test(flavor = "multi_thread")]
async fn history_pages_with_max_results_and_next_token() {
    let sfn = Sfn::start().await;
    let sm = sfn
        .machine(
            "passes",
            json!({
                "StartAt": "A",
                "States": {
                    "A": { "Type": "Pass", "Next": "B" },
                    "B": { "Type": "Pass", "Next": "C" },
                    "C": { "Type": "Pass", "End": true }
                }
            }),
        )
        .await;
    let arn = sfn.start_execution(&sm, "e", json!({"k": "v"})).await.ok()["executionArn"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(sfn.finished(&arn).await["status"], "SUCCEEDED");
    let all = sfn.history(&arn, json!({})).await;
    assert!(all.get("nextToken").is_none());
    let all = all["events"].as_array().unwrap().clone();
    assert_eq!(all.len(), 8, "{all:?}");

    let mut paged = Vec::new();
    let mut token = Value::Null;
    loop {
        let page = sfn
            .history(&arn, json!({ "maxResults": 3, "nextToken": token }))
            .await;
        let events = page["events"].as_array().unwrap();
        assert!(events.len() <= 3);
        paged.extend(events.iter().cloned());
        match page.get("nextToken") {
            Some(t) => token = t.clone(),
            None => break,
        }
    }
    assert_eq!(paged, all);
    let ids: Vec<_> = paged.iter().map(|e| e["id"].as_u64().unwrap()).collect();
    assert_eq!(ids, (1..=8).collect::<Vec<_>>());

    let lean = sfn
        .history(
            &arn,
            json!({ "includeExecutionData": false, "maxResults": 1 }),
        )
        .await;
    let started = &lean["events"][0]["executionStartedEventDetails"];
    assert!(
        started.is_object() && started.get("input").is_none(),
        "{lean}"
    );

    let m = sfn
        .call(
            "GetExecutionHistory",
            json!({ "executionArn": arn, "maxResults": 1001 }),
        )
        .await
        .assert_error("ValidationException")
        .to_owned();
    assert!(m.contains("maxResults"), "{m}");
}

#[tokio::test(flavor = "multi_thread")]
async fn executions_are_listed_by_status_and_stopped() {
    let sfn = Sfn::start().await;
    let (sm, _) = sfn.activity_machine("list").await;
    let running = sfn.start_execution(&sm, "running", json!({})).await.ok()["executionArn"].clone();
    let stopped = sfn.start_execution(&sm, "stopped", json!({})).await.ok()["executionArn"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = sfn
        .call(
            "StopExecution",
            json!({ "executionArn": stopped, "error": "Op.Cancel", "cause": "by hand" }),
        )
        .await;
    assert!(r.ok()["stopDate"].is_f64(), "{}", r.body);
    let d = sfn.finished(&stopped).await;
    assert_eq!(d["status"], "ABORTED");
    assert_eq!(d["error"], "Op.Cancel");

    let list = |filter: Value| {
        let sm = sm.clone();
        let sfn = &sfn;
        async move {
            let mut body = json!({ "stateMachineArn": sm });
            if !filter.is_null() {
                body["statusFilter"] = filter;
            }
            sfn.call("ListExecutions", body).await.ok().clone()
        }
    };
    let aborted = list(json!("ABORTED")).await;
    let items = aborted["executions"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["executionArn"], stopped.as_str());
    assert_eq!(items[0]["status"], "ABORTED");
    assert_eq!(items[0]["stateMachineArn"], sm.as_str());
    assert!(items[0]["startDate"].is_f64() && items[0]["stopDate"].is_f64());
    let items = list(json!("RUNNING")).await["executions"].clone();
    assert_eq!(items.as_array().unwrap().len(), 1);
    assert_eq!(items[0]["executionArn"], running);
    assert!(items[0].get("stopDate").is_none());
    let everything = list(Value::Null).await;
    assert_eq!(everything["executions"].as_array().unwrap().len(), 2);

    let page = sfn
        .call(
            "ListExecutions",
            json!({ "stateMachineArn": sm, "maxResults": 1 }),
        )
        .await
        .ok()
        .clone();
    assert_eq!(page["executions"].as_array().unwrap().len(), 1);
    let next = sfn
        .call(
            "ListExecutions",
            json!({ "stateMachineArn": sm, "maxResults": 1, "nextToken": page["nextToken"] }),
        )
        .await
        .ok()
        .clone();
    assert_ne!(next["executions"][0], page["executions"][0]);

    sfn.call(
        "ListExecutions",
        json!({ "stateMachineArn": sm, "statusFilter": "DONE" }),
    )
    .await
    .assert_error("ValidationException");
    sfn.call(
        "ListExecutions",
        json!({ "stateMachineArn": "arn:aws:states:us-east-1:123456789012:stateMachine:nope" }),
    )
    .await
    .assert_error("StateMachineDoesNotExist");
}

#[tokio::test(flavor = "multi_thread")]
async fn state_machines_are_described_in_the_aws_shape() {
    let sfn = Sfn::start().await;
    let definition = json!({ "StartAt": "P", "States": { "P": { "Type": "Pass", "End": true } } });
    let sm = sfn.machine("described", definition.clone()).await;
    let d = sfn
        .call("DescribeStateMachine", json!({ "stateMachineArn": sm }))
        .await
        .ok()
        .clone();
    assert_eq!(d["stateMachineArn"], sm.as_str());
    assert_eq!(d["name"], "described");
    assert_eq!(d["definition"], definition.to_string());
    assert_eq!(d["roleArn"], "arn:aws:iam::123456789012:role/test");
    assert_eq!(d["type"], "STANDARD");
    assert_eq!(d["status"], "ACTIVE");
    assert!(d["creationDate"].is_f64());
    sfn.call(
        "DescribeStateMachine",
        json!({ "stateMachineArn": "arn:aws:states:us-east-1:123456789012:stateMachine:nope" }),
    )
    .await
    .assert_error("StateMachineDoesNotExist");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_definitions_and_express_machines_are_refused() {
    let sfn = Sfn::start().await;
    let bad =
        json!({ "StartAt": "First", "States": { "First": { "Type": "Pass", "Next": "Gone" } } });
    let m = sfn
        .call(
            "CreateStateMachine",
            json!({ "name": "bad", "definition": bad.to_string(), "roleArn": "arn:aws:iam::123456789012:role/r" }),
        )
        .await
        .assert_error("InvalidDefinition")
        .to_owned();
    assert!(m.contains("'First'") && m.contains("Gone"), "{m}");
    let good = json!({ "StartAt": "P", "States": { "P": { "Type": "Pass", "End": true } } });
    sfn.call(
        "CreateStateMachine",
        json!({ "name": "fast", "definition": good.to_string(), "type": "EXPRESS" }),
    )
    .await
    .assert_error("StateMachineTypeNotSupported");
    sfn.call(
        "CreateStateMachine",
        json!({ "name": "nodef", "roleArn": "arn:aws:iam::123456789012:role/r" }),
    )
    .await
    .assert_error("ValidationException");
    sfn.call("CreateActivity", json!({ "name": "has space" }))
        .await
        .assert_error("InvalidName");
}

#[tokio::test(flavor = "multi_thread")]
async fn protocol_errors_have_the_aws_shape() {
    let sfn = Sfn::start().await;
    let m = sfn
        .call("DeleteEverything", json!({}))
        .await
        .assert_error("UnknownOperationException")
        .to_owned();
    assert!(m.contains("DeleteEverything"), "{m}");
    sfn.raw(None, "{}")
        .await
        .assert_error("UnknownOperationException");
    sfn.raw(Some("AWSStepFunctions.CreateActivity"), "{\"name\": ")
        .await
        .assert_error("SerializationException");
    sfn.raw(Some("AWSStepFunctions.CreateActivity"), "[1, 2]")
        .await
        .assert_error("SerializationException");
    sfn.call("CreateActivity", json!({ "name": 7 }))
        .await
        .assert_error("SerializationException");
    sfn.call(
        "DescribeExecution",
        json!({ "executionArn": "arn:aws:states:us-east-1:123456789012:execution:sm:nope" }),
    )
    .await
    .assert_error("ExecutionDoesNotExist");
    sfn.call("DescribeExecution", json!({}))
        .await
        .assert_error("ValidationException");
    sfn.call("StartExecution", json!({ "stateMachineArn": "not-an-arn" }))
        .await
        .assert_error("InvalidArn");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_command_serves_on_a_socket_and_keeps_its_state() {
    let dir = tempfile::tempdir().unwrap();
    let settings = EngineSettings {
        listen: "127.0.0.1:0".parse().unwrap(),
        db_path: dir.path().join("engine.db"),
        region: "eu-west-1".to_owned(),
        account_id: "000000000000".to_owned(),
        endpoint: SfnSettings::default(),
        log_format: LogFormat::Text,
    };
    let sm = "arn:aws:states:eu-west-1:000000000000:stateMachine:kept";
    let definition = r#"{"StartAt":"P","States":{"P":{"Type":"Pass","End":true}}}"#;
    let create = json!({ "name": "kept", "definition": definition });
    // The first run creates the machine; the second, on the same file, finds it.
    for (operation, body) in [
        ("CreateStateMachine", create),
        ("DescribeStateMachine", json!({ "stateMachineArn": sm })),
    ] {
        let server = EngineServer::start(&settings).await.unwrap();
        let addr = server.local_addr();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let serving = tokio::spawn(server.serve(async {
            let _ = stopped.await;
        }));
        let r = reqwest::Client::new()
            .post(format!("http://{addr}/"))
            .header("content-type", CT)
            .header("x-amz-target", format!("AWSStepFunctions.{operation}"))
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["content-type"], CT);
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["stateMachineArn"], sm, "{operation}: {body}");
        stop.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(30), serving)
            .await
            .expect("the endpoint stops")
            .unwrap()
            .unwrap();
        assert!(tokio::net::TcpStream::connect(addr).await.is_err());
    }
}
