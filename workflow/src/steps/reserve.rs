//! ReserveInventory: every line of the order or none, once per order.

use async_trait::async_trait;
use serde_json::json;
use std::collections::BTreeMap;
use step::{
    Declaration, Declared, ErrorName, OrderInput, Port, Step, StepContext, StepOutcome, StepTask,
    attempt, cancelled, failed, load_order, store_failed,
};
use store::{OrderStatus, Ports, ReservationStatus, Reserved, ReservedLine};

pub struct ReserveInventory {
    pub ports: Ports,
}

impl Declared for ReserveInventory {
    const DECLARATION: Declaration = Declaration {
        activity: "fulfillment-reserve-inventory",
        raises: &[
            ErrorName::InventoryOutOfStock,
            ErrorName::OrderCancelled,
        ],
        needs: &[Port::Orders, Port::Inventory],
    };

    fn build(cx: &StepContext) -> Self {
        ReserveInventory {
            ports: cx.ports.clone(),
        }
    }
}

/// The order's lines by SKU (an order may name a SKU twice).
pub fn lines_of(order: &store::Order) -> Vec<ReservedLine> {
    let mut by_sku: BTreeMap<&str, u64> = BTreeMap::new();
    for item in &order.new.items {
        *by_sku.entry(item.sku.as_str()).or_default() += u64::from(item.quantity);
    }
    by_sku
        .into_iter()
        .map(|(sku, quantity)| ReservedLine {
            sku: sku.to_owned(),
            quantity: quantity.min(u64::from(u32::MAX)) as u32,
        })
        .collect()
}

#[async_trait]
impl Step for ReserveInventory {
    async fn run(&self, task: StepTask) -> StepOutcome {
        let input = attempt!(OrderInput::parse(&task));
        let order = attempt!(load_order(self.ports.orders.as_ref(), &input.order_id).await);
        if let Some(outcome) = cancelled(&order) {
            return outcome;
        }
        let reservation = match self
            .ports
            .inventory
            .reserve(&input.order_id, &lines_of(&order))
            .await
        {
            Err(e) => return store_failed(&e),
            Ok(Reserved::OutOfStock {
                sku,
                requested,
                available,
            }) => {
                return failed(
                    ErrorName::InventoryOutOfStock,
                    format!("SKU {sku}: {requested} requested, {available} available"),
                );
            }
            Ok(Reserved::New(r) | Reserved::Existing(r)) => r,
        };
        if reservation.status == ReservationStatus::Released {
            // The saga already compensated this order: this delivery is stale.
            return failed(
                ErrorName::OrderInvalid,
                "the order's reservation was already released",
            );
        }
        if let Err(e) = self
            .ports
            .orders
            .advance(&input.order_id, OrderStatus::Reserved, None)
            .await
        {
            return store_failed(&e);
        }
        StepOutcome::Done(json!({ "lines": reservation.lines, "status": reservation.status }))
    }
}
