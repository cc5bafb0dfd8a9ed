//! Request and response types of the engine's verbs, shaped like the Step Functions API (`sfn` is
//! AWS's short name for it; not the service's HTTP `api` crate). The crate root re-exports them.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;

/// Execution status, as Step Functions names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ExecutionStatus {
    Running,
    Succeeded,
    Failed,
    TimedOut,
    Aborted,
}

impl ExecutionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ExecutionStatus::Running => "RUNNING",
            ExecutionStatus::Succeeded => "SUCCEEDED",
            ExecutionStatus::Failed => "FAILED",
            ExecutionStatus::TimedOut => "TIMED_OUT",
            ExecutionStatus::Aborted => "ABORTED",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "RUNNING" => ExecutionStatus::Running,
            "SUCCEEDED" => ExecutionStatus::Succeeded,
            "FAILED" => ExecutionStatus::Failed,
            "TIMED_OUT" => ExecutionStatus::TimedOut,
            "ABORTED" => ExecutionStatus::Aborted,
            _ => return None,
        })
    }

    pub fn is_terminal(self) -> bool {
        self != ExecutionStatus::Running
    }
}

/// A machine (its current revision) or one of its versions, as `DescribeStateMachine` shows it.
#[derive(Debug, Clone)]
pub struct StateMachineInfo {
    /// The machine's ARN, or the version's when a version was described.
    pub state_machine_arn: String,
    pub name: String,
    pub definition: String,
    pub role_arn: String,
    /// When the machine was created, or the version published.
    pub creation_date: DateTime<Utc>,
    /// The revision described; `None` for the one `CreateStateMachine` stored (AWS shows none
    /// until the first update; `INITIAL` names it in `PublishStateMachineVersion`).
    pub revision_id: Option<String>,
    /// A version's description.
    pub description: Option<String>,
}

/// `CreateStateMachine` with AWS's optional members.
#[derive(Debug, Clone, Default)]
pub struct CreateStateMachineInput {
    pub name: String,
    pub definition: String,
    pub role_arn: Option<String>,
    /// Also publish the definition as version 1.
    pub publish: bool,
    /// The published version's description (only with `publish`).
    pub version_description: Option<String>,
}

#[derive(Debug, Clone)]
pub struct CreateStateMachineOutput {
    pub state_machine_arn: String,
    pub creation_date: DateTime<Utc>,
    pub state_machine_version_arn: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct UpdateStateMachineInput {
    /// The machine's own ARN (a version cannot be updated).
    pub state_machine_arn: String,
    pub definition: Option<String>,
    pub role_arn: Option<String>,
    /// Publish the resulting revision as a version.
    pub publish: bool,
    pub version_description: Option<String>,
}

#[derive(Debug, Clone)]
pub struct UpdateStateMachineOutput {
    pub update_date: DateTime<Utc>,
    pub revision_id: String,
    pub state_machine_version_arn: Option<String>,
}

/// A published version: `PublishStateMachineVersion`'s answer and an entry of
/// `ListStateMachineVersions`.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionListItem {
    pub state_machine_version_arn: String,
    pub creation_date: DateTime<Utc>,
}

/// One route of an alias: the share of its starts (0–100) that run a version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoutingConfiguration {
    pub state_machine_version_arn: String,
    pub weight: u32,
}

#[derive(Debug, Clone, Default)]
pub struct CreateStateMachineAliasInput {
    pub name: String,
    pub description: Option<String>,
    pub routing_configuration: Vec<RoutingConfiguration>,
}

#[derive(Debug, Clone, Default)]
pub struct UpdateStateMachineAliasInput {
    pub state_machine_alias_arn: String,
    pub description: Option<String>,
    /// `None` keeps the routing.
    pub routing_configuration: Option<Vec<RoutingConfiguration>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AliasDescription {
    pub state_machine_alias_arn: String,
    pub name: String,
    pub description: Option<String>,
    pub routing_configuration: Vec<RoutingConfiguration>,
    pub creation_date: DateTime<Utc>,
    pub update_date: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AliasListItem {
    pub state_machine_alias_arn: String,
    pub creation_date: DateTime<Utc>,
}

/// One page of a listing.
#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next_token: Option<String>,
}

#[derive(Debug, Clone)]
pub struct ActivityInfo {
    pub activity_arn: String,
    pub name: String,
    pub creation_date: DateTime<Utc>,
}

#[derive(Debug, Clone, Default)]
pub struct StartExecutionInput {
    pub state_machine_arn: String,
    /// Generated (a UUID) when absent.
    pub name: Option<String>,
    /// JSON text; `"{}"` when absent.
    pub input: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StartExecutionOutput {
    pub execution_arn: String,
    pub start_date: DateTime<Utc>,
}

/// Whether `RedriveExecution` would accept the execution now (`redriveStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RedriveStatus {
    Redrivable,
    NotRedrivable,
}

impl RedriveStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RedriveStatus::Redrivable => "REDRIVABLE",
            RedriveStatus::NotRedrivable => "NOT_REDRIVABLE",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionDescription {
    pub execution_arn: String,
    pub state_machine_arn: String,
    pub name: String,
    pub status: ExecutionStatus,
    pub start_date: DateTime<Utc>,
    pub stop_date: Option<DateTime<Utc>>,
    /// JSON text.
    pub input: String,
    /// JSON text; only when SUCCEEDED.
    pub output: Option<String>,
    pub error: Option<String>,
    pub cause: Option<String>,
    /// Times redriven; 0 until the first redrive.
    pub redrive_count: u32,
    /// When it was last redriven; `None` until the first redrive.
    pub redrive_date: Option<DateTime<Utc>>,
    /// Whether it could be redriven at the time of the call.
    pub redrive_status: RedriveStatus,
    /// Why not, in AWS's words, when NOT_REDRIVABLE.
    pub redrive_status_reason: Option<String>,
    /// The version it runs, when started by a version or through an alias.
    pub state_machine_version_arn: Option<String>,
    /// The alias it was started through.
    pub state_machine_alias_arn: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ExecutionListItem {
    pub execution_arn: String,
    pub state_machine_arn: String,
    pub name: String,
    pub status: ExecutionStatus,
    pub start_date: DateTime<Utc>,
    pub stop_date: Option<DateTime<Utc>>,
    pub redrive_count: u32,
    pub redrive_date: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, Default)]
pub struct ListExecutionsInput {
    pub state_machine_arn: String,
    pub status_filter: Option<ExecutionStatus>,
    /// 1..=1000, default 100.
    pub max_results: Option<u32>,
    pub next_token: Option<String>,
}

#[derive(Debug, Clone)]
pub struct ListExecutionsOutput {
    pub executions: Vec<ExecutionListItem>,
    pub next_token: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct GetExecutionHistoryInput {
    pub execution_arn: String,
    /// 1..=1000, default 100.
    pub max_results: Option<u32>,
    pub next_token: Option<String>,
    pub reverse_order: bool,
    /// Default true: include `input`/`output` in event details.
    pub include_execution_data: Option<bool>,
}

/// One AWS-shaped history event: `{timestamp, type, id, previousEventId, <type>EventDetails}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryEvent {
    pub timestamp: DateTime<Utc>,
    #[serde(rename = "type")]
    pub event_type: String,
    pub id: u64,
    pub previous_event_id: u64,
    /// The details object, keyed in AWS's JSON by e.g. `activityScheduledEventDetails`
    /// (see [`HistoryEvent::details_key`]).
    pub details: Option<Value>,
}

impl HistoryEvent {
    /// The JSON key AWS uses for this event's details, e.g. `taskStateEnteredEventDetails` → for
    /// `TaskStateEntered` it is `stateEnteredEventDetails`.
    pub fn details_key(&self) -> String {
        crate::core::history::details_key(&self.event_type)
    }

    /// The event in AWS's JSON shape (see [`aws_event_json`]).
    pub fn to_aws_json(self, timestamps: Timestamps) -> Value {
        let key = self.details_key();
        aws_event_json(
            timestamps.write(&self.timestamp),
            &self.event_type,
            self.id,
            self.previous_event_id,
            self.details.map(|d| (key, d)),
        )
    }
}

/// How a history event's timestamp is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timestamps {
    /// RFC 3339 with milliseconds, as the AWS SDKs and CLI print it (the service's JSON).
    Rfc3339,
    /// Epoch seconds with a fraction, as the Step Functions wire protocol (AWS JSON 1.0)
    /// carries it.
    EpochSeconds,
}

impl Timestamps {
    pub fn write(self, at: &DateTime<Utc>) -> Value {
        match self {
            Timestamps::Rfc3339 => {
                Value::String(at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
            }
            Timestamps::EpochSeconds => (at.timestamp_millis() as f64 / 1000.0).into(),
        }
    }
}

/// The one writer of AWS-shaped history JSON, for the engine's events and for those read back
/// from AWS alike: `{timestamp, type, id, previousEventId, <detailsKey>: {...}}`, the details
/// member left out when the event has none.
pub fn aws_event_json(
    timestamp: Value,
    event_type: &str,
    id: u64,
    previous_event_id: u64,
    details: Option<(String, Value)>,
) -> Value {
    let mut object = serde_json::Map::new();
    object.insert("timestamp".to_owned(), timestamp);
    object.insert("type".to_owned(), event_type.into());
    object.insert("id".to_owned(), id.into());
    object.insert("previousEventId".to_owned(), previous_event_id.into());
    if let Some((key, details)) = details {
        object.insert(key, details);
    }
    Value::Object(object)
}

#[derive(Debug, Clone)]
pub struct GetExecutionHistoryOutput {
    pub events: Vec<HistoryEvent>,
    pub next_token: Option<String>,
}

/// A task handed to an activity worker.
#[derive(Debug, Clone, PartialEq)]
pub struct ActivityTask {
    pub task_token: String,
    /// JSON text: the task's effective input.
    pub input: String,
}

/// What an in-process task handler receives (Task states whose `Resource` is not an activity ARN).
#[derive(Debug, Clone)]
pub struct TaskRequest {
    pub resource: String,
    pub input: Value,
    pub task_token: String,
    pub execution_arn: String,
    pub state_name: String,
}

/// A task handler's failure: the error name and cause a Retry/Catch will see.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskFailure {
    pub error: String,
    pub cause: String,
}

pub type TaskFuture = Pin<Box<dyn Future<Output = Result<Value, TaskFailure>> + Send>>;

/// Runs Task states whose `Resource` is not an activity ARN. The engine calls it after the task
/// is committed as scheduled; after a crash it calls it again (at-least-once).
pub trait TaskHandler: Send + Sync + 'static {
    fn invoke(&self, request: TaskRequest) -> TaskFuture;
}
