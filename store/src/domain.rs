//! Domain records of the order saga.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// A time as both stores keep it: RFC 3339 in UTC with nanoseconds, fixed width, so stored
/// times sort as text in time order.
pub fn timestamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
}

/// The business key of every layer: 1–80 characters of `[A-Za-z0-9_-]` (also a valid Step
/// Functions execution name, which it becomes).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct OrderId(String);

impl OrderId {
    pub fn parse(s: &str) -> Result<OrderId, String> {
        if s.is_empty() || s.len() > 80 {
            return Err("must be 1 to 80 characters".to_owned());
        }
        if !s
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err("may contain only letters, digits, '-' and '_'".to_owned());
        }
        Ok(OrderId(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The empty id, below every order's: a bound of a listing's position, never an order.
    pub fn lowest() -> OrderId {
        OrderId(String::new())
    }

    /// Idempotency key of the order's charge.
    pub fn charge_key(&self) -> String {
        format!("charge:{}", self.0)
    }

    /// Idempotency key of the order's refund.
    pub fn refund_key(&self) -> String {
        format!("refund:{}", self.0)
    }
}

impl TryFrom<String> for OrderId {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        OrderId::parse(&s)
    }
}

impl From<OrderId> for String {
    fn from(id: OrderId) -> String {
        id.0
    }
}

impl fmt::Display for OrderId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LineItem {
    pub sku: String,
    pub quantity: u32,
    pub unit_price_cents: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Address {
    pub name: String,
    pub line1: String,
    pub city: String,
    pub postal_code: String,
    pub country: String,
}

/// The saga status kept on the order record. It only moves forward (see [`OrderStatus::rank`]).
/// Statuses compare in the order of [`OrderStatus::ALL`] (so they can key a sorted map, as in
/// [`StatusCounts`](crate::StatusCounts)); progress is [`OrderStatus::rank`], not that order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[cfg_attr(
    feature = "openapi",
    derive(utoipa::ToSchema),
    schema(as = SagaStatus, description = "The saga status of an order.")
)]
pub enum OrderStatus {
    Accepted,
    Reserved,
    Charged,
    AwaitingApproval,
    Approved,
    Completed,
    Compensating,
    Cancelled,
    CompensationFailed,
}

impl OrderStatus {
    pub const ALL: [OrderStatus; 9] = [
        OrderStatus::Accepted,
        OrderStatus::Reserved,
        OrderStatus::Charged,
        OrderStatus::AwaitingApproval,
        OrderStatus::Approved,
        OrderStatus::Completed,
        OrderStatus::Compensating,
        OrderStatus::Cancelled,
        OrderStatus::CompensationFailed,
    ];

    /// Order of progress: a status may only be replaced by one of a higher rank. The forward
    /// path ranks 0–4, compensation 5, a compensation that gave up 6, and the two final ends
    /// share the top rank 7, so neither is ever left (a completed order is never compensated, a
    /// cancelled one never completes). `COMPENSATION_FAILED` ends the execution but not the
    /// order: a redrive that finishes the compensation, or an operator resolving the incident,
    /// moves it on to `CANCELLED` (or `COMPLETED`, when the order turns out to have shipped).
    pub fn rank(self) -> u8 {
        match self {
            OrderStatus::Accepted => 0,
            OrderStatus::Reserved => 1,
            OrderStatus::Charged => 2,
            OrderStatus::AwaitingApproval => 3,
            OrderStatus::Approved => 4,
            OrderStatus::Compensating => 5,
            OrderStatus::CompensationFailed => 6,
            OrderStatus::Completed | OrderStatus::Cancelled => 7,
        }
    }

    /// The saga is done with the order: its execution has ended (`COMPENSATION_FAILED`
    /// included: it waits for a person, not for the saga).
    pub fn is_terminal(self) -> bool {
        self.rank() >= 6
    }

    /// Nothing will ever change the order's status again.
    pub fn is_final(self) -> bool {
        self.rank() == 7
    }

    /// A compensation's statuses: a failure (why the order is undone) is recorded with them,
    /// never with a forward one.
    pub fn is_compensation(self) -> bool {
        matches!(
            self,
            OrderStatus::Compensating | OrderStatus::Cancelled | OrderStatus::CompensationFailed
        )
    }

    pub fn can_move_to(self, next: OrderStatus) -> bool {
        next.rank() > self.rank()
    }

    pub fn as_str(self) -> &'static str {
        match self {
            OrderStatus::Accepted => "ACCEPTED",
            OrderStatus::Reserved => "RESERVED",
            OrderStatus::Charged => "CHARGED",
            OrderStatus::AwaitingApproval => "AWAITING_APPROVAL",
            OrderStatus::Approved => "APPROVED",
            OrderStatus::Completed => "COMPLETED",
            OrderStatus::Compensating => "COMPENSATING",
            OrderStatus::Cancelled => "CANCELLED",
            OrderStatus::CompensationFailed => "COMPENSATION_FAILED",
        }
    }

    pub fn parse(s: &str) -> Option<OrderStatus> {
        OrderStatus::ALL.into_iter().find(|st| st.as_str() == s)
    }
}

/// A new order as the HTTP layer accepted it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NewOrder {
    pub order_id: OrderId,
    pub customer_id: String,
    pub items: Vec<LineItem>,
    pub currency: String,
    pub payment_method: String,
    pub shipping_address: Address,
    /// Σ quantity × unit price, computed without overflow by the caller.
    pub amount_cents: u64,
    pub requires_approval: bool,
    /// Hash of the canonical request body: the same order id with another body is a conflict.
    pub body_hash: String,
    /// The principal whose key placed the order: only it (and operators) may read or act on
    /// it. `None` for orders placed before principals existed (operators only).
    #[serde(default)]
    pub owner: Option<String>,
    pub created_at: DateTime<Utc>,
}

/// Why an order was cancelled (the error and cause that started the compensation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    pub error: String,
    pub cause: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Approve,
    Reject,
}

/// The approval part of an order that needed one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Approval {
    pub requested_at: DateTime<Utc>,
    /// When the approval window closes, fixed when the token is first parked: a decision must
    /// be recorded before it. `None` for approvals parked before windows were fixed (their
    /// state's own timeout closes them).
    #[serde(default)]
    pub deadline: Option<DateTime<Utc>>,
    /// The task token the AwaitApproval step parked; `None` once decided.
    pub task_token: Option<String>,
    pub decision: Option<Decision>,
    pub decided_by: Option<String>,
    pub decided_at: Option<DateTime<Utc>>,
    pub reason: Option<String>,
}

/// An order record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Order {
    #[serde(flatten)]
    pub new: NewOrder,
    pub status: OrderStatus,
    pub execution_arn: Option<String>,
    /// The payment provider's id of the order's charge, once the charge step saw it succeed:
    /// the refund goes by it instead of looking the charge up (which a provider may only see
    /// after a delay).
    pub charge_id: Option<String>,
    /// When the provider made that charge, recorded with `charge_id`: with the order's amount
    /// and currency it is the whole charge, so showing it needs no call to the provider. `None`
    /// for orders charged before it was recorded.
    pub charged_at: Option<DateTime<Utc>>,
    /// The refund of that charge, once a compensation made it (or found it made): recorded so
    /// that the status view shows it without asking the provider.
    pub refund: Option<RefundRecord>,
    pub failure: Option<Failure>,
    pub approval: Option<Approval>,
    /// The compensation that gave up and waits for a person, while it is open: the order is
    /// `COMPENSATION_FAILED`. Closed (gone) when the order reaches a final status.
    pub incident: Option<Incident>,
    /// What operators did to the order beyond approving it (redrives, resolutions), oldest
    /// first.
    pub actions: Vec<OperatorAction>,
    /// The request to cancel the order, once one was accepted (the first is kept).
    pub cancellation: Option<Cancellation>,
    /// When the shipment step began: the point of no return, after which a cancellation is
    /// refused. Set by the step before it asks the carrier, only while no cancellation is
    /// recorded, so of a cancel and a shipment exactly one goes ahead.
    pub shipping_started_at: Option<DateTime<Utc>>,
    pub updated_at: DateTime<Utc>,
}

impl Order {
    pub fn id(&self) -> &OrderId {
        &self.new.order_id
    }
}

/// A request to cancel an order, accepted before its shipment began. The saga's next step sees
/// it before it acts (an approval's parked token is failed at once) and fails with
/// `Order.Cancelled`, so the order ends `CANCELLED` through the same compensations as a failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cancellation {
    /// The principal whose key asked: the order's client or an operator.
    pub by: String,
    pub role: Role,
    pub reason: Option<String>,
    pub at: DateTime<Utc>,
}

impl Cancellation {
    /// The cause the saga's failure carries: who asked (by role, never an operator's name: the
    /// cause reaches the order's owner) and why.
    pub fn cause(&self) -> String {
        let who = match self.role {
            Role::Client => "the client",
            Role::Operator => "an operator",
        };
        match &self.reason {
            Some(reason) => format!("cancelled by {who}: {reason}"),
            None => format!("cancelled by {who}"),
        }
    }
}

/// A compensation step that gave up: which, why, after how many attempts, and since when the
/// order has needed a person.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Incident {
    /// The state of the definition that failed (`ReleaseInventory`, `RefundPayment`): a redrive
    /// resumes there.
    pub step: String,
    pub error: String,
    pub cause: String,
    /// The attempts the step made (1 for a permanent error, which is never retried).
    pub attempts: u32,
    /// When it was first recorded; a later failure of the same order (after a redrive) keeps it.
    pub since: DateTime<Utc>,
}

/// What an operator did about an order's incident.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ActionKind {
    /// Redrove the failed execution: the compensation runs again from the state that failed.
    Redrive,
    /// Finished the undo by hand (e.g. refunded in the provider's dashboard) and closed the
    /// incident: the order is `CANCELLED`.
    Resolve,
}

/// An operator's action, recorded on the order with who did it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperatorAction {
    pub action: ActionKind,
    /// The operator's principal name.
    pub by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub at: DateTime<Utc>,
}

/// The refund recorded on an order: the provider's id, what it gave back, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RefundRecord {
    pub refund_id: String,
    pub amount_cents: u64,
    pub refunded_at: DateTime<Utc>,
}

impl From<&Refund> for RefundRecord {
    fn from(r: &Refund) -> Self {
        RefundRecord {
            refund_id: r.refund_id.clone(),
            amount_cents: r.amount_cents,
            refunded_at: r.created_at,
        }
    }
}

/// What a principal may do: a client (a system that places orders) or an operator (a person).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Client,
    Operator,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Client => "client",
            Role::Operator => "operator",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "client" => Some(Role::Client),
            "operator" => Some(Role::Operator),
            _ => None,
        }
    }
}

/// An API key as stored: never the key itself, only its hash (SHA-256 of the whole key; keys
/// are random, 256 bits, so a fast hash is as good as a slow one), and whose it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApiKey {
    /// The key's public id, part of the key itself (`fk_<keyId>_<secret>`): what `keys list`
    /// shows and `keys revoke` takes.
    pub key_id: String,
    /// The principal's name (unique): a client's orders belong to it, an operator decides as it.
    pub principal: String,
    pub role: Role,
    pub key_hash: String,
    pub created_at: DateTime<Utc>,
    /// Updated at most about once a minute per key (not on every request).
    pub last_used_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
}

/// An operator's signed-in console session. The store keeps a hash of its secret (the cookie's
/// value), never the secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleSession {
    /// SHA-256 (lower-case hex) of the session's secret.
    pub session_hash: String,
    /// The hash of the API key it was signed in with (`ApiKey::key_hash`, or the bootstrap
    /// token's hash): revoking that key ends the session.
    pub key_hash: String,
    /// The operator's principal name.
    pub principal: String,
    /// When the operator signed in.
    pub created_at: DateTime<Utc>,
    /// After this the session is over (the store may still return it until it is purged;
    /// callers check).
    pub expires_at: DateTime<Utc>,
}

/// Stock of one SKU. Reservations move units from `available` to `reserved`, releases back,
/// shipments from `reserved` to `shipped`; only an operator's count changes the total, so
/// `available + reserved + shipped == stocked` always (conservation, which `fulfillment audit`
/// checks).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StockLevel {
    pub sku: String,
    pub available: u64,
    pub reserved: u64,
    pub shipped: u64,
    /// The units the SKU holds in all, set with each count (`set_available`): the count plus
    /// what was reserved and shipped then.
    pub stocked: u64,
    /// The catalog price of one unit, set by an operator; `None` until one is set (the SKU
    /// cannot be ordered then).
    #[serde(default)]
    pub price: Option<Price>,
}

/// A catalog price: what one unit of a SKU costs, in a currency's minor unit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Price {
    pub cents: u64,
    /// ISO 4217.
    pub currency: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ReservationStatus {
    Held,
    Released,
    Shipped,
}

/// The one reservation of an order: every line or none.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reservation {
    pub order_id: OrderId,
    pub lines: Vec<ReservedLine>,
    pub status: ReservationStatus,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReservedLine {
    pub sku: String,
    pub quantity: u32,
}

/// Quantities per SKU: an order may list one SKU on several lines, and availability must be
/// checked against their sum.
pub fn quantities_per_sku(lines: &[ReservedLine]) -> BTreeMap<&str, u64> {
    let mut total = BTreeMap::new();
    for line in lines {
        *total.entry(line.sku.as_str()).or_insert(0u64) += u64::from(line.quantity);
    }
    total
}

/// A successful charge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Charge {
    pub charge_id: String,
    pub idempotency_key: String,
    pub order_id: OrderId,
    pub amount_cents: u64,
    pub currency: String,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Refund {
    pub refund_id: String,
    pub idempotency_key: String,
    pub charge_id: String,
    pub order_id: OrderId,
    pub amount_cents: u64,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Shipment {
    pub shipment_id: String,
    pub order_id: OrderId,
    pub tracking_number: String,
    pub created_at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_ids_follow_execution_name_rules() {
        assert!(OrderId::parse("order_1-A").is_ok());
        assert!(OrderId::parse("").is_err());
        assert!(OrderId::parse(&"x".repeat(81)).is_err());
        assert!(OrderId::parse("a/b").is_err());
        assert!(OrderId::parse("ünï").is_err());
    }

    #[test]
    fn keys_derive_from_the_order_id() {
        let id = OrderId::parse("o1").unwrap();
        assert_eq!(id.charge_key(), "charge:o1");
        assert_eq!(id.refund_key(), "refund:o1");
    }

    #[test]
    fn status_only_moves_forward_and_never_leaves_an_end() {
        use OrderStatus::*;
        assert!(Accepted.can_move_to(Reserved));
        assert!(Charged.can_move_to(Compensating));
        assert!(Compensating.can_move_to(Cancelled));
        assert!(!Reserved.can_move_to(Accepted));
        assert!(!Completed.can_move_to(Compensating));
        assert!(!Cancelled.can_move_to(Completed));
        assert!(!Reserved.can_move_to(Reserved));
        for s in OrderStatus::ALL {
            assert_eq!(OrderStatus::parse(s.as_str()), Some(s));
        }
    }

    #[test]
    fn statuses_compare_in_the_order_of_all() {
        assert!(OrderStatus::ALL.windows(2).all(|w| w[0] < w[1]));
    }
}
