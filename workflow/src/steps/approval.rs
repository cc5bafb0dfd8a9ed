//! AwaitApproval: parks the task token on the order and answers nothing; an operator's decision
//! answers it later (`decide`). The keeper heartbeats parked tokens, so a token lost in a crash
//! (handed out, never parked) times out within the state's HeartbeatSeconds and the engine
//! re-issues the task; a decision whose answer was lost is replayed by the re-issued task. A
//! decision that reaches a token the approval window already closed took no effect, and says so.

use super::{OrderInput, attempt, failed, load_order, store_failed};
use crate::ErrorName;
use crate::definition::APPROVAL_STATE;
use crate::port::{WorkflowError, WorkflowPort};
use crate::workers::{Step, StepOutcome, StepTask};
use async_trait::async_trait;
use chrono::Utc;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use store::{
    Decided, Decision, Failure, Order, OrderId, OrderRepository, OrderStatus, Ports, StoreError,
};

pub struct AwaitApproval {
    pub ports: Ports,
}

/// The task output of an approval, and the cause of a rejection.
fn approved_output(order: &Order) -> Value {
    let approval = order.approval.as_ref();
    // Who decided stays on the order (for operators); the execution's data, which its owner
    // may read in the history, carries no operator's identity.
    json!({
        "decision": "approve",
        "decidedAt": approval.and_then(|a| a.decided_at),
    })
}

/// The cause a rejection fails the approval with: the operator's reason, never their name (the
/// cause reaches the order's owner; who decided is on the approval record, for operators).
fn rejection_cause(order: &Order) -> String {
    match order.approval.as_ref().and_then(|a| a.reason.as_deref()) {
        Some(reason) => format!("rejected by an operator: {reason}"),
        None => "rejected by an operator".to_owned(),
    }
}

#[async_trait]
impl Step for AwaitApproval {
    async fn run(&self, task: StepTask) -> StepOutcome {
        let input = attempt!(OrderInput::parse(&task));
        let order = attempt!(load_order(self.ports.orders.as_ref(), &input.order_id).await);
        // A decision made while an earlier token was out: answer it now.
        match order.approval.as_ref().and_then(|a| a.decision) {
            Some(Decision::Approve) => {
                return match self
                    .ports
                    .orders
                    .advance(&input.order_id, OrderStatus::Approved, None)
                    .await
                {
                    Ok(order) => StepOutcome::Done(approved_output(&order)),
                    Err(e) => store_failed(&e),
                };
            }
            Some(Decision::Reject) => {
                return failed(ErrorName::OrderRejected, rejection_cause(&order));
            }
            None => {}
        }
        if order.status.is_terminal() || order.status == OrderStatus::Compensating {
            return failed(
                ErrorName::OrderInvalid,
                format!("order is {}", order.status.as_str()),
            );
        }
        match self
            .ports
            .orders
            .park_approval(&input.order_id, &task.task_token, Utc::now())
            .await
        {
            Ok(_) => StepOutcome::Parked,
            Err(e) => store_failed(&e),
        }
    }
}

/// What an operator's decision came to.
#[derive(Debug, Clone, PartialEq)]
pub enum DecisionResult {
    /// Recorded now and answered to the workflow.
    Applied(Order),
    /// The same decision was made before.
    Replayed(Order),
    /// Another decision was made before.
    Conflict(Order),
    /// The order is not awaiting approval (not yet, never, or no longer: e.g. the window expired).
    NotAwaiting(Order),
    /// The approval window ran out before the decision reached the workflow: it took no
    /// effect and the order is (or is about to be) cancelled with `States.Timeout`, although
    /// the decision may be recorded on it.
    Expired(Order),
    NotFound,
}

#[derive(Debug, thiserror::Error)]
pub enum DecideError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Workflow(#[from] WorkflowError),
}

impl DecideError {
    pub fn is_transient(&self) -> bool {
        match self {
            DecideError::Store(e) => e.is_transient(),
            DecideError::Workflow(e) => e.is_transient(),
        }
    }
}

/// Records an operator's decision once and answers the parked task: `SendTaskSuccess` on
/// approval, `SendTaskFailure(Order.Rejected)` on rejection. A dead token is fine: the decision
/// is recorded, and the task the engine re-issues answers from it.
pub async fn decide(
    orders: &dyn OrderRepository,
    workflow: &dyn WorkflowPort,
    id: &OrderId,
    decision: Decision,
    by: &str,
    reason: Option<&str>,
) -> Result<DecisionResult, DecideError> {
    if orders.get(id).await?.is_none() {
        return Ok(DecisionResult::NotFound);
    }
    let (order, token) = match orders.decide(id, decision, by, reason, Utc::now()).await? {
        Decided::Applied { order, task_token } => (order, task_token),
        // The decision made before may have come too late; then neither took effect.
        Decided::Replayed(o) if window_ran_out(workflow, &o).await? => {
            return Ok(DecisionResult::Expired(o));
        }
        Decided::Conflict(o) if window_ran_out(workflow, &o).await? => {
            return Ok(DecisionResult::Expired(o));
        }
        Decided::Replayed(o) => return Ok(DecisionResult::Replayed(o)),
        Decided::Conflict(o) => return Ok(DecisionResult::Conflict(o)),
        Decided::NotAwaiting(o) => return Ok(DecisionResult::NotAwaiting(o)),
    };
    let answered = match decision {
        Decision::Approve => {
            let order = orders.advance(id, OrderStatus::Approved, None).await?;
            workflow
                .send_task_success(&token, &approved_output(&order))
                .await
        }
        Decision::Reject => {
            workflow
                .send_task_failure(
                    &token,
                    ErrorName::OrderRejected.as_str(),
                    &rejection_cause(&order),
                )
                .await
        }
    };
    let expired = match answered {
        Ok(()) => false,
        // A dead token: its heartbeat lapsed (a crash; the re-issued task answers from the
        // recorded decision), or the window closed between the order's read and this answer.
        Err(WorkflowError::TaskTimedOut(_) | WorkflowError::InvalidToken(_)) => {
            window_ran_out(workflow, &order).await?
        }
        Err(e) => return Err(e.into()),
    };
    // A rejection that took effect starts the compensation: the order says so at once (the
    // refund step records the same failure, from the same decision, if it gets there first).
    if decision == Decision::Reject && !expired {
        let failure = Failure {
            error: ErrorName::OrderRejected.as_str().to_owned(),
            cause: rejection_cause(&order),
        };
        orders
            .advance(id, OrderStatus::Compensating, Some(failure))
            .await?;
    }
    let order = orders.get(id).await?.unwrap_or(order);
    Ok(if expired {
        DecisionResult::Expired(order)
    } else {
        DecisionResult::Applied(order)
    })
}

/// Whether the approval window of `order` ran out: the approval state's last task attempt
/// timed out with `States.Timeout`. The definition never retries that, so it is final; the
/// workflow records it before the token dies, so a dead token's cause is always visible here.
async fn window_ran_out(workflow: &dyn WorkflowPort, order: &Order) -> Result<bool, WorkflowError> {
    let arn = order
        .execution_arn
        .clone()
        .unwrap_or_else(|| workflow.execution_arn(order.id().as_str()));
    let mut events = Vec::new();
    let mut next_token = None;
    loop {
        let page = match workflow.get_execution_history(&arn, next_token, 1000).await {
            Ok(page) => page,
            Err(WorkflowError::ExecutionDoesNotExist(_)) => return Ok(false),
            Err(e) => return Err(e),
        };
        events.extend(page.events);
        next_token = page.next_token;
        if next_token.is_none() {
            return Ok(approval_timed_out(&events));
        }
    }
}

/// Reads an AWS-shaped history, oldest event first: whether the last activity of the approval
/// state that ended, ended in `ActivityTimedOut` with `States.Timeout`.
fn approval_timed_out(events: &[Value]) -> bool {
    let mut state = None;
    let mut last_end = None;
    for event in events {
        let kind = event["type"].as_str().unwrap_or_default();
        if kind.ends_with("StateEntered") {
            state = event["stateEnteredEventDetails"]["name"].as_str();
        } else if state == Some(APPROVAL_STATE)
            && matches!(
                kind,
                "ActivitySucceeded" | "ActivityFailed" | "ActivityTimedOut"
            )
        {
            last_end = Some(event);
        }
    }
    last_end.is_some_and(|e| {
        e["type"] == "ActivityTimedOut"
            && e["activityTimedOutEventDetails"]["error"] == "States.Timeout"
    })
}

/// Heartbeats every parked approval token, so the engine knows they are held.
pub struct ApprovalKeeper {
    pub orders: Arc<dyn OrderRepository>,
    pub workflow: Arc<dyn WorkflowPort>,
    /// Must be well below the AwaitApproval state's HeartbeatSeconds.
    pub interval: Duration,
}

/// One round of the keeper.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct KeeperRound {
    pub alive: usize,
    /// Tokens the workflow no longer knows: their tasks timed out and were (or will be)
    /// re-issued, and the new token replaces the old one when parked.
    pub dead: usize,
}

/// The most parked approvals heartbeaten in one round.
const KEEPER_BATCH: u32 = 100_000;

/// Heartbeats in flight at once. Each waits for a commit (embedded) or a round trip (AWS);
/// one at a time, a round of 100,000 would take 100,000 of them, longer than the approval
/// heartbeat on a slow disk. Together they share the commits.
const BEATS_IN_FLIGHT: usize = 64;

impl ApprovalKeeper {
    pub async fn beat_once(&self) -> Result<KeeperRound, StoreError> {
        use futures_util::StreamExt;
        let pending = self.orders.pending_approvals(KEEPER_BATCH).await?;
        let beats = futures_util::stream::iter(pending)
            .map(|p| async move {
                let beat = self.workflow.send_task_heartbeat(&p.task_token).await;
                (p.order_id, beat)
            })
            .buffer_unordered(BEATS_IN_FLIGHT);
        let round = beats
            .fold(
                KeeperRound::default(),
                |mut round, (order_id, beat)| async move {
                    match beat {
                        Ok(()) => round.alive += 1,
                        Err(WorkflowError::TaskTimedOut(_) | WorkflowError::InvalidToken(_)) => {
                            round.dead += 1
                        }
                        Err(e) => {
                            tracing::warn!(%order_id, error = %e, "approval heartbeat failed");
                        }
                    }
                    round
                },
            )
            .await;
        Ok(round)
    }

    /// Runs rounds every `interval` until `stop` turns true.
    pub fn spawn(
        self,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            loop {
                if let Err(e) = self.beat_once().await {
                    tracing::warn!(error = %e, "approval keeper round failed");
                }
                tokio::select! {
                    _ = tokio::time::sleep(self.interval) => {}
                    _ = stop.wait_for(|s| *s) => break,
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entered(name: &str) -> Value {
        json!({"type": "TaskStateEntered", "stateEnteredEventDetails": {"name": name}})
    }

    fn timed_out(error: &str) -> Value {
        json!({"type": "ActivityTimedOut", "activityTimedOutEventDetails": {"error": error}})
    }

    fn kind(kind: &str) -> Value {
        json!({ "type": kind })
    }

    #[test]
    fn the_window_ran_out_when_the_approval_timed_out_with_states_timeout() {
        let history = [
            entered("ChargePayment"),
            kind("ActivitySucceeded"),
            kind("ChoiceStateEntered"),
            entered(APPROVAL_STATE),
            kind("ActivityScheduled"),
            kind("ActivityStarted"),
            timed_out("States.Timeout"),
            entered("RefundPayment"),
            kind("ActivityScheduled"),
        ];
        assert!(approval_timed_out(&history));
    }

    #[test]
    fn a_heartbeat_timeout_or_an_answer_is_no_expiry() {
        let retried = [
            entered(APPROVAL_STATE),
            kind("ActivityScheduled"),
            kind("ActivityStarted"),
            timed_out("States.HeartbeatTimeout"),
            kind("ActivityScheduled"),
        ];
        assert!(!approval_timed_out(&retried));
        let answered = [
            entered(APPROVAL_STATE),
            kind("ActivityScheduled"),
            timed_out("States.HeartbeatTimeout"),
            kind("ActivityScheduled"),
            kind("ActivitySucceeded"),
            entered("CreateShipment"),
            timed_out("States.Timeout"),
        ];
        assert!(!approval_timed_out(&answered), "another state's timeout");
        assert!(!approval_timed_out(&[entered(APPROVAL_STATE)]));
        assert!(!approval_timed_out(&[]));
    }
}
