//! [`AwsWorkflow`]: the workflow port's verbs as Step Functions API calls, with the semantics of
//! the embedded adapter where AWS's differ (repeat starts, empty polls, dead tokens).

use super::arn::Scope;
use super::error::map_error;
use super::history::{event_json, to_chrono};
use super::releases::SfnReleases;
use crate::definition::{self, Activity};
use crate::port::{
    ExecutionInfo, HistoryPage, RUNNING_PAGE, RedriveOutcome, RunningPage, StartedExecution,
    TaskHandle, WorkflowError, WorkflowPort,
};
use crate::upgrade::{self, Build, Upgraded};
use crate::versions::{self, RolledBack, VersionsError, VersionsReport};
use async_trait::async_trait;
use aws_sdk_sfn::Client;
use aws_sdk_sfn::config::StalledStreamProtectionConfig;
use aws_sdk_sfn::config::retry::RetryConfig;
use aws_sdk_sfn::config::timeout::TimeoutConfig;
use aws_sdk_sfn::primitives::DateTime as SdkDateTime;
use aws_sdk_sfn::types::ExecutionStatus;
use chrono::{DateTime, SubsecRound, Utc};
use serde_json::Value;
use std::collections::HashMap;
use std::time::Duration;

/// How long one `GetActivityTask` may take, connection to last byte: Step Functions holds a
/// poll open for up to 60 s, so a client must wait at least 65 s (AWS's advice) before it gives
/// up on one.
pub const POLL_TIMEOUT: Duration = Duration::from_secs(65);

/// The saga's workflow on AWS Step Functions (or anything speaking its API, such as
/// `fulfillment engine`).
#[derive(Clone)]
pub struct AwsWorkflow {
    /// Every call but polls, with the client's own timeouts and retries.
    client: Client,
    /// `GetActivityTask` only: [`POLL_TIMEOUT`], no SDK retries (see [`poll_client`]).
    polls: Client,
    state_machine_arn: String,
    /// What `StartExecution` names: the alias `live` once [`AwsWorkflow::upgrade`] ran, the
    /// machine itself before.
    start_arn: String,
    /// `…:execution:<state machine name>:`, the ARN of an execution less its name.
    execution_prefix: String,
    activity_arns: HashMap<Activity, String>,
}

impl AwsWorkflow {
    /// The workflow of the state machine `state_machine_arn` (unqualified:
    /// `arn:<partition>:states:<region>:<account>:stateMachine:<name>`). Its activities are
    /// those [`provision`](super::provision) creates, in the same partition, region and account,
    /// named by [`Activity::name`]. Makes no call.
    pub fn new(client: Client, state_machine_arn: &str) -> Result<AwsWorkflow, WorkflowError> {
        let (scope, machine) = Scope::of(state_machine_arn, "stateMachine").ok_or_else(|| {
            WorkflowError::Other(format!(
                "not a state machine ARN: {state_machine_arn:?} (expected \
                 arn:<partition>:states:<region>:<account>:stateMachine:<name>)"
            ))
        })?;
        let activity_arns = Activity::ALL
            .into_iter()
            .map(|a| (a, scope.arn("activity", a.name())))
            .collect();
        let execution_prefix = scope.arn("execution", &format!("{machine}:"));
        Ok(AwsWorkflow {
            polls: poll_client(&client),
            client,
            state_machine_arn: state_machine_arn.to_owned(),
            start_arn: state_machine_arn.to_owned(),
            execution_prefix,
            activity_arns,
        })
    }

    pub fn state_machine_arn(&self) -> &str {
        &self.state_machine_arn
    }

    /// What executions start on: the alias `live` after [`upgrade`](Self::upgrade).
    pub fn start_arn(&self) -> &str {
        &self.start_arn
    }

    /// The start's upgrade ([`crate::upgrade`]): publishes this build's definition (rendered
    /// with the activities' ARNs) as a version and routes the alias `live` to it, unless `live`
    /// routes there already, an operator pinned it, or a newer release holds it; from then on
    /// executions start through `live`. `canary_percent` is the share of new orders a newly
    /// published version gets (`None`: all). Calls `DescribeStateMachineAlias`,
    /// `DescribeStateMachine`, and when it changes something `UpdateStateMachine` (no role:
    /// the machine keeps its own) and `CreateStateMachineAlias` or `UpdateStateMachineAlias`.
    pub async fn upgrade(&mut self, canary_percent: Option<u8>) -> Result<Upgraded, WorkflowError> {
        let rendered =
            definition::render_with(&self.activity_arns).map_err(WorkflowError::Other)?;
        let description = definition::version_description(&rendered);
        self.upgrade_to(&rendered, &description, canary_percent)
            .await
    }

    fn releases(&self) -> SfnReleases<'_> {
        SfnReleases {
            client: &self.client,
            machine_arn: &self.state_machine_arn,
        }
    }

    /// The `limit` newest versions, where `live` routes and the orders running on each
    /// (`ListStateMachineVersions`, `DescribeStateMachine` and `ListExecutions` per version).
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

    /// Starts executions through the alias `live` from now on, without the upgrade's calls:
    /// for a process that may not publish (the audit's repair).
    pub fn start_through_live(&mut self) {
        self.start_arn = self.releases().alias_arn();
    }

    /// [`upgrade`](Self::upgrade) to a given definition (a test's stand-in for another build).
    #[doc(hidden)]
    pub async fn upgrade_to(
        &mut self,
        definition: &str,
        description: &str,
        canary_percent: Option<u8>,
    ) -> Result<Upgraded, WorkflowError> {
        let releases = self.releases();
        let upgraded = upgrade::upgrade(
            &releases,
            &Build {
                definition,
                description,
                canary_percent,
            },
        )
        .await?;
        let alias = releases.alias_arn();
        self.start_arn = alias;
        Ok(upgraded)
    }

    pub fn activity_arn(&self, activity: Activity) -> &str {
        &self.activity_arns[&activity]
    }

    /// Every activity's ARN.
    pub fn activity_arns(&self) -> &HashMap<Activity, String> {
        &self.activity_arns
    }

    /// A start answered `ExecutionAlreadyExists`: the name is taken by a closed execution, or by
    /// a running one with another input. Only the latter is the port's error.
    async fn existing(
        &self,
        name: &str,
        input: &Value,
        conflict: WorkflowError,
    ) -> Result<StartedExecution, WorkflowError> {
        let execution_arn = self.execution_arn(name);
        let found = self
            .client
            .describe_execution()
            .execution_arn(&execution_arn)
            .send()
            .await
            .map_err(map_error);
        let d = match found {
            Ok(d) => d,
            Err(WorkflowError::ExecutionDoesNotExist(m)) => {
                return Err(WorkflowError::Other(format!(
                    "StartExecution said the name {name:?} is taken but {execution_arn} does not \
                     exist ({m}): is the state machine ARN the one executions start on?"
                )));
            }
            Err(e) => return Err(e),
        };
        let open = matches!(
            d.status(),
            ExecutionStatus::Running | ExecutionStatus::PendingRedrive
        );
        let same_input = d
            .input()
            .and_then(|i| serde_json::from_str::<Value>(i).ok())
            .is_some_and(|i| &i == input);
        if open && !same_input {
            return Err(conflict);
        }
        Ok(StartedExecution {
            execution_arn,
            already_started: true,
        })
    }
}

/// A client for long polls, sharing `client`'s connections, credentials and endpoint: every
/// timeout [`POLL_TIMEOUT`] (the read timeout too: the answer's first byte may take 60 s), and
/// one attempt. An SDK retry could make a poll outlast the timeout, and a poll given up on
/// while Step Functions hands it a task loses that task until the task times out; the worker
/// pool polls again anyway, with its own back-off. Stalled-stream protection is off: a poll
/// is silent on purpose, and the timeouts bound it.
fn poll_client(client: &Client) -> Client {
    let config = client
        .config()
        .to_builder()
        .timeout_config(
            TimeoutConfig::builder()
                .read_timeout(POLL_TIMEOUT)
                .operation_attempt_timeout(POLL_TIMEOUT)
                .operation_timeout(POLL_TIMEOUT)
                .build(),
        )
        .retry_config(RetryConfig::disabled())
        .stalled_stream_protection(StalledStreamProtectionConfig::disabled())
        .build();
    Client::from_conf(config)
}

fn date(t: &SdkDateTime) -> Result<DateTime<Utc>, WorkflowError> {
    to_chrono(t).ok_or_else(|| WorkflowError::Other(format!("a date out of range: {t}")))
}

fn parse_json(text: &str, what: &str) -> Result<Value, WorkflowError> {
    serde_json::from_str(text).map_err(|e| {
        WorkflowError::Other(format!("Step Functions returned invalid JSON {what}: {e}"))
    })
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}

#[async_trait]
impl WorkflowPort for AwsWorkflow {
    fn execution_arn(&self, name: &str) -> String {
        format!("{}{name}", self.execution_prefix)
    }

    /// Step Functions answers a repeat start of a running execution with the same input like a
    /// first start, so a success is a repeat when the start date AWS gives back (milliseconds)
    /// falls in an earlier millisecond than this call began. So a repeat in the very
    /// millisecond of the first start looks new, and so would repeats within the skew of a
    /// host clock behind AWS's; a clock ahead would make new executions look repeated.
    /// Any other reuse of the name is `ExecutionAlreadyExists`; the execution is then
    /// described: a closed one, whatever its input, is "already started", a running one with
    /// another input is the error. The embedded adapter describes first instead; here that
    /// would spend DescribeExecution's much smaller quota on every order.
    async fn start_execution(
        &self,
        name: &str,
        input: &Value,
    ) -> Result<StartedExecution, WorkflowError> {
        let called_at = Utc::now().trunc_subsecs(3);
        let started = self
            .client
            .start_execution()
            .state_machine_arn(&self.start_arn)
            .name(name)
            .input(input.to_string())
            .send()
            .await;
        match started.map_err(map_error) {
            Ok(out) => Ok(StartedExecution {
                already_started: date(out.start_date())? < called_at,
                execution_arn: out.execution_arn().to_owned(),
            }),
            Err(conflict @ WorkflowError::ExecutionAlreadyExists(_)) => {
                self.existing(name, input, conflict).await
            }
            Err(e) => Err(e),
        }
    }

    async fn describe_execution(
        &self,
        execution_arn: &str,
    ) -> Result<ExecutionInfo, WorkflowError> {
        let d = self
            .client
            .describe_execution()
            .execution_arn(execution_arn)
            .send()
            .await
            .map_err(map_error)?;
        Ok(ExecutionInfo {
            execution_arn: d.execution_arn().to_owned(),
            status: d.status().as_str().to_owned(),
            start_date: date(d.start_date())?,
            stop_date: d.stop_date().map(date).transpose()?,
            output: d.output().map(|o| parse_json(o, "output")).transpose()?,
            error: d.error().map(str::to_owned),
            cause: d.cause().map(str::to_owned),
            redrive_count: d
                .redrive_count()
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(0),
            redrive_date: d.redrive_date().map(date).transpose()?,
            redrive_status: d.redrive_status().map(|s| s.as_str().to_owned()),
            redrive_status_reason: d.redrive_status_reason().map(str::to_owned),
        })
    }

    async fn list_running_executions(
        &self,
        next_token: Option<String>,
    ) -> Result<RunningPage, WorkflowError> {
        let page = self
            .client
            .list_executions()
            .state_machine_arn(&self.state_machine_arn)
            .status_filter(ExecutionStatus::Running)
            .max_results(RUNNING_PAGE as i32)
            .set_next_token(next_token)
            .send()
            .await
            .map_err(map_error)?;
        Ok(RunningPage {
            execution_arns: page
                .executions()
                .iter()
                .map(|e| e.execution_arn().to_owned())
                .collect(),
            next_token: page.next_token().and_then(non_empty),
        })
    }

    async fn get_execution_history(
        &self,
        execution_arn: &str,
        next_token: Option<String>,
        max_results: u32,
    ) -> Result<HistoryPage, WorkflowError> {
        let page = self
            .client
            .get_execution_history()
            .execution_arn(execution_arn)
            .max_results(i32::try_from(max_results).unwrap_or(i32::MAX))
            .set_next_token(next_token)
            .reverse_order(false)
            .include_execution_data(true)
            .send()
            .await
            .map_err(map_error)?;
        Ok(HistoryPage {
            events: page.events().iter().map(event_json).collect(),
            next_token: page.next_token().map(str::to_owned),
        })
    }

    async fn stop_execution(
        &self,
        execution_arn: &str,
        error: &str,
        cause: &str,
    ) -> Result<(), WorkflowError> {
        self.client
            .stop_execution()
            .execution_arn(execution_arn)
            .set_error(non_empty(error))
            .set_cause(non_empty(cause))
            .send()
            .await
            .map(drop)
            .map_err(map_error)
    }

    /// The SDK gives the request a client token of its own, the same on its retries, so a
    /// retried request does not redrive twice.
    async fn redrive_execution(
        &self,
        execution_arn: &str,
    ) -> Result<RedriveOutcome, WorkflowError> {
        let out = self
            .client
            .redrive_execution()
            .execution_arn(execution_arn)
            .send()
            .await
            .map_err(map_error)?;
        Ok(RedriveOutcome {
            redrive_date: date(out.redrive_date())?,
        })
    }

    /// Step Functions decides how long a poll is held (up to 60 s), so `wait` is not applied:
    /// giving up on a poll early could lose the task it is being handed.
    async fn get_activity_task(
        &self,
        activity_arn: &str,
        worker_name: &str,
        _wait: Duration,
    ) -> Result<Option<TaskHandle>, WorkflowError> {
        let out = self
            .polls
            .get_activity_task()
            .activity_arn(activity_arn)
            .set_worker_name(non_empty(worker_name))
            .send()
            .await
            .map_err(map_error)?;
        match out.task_token() {
            None | Some("") => Ok(None),
            Some(token) => Ok(Some(TaskHandle {
                task_token: token.to_owned(),
                input: parse_json(out.input().unwrap_or("{}"), "task input")?,
            })),
        }
    }

    async fn send_task_success(
        &self,
        task_token: &str,
        output: &Value,
    ) -> Result<(), WorkflowError> {
        self.client
            .send_task_success()
            .task_token(task_token)
            .output(output.to_string())
            .send()
            .await
            .map(drop)
            .map_err(map_error)
    }

    async fn send_task_failure(
        &self,
        task_token: &str,
        error: &str,
        cause: &str,
    ) -> Result<(), WorkflowError> {
        self.client
            .send_task_failure()
            .task_token(task_token)
            .set_error(non_empty(error))
            .set_cause(non_empty(cause))
            .send()
            .await
            .map(drop)
            .map_err(map_error)
    }

    async fn send_task_heartbeat(&self, task_token: &str) -> Result<(), WorkflowError> {
        self.client
            .send_task_heartbeat()
            .task_token(task_token)
            .send()
            .await
            .map(drop)
            .map_err(map_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_sfn::operation::describe_execution::DescribeExecutionOutput;
    use aws_sdk_sfn::operation::get_activity_task::GetActivityTaskOutput;
    use aws_sdk_sfn::operation::start_execution::{StartExecutionError, StartExecutionOutput};
    use aws_sdk_sfn::types::error::ExecutionAlreadyExists;
    use aws_smithy_mocks::{Rule, RuleMode, mock, mock_client};
    use serde_json::json;

    const SM: &str = "arn:aws:states:eu-west-1:111122223333:stateMachine:saga";

    /// The adapter over a client answering from `rules`, with the SDK's standard retries (three
    /// attempts, a back-off short enough for a test).
    fn workflow(rules: &[&Rule]) -> AwsWorkflow {
        let client = mock_client!(aws_sdk_sfn, RuleMode::MatchAny, rules, |c| c.retry_config(
            RetryConfig::standard()
                .with_max_attempts(3)
                .with_initial_backoff(Duration::from_millis(1))
        ));
        AwsWorkflow::new(client, SM).unwrap()
    }

    fn server_error() -> Option<String> {
        Some(r#"{"__type":"InternalFailure","message":"try later"}"#.to_owned())
    }

    #[test]
    fn arns_are_derived_from_the_state_machine_arn() {
        let w = workflow(&[]);
        assert_eq!(w.state_machine_arn(), SM);
        assert_eq!(
            w.activity_arn(Activity::ChargePayment),
            "arn:aws:states:eu-west-1:111122223333:activity:fulfillment-charge-payment"
        );
        assert_eq!(
            w.execution_arn("order-1"),
            "arn:aws:states:eu-west-1:111122223333:execution:saga:order-1"
        );
        let client = w.client.clone();
        let e = AwsWorkflow::new(client, "arn:aws:states:eu-west-1:1:activity:x").err();
        assert!(matches!(e, Some(WorkflowError::Other(m)) if m.contains("stateMachine")));
    }

    #[tokio::test]
    async fn a_poll_is_tried_once_while_other_calls_get_the_sdk_retries() {
        let poll = mock!(Client::get_activity_task)
            .sequence()
            .http_status(500, server_error())
            .repeatedly()
            .build();
        let heartbeat = mock!(Client::send_task_heartbeat)
            .sequence()
            .http_status(500, server_error())
            .repeatedly()
            .build();
        let w = workflow(&[&poll, &heartbeat]);
        let e = w
            .get_activity_task("arn:a", "w", Duration::from_secs(1))
            .await
            .unwrap_err();
        assert!(e.is_transient(), "{e:?}");
        assert_eq!(poll.num_calls(), 1);
        let e = w.send_task_heartbeat("t").await.unwrap_err();
        assert!(e.is_transient(), "{e:?}");
        assert_eq!(heartbeat.num_calls(), 3);
    }

    #[tokio::test]
    async fn an_empty_or_absent_token_is_no_task() {
        let empty = mock!(Client::get_activity_task)
            .match_requests(|r| r.activity_arn() == Some("arn:empty"))
            .then_output(|| GetActivityTaskOutput::builder().task_token("").build());
        let absent = mock!(Client::get_activity_task)
            .match_requests(|r| r.activity_arn() == Some("arn:absent"))
            .then_output(|| GetActivityTaskOutput::builder().build());
        let task = mock!(Client::get_activity_task)
            .match_requests(|r| r.activity_arn() == Some("arn:work"))
            .then_output(|| {
                GetActivityTaskOutput::builder()
                    .task_token("tok")
                    .input(r#"{"orderId":"o-1"}"#)
                    .build()
            });
        let w = workflow(&[&empty, &absent, &task]);
        let wait = Duration::from_secs(1);
        assert_eq!(w.get_activity_task("arn:empty", "w", wait).await, Ok(None));
        assert_eq!(w.get_activity_task("arn:absent", "", wait).await, Ok(None));
        assert_eq!(
            w.get_activity_task("arn:work", "w", wait).await,
            Ok(Some(TaskHandle {
                task_token: "tok".to_owned(),
                input: json!({"orderId": "o-1"})
            }))
        );
    }

    fn started_at(secs: i64) -> Rule {
        mock!(Client::start_execution).then_output(move || {
            StartExecutionOutput::builder()
                .execution_arn(format!(
                    "arn:aws:states:eu-west-1:111122223333:execution:saga:o-{secs}"
                ))
                .start_date(SdkDateTime::from_secs(secs))
                .build()
                .unwrap()
        })
    }

    #[tokio::test]
    async fn a_success_is_a_repeat_when_the_execution_started_before_the_call() {
        let now = Utc::now().timestamp() + 1;
        let w = workflow(&[&started_at(now)]);
        let started = w.start_execution("o", &json!({})).await.unwrap();
        assert!(!started.already_started);
        assert!(started.execution_arn.ends_with(&format!(":o-{now}")));
        let w = workflow(&[&started_at(now - 60)]);
        assert!(
            w.start_execution("o", &json!({}))
                .await
                .unwrap()
                .already_started
        );
    }

    /// The adapter when the name is taken by an execution in `status` started with `input`.
    fn taken(status: ExecutionStatus, input: &'static str) -> (AwsWorkflow, Rule) {
        let start = mock!(Client::start_execution).then_error(|| {
            StartExecutionError::ExecutionAlreadyExists(
                ExecutionAlreadyExists::builder()
                    .message("Execution Already Exists")
                    .build(),
            )
        });
        let describe = mock!(Client::describe_execution)
            .match_requests(|r| {
                r.execution_arn() == Some("arn:aws:states:eu-west-1:111122223333:execution:saga:o")
            })
            .then_output(move || {
                DescribeExecutionOutput::builder()
                    .execution_arn("arn:aws:states:eu-west-1:111122223333:execution:saga:o")
                    .state_machine_arn(SM)
                    .status(status.clone())
                    .start_date(SdkDateTime::from_secs(1_700_000_000))
                    .input(input)
                    .build()
                    .unwrap()
            });
        (workflow(&[&start, &describe]), describe)
    }

    #[tokio::test]
    async fn a_taken_name_is_already_started_unless_running_with_another_input() {
        let input = json!({"orderId": "o", "n": 1});
        for (status, given, conflict) in [
            (
                ExecutionStatus::Succeeded,
                r#"{"orderId":"o","n":1}"#,
                false,
            ),
            (ExecutionStatus::Failed, r#"{"orderId":"o","n":2}"#, false),
            (ExecutionStatus::Aborted, "{}", false),
            // Same JSON, other spelling: still the same input.
            (
                ExecutionStatus::Running,
                r#"{ "n": 1, "orderId": "o" }"#,
                false,
            ),
            (ExecutionStatus::Running, r#"{"orderId":"o","n":2}"#, true),
        ] {
            let (w, describe) = taken(status.clone(), given);
            let result = w.start_execution("o", &input).await;
            assert_eq!(describe.num_calls(), 1);
            if conflict {
                assert!(
                    matches!(result, Err(WorkflowError::ExecutionAlreadyExists(_))),
                    "{status:?} {given}: {result:?}"
                );
            } else {
                assert_eq!(
                    result,
                    Ok(StartedExecution {
                        execution_arn: w.execution_arn("o"),
                        already_started: true
                    }),
                    "{status:?} {given}"
                );
            }
        }
    }
}
