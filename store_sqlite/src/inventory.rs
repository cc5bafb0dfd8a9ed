//! `InventoryRepository` on SQLite. A reservation is one write (a savepoint of the writer's
//! group transaction, which holds the write lock from its start): it checks that
//! the order has none, then takes each SKU with a conditional decrement
//! (`… WHERE available >= quantity`), and rolls everything back at the first SKU short. Since
//! the write lock is held from the first read, two orders for the last unit are serialized and
//! exactly one gets it; the `CHECK`s on the stock table back this up.
//!
//! A release that finds no reservation leaves a marker row (status `RELEASED`, no lines), so a
//! reserve that arrives late (a retried or zombie step after the compensation ran) is refused:
//! it gets `Reserved::Existing` with that empty released reservation, and takes nothing.
//! `reservation()` shows the marker the same way: `RELEASED`, no lines, stamped at the release.

use super::listing::Listing;
use super::{SqliteStore, get_json, get_ts, get_u64, now, savepoint, to_json, to_sql_u64};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension, params};
use std::collections::HashMap;
use store::domain::*;
use store::error::StoreError;
use store::ports::{InventoryRepository, Page, Released, Reserved};

fn status_str(s: ReservationStatus) -> &'static str {
    match s {
        ReservationStatus::Held => "HELD",
        ReservationStatus::Released => "RELEASED",
        ReservationStatus::Shipped => "SHIPPED",
    }
}

/// A reservation row, with the marker of a release that came first.
struct Row {
    reservation: Reservation,
    released_unreserved: bool,
}

const SELECT_RESERVATION: &str =
    "SELECT order_id, lines, status, created_at, released_unreserved FROM reservations";

fn row_from(r: &rusqlite::Row) -> rusqlite::Result<Row> {
    let order_id: String = r.get(0)?;
    let status = match r.get::<_, String>(2)?.as_str() {
        "HELD" => ReservationStatus::Held,
        "RELEASED" => ReservationStatus::Released,
        "SHIPPED" => ReservationStatus::Shipped,
        other => return Err(super::bad_column(2, format!("unknown status {other}"))),
    };
    Ok(Row {
        reservation: Reservation {
            order_id: OrderId::parse(&order_id).map_err(|e| super::bad_column(0, e))?,
            lines: get_json(r, 1)?,
            status,
            created_at: get_ts(r, 3)?,
        },
        released_unreserved: r.get(4)?,
    })
}

fn load(conn: &Connection, id: &OrderId) -> Result<Option<Row>, StoreError> {
    Ok(conn
        .prepare_cached(&format!("{SELECT_RESERVATION} WHERE order_id = ?1"))?
        .query_row([id.as_str()], row_from)
        .optional()?)
}

const SELECT_STOCK: &str =
    "SELECT sku, available, reserved, shipped, stocked, price_cents, currency FROM stock";

fn stock_from(r: &rusqlite::Row) -> rusqlite::Result<StockLevel> {
    Ok(StockLevel {
        sku: r.get(0)?,
        available: get_u64(r, 1)?,
        reserved: get_u64(r, 2)?,
        shipped: get_u64(r, 3)?,
        // Migration 6 set it on every row.
        stocked: get_u64(r, 4)?,
        price: price_from(r, 5)?,
    })
}

/// The price in columns `at` (cents) and `at + 1` (currency), when both are set.
fn price_from(r: &rusqlite::Row, at: usize) -> rusqlite::Result<Option<Price>> {
    let cents: Option<i64> = r.get(at)?;
    let currency: Option<String> = r.get(at + 1)?;
    Ok(match (cents, currency) {
        (Some(cents), Some(currency)) => Some(Price {
            cents: u64::try_from(cents).map_err(|e| super::bad_column(at, e))?,
            currency,
        }),
        _ => None,
    })
}

fn stock_level(conn: &Connection, sku: &str) -> Result<Option<StockLevel>, StoreError> {
    Ok(conn
        .prepare_cached(&format!("{SELECT_STOCK} WHERE sku = ?1"))?
        .query_row([sku], stock_from)
        .optional()?)
}

/// Moves `quantity` of each line's SKU from `reserved` to another column (`available` on a
/// release, `shipped` on shipping). Fails if the stock does not hold what the reservation says.
fn move_reserved(conn: &Connection, res: &Reservation, to_column: &str) -> Result<(), StoreError> {
    let sql = format!(
        "UPDATE stock SET reserved = reserved - ?2, {to_column} = {to_column} + ?2 \
         WHERE sku = ?1 AND reserved >= ?2"
    );
    let mut stmt = conn.prepare_cached(&sql)?;
    for (sku, quantity) in quantities_per_sku(&res.lines) {
        if stmt.execute(params![sku, to_sql_u64(quantity, "quantity")?])? != 1 {
            return Err(StoreError::Internal(format!(
                "stock of {sku} does not hold the reservation of order {}",
                res.order_id
            )));
        }
    }
    Ok(())
}

fn set_status(
    conn: &Connection,
    id: &OrderId,
    status: ReservationStatus,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "UPDATE reservations SET status = ?2, updated_at = ?3 WHERE order_id = ?1",
    )?
    .execute(params![id.as_str(), status_str(status), now()])?;
    Ok(())
}

#[async_trait]
impl InventoryRepository for SqliteStore {
    async fn set_stock(
        &self,
        sku: &str,
        available: Option<u64>,
        price: Option<&Price>,
    ) -> Result<StockLevel, StoreError> {
        let sku = sku.to_owned();
        let count = available
            .map(|n| to_sql_u64(n, "available quantity"))
            .transpose()?;
        let cents = price.map(|p| to_sql_u64(p.cents, "price")).transpose()?;
        let currency = price.map(|p| p.currency.clone());
        self.write(move |conn| {
            let tx = savepoint(conn)?;
            // What is held or gone stays so: the count sets what is available, and the total
            // follows from it (in the same statement, so nothing moves in between). A value
            // not given keeps what the row holds.
            tx.prepare_cached(
                "INSERT INTO stock (sku, available, reserved, shipped, stocked, price_cents, \
                 currency) VALUES (?1, coalesce(?2, 0), 0, 0, coalesce(?2, 0), ?3, ?4) \
                 ON CONFLICT (sku) DO UPDATE SET \
                 available = coalesce(?2, available), \
                 stocked = coalesce(?2, available) + reserved + shipped, \
                 price_cents = coalesce(?3, price_cents), currency = coalesce(?4, currency)",
            )?
            .execute(params![sku, count, cents, currency])?;
            let level = stock_level(&tx, &sku)?
                .ok_or_else(|| StoreError::Internal(format!("stock of {sku} vanished")))?;
            tx.commit()?;
            Ok(level)
        })
        .await
    }

    async fn prices(&self, skus: &[&str]) -> Result<HashMap<String, Price>, StoreError> {
        let skus: Vec<String> = skus.iter().map(|s| (*s).to_owned()).collect();
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT sku, price_cents, currency FROM stock WHERE sku = ?1 \
                 AND price_cents IS NOT NULL",
            )?;
            let mut found = HashMap::new();
            for sku in &skus {
                if found.contains_key(sku) {
                    continue;
                }
                let row = stmt
                    .query_row([sku], |r| Ok((r.get::<_, String>(0)?, price_from(r, 1)?)))
                    .optional()?;
                if let Some((sku, Some(price))) = row {
                    found.insert(sku, price);
                }
            }
            Ok(found)
        })
        .await
    }

    async fn stock(&self, sku: &str) -> Result<Option<StockLevel>, StoreError> {
        let sku = sku.to_owned();
        self.read(move |conn| stock_level(conn, &sku)).await
    }

    async fn reserve(
        &self,
        order_id: &OrderId,
        lines: &[ReservedLine],
    ) -> Result<Reserved, StoreError> {
        let id = order_id.clone();
        let lines = lines.to_vec();
        let lines_json = to_json(&lines)?;
        self.write(move |conn| {
            let tx = savepoint(conn)?;
            if let Some(row) = load(&tx, &id)? {
                return Ok(Reserved::Existing(row.reservation));
            }
            {
                let mut take = tx.prepare_cached(
                    "UPDATE stock SET available = available - ?2, reserved = reserved + ?2 \
                     WHERE sku = ?1 AND available >= ?2",
                )?;
                for (sku, quantity) in quantities_per_sku(&lines) {
                    if take.execute(params![sku, to_sql_u64(quantity, "quantity")?])? == 0 {
                        let available = stock_level(&tx, sku)?.map_or(0, |s| s.available);
                        // Returning drops `tx`, which rolls back the SKUs taken so far.
                        return Ok(Reserved::OutOfStock {
                            sku: sku.to_owned(),
                            requested: u32::try_from(quantity).unwrap_or(u32::MAX),
                            available,
                        });
                    }
                }
            }
            let created_at = chrono::Utc::now();
            let stamp = super::ts(created_at);
            tx.prepare_cached(
                "INSERT INTO reservations (order_id, lines, status, created_at, updated_at) \
                 VALUES (?1, ?2, ?3, ?4, ?4)",
            )?
            .execute(params![
                id.as_str(),
                lines_json,
                status_str(ReservationStatus::Held),
                stamp
            ])?;
            tx.commit()?;
            Ok(Reserved::New(Reservation {
                order_id: id,
                lines,
                status: ReservationStatus::Held,
                // Read back from the text form so the value equals what `reservation()` returns.
                created_at: super::parse_ts(0, &stamp)?,
            }))
        })
        .await
    }

    async fn release(&self, order_id: &OrderId) -> Result<Released, StoreError> {
        let id = order_id.clone();
        self.write(move |conn| {
            let tx = savepoint(conn)?;
            let outcome = match load(&tx, &id)? {
                None => {
                    let stamp = now();
                    tx.prepare_cached(
                        "INSERT INTO reservations \
                         (order_id, lines, status, released_unreserved, created_at, updated_at) \
                         VALUES (?1, '[]', ?2, 1, ?3, ?3)",
                    )?
                    .execute(params![
                        id.as_str(),
                        status_str(ReservationStatus::Released),
                        stamp
                    ])?;
                    Released::NothingReserved
                }
                Some(row) if row.released_unreserved => return Ok(Released::NothingReserved),
                Some(Row { reservation, .. }) => match reservation.status {
                    ReservationStatus::Released => return Ok(Released::Already(reservation)),
                    ReservationStatus::Shipped => return Ok(Released::Shipped(reservation)),
                    ReservationStatus::Held => {
                        move_reserved(&tx, &reservation, "available")?;
                        set_status(&tx, &id, ReservationStatus::Released)?;
                        Released::Now(Reservation {
                            status: ReservationStatus::Released,
                            ..reservation
                        })
                    }
                },
            };
            tx.commit()?;
            Ok(outcome)
        })
        .await
    }

    async fn mark_shipped(&self, order_id: &OrderId) -> Result<Reservation, StoreError> {
        let id = order_id.clone();
        self.write(move |conn| {
            let tx = savepoint(conn)?;
            let Some(row) = load(&tx, &id)? else {
                return Err(StoreError::NotFound(format!("reservation of order {id}")));
            };
            let reservation = row.reservation;
            match reservation.status {
                ReservationStatus::Shipped => Ok(reservation),
                ReservationStatus::Released => Err(StoreError::NotFound(format!(
                    "held reservation of order {id} (it was released)"
                ))),
                ReservationStatus::Held => {
                    move_reserved(&tx, &reservation, "shipped")?;
                    set_status(&tx, &id, ReservationStatus::Shipped)?;
                    tx.commit()?;
                    Ok(Reservation {
                        status: ReservationStatus::Shipped,
                        ..reservation
                    })
                }
            }
        })
        .await
    }

    async fn reservation(&self, order_id: &OrderId) -> Result<Option<Reservation>, StoreError> {
        let id = order_id.clone();
        self.read(move |conn| Ok(load(conn, &id)?.map(|row| row.reservation)))
            .await
    }

    /// Keyset pagination by SKU: the cursor is the last SKU of the page.
    async fn list_stock(
        &self,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<StockLevel>, StoreError> {
        let after = after.unwrap_or_default().to_owned();
        let limit = limit.max(1);
        self.scan(move |conn| {
            let mut stmt = conn.prepare_cached(&format!(
                "{SELECT_STOCK} WHERE sku > ?1 ORDER BY sku LIMIT ?2"
            ))?;
            let rows = stmt.query_map(params![after, i64::from(limit)], stock_from)?;
            let levels = rows.collect::<Result<Vec<_>, _>>()?;
            Ok(Page::keyed(levels, limit, |s| s.sku.clone()))
        })
        .await
    }

    /// Keyset pagination (`listing.rs`): by order id, or by creation time and order id.
    async fn list_reservations(
        &self,
        since: Option<DateTime<Utc>>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<Reservation>, StoreError> {
        let after = after.map(str::to_owned);
        self.scan(move |conn| {
            let from_row = |r: &rusqlite::Row| row_from(r).map(|row| row.reservation);
            RESERVATIONS.page(conn, since, after.as_deref(), limit, from_row, |r| {
                (r.created_at, r.order_id.as_str().to_owned())
            })
        })
        .await
    }
}

const RESERVATIONS: Listing = Listing {
    select: SELECT_RESERVATION,
    key: "order_id",
};
