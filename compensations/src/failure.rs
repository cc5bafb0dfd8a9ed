//! How a compensation run ends: the order `CANCELLED` when the last undo is done, or marked for
//! a person when one gives up.

use crate::CompensationError;
use store::{Failure, Incident, Order, OrderId, OrderRepository, OrderStatus};

/// The last compensation is done: the order ends `CANCELLED`, with the failure that started the
/// compensation (kept when one was recorded before), and any incident closed.
pub async fn cancel(
    orders: &dyn OrderRepository,
    order_id: &OrderId,
    failure: Failure,
) -> Result<Order, CompensationError> {
    Ok(orders
        .advance(order_id, OrderStatus::Cancelled, Some(failure))
        .await?)
}

/// A compensation gave up: the order is `COMPENSATION_FAILED` with the incident (which step,
/// what error, how many attempts), for an operator to redrive or resolve.
pub async fn give_up(
    orders: &dyn OrderRepository,
    order_id: &OrderId,
    incident: &Incident,
    failure: Failure,
) -> Result<Order, CompensationError> {
    let order = orders
        .record_incident(order_id, incident, Some(failure))
        .await?;
    tracing::error!(
        order_id = %order_id,
        step = %incident.step,
        error = %incident.error,
        cause = %incident.cause,
        attempts = incident.attempts,
        "a compensation gave up; the order needs an operator (GET /incidents)"
    );
    Ok(order)
}
