//! What the sandbox gateways keep, as steps a backend stores atomically. The gateways' behaviour
//! (magic values, idempotency, voids) is written once, in `payments.rs` and `shipping.rs`, over
//! this trait; a backend only stores: `SqliteStore` in tables of its file, `DynamoStore` in items
//! of its table.
//!
//! A gateway reads, decides, then writes; another call may slip in between. So every write is
//! conditional (store unless already there, void unless already charged or shipped) and reports
//! what it found instead: two racing calls still make one charge, one refund, one shipment, and
//! nothing is charged or shipped for an order once it is voided.

use crate::domain::{Charge, OrderId, Refund, Shipment};
use crate::error::StoreError;
use crate::ports::Page;
use async_trait::async_trait;
use chrono::{DateTime, Utc};

/// A charge as the provider keeps it: with the payment method, which a replay must match too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerCharge {
    pub charge: Charge,
    pub payment_method: String,
}

/// What [`Ledger::add_charge`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChargeAdded {
    New,
    /// The key holds this charge already; nothing was stored.
    Existing(LedgerCharge),
    /// The order's payment was voided; nothing was stored.
    Voided,
}

/// What [`Ledger::void_payment`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PaymentVoid {
    /// The order's payment is voided (now or before).
    Voided,
    /// The order has this charge, so nothing was voided.
    Charged(LedgerCharge),
}

/// What [`Ledger::add_refund`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RefundAdded {
    New,
    /// The key holds this refund already; nothing was stored.
    KeyUsed(Refund),
    /// The charge was refunded under another key; nothing was stored.
    ChargeRefunded(Refund),
}

/// The carrier's record of an order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shipping {
    /// Neither shipped nor voided.
    Open,
    Shipped(Shipment),
    /// Voided before any shipment: none will be made.
    Voided,
}

/// What [`Ledger::add_shipment`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShipmentAdded {
    New,
    /// The order has this shipment already; nothing was stored.
    Existing(Shipment),
    /// The order's shipping was voided; nothing was stored.
    Voided,
}

/// The sandbox provider's and carrier's books. Each method is one atomic step of the backend,
/// and every read is strongly consistent: the gateways decide on what it returns.
#[async_trait]
pub trait Ledger: Send + Sync {
    /// Counts one more trigger of a "once" behaviour and returns the count, 1 the first time.
    async fn count_attempt(&self, key: &str) -> Result<u64, StoreError>;

    async fn charge_by_key(&self, key: &str) -> Result<Option<LedgerCharge>, StoreError>;

    async fn charge_by_id(&self, charge_id: &str) -> Result<Option<LedgerCharge>, StoreError>;

    /// The order's first charge: the one the saga made (a provider would accept more, under
    /// other keys; the saga only ever uses `charge:{order}`).
    async fn charge_of_order(&self, order_id: &OrderId)
    -> Result<Option<LedgerCharge>, StoreError>;

    async fn payment_voided(&self, order_id: &OrderId) -> Result<bool, StoreError>;

    /// Stores a charge unless its key holds one or the order's payment is voided.
    async fn add_charge(&self, charge: &LedgerCharge) -> Result<ChargeAdded, StoreError>;

    /// Voids the order's payment unless it has a charge (idempotent).
    async fn void_payment(&self, order_id: &OrderId) -> Result<PaymentVoid, StoreError>;

    async fn refund_by_key(&self, key: &str) -> Result<Option<Refund>, StoreError>;

    async fn refund_of_charge(&self, charge: &Charge) -> Result<Option<Refund>, StoreError>;

    /// Stores a refund of `charge` unless its key holds one or the charge was refunded.
    async fn add_refund(&self, refund: &Refund, charge: &Charge)
    -> Result<RefundAdded, StoreError>;

    async fn shipping(&self, order_id: &OrderId) -> Result<Shipping, StoreError>;

    /// Stores a shipment unless the order has one or its shipping is voided.
    async fn add_shipment(&self, shipment: &Shipment) -> Result<ShipmentAdded, StoreError>;

    /// Voids the order's shipping unless it was shipped (idempotent); returns what it found:
    /// `Voided` or `Shipped`, never `Open`.
    async fn void_shipping(&self, order_id: &OrderId) -> Result<Shipping, StoreError>;

    /// Every charge (with `since`, those created at or after it), a page at a time (see
    /// [`Page`]).
    async fn list_charges(
        &self,
        since: Option<DateTime<Utc>>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<Charge>, StoreError>;

    /// Every refund (with `since`, those created at or after it), a page at a time.
    async fn list_refunds(
        &self,
        since: Option<DateTime<Utc>>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<Refund>, StoreError>;
}
