//! The payment provider.

use super::Page;
use crate::domain::*;
use crate::error::GatewayError;
use async_trait::async_trait;
use chrono::{DateTime, Utc};

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
