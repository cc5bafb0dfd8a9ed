//! ReleaseInventory, the first compensation: returns the order's held stock (after voiding its
//! shipping); nothing to do when nothing was reserved. The order is `COMPENSATING` afterwards,
//! with the failure that started it; the last compensation ends it ([`crate::cancel`]). The
//! step reports what was done, ends the order when it is the last, or gives up with an
//! incident.

use crate::failure::conclude;
use crate::void_shipping::{shipped, void_shipping};
use crate::{Compensated, CompensationError, CompensationInput, failure_from};
use async_trait::async_trait;
use serde_json::json;
use step::{
    Declaration, Declared, ErrorName, Port, Step, StepContext, StepOutcome, StepTask, attempt,
    parse_input,
};
use store::{Failure, OrderId, OrderStatus, Ports, Released};

/// Returns the order's stock (after voiding its shipping): the undo itself, also run by the
/// repair loop for the stock of a finished order.
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

pub struct ReleaseInventory {
    cx: StepContext,
}

impl Declared for ReleaseInventory {
    const DECLARATION: Declaration = Declaration {
        activity: "fulfillment-release-inventory",
        raises: &[
            ErrorName::ShipmentRejected,
            ErrorName::ShipmentUnavailable,
            ErrorName::ProviderMisconfigured,
        ],
        needs: &[Port::Orders, Port::Inventory, Port::Shipping],
    };

    fn build(cx: &StepContext) -> Self {
        ReleaseInventory { cx: cx.clone() }
    }
}

#[async_trait]
impl Step for ReleaseInventory {
    async fn run(&self, task: StepTask) -> StepOutcome {
        let input: CompensationInput = attempt!(parse_input(&task));
        let failure = failure_from(input.failure.as_ref());
        let undone = release(&self.cx.ports, &input.order_id, failure).await;
        let output = undone.map(|undone| match undone {
            Compensated::Undone(Released::Now(_) | Released::Already(_)) => {
                json!({"released": true})
            }
            Compensated::Undone(Released::NothingReserved) => {
                json!({"released": false, "reason": "nothing was reserved"})
            }
            Compensated::Undone(Released::Shipped(_)) => {
                json!({"released": false, "reason": "already shipped"})
            }
            Compensated::Shipped(s) => shipped("released", &s),
        });
        conclude(&self.cx, &input, output).await
    }
}
