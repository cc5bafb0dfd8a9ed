//! What operators do with the saga's versions, on either backend (through [`Releases`]): list
//! them with where `live` routes and how many orders run on each, roll `live` back (pinning it,
//! so no restart moves it again), and promote this build's definition (ending a canary or a
//! rollback). Orders already started keep their version whatever is done here.

use crate::definition::LIVE_DESCRIPTION;
use crate::port::WorkflowError;
use crate::upgrade::{Build, Live, PINNED, ReleaseError, Releases, routing};
use chrono::{DateTime, Utc};

/// A published version of the saga's machine.
#[derive(Debug, Clone, PartialEq)]
pub struct PublishedVersion {
    pub version_arn: String,
    pub number: u64,
    pub description: Option<String>,
    pub created: DateTime<Utc>,
}

/// One line of `versions list`.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionStatus {
    pub version: PublishedVersion,
    /// The share of new orders `live` sends it (`None`: none).
    pub live_weight: Option<u8>,
    /// Executions running on it now.
    pub running: u64,
}

/// `versions list`: the newest versions first, and `live` as it is.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionsReport {
    pub versions: Vec<VersionStatus>,
    /// Whether an operator's rollback pinned `live`.
    pub pinned: bool,
    /// `live`'s description.
    pub live_description: Option<String>,
}

/// Why a rollback or a promotion was refused (nothing changed).
#[derive(Debug, thiserror::Error)]
pub enum VersionsError {
    #[error("there is no alias live yet: start the service once")]
    NoLive,
    #[error("version {0} does not exist (see `fulfillment versions list`)")]
    UnknownVersion(u64),
    #[error("no version older than {0} to roll back to; name one")]
    NothingOlder(u64),
    #[error("live routes to version {0} already")]
    AlreadyLive(u64),
    #[error(transparent)]
    Workflow(#[from] WorkflowError),
}

impl VersionsError {
    pub fn is_transient(&self) -> bool {
        matches!(self, VersionsError::Workflow(e) if e.is_transient())
    }
}

fn failed(e: ReleaseError) -> VersionsError {
    match e {
        ReleaseError::Failed(e) => VersionsError::Workflow(e),
        ReleaseError::Conflict(m) => VersionsError::Workflow(WorkflowError::Unavailable(format!(
            "another change of live got in the way; try again ({m})"
        ))),
    }
}

/// The version number at the end of a version ARN (`…:stateMachine:<name>:<n>`).
pub fn number_of(version_arn: &str) -> Option<u64> {
    version_arn.rsplit(':').next()?.parse().ok()
}

/// The `limit` newest versions, each with its share of `live` and its running orders.
pub async fn list(releases: &dyn Releases, limit: usize) -> Result<VersionsReport, VersionsError> {
    let live = releases.live().await.map_err(failed)?;
    let mut versions = Vec::new();
    for version in releases.versions(limit).await.map_err(failed)? {
        let running = releases
            .running_on(&version.version_arn)
            .await
            .map_err(failed)?;
        let live_weight = live.as_ref().and_then(|l| {
            l.routes
                .iter()
                .find(|r| r.version_arn == version.version_arn)
                .map(|r| r.weight)
        });
        versions.push(VersionStatus {
            version,
            live_weight,
            running,
        });
    }
    Ok(VersionsReport {
        versions,
        pinned: live.as_ref().is_some_and(Live::is_pinned),
        live_description: live.and_then(|l| l.description),
    })
}

/// What a rollback did.
#[derive(Debug, Clone, PartialEq)]
pub struct RolledBack {
    /// The version most new orders went to before.
    pub from: u64,
    pub to: u64,
}

/// Routes `live` wholly to version `to` (by default the newest one older than the version it
/// routes most orders to now) and pins it there: starts of any build leave it until
/// [`promote`]. Orders already started keep their versions.
pub async fn rollback(
    releases: &dyn Releases,
    to: Option<u64>,
    at: DateTime<Utc>,
) -> Result<RolledBack, VersionsError> {
    let live = releases
        .live()
        .await
        .map_err(failed)?
        .ok_or(VersionsError::NoLive)?;
    let from_arn = live
        .primary()
        .ok_or(VersionsError::NoLive)?
        .version_arn
        .clone();
    let from = number_of(&from_arn).unwrap_or(0);
    let versions = releases.versions(usize::MAX).await.map_err(failed)?;
    let target = match to {
        Some(n) => versions
            .iter()
            .find(|v| v.number == n)
            .ok_or(VersionsError::UnknownVersion(n))?,
        None => versions
            .iter()
            .filter(|v| v.number < from)
            .max_by_key(|v| v.number)
            .ok_or(VersionsError::NothingOlder(from))?,
    };
    if live.routes.len() == 1 && live.routes[0].version_arn == target.version_arn {
        return Err(VersionsError::AlreadyLive(target.number));
    }
    let description = format!(
        "{PINNED} rolled back from version {from} to {} at {} by `fulfillment versions \
         rollback`; `fulfillment versions promote` unpins",
        target.number,
        at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    );
    releases
        .route_live(&[(target.version_arn.clone(), 100)], Some(&description))
        .await
        .map_err(failed)?;
    tracing::warn!(from, to = target.number, "live rolled back and pinned");
    Ok(RolledBack {
        from,
        to: target.number,
    })
}

/// Publishes `build`'s definition (answering the version already published when the machine
/// holds it) and routes `live` wholly to it, unpinned: ends a canary or a rollback. Its version.
pub async fn promote(releases: &dyn Releases, build: &Build<'_>) -> Result<u64, VersionsError> {
    releases
        .live()
        .await
        .map_err(failed)?
        .ok_or(VersionsError::NoLive)?;
    let ours = releases
        .publish(build.definition, build.description)
        .await
        .map_err(failed)?;
    releases
        .route_live(&routing(None, &ours, None), Some(LIVE_DESCRIPTION))
        .await
        .map_err(failed)?;
    let number = number_of(&ours).unwrap_or(0);
    tracing::info!(version = number, "live promoted to this build's version");
    Ok(number)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_arn_ends_with_its_number() {
        assert_eq!(
            number_of("arn:aws:states:eu-west-1:1:stateMachine:saga:12"),
            Some(12)
        );
        assert_eq!(
            number_of("arn:aws:states:eu-west-1:1:stateMachine:saga:live"),
            None
        );
    }
}
