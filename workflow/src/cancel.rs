//! Cancelling an order: a request recorded on the order, never `StopExecution` (on AWS that ends
//! the execution without running its Catch, so nothing would be refunded or released). The
//! saga's next step sees the request before it acts and fails with `Order.Cancelled`; the
//! definition's Catch runs the same compensations as for any failure, and the order ends
//! `CANCELLED` with the request's cause. An order parked for an operator has its token failed
//! at once. The shipment step marks its start on the order before it asks the carrier (the
//! point of no return): of a cancel and a shipment, the first recorded wins, and the other is
//! refused.

use crate::ErrorName;
use crate::port::{WorkflowError, WorkflowPort};
use crate::steps::approval::DecideError;
use store::{
    CancelRequested, Cancellation, Failure, Order, OrderId, OrderRepository, OrderStatus,
    StoreError,
};

/// What a cancel request came to.
#[derive(Debug, Clone, PartialEq)]
pub enum CancelResult {
    /// Recorded now: the saga undoes the order.
    Accepted(Order),
    /// The order's cancellation was recorded before: the same answer again.
    Replayed(Order),
    /// The order shipped, or its shipment began: it can no longer be cancelled.
    TooLate(Order),
    /// The order is already being undone, or ended so, for another reason.
    Ended(Order),
    NotFound,
}

/// Records the cancellation of order `id` and, when it was parked for an operator, fails its
/// approval token with `Order.Cancelled` and moves the order to `COMPENSATING` at once. A dead
/// token is fine: the task the engine re-issues finds the cancellation and fails.
pub async fn cancel(
    orders: &dyn OrderRepository,
    workflow: &dyn WorkflowPort,
    id: &OrderId,
    request: &Cancellation,
) -> Result<CancelResult, DecideError> {
    // The conditional write reads the order itself: an unknown one is its `NotFound`.
    let (order, token) = match orders.request_cancel(id, request).await {
        Ok(CancelRequested::Recorded { order, task_token }) => (order, task_token),
        Ok(CancelRequested::Replayed(o)) => return Ok(CancelResult::Replayed(o)),
        Ok(CancelRequested::TooLate(o)) => return Ok(CancelResult::TooLate(o)),
        Ok(CancelRequested::Ended(o)) => return Ok(CancelResult::Ended(o)),
        Err(StoreError::NotFound(_)) => return Ok(CancelResult::NotFound),
        Err(e) => return Err(e.into()),
    };
    let Some(token) = token else {
        return Ok(CancelResult::Accepted(order));
    };
    let cause = request.cause();
    match workflow
        .send_task_failure(&token, ErrorName::OrderCancelled.as_str(), &cause)
        .await
    {
        Ok(()) => {}
        Err(WorkflowError::TaskTimedOut(_) | WorkflowError::InvalidToken(_)) => {
            tracing::info!(order_id = %id, "the approval's token is dead; its re-issued task sees the cancellation");
        }
        Err(e) => return Err(e.into()),
    }
    let failure = Failure {
        error: ErrorName::OrderCancelled.as_str().to_owned(),
        cause,
    };
    let order = orders
        .advance(id, OrderStatus::Compensating, Some(failure))
        .await?;
    Ok(CancelResult::Accepted(order))
}
