//! The engine's verbs for revisions, versions and aliases, with AWS's semantics (see the
//! engine's README, "Versions"): requests are checked here, writes go to the writer
//! (`writer/versions.rs`), reads to a reader connection.

use super::writer::{Command, VersionCommand, revision_id};
use super::{Engine, from_millis, page_size, parse_token};
use crate::arn::{self, MachineRef, Qualifier};
use crate::error::EngineError;
use crate::sfn::*;

/// AWS's limit on a version's or an alias's description.
const MAX_DESCRIPTION: usize = 256;

fn check_description(description: Option<&str>) -> Result<(), EngineError> {
    match description {
        Some(d) if d.chars().count() > MAX_DESCRIPTION => Err(EngineError::Validation(format!(
            "1 validation error detected: 'description' must be at most {MAX_DESCRIPTION} characters"
        ))),
        _ => Ok(()),
    }
}

/// `versionDescription` goes with `publish` only (AWS: ValidationException otherwise).
pub(super) fn check_version_description(
    publish: bool,
    description: Option<&str>,
) -> Result<(), EngineError> {
    if description.is_some() && !publish {
        return Err(EngineError::Validation(
            "versionDescription can only be set when publish is true".to_owned(),
        ));
    }
    check_description(description)
}

fn invalid_arn(arn: &str) -> EngineError {
    EngineError::InvalidArn(format!("Invalid Arn: '{arn}'"))
}

/// A machine's own ARN (not a version's or an alias's).
fn machine_arn(arn: &str) -> Result<String, EngineError> {
    match MachineRef::parse(arn) {
        Some(MachineRef {
            machine,
            qualifier: Qualifier::None,
        }) => Ok(machine),
        _ => Err(invalid_arn(arn)),
    }
}

fn alias_ref(arn: &str) -> Result<(String, String), EngineError> {
    match MachineRef::parse(arn) {
        Some(MachineRef {
            machine,
            qualifier: Qualifier::Alias(name),
        }) => Ok((machine, name)),
        _ => Err(invalid_arn(arn)),
    }
}

fn no_machine(arn: &str) -> EngineError {
    EngineError::StateMachineDoesNotExist(format!("State Machine Does Not Exist: '{arn}'"))
}

fn not_found(arn: &str) -> EngineError {
    EngineError::ResourceNotFound(format!("Resource Not Found: '{arn}'"))
}

/// An alias's routing, checked: one or two distinct versions of one machine, weights 0–100
/// summing to 100. The machine's ARN and `(version, weight)` pairs.
fn routing(entries: &[RoutingConfiguration]) -> Result<(String, Vec<(u32, u32)>), EngineError> {
    if !(1..=2).contains(&entries.len()) {
        return Err(EngineError::Validation(format!(
            "routingConfiguration must name one or two versions, got {}",
            entries.len()
        )));
    }
    let mut machine: Option<String> = None;
    let mut pairs = Vec::with_capacity(entries.len());
    for entry in entries {
        let Some(MachineRef {
            machine: m,
            qualifier: Qualifier::Version(n),
        }) = MachineRef::parse(&entry.state_machine_version_arn)
        else {
            return Err(EngineError::Validation(format!(
                "'{}' is not a state machine version ARN",
                entry.state_machine_version_arn
            )));
        };
        if machine.as_ref().is_some_and(|first| *first != m) {
            return Err(EngineError::Validation(
                "routingConfiguration must name versions of one state machine".to_owned(),
            ));
        }
        if entry.weight > 100 {
            return Err(EngineError::Validation(format!(
                "weight must be 0 to 100, got {}",
                entry.weight
            )));
        }
        if pairs.iter().any(|(v, _)| *v == n) {
            return Err(EngineError::Validation(format!(
                "routingConfiguration names version {n} twice"
            )));
        }
        machine = Some(m);
        pairs.push((n, entry.weight));
    }
    let total: u32 = pairs.iter().map(|(_, w)| w).sum();
    if total != 100 {
        return Err(EngineError::Validation(format!(
            "routingConfiguration weights must sum to 100, got {total}"
        )));
    }
    Ok((machine.expect("one entry at least"), pairs))
}

fn routing_out(machine: &str, pairs: &[(u32, u32)]) -> Vec<RoutingConfiguration> {
    pairs
        .iter()
        .map(|(n, w)| RoutingConfiguration {
            state_machine_version_arn: MachineRef::version_arn(machine, *n),
            weight: *w,
        })
        .collect()
}

impl Engine {
    /// A machine (its current revision) or, given a version's ARN, that version.
    pub async fn describe_state_machine(&self, arn: &str) -> Result<StateMachineInfo, EngineError> {
        let target = MachineRef::parse(arn).ok_or_else(|| invalid_arn(arn))?;
        if let Qualifier::Alias(_) = target.qualifier {
            return Err(invalid_arn(arn));
        }
        let key = target.clone();
        let found = self
            .read(move |s| {
                let Some(m) = s.state_machine(&key.machine)? else {
                    return Ok(None);
                };
                Ok(Some(match key.qualifier {
                    Qualifier::Version(n) => match s.version(m.id, n)? {
                        Some(v) => {
                            let d = s.definition(v.definition)?.expect("a version's revision");
                            Some((m, d, Some(v)))
                        }
                        None => None,
                    },
                    _ => {
                        let d = m.current.clone();
                        Some((m, d, None))
                    }
                }))
            })
            .await?;
        match found {
            None => Err(no_machine(&target.machine)),
            Some(None) => Err(not_found(arn)),
            Some(Some((m, d, version))) => Ok(StateMachineInfo {
                state_machine_arn: match &version {
                    Some(v) => MachineRef::version_arn(&m.arn, v.number),
                    None => m.arn.clone(),
                },
                name: m.name,
                definition: d.body,
                role_arn: d.role_arn,
                creation_date: from_millis(version.as_ref().map_or(m.created_ms, |v| v.created_ms)),
                revision_id: revision_id(&d.revision),
                description: version.and_then(|v| v.description),
            }),
        }
    }

    /// The revision an execution runs, whatever its machine has become since.
    pub async fn describe_state_machine_for_execution(
        &self,
        execution_arn: &str,
    ) -> Result<StateMachineInfo, EngineError> {
        let key = execution_arn.to_owned();
        let found = self
            .read(move |s| {
                let Some(e) = s.execution_by_arn(&key)? else {
                    return Ok(None);
                };
                let m = s.state_machine(&e.sm_arn)?;
                let d = s.definition(e.definition)?;
                Ok(m.zip(d))
            })
            .await?;
        let (m, d) = found.ok_or_else(|| {
            EngineError::ExecutionDoesNotExist(format!(
                "Execution Does Not Exist: '{execution_arn}'"
            ))
        })?;
        Ok(StateMachineInfo {
            state_machine_arn: m.arn,
            name: m.name,
            definition: d.body,
            role_arn: d.role_arn,
            creation_date: from_millis(d.created_ms),
            revision_id: revision_id(&d.revision),
            description: None,
        })
    }

    /// Changes a machine's definition or role (a new revision; running executions keep theirs),
    /// and with `publish` publishes the result as a version.
    pub async fn update_state_machine(
        &self,
        input: UpdateStateMachineInput,
    ) -> Result<UpdateStateMachineOutput, EngineError> {
        let sm_arn = machine_arn(&input.state_machine_arn)?;
        if input.definition.is_none() && input.role_arn.is_none() {
            return Err(EngineError::MissingRequiredParameter(
                "Either the definition or the roleArn must be specified".to_owned(),
            ));
        }
        if let Some(d) = &input.definition {
            crate::asl::parse(d).map_err(|e| EngineError::InvalidDefinition(e.to_string()))?;
        }
        check_version_description(input.publish, input.version_description.as_deref())?;
        self.call(|reply| {
            Command::Versions(VersionCommand::Update {
                sm_arn,
                definition: input.definition,
                role_arn: input.role_arn,
                publish: input.publish,
                description: input.version_description,
                reply,
            })
        })
        .await
    }

    /// Publishes the machine's current revision as a version (or answers the version already
    /// published from it). `revision_id`, when given, must be the current one (`INITIAL` for
    /// the revision `CreateStateMachine` stored), else `ConflictException`.
    pub async fn publish_state_machine_version(
        &self,
        state_machine_arn: &str,
        revision_id: Option<&str>,
        description: Option<&str>,
    ) -> Result<VersionListItem, EngineError> {
        let sm_arn = machine_arn(state_machine_arn)?;
        check_description(description)?;
        let (revision_id, description) = (
            revision_id.map(str::to_owned),
            description.map(str::to_owned),
        );
        self.call(|reply| {
            Command::Versions(VersionCommand::Publish {
                sm_arn,
                revision_id,
                description,
                reply,
            })
        })
        .await
    }

    /// A machine's versions, newest first.
    pub async fn list_state_machine_versions(
        &self,
        state_machine_arn: &str,
        max_results: Option<u32>,
        next_token: Option<&str>,
    ) -> Result<Page<VersionListItem>, EngineError> {
        let sm_arn = machine_arn(state_machine_arn)?;
        let limit = page_size(max_results)?;
        let before = parse_token(next_token)?;
        let key = sm_arn.clone();
        let rows = self
            .read(move |s| match s.state_machine(&key)? {
                Some(m) => Ok(Some(s.versions(m.id, before, limit + 1)?)),
                None => Ok(None),
            })
            .await?
            .ok_or_else(|| no_machine(&sm_arn))?;
        let more = rows.len() > limit as usize;
        let items: Vec<_> = rows
            .into_iter()
            .take(limit as usize)
            .map(|v| VersionListItem {
                state_machine_version_arn: MachineRef::version_arn(&sm_arn, v.number),
                creation_date: from_millis(v.created_ms),
            })
            .collect();
        let next_token = more
            .then(|| items.last())
            .flatten()
            .and_then(|v| v.state_machine_version_arn.rsplit(':').next())
            .map(str::to_owned);
        Ok(Page { items, next_token })
    }

    /// Deletes a version (its executions run on); refused while an alias routes to it.
    pub async fn delete_state_machine_version(&self, version_arn: &str) -> Result<(), EngineError> {
        let version = match MachineRef::parse(version_arn) {
            Some(
                r @ MachineRef {
                    qualifier: Qualifier::Version(_),
                    ..
                },
            ) => r,
            _ => return Err(invalid_arn(version_arn)),
        };
        self.call(|reply| Command::Versions(VersionCommand::DeleteVersion { version, reply }))
            .await
    }

    pub async fn create_state_machine_alias(
        &self,
        input: CreateStateMachineAliasInput,
    ) -> Result<AliasListItem, EngineError> {
        arn::validate_alias_name(&input.name).map_err(EngineError::InvalidName)?;
        check_description(input.description.as_deref())?;
        let (sm_arn, routing) = routing(&input.routing_configuration)?;
        self.call(|reply| {
            Command::Versions(VersionCommand::CreateAlias {
                sm_arn,
                name: input.name,
                description: input.description,
                routing,
                reply,
            })
        })
        .await
    }

    /// Changes an alias's description or routing; its update date.
    pub async fn update_state_machine_alias(
        &self,
        input: UpdateStateMachineAliasInput,
    ) -> Result<chrono::DateTime<chrono::Utc>, EngineError> {
        let (sm_arn, name) = alias_ref(&input.state_machine_alias_arn)?;
        if input.description.is_none() && input.routing_configuration.is_none() {
            return Err(EngineError::Validation(
                "Either the description or the routingConfiguration must be specified".to_owned(),
            ));
        }
        check_description(input.description.as_deref())?;
        let routing = match &input.routing_configuration {
            None => None,
            Some(entries) => {
                let (machine, pairs) = routing(entries)?;
                if machine != sm_arn {
                    return Err(EngineError::Validation(
                        "routingConfiguration must name versions of the alias's state machine"
                            .to_owned(),
                    ));
                }
                Some(pairs)
            }
        };
        self.call(|reply| {
            Command::Versions(VersionCommand::UpdateAlias {
                sm_arn,
                name,
                description: input.description,
                routing,
                reply,
            })
        })
        .await
    }

    pub async fn describe_state_machine_alias(
        &self,
        alias_arn: &str,
    ) -> Result<AliasDescription, EngineError> {
        let (sm_arn, name) = alias_ref(alias_arn)?;
        let key = (sm_arn.clone(), name);
        let row = self
            .read(move |s| match s.state_machine(&key.0)? {
                Some(m) => s.alias(m.id, &key.1),
                None => Ok(None),
            })
            .await?
            .ok_or_else(|| not_found(alias_arn))?;
        Ok(AliasDescription {
            state_machine_alias_arn: alias_arn.to_owned(),
            routing_configuration: routing_out(&sm_arn, &row.routing),
            name: row.name,
            description: row.description,
            creation_date: from_millis(row.created_ms),
            update_date: from_millis(row.updated_ms),
        })
    }

    /// A machine's aliases, by name.
    pub async fn list_state_machine_aliases(
        &self,
        state_machine_arn: &str,
        max_results: Option<u32>,
        next_token: Option<&str>,
    ) -> Result<Page<AliasListItem>, EngineError> {
        let sm_arn = machine_arn(state_machine_arn)?;
        let limit = page_size(max_results)?;
        let after = match next_token {
            None => String::new(),
            Some(t) => {
                arn::validate_alias_name(t)
                    .map_err(|_| EngineError::Validation("Invalid nextToken".to_owned()))?;
                t.to_owned()
            }
        };
        let key = sm_arn.clone();
        let rows = self
            .read(move |s| match s.state_machine(&key)? {
                Some(m) => Ok(Some(s.aliases(m.id, &after, limit + 1)?)),
                None => Ok(None),
            })
            .await?
            .ok_or_else(|| no_machine(&sm_arn))?;
        let more = rows.len() > limit as usize;
        let rows: Vec<_> = rows.into_iter().take(limit as usize).collect();
        let next_token = more.then(|| rows.last().map(|a| a.name.clone())).flatten();
        Ok(Page {
            items: rows
                .into_iter()
                .map(|a| AliasListItem {
                    state_machine_alias_arn: MachineRef::alias_arn(&sm_arn, &a.name),
                    creation_date: from_millis(a.created_ms),
                })
                .collect(),
            next_token,
        })
    }

    /// Deletes an alias (executions started through it run on).
    pub async fn delete_state_machine_alias(&self, alias_arn: &str) -> Result<(), EngineError> {
        let (sm_arn, name) = alias_ref(alias_arn)?;
        self.call(|reply| {
            Command::Versions(VersionCommand::DeleteAlias {
                sm_arn,
                name,
                reply,
            })
        })
        .await
    }
}
