//! RecordCompensationFailure: a retired step (see `Activity::RETIRED`), served for executions
//! started under a definition from before incidents, whose compensations went here when they
//! gave up: the order gets its incident, with the compensation's error (which state failed is
//! not in the input; such an execution ends in a `Fail` state, so an operator resolves it by hand
//! rather than by a redrive).

use super::{OrderInput, attempt, compensation_failed};
use crate::workers::{Step, StepOutcome, StepTask};
use async_trait::async_trait;
use compensations::failure_from;
use serde_json::json;
use store::{Incident, Ports};

pub struct RecordCompensationFailure {
    pub ports: Ports,
}

#[async_trait]
impl Step for RecordCompensationFailure {
    async fn run(&self, task: StepTask) -> StepOutcome {
        let input = attempt!(OrderInput::parse(&task));
        let failure = failure_from(input.failure.as_ref());
        let gave_up = failure_from(task.input.get("compensationFailure"));
        let incident = Incident {
            step: "CompensationFailed".to_owned(),
            error: gave_up.error,
            cause: gave_up.cause,
            attempts: 1,
            since: chrono::Utc::now(),
        };
        let orders = self.ports.orders.as_ref();
        match compensations::give_up(orders, &input.order_id, &incident, failure).await {
            Ok(_) => StepOutcome::Done(json!({"recorded": true})),
            Err(e) => compensation_failed(e),
        }
    }
}
