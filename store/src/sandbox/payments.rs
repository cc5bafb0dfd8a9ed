//! The sandbox payment provider: a ledger of charges and refunds keyed by idempotency key, as a
//! Stripe-compatible provider keeps one. A charge is one immediate transaction: look the key
//! up, compare, then write; so two racing calls with one key make one charge.

use super::{
    PM_DECLINED, PM_LOST_RESPONSE, PM_SUCCEEDS, PM_UNAVAILABLE_ONCE, bump_attempt, derive_id,
};
use crate::domain::{Charge, OrderId, Refund};
use crate::error::{GatewayError, StoreError};
use crate::ports::{ChargeRequest, PaymentGateway, Refunded};
use crate::sqlite::{SqliteStore, get_ts, get_u64, immediate, now, parse_ts, to_sql_u64};
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

/// The sandbox payment gateway. Build it with [`SqliteStore::payments`].
#[derive(Debug, Clone)]
pub struct SandboxPayments {
    store: SqliteStore,
}

impl SandboxPayments {
    pub fn new(store: SqliteStore) -> SandboxPayments {
        SandboxPayments { store }
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

/// A stored charge and the parameters it was made with.
struct ChargeRow {
    charge: Charge,
    payment_method: String,
}

const SELECT_CHARGE: &str = "SELECT idempotency_key, charge_id, order_id, amount_cents, currency, \
    created_at, payment_method FROM sandbox_charges";

fn charge_from_row(r: &rusqlite::Row) -> rusqlite::Result<ChargeRow> {
    let order_id: String = r.get(2)?;
    Ok(ChargeRow {
        charge: Charge {
            idempotency_key: r.get(0)?,
            charge_id: r.get(1)?,
            order_id: OrderId::parse(&order_id).map_err(|e| crate::sqlite::bad_column(2, e))?,
            amount_cents: get_u64(r, 3)?,
            currency: r.get(4)?,
            created_at: get_ts(r, 5)?,
        },
        payment_method: r.get(6)?,
    })
}

fn charge_by_key(conn: &Connection, key: &str) -> rusqlite::Result<Option<ChargeRow>> {
    conn.prepare_cached(&format!("{SELECT_CHARGE} WHERE idempotency_key = ?1"))?
        .query_row([key], charge_from_row)
        .optional()
}

fn charge_by_id(conn: &Connection, charge_id: &str) -> rusqlite::Result<Option<ChargeRow>> {
    conn.prepare_cached(&format!("{SELECT_CHARGE} WHERE charge_id = ?1"))?
        .query_row([charge_id], charge_from_row)
        .optional()
}

/// The order's first charge: the one the saga made (a provider would accept more, under other
/// keys; the saga only ever uses `charge:{order}`).
fn charge_of_order(conn: &Connection, id: &OrderId) -> rusqlite::Result<Option<ChargeRow>> {
    conn.prepare_cached(&format!(
        "{SELECT_CHARGE} WHERE order_id = ?1 ORDER BY created_at, rowid LIMIT 1"
    ))?
    .query_row([id.as_str()], charge_from_row)
    .optional()
}

fn refund_where(conn: &Connection, column: &str, value: &str) -> rusqlite::Result<Option<Refund>> {
    conn.prepare_cached(&format!(
        "SELECT idempotency_key, refund_id, charge_id, order_id, amount_cents, created_at \
         FROM sandbox_refunds WHERE {column} = ?1"
    ))?
    .query_row([value], |r| {
        let order_id: String = r.get(3)?;
        Ok(Refund {
            idempotency_key: r.get(0)?,
            refund_id: r.get(1)?,
            charge_id: r.get(2)?,
            order_id: OrderId::parse(&order_id).map_err(|e| crate::sqlite::bad_column(3, e))?,
            amount_cents: get_u64(r, 4)?,
            created_at: get_ts(r, 5)?,
        })
    })
    .optional()
}

fn void_key(id: &OrderId) -> String {
    format!("void:{id}")
}

/// Whether a refund found nothing to refund for the order (see `refund`).
fn voided(conn: &Connection, id: &OrderId) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT 1 FROM sandbox_attempts WHERE key = ?1")?
        .query_row([void_key(id)], |_| Ok(()))
        .optional()
        .map(|found| found.is_some())
}

fn same_request(row: &ChargeRow, req: &ChargeRequest) -> bool {
    row.charge.order_id == req.order_id
        && row.charge.amount_cents == req.amount_cents
        && row.charge.currency == req.currency
        && row.payment_method == req.payment_method
}

#[async_trait]
impl PaymentGateway for SandboxPayments {
    async fn charge(&self, request: &ChargeRequest) -> Result<Charge, GatewayError> {
        let req = request.clone();
        let amount = to_sql_u64(req.amount_cents, "amount").map_err(|_| {
            GatewayError::Rejected(format!("amount {} is too large", req.amount_cents))
        })?;
        // The outer result is the store's, the inner one the provider's answer.
        self.store
            .write(
                move |conn| -> Result<Result<Charge, GatewayError>, StoreError> {
                    let tx = immediate(conn)?;
                    if let Some(row) = charge_by_key(&tx, &req.idempotency_key)? {
                        if !same_request(&row, &req) {
                            return Ok(Err(GatewayError::KeyReused(format!(
                                "key {} charged {} {} to {} for order {}",
                                req.idempotency_key,
                                row.charge.amount_cents,
                                row.charge.currency,
                                row.payment_method,
                                row.charge.order_id
                            ))));
                        }
                        return Ok(Ok(row.charge));
                    }
                    if voided(&tx, &req.order_id)? {
                        return Ok(Err(GatewayError::Rejected(format!(
                            "order {} was voided: its payment was compensated before any charge",
                            req.order_id
                        ))));
                    }
                    let method = match method(&req.payment_method) {
                        Ok(m) => m,
                        Err(e) => return Ok(Err(e)),
                    };
                    match method {
                        Method::Declined => {
                            return Ok(Err(GatewayError::Rejected(
                                "your card was declined".to_owned(),
                            )));
                        }
                        Method::UnavailableOnce => {
                            let key = format!("unavailable:{}", req.idempotency_key);
                            if bump_attempt(&tx, &key)? == 1 {
                                tx.commit()?;
                                return Ok(Err(GatewayError::Unavailable(
                                    "payment provider unavailable (sandbox: first attempt)"
                                        .to_owned(),
                                )));
                            }
                        }
                        Method::Succeeds | Method::LostResponse => {}
                    }
                    let stamp = now();
                    let charge = Charge {
                        charge_id: derive_id("ch_", &req.idempotency_key),
                        idempotency_key: req.idempotency_key.clone(),
                        order_id: req.order_id.clone(),
                        amount_cents: req.amount_cents,
                        currency: req.currency.clone(),
                        created_at: parse_ts(0, &stamp)?,
                    };
                    tx.prepare_cached(
                        "INSERT INTO sandbox_charges (idempotency_key, charge_id, order_id, \
                     amount_cents, currency, payment_method, created_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    )?
                    .execute(params![
                        charge.idempotency_key,
                        charge.charge_id,
                        charge.order_id.as_str(),
                        amount,
                        charge.currency,
                        req.payment_method,
                        stamp
                    ])?;
                    if matches!(method, Method::LostResponse)
                        && bump_attempt(&tx, &format!("lost:{}", req.idempotency_key))? == 1
                    {
                        // The money moved and is committed; only the answer is lost.
                        tx.commit()?;
                        return Ok(Err(GatewayError::Unavailable(
                            "no response from the payment provider (sandbox: the charge was made)"
                                .to_owned(),
                        )));
                    }
                    tx.commit()?;
                    Ok(Ok(charge))
                },
            )
            .await?
    }

    async fn find_charge(&self, order_id: &OrderId) -> Result<Option<Charge>, GatewayError> {
        let id = order_id.clone();
        let found = self
            .store
            .read(move |conn| Ok(charge_of_order(conn, &id)?.map(|row| row.charge)))
            .await?;
        Ok(found)
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
        let id = order_id.clone();
        let charge_id = charge_id.map(str::to_owned);
        let key = idempotency_key.to_owned();
        self.store
            .write(
                move |conn| -> Result<Result<Refunded, GatewayError>, StoreError> {
                    let tx = immediate(conn)?;
                    if let Some(refund) = refund_where(&tx, "idempotency_key", &key)? {
                        if refund.order_id != id {
                            return Ok(Err(GatewayError::KeyReused(format!(
                                "key {key} refunded order {}",
                                refund.order_id
                            ))));
                        }
                        return Ok(Ok(Refunded::Already(refund)));
                    }
                    let charge = match charge_id {
                        Some(charge_id) => match charge_by_id(&tx, &charge_id)? {
                            Some(row) if row.charge.order_id == id => row.charge,
                            Some(row) => {
                                return Ok(Err(GatewayError::Rejected(format!(
                                    "charge {charge_id} is order {}'s, not {id}'s",
                                    row.charge.order_id
                                ))));
                            }
                            None => {
                                return Ok(Err(GatewayError::Rejected(format!(
                                    "no charge {charge_id} (order {id})"
                                ))));
                            }
                        },
                        None => match charge_of_order(&tx, &id)? {
                            Some(row) => row.charge,
                            None => {
                                bump_attempt(&tx, &void_key(&id))?;
                                tx.commit()?;
                                return Ok(Ok(Refunded::NothingCharged));
                            }
                        },
                    };
                    if let Some(refund) = refund_where(&tx, "charge_id", &charge.charge_id)? {
                        return Ok(Ok(Refunded::Already(refund)));
                    }
                    let stamp = now();
                    let refund = Refund {
                        refund_id: derive_id("re_", &key),
                        idempotency_key: key,
                        charge_id: charge.charge_id,
                        order_id: id,
                        amount_cents: charge.amount_cents,
                        created_at: parse_ts(0, &stamp)?,
                    };
                    tx.prepare_cached(
                        "INSERT INTO sandbox_refunds (idempotency_key, refund_id, charge_id, \
                     order_id, amount_cents, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    )?
                    .execute(params![
                        refund.idempotency_key,
                        refund.refund_id,
                        refund.charge_id,
                        refund.order_id.as_str(),
                        to_sql_u64(refund.amount_cents, "amount")?,
                        stamp
                    ])?;
                    tx.commit()?;
                    Ok(Ok(Refunded::Now(refund)))
                },
            )
            .await?
    }
}
