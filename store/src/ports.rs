//! The ports through which the saga reaches its state and the outside world. Each is owned here
//! with the domain; adapters: `sqlite` (embedded default), DynamoDB and HTTP (AWS mode, later).
//! Every write is idempotent by the order id, so an at-least-once step may run it twice.

use crate::domain::*;
use crate::error::{GatewayError, StoreError};
use crate::webhook::*;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// The four ports the saga and the service reach, together: the order records, the stock, the
/// payment provider and the carrier. Built once at start-up (`providers::sandbox::ports`,
/// `providers::sandbox::ports`, or by hand with a real provider) and shared by the HTTP handlers, the
/// saga's steps, the compensations and the audit.
#[derive(Clone)]
pub struct Ports {
    pub orders: Arc<dyn OrderRepository>,
    pub inventory: Arc<dyn InventoryRepository>,
    pub payments: Arc<dyn PaymentGateway>,
    pub shipping: Arc<dyn ShippingGateway>,
}

/// One page of a listing, in the adapter's own order (a key order, or a scan's). `next` is an
/// opaque cursor: pass it as `after` for the following page; `None` on the last page. A page
/// may hold fewer than `limit` items (even none) and still not be the last; following `next`
/// until it is `None` visits every item that existed throughout the listing exactly once.
/// Listings are for whole-store reads such as `fulfillment audit`: items written while one
/// runs may or may not appear.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next: Option<String>,
}

impl<T> Page<T> {
    /// The page of `items` read with `limit`, continuing after the last item's cursor when it
    /// is full: the rule of every adapter whose cursor is an item's key.
    pub fn keyed(items: Vec<T>, limit: u32, cursor: impl Fn(&T) -> String) -> Page<T> {
        let full = u32::try_from(items.len()).is_ok_and(|n| n >= limit.max(1));
        let next = if full { items.last().map(cursor) } else { None };
        Page { items, next }
    }
}

/// What `KeyRepository::issue` did.
#[derive(Debug, Clone, PartialEq)]
pub enum Issued {
    /// The key is stored (and its principal, if it was new).
    Issued(ApiKey),
    /// The principal exists with the other role: nothing was stored. A principal keeps its
    /// role for life (a client's orders stay a client's).
    RoleMismatch { existing: Role },
}

/// Principals and their API keys.
#[async_trait]
pub trait KeyRepository: Send + Sync {
    /// Stores `key` (its id and hash unique), creating its principal with its role when new.
    async fn issue(&self, key: &ApiKey) -> Result<Issued, StoreError>;

    /// The key whose hash is `key_hash`, revoked or not.
    async fn key_by_hash(&self, key_hash: &str) -> Result<Option<ApiKey>, StoreError>;

    /// Every key, oldest first (principals hold a few each; there are few principals).
    async fn list_keys(&self) -> Result<Vec<ApiKey>, StoreError>;

    /// Revokes the key (idempotent: the first revocation time is kept). `None` for an unknown id.
    async fn revoke(&self, key_id: &str, at: DateTime<Utc>) -> Result<Option<ApiKey>, StoreError>;

    /// Records that the key was used at `at` (only ever moves forward).
    async fn touch(&self, key_id: &str, at: DateTime<Utc>) -> Result<(), StoreError>;

    /// Stores `session`, replacing one stored with the same hash. The hash is of a random
    /// secret, so the only session with the same hash is this one again (a retry of a write
    /// whose answer was lost): opening is idempotent. Adapters purge sessions past their
    /// `expires_at` on their own (see each).
    async fn open_session(&self, session: &ConsoleSession) -> Result<(), StoreError>;

    /// The session whose secret hashes to `session_hash` (a strongly consistent read), expired
    /// or not: the caller checks `expires_at`, and that its key is still valid.
    async fn session(&self, session_hash: &str) -> Result<Option<ConsoleSession>, StoreError>;

    /// Ends the session (sign-out). Idempotent: closing one that is gone, or never was, is `Ok`.
    async fn close_session(&self, session_hash: &str) -> Result<(), StoreError>;
}

/// What `OrderRepository::create` found.
#[derive(Debug, Clone, PartialEq)]
pub enum Created {
    /// The order was stored now.
    New(Order),
    /// An order with this id was already stored (compare `body_hash` to tell a replay from a
    /// conflict); nothing was changed.
    Existing(Order),
}

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

/// What [`OrderRepository::request_cancel`] did.
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

/// What [`OrderRepository::expire_approval`] did.
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

/// Logs a charge id that `record_charge` did not record because the order has another (see
/// there); the rule every adapter follows after its conditional write.
pub fn warn_if_other_charge(order: &Order, offered: &str) {
    if order.charge_id.as_deref() != Some(offered) {
        tracing::warn!(
            order_id = %order.id(),
            recorded = order.charge_id.as_deref().unwrap_or_default(),
            ignored = offered,
            "the order has another charge recorded; keeping it"
        );
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

#[async_trait]
pub trait OrderRepository: Send + Sync {
    /// Stores the order unless one with its id exists (a conditional insert, one round trip),
    /// with the ARN of the execution that is to run it recorded in the same write (the
    /// execution name is the order id, so its ARN is known before it starts). The caller starts
    /// the execution after: one a crash left unstarted is started by a retry of the order's
    /// POST, or by the repair loop.
    async fn create(&self, order: NewOrder, execution_arn: &str) -> Result<Created, StoreError>;

    async fn get(&self, id: &OrderId) -> Result<Option<Order>, StoreError>;

    /// Records the order's charge, as the payment provider gave it: its id and its `created_at`,
    /// as `charge_id` and `charged_at`, set together (idempotent). The first charge recorded is
    /// kept: the charge is made once per order under one idempotency key, so another id can only
    /// come from a bug, and must not hide the charge a refund has to give back; it changes
    /// nothing and is logged (`tracing::warn`). Recorded whatever the status, so a charge that
    /// lands after its compensation started is not forgotten. Returns the order afterwards.
    async fn record_charge(&self, id: &OrderId, charge: &Charge) -> Result<Order, StoreError>;

    /// Records the refund of the order's charge (idempotent: the first refund recorded is kept;
    /// one refund per order is made, under `refund:{orderId}`). Returns the order afterwards.
    async fn record_refund(&self, id: &OrderId, refund: &Refund) -> Result<Order, StoreError>;

    /// Moves the status forward to `to` (see `OrderStatus::can_move_to`); a move backwards or
    /// sideways changes nothing. `failure` is recorded with `Compensating`, `Cancelled` and
    /// `CompensationFailed` when none is recorded yet. Returns the order as it is afterwards.
    async fn advance(
        &self,
        id: &OrderId,
        to: OrderStatus,
        failure: Option<Failure>,
    ) -> Result<Order, StoreError>;

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

    /// Marks the shipment step as begun at `at` (the first time is kept), unless a cancellation
    /// is recorded or the order is being undone: the point of no return. Returns the order afterwards: with
    /// `shipping_started_at`, or with the cancellation that came first.
    async fn start_shipment(&self, id: &OrderId, at: DateTime<Utc>) -> Result<Order, StoreError>;

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

    /// [`OrderRepository::pending_approvals`] of one shard (`0..approval_shards()`), in request
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

    /// Records that a compensation gave up: the order moves to `COMPENSATION_FAILED` with the
    /// incident (and `failure`, when none is recorded yet). An incident already open keeps its
    /// `since` and takes the newer step, error, cause and attempts (a redriven compensation
    /// that failed again). An order in a final status is left as it is. Returns the order
    /// afterwards.
    async fn record_incident(
        &self,
        id: &OrderId,
        incident: &Incident,
        failure: Option<Failure>,
    ) -> Result<Order, StoreError>;

    /// Appends an operator's action to the order's record. Returns the order afterwards.
    async fn record_action(
        &self,
        id: &OrderId,
        action: &OperatorAction,
    ) -> Result<Order, StoreError>;

    /// Closes the order's open incident by hand: the order moves to `CANCELLED` and the action
    /// is recorded, in one conditional write. An order without an open incident changes
    /// nothing and comes back as [`Resolved::NotOpen`].
    async fn resolve_incident(
        &self,
        id: &OrderId,
        action: &OperatorAction,
    ) -> Result<Resolved, StoreError>;

    /// The orders with an open incident, the oldest incident first, a page of at most `limit`
    /// at a time after the cursor `after` (see [`Page`]).
    async fn open_incidents(
        &self,
        after: Option<&QueueCursor>,
        limit: u32,
    ) -> Result<Page<Order>, StoreError>;

    /// Every order, a page of at most `limit` at a time, starting after the cursor `after`
    /// (see [`Page`]); with `since`, only the orders created at or after it (pass the same
    /// `since` with every page of a listing). Strongly consistent reads, for `fulfillment
    /// audit` and the repair loop.
    async fn list_orders(
        &self,
        since: Option<DateTime<Utc>>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<Order>, StoreError>;

    /// The orders `filter` selects, newest first (by creation time, then id, both descending),
    /// a page of at most `limit` after the cursor `after` (the position of the last order
    /// examined: its creation time and id). A page examines at most [`FIND_EXAMINED`] orders of
    /// the owner's (or, without one, of all) in the creation window, so a rare status costs a
    /// bounded read per page: a page may then hold fewer than `limit` orders, even none, and
    /// still have a `next`. Orders created while a listing runs, newer than its first page,
    /// appear on no page of it; for `GET /orders` and the console.
    async fn find_orders(
        &self,
        filter: &OrderFilter,
        after: Option<&QueueCursor>,
        limit: u32,
    ) -> Result<Page<Order>, StoreError>;

    /// How many orders are in each status now, for the operators' console. `None` for a status
    /// the adapter does not count cheaply (see the adapter's docs).
    async fn count_by_status(&self) -> Result<StatusCounts, StoreError>;
}

/// What [`OrderRepository::count_by_status`] found: every status, with how many orders are in
/// it now, or `None` where the adapter does not count (a status with no orders is `Some(0)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusCounts(pub BTreeMap<OrderStatus, Option<u64>>);

impl StatusCounts {
    /// Every status, none of them counted: an adapter sets those it counts.
    pub fn uncounted() -> StatusCounts {
        StatusCounts(OrderStatus::ALL.into_iter().map(|s| (s, None)).collect())
    }

    /// How many orders are in `status`; `None` when it was not counted.
    pub fn get(&self, status: OrderStatus) -> Option<u64> {
        self.0.get(&status).copied().flatten()
    }
}

/// The most orders one page of [`OrderRepository::find_orders`] reads to fill itself.
pub const FIND_EXAMINED: u32 = 1000;

/// Which orders [`OrderRepository::find_orders`] lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OrderFilter {
    /// Only the orders this principal placed (a client's own); `None`: every order.
    pub owner: Option<String>,
    /// Only the orders in this status now.
    pub status: Option<OrderStatus>,
    /// Only the orders created at or after this.
    pub created_since: Option<DateTime<Utc>>,
    /// Only the orders created before this.
    pub created_until: Option<DateTime<Utc>>,
    /// Only the orders whose customer id starts with this (exactly: case and every character
    /// count). Tested on the orders read, as the status is, so a page's read stays bounded.
    pub customer_prefix: Option<String>,
}

impl OrderFilter {
    /// Whether `order` is one the filter selects (the adapters read by owner and creation
    /// window through an index, then test the rest with this).
    pub fn selects(&self, order: &Order) -> bool {
        let at = order.new.created_at;
        self.owner
            .as_ref()
            .is_none_or(|o| order.new.owner.as_ref() == Some(o))
            && self.status.is_none_or(|s| order.status == s)
            && self.created_since.is_none_or(|t| at >= t)
            && self.created_until.is_none_or(|t| at < t)
            && self
                .customer_prefix
                .as_ref()
                .is_none_or(|p| order.new.customer_id.starts_with(p.as_str()))
    }

    /// Whether the filter tests something the adapters' indexes do not read by (the status, the
    /// customer), so that many of the orders a listing reads may be left out.
    pub fn tests_after_reading(&self) -> bool {
        self.status.is_some() || self.customer_prefix.is_some()
    }

    /// The newest position a listing of this filter starts below (exclusive): `created_until`
    /// (nothing at it is selected), or after the cursor `after`, whichever is older. `None`:
    /// from the newest order.
    pub fn start(&self, after: Option<&QueueCursor>) -> Option<QueueCursor> {
        let until = self.created_until.map(|t| QueueCursor {
            at: crate::timestamp(t),
            // Below every id at that time ("" is less than any id, and the cursor is exclusive).
            order_id: OrderId::lowest(),
        });
        match (until, after.cloned()) {
            (Some(u), Some(a)) => Some(u.min(a)),
            (u, a) => u.or(a),
        }
    }
}

impl QueueCursor {
    /// The position of `order` in a listing by creation time: its `created_at` and id.
    pub fn of_created(order: &Order) -> QueueCursor {
        QueueCursor {
            at: crate::timestamp(order.new.created_at),
            order_id: order.id().clone(),
        }
    }
}

/// What resolving an incident did.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolved {
    /// Closed now: the order as it is afterwards.
    Now(Order),
    /// The order had no open incident (none was recorded, or it was closed before): unchanged.
    NotOpen(Order),
}

/// The cursor of a page of a queue of orders kept in time order (open incidents by their
/// `since`, pending approvals by their `requested_at`): the last order's time and id. Times are
/// stored as fixed-width RFC 3339 text, so the pair orders as the page does. As text (a page's
/// `next`), `{at}|{orderId}`. Positions compare as the queue orders them.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct QueueCursor {
    pub at: String,
    pub order_id: OrderId,
}

impl QueueCursor {
    /// The cursor after `order` in the incidents' queue (it has an open incident).
    pub fn after_incident(order: &Order) -> QueueCursor {
        let since = order
            .incident
            .as_ref()
            .map_or(order.updated_at, |i| i.since);
        QueueCursor {
            at: crate::timestamp(since),
            order_id: order.id().clone(),
        }
    }

    /// The cursor after `pending` in the approvals' queue.
    pub fn after_approval(pending: &PendingApproval) -> QueueCursor {
        QueueCursor {
            at: crate::timestamp(pending.requested_at),
            order_id: pending.order_id.clone(),
        }
    }

    /// `None` for text that is no cursor: `{at}|{orderId}`, `at` of a stored time's characters
    /// (a cursor is a position: one of the right shape that no page gave is harmless).
    pub fn parse(text: &str) -> Option<QueueCursor> {
        let (at, id) = text.split_once('|')?;
        let time_chars = |c: char| c.is_ascii_digit() || "T:.Z-".contains(c);
        if at.is_empty() || at.len() > 40 || !at.chars().all(time_chars) {
            return None;
        }
        Some(QueueCursor {
            at: at.to_owned(),
            order_id: OrderId::parse(id).ok()?,
        })
    }
}

impl std::fmt::Display for QueueCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}|{}", self.at, self.order_id)
    }
}

/// What a reservation attempt did.
#[derive(Debug, Clone, PartialEq)]
pub enum Reserved {
    /// Every line was reserved now.
    New(Reservation),
    /// The order already had its reservation (whatever its status); nothing changed.
    Existing(Reservation),
    /// Some line could not be reserved; nothing was reserved.
    OutOfStock {
        sku: String,
        requested: u32,
        available: u64,
    },
}

/// What a release did.
#[derive(Debug, Clone, PartialEq)]
pub enum Released {
    /// The held stock went back to available now.
    Now(Reservation),
    /// Released before: nothing changed.
    Already(Reservation),
    /// The order never reserved anything: nothing to undo (recorded so a late reserve can't
    /// happen after the release).
    NothingReserved,
    /// The reservation was shipped; stock that left the warehouse is not released.
    Shipped(Reservation),
}

#[async_trait]
pub trait InventoryRepository: Send + Sync {
    /// Sets what an operator counts and prices, in one write: the available quantity (a stock
    /// count) and the catalog price, each when given (the other stays as it is). A SKU not
    /// stocked before starts with nothing available.
    async fn set_stock(
        &self,
        sku: &str,
        available: Option<u64>,
        price: Option<&Price>,
    ) -> Result<StockLevel, StoreError>;

    /// Sets the available quantity of a SKU (an operator's stock count).
    async fn set_available(&self, sku: &str, available: u64) -> Result<StockLevel, StoreError> {
        self.set_stock(sku, Some(available), None).await
    }

    async fn stock(&self, sku: &str) -> Result<Option<StockLevel>, StoreError>;

    /// The catalog prices of `skus`, by SKU, as they are now; a SKU never stocked or never
    /// priced is left out.
    async fn prices(&self, skus: &[&str]) -> Result<HashMap<String, Price>, StoreError>;

    /// Reserves every line of the order, or none, atomically; at most one reservation per
    /// order. Stock never goes negative, even under concurrent orders for the last unit.
    async fn reserve(
        &self,
        order_id: &OrderId,
        lines: &[ReservedLine],
    ) -> Result<Reserved, StoreError>;

    /// Returns held stock to available (idempotent; a no-op, recorded, when nothing was reserved).
    async fn release(&self, order_id: &OrderId) -> Result<Released, StoreError>;

    /// Moves the order's held stock to shipped (idempotent).
    async fn mark_shipped(&self, order_id: &OrderId) -> Result<Reservation, StoreError>;

    async fn reservation(&self, order_id: &OrderId) -> Result<Option<Reservation>, StoreError>;

    /// Every SKU's stock, a page at a time (see [`Page`]).
    async fn list_stock(
        &self,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<StockLevel>, StoreError>;

    /// Every reservation, a page at a time (see [`Page`]), the markers of releases that came
    /// before any reservation included (`RELEASED`, no lines); with `since`, only those created
    /// at or after it.
    async fn list_reservations(
        &self,
        since: Option<DateTime<Utc>>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<Reservation>, StoreError>;
}

/// A charge as the payment provider is asked for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChargeRequest {
    pub idempotency_key: String,
    pub order_id: OrderId,
    pub amount_cents: u64,
    pub currency: String,
    pub payment_method: String,
}

impl ChargeRequest {
    /// The order's one charge: its amount in its currency, by its payment method, under
    /// `charge:{orderId}`.
    pub fn for_order(order: &Order) -> ChargeRequest {
        ChargeRequest {
            idempotency_key: order.id().charge_key(),
            order_id: order.id().clone(),
            amount_cents: order.new.amount_cents,
            currency: order.new.currency.clone(),
            payment_method: order.new.payment_method.clone(),
        }
    }
}

/// What a refund did.
#[derive(Debug, Clone, PartialEq)]
pub enum Refunded {
    Now(Refund),
    /// Refunded before under the same key: nothing changed.
    Already(Refund),
    /// No charge exists for the order: nothing to undo.
    NothingCharged,
}

#[async_trait]
pub trait PaymentGateway: Send + Sync {
    /// Checks, changing nothing, that the provider accepts this service's credentials and URL
    /// (start-up refuses to serve otherwise). Nothing to check by default (the sandbox).
    async fn check(&self) -> Result<(), GatewayError> {
        Ok(())
    }

    /// `Err(Misconfigured)` while the provider refuses this service's settings (`/readyz`
    /// fails then); transient trouble is no ill health. Healthy by default.
    async fn health(&self) -> Result<(), GatewayError> {
        Ok(())
    }

    /// Charges once per idempotency key: the same key with the same parameters returns the first
    /// charge; with other parameters it is `KeyReused`.
    async fn charge(&self, request: &ChargeRequest) -> Result<Charge, GatewayError>;

    /// The order's charge, if one was made (also after a lost response).
    async fn find_charge(&self, order_id: &OrderId) -> Result<Option<Charge>, GatewayError>;

    /// Refunds the order's charge in full, once per idempotency key.
    ///
    /// With `charge_id` (the one the charge step recorded on the order) that charge is refunded,
    /// after checking it is the order's: a charge the provider does not know, or another order's,
    /// is `Rejected` and nothing is refunded. With `None` (the charge step never reported: it
    /// timed out, or its answer was lost) the gateway finds the order's charge itself, as
    /// `find_charge` does, which a provider may see only after a delay; so pass the recorded id
    /// whenever there is one.
    async fn refund(
        &self,
        order_id: &OrderId,
        charge_id: Option<&str>,
        idempotency_key: &str,
    ) -> Result<Refunded, GatewayError>;

    /// Every charge the provider holds for this service's orders, under any key, a page at a
    /// time (see [`Page`]): the provider's own books, so that a charge the store does not know
    /// of, or a second one for an order, can be found. With `since`, only the charges created at
    /// or after it.
    async fn list_charges(
        &self,
        since: Option<DateTime<Utc>>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<Charge>, GatewayError>;

    /// Every refund the provider holds for this service's orders, a page at a time; with
    /// `since`, only the refunds created at or after it.
    async fn list_refunds(
        &self,
        since: Option<DateTime<Utc>>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<Refund>, GatewayError>;
}

/// A shipment as the carrier is asked for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShipmentRequest {
    pub order_id: OrderId,
    pub address: Address,
    pub lines: Vec<ReservedLine>,
}

/// What voiding an order's shipping did.
#[derive(Debug, Clone, PartialEq)]
pub enum Voided {
    /// No shipment exists, and none will be created for the order from now on.
    Now,
    /// The shipment was created before: the goods have left, nothing can be voided.
    Shipped(Shipment),
}

#[async_trait]
pub trait ShippingGateway: Send + Sync {
    /// `Err(Misconfigured)` while the carrier refuses this service's settings (`/readyz` fails
    /// then); transient trouble is no ill health. Healthy by default (the sandbox).
    async fn health(&self) -> Result<(), GatewayError> {
        Ok(())
    }

    /// Creates the order's one shipment (the same order again returns it). Refused
    /// (`Rejected`) once the order's shipping was voided.
    async fn create_shipment(&self, request: &ShipmentRequest) -> Result<Shipment, GatewayError>;

    /// Voids the order's shipping, so that a shipment step still running somewhere (the workflow
    /// gave up on it and compensated) cannot ship a cancelled order. Idempotent.
    async fn void(&self, order_id: &OrderId) -> Result<Voided, GatewayError>;

    async fn shipment(&self, order_id: &OrderId) -> Result<Option<Shipment>, GatewayError>;
}

/// Events [`WebhookRepository::dispatch_all`]'s default dispatches at once.
pub const DISPATCH_CONCURRENCY: usize = 64;

/// Webhook endpoints, the outbox of order events, and the deliveries with their attempts.
/// The outbox is written by the order store itself, with each status change, so an event is
/// never lost to a crash nor made up by one; the service's dispatcher fans each event out into
/// deliveries, and its sender attempts them.
#[async_trait]
pub trait WebhookRepository: Send + Sync {
    /// Stores `endpoint`, replacing the one with its id (a rotation, a disable).
    async fn put_endpoint(&self, endpoint: &WebhookEndpoint) -> Result<(), StoreError>;

    async fn endpoint(&self, id: &str) -> Result<Option<WebhookEndpoint>, StoreError>;

    /// `owner`'s endpoints, oldest first.
    async fn endpoints_of(&self, owner: &str) -> Result<Vec<WebhookEndpoint>, StoreError>;

    /// `false`: there was none. Its deliveries stay, for the record.
    async fn delete_endpoint(&self, id: &str) -> Result<bool, StoreError>;

    /// The outbox's oldest events not yet dispatched, at most `limit`.
    async fn undispatched(&self, limit: u32) -> Result<Vec<OrderEvent>, StoreError>;

    /// Stores `deliveries` (of `event`; one already stored is kept as it is) and takes `event`
    /// out of the outbox. Idempotent: a dispatcher that died between the two does it again.
    async fn dispatch(&self, event: &OrderEvent, deliveries: &[Delivery])
    -> Result<(), StoreError>;

    /// [`dispatch`](Self::dispatch) for each event of `batch` with its deliveries. The embedded
    /// store writes them all at once (one job on its writer, where one an event cost a small
    /// saga four of its fourteen writes); this default dispatches them one by one,
    /// [`DISPATCH_CONCURRENCY`] at a time. An error may leave some of them dispatched (each is
    /// idempotent).
    async fn dispatch_all(&self, batch: &[(OrderEvent, Vec<Delivery>)]) -> Result<(), StoreError> {
        use futures_util::StreamExt;
        let each: Vec<_> = batch
            .iter()
            .map(|(event, deliveries)| self.dispatch(event, deliveries))
            .collect();
        futures_util::stream::iter(each)
            .buffer_unordered(DISPATCH_CONCURRENCY)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect()
    }

    /// The statuses `order_id` reached, in order, for the status stream. The embedded store
    /// keeps them for [`EVENT_RETENTION`] after their dispatch; the AWS one for the order's life.
    async fn order_events(&self, order_id: &OrderId) -> Result<Vec<OrderEvent>, StoreError>;

    /// Pending deliveries due at `now`, the longest due first, at most `limit`.
    async fn due_deliveries(
        &self,
        now: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<Delivery>, StoreError>;

    /// Stores `delivery` as an attempt left it.
    async fn save_delivery(&self, delivery: &Delivery) -> Result<(), StoreError>;

    /// `endpoint_id`'s deliveries, newest first, a page of at most `limit` after the cursor
    /// `after`.
    async fn deliveries(
        &self,
        endpoint_id: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<Delivery>, StoreError>;

    /// Makes `endpoint_id`'s failed deliveries of events since `since` pending again, due at
    /// `now`, their attempts kept; how many.
    async fn replay(
        &self,
        endpoint_id: &str,
        since: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<u32, StoreError>;

    /// Forgets, at most `limit` of each, dispatched events and finished deliveries older than
    /// `before`; how many.
    async fn prune(&self, before: DateTime<Utc>, limit: u32) -> Result<u32, StoreError>;
}

/// How long the embedded store keeps an order event after its dispatch (the status stream's
/// reach back for a reconnecting client), and a finished delivery (its endpoint's log).
pub const EVENT_RETENTION: chrono::Duration = chrono::Duration::days(7);
