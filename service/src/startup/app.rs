//! The service composed once. [`App::build`] turns the settings and an opened backend into
//! the running service bar its listener: the saga's workers and the approval keeper, order
//! intake and the start queue, the repair loop, webhook delivery, the metrics and the router
//! (the HTTP API and the console, with every production layer). `serve` binds a listener in
//! front of it ([`Service`]); the test harnesses and the examples drive the same `App` without
//! a socket, so what they prove is what runs.

use super::*;

/// The service, composed and running, without a listener.
pub struct App {
    /// What the handlers share: the ports, the workflow, intake, the authenticator, the metrics.
    pub state: AppState,
    /// The HTTP API and the console, as `serve` serves them.
    pub router: axum::Router,
    /// The console's state, shared by every router [`App::router_for`] makes.
    console: console::ConsoleState,
    /// Starts the saga's workers and keeper, as at the start (see [`App::start_workers`]).
    start_workers: Box<dyn Fn() -> SagaWorkers + Send + Sync>,
    workers: Option<SagaWorkers>,
    /// The embedded backend's start queue.
    start_queue: Option<StartQueueTask>,
    /// The repair loop, unless turned off.
    repair: Option<RepairLoop>,
    /// The webhooks' dispatcher and sender.
    webhooks: Webhooks,
    /// The embedded backend's engine, closed last.
    engine: Option<Engine>,
    /// The embedded backend's workflow as itself (see [`Opened::embedded`]).
    embedded: Option<Arc<EmbeddedWorkflow>>,
    /// Where the workers, the keeper and the start queue run.
    background: Background,
}

impl App {
    /// Starts everything `opened` and `settings` make: the background runtime first, then
    /// the start queue, the workers and the keeper, intake (which queues again what the last
    /// process left accepted), the repair loop and webhook delivery, and the router over them.
    /// A failure closes `opened`.
    pub async fn build(settings: &Settings, opened: Opened) -> Result<App, StartupError> {
        let background = match background_runtime() {
            Ok(rt) => rt,
            Err(e) => {
                opened.close().await;
                return Err(e);
            }
        };
        let keeper_stats = Arc::new(KeeperStats::default());
        let keeper =
            match keeper_settings(settings, opened.lease_table.clone(), keeper_stats.clone()) {
                Ok(k) => k,
                Err(e) => {
                    opened.close().await;
                    return Err(e);
                }
            };
        let auth = Arc::new(Authenticator::with_limits(
            opened.keys.clone(),
            settings.operator_token.as_ref().map(OperatorToken::expose),
            &settings.rate_limits,
        ));
        // Everything spawned from here to the guard's end runs on the background runtime.
        let on_background = background.enter();
        let Opened {
            ports,
            workflow,
            activity_arns,
            engine,
            embedded,
            opened_at,
            mut sampled,
            start_queue,
            requeue_from,
            lease_table,
            keys: _,
            webhooks,
        } = opened;
        let (queue, queue_task) = match start_queue {
            true => {
                let (queue, task) =
                    StartQueue::spawn(workflow.clone(), StartQueueSettings::default());
                let depth = queue.clone();
                sampled.push(SampledMetric {
                    kind: SampledKind::Gauge,
                    name: "start_queue_orders",
                    help: "Accepted orders whose execution waits in the start queue to be started",
                    read: Box::new(move || depth.len() as u64),
                });
                (Some(queue), Some(task))
            }
            false => (None, None),
        };
        sampled.extend(keeper_metrics(&keeper_stats));
        let metrics = Metrics::with_sampled(sampled);
        let start_workers: Box<dyn Fn() -> SagaWorkers + Send + Sync> = {
            let (ports, metrics, workflow) = (ports.clone(), metrics.clone(), workflow.clone());
            let workers = worker_settings(settings.backend.kind);
            Box::new(move || {
                let arns = activity_arns.clone();
                SagaWorkers::start(
                    &ports,
                    &metrics,
                    workflow.clone(),
                    move |a| arns[&a].clone(),
                    workers.clone(),
                    keeper.clone(),
                )
            })
        };
        let workers = start_workers();
        let intake = Arc::new(OrderIntake {
            orders: ports.orders.clone(),
            inventory: ports.inventory.clone(),
            workflow: workflow.clone(),
            settings: settings.saga.clone(),
            queue,
        });
        if let Some(store) = requeue_from {
            tokio::spawn(requeue_accepted(store, intake.clone(), opened_at));
        }
        let sole_owner_since = lease_table.is_none().then_some(opened_at);
        let repair = settings.repair.interval.map(|interval| {
            let lease: Arc<dyn Lease> = match &lease_table {
                Some(table) => Arc::new(DynamoLease::new(
                    table.clone(),
                    REPAIR_LEASE,
                    format!("{}-{}", std::process::id(), uuid::Uuid::new_v4()),
                    lease_duration(interval),
                )),
                None => Arc::new(Unshared),
            };
            let reconciler = reconciler(
                &ports,
                &workflow,
                intake.clone(),
                RepairSettings {
                    grace: settings.repair.grace,
                    sole_owner_since,
                    ..RepairSettings::default()
                },
                false,
                metrics.clone(),
            );
            if settings.repair.window <= settings.repair.grace {
                tracing::warn!(
                    window_s = settings.repair.window.as_secs(),
                    grace_s = settings.repair.grace.as_secs(),
                    "the repair window is no longer than the grace: orders left ACCEPTED are \
                     started by the whole passes only (--repair-whole-every)"
                );
            }
            let plan = Plan {
                interval,
                window: settings.repair.window,
                whole_every: settings.repair.whole_every,
            };
            RepairLoop::spawn(Arc::new(reconciler), lease, plan)
        });
        let webhook_lease: Arc<dyn Lease> = match &lease_table {
            Some(table) => Arc::new(DynamoLease::new(
                table.clone(),
                WEBHOOKS_LEASE,
                format!("{}-{}", std::process::id(), uuid::Uuid::new_v4()),
                webhooks::RENEW_EVERY * 5,
            )),
            None => Arc::new(Unshared),
        };
        let webhook_loop = Webhooks::spawn(
            webhooks.clone(),
            webhook_lease,
            settings.webhooks.clone(),
            metrics.clone(),
        );
        drop(on_background);
        let console =
            console::ConsoleState::new(settings.console.clone(), metrics.sagas_finished());
        let state = AppState {
            ports,
            workflow,
            intake,
            auth,
            limits: settings.limits.clone(),
            metrics,
            readiness: Default::default(),
            webhooks,
            webhook_settings: settings.webhooks.clone(),
            streams: Default::default(),
        };
        Ok(App {
            router: http::router(state.clone(), console::routes(console.clone())),
            state,
            console,
            start_workers,
            workers: Some(workers),
            start_queue: queue_task,
            repair,
            webhooks: webhook_loop,
            engine,
            embedded,
            background,
        })
    }

    /// The router over `state` (this app's, changed), composed as [`App::router`] is: for
    /// tests that put another port in front of the HTTP layer.
    pub fn router_for(&self, state: AppState) -> axum::Router {
        http::router(state, console::routes(self.console.clone()))
    }

    /// The embedded backend's workflow as itself; `None` on AWS.
    pub fn embedded(&self) -> Option<&Arc<EmbeddedWorkflow>> {
        self.embedded.as_ref()
    }

    /// Stops the saga's workers and keeper (the steps in flight finish and answer), as a
    /// replica that dies mid-saga would leave its tasks.
    pub async fn stop_workers(&mut self) {
        if let Some(workers) = self.workers.take() {
            workers.stop().await;
        }
    }

    /// Starts the saga's workers and keeper again, as a restarted replica does (no-op when they run).
    pub fn start_workers(&mut self) {
        if self.workers.is_none() {
            let _on_background = self.background.enter();
            self.workers = Some((self.start_workers)());
        }
    }

    /// Takes the service down in order: the repair loop, webhook delivery and the start queue,
    /// then the workers (the steps in flight finish and answer), then the engine.
    pub async fn stop(self) {
        let App {
            repair,
            webhooks,
            start_queue,
            workers,
            engine,
            background,
            ..
        } = self;
        if let Some(repair) = repair {
            repair.stop().await;
        }
        webhooks.stop().await;
        if let Some(queue) = start_queue {
            queue.stop().await;
        }
        tracing::info!("stopping the workers");
        if let Some(workers) = workers {
            workers.stop().await;
        }
        if let Some(engine) = engine {
            engine.shutdown().await;
            tracing::info!("engine closed");
        }
        drop(background);
    }
}

/// The repair loop's reconciler over `ports` and `workflow` (the serving loop's and `audit`'s).
pub(super) fn reconciler(
    ports: &Ports,
    workflow: &Arc<dyn WorkflowPort>,
    intake: Arc<OrderIntake>,
    settings: RepairSettings,
    check_parked_tokens: bool,
    metrics: Metrics,
) -> Reconciler {
    Reconciler::new(
        Sources {
            ports: ports.clone(),
            executions: Arc::new(WorkflowExecutions::new(workflow.clone())),
            check_parked_tokens,
        },
        intake,
        settings,
        metrics,
    )
}
