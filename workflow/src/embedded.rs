//! The workflow port over the in-process engine: creates the saga's activities and state machine
//! on an [`Engine`] and serves the port's verbs from it. Engine errors are mapped to
//! [`WorkflowError`] in one place ([`map_error`]) and never leave this module.

use crate::definition::{self, Activity, LIVE_ALIAS, STATE_MACHINE_NAME};
use crate::port::{
    ExecutionInfo, HistoryPage, RUNNING_PAGE, RedriveOutcome, RunningPage, StartedExecution,
    TaskHandle, WorkflowError, WorkflowPort,
};
use crate::upgrade::{self, Build, Live, ReleaseError, Releases, RoutedVersion};
use crate::versions::{self, PublishedVersion, RolledBack, VersionsError, VersionsReport};
use async_trait::async_trait;
use chrono::{SubsecRound, Utc};
use engine::{
    CreateStateMachineAliasInput, CreateStateMachineInput, Engine, EngineError, ExecutionStatus,
    GetExecutionHistoryInput, ListExecutionsInput, RoutingConfiguration, StartExecutionInput,
    Timestamps, UpdateStateMachineAliasInput, UpdateStateMachineInput,
};
use serde_json::Value;
use std::collections::HashMap;
use std::time::Duration;

/// The saga's workflow on the embedded engine.
#[derive(Clone)]
pub struct EmbeddedWorkflow {
    engine: Engine,
    state_machine_arn: String,
    /// The alias orders start through (`<machine>:live`).
    alias_arn: String,
    /// The version holding this build's definition (see [`EmbeddedWorkflow::version_arn`]).
    version_arn: Option<String>,
    activity_arns: HashMap<Activity, String>,
}

impl EmbeddedWorkflow {
    /// Creates every activity and the saga's state machine, or finds them (both idempotent on
    /// the engine), and runs the start's upgrade ([`upgrade`](crate::upgrade)): this build's
    /// definition is published as a version and the alias `live` routed to it, unless `live`
    /// routes there already, an operator pinned it, or a newer release holds it. Orders start
    /// through `live`; executions already running keep the version they started on. Runs at
    /// every start of the service; `canary_percent` is the share of new orders a newly
    /// published version gets (`None`: all).
    pub async fn setup(engine: Engine) -> Result<Self, WorkflowError> {
        Self::setup_with(engine, None).await
    }

    /// [`setup`](Self::setup) with a canary's share for a newly published version.
    pub async fn setup_with(
        engine: Engine,
        canary_percent: Option<u8>,
    ) -> Result<Self, WorkflowError> {
        let mut activity_arns = HashMap::with_capacity(Activity::ALL.len());
        for activity in Activity::ALL {
            let info = engine
                .create_activity(activity.name())
                .await
                .map_err(map_error)?;
            activity_arns.insert(activity, info.activity_arn);
        }
        let rendered = definition::render_with(&activity_arns).map_err(WorkflowError::Other)?;
        let description = definition::version_description(&rendered);
        let created = engine
            .create_state_machine_with(CreateStateMachineInput {
                name: STATE_MACHINE_NAME.to_owned(),
                definition: rendered.clone(),
                ..Default::default()
            })
            .await;
        let state_machine_arn = match created {
            Ok(c) => c.state_machine_arn,
            Err(EngineError::StateMachineAlreadyExists(_)) => machine_arn(&engine),
            Err(e) => return Err(map_error(e)),
        };
        let releases = EngineReleases {
            engine: &engine,
            machine_arn: &state_machine_arn,
        };
        let upgraded = upgrade::upgrade(
            &releases,
            &Build {
                definition: &rendered,
                description: &description,
                canary_percent,
            },
        )
        .await?;
        Ok(EmbeddedWorkflow {
            alias_arn: releases.alias_arn(),
            version_arn: upgraded.version_arn,
            engine,
            state_machine_arn,
            activity_arns,
        })
    }

    /// The saga's workflow on `engine` as an earlier start left it, without the upgrade and
    /// without any call: for the operators' verbs on versions (`fulfillment versions`).
    pub fn attach(engine: Engine) -> Self {
        let config = engine.config();
        let activity_arns = Activity::ALL
            .into_iter()
            .map(|a| {
                let arn = format!(
                    "arn:aws:states:{}:{}:activity:{}",
                    config.region,
                    config.account_id,
                    a.name()
                );
                (a, arn)
            })
            .collect();
        let state_machine_arn = machine_arn(&engine);
        EmbeddedWorkflow {
            alias_arn: format!("{state_machine_arn}:{LIVE_ALIAS}"),
            version_arn: None,
            state_machine_arn,
            activity_arns,
            engine,
        }
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    pub fn state_machine_arn(&self) -> &str {
        &self.state_machine_arn
    }

    /// The alias orders start through.
    pub fn alias_arn(&self) -> &str {
        &self.alias_arn
    }

    /// The version holding this build's definition, when `live` routes to it or the start
    /// published it (`None` when `live` is pinned elsewhere or on a newer release).
    pub fn version_arn(&self) -> Option<&str> {
        self.version_arn.as_deref()
    }

    pub fn activity_arn(&self, activity: Activity) -> &str {
        &self.activity_arns[&activity]
    }

    /// Every activity's ARN.
    pub fn activity_arns(&self) -> &HashMap<Activity, String> {
        &self.activity_arns
    }

    fn releases(&self) -> EngineReleases<'_> {
        EngineReleases {
            engine: &self.engine,
            machine_arn: &self.state_machine_arn,
        }
    }

    /// The `limit` newest versions, where `live` routes and the orders running on each.
    pub async fn versions(&self, limit: usize) -> Result<VersionsReport, VersionsError> {
        versions::list(&self.releases(), limit).await
    }

    /// Rolls `live` back to version `to` (default: the one before) and pins it.
    pub async fn rollback(&self, to: Option<u64>) -> Result<RolledBack, VersionsError> {
        versions::rollback(&self.releases(), to, Utc::now()).await
    }

    /// Routes `live` wholly to this build's definition, unpinned; its version number.
    pub async fn promote(&self) -> Result<u64, VersionsError> {
        let rendered =
            definition::render_with(&self.activity_arns).map_err(WorkflowError::Other)?;
        let description = definition::version_description(&rendered);
        versions::promote(
            &self.releases(),
            &Build {
                definition: &rendered,
                description: &description,
                canary_percent: None,
            },
        )
        .await
    }
}

/// The saga machine's ARN on `engine`.
fn machine_arn(engine: &Engine) -> String {
    let config = engine.config();
    format!(
        "arn:aws:states:{}:{}:stateMachine:{STATE_MACHINE_NAME}",
        config.region, config.account_id
    )
}

/// The upgrade's calls on the engine.
struct EngineReleases<'a> {
    engine: &'a Engine,
    machine_arn: &'a str,
}

impl EngineReleases<'_> {
    fn alias_arn(&self) -> String {
        format!("{}:{LIVE_ALIAS}", self.machine_arn)
    }
}

fn engine_routing(routing: &[(String, u8)]) -> Vec<RoutingConfiguration> {
    routing
        .iter()
        .map(|(version, weight)| RoutingConfiguration {
            state_machine_version_arn: version.clone(),
            weight: u32::from(*weight),
        })
        .collect()
}

fn release_error(e: EngineError) -> ReleaseError {
    match e {
        EngineError::Conflict(m) => ReleaseError::Conflict(m),
        e => ReleaseError::Failed(map_error(e)),
    }
}

#[async_trait]
impl Releases for EngineReleases<'_> {
    async fn live(&self) -> Result<Option<Live>, ReleaseError> {
        let alias = match self
            .engine
            .describe_state_machine_alias(&self.alias_arn())
            .await
        {
            Ok(alias) => alias,
            Err(EngineError::ResourceNotFound(_)) => return Ok(None),
            Err(e) => return Err(release_error(e)),
        };
        let mut routes = Vec::with_capacity(alias.routing_configuration.len());
        for r in alias.routing_configuration {
            let version = self
                .engine
                .describe_state_machine(&r.state_machine_version_arn)
                .await
                .map_err(release_error)?;
            routes.push(RoutedVersion {
                version_arn: r.state_machine_version_arn,
                weight: u8::try_from(r.weight).unwrap_or(0),
                definition: version.definition,
                description: version.description,
            });
        }
        Ok(Some(Live {
            routes,
            description: alias.description,
        }))
    }

    async fn publish(&self, definition: &str, description: &str) -> Result<String, ReleaseError> {
        let updated = self
            .engine
            .update_state_machine(UpdateStateMachineInput {
                state_machine_arn: self.machine_arn.to_owned(),
                definition: Some(definition.to_owned()),
                publish: true,
                version_description: Some(description.to_owned()),
                ..Default::default()
            })
            .await
            .map_err(release_error)?;
        updated.state_machine_version_arn.ok_or_else(|| {
            ReleaseError::Failed(WorkflowError::Other(
                "the engine published no version".to_owned(),
            ))
        })
    }

    async fn create_live(&self, routing: &[(String, u8)]) -> Result<(), ReleaseError> {
        self.engine
            .create_state_machine_alias(CreateStateMachineAliasInput {
                name: LIVE_ALIAS.to_owned(),
                description: Some(definition::LIVE_DESCRIPTION.to_owned()),
                routing_configuration: engine_routing(routing),
            })
            .await
            .map_err(release_error)?;
        Ok(())
    }

    async fn route_live(
        &self,
        routing: &[(String, u8)],
        description: Option<&str>,
    ) -> Result<(), ReleaseError> {
        self.engine
            .update_state_machine_alias(UpdateStateMachineAliasInput {
                state_machine_alias_arn: self.alias_arn(),
                routing_configuration: Some(engine_routing(routing)),
                description: description.map(str::to_owned),
            })
            .await
            .map_err(release_error)?;
        Ok(())
    }

    async fn versions(&self, limit: usize) -> Result<Vec<PublishedVersion>, ReleaseError> {
        let mut found = Vec::new();
        let mut token = None;
        while found.len() < limit {
            let page = self
                .engine
                .list_state_machine_versions(self.machine_arn, Some(1000), token.as_deref())
                .await
                .map_err(release_error)?;
            for item in page.items {
                if found.len() == limit {
                    break;
                }
                let described = self
                    .engine
                    .describe_state_machine(&item.state_machine_version_arn)
                    .await
                    .map_err(release_error)?;
                found.push(PublishedVersion {
                    number: versions::number_of(&item.state_machine_version_arn).unwrap_or(0),
                    version_arn: item.state_machine_version_arn,
                    description: described.description,
                    created: item.creation_date,
                });
            }
            token = page.next_token;
            if token.is_none() {
                break;
            }
        }
        Ok(found)
    }

    async fn running_on(&self, version_arn: &str) -> Result<u64, ReleaseError> {
        let mut running = 0;
        let mut next_token = None;
        loop {
            let page = self
                .engine
                .list_executions(ListExecutionsInput {
                    state_machine_arn: version_arn.to_owned(),
                    status_filter: Some(ExecutionStatus::Running),
                    max_results: Some(1000),
                    next_token,
                })
                .await
                .map_err(release_error)?;
            running += page.executions.len() as u64;
            next_token = page.next_token;
            if next_token.is_none() {
                return Ok(running);
            }
        }
    }
}

/// The one place engine errors become port errors.
fn map_error(e: EngineError) -> WorkflowError {
    match e {
        EngineError::TaskTimedOut(m) => WorkflowError::TaskTimedOut(m),
        EngineError::InvalidToken(m) | EngineError::TaskDoesNotExist(m) => {
            WorkflowError::InvalidToken(m)
        }
        EngineError::ExecutionDoesNotExist(m) => WorkflowError::ExecutionDoesNotExist(m),
        EngineError::ExecutionAlreadyExists(m) => WorkflowError::ExecutionAlreadyExists(m),
        EngineError::ExecutionNotRedrivable(m) => WorkflowError::NotRedrivable(m),
        EngineError::Unavailable(m) => WorkflowError::Unavailable(m),
        e @ (EngineError::ExecutionLimitExceeded(_)
        | EngineError::StateMachineDoesNotExist(_)
        | EngineError::StateMachineAlreadyExists(_)
        | EngineError::StateMachineTypeNotSupported(_)
        | EngineError::ActivityDoesNotExist(_)
        | EngineError::ActivityAlreadyExists(_)
        | EngineError::InvalidArn(_)
        | EngineError::InvalidName(_)
        | EngineError::InvalidDefinition(_)
        | EngineError::InvalidExecutionInput(_)
        | EngineError::InvalidOutput(_)
        | EngineError::Validation(_)
        | EngineError::Conflict(_)
        | EngineError::MissingRequiredParameter(_)
        | EngineError::ResourceNotFound(_)
        | EngineError::ServiceQuotaExceeded(_)
        | EngineError::Internal(_)) => WorkflowError::Other(e.to_string()),
    }
}

fn parse_json(text: &str, what: &str) -> Result<Value, WorkflowError> {
    serde_json::from_str(text)
        .map_err(|e| WorkflowError::Other(format!("the engine returned invalid JSON {what}: {e}")))
}

fn non_empty(s: &str) -> Option<&str> {
    (!s.is_empty()).then_some(s)
}

#[async_trait]
impl WorkflowPort for EmbeddedWorkflow {
    fn execution_arn(&self, name: &str) -> String {
        let config = self.engine.config();
        format!(
            "arn:aws:states:{}:{}:execution:{STATE_MACHINE_NAME}:{name}",
            config.region, config.account_id
        )
    }

    /// The engine answers a repeat start of a running execution with the same input by
    /// returning that execution, without saying it existed, so the execution is looked up
    /// first: one that exists (running or closed) is "already started" and is not started
    /// again. Only two starts of the same name racing between that look-up and the start can
    /// both be told "started"; the start date catches those unless they fall in the same
    /// millisecond (an execution this call started has a start date no earlier than the call:
    /// the engine stamps it, with the same clock, when it takes the command). The HTTP layer
    /// has settled such races by its conditional insert before it gets here. A name reused
    /// with another input is `ExecutionAlreadyExists` on the engine, also "already started":
    /// the HTTP layer has compared the bodies.
    async fn start_execution(
        &self,
        name: &str,
        input: &Value,
    ) -> Result<StartedExecution, WorkflowError> {
        let execution_arn = self.execution_arn(name);
        let called_at = Utc::now().trunc_subsecs(3);
        match self.engine.describe_execution(&execution_arn).await {
            Ok(_) => {
                return Ok(StartedExecution {
                    execution_arn,
                    already_started: true,
                });
            }
            Err(EngineError::ExecutionDoesNotExist(_)) => {}
            Err(e) => return Err(map_error(e)),
        }
        let started = self
            .engine
            .start_execution(StartExecutionInput {
                state_machine_arn: self.alias_arn.clone(),
                name: Some(name.to_owned()),
                input: Some(input.to_string()),
            })
            .await;
        match started {
            Ok(out) => Ok(StartedExecution {
                already_started: out.start_date < called_at,
                execution_arn: out.execution_arn,
            }),
            Err(EngineError::ExecutionAlreadyExists(_)) => Ok(StartedExecution {
                execution_arn,
                already_started: true,
            }),
            Err(e) => Err(map_error(e)),
        }
    }

    async fn describe_execution(
        &self,
        execution_arn: &str,
    ) -> Result<ExecutionInfo, WorkflowError> {
        let d = self
            .engine
            .describe_execution(execution_arn)
            .await
            .map_err(map_error)?;
        let output = d
            .output
            .as_deref()
            .map(|o| parse_json(o, "output"))
            .transpose()?;
        Ok(ExecutionInfo {
            execution_arn: d.execution_arn,
            status: d.status.as_str().to_owned(),
            start_date: d.start_date,
            stop_date: d.stop_date,
            output,
            error: d.error,
            cause: d.cause,
            redrive_count: d.redrive_count,
            redrive_date: d.redrive_date,
            redrive_status: Some(d.redrive_status.as_str().to_owned()),
            redrive_status_reason: d.redrive_status_reason,
        })
    }

    async fn list_running_executions(
        &self,
        next_token: Option<String>,
    ) -> Result<RunningPage, WorkflowError> {
        let page = self
            .engine
            .list_executions(ListExecutionsInput {
                state_machine_arn: self.state_machine_arn.clone(),
                status_filter: Some(ExecutionStatus::Running),
                max_results: Some(RUNNING_PAGE),
                next_token,
            })
            .await
            .map_err(map_error)?;
        Ok(RunningPage {
            execution_arns: page
                .executions
                .into_iter()
                .map(|e| e.execution_arn)
                .collect(),
            next_token: page.next_token,
        })
    }

    async fn get_execution_history(
        &self,
        execution_arn: &str,
        next_token: Option<String>,
        max_results: u32,
    ) -> Result<HistoryPage, WorkflowError> {
        let page = self
            .engine
            .get_execution_history(GetExecutionHistoryInput {
                execution_arn: execution_arn.to_owned(),
                max_results: Some(max_results),
                next_token,
                reverse_order: false,
                include_execution_data: Some(true),
            })
            .await
            .map_err(map_error)?;
        Ok(HistoryPage {
            events: page
                .events
                .into_iter()
                .map(|e| e.to_aws_json(Timestamps::Rfc3339))
                .collect(),
            next_token: page.next_token,
        })
    }

    async fn stop_execution(
        &self,
        execution_arn: &str,
        error: &str,
        cause: &str,
    ) -> Result<(), WorkflowError> {
        self.engine
            .stop_execution(execution_arn, non_empty(error), non_empty(cause))
            .await
            .map(drop)
            .map_err(map_error)
    }

    async fn redrive_execution(
        &self,
        execution_arn: &str,
    ) -> Result<RedriveOutcome, WorkflowError> {
        let redrive_date = self
            .engine
            .redrive_execution(execution_arn, None)
            .await
            .map_err(map_error)?;
        Ok(RedriveOutcome { redrive_date })
    }

    async fn get_activity_task(
        &self,
        activity_arn: &str,
        worker_name: &str,
        wait: Duration,
    ) -> Result<Option<TaskHandle>, WorkflowError> {
        let task = self
            .engine
            .get_activity_task(activity_arn, non_empty(worker_name), wait)
            .await
            .map_err(map_error)?;
        task.map(|t| {
            Ok(TaskHandle {
                input: parse_json(&t.input, "task input")?,
                task_token: t.task_token,
            })
        })
        .transpose()
    }

    async fn send_task_success(
        &self,
        task_token: &str,
        output: &Value,
    ) -> Result<(), WorkflowError> {
        self.engine
            .send_task_success(task_token, &output.to_string())
            .await
            .map_err(map_error)
    }

    async fn send_task_failure(
        &self,
        task_token: &str,
        error: &str,
        cause: &str,
    ) -> Result<(), WorkflowError> {
        self.engine
            .send_task_failure(task_token, non_empty(error), non_empty(cause))
            .await
            .map_err(map_error)
    }

    async fn send_task_heartbeat(&self, task_token: &str) -> Result<(), WorkflowError> {
        self.engine
            .send_task_heartbeat(task_token)
            .await
            .map_err(map_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_redrive_is_its_own_error_and_not_transient() {
        let reason = "Execution is SUCCEEDED and cannot be redriven.";
        let e = map_error(EngineError::ExecutionNotRedrivable(reason.to_owned()));
        assert_eq!(e, WorkflowError::NotRedrivable(reason.to_owned()));
        assert!(!e.is_transient());
    }

    #[tokio::test]
    async fn redriving_an_unknown_execution_says_it_does_not_exist() {
        let dir = tempfile::tempdir().unwrap();
        let engine = Engine::open(engine::EngineConfig::new(dir.path().join("e.db")), None)
            .await
            .unwrap();
        let workflow = EmbeddedWorkflow::setup(engine.clone()).await.unwrap();
        let arn = workflow.execution_arn("o-none");
        let e = workflow.redrive_execution(&arn).await.unwrap_err();
        assert!(
            matches!(e, WorkflowError::ExecutionDoesNotExist(_)),
            "{e:?}"
        );
        engine.shutdown().await;
    }
}
