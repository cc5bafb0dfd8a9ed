//! AwaitApproval: parks the task token on the order and answers nothing; an operator's decision
//! answers it later (`decide`). The approval window is fixed on the order when the token is
//! first parked (its deadline); a re-issued task never moves it. The keeper heartbeats parked
//! tokens, so a token lost in a crash (handed out, never parked) lapses within the state's
//! HeartbeatSeconds and the engine re-issues the task; a decision whose answer was lost is
//! applied by the re-issued task. Past the deadline, with no decision recorded, the keeper
//! closes the window: it fails the parked token with `Order.ApprovalExpired`, and the saga
//! compensates. A decision after the deadline takes no effect and says so.

use crate::port::{WorkflowError, WorkflowPort};
use async_trait::async_trait;
use chrono::{DateTime, TimeDelta, Utc};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use step::{
    Declaration, Declared, ErrorName, OrderInput, Port, Step, StepContext, StepOutcome, StepTask,
    attempt, cancelled, failed, load_order, store_failed,
};
use store::{
    Decided, Decision, Expiry, Failure, Order, OrderId, OrderRepository, OrderStatus,
    PendingApproval, Ports, QueueCursor, ShardLeases, StoreError, Unshared,
};

pub struct AwaitApproval {
    pub ports: Ports,
}

impl Declared for AwaitApproval {
    const DECLARATION: Declaration = Declaration {
        activity: "fulfillment-await-approval",
        // Rejected and ApprovalExpired are answered to its parked token: by an operator's
        // decision (`decide`) and by the keeper when the window closes.
        raises: &[
            ErrorName::OrderRejected,
            ErrorName::OrderApprovalExpired,
            ErrorName::OrderCancelled,
        ],
        needs: &[Port::Orders],
    };

    fn build(cx: &StepContext) -> Self {
        AwaitApproval {
            ports: cx.ports.clone(),
        }
    }
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

/// The failure an approval window that closed undecided ends the approval with.
pub fn expiry_failure(deadline: DateTime<Utc>) -> Failure {
    Failure {
        error: ErrorName::OrderApprovalExpired.as_str().to_owned(),
        cause: format!(
            "the approval window closed at {} before an operator decided",
            deadline.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        ),
    }
}

/// The window's deadline for a task whose input carries `windowSeconds`, were it parked now.
fn deadline_from(task: &StepTask, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
    let seconds = task.input.get("windowSeconds")?.as_u64()?;
    Some(now + TimeDelta::seconds(i64::try_from(seconds).unwrap_or(i64::MAX / 1000)))
}

#[async_trait]
impl Step for AwaitApproval {
    async fn run(&self, task: StepTask) -> StepOutcome {
        let input = attempt!(OrderInput::parse(&task));
        let order = attempt!(load_order(self.ports.orders.as_ref(), &input.order_id).await);
        // Cancelled while a token was out (or before the first park): the cancel's own answer
        // to that token may have been lost.
        if let Some(outcome) = cancelled(&order) {
            return outcome;
        }
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
        // The window closed (the keeper's expiry answer was lost): the compensation it
        // started goes on, for the same reason.
        if let Some(f) = order.failure.as_ref().filter(|f| {
            order.status == OrderStatus::Compensating
                && f.error == ErrorName::OrderApprovalExpired.as_str()
        }) {
            return StepOutcome::Failed {
                error: f.error.clone(),
                cause: f.cause.clone(),
            };
        }
        if order.status.is_terminal() || order.status == OrderStatus::Compensating {
            return failed(
                ErrorName::OrderInvalid,
                format!("order is {}", order.status.as_str()),
            );
        }
        // A task re-issued past the deadline parks all the same: the keeper closes the window
        // at its next round, as it does for every parked token past it.
        let now = Utc::now();
        match self
            .ports
            .orders
            .park_approval(
                &input.order_id,
                &task.task_token,
                now,
                deadline_from(&task, now),
            )
            .await
        {
            // A cancellation recorded since the order was read: nothing was parked.
            Ok(order) => cancelled(&order).unwrap_or(StepOutcome::Parked),
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
    /// The approval window closed (its deadline passed) before the decision: it took no effect
    /// and the order is (or is about to be) cancelled.
    Expired(Order),
    /// The order's cancellation came first: the decision took no effect.
    Cancelled(Order),
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
/// approval, `SendTaskFailure(Order.Rejected)` on rejection. A decision at or after the
/// window's deadline is refused by the store (`Expired`). A dead token is fine: the decision is
/// recorded before the deadline, and the task the engine re-issues answers from it.
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
    let at = Utc::now();
    let mut judged = 0;
    let (order, token) = loop {
        judged += 1;
        match orders.decide(id, decision, by, reason, at).await? {
            Decided::Applied { order, task_token } => break (order, task_token),
            Decided::Replayed(o) => return Ok(DecisionResult::Replayed(o)),
            Decided::Conflict(o) => return Ok(DecisionResult::Conflict(o)),
            Decided::Expired(o) => match close_window(orders, workflow, o, at).await? {
                // Closed now, or by someone else meanwhile (the keeper, the engine's timeout).
                Expiry::Expired(o) => return Ok(DecisionResult::Expired(o)),
                Expiry::Kept(o) if !judged_again(&o) => return Ok(DecisionResult::Expired(o)),
                // A decision landed between the judgement and the write, or a token was parked
                // again: judged again, on what the store now holds.
                Expiry::Kept(_) if judged < DECISION_JUDGEMENTS => continue,
                Expiry::Kept(_) => {
                    return Err(StoreError::Unavailable(format!(
                        "order {id} kept changing while its expired window was closed"
                    ))
                    .into());
                }
            },
            Decided::NotAwaiting(o) => return Ok(DecisionResult::NotAwaiting(o)),
            Decided::Cancelled(o) => return Ok(DecisionResult::Cancelled(o)),
        }
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
    match answered {
        Ok(()) => {}
        // A dead token: its heartbeat lapsed (a crash, an outage of the keeper). The task the
        // engine re-issues finds the decision recorded and answers from it.
        Err(WorkflowError::TaskTimedOut(_) | WorkflowError::InvalidToken(_)) => {
            tracing::info!(order_id = %id, "the approval's token is dead; its re-issued task applies the decision");
        }
        Err(e) => return Err(e.into()),
    }
    // A rejection starts the compensation: the order says so at once (the refund step records
    // the same failure, from the same decision, if it gets there first).
    if decision == Decision::Reject {
        let failure = Failure {
            error: ErrorName::OrderRejected.as_str().to_owned(),
            cause: rejection_cause(&order),
        };
        orders
            .advance(id, OrderStatus::Compensating, Some(failure))
            .await?;
    }
    let order = orders.get(id).await?.unwrap_or(order);
    Ok(DecisionResult::Applied(order))
}

/// How many times a decision is judged against an order that keeps changing under it.
const DECISION_JUDGEMENTS: usize = 3;

/// Whether an order whose window a late decision could not close has changed in a way that
/// needs the decision judged again: a decision recorded, or a token parked and awaiting one.
fn judged_again(order: &Order) -> bool {
    let approval = order.approval.as_ref();
    approval.is_some_and(|a| a.decision.is_some())
        || (order.status == OrderStatus::AwaitingApproval
            && approval.is_some_and(|a| a.task_token.is_some()))
}

/// A decision came after the deadline of a window still open (the keeper has not closed it
/// yet): the store judged it from what it read, without a write, so a decision made before the
/// deadline and still on its way (a slow or retried write) could land after it and take effect
/// while this one is told the window closed. Closes the window here as the keeper does (in the
/// store, conditionally, then the token fails): of the two, one wins, and each caller is told
/// the same story. `Kept` when the order changed in between (the caller judges again); an
/// order with no parked token has nothing on its way to land, and is `Expired` as it is.
async fn close_window(
    orders: &dyn OrderRepository,
    workflow: &dyn WorkflowPort,
    order: Order,
    at: DateTime<Utc>,
) -> Result<Expiry, DecideError> {
    let approval = order.approval.as_ref();
    let (Some(token), Some(deadline)) = (
        approval.and_then(|a| a.task_token.clone()),
        approval.and_then(|a| a.deadline),
    ) else {
        return Ok(Expiry::Expired(order));
    };
    let failure = expiry_failure(deadline);
    let id = order.id().clone();
    let expiry = orders
        .expire_approval(&id, &token, at, failure.clone())
        .await?;
    if let Expiry::Expired(_) = &expiry {
        tracing::info!(order_id = %id, %deadline, "approval window closed undecided (by a late decision)");
        fail_expired_token(workflow, &id, &token, &failure).await;
    }
    Ok(expiry)
}

/// Fails the token of a window just closed with its expiry. A lost answer is fine: the token
/// lapses, and the re-issued task finds the order compensating for this reason and fails the
/// same way.
async fn fail_expired_token(
    workflow: &dyn WorkflowPort,
    order_id: &OrderId,
    token: &str,
    failure: &Failure,
) {
    match workflow
        .send_task_failure(token, &failure.error, &failure.cause)
        .await
    {
        Ok(()) | Err(WorkflowError::TaskTimedOut(_) | WorkflowError::InvalidToken(_)) => {}
        Err(e) => {
            tracing::warn!(%order_id, error = %e, "failing an expired approval's token failed; its re-issued task fails it");
        }
    }
}

/// Keeps the parked approvals: heartbeats each parked token, so the engine knows it is held,
/// and closes the windows past their deadline. The queue is kept in shards
/// ([`ApprovalRepository::approval_shards`](store::ApprovalRepository::approval_shards)); a replica keeps the shards it holds leases on
/// ([`ShardLeases`]), so each token is heartbeaten by one replica, at its shards' share of an
/// account-wide rate. A token it heartbeat less than two fifths of the heartbeat ago is left
/// for the next round: while rounds are quick each token is heartbeaten every other round, not
/// every round, which halves the `SendTaskHeartbeat`s a parked approval costs.
pub struct ApprovalKeeper {
    orders: Arc<dyn OrderRepository>,
    workflow: Arc<dyn WorkflowPort>,
    settings: KeeperSettings,
    /// When this process last heartbeat each token it keeps, by a hash of the token (a
    /// collision only costs that token one heartbeat: its task is re-issued and parks anew,
    /// its deadline unchanged). Lost with the process, or with a shard given up: then every
    /// token is heartbeaten at its next round, as a replica taking a shard over must.
    beaten: std::sync::Mutex<HashMap<u64, Beaten>>,
    hasher: RandomState,
}

/// A token this process heartbeat.
#[derive(Debug, Clone, Copy)]
struct Beaten {
    at: Instant,
    /// The last round that found it parked (the entries of tokens no longer parked, or in a
    /// shard given up, are dropped at the end of the next round).
    seen: u64,
}

/// How the keeper runs.
#[derive(Clone)]
pub struct KeeperSettings {
    /// The pause between rounds: well below the AwaitApproval state's HeartbeatSeconds.
    pub interval: Duration,
    /// The AwaitApproval state's HeartbeatSeconds: a round (with its pause) that comes near it
    /// puts the tokens at risk of lapsing, and is logged.
    pub lapse_after: Duration,
    /// Which shards of the queue this replica keeps.
    pub leases: Arc<dyn ShardLeases>,
    /// Heartbeats (and expiries) per second across all replicas, each keeping its shards'
    /// share; `None`: no limit (the embedded engine has no quota).
    pub rate: Option<NonZeroU32>,
    /// What the keeper did, for `/metrics`.
    pub stats: Arc<KeeperStats>,
}

impl KeeperSettings {
    /// One process keeps every shard, unpaced: the embedded backend.
    pub fn unshared(interval: Duration, lapse_after: Duration) -> KeeperSettings {
        KeeperSettings {
            interval,
            lapse_after,
            leases: Arc::new(Unshared),
            rate: None,
            stats: Arc::default(),
        }
    }
}

/// The keeper's counters, read by `/metrics`.
#[derive(Debug, Default)]
pub struct KeeperStats {
    /// Heartbeats sent (answered or not).
    pub heartbeats: AtomicU64,
    /// Approval windows closed undecided.
    pub expired: AtomicU64,
    /// Rounds finished.
    pub rounds: AtomicU64,
    /// Heartbeats answered that the token is dead (its task lapsed; the workflow re-issues it).
    pub dead: AtomicU64,
    /// Shards of the queue this replica holds now.
    pub shards_held: AtomicU64,
    /// How long the last round took, in milliseconds.
    pub last_round_ms: AtomicU64,
    /// How many parked approvals the last round kept.
    pub last_round_kept: AtomicU64,
}

/// One round of the keeper.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct KeeperRound {
    /// Tokens heartbeaten this round, or left for the next one (heartbeaten recently).
    pub alive: usize,
    /// Tokens the workflow no longer knows: their tasks timed out and were (or will be)
    /// re-issued, and the new token replaces the old one when parked.
    pub dead: usize,
    /// Windows closed this round: their deadline passed with no decision.
    pub expired: usize,
    /// The shards this replica kept.
    pub shards: usize,
    /// The earliest deadline of the windows this round left open (past ones included: a window
    /// re-parked under a new token while the round closed the old one's): the next round comes
    /// by then, not a whole interval later ([`ApprovalKeeper::pause_after`]).
    pub next_deadline: Option<DateTime<Utc>>,
}

/// Parked approvals read at once: a page of a shard.
const KEEPER_PAGE: u32 = 100;

/// The shortest pause between rounds, when a window left open is already past its deadline
/// (re-parked meanwhile, or its close failed): soon, without spinning.
const PAST_DEADLINE_PAUSE: Duration = Duration::from_secs(1);

/// Heartbeats in flight at once. Each waits for a commit (embedded) or a round trip (AWS);
/// one at a time, a round of 100,000 would take 100,000 of them, longer than the approval
/// heartbeat on a slow disk. Together they share the commits.
const BEATS_IN_FLIGHT: usize = 64;

/// What the keeper did with one parked approval.
enum Kept {
    Alive,
    Dead,
    Expired,
    /// Nothing known: the call failed (logged); the next round tries again.
    Failed,
    /// Heartbeaten recently by this process: left for the next round.
    Skipped,
}

type Pace = governor::DefaultDirectRateLimiter;

impl ApprovalKeeper {
    pub fn new(
        orders: Arc<dyn OrderRepository>,
        workflow: Arc<dyn WorkflowPort>,
        settings: KeeperSettings,
    ) -> ApprovalKeeper {
        ApprovalKeeper {
            orders,
            workflow,
            settings,
            beaten: std::sync::Mutex::default(),
            hasher: RandomState::new(),
        }
    }

    /// Whether `pending` was heartbeaten by this process less than two fifths of the
    /// heartbeat ago, and its window is still open: it can wait for the next round. Rounds
    /// start a fifth of the heartbeat apart plus the round's own time, which the keeper warns
    /// about past 0.3 of the heartbeat; so a token is heartbeaten again at most 0.4 + 0.2 + 0.3
    /// = 0.9 of the heartbeat after the last time, and while rounds are quick (under a fifth
    /// of the heartbeat), every other round.
    fn recently_beaten(&self, pending: &PendingApproval, now: DateTime<Utc>, round: u64) -> bool {
        if pending.deadline.is_some_and(|d| d <= now) {
            return false;
        }
        let key = self.hasher.hash_one(&pending.task_token);
        let mut beaten = self.beaten.lock().unwrap_or_else(|e| e.into_inner());
        match beaten.get_mut(&key) {
            Some(b) => {
                b.seen = round;
                b.at.elapsed() < self.settings.lapse_after * 2 / 5
            }
            None => false,
        }
    }

    /// Records what a heartbeat of `pending` found.
    fn record(&self, pending: &PendingApproval, kept: &Kept, round: u64) {
        let key = self.hasher.hash_one(&pending.task_token);
        let mut beaten = self.beaten.lock().unwrap_or_else(|e| e.into_inner());
        match kept {
            Kept::Alive => {
                beaten.insert(
                    key,
                    Beaten {
                        at: Instant::now(),
                        seen: round,
                    },
                );
            }
            Kept::Dead | Kept::Expired => {
                beaten.remove(&key);
            }
            Kept::Failed | Kept::Skipped => {}
        }
    }

    /// One round over the shards in `held`, a page at a time; a shard the balancer gives up
    /// meanwhile is left at the next page.
    pub async fn beat_once(
        &self,
        held: &tokio::sync::watch::Receiver<Vec<u32>>,
    ) -> Result<KeeperRound, StoreError> {
        use futures_util::StreamExt;
        let started = std::time::Instant::now();
        let shards = self.orders.approval_shards();
        let mine = held.borrow().clone();
        let pace = self.pace(mine.len(), shards);
        let mut round = KeeperRound {
            shards: mine.len(),
            ..KeeperRound::default()
        };
        let number = self.settings.stats.rounds.load(Ordering::Relaxed);
        for shard in mine {
            let mut after: Option<QueueCursor> = None;
            while held.borrow().contains(&shard) {
                let page = self
                    .orders
                    .pending_approvals_in(shard, after.as_ref(), KEEPER_PAGE)
                    .await?;
                let now = Utc::now();
                let pace = pace.as_ref();
                let kept: Vec<(Kept, Option<DateTime<Utc>>)> =
                    futures_util::stream::iter(page.items)
                        .map(|p| async move {
                            if self.recently_beaten(&p, now, number) {
                                return (Kept::Skipped, p.deadline);
                            }
                            if let Some(pace) = pace {
                                pace.until_ready().await;
                            }
                            let kept = self.keep(&p, now).await;
                            self.record(&p, &kept, number);
                            (kept, p.deadline)
                        })
                        .buffer_unordered(BEATS_IN_FLIGHT)
                        .collect()
                        .await;
                for (k, deadline) in kept {
                    match k {
                        Kept::Alive | Kept::Skipped => round.alive += 1,
                        Kept::Dead => round.dead += 1,
                        Kept::Expired => round.expired += 1,
                        Kept::Failed => {}
                    }
                    // A lapsed token's task parks again under the same deadline.
                    if !matches!(k, Kept::Expired) {
                        round.next_deadline = round.next_deadline.into_iter().chain(deadline).min();
                    }
                }
                match page.next.as_deref().and_then(QueueCursor::parse) {
                    Some(next) => after = Some(next),
                    None => break,
                }
            }
        }
        // Tokens not found parked this round (decided, expired, in a shard given up) are
        // forgotten.
        self.beaten
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|_, b| b.seen == number);
        let took = started.elapsed();
        let stats = &self.settings.stats;
        stats.rounds.fetch_add(1, Ordering::Relaxed);
        stats.last_round_ms.store(
            u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        stats.last_round_kept.store(
            (round.alive + round.dead + round.expired) as u64,
            Ordering::Relaxed,
        );
        if took + self.settings.interval > self.settings.lapse_after / 2 {
            tracing::warn!(
                seconds = took.as_secs_f64(),
                parked = round.alive + round.dead,
                "the approval keeper's round takes over half the approval heartbeat: parked \
                 tokens risk lapsing (raise --approval-keeper-rate, or --approval-heartbeat)"
            );
        }
        Ok(round)
    }

    /// Keeps this replica's shards: balances the leases twice a round, publishing the shards
    /// held, until `stop`; then gives them up, so other replicas take them at once.
    async fn balance(
        leases: Arc<dyn ShardLeases>,
        shards: u32,
        every: Duration,
        held: tokio::sync::watch::Sender<Vec<u32>>,
        stats: Arc<KeeperStats>,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) {
        loop {
            match leases.balance(shards).await {
                Ok(now) => {
                    stats.shards_held.store(now.len() as u64, Ordering::Relaxed);
                    held.send_if_modified(|was| {
                        let changed = *was != now;
                        *was = now;
                        changed
                    });
                }
                // Leases not renewed expire: the shards go to another replica, not to two.
                Err(e) => {
                    tracing::warn!(error = %e, "balancing the approval keeper's shards failed")
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                _ = stop.wait_for(|s| *s) => break,
            }
        }
        if let Err(e) = leases.release_all(shards).await {
            tracing::warn!(error = %e, "giving up the approval keeper's shards failed");
        }
    }

    /// This replica's pace: its `held` shards' share of the account-wide rate.
    fn pace(&self, held: usize, shards: u32) -> Option<Pace> {
        let rate = self.settings.rate?;
        let share = u64::from(rate.get()) * held as u64 / u64::from(shards.max(1));
        let share = NonZeroU32::new(u32::try_from(share).unwrap_or(u32::MAX).max(1))?;
        // No burst above a second's share: the quota's bucket is the account's, not ours.
        Some(governor::RateLimiter::direct(governor::Quota::per_second(
            share,
        )))
    }

    async fn keep(&self, pending: &PendingApproval, now: DateTime<Utc>) -> Kept {
        let order_id = &pending.order_id;
        if let Some(deadline) = pending.deadline.filter(|d| *d <= now) {
            return self.expire(pending, deadline, now).await;
        }
        self.settings
            .stats
            .heartbeats
            .fetch_add(1, Ordering::Relaxed);
        match self.workflow.send_task_heartbeat(&pending.task_token).await {
            Ok(()) => Kept::Alive,
            Err(WorkflowError::TaskTimedOut(_) | WorkflowError::InvalidToken(_)) => {
                self.settings.stats.dead.fetch_add(1, Ordering::Relaxed);
                tracing::info!(%order_id, "a parked approval token had lapsed; its task is re-issued");
                Kept::Dead
            }
            Err(e) => {
                tracing::warn!(%order_id, error = %e, "approval heartbeat failed");
                Kept::Failed
            }
        }
    }

    /// Closes the window in the store first (where a decision racing it either was recorded
    /// first or is refused), then fails the token. A lost answer is fine: the token lapses, and
    /// the re-issued task finds the order compensating for this reason and fails the same way.
    async fn expire(
        &self,
        pending: &PendingApproval,
        deadline: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Kept {
        let order_id = &pending.order_id;
        let failure = expiry_failure(deadline);
        let expired = self
            .orders
            .expire_approval(order_id, &pending.task_token, now, failure.clone())
            .await;
        match expired {
            Ok(Expiry::Expired(_)) => {}
            // Decided, re-parked or moved on meanwhile: the next round sees it as it is.
            Ok(Expiry::Kept(_)) => return Kept::Alive,
            Err(e) => {
                tracing::warn!(%order_id, error = %e, "closing an approval window failed");
                return Kept::Failed;
            }
        }
        self.settings.stats.expired.fetch_add(1, Ordering::Relaxed);
        tracing::info!(%order_id, %deadline, "approval window closed undecided");
        fail_expired_token(
            self.workflow.as_ref(),
            order_id,
            &pending.task_token,
            &failure,
        )
        .await;
        Kept::Expired
    }

    /// How long to wait after `round` (at `now`): the interval, or less when a window it left
    /// open closes sooner, so a window closes at its deadline and not up to an interval after
    /// it; a window already past it (re-parked while the round closed the old token's) gets
    /// another round after [`PAST_DEADLINE_PAUSE`].
    pub fn pause_after(&self, round: &KeeperRound, now: DateTime<Utc>) -> Duration {
        let interval = self.settings.interval;
        round.next_deadline.map_or(interval, |deadline| {
            (deadline - now)
                .to_std()
                .unwrap_or_default()
                .clamp(PAST_DEADLINE_PAUSE.min(interval), interval)
        })
    }

    /// Runs rounds every `interval`, or by the next deadline when one comes sooner
    /// ([`ApprovalKeeper::pause_after`]), and at once when it gains shards, until `stop` turns
    /// true; its leases are balanced beside the rounds, every half interval.
    pub fn spawn(self, stop: tokio::sync::watch::Receiver<bool>) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            let (held_tx, mut held) = tokio::sync::watch::channel(Vec::new());
            let balancer = tokio::spawn(ApprovalKeeper::balance(
                self.settings.leases.clone(),
                self.orders.approval_shards(),
                self.settings.interval / 2,
                held_tx,
                self.settings.stats.clone(),
                stop.clone(),
            ));
            let mut stop = stop;
            loop {
                held.mark_unchanged();
                let pause = match self.beat_once(&held).await {
                    Ok(round) => self.pause_after(&round, Utc::now()),
                    Err(e) => {
                        tracing::warn!(error = %e, "approval keeper round failed");
                        self.settings.interval
                    }
                };
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    // Shards taken over from a replica that died: their tokens are already
                    // waiting longer than ours.
                    Ok(()) = held.changed() => {}
                    _ = stop.wait_for(|s| *s) => break,
                }
            }
            let _ = balancer.await;
        })
    }
}
