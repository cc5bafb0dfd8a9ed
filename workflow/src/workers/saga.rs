//! The saga's workers, started and stopped as one: a worker for every activity of the
//! definition (each with its step from [`crate::steps::for_activity`]) and the approval keeper,
//! which heartbeats parked approval tokens.

use super::{RunningPool, WorkerPool, WorkerSettings};
use crate::definition::Activity;
use crate::port::WorkflowPort;
use crate::steps::approval::ApprovalKeeper;
use crate::{EmbeddedWorkflow, steps};
use std::sync::Arc;
use std::time::Duration;
use store::Ports;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The saga's workers, running.
pub struct SagaWorkers {
    pool: RunningPool,
    keeper: JoinHandle<()>,
    stop_keeper: watch::Sender<bool>,
}

impl SagaWorkers {
    /// Starts a worker for every activity (`activity_arn` names each one's ARN) and the keeper,
    /// which heartbeats parked approvals every `keeper_interval`.
    pub fn start(
        ports: &Ports,
        workflow: Arc<dyn WorkflowPort>,
        activity_arn: impl Fn(Activity) -> String,
        settings: WorkerSettings,
        keeper_interval: Duration,
    ) -> SagaWorkers {
        let pool = Activity::ALL
            .into_iter()
            .fold(
                WorkerPool::builder(workflow.clone()).settings(settings),
                |pool, a| pool.step(activity_arn(a), steps::for_activity(a, ports)),
            )
            .start();
        let (stop_keeper, stop) = watch::channel(false);
        let keeper = ApprovalKeeper {
            orders: ports.orders.clone(),
            workflow,
            interval: keeper_interval,
        }
        .spawn(stop);
        SagaWorkers {
            pool,
            keeper,
            stop_keeper,
        }
    }

    /// [`SagaWorkers::start`] on the embedded workflow, whose activities it knows.
    pub fn start_embedded(
        ports: &Ports,
        workflow: Arc<EmbeddedWorkflow>,
        settings: WorkerSettings,
        keeper_interval: Duration,
    ) -> SagaWorkers {
        let arns = workflow.clone();
        SagaWorkers::start(
            ports,
            workflow,
            move |a| arns.activity_arn(a).to_owned(),
            settings,
            keeper_interval,
        )
    }

    /// Stops taking tasks, lets the steps in flight finish and answer, and stops the keeper.
    pub async fn stop(self) {
        let _ = self.stop_keeper.send(true);
        self.pool.stop().await;
        let _ = self.keeper.await;
    }
}
