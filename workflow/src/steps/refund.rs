//! RefundPayment: the last compensation (the first in definitions from before incidents). The
//! undo itself is `compensations::refund`; this step reports what was done, ends the order when
//! it is the last, or gives up with an incident when the refund cannot be made.

use super::{OrderInput, attempt, finish_if_last, give_up_or_retry, shipped};
use crate::definition::Activity;
use crate::workers::{Step, StepOutcome, StepTask};
use async_trait::async_trait;
use compensations::{Compensated, failure_from};
use serde_json::json;
use store::{Ports, Refunded};

pub struct RefundPayment {
    pub ports: Ports,
}

#[async_trait]
impl Step for RefundPayment {
    async fn run(&self, task: StepTask) -> StepOutcome {
        let input = attempt!(OrderInput::parse(&task));
        let failure = failure_from(input.failure.as_ref());
        let output = match compensations::refund(&self.ports, &input.order_id, failure).await {
            Ok(Compensated::Undone(Refunded::Now(r) | Refunded::Already(r))) => {
                json!({"refunded": true, "refundId": r.refund_id, "amountCents": r.amount_cents})
            }
            Ok(Compensated::Undone(Refunded::NothingCharged)) => {
                json!({"refunded": false, "reason": "nothing was charged"})
            }
            Ok(Compensated::Shipped(s)) => shipped("refunded", &s),
            Err(e) => {
                let state = Activity::RefundPayment.state();
                return give_up_or_retry(&self.ports, state, &input, e).await;
            }
        };
        finish_if_last(&self.ports, &input, false, output).await
    }
}
