//! The sandbox carrier: one shipment per order, with a tracking number derived from the order
//! id, and postal codes that make it refuse (`00000`) or fail once (`99999`).

use super::ledger::{Ledger, ShipmentAdded, Shipping};
use super::{POSTAL_REJECTED, POSTAL_UNAVAILABLE_ONCE, derive_id, tracking_number};
use async_trait::async_trait;
use chrono::Utc;
use store::domain::{OrderId, Shipment};
use store::error::GatewayError;
use store::ports::{ShipmentRequest, ShippingGateway, Voided};

/// The sandbox shipping gateway over a backend's ledger. Build it with
/// `new` over the store's ledger (`SqliteStore` or `DynamoStore`), or [`ports`](super::ports) for the whole bundle.
#[derive(Debug, Clone)]
pub struct SandboxShipping<L> {
    ledger: L,
}

impl<L: Ledger> SandboxShipping<L> {
    pub fn new(ledger: L) -> SandboxShipping<L> {
        SandboxShipping { ledger }
    }
}

fn voided(id: &OrderId) -> GatewayError {
    GatewayError::Rejected(format!(
        "shipping of order {id} was voided: the order was compensated"
    ))
}

#[async_trait]
impl<L: Ledger> ShippingGateway for SandboxShipping<L> {
    async fn create_shipment(&self, request: &ShipmentRequest) -> Result<Shipment, GatewayError> {
        let id = &request.order_id;
        match self.ledger.shipping(id).await? {
            // The order's shipment exists: the carrier answers with it, whatever is asked.
            Shipping::Shipped(shipment) => return Ok(shipment),
            Shipping::Voided => return Err(voided(id)),
            Shipping::Open => {}
        }
        let postal_code = request.address.postal_code.trim();
        if postal_code.is_empty() || postal_code == POSTAL_REJECTED {
            return Err(GatewayError::Rejected(format!(
                "undeliverable address: postal code {postal_code:?}"
            )));
        }
        if postal_code == POSTAL_UNAVAILABLE_ONCE
            && self.ledger.count_attempt(&format!("shipment:{id}")).await? == 1
        {
            return Err(GatewayError::Unavailable(
                "carrier unavailable (sandbox: first attempt)".to_owned(),
            ));
        }
        let shipment = Shipment {
            shipment_id: derive_id("shp_", id.as_str()),
            order_id: id.clone(),
            tracking_number: tracking_number(id.as_str()),
            created_at: Utc::now(),
        };
        match self.ledger.add_shipment(&shipment).await? {
            ShipmentAdded::New => Ok(shipment),
            ShipmentAdded::Existing(found) => Ok(found),
            ShipmentAdded::Voided => Err(voided(id)),
        }
    }

    async fn void(&self, order_id: &OrderId) -> Result<Voided, GatewayError> {
        match self.ledger.void_shipping(order_id).await? {
            Shipping::Shipped(shipment) => Ok(Voided::Shipped(shipment)),
            Shipping::Voided | Shipping::Open => Ok(Voided::Now),
        }
    }

    async fn shipment(&self, order_id: &OrderId) -> Result<Option<Shipment>, GatewayError> {
        match self.ledger.shipping(order_id).await? {
            Shipping::Shipped(shipment) => Ok(Some(shipment)),
            Shipping::Open | Shipping::Voided => Ok(None),
        }
    }
}
