//! The compensations as workflow steps: input parsing and error names around the
//! `compensations` crate, which knows nothing of workflows.

use async_trait::async_trait;
use compensations::{CompensationError, failure_from};
use serde_json::json;
use std::sync::Arc;
use store::{ErrorName, InventoryRepository, OrderRepository, PaymentGateway, Refunded, Released};
use workflow::steps::{OrderInput, failed};
use workflow::{Step, StepOutcome, StepTask};

fn compensation_failed(e: &CompensationError) -> StepOutcome {
    let name = if e.is_transient() {
        ErrorName::StoreUnavailable
    } else {
        ErrorName::StepFailed
    };
    failed(name, e.to_string())
}

pub struct RefundStep {
    pub orders: Arc<dyn OrderRepository>,
    pub payments: Arc<dyn PaymentGateway>,
}

#[async_trait]
impl Step for RefundStep {
    async fn run(&self, task: StepTask) -> StepOutcome {
        let input = match OrderInput::parse(&task) {
            Ok(i) => i,
            Err(outcome) => return outcome,
        };
        let failure = failure_from(input.failure.as_ref());
        match compensations::refund(
            self.orders.as_ref(),
            self.payments.as_ref(),
            &input.order_id,
            failure,
        )
        .await
        {
            Ok(Refunded::Now(r) | Refunded::Already(r)) => StepOutcome::Done(
                json!({"refunded": true, "refundId": r.refund_id, "amountCents": r.amount_cents}),
            ),
            Ok(Refunded::NothingCharged) => {
                StepOutcome::Done(json!({"refunded": false, "reason": "nothing was charged"}))
            }
            Err(e) => compensation_failed(&e),
        }
    }
}

pub struct ReleaseStep {
    pub orders: Arc<dyn OrderRepository>,
    pub inventory: Arc<dyn InventoryRepository>,
}

#[async_trait]
impl Step for ReleaseStep {
    async fn run(&self, task: StepTask) -> StepOutcome {
        let input = match OrderInput::parse(&task) {
            Ok(i) => i,
            Err(outcome) => return outcome,
        };
        let failure = failure_from(input.failure.as_ref());
        let (error, cause) = (failure.error.clone(), failure.cause.clone());
        let released = compensations::release(
            self.orders.as_ref(),
            self.inventory.as_ref(),
            &input.order_id,
            failure,
        )
        .await;
        let mut output = match released {
            Ok(Released::Now(_) | Released::Already(_)) => json!({"released": true}),
            Ok(Released::NothingReserved) => {
                json!({"released": false, "reason": "nothing was reserved"})
            }
            Ok(Released::Shipped(_)) => json!({"released": false, "reason": "already shipped"}),
            Err(e) => return compensation_failed(&e),
        };
        // The last compensation hands the original failure to the Fail state ending the saga.
        output["error"] = json!(error);
        output["cause"] = json!(cause);
        StepOutcome::Done(output)
    }
}

pub struct RecordFailureStep {
    pub orders: Arc<dyn OrderRepository>,
}

#[async_trait]
impl Step for RecordFailureStep {
    async fn run(&self, task: StepTask) -> StepOutcome {
        let input = match OrderInput::parse(&task) {
            Ok(i) => i,
            Err(outcome) => return outcome,
        };
        let failure = failure_from(input.failure.as_ref());
        match compensations::record_failure(self.orders.as_ref(), &input.order_id, failure).await {
            Ok(()) => StepOutcome::Done(json!({"recorded": true})),
            Err(e) => compensation_failed(&e),
        }
    }
}
