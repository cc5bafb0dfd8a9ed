//! The order's record: intake, status, charge, refund, the shipment's start.

use crate::domain::*;
use crate::error::StoreError;
use async_trait::async_trait;
use chrono::{DateTime, Utc};

/// What [`OrderRecords::create`] found.
#[derive(Debug, Clone, PartialEq)]
pub enum Created {
    /// The order was stored now.
    New(Order),
    /// An order with this id was already stored (compare `body_hash` to tell a replay from a
    /// conflict); nothing was changed.
    Existing(Order),
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

/// An order's record as the saga writes it: stored once at intake, then its status, charge,
/// refund and the shipment's start.
#[async_trait]
pub trait OrderRecords: Send + Sync {
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

    /// Marks the shipment step as begun at `at` (the first time is kept), unless a cancellation
    /// is recorded or the order is being undone: the point of no return. Returns the order afterwards: with
    /// `shipping_started_at`, or with the cancellation that came first.
    async fn start_shipment(&self, id: &OrderId, at: DateTime<Utc>) -> Result<Order, StoreError>;
}
