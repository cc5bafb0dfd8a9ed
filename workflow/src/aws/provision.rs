//! Provisioning: the saga's activities and state machine on Step Functions, created or brought
//! up to date, so a deployment (or a test against `fulfillment engine`) needs nothing but an
//! IAM role for the state machine.

use super::arn::Scope;
use super::error::{is_unknown_operation, map_error};
use crate::definition::{self, Activity, STATE_MACHINE_NAME};
use crate::port::WorkflowError;
use aws_sdk_sfn::Client;
use aws_sdk_sfn::types::StateMachineType;
use std::collections::HashMap;

/// What [`provision`] created or found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Provisioned {
    /// The state machine to configure the service with ([`AwsWorkflow::new`](super::AwsWorkflow::new)).
    pub state_machine_arn: String,
    pub activity_arns: HashMap<Activity, String>,
}

/// Creates every [`Activity`] (CreateActivity is idempotent by name) and the saga's STANDARD
/// state machine `STATE_MACHINE_NAME` with the definition rendered with their ARNs, run by
/// `role_arn`. Running it again returns the same ARNs.
///
/// When the machine exists with another definition or role (`StateMachineAlreadyExists`), it is
/// updated in place with UpdateStateMachine: executions already running carry on with the
/// definition they started with, new ones get the new one (on AWS and on the embedded engine's
/// endpoint alike). An endpoint without UpdateStateMachine gets an error saying so.
///
/// Calls CreateActivity, CreateStateMachine and, when needed, UpdateStateMachine; on AWS the
/// caller also needs `iam:PassRole` on `role_arn`.
pub async fn provision(client: &Client, role_arn: &str) -> Result<Provisioned, WorkflowError> {
    let mut activity_arns = HashMap::with_capacity(Activity::ALL.len());
    for activity in Activity::ALL {
        let created = client
            .create_activity()
            .name(activity.name())
            .send()
            .await
            .map_err(map_error)?;
        activity_arns.insert(activity, created.activity_arn().to_owned());
    }
    let rendered = definition::render_with(&activity_arns).map_err(WorkflowError::Other)?;

    let created = client
        .create_state_machine()
        .name(STATE_MACHINE_NAME)
        .definition(&rendered)
        .role_arn(role_arn)
        .r#type(StateMachineType::Standard)
        .send()
        .await;
    let state_machine_arn = match created {
        Ok(out) => out.state_machine_arn().to_owned(),
        Err(e)
            if e.as_service_error()
                .is_some_and(|e| e.is_state_machine_already_exists()) =>
        {
            let arn = machine_arn(&activity_arns[&Activity::ReserveInventory])?;
            update(client, &arn, &rendered, role_arn).await?;
            arn
        }
        Err(e) => return Err(map_error(e)),
    };
    Ok(Provisioned {
        state_machine_arn,
        activity_arns,
    })
}

/// The saga machine's ARN: beside its activities, as Step Functions names them.
fn machine_arn(activity_arn: &str) -> Result<String, WorkflowError> {
    let (scope, _) = Scope::of(activity_arn, "activity").ok_or_else(|| {
        WorkflowError::Other(format!(
            "CreateActivity returned {activity_arn:?}, not an activity ARN"
        ))
    })?;
    Ok(scope.arn("stateMachine", STATE_MACHINE_NAME))
}

async fn update(
    client: &Client,
    arn: &str,
    definition: &str,
    role_arn: &str,
) -> Result<(), WorkflowError> {
    let updated = client
        .update_state_machine()
        .state_machine_arn(arn)
        .definition(definition)
        .role_arn(role_arn)
        .send()
        .await;
    match updated {
        Ok(_) => {
            tracing::info!(
                state_machine_arn = arn,
                "state machine updated to the current definition"
            );
            Ok(())
        }
        Err(e) if is_unknown_operation(&e) => Err(WorkflowError::Other(format!(
            "the state machine {arn} exists with another definition or role, and this Step \
             Functions endpoint cannot update it (it has no UpdateStateMachine). Update it \
             with a tool of that endpoint, or delete it, then provision again"
        ))),
        Err(e) => Err(map_error(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_sfn::operation::create_activity::CreateActivityOutput;
    use aws_sdk_sfn::operation::create_state_machine::{
        CreateStateMachineError, CreateStateMachineOutput,
    };
    use aws_sdk_sfn::operation::update_state_machine::UpdateStateMachineOutput;
    use aws_sdk_sfn::primitives::DateTime;
    use aws_sdk_sfn::types::error::StateMachineAlreadyExists;
    use aws_smithy_mocks::{Rule, RuleMode, mock, mock_client};

    const SCOPE: &str = "arn:aws:states:eu-west-1:111122223333";

    fn activities() -> Rule {
        mock!(Client::create_activity).then_compute_output(|req| {
            CreateActivityOutput::builder()
                .activity_arn(format!("{SCOPE}:activity:{}", req.name().unwrap()))
                .creation_date(DateTime::from_secs(0))
                .build()
                .unwrap()
        })
    }

    fn client(rules: &[&Rule]) -> Client {
        mock_client!(aws_sdk_sfn, RuleMode::MatchAny, rules)
    }

    #[tokio::test]
    async fn creates_the_activities_and_the_machine_with_their_arns() {
        let machine = mock!(Client::create_state_machine)
            .match_requests(|r| {
                let d = r.definition().unwrap();
                r.name() == Some(STATE_MACHINE_NAME)
                    && r.role_arn() == Some("arn:aws:iam::111122223333:role/saga")
                    && r.r#type() == Some(&StateMachineType::Standard)
                    && !d.contains("${")
                    && d.contains(&format!("{SCOPE}:activity:fulfillment-charge-payment\""))
            })
            .then_output(|| {
                CreateStateMachineOutput::builder()
                    .state_machine_arn(format!("{SCOPE}:stateMachine:{STATE_MACHINE_NAME}"))
                    .creation_date(DateTime::from_secs(0))
                    .build()
                    .unwrap()
            });
        let activities = activities();
        let p = provision(
            &client(&[&activities, &machine]),
            "arn:aws:iam::111122223333:role/saga",
        )
        .await
        .unwrap();
        assert_eq!(activities.num_calls(), Activity::ALL.len());
        assert_eq!(
            p.state_machine_arn,
            format!("{SCOPE}:stateMachine:{STATE_MACHINE_NAME}")
        );
        for a in Activity::ALL {
            assert_eq!(
                p.activity_arns[&a],
                format!("{SCOPE}:activity:{}", a.name())
            );
        }
    }

    #[tokio::test]
    async fn a_machine_with_another_definition_is_updated() {
        let exists = mock!(Client::create_state_machine).then_error(|| {
            CreateStateMachineError::StateMachineAlreadyExists(
                StateMachineAlreadyExists::builder().build(),
            )
        });
        let update = mock!(Client::update_state_machine)
            .match_requests(|r| {
                r.state_machine_arn()
                    == Some(format!("{SCOPE}:stateMachine:{STATE_MACHINE_NAME}").as_str())
                    && r.role_arn() == Some("arn:aws:iam::111122223333:role/saga")
                    && r.definition().is_some_and(|d| d.contains(SCOPE))
            })
            .then_output(|| {
                UpdateStateMachineOutput::builder()
                    .update_date(DateTime::from_secs(0))
                    .build()
                    .unwrap()
            });
        let p = provision(
            &client(&[&activities(), &exists, &update]),
            "arn:aws:iam::111122223333:role/saga",
        )
        .await
        .unwrap();
        assert_eq!(update.num_calls(), 1);
        assert_eq!(
            p.state_machine_arn,
            format!("{SCOPE}:stateMachine:{STATE_MACHINE_NAME}")
        );
    }
}
