//! The sandbox payment provider: a ledger of charges and refunds keyed by idempotency key, as a
//! Stripe-compatible provider keeps one. It looks the key up, decides, then stores the charge
//! conditionally: two racing calls with one key make one charge, and the loser replays it.

use super::ledger::{ChargeAdded, Ledger, LedgerCharge, PaymentVoid, RefundAdded};
use super::{PM_DECLINED, PM_LOST_RESPONSE, PM_SUCCEEDS, PM_UNAVAILABLE_ONCE, derive_id};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use store::domain::{Charge, OrderId, Refund};
use store::error::GatewayError;
use store::ports::{ChargeRequest, Page, PaymentGateway, Refunded};

/// The sandbox payment gateway over a backend's ledger. Build it with
/// `new` over the store's ledger (`SqliteStore` or `DynamoStore`), or [`ports`](super::ports) for the whole bundle.
#[derive(Debug, Clone)]
pub struct SandboxPayments<L> {
    ledger: L,
}

impl<L: Ledger> SandboxPayments<L> {
    pub fn new(ledger: L) -> SandboxPayments<L> {
        SandboxPayments { ledger }
    }
}

enum Method {
    Succeeds,
    Declined,
    UnavailableOnce,
    LostResponse,
}

fn method(payment_method: &str) -> Result<Method, GatewayError> {
    match payment_method {
        PM_SUCCEEDS => Ok(Method::Succeeds),
        PM_DECLINED => Ok(Method::Declined),
        PM_UNAVAILABLE_ONCE => Ok(Method::UnavailableOnce),
        PM_LOST_RESPONSE => Ok(Method::LostResponse),
        other => Err(GatewayError::Rejected(format!(
            "unknown test payment method {other:?}: use {PM_SUCCEEDS}, {PM_DECLINED}, \
             {PM_UNAVAILABLE_ONCE} or {PM_LOST_RESPONSE}"
        ))),
    }
}

/// A key seen before: the same parameters get its charge, others are refused.
fn replay(found: LedgerCharge, req: &ChargeRequest) -> Result<Charge, GatewayError> {
    let c = &found.charge;
    let same = c.order_id == req.order_id
        && c.amount_cents == req.amount_cents
        && c.currency == req.currency
        && found.payment_method == req.payment_method;
    if !same {
        return Err(GatewayError::KeyReused(format!(
            "key {} charged {} {} to {} for order {}",
            req.idempotency_key, c.amount_cents, c.currency, found.payment_method, c.order_id
        )));
    }
    Ok(found.charge)
}

fn voided(id: &OrderId) -> GatewayError {
    GatewayError::Rejected(format!(
        "order {id} was voided: its payment was compensated before any charge"
    ))
}

/// A refund key names one order's refund.
fn refund_replay(found: Refund, id: &OrderId) -> Result<Refunded, GatewayError> {
    if found.order_id != *id {
        return Err(GatewayError::KeyReused(format!(
            "key {} refunded order {}",
            found.idempotency_key, found.order_id
        )));
    }
    Ok(Refunded::Already(found))
}

#[async_trait]
impl<L: Ledger> PaymentGateway for SandboxPayments<L> {
    async fn charge(&self, req: &ChargeRequest) -> Result<Charge, GatewayError> {
        // Amounts are stored as signed 64-bit integers, like a provider's; beyond that, refuse.
        if i64::try_from(req.amount_cents).is_err() {
            return Err(GatewayError::Rejected(format!(
                "amount {} is too large",
                req.amount_cents
            )));
        }
        let key = &req.idempotency_key;
        if let Some(found) = self.ledger.charge_by_key(key).await? {
            return replay(found, req);
        }
        if self.ledger.payment_voided(&req.order_id).await? {
            return Err(voided(&req.order_id));
        }
        let method = method(&req.payment_method)?;
        match method {
            Method::Declined => {
                return Err(GatewayError::Rejected("your card was declined".to_owned()));
            }
            Method::UnavailableOnce => {
                if self
                    .ledger
                    .count_attempt(&format!("unavailable:{key}"))
                    .await?
                    == 1
                {
                    return Err(GatewayError::Unavailable(
                        "payment provider unavailable (sandbox: first attempt)".to_owned(),
                    ));
                }
            }
            Method::Succeeds | Method::LostResponse => {}
        }
        let charge = LedgerCharge {
            charge: Charge {
                charge_id: derive_id("ch_", key),
                idempotency_key: key.clone(),
                order_id: req.order_id.clone(),
                amount_cents: req.amount_cents,
                currency: req.currency.clone(),
                created_at: Utc::now(),
            },
            payment_method: req.payment_method.clone(),
        };
        match self.ledger.add_charge(&charge).await? {
            ChargeAdded::New => {}
            ChargeAdded::Existing(found) => return replay(found, req),
            ChargeAdded::Voided => return Err(voided(&req.order_id)),
        }
        if matches!(method, Method::LostResponse)
            && self.ledger.count_attempt(&format!("lost:{key}")).await? == 1
        {
            // The money moved and is stored; only the answer is lost.
            return Err(GatewayError::Unavailable(
                "no response from the payment provider (sandbox: the charge was made)".to_owned(),
            ));
        }
        Ok(charge.charge)
    }

    async fn find_charge(&self, order_id: &OrderId) -> Result<Option<Charge>, GatewayError> {
        let found = self.ledger.charge_of_order(order_id).await?;
        Ok(found.map(|row| row.charge))
    }

    /// Refunds the order's charge in full: the one named, or else the order's first. A charge
    /// refunded before under another key is not refunded again: that refund is returned as
    /// `Already`, since nothing is left to give back. A refund that finds no charge voids the
    /// order: a charge that lands late (a step the workflow gave up on, still running somewhere)
    /// is refused, because no compensation would ever run for it.
    async fn refund(
        &self,
        order_id: &OrderId,
        charge_id: Option<&str>,
        idempotency_key: &str,
    ) -> Result<Refunded, GatewayError> {
        let id = order_id;
        if let Some(found) = self.ledger.refund_by_key(idempotency_key).await? {
            return refund_replay(found, id);
        }
        let charge = match charge_id {
            Some(charge_id) => match self.ledger.charge_by_id(charge_id).await? {
                Some(found) if found.charge.order_id == *id => found.charge,
                Some(found) => {
                    return Err(GatewayError::Rejected(format!(
                        "charge {charge_id} is order {}'s, not {id}'s",
                        found.charge.order_id
                    )));
                }
                None => {
                    return Err(GatewayError::Rejected(format!(
                        "no charge {charge_id} (order {id})"
                    )));
                }
            },
            None => match self.ledger.charge_of_order(id).await? {
                Some(found) => found.charge,
                None => match self.ledger.void_payment(id).await? {
                    PaymentVoid::Voided => return Ok(Refunded::NothingCharged),
                    // A charge landed since the look-up: refund it.
                    PaymentVoid::Charged(found) => found.charge,
                },
            },
        };
        if let Some(found) = self.ledger.refund_of_charge(&charge).await? {
            return Ok(Refunded::Already(found));
        }
        let refund = Refund {
            refund_id: derive_id("re_", idempotency_key),
            idempotency_key: idempotency_key.to_owned(),
            charge_id: charge.charge_id.clone(),
            order_id: id.clone(),
            amount_cents: charge.amount_cents,
            created_at: Utc::now(),
        };
        match self.ledger.add_refund(&refund, &charge).await? {
            RefundAdded::New => Ok(Refunded::Now(refund)),
            RefundAdded::KeyUsed(found) => refund_replay(found, id),
            RefundAdded::ChargeRefunded(found) => Ok(Refunded::Already(found)),
        }
    }

    async fn list_charges(
        &self,
        since: Option<DateTime<Utc>>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<Charge>, GatewayError> {
        Ok(self.ledger.list_charges(since, after, limit).await?)
    }

    async fn list_refunds(
        &self,
        since: Option<DateTime<Utc>>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<Refund>, GatewayError> {
        Ok(self.ledger.list_refunds(since, after, limit).await?)
    }
}
