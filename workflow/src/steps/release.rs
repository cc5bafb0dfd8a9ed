//! ReleaseInventory: the first compensation (the last in definitions from before incidents, which
//! pass no `finishesOrder`). The undo itself is `compensations::release`; this step reports it,
//! ends the order when it is the last, or gives up with an incident.

use super::{OrderInput, attempt, finish_if_last, give_up_or_retry, shipped};
use crate::definition::Activity;
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
        let output = match compensations::release(&self.ports, &input.order_id, failure).await {
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
            Err(e) => {
                let state = Activity::ReleaseInventory.state();
                return give_up_or_retry(&self.ports, state, &input, e).await;
            }
        };
        finish_if_last(&self.ports, &input, true, output).await
    }
}
