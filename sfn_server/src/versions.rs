//! The version operations: `UpdateStateMachine`, `PublishStateMachineVersion`,
//! `ListStateMachineVersions`, `DeleteStateMachineVersion` and
//! `DescribeStateMachineForExecution`, in AWS's shapes.

use super::SfnError;
use super::ops::{Empty, required, ser_epoch};
use chrono::{DateTime, Utc};
use engine::{Engine, UpdateStateMachineInput, VersionListItem};
use serde::{Deserialize, Serialize};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateStateMachineIn {
    state_machine_arn: Option<String>,
    definition: Option<String>,
    role_arn: Option<String>,
    #[serde(default)]
    publish: bool,
    version_description: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateStateMachineOut {
    #[serde(serialize_with = "ser_epoch")]
    update_date: DateTime<Utc>,
    revision_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    state_machine_version_arn: Option<String>,
}

pub async fn update_state_machine(
    engine: &Engine,
    req: UpdateStateMachineIn,
) -> Result<UpdateStateMachineOut, SfnError> {
    let updated = engine
        .update_state_machine(UpdateStateMachineInput {
            state_machine_arn: required(req.state_machine_arn, "stateMachineArn")?,
            definition: req.definition,
            role_arn: req.role_arn,
            publish: req.publish,
            version_description: req.version_description,
        })
        .await?;
    Ok(UpdateStateMachineOut {
        update_date: updated.update_date,
        revision_id: updated.revision_id,
        state_machine_version_arn: updated.state_machine_version_arn,
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PublishIn {
    state_machine_arn: Option<String>,
    revision_id: Option<String>,
    description: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VersionOut {
    state_machine_version_arn: String,
    #[serde(serialize_with = "ser_epoch")]
    creation_date: DateTime<Utc>,
}

impl From<VersionListItem> for VersionOut {
    fn from(v: VersionListItem) -> Self {
        VersionOut {
            state_machine_version_arn: v.state_machine_version_arn,
            creation_date: v.creation_date,
        }
    }
}

pub async fn publish_state_machine_version(
    engine: &Engine,
    req: PublishIn,
) -> Result<VersionOut, SfnError> {
    let arn = required(req.state_machine_arn, "stateMachineArn")?;
    let v = engine
        .publish_state_machine_version(&arn, req.revision_id.as_deref(), req.description.as_deref())
        .await?;
    Ok(v.into())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListIn {
    state_machine_arn: Option<String>,
    max_results: Option<u32>,
    next_token: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListVersionsOut {
    state_machine_versions: Vec<VersionOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_token: Option<String>,
}

pub async fn list_state_machine_versions(
    engine: &Engine,
    req: ListIn,
) -> Result<ListVersionsOut, SfnError> {
    let arn = required(req.state_machine_arn, "stateMachineArn")?;
    let page = engine
        .list_state_machine_versions(&arn, req.max_results, req.next_token.as_deref())
        .await?;
    Ok(ListVersionsOut {
        state_machine_versions: page.items.into_iter().map(VersionOut::from).collect(),
        next_token: page.next_token,
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeleteVersionIn {
    state_machine_version_arn: Option<String>,
}

pub async fn delete_state_machine_version(
    engine: &Engine,
    req: DeleteVersionIn,
) -> Result<Empty, SfnError> {
    let arn = required(req.state_machine_version_arn, "stateMachineVersionArn")?;
    engine.delete_state_machine_version(&arn).await?;
    Ok(Empty {})
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForExecutionIn {
    execution_arn: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ForExecutionOut {
    state_machine_arn: String,
    name: String,
    definition: String,
    role_arn: String,
    #[serde(serialize_with = "ser_epoch")]
    update_date: DateTime<Utc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    revision_id: Option<String>,
}

pub async fn describe_state_machine_for_execution(
    engine: &Engine,
    req: ForExecutionIn,
) -> Result<ForExecutionOut, SfnError> {
    let arn = required(req.execution_arn, "executionArn")?;
    let info = engine.describe_state_machine_for_execution(&arn).await?;
    Ok(ForExecutionOut {
        state_machine_arn: info.state_machine_arn,
        name: info.name,
        definition: info.definition,
        role_arn: info.role_arn,
        update_date: info.creation_date,
        revision_id: info.revision_id,
    })
}
