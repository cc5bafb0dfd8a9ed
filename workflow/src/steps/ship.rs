//! CreateShipment: one shipment per order; its stock leaves the warehouse and the order is done.

use super::reserve::lines_of;
use super::{OrderInput, attempt, failed, gateway_store_failed, load_order, store_failed};
use crate::ErrorName;
use crate::workers::{Step, StepOutcome, StepTask};
use async_trait::async_trait;
use serde_json::json;
use store::{GatewayError, OrderStatus, Ports, ShipmentRequest};

pub struct CreateShipment {
    pub ports: Ports,
}

#[async_trait]
impl Step for CreateShipment {
    async fn run(&self, task: StepTask) -> StepOutcome {
        let input = attempt!(OrderInput::parse(&task));
        let order = attempt!(load_order(self.ports.orders.as_ref(), &input.order_id).await);
        // A delivery that comes after the saga compensated is stale; the compensation also
        // voided the order's shipping, so the carrier would refuse it anyway.
        if order.status.is_compensation() {
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
        let shipment = match self.ports.shipping.create_shipment(&request).await {
            Ok(s) => s,
            Err(GatewayError::Rejected(reason)) => {
                return failed(ErrorName::ShipmentRejected, reason);
            }
            Err(GatewayError::Unavailable(reason)) => {
                return failed(ErrorName::ShipmentUnavailable, reason);
            }
            Err(e) => return gateway_store_failed(&e),
        };
        if let Err(e) = self.ports.inventory.mark_shipped(&input.order_id).await {
            return store_failed(&e);
        }
        if let Err(e) = self
            .ports
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
