//! RecordCompensationFailure: the workflow gave up on a compensation; the order is marked for a
//! person (`compensations::record_failure`).

use super::{OrderInput, attempt, compensation_failed};
use crate::workers::{Step, StepOutcome, StepTask};
use async_trait::async_trait;
use compensations::failure_from;
use serde_json::json;
use store::Ports;

pub struct RecordCompensationFailure {
    pub ports: Ports,
}

#[async_trait]
impl Step for RecordCompensationFailure {
    async fn run(&self, task: StepTask) -> StepOutcome {
        let input = attempt!(OrderInput::parse(&task));
        let failure = failure_from(input.failure.as_ref());
        match compensations::record_failure(self.ports.orders.as_ref(), &input.order_id, failure)
            .await
        {
            Ok(()) => StepOutcome::Done(json!({"recorded": true})),
            Err(e) => compensation_failed(&e),
        }
    }
}
