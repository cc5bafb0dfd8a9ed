//! `fulfillment serve`: the running service (listener, router, saga workers, start queue,
//! repair loop, engine) started in order and taken down in reverse.

use super::*;

/// How the activity workers run in the service. Embedded polls are short, so a stop (which
/// waits for the polls in flight) is quick; Step Functions decides itself how long it holds a
/// poll (up to 60 s), so on AWS a stop abandons the polls still open after a few seconds (a task
/// handed to one is re-issued after its heartbeat timeout; see `WorkerSettings`).
///
/// Every step waits on commits (the store's, the engine's) more than it computes, so several
/// run at once and the commits carry many steps each. Not too many: past that, every commit
/// only grows and the orders being accepted wait behind it (measured in docs/benchmarks/performance-goals.md: 64 steps
/// of an activity in flight, 16 polls, beat 16 and 2, and 256 and 32). Each poll hands out one
/// task. On AWS a poll is a held HTTP connection, and each replica adds its own.
pub(super) fn worker_settings(backend: Backend) -> WorkerSettings {
    let (pollers_per_activity, max_in_flight) = match backend {
        Backend::Embedded => (16, 64),
        Backend::Aws => (8, 64),
    };
    WorkerSettings {
        poll_wait: Duration::from_secs(1),
        pollers_per_activity,
        max_in_flight,
        abandon_polls_after: match backend {
            Backend::Embedded => None,
            Backend::Aws => Some(Duration::from_secs(3)),
        },
        ..WorkerSettings::default()
    }
}

/// The runtime of the saga's background work (the activity workers, the approval keeper, the
/// start queue), apart from the one serving HTTP: a burst of steps made ready by one engine
/// commit then waits on its own threads, not in front of the requests being answered. Its
/// threads, half as many as the cores (the steps mostly wait on commits), run at a lower
/// priority than the HTTP ones, as the embedded engine's writer does (see [`lower_priority`]):
/// when the CPU is short, orders are accepted first and the sagas catch up after, from the
/// durable queues (the start queue's `ACCEPTED` orders, the engine's scheduled tasks).
pub(super) fn background_runtime() -> Result<Background, StartupError> {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads((cores / 2).max(1))
        .max_blocking_threads(BLOCKING_THREADS)
        .thread_name("saga-worker")
        .on_thread_start(lower_priority)
        .enable_all()
        .build()
        .map(|rt| Background(Some(rt)))
        .map_err(|e| StartupError::Config(format!("cannot start the workers' runtime: {e}")))
}

/// The most blocking threads a runtime of the service keeps. Its blocking work is the
/// databases' reads, a few at a time (each store and engine takes a permit of one of its few
/// read connections first), so a handful of threads serve them; Tokio's default (512) let a
/// burst of orders start dozens, each keeping its stack and allocator heap after the burst
/// (docs/benchmarks/performance-goals.md).
pub const BLOCKING_THREADS: usize = 8;

/// The background runtime, shut down without waiting when dropped: a runtime dropped inside
/// another's tasks (a `Service` dropped without `serve`) would otherwise panic.
pub(super) struct Background(Option<tokio::runtime::Runtime>);

impl Background {
    fn enter(&self) -> Option<tokio::runtime::EnterGuard<'_>> {
        self.0.as_ref().map(|rt| rt.enter())
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// The nice value of the saga's threads (the workers' runtime, the embedded engine's writer).
///
/// Low enough that a request being answered wins the CPU from a step, not so low that the
/// sagas lose it to every wake-up of a nice-0 thread: at 10 (a tenth of a nice-0 thread's
/// weight) the engine's writer, the sagas' one serial thread, spent a third of its time waiting
/// for a CPU while 25 % of the two cores stood idle, and 5 completed 3–27 % more sagas a
/// second in five interleaved pairs of runs. The price: at 1,000 orders/s the sagas take more
/// of the CPU from the intake (`POST /orders` p50 ~1 ms higher in two pairs of runs once the
/// WAL flushes moved off the writers' threads). A shop's capacity is the sagas' rate, so 5
/// (docs/benchmarks/performance-goals.md, the fourth look).
pub(super) const SAGA_NICE: libc::c_int = 5;

/// Lowers the calling thread's scheduling priority to [`SAGA_NICE`] (Linux, where a thread's
/// nice value is its own). Elsewhere, or when refused, the thread keeps its priority.
pub(super) fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: plain system calls on the calling thread, with no pointers.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, SAGA_NICE);
    }
}

/// The name of the repair loop's lease (`LEASE#repair` in the table).
pub(super) const REPAIR_LEASE: &str = "repair";
/// The name of the webhooks' loop's lease (`LEASE#webhooks`).
const WEBHOOKS_LEASE: &str = "webhooks";

/// The approval keeper heartbeats parked approvals five times per heartbeat window.
pub fn keeper_interval(approval_heartbeat: Duration) -> Duration {
    (approval_heartbeat / 5).max(Duration::from_secs(1))
}

/// The lease name of the approval keeper's shards (`LEASE#keeper-{shard}` on DynamoDB).
const KEEPER_LEASE: &str = "keeper";

/// The approval keeper of this process: alone with the embedded backend; on AWS sharing the
/// queue's shards with the other replicas under leases of two rounds, renewed every half round.
/// A replica that dies leaves its shards free within two rounds; another takes them within half
/// a round more and keeps them at once: its tokens, last heartbeaten at most a round before the
/// death, are kept within about three and a half rounds, before their heartbeat lapses (five).
/// Each replica keeps its shards' share of `--approval-keeper-rate`.
fn keeper_settings(
    settings: &Settings,
    lease_table: Option<DynamoStore>,
    stats: Arc<KeeperStats>,
) -> Result<KeeperSettings, StartupError> {
    let heartbeat = settings.saga.approval_heartbeat;
    let interval = keeper_interval(heartbeat);
    let Some(table) = lease_table else {
        return Ok(KeeperSettings {
            stats,
            ..KeeperSettings::unshared(interval, heartbeat)
        });
    };
    let owner = format!("keeper_{}", uuid::Uuid::new_v4().simple());
    let leases = DynamoShardLeases::new(table, KEEPER_LEASE, owner, interval * 2)
        .map_err(|e| StartupError::Config(e.to_string()))?;
    Ok(KeeperSettings {
        interval,
        lapse_after: heartbeat,
        leases: Arc::new(leases),
        rate: Some(settings.keeper_rate),
        stats,
    })
}

/// The keeper's counters as metrics.
fn keeper_metrics(stats: &Arc<KeeperStats>) -> Vec<SampledMetric> {
    let read = |f: fn(&KeeperStats) -> &AtomicU64| {
        let stats = stats.clone();
        Box::new(move || f(&stats).load(Ordering::Relaxed)) as Box<dyn Fn() -> u64 + Send + Sync>
    };
    vec![
        SampledMetric {
            kind: SampledKind::Counter,
            name: "approval_heartbeats",
            help: "Heartbeats the approval keeper sent for parked approval tokens",
            read: read(|s| &s.heartbeats),
        },
        SampledMetric {
            kind: SampledKind::Counter,
            name: "approvals_expired",
            help: "Approval windows the keeper closed undecided at their deadline",
            read: read(|s| &s.expired),
        },
        SampledMetric {
            kind: SampledKind::Counter,
            name: "approval_keeper_rounds",
            help: "Rounds the approval keeper finished over the shards this replica held",
            read: read(|s| &s.rounds),
        },
        SampledMetric {
            kind: SampledKind::Counter,
            name: "approval_tokens_dead",
            help: "Parked approval tokens the workflow no longer knew when heartbeaten (lapsed \
                   in a crash or an outage: the workflow re-issues the task, which parks anew)",
            read: read(|s| &s.dead),
        },
        SampledMetric {
            kind: SampledKind::Gauge,
            name: "approval_keeper_shards",
            help: "Shards of the approvals' queue this replica keeps",
            read: read(|s| &s.shards_held),
        },
        SampledMetric {
            kind: SampledKind::Gauge,
            name: "approval_keeper_round_milliseconds",
            help: "How long the approval keeper's last round took",
            read: read(|s| &s.last_round_ms),
        },
        SampledMetric {
            kind: SampledKind::Gauge,
            name: "approval_keeper_last_round_approvals",
            help: "Parked approvals the approval keeper's last round kept (heartbeaten or closed)",
            read: read(|s| &s.last_round_kept),
        },
    ]
}

/// A started service: the stack is open, the workers run and the listener is bound; requests
/// are served once [`Service::serve`] runs.
pub struct Service {
    listener: TcpListener,
    local_addr: SocketAddr,
    bootstrap: Option<BootstrapKeys>,
    router: axum::Router,
    /// How long a client may take to send its headers (see `http::server::serve`).
    read_timeout: Duration,
    workers: SagaWorkers,
    /// The embedded backend's start queue.
    start_queue: Option<StartQueueTask>,
    /// The repair loop, unless turned off.
    repair: Option<RepairLoop>,
    /// The webhooks' dispatcher and sender.
    webhooks: Webhooks,
    /// The embedded backend's engine, closed last.
    engine: Option<Engine>,
    /// Where the workers, the keeper and the start queue run.
    background: Background,
}

/// A backend, opened: the saga's ports and workflow, and what to close at the end.
pub(super) struct Opened {
    pub(super) ports: Ports,
    pub(super) workflow: Arc<dyn WorkflowPort>,
    pub(super) activity_arns: HashMap<Activity, String>,
    pub(super) engine: Option<Engine>,
    /// The backend's own counters, for `/metrics`.
    pub(super) sampled: Vec<SampledMetric>,
    /// Embedded: new orders are started through a start queue. AWS: no queue (each replica is
    /// stateless, so a request starts its order's execution itself; Step Functions holds it
    /// from then on). Either way the repair loop starts what a crash left unstarted.
    pub(super) start_queue: bool,
    /// Embedded: the store whose orders still `ACCEPTED` at the start (what the last process's
    /// start queue held when it stopped) are queued again at once ([`requeue_accepted`]),
    /// rather than left to the repair loop's first pass.
    pub(super) requeue_from: Option<SqliteStore>,
    /// AWS: the table that holds the repair loop's lease, shared by the replicas. Embedded:
    /// `None`, one process owns the backend and always holds the lease ([`Unshared`]).
    pub(super) lease_table: Option<DynamoStore>,
    /// The principals and their API keys.
    pub(super) keys: Arc<dyn KeyRepository>,
    /// Webhook endpoints and deliveries, and the outbox of order events.
    pub(super) webhooks: Arc<dyn WebhookRepository>,
}

impl Opened {
    pub(super) async fn close(self) {
        if let Some(engine) = self.engine {
            engine.shutdown().await;
        }
    }
}

impl Service {
    /// Opens the backend (embedded or AWS), starts the workers and binds the listener.
    pub async fn start(settings: &Settings) -> Result<Service, StartupError> {
        // As AWS would refuse the task: a heartbeat not shorter than the window.
        settings
            .saga
            .check(workflow::definition::heartbeat_retries())
            .map_err(StartupError::Config)?;
        let payments = payments(&settings.backend)?;
        if settings.backend.kind == Backend::Aws && settings.operator_token.is_none() {
            return Err(StartupError::Config(
                "--backend aws needs --operator-token (FULFILLMENT_OPERATOR_TOKEN), the same on \
                 every replica"
                    .to_owned(),
            ));
        }
        // Before anything is opened or created: a refused key stops the start cleanly.
        check_payments(&payments).await?;
        let shipping = shipping(settings.shipping.as_ref(), &payments).await?;
        // The address first: a start that cannot serve (a busy port) creates nothing on disk.
        let (listener, local_addr) = bind(settings.listen).await?;
        // Before the backend is opened: on the embedded one, nothing stored before this
        // instant can be in flight in this process (see `RepairSettings::sole_owner_since`).
        let opened_at = chrono::Utc::now();
        let opened = match settings.backend.kind {
            Backend::Embedded => {
                open_embedded(&settings.backend, payments, &shipping, settings.retention).await?
            }
            Backend::Aws => open_aws(&settings.backend, payments, &shipping).await?,
        };
        // Only a start that opened its backend creates keys (a second instance refused by the
        // engine's lock must not keep keys it never showed).
        let bootstrap = match bootstrap_keys(settings.backend.kind, opened.keys.as_ref()).await {
            Ok(b) => b,
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
        let background = match background_runtime() {
            Ok(rt) => rt,
            Err(e) => {
                opened.close().await;
                return Err(e);
            }
        };
        // Everything spawned from here to the guard's end runs on the background runtime.
        let on_background = background.enter();
        let Opened {
            ports,
            workflow,
            activity_arns,
            engine,
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
        let keeper_stats = Arc::new(KeeperStats::default());
        sampled.extend(keeper_metrics(&keeper_stats));
        let metrics = Metrics::with_sampled(sampled);
        // The steps' view of the orders counts the sagas they end.
        let step_ports = Ports {
            orders: Arc::new(CountedOrders {
                orders: ports.orders.clone(),
                metrics: metrics.clone(),
            }),
            ..ports.clone()
        };
        let workers = SagaWorkers::start(
            &step_ports,
            workflow.clone(),
            move |a| activity_arns[&a].clone(),
            worker_settings(settings.backend.kind),
            keeper_settings(settings, lease_table.clone(), keeper_stats)?,
        );
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
        let lease_table_for_webhooks = lease_table.clone();
        let repair = settings.repair.interval.map(|interval| {
            let lease: Arc<dyn Lease> = match lease_table {
                Some(table) => Arc::new(DynamoLease::new(
                    table,
                    REPAIR_LEASE,
                    format!("{}-{}", std::process::id(), uuid::Uuid::new_v4()),
                    lease_duration(interval),
                )),
                None => Arc::new(Unshared),
            };
            let reconciler = Reconciler::new(
                Sources {
                    ports: ports.clone(),
                    executions: Arc::new(WorkflowExecutions::new(workflow.clone())),
                    check_parked_tokens: false,
                },
                intake.clone(),
                RepairSettings {
                    grace: settings.repair.grace,
                    sole_owner_since,
                    ..RepairSettings::default()
                },
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
        let webhook_lease: Arc<dyn Lease> = match &lease_table_for_webhooks {
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
        let finished_so_far = metrics.sagas_finished();
        let console = console::routes(console::ConsoleState::new(
            settings.console.clone(),
            finished_so_far,
        ));
        let router = http::router(
            AppState {
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
            },
            console,
        );
        Ok(Service {
            listener,
            local_addr,
            bootstrap,
            router,
            read_timeout: settings.limits.read_timeout,
            workers,
            start_queue: queue_task,
            repair,
            webhooks: webhook_loop,
            engine,
            background,
        })
    }

    /// The address the listener is bound to (the real port when configured with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The keys this start created (its store held none), to show once.
    pub fn bootstrap(&self) -> Option<&BootstrapKeys> {
        self.bootstrap.as_ref()
    }

    /// Serves until `shutdown` completes, then stops accepting, finishes the requests in
    /// flight, stops the workers (the steps in flight finish and answer) and closes the engine.
    pub async fn serve(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), StartupError> {
        let Service {
            listener,
            router,
            read_timeout,
            workers,
            start_queue,
            repair,
            webhooks,
            engine,
            background,
            ..
        } = self;
        http::server::serve(listener, router, read_timeout, shutdown).await;
        if let Some(repair) = repair {
            repair.stop().await;
        }
        webhooks.stop().await;
        if let Some(queue) = start_queue {
            queue.stop().await;
        }
        tracing::info!("HTTP server stopped; stopping the workers");
        workers.stop().await;
        if let Some(engine) = engine {
            engine.shutdown().await;
            tracing::info!("engine closed");
        }
        drop(background);
        tracing::info!("bye");
        Ok(())
    }
}

/// Orders a page of requeueing reads at a time.
const REQUEUE_PAGE: u32 = 500;

/// Queues again the start of every order stored before `opened_at` and still `ACCEPTED`: what
/// the last process's start queue held when it stopped (a crash, or a stop with a backlog).
/// Without it they would wait for the repair loop's first pass, which reads the whole books
/// and starts them one at a time. Starts are idempotent by the order id, so an order started
/// meanwhile (a client's retry) is only found started. A failure leaves the rest to the
/// repair loop, as before.
async fn requeue_accepted(
    store: SqliteStore,
    intake: Arc<OrderIntake>,
    opened_at: chrono::DateTime<chrono::Utc>,
) {
    let mut after: Option<String> = None;
    let mut queued = 0u64;
    loop {
        let page = match store.accepted_orders(after.as_deref(), REQUEUE_PAGE).await {
            Ok(page) => page,
            Err(e) => {
                tracing::warn!(error = %e, queued, "requeueing the accepted orders stopped; the repair loop starts the rest");
                return;
            }
        };
        for order in page.items {
            if order.new.created_at >= opened_at {
                // This process's own: its POST queued it.
                continue;
            }
            let id = order.id().clone();
            match intake.queue_or_start(order).await {
                Ok(_) => queued += 1,
                Err(e) => {
                    tracing::warn!(order_id = %id, error = %e, "not requeued; the repair loop starts it")
                }
            }
        }
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    if queued > 0 {
        tracing::info!(
            orders = queued,
            "orders accepted but not started when the last process stopped are queued again"
        );
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_saga_thread_runs_at_the_saga_nice_value_and_others_keep_theirs() {
        let own = || {
            // SAFETY: plain system calls on the calling thread, with no pointers.
            unsafe {
                let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
                libc::getpriority(libc::PRIO_PROCESS, tid)
            }
        };
        let before = own();
        let lowered = std::thread::spawn(move || {
            lower_priority();
            own()
        })
        .join()
        .unwrap();
        assert_eq!(
            lowered,
            SAGA_NICE.max(before),
            "the lowered thread's nice value"
        );
        assert_eq!(own(), before, "the caller's nice value is its own");
    }
}
