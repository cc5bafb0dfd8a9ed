//! RefundPayment: voids the order's shipping, then refunds its charge in full under
//! `refund:{orderId}`: the charge recorded on the order, or, when the charge step never reported,
//! the one the gateway finds; nothing to do when nothing was charged.

use crate::void_shipping::void_shipping;
use crate::{Compensated, CompensationError};
use store::{Failure, OrderId, OrderStatus, Ports, Refunded};

pub async fn refund(
    ports: &Ports,
    order_id: &OrderId,
    failure: Failure,
) -> Result<Compensated<Refunded>, CompensationError> {
    if let Some(shipment) = void_shipping(ports, order_id).await? {
        return Ok(Compensated::Shipped(shipment));
    }
    let order = ports
        .orders
        .advance(order_id, OrderStatus::Compensating, Some(failure))
        .await?;
    if order.charge_id.is_none() {
        tracing::debug!(order_id = %order_id, "no charge recorded; the gateway looks for one");
    }
    let refunded = ports
        .payments
        .refund(order_id, order.charge_id.as_deref(), &order_id.refund_key())
        .await
        .map_err(CompensationError::Payment)?;
    match &refunded {
        Refunded::Now(r) => {
            tracing::info!(order_id = %order_id, refund_id = %r.refund_id, "refunded");
            ports.orders.record_refund(order_id, r).await?;
        }
        Refunded::Already(r) => {
            tracing::debug!(order_id = %order_id, "refund replayed");
            // The answer that made it may have been lost before it was recorded.
            ports.orders.record_refund(order_id, r).await?;
        }
        Refunded::NothingCharged => {
            tracing::info!(order_id = %order_id, "nothing was charged; no refund")
        }
    }
    Ok(Compensated::Undone(refunded))
}
