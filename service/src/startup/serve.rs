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
    pub(super) fn enter(&self) -> Option<tokio::runtime::EnterGuard<'_>> {
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
pub(super) const WEBHOOKS_LEASE: &str = "webhooks";

/// The approval keeper heartbeats parked approvals five times per heartbeat window, at most
/// five times a second. (It was at most once a second, which let a token whose heartbeat is
/// a second lapse between two rounds: the floor must stay below a fifth of the shortest
/// heartbeat `--approval-heartbeat` takes, one second.)
pub fn keeper_interval(approval_heartbeat: Duration) -> Duration {
    (approval_heartbeat / 5).max(KEEPER_FASTEST)
}

/// The shortest pause between two of the approval keeper's rounds.
const KEEPER_FASTEST: Duration = Duration::from_millis(200);

/// The lease name of the approval keeper's shards (`LEASE#keeper-{shard}` on DynamoDB).
const KEEPER_LEASE: &str = "keeper";

/// The approval keeper of this process: alone with the embedded backend; on AWS sharing the
/// queue's shards with the other replicas under leases of two rounds, renewed every half round.
/// A replica that dies leaves its shards free within two rounds; another takes them within half
/// a round more and keeps them at once: its tokens, last heartbeaten at most a round before the
/// death, are kept within about three and a half rounds, before their heartbeat lapses (five).
/// Each replica keeps its shards' share of `--approval-keeper-rate`.
pub(super) fn keeper_settings(
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
pub(super) fn keeper_metrics(stats: &Arc<KeeperStats>) -> Vec<SampledMetric> {
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
    /// How long a client may take to send its headers (see `http::server::serve`).
    read_timeout: Duration,
    app: App,
}

impl Service {
    /// Binds the listener, opens the backend (embedded or AWS) and builds the [`App`] on it.
    pub async fn start(settings: &Settings) -> Result<Service, StartupError> {
        // The address first: a start that cannot serve (a busy port) creates nothing on disk.
        let (listener, local_addr) = bind(settings.listen).await?;
        let opened = open(settings).await?;
        // Only a start that opened its backend creates keys (a second instance refused by the
        // engine's lock must not keep keys it never showed).
        let bootstrap = match bootstrap_keys(settings.backend.kind, opened.keys.as_ref()).await {
            Ok(b) => b,
            Err(e) => {
                opened.close().await;
                return Err(e);
            }
        };
        Ok(Service {
            listener,
            local_addr,
            bootstrap,
            read_timeout: settings.limits.read_timeout,
            app: App::build(settings, opened).await?,
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
    /// flight, and stops the app (the steps in flight finish and answer; the engine closes).
    pub async fn serve(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), StartupError> {
        let Service {
            listener,
            read_timeout,
            app,
            ..
        } = self;
        http::server::serve(listener, app.router.clone(), read_timeout, shutdown).await;
        tracing::info!("HTTP server stopped");
        app.stop().await;
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
pub(super) async fn requeue_accepted(
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
