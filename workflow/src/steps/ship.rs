//! CreateShipment: one shipment per order; its stock leaves the warehouse and the order is done.

use super::reserve::lines_of;
use async_trait::async_trait;
use serde_json::json;
use step::{
    Declaration, Declared, ErrorName, OrderInput, Port, SHIPPING_ERRORS, Step, StepContext,
    StepOutcome, StepTask, attempt, cancelled, failed, gateway_failed, store_failed,
};
use store::{OrderStatus, ShipmentRequest};

pub struct CreateShipment {
    cx: StepContext,
}

impl Declared for CreateShipment {
    const DECLARATION: Declaration = Declaration {
        activity: "fulfillment-create-shipment",
        raises: &[
            ErrorName::ShipmentRejected,
            ErrorName::ShipmentUnavailable,
            ErrorName::PaymentKeyReused,
            ErrorName::ProviderMisconfigured,
            ErrorName::OrderCancelled,
        ],
        needs: &[Port::Orders, Port::Inventory, Port::Shipping],
    };

    fn build(cx: &StepContext) -> Self {
CreateShipment { cx: cx.clone() }
    }
}

#[async_trait]
impl Step for CreateShipment {
    async fn run(&self, task: StepTask) -> StepOutcome {
        let input = attempt!(OrderInput::parse(&task));
        // The point of no return, marked before the carrier is asked: from here on a
        // cancellation is refused; one recorded first stops the shipment.
        let order = match self
            .cx
            .ports
            .orders
            .start_shipment(&input.order_id, chrono::Utc::now())
            .await
        {
            Ok(order) => order,
            Err(store::StoreError::NotFound(what)) => {
                return failed(ErrorName::OrderInvalid, format!("{what} does not exist"));
            }
            Err(e) => return store_failed(&e),
        };
        if order.shipping_started_at.is_none()
            && let Some(outcome) = cancelled(&order)
        {
            return outcome;
        }
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
        let shipment = match self.cx.ports.shipping.create_shipment(&request).await {
            Ok(s) => s,
            Err(e) => return gateway_failed(e, SHIPPING_ERRORS),
        };
        if let Err(e) = self.cx.ports.inventory.mark_shipped(&input.order_id).await {
            return store_failed(&e);
        }
        match self
            .cx
            .ports
            .orders
            .advance(&input.order_id, OrderStatus::Completed, None)
            .await
        {
            Ok(order) => self.cx.saga_ended(&order),
            Err(e) => return store_failed(&e),
        }
        StepOutcome::Done(json!({
            "shipmentId": shipment.shipment_id,
            "trackingNumber": shipment.tracking_number,
        }))
    }
}
