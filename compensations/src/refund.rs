//! RefundPayment: refunds the order's charge in full under `refund:{orderId}`; nothing to do
//! when nothing was charged.

use crate::CompensationError;
use store::{Failure, OrderId, OrderRepository, OrderStatus, PaymentGateway, Refunded};

pub async fn refund(
    orders: &dyn OrderRepository,
    payments: &dyn PaymentGateway,
    order_id: &OrderId,
    failure: Failure,
) -> Result<Refunded, CompensationError> {
    orders
        .advance(order_id, OrderStatus::Compensating, Some(failure))
        .await?;
    let refunded = payments.refund(order_id, &order_id.refund_key()).await?;
    match &refunded {
        Refunded::Now(r) => {
            tracing::info!(order_id = %order_id, refund_id = %r.refund_id, "refunded")
        }
        Refunded::Already(_) => tracing::debug!(order_id = %order_id, "refund replayed"),
        Refunded::NothingCharged => {
            tracing::info!(order_id = %order_id, "nothing was charged; no refund")
        }
    }
    Ok(refunded)
}
