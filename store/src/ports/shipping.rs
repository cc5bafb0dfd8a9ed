//! The carrier.

use crate::domain::*;
use crate::error::GatewayError;
use async_trait::async_trait;

/// A shipment as the carrier is asked for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShipmentRequest {
    pub order_id: OrderId,
    pub address: Address,
    pub lines: Vec<ReservedLine>,
}

/// What voiding an order's shipping did.
#[derive(Debug, Clone, PartialEq)]
pub enum Voided {
    /// No shipment exists, and none will be created for the order from now on.
    Now,
    /// The shipment was created before: the goods have left, nothing can be voided.
    Shipped(Shipment),
}

#[async_trait]
pub trait ShippingGateway: Send + Sync {
    /// `Err(Misconfigured)` while the carrier refuses this service's settings (`/readyz` fails
    /// then); transient trouble is no ill health. Healthy by default (the sandbox).
    async fn health(&self) -> Result<(), GatewayError> {
        Ok(())
    }

    /// Creates the order's one shipment (the same order again returns it). Refused
    /// (`Rejected`) once the order's shipping was voided.
    async fn create_shipment(&self, request: &ShipmentRequest) -> Result<Shipment, GatewayError>;

    /// Voids the order's shipping, so that a shipment step still running somewhere (the workflow
    /// gave up on it and compensated) cannot ship a cancelled order. Idempotent.
    async fn void(&self, order_id: &OrderId) -> Result<Voided, GatewayError>;

    async fn shipment(&self, order_id: &OrderId) -> Result<Option<Shipment>, GatewayError>;
}
