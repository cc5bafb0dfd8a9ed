//! How a compensation run ends: the order `CANCELLED` when the last undo is done, or marked for
//! a person when one gives up; and what a compensation step reports in each case.

use crate::{CompensationError, CompensationInput, failure_from};
use serde_json::{Value, json};
use step::{
    ErrorName, PAYMENT_ERRORS, SHIPPING_ERRORS, StepContext, StepOutcome, gateway_failed,
    store_failed,
};
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

/// A compensation's failure as the step's outcome, named by whose failure it is.
pub(crate) fn compensation_failed(e: CompensationError) -> StepOutcome {
    match e {
        CompensationError::Store(e) => store_failed(&e),
        CompensationError::Payment(e) => gateway_failed(e, PAYMENT_ERRORS),
        CompensationError::Shipping(e) => gateway_failed(e, SHIPPING_ERRORS),
    }
}

/// A compensation step that could not finish. The definition retries transient errors; a
/// permanent one, or a transient one on the state's last attempt, first records the incident
/// on the order (the execution then fails at this state, where a redrive resumes). A
/// misconfigured provider is the operator's to fix and is retried for days: it records none
/// (when even those retries run out, the repair loop finds the failed execution). When the
/// incident cannot be recorded, the store's failure is reported instead, and retried.
async fn give_up_or_retry(
    cx: &StepContext,
    input: &CompensationInput,
    e: CompensationError,
) -> StepOutcome {
    let outcome = compensation_failed(e);
    let StepOutcome::Failed { error, cause } = &outcome else {
        return outcome;
    };
    let last = match ErrorName::parse(error) {
        Some(ErrorName::ProviderMisconfigured) => false,
        Some(n) if n.is_transient() => input.attempt >= cx.transient_retries,
        _ => true,
    };
    if !last {
        return outcome;
    }
    let incident = Incident {
        step: cx.state.to_owned(),
        error: error.clone(),
        cause: cause.clone(),
        attempts: input.attempt.saturating_add(1),
        since: chrono::Utc::now(),
    };
    let failure = failure_from(input.failure.as_ref());
    match give_up(
        cx.ports.orders.as_ref(),
        &input.order_id,
        &incident,
        failure,
    )
    .await
    {
        Ok(order) => {
            cx.saga_ended(&order);
            outcome
        }
        Err(e) => compensation_failed(e),
    }
}

/// How a compensation step reports its undo: the output when it was done (and the order ended
/// when the step is the last), or the failure, given up on or left to the definition's retries.
pub(crate) async fn conclude(
    cx: &StepContext,
    input: &CompensationInput,
    undone: Result<Value, CompensationError>,
) -> StepOutcome {
    match undone {
        Ok(output) => finish_if_last(cx, input, output).await,
        Err(e) => give_up_or_retry(cx, input, e).await,
    }
}

/// Ends a compensation run when `input` says this step is the last: the order `CANCELLED`, and
/// the failure that started the compensation handed to the `Fail` state that ends the saga (a
/// cause filled in when the failure had none, e.g. a timeout's).
async fn finish_if_last(
    cx: &StepContext,
    input: &CompensationInput,
    mut output: Value,
) -> StepOutcome {
    if !input.finishes_order {
        return StepOutcome::Done(output);
    }
    let failure = failure_from(input.failure.as_ref());
    let (error, cause) = (failure.error.clone(), failure.cause.clone());
    match cancel(cx.ports.orders.as_ref(), &input.order_id, failure).await {
        // `CANCELLED`, or `COMPLETED` when the compensation found the order shipped.
        Ok(order) => cx.saga_ended(&order),
        Err(e) => return compensation_failed(e),
    }
    output["error"] = json!(error);
    output["cause"] = json!(cause);
    StepOutcome::Done(output)
}
