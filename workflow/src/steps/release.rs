//! ReleaseInventory: the last compensation. The undo itself is `compensations::release`; this
//! step reports it and hands the failure that started the compensation on to the `Fail` state
//! that ends the saga.

use super::{OrderInput, attempt, compensation_failed, shipped};
use crate::workers::{Step, StepOutcome, StepTask};
use async_trait::async_trait;
use compensations::{Compensated, failure_from};
use serde_json::json;
use store::{Ports, Released};

pub struct ReleaseInventory {
    pub ports: Ports,
}

#[async_trait]
impl Step for ReleaseInventory {
    async fn run(&self, task: StepTask) -> StepOutcome {
        let input = attempt!(OrderInput::parse(&task));
        let failure = failure_from(input.failure.as_ref());
        let (error, cause) = (failure.error.clone(), failure.cause.clone());
        let mut output = match compensations::release(&self.ports, &input.order_id, failure).await {
            Ok(Compensated::Undone(Released::Now(_) | Released::Already(_))) => {
                json!({"released": true})
            }
            Ok(Compensated::Undone(Released::NothingReserved)) => {
                json!({"released": false, "reason": "nothing was reserved"})
            }
            Ok(Compensated::Undone(Released::Shipped(_))) => {
                json!({"released": false, "reason": "already shipped"})
            }
            Ok(Compensated::Shipped(s)) => shipped("released", &s),
            Err(e) => return compensation_failed(&e),
        };
        // The last compensation hands the original failure to the Fail state ending the saga.
        output["error"] = json!(error);
        output["cause"] = json!(cause);
        StepOutcome::Done(output)
    }
}
