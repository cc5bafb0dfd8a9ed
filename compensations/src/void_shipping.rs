//! The fence every compensation starts with: void the order's shipping. When a shipment had
//! already been made (a shipment step the workflow gave up on had in fact shipped), the order
//! completed in the world: nothing is undone, its stock counts as shipped and it stays (or
//! becomes) `COMPLETED`, whatever the execution's end says.

use crate::CompensationError;
use serde_json::{Value, json};
use store::{OrderId, OrderStatus, Ports, Shipment, Voided};

/// `Some(shipment)` when the order had shipped; otherwise no shipment can be made any more.
pub async fn void_shipping(
    ports: &Ports,
    order_id: &OrderId,
) -> Result<Option<Shipment>, CompensationError> {
    match ports
        .shipping
        .void(order_id)
        .await
        .map_err(CompensationError::Shipping)?
    {
        Voided::Now => Ok(None),
        Voided::Shipped(shipment) => {
            ports.inventory.mark_shipped(order_id).await?;
            ports
                .orders
                .advance(order_id, OrderStatus::Completed, None)
                .await?;
            tracing::warn!(
                order_id = %order_id,
                shipment_id = %shipment.shipment_id,
                "compensation found the order shipped; nothing is undone"
            );
            Ok(Some(shipment))
        }
    }
}

/// A compensation's output when the order turned out to have shipped: nothing was undone.
pub(crate) fn shipped(key: &str, shipment: &Shipment) -> Value {
    json!({ key: false, "reason": "the order had shipped; nothing is undone", "shipmentId": shipment.shipment_id })
}
