//! Revisions, versions and aliases on the writer: `UpdateStateMachine`,
//! `PublishStateMachineVersion`, `DeleteStateMachineVersion`, the alias verbs that write, and
//! what a start names (a machine, a version or an alias) resolved to the revision it runs.
//!
//! An execution stores the revision it starts on (`executions.definition`), so nothing here can
//! change what a running execution runs: an update adds a revision, a delete removes a name.

use super::timers::{from_millis, millis};
use super::{Batch, Reply, Sql, Writer};
use crate::arn::{MachineRef, Qualifier};
use crate::db::{AliasRow, StateMachineRow, VersionRow};
use crate::error::EngineError;
use crate::sfn::*;
use chrono::{DateTime, Utc};
use std::sync::Arc;

/// AWS's quotas: versions and aliases per state machine.
const MAX_VERSIONS: u32 = 1000;
const MAX_ALIASES: u32 = 100;

/// The version and alias commands (validated by the caller: ARNs well formed, routing of one or
/// two versions of one machine with weights summing to 100).
pub enum VersionCommand {
    Update {
        sm_arn: String,
        /// The new definition, already parsed once to check it.
        definition: Option<String>,
        role_arn: Option<String>,
        publish: bool,
        description: Option<String>,
        reply: Reply<UpdateStateMachineOutput>,
    },
    Publish {
        sm_arn: String,
        revision_id: Option<String>,
        description: Option<String>,
        reply: Reply<VersionListItem>,
    },
    DeleteVersion {
        version: MachineRef,
        reply: Reply<()>,
    },
    CreateAlias {
        sm_arn: String,
        name: String,
        description: Option<String>,
        routing: Vec<(u32, u32)>,
        reply: Reply<AliasListItem>,
    },
    UpdateAlias {
        sm_arn: String,
        name: String,
        description: Option<String>,
        routing: Option<Vec<(u32, u32)>>,
        reply: Reply<DateTime<Utc>>,
    },
    DeleteAlias {
        sm_arn: String,
        name: String,
        reply: Reply<()>,
    },
}

/// What a start names, resolved: the revisions it may run, with their weights.
pub(super) struct Target {
    /// The machine's own ARN.
    pub machine: String,
    pub alias: Option<String>,
    pub routes: Vec<Route>,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Route {
    pub definition: i64,
    pub version: Option<u32>,
    pub weight: u32,
}

impl Target {
    /// One route, drawn by weight (an alias's canary share).
    pub(super) fn choose(&self) -> Route {
        choose(&self.routes, rand::random_range(0..100))
    }
}

/// The route whose share of 0..100 holds `roll`.
fn choose(routes: &[Route], roll: u32) -> Route {
    let mut upto = 0;
    for route in routes {
        upto += route.weight;
        if roll < upto {
            return *route;
        }
    }
    *routes.last().expect("a target has a route")
}

fn no_machine(arn: &str) -> EngineError {
    EngineError::StateMachineDoesNotExist(format!("State Machine Does Not Exist: '{arn}'"))
}

fn no_version(machine: &str, number: u32) -> EngineError {
    EngineError::ResourceNotFound(format!(
        "Resource Not Found: '{}'",
        MachineRef::version_arn(machine, number)
    ))
}

fn no_alias(machine: &str, name: &str) -> EngineError {
    EngineError::ResourceNotFound(format!(
        "Resource Not Found: '{}'",
        MachineRef::alias_arn(machine, name)
    ))
}

fn quota_exceeded(machine: &str) -> EngineError {
    EngineError::ServiceQuotaExceeded(format!(
        "'{machine}' has {MAX_VERSIONS} versions, the most AWS allows: delete unused ones"
    ))
}

fn listed(machine: &str, v: &VersionRow) -> VersionListItem {
    VersionListItem {
        state_machine_version_arn: MachineRef::version_arn(machine, v.number),
        creation_date: from_millis(v.created_ms),
    }
}

/// The revision id a caller sees and passes back.
pub(crate) fn revision_id(revision: &str) -> Option<String> {
    (revision != "INITIAL").then(|| revision.to_owned())
}

impl Writer {
    pub(super) fn version_command(
        &mut self,
        b: &mut Batch,
        command: VersionCommand,
        now: DateTime<Utc>,
    ) -> Sql<()> {
        // Whatever it changes, no start may resolve through what was cached before it.
        self.targets.clear();
        match command {
            VersionCommand::Update {
                sm_arn,
                definition,
                role_arn,
                publish,
                description,
                reply,
            } => {
                let result =
                    self.update(&sm_arn, definition, role_arn, publish, description, now)?;
                b.reply(reply, result);
            }
            VersionCommand::Publish {
                sm_arn,
                revision_id,
                description,
                reply,
            } => {
                let result = match self.machine_row(&sm_arn)? {
                    Err(e) => Err(e),
                    Ok(m) => {
                        let current = m.current.revision.as_str();
                        match revision_id {
                            Some(r) if r != current => Err(EngineError::Conflict(format!(
                                "revisionId '{r}' is not the current revision of '{sm_arn}'"
                            ))),
                            _ => self.publish(&m, description.as_deref(), now)?,
                        }
                    }
                };
                b.reply(reply, result);
            }
            VersionCommand::DeleteVersion { version, reply } => {
                let result = self.delete_version(&version)?;
                b.reply(reply, result);
            }
            VersionCommand::CreateAlias {
                sm_arn,
                name,
                description,
                routing,
                reply,
            } => {
                let result = self.create_alias(&sm_arn, name, description, routing, now)?;
                b.reply(reply, result);
            }
            VersionCommand::UpdateAlias {
                sm_arn,
                name,
                description,
                routing,
                reply,
            } => {
                let result = self.update_alias(&sm_arn, &name, description, routing, now)?;
                b.reply(reply, result);
            }
            VersionCommand::DeleteAlias {
                sm_arn,
                name,
                reply,
            } => {
                let result = match self.machine_row(&sm_arn)? {
                    Err(e) => Err(e),
                    Ok(m) => match self.store.alias(m.id, &name)? {
                        None => Err(no_alias(&sm_arn, &name)),
                        Some(_) => {
                            self.store.delete_alias(m.id, &name)?;
                            Ok(())
                        }
                    },
                };
                b.reply(reply, result);
            }
        }
        Ok(())
    }

    /// A machine by its ARN, or `StateMachineDoesNotExist`.
    fn machine_row(&self, sm_arn: &str) -> Sql<Result<StateMachineRow, EngineError>> {
        Ok(self
            .store
            .state_machine(sm_arn)?
            .ok_or_else(|| no_machine(sm_arn)))
    }

    /// Publishes the machine's current revision, or answers the version already published
    /// from it (AWS: `PublishStateMachineVersion` is idempotent per revision).
    pub(super) fn publish(
        &mut self,
        m: &StateMachineRow,
        description: Option<&str>,
        now: DateTime<Utc>,
    ) -> Sql<Result<VersionListItem, EngineError>> {
        if let Some(v) = self.store.version_of_definition(m.id, m.current.id)? {
            return Ok(Ok(listed(&m.arn, &v)));
        }
        if self.store.count_versions(m.id)? >= MAX_VERSIONS {
            return Ok(Err(quota_exceeded(&m.arn)));
        }
        let v = self
            .store
            .insert_version(m.id, m.current.id, description, millis(now))?;
        Ok(Ok(listed(&m.arn, &v)))
    }

    fn update(
        &mut self,
        sm_arn: &str,
        definition: Option<String>,
        role_arn: Option<String>,
        publish: bool,
        description: Option<String>,
        now: DateTime<Utc>,
    ) -> Sql<Result<UpdateStateMachineOutput, EngineError>> {
        let mut m = match self.machine_row(sm_arn)? {
            Ok(m) => m,
            Err(e) => return Ok(Err(e)),
        };
        let body = definition.unwrap_or_else(|| m.current.body.clone());
        let role = role_arn.unwrap_or_else(|| m.current.role_arn.clone());
        let changed = body != m.current.body || role != m.current.role_arn;
        // A publish the quota refuses refuses the update with it: one call, one answer.
        if publish
            && (changed
                || self
                    .store
                    .version_of_definition(m.id, m.current.id)?
                    .is_none())
            && self.store.count_versions(m.id)? >= MAX_VERSIONS
        {
            return Ok(Err(quota_exceeded(&m.arn)));
        }
        // An update that changes nothing adds no revision: the current one is answered.
        if changed {
            let revision = uuid::Uuid::new_v4().to_string();
            let id = self
                .store
                .update_state_machine(m.id, &body, &role, &revision, millis(now))?;
            m.current = crate::db::DefinitionRow {
                id,
                body,
                role_arn: role,
                revision,
                created_ms: millis(now),
            };
            m.updated_ms = Some(millis(now));
        }
        let version = if publish {
            match self.publish(&m, description.as_deref(), now)? {
                Ok(v) => Some(v.state_machine_version_arn),
                Err(e) => return Ok(Err(e)),
            }
        } else {
            None
        };
        Ok(Ok(UpdateStateMachineOutput {
            update_date: from_millis(m.updated_ms.unwrap_or(m.created_ms)),
            revision_id: m.current.revision,
            state_machine_version_arn: version,
        }))
    }

    fn delete_version(&mut self, version: &MachineRef) -> Sql<Result<(), EngineError>> {
        let Qualifier::Version(number) = version.qualifier else {
            return Ok(Err(EngineError::InvalidArn(format!(
                "Invalid Arn: '{}' is not a version ARN",
                version.machine
            ))));
        };
        // AWS answers success for a version (or machine) that is not there.
        let Some(m) = self.store.state_machine(&version.machine)? else {
            return Ok(Ok(()));
        };
        let routing = self.store.aliases_routing_to(m.id, number)?;
        if !routing.is_empty() {
            return Ok(Err(EngineError::Conflict(format!(
                "Version {number} of '{}' cannot be deleted: alias {} routes to it",
                m.arn,
                routing.join(", ")
            ))));
        }
        self.store.delete_version(m.id, number)?;
        Ok(Ok(()))
    }

    /// The first version of a routing that does not exist, as its error.
    fn missing_version(
        &self,
        m: &StateMachineRow,
        routing: &[(u32, u32)],
    ) -> Sql<Option<EngineError>> {
        Ok(self.versions_routed(m, routing)?.err())
    }

    fn create_alias(
        &mut self,
        sm_arn: &str,
        name: String,
        description: Option<String>,
        routing: Vec<(u32, u32)>,
        now: DateTime<Utc>,
    ) -> Sql<Result<AliasListItem, EngineError>> {
        let m = match self.machine_row(sm_arn)? {
            Ok(m) => m,
            Err(e) => return Ok(Err(e)),
        };
        if let Some(e) = self.missing_version(&m, &routing)? {
            return Ok(Err(e));
        }
        let arn = MachineRef::alias_arn(sm_arn, &name);
        if let Some(existing) = self.store.alias(m.id, &name)? {
            // The same request again is answered as the first was; another is a conflict.
            return Ok(
                if existing.description == description && existing.routing == routing {
                    Ok(AliasListItem {
                        state_machine_alias_arn: arn,
                        creation_date: from_millis(existing.created_ms),
                    })
                } else {
                    Err(EngineError::Conflict(format!(
                        "Alias '{arn}' exists with another configuration: update it instead"
                    )))
                },
            );
        }
        if self.store.count_aliases(m.id)? >= MAX_ALIASES {
            return Ok(Err(EngineError::ServiceQuotaExceeded(format!(
                "'{sm_arn}' has {MAX_ALIASES} aliases, the most AWS allows"
            ))));
        }
        self.store.put_alias(
            m.id,
            &AliasRow {
                name,
                description,
                routing,
                created_ms: millis(now),
                updated_ms: millis(now),
            },
        )?;
        Ok(Ok(AliasListItem {
            state_machine_alias_arn: arn,
            creation_date: from_millis(millis(now)),
        }))
    }

    fn update_alias(
        &mut self,
        sm_arn: &str,
        name: &str,
        description: Option<String>,
        routing: Option<Vec<(u32, u32)>>,
        now: DateTime<Utc>,
    ) -> Sql<Result<DateTime<Utc>, EngineError>> {
        let m = match self.machine_row(sm_arn)? {
            Ok(m) => m,
            Err(e) => return Ok(Err(e)),
        };
        let Some(mut alias) = self.store.alias(m.id, name)? else {
            return Ok(Err(no_alias(sm_arn, name)));
        };
        if let Some(routing) = routing {
            if let Some(e) = self.missing_version(&m, &routing)? {
                return Ok(Err(e));
            }
            alias.routing = routing;
        }
        if description.is_some() {
            alias.description = description;
        }
        alias.updated_ms = millis(now);
        self.store.put_alias(m.id, &alias)?;
        Ok(Ok(from_millis(alias.updated_ms)))
    }

    /// What a start's `stateMachineArn` names, resolved (cached until a version command).
    pub(super) fn target(&mut self, arn: &str) -> Sql<Result<Arc<Target>, EngineError>> {
        if let Some(t) = self.targets.get(arn) {
            return Ok(Ok(t.clone()));
        }
        let Some(r) = MachineRef::parse(arn) else {
            return Ok(Err(EngineError::InvalidArn(format!(
                "Invalid Arn: '{arn}'"
            ))));
        };
        let Some(m) = self.store.state_machine(&r.machine)? else {
            return Ok(Err(no_machine(&r.machine)));
        };
        let (alias, routes) = match &r.qualifier {
            Qualifier::None => {
                let route = Route {
                    definition: m.current.id,
                    version: None,
                    weight: 100,
                };
                (None, vec![route])
            }
            Qualifier::Version(n) => match self.versions_routed(&m, &[(*n, 100)])? {
                Ok(routes) => (None, routes),
                Err(e) => return Ok(Err(e)),
            },
            Qualifier::Alias(a) => {
                let Some(row) = self.store.alias(m.id, a)? else {
                    return Ok(Err(no_alias(&m.arn, a)));
                };
                match self.versions_routed(&m, &row.routing)? {
                    Ok(routes) => (Some(a.clone()), routes),
                    Err(e) => return Ok(Err(e)),
                }
            }
        };
        let target = Arc::new(Target {
            machine: m.arn,
            alias,
            routes,
        });
        self.targets.insert(arn.to_owned(), target.clone());
        Ok(Ok(target))
    }

    /// The routes to versions of a machine, each with the revision it names.
    fn versions_routed(
        &self,
        m: &StateMachineRow,
        routing: &[(u32, u32)],
    ) -> Sql<Result<Vec<Route>, EngineError>> {
        let mut routes = Vec::with_capacity(routing.len());
        for (number, weight) in routing {
            let Some(v) = self.store.version(m.id, *number)? else {
                return Ok(Err(no_version(&m.arn, *number)));
            };
            routes.push(Route {
                definition: v.definition,
                version: Some(*number),
                weight: *weight,
            });
        }
        Ok(Ok(routes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_roll_picks_the_route_whose_share_holds_it() {
        let route = |version, weight| Route {
            definition: version as i64,
            version: Some(version),
            weight,
        };
        let routes = [route(1, 90), route(2, 10)];
        assert_eq!(choose(&routes, 0).version, Some(1));
        assert_eq!(choose(&routes, 89).version, Some(1));
        assert_eq!(choose(&routes, 90).version, Some(2));
        assert_eq!(choose(&routes, 99).version, Some(2));
        let all_new = [route(1, 0), route(2, 100)];
        assert_eq!(choose(&all_new, 0).version, Some(2));
    }
}
