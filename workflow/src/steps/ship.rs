//! CreateShipment: one shipment per order; its stock leaves the warehouse and the order is done.

use super::reserve::lines_of;
use super::{OrderInput, attempt, failed, gateway_store_failed, load_order, store_failed};
use crate::runtime::{Step, StepOutcome, StepTask};
use async_trait::async_trait;
use serde_json::json;
use std::sync::Arc;
use store::{
    ErrorName, GatewayError, InventoryRepository, OrderRepository, OrderStatus, ShipmentRequest,
    ShippingGateway,
};

pub struct Ship {
    pub orders: Arc<dyn OrderRepository>,
    pub inventory: Arc<dyn InventoryRepository>,
    pub shipping: Arc<dyn ShippingGateway>,
}

#[async_trait]
impl Step for Ship {
    async fn run(&self, task: StepTask) -> StepOutcome {
        let input = attempt!(OrderInput::parse(&task));
        let order = attempt!(load_order(self.orders.as_ref(), &input.order_id).await);
        // A delivery that comes after the saga compensated is stale; the compensation also
        // voided the order's shipping, so the carrier would refuse it anyway.
        if matches!(
            order.status,
            OrderStatus::Compensating | OrderStatus::Cancelled | OrderStatus::CompensationFailed
        ) {
            return failed(
                ErrorName::OrderInvalid,
                format!("order is {}", order.status.as_str()),
            );
        }
        let request = ShipmentRequest {
            order_id: input.order_id.clone(),
            address: order.new.shipping_address.clone(),
            lines: lines_of(&order),
        };
        let shipment = match self.shipping.create_shipment(&request).await {
            Ok(s) => s,
            Err(GatewayError::Rejected(reason)) => {
                return failed(ErrorName::ShipmentRejected, reason);
            }
            Err(GatewayError::Unavailable(reason)) => {
                return failed(ErrorName::ShipmentUnavailable, reason);
            }
            Err(e) => return gateway_store_failed(&e),
        };
        if let Err(e) = self.inventory.mark_shipped(&input.order_id).await {
            return store_failed(&e);
        }
        if let Err(e) = self
            .orders
            .advance(&input.order_id, OrderStatus::Completed, None)
            .await
        {
            return store_failed(&e);
        }
        StepOutcome::Done(json!({
            "shipmentId": shipment.shipment_id,
            "trackingNumber": shipment.tracking_number,
        }))
    }
}
