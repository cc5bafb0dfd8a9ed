//! The sandbox gateways' ledger in the `sandbox_*` tables of the store's file (schema step 3).
//! Each conditional write is one write of the group commit (its own savepoint, the write lock
//! held): it looks, then writes or reports what
//! it found. Voids are marker rows in `sandbox_attempts` (`void:{order}` for payments,
//! `void-shipping:{order}` for shipping), beside the counts of the "once" behaviours.

use super::listing::Listing;
use super::{SqliteStore, bad_column, get_ts, get_u64, savepoint, to_sql_u64, ts};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, params};
use store::domain::{Charge, OrderId, Refund, Shipment};
use store::error::StoreError;
use store::ledger::{
    ChargeAdded, Ledger, LedgerCharge, PaymentVoid, RefundAdded, ShipmentAdded, Shipping,
};
use store::ports::Page;

fn bump_attempt(conn: &Connection, key: &str) -> Result<u64, StoreError> {
    Ok(conn
        .prepare_cached(
            "INSERT INTO sandbox_attempts (key, count) VALUES (?1, 1) \
             ON CONFLICT (key) DO UPDATE SET count = count + 1 RETURNING count",
        )?
        .query_row([key], |r| get_u64(r, 0))?)
}

fn marked(conn: &Connection, key: &str) -> Result<bool, StoreError> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM sandbox_attempts WHERE key = ?1")?
        .query_row([key], |_| Ok(()))
        .optional()?
        .is_some())
}

fn payment_void_key(id: &OrderId) -> String {
    format!("void:{id}")
}

fn shipping_void_key(id: &OrderId) -> String {
    format!("void-shipping:{id}")
}

const SELECT_CHARGE: &str = "SELECT idempotency_key, charge_id, order_id, amount_cents, currency, \
    created_at, payment_method FROM sandbox_charges";

fn charge_from_row(r: &rusqlite::Row) -> rusqlite::Result<LedgerCharge> {
    let order_id: String = r.get(2)?;
    Ok(LedgerCharge {
        charge: Charge {
            idempotency_key: r.get(0)?,
            charge_id: r.get(1)?,
            order_id: OrderId::parse(&order_id).map_err(|e| bad_column(2, e))?,
            amount_cents: get_u64(r, 3)?,
            currency: r.get(4)?,
            created_at: get_ts(r, 5)?,
        },
        payment_method: r.get(6)?,
    })
}

fn charge_where(
    conn: &Connection,
    column: &str,
    value: &str,
) -> Result<Option<LedgerCharge>, StoreError> {
    Ok(conn
        .prepare_cached(&format!("{SELECT_CHARGE} WHERE {column} = ?1"))?
        .query_row([value], charge_from_row)
        .optional()?)
}

fn charge_of_order(conn: &Connection, id: &OrderId) -> Result<Option<LedgerCharge>, StoreError> {
    Ok(conn
        .prepare_cached(&format!(
            "{SELECT_CHARGE} WHERE order_id = ?1 ORDER BY created_at, rowid LIMIT 1"
        ))?
        .query_row([id.as_str()], charge_from_row)
        .optional()?)
}

const SELECT_REFUND: &str = "SELECT idempotency_key, refund_id, charge_id, order_id, \
    amount_cents, created_at FROM sandbox_refunds";

fn refund_from_row(r: &rusqlite::Row) -> rusqlite::Result<Refund> {
    let order_id: String = r.get(3)?;
    Ok(Refund {
        idempotency_key: r.get(0)?,
        refund_id: r.get(1)?,
        charge_id: r.get(2)?,
        order_id: OrderId::parse(&order_id).map_err(|e| bad_column(3, e))?,
        amount_cents: get_u64(r, 4)?,
        created_at: get_ts(r, 5)?,
    })
}

fn refund_where(
    conn: &Connection,
    column: &str,
    value: &str,
) -> Result<Option<Refund>, StoreError> {
    Ok(conn
        .prepare_cached(&format!("{SELECT_REFUND} WHERE {column} = ?1"))?
        .query_row([value], refund_from_row)
        .optional()?)
}

fn shipment(conn: &Connection, id: &OrderId) -> Result<Option<Shipment>, StoreError> {
    Ok(conn
        .prepare_cached(
            "SELECT shipment_id, tracking_number, created_at FROM sandbox_shipments \
             WHERE order_id = ?1",
        )?
        .query_row([id.as_str()], |r| {
            Ok(Shipment {
                shipment_id: r.get(0)?,
                order_id: id.clone(),
                tracking_number: r.get(1)?,
                created_at: get_ts(r, 2)?,
            })
        })
        .optional()?)
}

fn shipping(conn: &Connection, id: &OrderId) -> Result<Shipping, StoreError> {
    Ok(match shipment(conn, id)? {
        Some(found) => Shipping::Shipped(found),
        None if marked(conn, &shipping_void_key(id))? => Shipping::Voided,
        None => Shipping::Open,
    })
}

#[async_trait]
impl Ledger for SqliteStore {
    async fn count_attempt(&self, key: &str) -> Result<u64, StoreError> {
        let key = key.to_owned();
        self.write(move |conn| {
            let tx = savepoint(conn)?;
            let count = bump_attempt(&tx, &key)?;
            tx.commit()?;
            Ok(count)
        })
        .await
    }

    async fn charge_by_key(&self, key: &str) -> Result<Option<LedgerCharge>, StoreError> {
        let key = key.to_owned();
        self.read(move |conn| charge_where(conn, "idempotency_key", &key))
            .await
    }

    async fn charge_by_id(&self, charge_id: &str) -> Result<Option<LedgerCharge>, StoreError> {
        let charge_id = charge_id.to_owned();
        self.read(move |conn| charge_where(conn, "charge_id", &charge_id))
            .await
    }

    async fn charge_of_order(
        &self,
        order_id: &OrderId,
    ) -> Result<Option<LedgerCharge>, StoreError> {
        let id = order_id.clone();
        self.read(move |conn| charge_of_order(conn, &id)).await
    }

    async fn payment_voided(&self, order_id: &OrderId) -> Result<bool, StoreError> {
        let key = payment_void_key(order_id);
        self.read(move |conn| marked(conn, &key)).await
    }

    async fn add_charge(&self, charge: &LedgerCharge) -> Result<ChargeAdded, StoreError> {
        let row = charge.clone();
        self.write(move |conn| {
            let tx = savepoint(conn)?;
            let c = &row.charge;
            if let Some(found) = charge_where(&tx, "idempotency_key", &c.idempotency_key)? {
                return Ok(ChargeAdded::Existing(found));
            }
            if marked(&tx, &payment_void_key(&c.order_id))? {
                return Ok(ChargeAdded::Voided);
            }
            tx.prepare_cached(
                "INSERT INTO sandbox_charges (idempotency_key, charge_id, order_id, \
                 amount_cents, currency, payment_method, created_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?
            .execute(params![
                c.idempotency_key,
                c.charge_id,
                c.order_id.as_str(),
                to_sql_u64(c.amount_cents, "amount")?,
                c.currency,
                row.payment_method,
                ts(c.created_at)
            ])?;
            tx.commit()?;
            Ok(ChargeAdded::New)
        })
        .await
    }

    async fn void_payment(&self, order_id: &OrderId) -> Result<PaymentVoid, StoreError> {
        let id = order_id.clone();
        self.write(move |conn| {
            let tx = savepoint(conn)?;
            if let Some(found) = charge_of_order(&tx, &id)? {
                return Ok(PaymentVoid::Charged(found));
            }
            bump_attempt(&tx, &payment_void_key(&id))?;
            tx.commit()?;
            Ok(PaymentVoid::Voided)
        })
        .await
    }

    async fn refund_by_key(&self, key: &str) -> Result<Option<Refund>, StoreError> {
        let key = key.to_owned();
        self.read(move |conn| refund_where(conn, "idempotency_key", &key))
            .await
    }

    async fn refund_of_charge(&self, charge: &Charge) -> Result<Option<Refund>, StoreError> {
        let charge_id = charge.charge_id.clone();
        self.read(move |conn| refund_where(conn, "charge_id", &charge_id))
            .await
    }

    async fn add_refund(&self, refund: &Refund, _: &Charge) -> Result<RefundAdded, StoreError> {
        let refund = refund.clone();
        self.write(move |conn| {
            let tx = savepoint(conn)?;
            if let Some(found) = refund_where(&tx, "idempotency_key", &refund.idempotency_key)? {
                return Ok(RefundAdded::KeyUsed(found));
            }
            if let Some(found) = refund_where(&tx, "charge_id", &refund.charge_id)? {
                return Ok(RefundAdded::ChargeRefunded(found));
            }
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
                ts(refund.created_at)
            ])?;
            tx.commit()?;
            Ok(RefundAdded::New)
        })
        .await
    }

    async fn shipping(&self, order_id: &OrderId) -> Result<Shipping, StoreError> {
        let id = order_id.clone();
        self.read(move |conn| shipping(conn, &id)).await
    }

    async fn add_shipment(&self, shipment: &Shipment) -> Result<ShipmentAdded, StoreError> {
        let shipment = shipment.clone();
        self.write(move |conn| {
            let tx = savepoint(conn)?;
            match shipping(&tx, &shipment.order_id)? {
                Shipping::Shipped(found) => return Ok(ShipmentAdded::Existing(found)),
                Shipping::Voided => return Ok(ShipmentAdded::Voided),
                Shipping::Open => {}
            }
            tx.prepare_cached(
                "INSERT INTO sandbox_shipments (order_id, shipment_id, tracking_number, \
                 created_at) VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![
                shipment.order_id.as_str(),
                shipment.shipment_id,
                shipment.tracking_number,
                ts(shipment.created_at)
            ])?;
            tx.commit()?;
            Ok(ShipmentAdded::New)
        })
        .await
    }

    async fn void_shipping(&self, order_id: &OrderId) -> Result<Shipping, StoreError> {
        let id = order_id.clone();
        self.write(move |conn| {
            let tx = savepoint(conn)?;
            let found = shipping(&tx, &id)?;
            if found == Shipping::Open {
                bump_attempt(&tx, &shipping_void_key(&id))?;
                tx.commit()?;
                return Ok(Shipping::Voided);
            }
            Ok(found)
        })
        .await
    }

    async fn list_charges(
        &self,
        since: Option<DateTime<Utc>>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<Charge>, StoreError> {
        let after = after.map(str::to_owned);
        self.scan(move |conn| {
            let from_row = |r: &rusqlite::Row| charge_from_row(r).map(|c| c.charge);
            CHARGES.page(conn, since, after.as_deref(), limit, from_row, |c| {
                (c.created_at, c.idempotency_key.clone())
            })
        })
        .await
    }

    async fn list_refunds(
        &self,
        since: Option<DateTime<Utc>>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<Refund>, StoreError> {
        let after = after.map(str::to_owned);
        self.scan(move |conn| {
            REFUNDS.page(conn, since, after.as_deref(), limit, refund_from_row, |r| {
                (r.created_at, r.idempotency_key.clone())
            })
        })
        .await
    }
}

/// The provider's listings, by idempotency key (`listing.rs`).
const CHARGES: Listing = Listing {
    select: SELECT_CHARGE,
    key: "idempotency_key",
};
const REFUNDS: Listing = Listing {
    select: SELECT_REFUND,
    key: "idempotency_key",
};
