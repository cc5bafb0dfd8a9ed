//! The upgrade every start of the service runs, on both backends: where the alias
//! [`LIVE_ALIAS`](crate::definition::LIVE_ALIAS) should route new orders, decided in one place
//! ([`decide`]) and carried out through [`Releases`], which each adapter implements with its
//! own calls (the engine's, or Step Functions').
//!
//! The rules, in order:
//! 1. No alias yet: publish this build's definition and create `live` on it.
//! 2. `live` already routes to this build's definition (wholly, or as a canary's share): keep.
//! 3. `live` is **pinned** (an operator rolled it back): keep; only `versions promote` moves it.
//!    Without this, the next restart of the newer build would undo the rollback.
//! 4. `live` routes to a **newer release** than this build (an old replica restarting during a
//!    rolling deploy): keep; a release is never rolled back by a restart.
//! 5. Otherwise publish this build's definition and route `live` to it: wholly, or, with a
//!    canary percentage, that share beside the version `live` routed to until now.
//!
//! Replicas starting at once: each publishes its own definition at most once (a publish of an
//! unchanged revision answers the version it published), and a `ConflictException` (another
//! replica created or changed the alias, or the machine, between our read and our write) makes
//! the decision again from what is there now, a few times, so a start never fails on it.

use crate::port::WorkflowError;
use crate::versions::PublishedVersion;
use async_trait::async_trait;
use serde_json::Value;

/// What an alias description starts with when an operator's rollback pinned it.
pub const PINNED: &str = "pinned:";

/// Times a start decides again after a conflict before it gives up.
const CONFLICT_ATTEMPTS: u32 = 5;

/// One version the alias routes to, with what that version holds.
#[derive(Debug, Clone, PartialEq)]
pub struct RoutedVersion {
    pub version_arn: String,
    pub weight: u8,
    pub definition: String,
    pub description: Option<String>,
}

/// The alias `live` as it is.
#[derive(Debug, Clone, PartialEq)]
pub struct Live {
    pub routes: Vec<RoutedVersion>,
    pub description: Option<String>,
}

impl Live {
    /// Whether an operator's rollback pinned it.
    pub fn is_pinned(&self) -> bool {
        self.description
            .as_deref()
            .is_some_and(|d| d.starts_with(PINNED))
    }

    /// The version most new orders go to (the heavier of two; the first of equals).
    pub fn primary(&self) -> Option<&RoutedVersion> {
        self.routes
            .iter()
            .reduce(|a, b| if b.weight > a.weight { b } else { a })
    }
}

/// What this build brings: its rendered definition, the description its version gets
/// ([`version_description`](crate::definition::version_description)), and the share of new
/// orders a new version gets at first (`None` or 100: all of them).
#[derive(Debug, Clone, Copy)]
pub struct Build<'a> {
    pub definition: &'a str,
    pub description: &'a str,
    pub canary_percent: Option<u8>,
}

/// What a start does about `live`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// No alias yet: publish, and create it on this build's version.
    Create,
    /// It routes to this build's definition already.
    Keep,
    /// An operator pinned it (a rollback); this build's definition is not live.
    Pinned,
    /// It routes to a newer release than this build's.
    Newer { release: String },
    /// Publish this build's definition and route to it; `previous` is the version new orders
    /// went to until now (the canary's other side).
    Publish { previous: String },
}

/// The one decision, from the alias as it is and this build.
pub fn decide(live: Option<&Live>, build: &Build) -> Decision {
    let Some(live) = live else {
        return Decision::Create;
    };
    let ours = parse(build.definition);
    if live
        .routes
        .iter()
        .any(|r| ours.is_some() && parse(&r.definition) == ours)
    {
        return Decision::Keep;
    }
    if live.is_pinned() {
        return Decision::Pinned;
    }
    let Some(primary) = live.primary() else {
        return Decision::Create;
    };
    if let (Some(theirs), Some(mine)) = (
        release(primary.description.as_deref()),
        release(Some(build.description)),
    ) && theirs > mine
    {
        return Decision::Newer {
            release: theirs.to_string(),
        };
    }
    Decision::Publish {
        previous: primary.version_arn.clone(),
    }
}

/// The routing for this build's version `ours`: wholly, or the canary's share beside `previous`.
pub fn routing(
    previous: Option<&str>,
    ours: &str,
    canary_percent: Option<u8>,
) -> Vec<(String, u8)> {
    match (previous, canary_percent) {
        (Some(previous), Some(share)) if (1..100).contains(&share) && previous != ours => {
            vec![(previous.to_owned(), 100 - share), (ours.to_owned(), share)]
        }
        _ => vec![(ours.to_owned(), 100)],
    }
}

/// The release a version's description names (`fulfillment 0.2.0 definition sha256:…`).
pub fn release(description: Option<&str>) -> Option<semver::Version> {
    let rest = description?.strip_prefix("fulfillment ")?;
    semver::Version::parse(rest.split_whitespace().next()?).ok()
}

/// Definitions compared as JSON, so that a store's re-spacing is no difference.
fn parse(definition: &str) -> Option<Value> {
    serde_json::from_str(definition).ok()
}

/// A write another replica's write got in the way of, or any other failure.
#[derive(Debug)]
pub enum ReleaseError {
    Conflict(String),
    Failed(WorkflowError),
}

impl From<WorkflowError> for ReleaseError {
    fn from(e: WorkflowError) -> Self {
        ReleaseError::Failed(e)
    }
}

/// The calls an upgrade makes, on one backend.
#[async_trait]
pub trait Releases: Send + Sync {
    /// The alias `live`, each routed version with its definition; `None` when there is none.
    async fn live(&self) -> Result<Option<Live>, ReleaseError>;
    /// Updates the machine to `definition` and publishes it; the version's ARN (the one already
    /// published when the revision is unchanged).
    async fn publish(&self, definition: &str, description: &str) -> Result<String, ReleaseError>;
    /// Creates `live` with this routing.
    async fn create_live(&self, routing: &[(String, u8)]) -> Result<(), ReleaseError>;
    /// Routes `live` so, with this description (`None`: the one it has).
    async fn route_live(
        &self,
        routing: &[(String, u8)],
        description: Option<&str>,
    ) -> Result<(), ReleaseError>;
    /// The `limit` newest published versions, newest first.
    async fn versions(&self, limit: usize) -> Result<Vec<PublishedVersion>, ReleaseError>;
    /// How many executions run on the version now.
    async fn running_on(&self, version_arn: &str) -> Result<u64, ReleaseError>;
}

/// What a start's upgrade did.
#[derive(Debug, Clone, PartialEq)]
pub struct Upgraded {
    pub decision: Decision,
    /// Where `live` routes now.
    pub routing: Vec<(String, u8)>,
    /// This build's version, when it has one (not after [`Decision::Pinned`] or
    /// [`Decision::Newer`], which publish nothing).
    pub version_arn: Option<String>,
}

/// Decides and does, deciding again after a conflict with another replica.
pub async fn upgrade(
    releases: &dyn Releases,
    build: &Build<'_>,
) -> Result<Upgraded, WorkflowError> {
    let mut last_conflict = String::new();
    for attempt in 1..=CONFLICT_ATTEMPTS {
        match upgrade_once(releases, build).await {
            Ok(done) => return Ok(done),
            Err(ReleaseError::Conflict(m)) => {
                tracing::info!(attempt, conflict = %m, "another start changed the alias or the machine meanwhile; deciding again");
                last_conflict = m;
            }
            Err(ReleaseError::Failed(e)) => return Err(e),
        }
    }
    Err(WorkflowError::Unavailable(format!(
        "the alias kept changing under this start ({CONFLICT_ATTEMPTS} conflicts, the last: {last_conflict})"
    )))
}

async fn upgrade_once(
    releases: &dyn Releases,
    build: &Build<'_>,
) -> Result<Upgraded, ReleaseError> {
    let live = releases.live().await?;
    let decision = decide(live.as_ref(), build);
    let current = || {
        live.as_ref()
            .map(|l| {
                l.routes
                    .iter()
                    .map(|r| (r.version_arn.clone(), r.weight))
                    .collect()
            })
            .unwrap_or_default()
    };
    let ours_in = |routing: &[(String, u8)]| {
        let ours = parse(build.definition);
        live.as_ref().and_then(|l| {
            l.routes
                .iter()
                .find(|r| parse(&r.definition) == ours)
                .filter(|r| routing.iter().any(|(v, _)| *v == r.version_arn))
                .map(|r| r.version_arn.clone())
        })
    };
    match &decision {
        Decision::Create => {
            let ours = releases
                .publish(build.definition, build.description)
                .await?;
            let routing = routing(None, &ours, None);
            releases.create_live(&routing).await?;
            tracing::info!(version = %ours, "alias live created on this build's version");
            Ok(Upgraded {
                decision,
                routing,
                version_arn: Some(ours),
            })
        }
        Decision::Keep => {
            let routing: Vec<(String, u8)> = current();
            let version_arn = ours_in(&routing);
            Ok(Upgraded {
                decision,
                routing,
                version_arn,
            })
        }
        Decision::Pinned => {
            tracing::warn!(
                "alias live is pinned by an operator's rollback: new orders keep going to its \
                 version, not this build's; `fulfillment versions promote` routes them here"
            );
            Ok(Upgraded {
                decision,
                routing: current(),
                version_arn: None,
            })
        }
        Decision::Newer { release } => {
            tracing::warn!(
                live_release = %release,
                "alias live routes to a newer release than this build's: left there (a restart \
                 never rolls a release back; `fulfillment versions rollback` does)"
            );
            Ok(Upgraded {
                decision,
                routing: current(),
                version_arn: None,
            })
        }
        Decision::Publish { previous } => {
            let ours = releases
                .publish(build.definition, build.description)
                .await?;
            let routing = routing(Some(previous), &ours, build.canary_percent);
            releases.route_live(&routing, None).await?;
            tracing::info!(from = %previous, to = ?routing, "alias live moved to this build's version");
            Ok(Upgraded {
                decision,
                routing,
                version_arn: Some(ours),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OURS: &str = r#"{"StartAt":"B","States":{"B":{"Type":"Succeed"}}}"#;
    const OLD: &str = r#"{"StartAt":"A","States":{"A":{"Type":"Succeed"}}}"#;

    fn build(canary: Option<u8>) -> Build<'static> {
        Build {
            definition: OURS,
            description: "fulfillment 0.2.0 definition sha256:00",
            canary_percent: canary,
        }
    }

    fn live(routes: &[(&str, u8, &str, &str)], description: Option<&str>) -> Live {
        Live {
            routes: routes
                .iter()
                .map(|(arn, weight, definition, description)| RoutedVersion {
                    version_arn: (*arn).to_owned(),
                    weight: *weight,
                    definition: (*definition).to_owned(),
                    description: Some((*description).to_owned()),
                })
                .collect(),
            description: description.map(str::to_owned),
        }
    }

    #[test]
    fn no_alias_is_created() {
        assert_eq!(decide(None, &build(None)), Decision::Create);
    }

    #[test]
    fn an_alias_on_this_definition_is_kept_even_respaced_or_as_a_canary() {
        let respaced = OURS.replace(':', ": ");
        let whole = live(&[("m:2", 100, &respaced, "fulfillment 0.2.0")], None);
        assert_eq!(decide(Some(&whole), &build(None)), Decision::Keep);
        let canary = live(
            &[
                ("m:1", 90, OLD, "fulfillment 0.1.0"),
                ("m:2", 10, OURS, "fulfillment 0.2.0"),
            ],
            None,
        );
        assert_eq!(decide(Some(&canary), &build(None)), Decision::Keep);
    }

    #[test]
    fn an_older_release_is_replaced_and_a_pinned_alias_is_not() {
        let old = live(&[("m:1", 100, OLD, "fulfillment 0.1.0 definition")], None);
        assert_eq!(
            decide(Some(&old), &build(None)),
            Decision::Publish {
                previous: "m:1".to_owned()
            }
        );
        let pinned = live(
            &[("m:1", 100, OLD, "fulfillment 0.1.0 definition")],
            Some("pinned: rolled back"),
        );
        assert_eq!(decide(Some(&pinned), &build(None)), Decision::Pinned);
    }

    #[test]
    fn a_restart_of_an_older_build_leaves_a_newer_release_live() {
        let newer = live(&[("m:3", 100, OLD, "fulfillment 0.3.0 definition")], None);
        assert_eq!(
            decide(Some(&newer), &build(None)),
            Decision::Newer {
                release: "0.3.0".to_owned()
            }
        );
        // The same release with another definition (a development build) is replaced.
        let same = live(&[("m:3", 100, OLD, "fulfillment 0.2.0 definition")], None);
        assert!(matches!(
            decide(Some(&same), &build(None)),
            Decision::Publish { .. }
        ));
    }

    #[test]
    fn a_canary_takes_its_share_beside_the_previous_version() {
        assert_eq!(
            routing(Some("m:1"), "m:2", Some(10)),
            [("m:1".to_owned(), 90), ("m:2".to_owned(), 10)]
        );
        for whole in [None, Some(0), Some(100)] {
            assert_eq!(
                routing(Some("m:1"), "m:2", whole),
                [("m:2".to_owned(), 100)]
            );
        }
        assert_eq!(routing(None, "m:2", Some(10)), [("m:2".to_owned(), 100)]);
        assert_eq!(
            routing(Some("m:2"), "m:2", Some(10)),
            [("m:2".to_owned(), 100)]
        );
    }

    #[test]
    fn the_primary_of_a_canary_is_the_heavier_side() {
        let canary = live(
            &[
                ("m:1", 90, OLD, "fulfillment 0.1.0"),
                ("m:2", 10, OURS, "fulfillment 0.2.0"),
            ],
            None,
        );
        assert_eq!(canary.primary().unwrap().version_arn, "m:1");
    }
}
