//! The compensations as workflow steps: input parsing and error names around the
//! `compensations` crate, which knows nothing of workflows.

use super::SagaPorts;
use async_trait::async_trait;
use compensations::{CompensationError, Outcome, Ports, failure_from};
use serde_json::{Value, json};
use store::{ErrorName, Refunded, Released, Shipment};
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

fn ports(p: &SagaPorts) -> Ports<'_> {
    Ports {
        orders: p.orders.as_ref(),
        inventory: p.inventory.as_ref(),
        payments: p.payments.as_ref(),
        shipping: p.shipping.as_ref(),
    }
}

fn shipped(key: &str, shipment: &Shipment) -> Value {
    json!({ key: false, "reason": "the order had shipped; nothing is undone", "shipmentId": shipment.shipment_id })
}

pub struct RefundStep(pub SagaPorts);

#[async_trait]
impl Step for RefundStep {
    async fn run(&self, task: StepTask) -> StepOutcome {
        let input = match OrderInput::parse(&task) {
            Ok(i) => i,
            Err(outcome) => return outcome,
        };
        let failure = failure_from(input.failure.as_ref());
        match compensations::refund(&ports(&self.0), &input.order_id, failure).await {
            Ok(Outcome::Undone(Refunded::Now(r) | Refunded::Already(r))) => StepOutcome::Done(
                json!({"refunded": true, "refundId": r.refund_id, "amountCents": r.amount_cents}),
            ),
            Ok(Outcome::Undone(Refunded::NothingCharged)) => {
                StepOutcome::Done(json!({"refunded": false, "reason": "nothing was charged"}))
            }
            Ok(Outcome::Shipped(s)) => StepOutcome::Done(shipped("refunded", &s)),
            Err(e) => compensation_failed(&e),
        }
    }
}

pub struct ReleaseStep(pub SagaPorts);

#[async_trait]
impl Step for ReleaseStep {
    async fn run(&self, task: StepTask) -> StepOutcome {
        let input = match OrderInput::parse(&task) {
            Ok(i) => i,
            Err(outcome) => return outcome,
        };
        let failure = failure_from(input.failure.as_ref());
        let (error, cause) = (failure.error.clone(), failure.cause.clone());
        let mut output =
            match compensations::release(&ports(&self.0), &input.order_id, failure).await {
                Ok(Outcome::Undone(Released::Now(_) | Released::Already(_))) => {
                    json!({"released": true})
                }
                Ok(Outcome::Undone(Released::NothingReserved)) => {
                    json!({"released": false, "reason": "nothing was reserved"})
                }
                Ok(Outcome::Undone(Released::Shipped(_))) => {
                    json!({"released": false, "reason": "already shipped"})
                }
                Ok(Outcome::Shipped(s)) => shipped("released", &s),
                Err(e) => return compensation_failed(&e),
            };
        // The last compensation hands the original failure to the Fail state ending the saga.
        output["error"] = json!(error);
        output["cause"] = json!(cause);
        StepOutcome::Done(output)
    }
}

pub struct RecordFailureStep(pub SagaPorts);

#[async_trait]
impl Step for RecordFailureStep {
    async fn run(&self, task: StepTask) -> StepOutcome {
        let input = match OrderInput::parse(&task) {
            Ok(i) => i,
            Err(outcome) => return outcome,
        };
        let failure = failure_from(input.failure.as_ref());
        match compensations::record_failure(self.0.orders.as_ref(), &input.order_id, failure).await
        {
            Ok(()) => StepOutcome::Done(json!({"recorded": true})),
            Err(e) => compensation_failed(&e),
        }
    }
}
