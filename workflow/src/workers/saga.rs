//! The saga's workers, started and stopped as one: a worker for every activity of the
//! definition (each with its step from [`crate::steps::for_activity`]) and the approval keeper,
//! which heartbeats parked approval tokens.

use super::{RunningPool, WorkerPool, WorkerSettings};
use crate::definition::Activity;
use crate::port::WorkflowPort;
use crate::steps::approval::{ApprovalKeeper, KeeperSettings};
use crate::{EmbeddedWorkflow, steps};
use std::sync::Arc;
use std::time::Duration;
use store::Ports;
use telemetry::Metrics;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The saga's workers, running.
pub struct SagaWorkers {
    pool: RunningPool,
    keeper: JoinHandle<()>,
    stop_keeper: watch::Sender<bool>,
}

impl SagaWorkers {
    /// Starts a worker for every activity (`activity_arn` names each one's ARN), its step
    /// counting the sagas it ends in `metrics`, and the keeper of parked approvals.
    pub fn start(
        ports: &Ports,
        metrics: &Metrics,
        workflow: Arc<dyn WorkflowPort>,
        activity_arn: impl Fn(Activity) -> String,
        settings: WorkerSettings,
        keeper: KeeperSettings,
    ) -> SagaWorkers {
        let pool = Activity::ALL
            .into_iter()
            .fold(
                WorkerPool::builder(workflow.clone()).settings(settings),
                |pool, a| pool.step(activity_arn(a), steps::for_activity(a, ports, metrics)),
            )
            .start();
        let (stop_keeper, stop) = watch::channel(false);
        let keeper = ApprovalKeeper::new(ports.orders.clone(), workflow, keeper).spawn(stop);
        SagaWorkers {
            pool,
            keeper,
            stop_keeper,
        }
    }

    /// [`SagaWorkers::start`] on the embedded workflow, whose activities it knows, its keeper
    /// running rounds every `keeper_interval` over the whole queue.
    pub fn start_embedded(
        ports: &Ports,
        metrics: &Metrics,
        workflow: Arc<EmbeddedWorkflow>,
        settings: WorkerSettings,
        keeper_interval: Duration,
    ) -> SagaWorkers {
        let arns = workflow.clone();
        SagaWorkers::start(
            ports,
            metrics,
            workflow,
            move |a| arns.activity_arn(a).to_owned(),
            settings,
            // Parked tokens lapse after at least five rounds (see `keeper_interval`).
            KeeperSettings::unshared(keeper_interval, keeper_interval * 5),
        )
    }

    /// Stops taking tasks, lets the steps in flight finish and answer, and stops the keeper.
    pub async fn stop(self) {
        let _ = self.stop_keeper.send(true);
        self.pool.stop().await;
        let _ = self.keeper.await;
    }
}
