//! The saga, composed: every activity of the definition gets its step (forward steps from
//! `workflow`, compensations from `compensations`), a worker pool runs them, and the approval
//! keeper heartbeats parked approval tokens.

pub mod compensation_steps;
pub mod counted;

use compensation_steps::{RecordFailureStep, RefundStep, ReleaseStep};
use std::sync::Arc;
use std::time::Duration;
use store::{InventoryRepository, OrderRepository, PaymentGateway, ShippingGateway};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use workflow::definition::Activity;
use workflow::runtime::{RunningPool, WorkerPool, WorkerSettings};
use workflow::steps::approval::{ApprovalKeeper, AwaitApproval};
use workflow::steps::{charge::Charge, reserve::Reserve, ship::Ship};
use workflow::{Step, WorkflowPort};

/// The saga's state and the outside world, as ports.
#[derive(Clone)]
pub struct SagaPorts {
    pub orders: Arc<dyn OrderRepository>,
    pub inventory: Arc<dyn InventoryRepository>,
    pub payments: Arc<dyn PaymentGateway>,
    pub shipping: Arc<dyn ShippingGateway>,
}

impl SagaPorts {
    /// The embedded default: the SQLite store and its sandbox gateways.
    pub fn sqlite(store: &store::SqliteStore) -> SagaPorts {
        SagaPorts {
            orders: Arc::new(store.clone()),
            inventory: Arc::new(store.clone()),
            payments: Arc::new(store.payments()),
            shipping: Arc::new(store.shipping()),
        }
    }

    /// The step that serves `activity`.
    pub fn step(&self, activity: Activity) -> Arc<dyn Step> {
        let p = self.clone();
        match activity {
            Activity::ReserveInventory => Arc::new(Reserve {
                orders: p.orders,
                inventory: p.inventory,
            }),
            Activity::ChargePayment => Arc::new(Charge {
                orders: p.orders,
                payments: p.payments,
            }),
            Activity::AwaitApproval => Arc::new(AwaitApproval { orders: p.orders }),
            Activity::CreateShipment => Arc::new(Ship {
                orders: p.orders,
                inventory: p.inventory,
                shipping: p.shipping,
            }),
            Activity::RefundPayment => Arc::new(RefundStep(p)),
            Activity::ReleaseInventory => Arc::new(ReleaseStep(p)),
            Activity::RecordCompensationFailure => Arc::new(RecordFailureStep(p)),
        }
    }
}

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
        ports: &SagaPorts,
        workflow: Arc<dyn WorkflowPort>,
        activity_arn: impl Fn(Activity) -> String,
        settings: WorkerSettings,
        keeper_interval: Duration,
    ) -> SagaWorkers {
        let pool = Activity::ALL
            .into_iter()
            .fold(
                WorkerPool::builder(workflow.clone()).settings(settings),
                |pool, a| pool.step(activity_arn(a), ports.step(a)),
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
        ports: &SagaPorts,
        workflow: Arc<workflow::EmbeddedWorkflow>,
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
