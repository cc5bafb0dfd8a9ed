//! ReleaseInventory: returns the order's held stock; nothing to do when nothing was reserved.
//! The order is `COMPENSATING` afterwards, with the failure that started it; the last
//! compensation ends it ([`crate::cancel`]).

use crate::void_shipping::void_shipping;
use crate::{Compensated, CompensationError};
use store::{Failure, OrderId, OrderStatus, Ports, Released};

pub async fn release(
    ports: &Ports,
    order_id: &OrderId,
    failure: Failure,
) -> Result<Compensated<Released>, CompensationError> {
    // Again, in case a shipment slipped in since the refund voided shipping (it cannot: the
    // void is recorded; this keeps release safe on its own).
    if let Some(shipment) = void_shipping(ports, order_id).await? {
        return Ok(Compensated::Shipped(shipment));
    }
    ports
        .orders
        .advance(order_id, OrderStatus::Compensating, Some(failure))
        .await?;
    let released = ports.inventory.release(order_id).await?;
    match &released {
        Released::Now(_) => tracing::info!(order_id = %order_id, "stock released"),
        Released::Already(_) => tracing::debug!(order_id = %order_id, "release replayed"),
        Released::NothingReserved => {
            tracing::info!(order_id = %order_id, "nothing was reserved; no release")
        }
        Released::Shipped(_) => {
            tracing::warn!(order_id = %order_id, "stock already shipped; not released")
        }
    }
    Ok(Compensated::Undone(released))
}
