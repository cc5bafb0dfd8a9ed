//! The sandbox carrier: one shipment per order, with a tracking number derived from the order
//! id, and postal codes that make it refuse (`00000`) or fail once (`99999`).

use super::{POSTAL_REJECTED, POSTAL_UNAVAILABLE_ONCE, bump_attempt, derive_id, tracking_number};
use crate::domain::{OrderId, Shipment};
use crate::error::{GatewayError, StoreError};
use crate::ports::{ShipmentRequest, ShippingGateway, Voided};
use crate::sqlite::{SqliteStore, get_ts, immediate, now, parse_ts};
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

/// The sandbox shipping gateway. Build it with [`SqliteStore::shipping`].
#[derive(Debug, Clone)]
pub struct SandboxShipping {
    store: SqliteStore,
}

impl SandboxShipping {
    pub fn new(store: SqliteStore) -> SandboxShipping {
        SandboxShipping { store }
    }
}

fn load(conn: &Connection, id: &OrderId) -> rusqlite::Result<Option<Shipment>> {
    conn.prepare_cached(
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
    .optional()
}

fn void_key(id: &OrderId) -> String {
    format!("void-shipping:{id}")
}

fn voided(conn: &Connection, id: &OrderId) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT 1 FROM sandbox_attempts WHERE key = ?1")?
        .query_row([void_key(id)], |_| Ok(()))
        .optional()
        .map(|found| found.is_some())
}

#[async_trait]
impl ShippingGateway for SandboxShipping {
    async fn create_shipment(&self, request: &ShipmentRequest) -> Result<Shipment, GatewayError> {
        let id = request.order_id.clone();
        let postal_code = request.address.postal_code.trim().to_owned();
        self.store
            .write(
                move |conn| -> Result<Result<Shipment, GatewayError>, StoreError> {
                    let tx = immediate(conn)?;
                    // The order's shipment exists: the carrier answers with it, whatever is asked.
                    if let Some(shipment) = load(&tx, &id)? {
                        return Ok(Ok(shipment));
                    }
                    if voided(&tx, &id)? {
                        return Ok(Err(GatewayError::Rejected(format!(
                            "shipping of order {id} was voided: the order was compensated"
                        ))));
                    }
                    if postal_code.is_empty() || postal_code == POSTAL_REJECTED {
                        return Ok(Err(GatewayError::Rejected(format!(
                            "undeliverable address: postal code {postal_code:?}"
                        ))));
                    }
                    if postal_code == POSTAL_UNAVAILABLE_ONCE
                        && bump_attempt(&tx, &format!("shipment:{id}"))? == 1
                    {
                        tx.commit()?;
                        return Ok(Err(GatewayError::Unavailable(
                            "carrier unavailable (sandbox: first attempt)".to_owned(),
                        )));
                    }
                    let stamp = now();
                    let shipment = Shipment {
                        shipment_id: derive_id("shp_", id.as_str()),
                        tracking_number: tracking_number(id.as_str()),
                        created_at: parse_ts(0, &stamp)?,
                        order_id: id,
                    };
                    tx.prepare_cached(
                        "INSERT INTO sandbox_shipments (order_id, shipment_id, tracking_number, \
                     created_at) VALUES (?1, ?2, ?3, ?4)",
                    )?
                    .execute(params![
                        shipment.order_id.as_str(),
                        shipment.shipment_id,
                        shipment.tracking_number,
                        stamp
                    ])?;
                    tx.commit()?;
                    Ok(Ok(shipment))
                },
            )
            .await?
    }

    async fn void(&self, order_id: &OrderId) -> Result<Voided, GatewayError> {
        let id = order_id.clone();
        let voided = self
            .store
            .write(move |conn| -> Result<Voided, StoreError> {
                let tx = immediate(conn)?;
                if let Some(shipment) = load(&tx, &id)? {
                    return Ok(Voided::Shipped(shipment));
                }
                if !voided(&tx, &id)? {
                    bump_attempt(&tx, &void_key(&id))?;
                }
                tx.commit()?;
                Ok(Voided::Now)
            })
            .await?;
        Ok(voided)
    }

    async fn shipment(&self, order_id: &OrderId) -> Result<Option<Shipment>, GatewayError> {
        let id = order_id.clone();
        Ok(self.store.read(move |conn| Ok(load(conn, &id)?)).await?)
    }
}
