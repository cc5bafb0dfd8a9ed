//! ReleaseInventory: returns the order's held stock; nothing to do when nothing was reserved.
//! It is the last compensation, so the order ends `CANCELLED` with the failure that started it.

use crate::CompensationError;
use store::{Failure, InventoryRepository, OrderId, OrderRepository, OrderStatus, Released};

pub async fn release(
    orders: &dyn OrderRepository,
    inventory: &dyn InventoryRepository,
    order_id: &OrderId,
    failure: Failure,
) -> Result<Released, CompensationError> {
    let released = inventory.release(order_id).await?;
    orders
        .advance(order_id, OrderStatus::Cancelled, Some(failure))
        .await?;
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
    Ok(released)
}
