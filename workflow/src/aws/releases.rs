//! The start's upgrade ([`crate::upgrade`]) on Step Functions: `DescribeStateMachineAlias` and
//! `DescribeStateMachine` of each routed version to read `live`, `UpdateStateMachine` with
//! `publish` to publish, `CreateStateMachineAlias` / `UpdateStateMachineAlias` to route. A
//! `ConflictException` (another replica's write between our read and ours) is the upgrade's
//! cue to decide again.

use super::error::map_error;
use super::history::to_chrono;
use crate::definition::{LIVE_ALIAS, LIVE_DESCRIPTION};
use crate::port::WorkflowError;
use crate::upgrade::{Live, ReleaseError, Releases, RoutedVersion};
use crate::versions::{self, PublishedVersion};
use async_trait::async_trait;
use aws_sdk_sfn::Client;
use aws_sdk_sfn::config::http::HttpResponse;
use aws_sdk_sfn::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_sfn::types::{ExecutionStatus, RoutingConfigurationListItem};

pub(crate) struct SfnReleases<'a> {
    pub client: &'a Client,
    pub machine_arn: &'a str,
}

impl SfnReleases<'_> {
    pub fn alias_arn(&self) -> String {
        format!("{}:{LIVE_ALIAS}", self.machine_arn)
    }
}

/// A conflict, or the error mapped as every other.
fn release_error<E>(e: SdkError<E, HttpResponse>) -> ReleaseError
where
    E: std::error::Error + ProvideErrorMetadata + Send + Sync + 'static,
    aws_sdk_sfn::Error: From<E>,
{
    if e.code() == Some("ConflictException") {
        return ReleaseError::Conflict(e.message().unwrap_or("ConflictException").to_owned());
    }
    ReleaseError::Failed(map_error(e))
}

fn sdk_routing(
    routing: &[(String, u8)],
) -> Result<Vec<RoutingConfigurationListItem>, ReleaseError> {
    routing
        .iter()
        .map(|(version, weight)| {
            RoutingConfigurationListItem::builder()
                .state_machine_version_arn(version)
                .weight(i32::from(*weight))
                .build()
                .map_err(|e| ReleaseError::Failed(WorkflowError::Other(e.to_string())))
        })
        .collect()
}

#[async_trait]
impl Releases for SfnReleases<'_> {
    async fn live(&self) -> Result<Option<Live>, ReleaseError> {
        let described = self
            .client
            .describe_state_machine_alias()
            .state_machine_alias_arn(self.alias_arn())
            .send()
            .await;
        let alias = match described {
            Ok(alias) => alias,
            Err(e)
                if e.as_service_error()
                    .is_some_and(|e| e.is_resource_not_found()) =>
            {
                return Ok(None);
            }
            Err(e) => return Err(release_error(e)),
        };
        let mut routes = Vec::new();
        for r in alias.routing_configuration() {
            let version = self
                .client
                .describe_state_machine()
                .state_machine_arn(r.state_machine_version_arn())
                .send()
                .await
                .map_err(release_error)?;
            routes.push(RoutedVersion {
                version_arn: r.state_machine_version_arn().to_owned(),
                weight: u8::try_from(r.weight()).unwrap_or(0),
                definition: version.definition().to_owned(),
                description: version.description().map(str::to_owned),
            });
        }
        Ok(Some(Live {
            routes,
            description: alias.description().map(str::to_owned),
        }))
    }

    async fn publish(&self, definition: &str, description: &str) -> Result<String, ReleaseError> {
        let updated = self
            .client
            .update_state_machine()
            .state_machine_arn(self.machine_arn)
            .definition(definition)
            .publish(true)
            .version_description(description)
            .send()
            .await
            .map_err(release_error)?;
        updated
            .state_machine_version_arn()
            .map(str::to_owned)
            .ok_or_else(|| {
                ReleaseError::Failed(WorkflowError::Other(
                    "UpdateStateMachine with publish answered no version".to_owned(),
                ))
            })
    }

    async fn create_live(&self, routing: &[(String, u8)]) -> Result<(), ReleaseError> {
        self.client
            .create_state_machine_alias()
            .name(LIVE_ALIAS)
            .description(LIVE_DESCRIPTION)
            .set_routing_configuration(Some(sdk_routing(routing)?))
            .send()
            .await
            .map_err(release_error)?;
        Ok(())
    }

    async fn route_live(
        &self,
        routing: &[(String, u8)],
        description: Option<&str>,
    ) -> Result<(), ReleaseError> {
        self.client
            .update_state_machine_alias()
            .state_machine_alias_arn(self.alias_arn())
            .set_routing_configuration(Some(sdk_routing(routing)?))
            .set_description(description.map(str::to_owned))
            .send()
            .await
            .map_err(release_error)?;
        Ok(())
    }

    async fn versions(&self, limit: usize) -> Result<Vec<PublishedVersion>, ReleaseError> {
        let mut found = Vec::new();
        let mut token: Option<String> = None;
        while found.len() < limit {
            let page = self
                .client
                .list_state_machine_versions()
                .state_machine_arn(self.machine_arn)
                .max_results(1000)
                .set_next_token(token.take())
                .send()
                .await
                .map_err(release_error)?;
            for item in page.state_machine_versions() {
                if found.len() == limit {
                    break;
                }
                let arn = item.state_machine_version_arn();
                let described = self
                    .client
                    .describe_state_machine()
                    .state_machine_arn(arn)
                    .send()
                    .await
                    .map_err(release_error)?;
                found.push(PublishedVersion {
                    version_arn: arn.to_owned(),
                    number: versions::number_of(arn).unwrap_or(0),
                    description: described.description().map(str::to_owned),
                    created: to_chrono(item.creation_date()).unwrap_or_default(),
                });
            }
            token = page.next_token().map(str::to_owned);
            if token.is_none() {
                break;
            }
        }
        Ok(found)
    }

    async fn running_on(&self, version_arn: &str) -> Result<u64, ReleaseError> {
        let mut running = 0;
        let mut token: Option<String> = None;
        loop {
            let page = self
                .client
                .list_executions()
                .state_machine_arn(version_arn)
                .status_filter(ExecutionStatus::Running)
                .max_results(1000)
                .set_next_token(token.take())
                .send()
                .await
                .map_err(release_error)?;
            running += page.executions().len() as u64;
            token = page.next_token().map(str::to_owned);
            if token.is_none() {
                return Ok(running);
            }
        }
    }
}
