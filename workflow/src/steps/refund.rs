//! RefundPayment: the first compensation. The undo itself is `compensations::refund`; this
//! step reads the task's input and reports what was done, or the error name to retry or catch.

use super::{OrderInput, attempt, compensation_failed, shipped};
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
        match compensations::refund(&self.ports, &input.order_id, failure).await {
            Ok(Compensated::Undone(Refunded::Now(r) | Refunded::Already(r))) => StepOutcome::Done(
                json!({"refunded": true, "refundId": r.refund_id, "amountCents": r.amount_cents}),
            ),
            Ok(Compensated::Undone(Refunded::NothingCharged)) => {
                StepOutcome::Done(json!({"refunded": false, "reason": "nothing was charged"}))
            }
            Ok(Compensated::Shipped(s)) => StepOutcome::Done(shipped("refunded", &s)),
            Err(e) => compensation_failed(&e),
        }
    }
}
