//! The alias operations: `CreateStateMachineAlias`, `UpdateStateMachineAlias`,
//! `DescribeStateMachineAlias`, `ListStateMachineAliases` and `DeleteStateMachineAlias`, in
//! AWS's shapes.

use super::SfnError;
use super::ops::{Empty, required, ser_epoch};
use chrono::{DateTime, Utc};
use engine::{
    CreateStateMachineAliasInput, Engine, RoutingConfiguration, UpdateStateMachineAliasInput,
};
use serde::{Deserialize, Serialize};

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Route {
    state_machine_version_arn: Option<String>,
    weight: Option<u32>,
}

fn routing(routes: Vec<Route>) -> Result<Vec<RoutingConfiguration>, SfnError> {
    routes
        .into_iter()
        .map(|r| {
            Ok(RoutingConfiguration {
                state_machine_version_arn: required(
                    r.state_machine_version_arn,
                    "routingConfiguration.member.stateMachineVersionArn",
                )?,
                weight: required(r.weight, "routingConfiguration.member.weight")?,
            })
        })
        .collect()
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateAliasIn {
    name: Option<String>,
    description: Option<String>,
    routing_configuration: Option<Vec<Route>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateAliasOut {
    state_machine_alias_arn: String,
    #[serde(serialize_with = "ser_epoch")]
    creation_date: DateTime<Utc>,
}

pub async fn create_state_machine_alias(
    engine: &Engine,
    req: CreateAliasIn,
) -> Result<CreateAliasOut, SfnError> {
    let created = engine
        .create_state_machine_alias(CreateStateMachineAliasInput {
            name: required(req.name, "name")?,
            description: req.description,
            routing_configuration: routing(required(
                req.routing_configuration,
                "routingConfiguration",
            )?)?,
        })
        .await?;
    Ok(CreateAliasOut {
        state_machine_alias_arn: created.state_machine_alias_arn,
        creation_date: created.creation_date,
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateAliasIn {
    state_machine_alias_arn: Option<String>,
    description: Option<String>,
    routing_configuration: Option<Vec<Route>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateAliasOut {
    #[serde(serialize_with = "ser_epoch")]
    update_date: DateTime<Utc>,
}

pub async fn update_state_machine_alias(
    engine: &Engine,
    req: UpdateAliasIn,
) -> Result<UpdateAliasOut, SfnError> {
    let update_date = engine
        .update_state_machine_alias(UpdateStateMachineAliasInput {
            state_machine_alias_arn: required(req.state_machine_alias_arn, "stateMachineAliasArn")?,
            description: req.description,
            routing_configuration: req.routing_configuration.map(routing).transpose()?,
        })
        .await?;
    Ok(UpdateAliasOut { update_date })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AliasArnIn {
    state_machine_alias_arn: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DescribeAliasOut {
    state_machine_alias_arn: String,
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    routing_configuration: Vec<Route>,
    #[serde(serialize_with = "ser_epoch")]
    creation_date: DateTime<Utc>,
    #[serde(serialize_with = "ser_epoch")]
    update_date: DateTime<Utc>,
}

pub async fn describe_state_machine_alias(
    engine: &Engine,
    req: AliasArnIn,
) -> Result<DescribeAliasOut, SfnError> {
    let arn = required(req.state_machine_alias_arn, "stateMachineAliasArn")?;
    let a = engine.describe_state_machine_alias(&arn).await?;
    Ok(DescribeAliasOut {
        state_machine_alias_arn: a.state_machine_alias_arn,
        name: a.name,
        description: a.description,
        routing_configuration: a
            .routing_configuration
            .into_iter()
            .map(|r| Route {
                state_machine_version_arn: Some(r.state_machine_version_arn),
                weight: Some(r.weight),
            })
            .collect(),
        creation_date: a.creation_date,
        update_date: a.update_date,
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListAliasesIn {
    state_machine_arn: Option<String>,
    max_results: Option<u32>,
    next_token: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AliasItem {
    state_machine_alias_arn: String,
    #[serde(serialize_with = "ser_epoch")]
    creation_date: DateTime<Utc>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListAliasesOut {
    state_machine_aliases: Vec<AliasItem>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_token: Option<String>,
}

pub async fn list_state_machine_aliases(
    engine: &Engine,
    req: ListAliasesIn,
) -> Result<ListAliasesOut, SfnError> {
    let arn = required(req.state_machine_arn, "stateMachineArn")?;
    let page = engine
        .list_state_machine_aliases(&arn, req.max_results, req.next_token.as_deref())
        .await?;
    Ok(ListAliasesOut {
        state_machine_aliases: page
            .items
            .into_iter()
            .map(|a| AliasItem {
                state_machine_alias_arn: a.state_machine_alias_arn,
                creation_date: a.creation_date,
            })
            .collect(),
        next_token: page.next_token,
    })
}

pub async fn delete_state_machine_alias(
    engine: &Engine,
    req: AliasArnIn,
) -> Result<Empty, SfnError> {
    let arn = required(req.state_machine_alias_arn, "stateMachineAliasArn")?;
    engine.delete_state_machine_alias(&arn).await?;
    Ok(Empty {})
}
