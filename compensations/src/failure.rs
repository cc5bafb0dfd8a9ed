//! RecordCompensationFailure: the workflow gave up on a compensation; the order needs a person.

use crate::CompensationError;
use store::{Failure, OrderId, OrderRepository, OrderStatus};

pub async fn record_failure(
    orders: &dyn OrderRepository,
    order_id: &OrderId,
    failure: Failure,
) -> Result<(), CompensationError> {
    orders
        .advance(order_id, OrderStatus::CompensationFailed, Some(failure))
        .await?;
    tracing::error!(order_id = %order_id, "compensation failed; the order needs an operator");
    Ok(())
}
