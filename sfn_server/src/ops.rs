//! One function per operation: the AWS request shape in, the engine's verb, the AWS output
//! shape out. Member names are AWS's; timestamps are epoch seconds (a JSON number).

use super::SfnError;
use chrono::{DateTime, Utc};
use engine::{
    CreateStateMachineInput, Engine, ExecutionStatus, GetExecutionHistoryInput,
    ListExecutionsInput, RedriveStatus, StartExecutionInput, StateMachineInfo, Timestamps,
};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;
use std::time::Duration;

/// A required member, or ValidationException naming it.
pub(crate) fn required<T>(value: Option<T>, member: &str) -> Result<T, SfnError> {
    value.ok_or_else(|| {
        SfnError::validation(format!(
            "1 validation error detected: '{member}' is required"
        ))
    })
}

/// AWS JSON 1.0 encodes timestamps as epoch seconds with a fraction.
pub(crate) fn ser_epoch<S: Serializer>(date: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    Timestamps::EpochSeconds.write(date).serialize(s)
}

fn ser_epoch_opt<S: Serializer>(date: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
    match date {
        Some(d) => ser_epoch(d, s),
        None => s.serialize_none(),
    }
}

fn status(raw: &str) -> Result<ExecutionStatus, SfnError> {
    ExecutionStatus::parse(raw).ok_or_else(|| {
        SfnError::validation(format!(
            "1 validation error detected: 'statusFilter' must be one of RUNNING, SUCCEEDED, \
             FAILED, TIMED_OUT, ABORTED; got '{raw}'"
        ))
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateActivityIn {
    name: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateActivityOut {
    activity_arn: String,
    #[serde(serialize_with = "ser_epoch")]
    creation_date: DateTime<Utc>,
}

pub async fn create_activity(
    engine: &Engine,
    req: CreateActivityIn,
) -> Result<CreateActivityOut, SfnError> {
    let info = engine.create_activity(&required(req.name, "name")?).await?;
    Ok(CreateActivityOut {
        activity_arn: info.activity_arn,
        creation_date: info.creation_date,
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateStateMachineIn {
    name: Option<String>,
    definition: Option<String>,
    role_arn: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    publish: bool,
    version_description: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateStateMachineOut {
    state_machine_arn: String,
    #[serde(serialize_with = "ser_epoch")]
    creation_date: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    state_machine_version_arn: Option<String>,
}

pub async fn create_state_machine(
    engine: &Engine,
    req: CreateStateMachineIn,
) -> Result<CreateStateMachineOut, SfnError> {
    match req.kind.as_deref() {
        None | Some("STANDARD") => {}
        Some("EXPRESS") => return Err(SfnError::express_not_supported()),
        Some(other) => {
            return Err(SfnError::validation(format!(
                "1 validation error detected: 'type' must be STANDARD or EXPRESS; got '{other}'"
            )));
        }
    }
    let name = required(req.name, "name")?;
    let definition = required(req.definition, "definition")?;
    let created = engine
        .create_state_machine_with(CreateStateMachineInput {
            name,
            definition,
            role_arn: req.role_arn,
            publish: req.publish,
            version_description: req.version_description,
        })
        .await?;
    Ok(CreateStateMachineOut {
        state_machine_arn: created.state_machine_arn,
        creation_date: created.creation_date,
        state_machine_version_arn: created.state_machine_version_arn,
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DescribeStateMachineIn {
    state_machine_arn: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DescribeStateMachineOut {
    state_machine_arn: String,
    name: String,
    status: &'static str,
    definition: String,
    role_arn: String,
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(serialize_with = "ser_epoch")]
    creation_date: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    revision_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
}

impl From<StateMachineInfo> for DescribeStateMachineOut {
    fn from(info: StateMachineInfo) -> Self {
        DescribeStateMachineOut {
            state_machine_arn: info.state_machine_arn,
            name: info.name,
            status: "ACTIVE",
            definition: info.definition,
            role_arn: info.role_arn,
            kind: "STANDARD",
            creation_date: info.creation_date,
            revision_id: info.revision_id,
            description: info.description,
        }
    }
}

pub async fn describe_state_machine(
    engine: &Engine,
    req: DescribeStateMachineIn,
) -> Result<DescribeStateMachineOut, SfnError> {
    let arn = required(req.state_machine_arn, "stateMachineArn")?;
    Ok(engine.describe_state_machine(&arn).await?.into())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StartExecutionIn {
    state_machine_arn: Option<String>,
    name: Option<String>,
    input: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StartExecutionOut {
    execution_arn: String,
    #[serde(serialize_with = "ser_epoch")]
    start_date: DateTime<Utc>,
}

pub async fn start_execution(
    engine: &Engine,
    req: StartExecutionIn,
) -> Result<StartExecutionOut, SfnError> {
    let started = engine
        .start_execution(StartExecutionInput {
            state_machine_arn: required(req.state_machine_arn, "stateMachineArn")?,
            name: req.name,
            input: req.input,
        })
        .await?;
    Ok(StartExecutionOut {
        execution_arn: started.execution_arn,
        start_date: started.start_date,
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionArnIn {
    execution_arn: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DescribeExecutionOut {
    execution_arn: String,
    state_machine_arn: String,
    name: String,
    status: ExecutionStatus,
    #[serde(serialize_with = "ser_epoch")]
    start_date: DateTime<Utc>,
    #[serde(
        serialize_with = "ser_epoch_opt",
        skip_serializing_if = "Option::is_none"
    )]
    stop_date: Option<DateTime<Utc>>,
    input: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    output: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cause: Option<String>,
    redrive_count: u32,
    #[serde(
        serialize_with = "ser_epoch_opt",
        skip_serializing_if = "Option::is_none"
    )]
    redrive_date: Option<DateTime<Utc>>,
    redrive_status: RedriveStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    redrive_status_reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    state_machine_version_arn: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    state_machine_alias_arn: Option<String>,
}

pub async fn describe_execution(
    engine: &Engine,
    req: ExecutionArnIn,
) -> Result<DescribeExecutionOut, SfnError> {
    let arn = required(req.execution_arn, "executionArn")?;
    let d = engine.describe_execution(&arn).await?;
    Ok(DescribeExecutionOut {
        execution_arn: d.execution_arn,
        state_machine_arn: d.state_machine_arn,
        name: d.name,
        status: d.status,
        start_date: d.start_date,
        stop_date: d.stop_date,
        input: d.input,
        output: d.output,
        error: d.error,
        cause: d.cause,
        redrive_count: d.redrive_count,
        redrive_date: d.redrive_date,
        redrive_status: d.redrive_status,
        redrive_status_reason: d.redrive_status_reason,
        state_machine_version_arn: d.state_machine_version_arn,
        state_machine_alias_arn: d.state_machine_alias_arn,
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListExecutionsIn {
    state_machine_arn: Option<String>,
    status_filter: Option<String>,
    max_results: Option<u32>,
    next_token: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecutionItem {
    execution_arn: String,
    state_machine_arn: String,
    name: String,
    status: ExecutionStatus,
    #[serde(serialize_with = "ser_epoch")]
    start_date: DateTime<Utc>,
    #[serde(
        serialize_with = "ser_epoch_opt",
        skip_serializing_if = "Option::is_none"
    )]
    stop_date: Option<DateTime<Utc>>,
    redrive_count: u32,
    #[serde(
        serialize_with = "ser_epoch_opt",
        skip_serializing_if = "Option::is_none"
    )]
    redrive_date: Option<DateTime<Utc>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListExecutionsOut {
    executions: Vec<ExecutionItem>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_token: Option<String>,
}

pub async fn list_executions(
    engine: &Engine,
    req: ListExecutionsIn,
) -> Result<ListExecutionsOut, SfnError> {
    let listed = engine
        .list_executions(ListExecutionsInput {
            state_machine_arn: required(req.state_machine_arn, "stateMachineArn")?,
            status_filter: req.status_filter.as_deref().map(status).transpose()?,
            max_results: req.max_results,
            next_token: req.next_token,
        })
        .await?;
    Ok(ListExecutionsOut {
        executions: listed
            .executions
            .into_iter()
            .map(|e| ExecutionItem {
                execution_arn: e.execution_arn,
                state_machine_arn: e.state_machine_arn,
                name: e.name,
                status: e.status,
                start_date: e.start_date,
                stop_date: e.stop_date,
                redrive_count: e.redrive_count,
                redrive_date: e.redrive_date,
            })
            .collect(),
        next_token: listed.next_token,
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StopExecutionIn {
    execution_arn: Option<String>,
    error: Option<String>,
    cause: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StopExecutionOut {
    #[serde(serialize_with = "ser_epoch")]
    stop_date: DateTime<Utc>,
}

pub async fn stop_execution(
    engine: &Engine,
    req: StopExecutionIn,
) -> Result<StopExecutionOut, SfnError> {
    let arn = required(req.execution_arn, "executionArn")?;
    let stop_date = engine
        .stop_execution(&arn, req.error.as_deref(), req.cause.as_deref())
        .await?;
    Ok(StopExecutionOut { stop_date })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RedriveExecutionIn {
    execution_arn: Option<String>,
    client_token: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RedriveExecutionOut {
    #[serde(serialize_with = "ser_epoch")]
    redrive_date: DateTime<Utc>,
}

pub async fn redrive_execution(
    engine: &Engine,
    req: RedriveExecutionIn,
) -> Result<RedriveExecutionOut, SfnError> {
    let arn = required(req.execution_arn, "executionArn")?;
    let redrive_date = engine
        .redrive_execution(&arn, req.client_token.as_deref())
        .await?;
    Ok(RedriveExecutionOut { redrive_date })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetExecutionHistoryIn {
    execution_arn: Option<String>,
    max_results: Option<u32>,
    next_token: Option<String>,
    reverse_order: Option<bool>,
    include_execution_data: Option<bool>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GetExecutionHistoryOut {
    events: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_token: Option<String>,
}

pub async fn get_execution_history(
    engine: &Engine,
    req: GetExecutionHistoryIn,
) -> Result<GetExecutionHistoryOut, SfnError> {
    let page = engine
        .get_execution_history(GetExecutionHistoryInput {
            execution_arn: required(req.execution_arn, "executionArn")?,
            max_results: req.max_results,
            next_token: req.next_token,
            reverse_order: req.reverse_order.unwrap_or(false),
            include_execution_data: req.include_execution_data,
        })
        .await?;
    Ok(GetExecutionHistoryOut {
        events: page
            .events
            .into_iter()
            .map(|e| e.to_aws_json(Timestamps::EpochSeconds))
            .collect(),
        next_token: page.next_token,
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetActivityTaskIn {
    activity_arn: Option<String>,
    worker_name: Option<String>,
}

/// Both members absent when no task came within the wait.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GetActivityTaskOut {
    #[serde(skip_serializing_if = "Option::is_none")]
    task_token: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    input: Option<String>,
}

pub async fn get_activity_task(
    engine: &Engine,
    req: GetActivityTaskIn,
    wait: Duration,
) -> Result<GetActivityTaskOut, SfnError> {
    let arn = required(req.activity_arn, "activityArn")?;
    let task = engine
        .get_activity_task(&arn, req.worker_name.as_deref(), wait)
        .await?;
    Ok(match task {
        Some(t) => GetActivityTaskOut {
            task_token: Some(t.task_token),
            input: Some(t.input),
        },
        None => GetActivityTaskOut {
            task_token: None,
            input: None,
        },
    })
}

/// SendTask* answer `{}`.
#[derive(Serialize)]
pub struct Empty {}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendTaskSuccessIn {
    task_token: Option<String>,
    output: Option<String>,
}

pub async fn send_task_success(engine: &Engine, req: SendTaskSuccessIn) -> Result<Empty, SfnError> {
    let token = required(req.task_token, "taskToken")?;
    let output = required(req.output, "output")?;
    engine.send_task_success(&token, &output).await?;
    Ok(Empty {})
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendTaskFailureIn {
    task_token: Option<String>,
    error: Option<String>,
    cause: Option<String>,
}

pub async fn send_task_failure(engine: &Engine, req: SendTaskFailureIn) -> Result<Empty, SfnError> {
    let token = required(req.task_token, "taskToken")?;
    engine
        .send_task_failure(&token, req.error.as_deref(), req.cause.as_deref())
        .await?;
    Ok(Empty {})
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendTaskHeartbeatIn {
    task_token: Option<String>,
}

pub async fn send_task_heartbeat(
    engine: &Engine,
    req: SendTaskHeartbeatIn,
) -> Result<Empty, SfnError> {
    let token = required(req.task_token, "taskToken")?;
    engine.send_task_heartbeat(&token).await?;
    Ok(Empty {})
}
