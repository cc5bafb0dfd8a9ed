//! RefundPayment, the last compensation: voids the order's shipping, then refunds its charge in
//! full under `refund:{orderId}`: the charge recorded on the order, or, when the charge step
//! never reported, the one the gateway finds; nothing to do when nothing was charged. The step
//! reports what was done, ends the order when it is the last, or gives up with an incident when
//! the refund cannot be made.

use crate::failure::conclude;
use crate::void_shipping::{shipped, void_shipping};
use crate::{Compensated, CompensationError, CompensationInput, failure_from};
use async_trait::async_trait;
use serde_json::json;
use step::{
    Declaration, Declared, ErrorName, Port, Step, StepContext, StepOutcome, StepTask, attempt,
    parse_input,
};
use store::{Failure, OrderId, OrderStatus, Ports, Refunded};

/// Refunds the order's charge (after voiding its shipping): the undo itself, also run by the
/// repair loop for a charge that came late.
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

pub struct RefundPayment {
    cx: StepContext,
}

impl Declared for RefundPayment {
    const DECLARATION: Declaration = Declaration {
        activity: "fulfillment-refund-payment",
        raises: &[
            ErrorName::PaymentDeclined,
            ErrorName::PaymentUnavailable,
            ErrorName::PaymentInvalid,
            ErrorName::PaymentKeyReused,
            ErrorName::ShipmentRejected,
            ErrorName::ShipmentUnavailable,
            ErrorName::ProviderMisconfigured,
        ],
        needs: &[
            Port::Orders,
            Port::Payments,
            Port::Shipping,
            Port::Inventory,
        ],
    };

    fn build(cx: &StepContext) -> Self {
        RefundPayment { cx: cx.clone() }
    }
}

#[async_trait]
impl Step for RefundPayment {
    async fn run(&self, task: StepTask) -> StepOutcome {
        let input: CompensationInput = attempt!(parse_input(&task));
        let failure = failure_from(input.failure.as_ref());
        let undone = refund(&self.cx.ports, &input.order_id, failure).await;
        let output = undone.map(|undone| match undone {
            Compensated::Undone(Refunded::Now(r) | Refunded::Already(r)) => {
                json!({"refunded": true, "refundId": r.refund_id, "amountCents": r.amount_cents})
            }
            Compensated::Undone(Refunded::NothingCharged) => {
                json!({"refunded": false, "reason": "nothing was charged"})
            }
            Compensated::Shipped(s) => shipped("refunded", &s),
        });
        conclude(&self.cx, &input, output).await
    }
}
