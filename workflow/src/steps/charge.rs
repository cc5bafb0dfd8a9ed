//! ChargePayment: one charge per order, under the idempotency key `charge:{orderId}`, its id and
//! time recorded on the order for the refund and the status view. A delivery that finds the
//! saga already compensating the order (a stale worker's) charges nothing: a charge made then
//! would come after the refund that was to undo it.

use async_trait::async_trait;
use serde_json::json;
use step::{
    Declaration, Declared, ErrorName, OrderInput, PAYMENT_ERRORS, Port, Step, StepContext,
    StepOutcome, StepTask, attempt, cancelled, failed, gateway_failed, load_order, store_failed,
};
use store::{ChargeRequest, OrderStatus, Ports};

pub struct ChargePayment {
    pub ports: Ports,
}

impl Declared for ChargePayment {
    const DECLARATION: Declaration = Declaration {
        activity: "fulfillment-charge-payment",
        raises: &[
            ErrorName::PaymentDeclined,
            ErrorName::PaymentUnavailable,
            ErrorName::PaymentInvalid,
            ErrorName::PaymentKeyReused,
            ErrorName::ProviderMisconfigured,
            ErrorName::OrderCancelled,
        ],
        needs: &[Port::Orders, Port::Payments],
    };

    fn build(cx: &StepContext) -> Self {
        ChargePayment {
            ports: cx.ports.clone(),
        }
    }
}

#[async_trait]
impl Step for ChargePayment {
    async fn run(&self, task: StepTask) -> StepOutcome {
        let input = attempt!(OrderInput::parse(&task));
        let order = attempt!(load_order(self.ports.orders.as_ref(), &input.order_id).await);
        if order.status.is_compensation() {
            return failed(
                ErrorName::OrderInvalid,
                format!("order is {}; nothing is charged", order.status.as_str()),
            );
        }
        if let Some(outcome) = cancelled(&order) {
            return outcome;
        }
        let request = ChargeRequest::for_order(&order);
        let charge = match self.ports.payments.charge(&request).await {
            Ok(charge) => charge,
            Err(e) => return gateway_failed(e, PAYMENT_ERRORS),
        };
        // Recorded before success is reported (a retry that replays the charge records it too),
        // so the refund goes by the id instead of a lookup the provider may answer late, and the
        // status view shows the charge (its id and time; amount and currency are the order's,
        // charged above) without asking the provider at all.
        if let Err(e) = self
            .ports
            .orders
            .record_charge(&input.order_id, &charge)
            .await
        {
            return store_failed(&e);
        }
        if let Err(e) = self
            .ports
            .orders
            .advance(&input.order_id, OrderStatus::Charged, None)
            .await
        {
            return store_failed(&e);
        }
        StepOutcome::Done(json!({
            "chargeId": charge.charge_id,
            "amountCents": charge.amount_cents,
            "currency": charge.currency,
        }))
    }
}
