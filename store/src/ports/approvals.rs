//! Decisions on a waiting order: an operator's, the window's expiry, a cancellation; the
//! approvals' queue.

use super::{Page, QueueCursor};
use crate::domain::*;
use crate::error::StoreError;
use async_trait::async_trait;
use chrono::{DateTime, Utc};

/// What an operator's decision did.
#[derive(Debug, Clone, PartialEq)]
pub enum Decided {
    /// Recorded now; the parked task token is returned so the caller can answer the workflow.
    Applied { order: Order, task_token: String },
    /// The same decision was recorded before: a replay, nothing changed.
    Replayed(Order),
    /// Another decision was recorded before; nothing changed.
    Conflict(Order),
    /// The order is not awaiting approval (never needed it, not there yet, or already over).
    NotAwaiting(Order),
    /// The approval window closed (its deadline passed) before a decision: nothing changed.
    Expired(Order),
    /// The order's cancellation was recorded first: nothing changed.
    Cancelled(Order),
}

/// What [`ApprovalRepository::request_cancel`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum CancelRequested {
    /// Recorded now. `task_token` is the approval token it took off the order (the order was
    /// parked for an operator): the caller fails it with `Order.Cancelled`.
    Recorded {
        order: Order,
        task_token: Option<String>,
    },
    /// A cancellation was recorded before (this one's reason is not kept): nothing changed.
    Replayed(Order),
    /// Past the point of no return: the shipment step began (or the order completed).
    TooLate(Order),
    /// The order is already being undone, or ended so, for another reason (a failure, a
    /// rejection, a closed approval window): nothing changed.
    Ended(Order),
}

/// How a cancellation applies to an order as it stands: the rule every adapter follows before it
/// writes (conditionally on what it judged: status, parked token, no cancellation, no shipment).
pub enum CancelPlan {
    Answer(Box<CancelRequested>),
    /// Record the cancellation; take the parked approval `token` off the order when there is one.
    Record {
        token: Option<String>,
    },
}

impl CancelPlan {
    pub fn new(order: Order) -> CancelPlan {
        let answer = |a| CancelPlan::Answer(Box::new(a));
        if order.cancellation.is_some() {
            return answer(CancelRequested::Replayed(order));
        }
        if order.shipping_started_at.is_some() || order.status == OrderStatus::Completed {
            return answer(CancelRequested::TooLate(order));
        }
        let approval = order.approval.as_ref();
        let rejected = approval.and_then(|a| a.decision) == Some(Decision::Reject);
        if order.status.is_compensation() || rejected {
            return answer(CancelRequested::Ended(order));
        }
        let token = approval
            .filter(|a| a.decision.is_none() && order.status == OrderStatus::AwaitingApproval)
            .and_then(|a| a.task_token.clone());
        CancelPlan::Record { token }
    }
}

/// What [`ApprovalRepository::expire_approval`] did.
#[derive(Debug, Clone, PartialEq)]
pub enum Expiry {
    /// The order's window closed now: it is `COMPENSATING` with the failure given, its token
    /// cleared. The caller fails that token.
    Expired(Order),
    /// Nothing changed: a decision was recorded, another token parked, the deadline is ahead,
    /// or the order is no longer awaiting approval.
    Kept(Order),
}

/// How an operator's decision applies to an order as it stands: the rule every adapter follows,
/// before it writes (conditionally, so that the order it judged is the one it changes).
pub enum DecisionPlan {
    /// Nothing to write: this is the answer.
    Answer(Box<Decided>),
    /// Record the decision, clear the parked `token` (handed back in `Decided::Applied`), and
    /// move the order to `status`.
    Record { token: String, status: OrderStatus },
}

impl DecisionPlan {
    /// The plan for `decision`, made `at`.
    pub fn new(order: Order, decision: Decision, at: DateTime<Utc>) -> DecisionPlan {
        if order.cancellation.is_some()
            && order.approval.as_ref().is_none_or(|a| a.decision.is_none())
        {
            return DecisionPlan::Answer(Box::new(Decided::Cancelled(order)));
        }
        let approval = order.approval.as_ref();
        if let Some(previous) = approval.and_then(|a| a.decision) {
            return DecisionPlan::Answer(Box::new(if previous == decision {
                Decided::Replayed(order)
            } else {
                Decided::Conflict(order)
            }));
        }
        // The window is the one fixed when the token was first parked: a decision after its
        // deadline takes no effect, whatever became of the token.
        if approval.and_then(|a| a.deadline).is_some_and(|d| at >= d) {
            return DecisionPlan::Answer(Box::new(Decided::Expired(order)));
        }
        let token = match approval.and_then(|a| a.task_token.clone()) {
            Some(token) if order.status == OrderStatus::AwaitingApproval => token,
            _ => return DecisionPlan::Answer(Box::new(Decided::NotAwaiting(order))),
        };
        // A rejection leaves the status to the compensation it starts.
        let status = match decision {
            Decision::Approve => OrderStatus::Approved,
            Decision::Reject => OrderStatus::AwaitingApproval,
        };
        DecisionPlan::Record { token, status }
    }
}

/// One order waiting for an operator.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingApproval {
    pub order_id: OrderId,
    pub amount_cents: u64,
    pub currency: String,
    pub requested_at: DateTime<Utc>,
    /// When the approval window closes (`None` for an approval parked before windows had one).
    pub deadline: Option<DateTime<Utc>>,
    pub task_token: String,
}

/// What waits on an order without a step: an operator's decision on its parked approval, the
/// window that closes it, a client's cancellation, and the queue the approval keepers read.
#[async_trait]
pub trait ApprovalRepository: Send + Sync {
    /// Parks an approval task token on the order and moves it to `AWAITING_APPROVAL`. A newer
    /// token (the engine re-issued the task) replaces an older one while no decision is made.
    /// `requested_at` and `deadline` (when the approval window closes) are kept from the first
    /// park: a re-issued task never moves the window. Nothing is parked on an order whose
    /// cancellation is recorded. Returns the order afterwards.
    async fn park_approval(
        &self,
        id: &OrderId,
        task_token: &str,
        at: DateTime<Utc>,
        deadline: Option<DateTime<Utc>>,
    ) -> Result<Order, StoreError>;

    /// Records an operator's decision once (conditionally), with who and when.
    async fn decide(
        &self,
        id: &OrderId,
        decision: Decision,
        by: &str,
        reason: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<Decided, StoreError>;

    /// Records a request to cancel the order once (conditionally, see [`CancelRequested`]):
    /// only before the shipment step began and while the order is not being undone already. An
    /// approval token parked on the order is taken off it in the same write (the order leaves
    /// the operators' queue) and handed back, for the caller to fail. Returns what it did.
    async fn request_cancel(
        &self,
        id: &OrderId,
        request: &Cancellation,
    ) -> Result<CancelRequested, StoreError>;

    /// Closes the approval window of an order whose deadline is at or before `at`, if no
    /// decision was recorded and `task_token` is the one parked: the order moves to
    /// `COMPENSATING` with `failure`, and its token is cleared (it leaves the queue). The
    /// conditions are checked in the write, so of a decision and an expiry racing, one wins.
    async fn expire_approval(
        &self,
        id: &OrderId,
        task_token: &str,
        at: DateTime<Utc>,
        failure: Failure,
    ) -> Result<Expiry, StoreError>;

    /// Orders awaiting a decision with a parked token, oldest request first, a page of at most
    /// `limit` at a time after the cursor `after` (see [`Page`]).
    async fn pending_approvals(
        &self,
        after: Option<&QueueCursor>,
        limit: u32,
    ) -> Result<Page<PendingApproval>, StoreError>;

    /// How many shards the approvals' queue is kept in: the approval keepers' unit of work,
    /// each read by one replica at a time. 1 unless an adapter splits it.
    fn approval_shards(&self) -> u32 {
        1
    }

    /// [`ApprovalRepository::pending_approvals`] of one shard (`0..approval_shards()`), in request
    /// order. A page may hold fewer than `limit` and still have a `next`.
    async fn pending_approvals_in(
        &self,
        shard: u32,
        after: Option<&QueueCursor>,
        limit: u32,
    ) -> Result<Page<PendingApproval>, StoreError> {
        match shard {
            0 => self.pending_approvals(after, limit).await,
            _ => Ok(Page {
                items: Vec::new(),
                next: None,
            }),
        }
    }
}
