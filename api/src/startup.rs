//! The composition root of `fulfillment serve`: opens the store and the engine, starts the
//! saga's workers, builds order intake and the router, binds the listener, and on shutdown
//! takes it all down in order (listener and requests, then workers, then engine). Also of
//! `fulfillment audit`, which opens the same backends read-only, without engine or workers.

use crate::audit::{self, AuditError, EmbeddedExecutions, Executions, Sources, WorkflowExecutions};
use crate::config::{
    AuditSettings, AwsSettings, Backend, BackendSettings, EngineSettings, KeysAction, KeysSettings,
    PaymentsSettings, ProvisionSettings, Settings,
};
use crate::counted_orders::CountedOrders;
use crate::http::auth::Authenticator;
use crate::http::{self, AppState, Metrics, OperatorToken, SampledKind, SampledMetric};
use crate::intake::OrderIntake;
use crate::keys::{KeyError, KeyText};
use crate::sfn_server;
use crate::start_queue::{StartQueue, StartQueueSettings, StartQueueTask};
use engine::{Engine, EngineConfig, EngineError, Inspector};
use std::collections::HashMap;
use std::future::Future;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use store::dynamodb::DynamoStore;
use store::stripe::{StripeConfig, StripeConfigError, StripePayments};
use store::{KeyRepository, OrderId, PaymentGateway, Ports, Role, SqliteStore, StoreError};
use tokio::net::TcpListener;
use workflow::aws::AwsWorkflow;
use workflow::definition::Activity;
use workflow::{EmbeddedWorkflow, SagaWorkers, WorkerSettings, WorkflowError, WorkflowPort};

/// Why the service could not start or stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    /// Settings that cannot work together (the message says what to set).
    #[error("{0}")]
    Config(String),
    #[error("cannot set up the payment provider: {0}")]
    Payments(#[from] StripeConfigError),
    #[error("cannot reach the AWS backend ({what}): {reason}")]
    AwsUnreachable { what: &'static str, reason: String },
    #[error("cannot create the DynamoDB table {table}: {source}")]
    Table { table: String, source: StoreError },
    #[error("cannot open the store {path}: {source}")]
    Store { path: PathBuf, source: StoreError },
    #[error("cannot open the engine's state {path}: {}", source.message())]
    Engine { path: PathBuf, source: EngineError },
    #[error("cannot set up the saga's workflow: {0}")]
    Workflow(#[from] WorkflowError),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("the HTTP server failed: {0}")]
    Serve(std::io::Error),
    #[error("the audit could not finish: {0}")]
    Audit(#[from] AuditError),
    #[error("{0}")]
    Keys(KeyError),
}

impl StartupError {
    /// The process exit code: 2 for a configuration that cannot work, 1 for anything else.
    pub fn exit_code(&self) -> i32 {
        match self {
            StartupError::Config(_) | StartupError::Payments(_) => 2,
            StartupError::Keys(KeyError::InvalidName(_) | KeyError::RoleMismatch { .. }) => 2,
            _ => 1,
        }
    }
}

/// The keys a first start created (the store held none), shown once in the start banner.
#[derive(Debug, Clone)]
pub struct BootstrapKeys {
    pub operator: (String, KeyText),
    pub client: (String, KeyText),
}

/// The principals a first start creates a key for.
pub const BOOTSTRAP_OPERATOR_NAME: &str = "admin";
pub const BOOTSTRAP_CLIENT_NAME: &str = "shop";

/// On the embedded backend's first start (no key at all in the store), an operator key and a
/// client key, so the service is usable at once; they are shown once and only their hashes
/// kept. On AWS keys come from `fulfillment keys` (replicas start at once; none of them
/// should print keys into its logs).
async fn bootstrap_keys(
    kind: Backend,
    keys: &dyn KeyRepository,
) -> Result<Option<BootstrapKeys>, StartupError> {
    if kind != Backend::Embedded {
        return Ok(None);
    }
    if !keys.list_keys().await.map_err(keys_failed)?.is_empty() {
        return Ok(None);
    }
    let (operator, _) = crate::keys::create(keys, BOOTSTRAP_OPERATOR_NAME, Role::Operator)
        .await
        .map_err(StartupError::Keys)?;
    let (client, _) = crate::keys::create(keys, BOOTSTRAP_CLIENT_NAME, Role::Client)
        .await
        .map_err(StartupError::Keys)?;
    tracing::info!("first start: created an operator key and a client key");
    Ok(Some(BootstrapKeys {
        operator: (BOOTSTRAP_OPERATOR_NAME.to_owned(), operator),
        client: (BOOTSTRAP_CLIENT_NAME.to_owned(), client),
    }))
}

fn keys_failed(e: StoreError) -> StartupError {
    StartupError::Keys(KeyError::Store(e))
}

/// How the activity workers run in the service. Embedded polls are short, so a stop (which
/// waits for the polls in flight) is quick; Step Functions decides itself how long it holds a
/// poll (up to 60 s), so on AWS a stop abandons the polls still open after a few seconds (a task
/// handed to one is re-issued after its heartbeat timeout; see `WorkerSettings`).
///
/// Every step waits on commits (the store's, the engine's) more than it computes, so several
/// run at once and the commits carry many steps each. Not too many: past that, every commit
/// only grows and the orders being accepted wait behind it (measured in BENCHMARKS.md: 64 steps
/// of an activity in flight, 16 polls, beat 16 and 2, and 256 and 32). Each poll hands out one
/// task. On AWS a poll is a held HTTP connection, and each replica adds its own.
fn worker_settings(backend: Backend) -> WorkerSettings {
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
fn background_runtime() -> Result<Background, StartupError> {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads((cores / 2).max(1))
        .thread_name("saga-worker")
        .on_thread_start(lower_priority)
        .enable_all()
        .build()
        .map(|rt| Background(Some(rt)))
        .map_err(|e| StartupError::Config(format!("cannot start the workers' runtime: {e}")))
}

/// The background runtime, shut down without waiting when dropped: a runtime dropped inside
/// another's tasks (a `Service` dropped without `serve`) would otherwise panic.
struct Background(Option<tokio::runtime::Runtime>);

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

/// Lowers the calling thread's scheduling priority (nice 10; Linux, where a thread's nice value
/// is its own). Elsewhere, or when refused, the thread keeps its priority.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: plain system calls on the calling thread, with no pointers.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 10);
    }
}

/// Spawns the queueing of the starts of `ids`, the orders accepted before this start.
fn resume(intake: Arc<OrderIntake>, ids: Vec<OrderId>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let stored = ids.len();
        match intake.resume(ids).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                orders = n,
                stored,
                "orders accepted before this start are queued to be started (those running already are left alone)"
            ),
            Err(e) => tracing::error!(
                error = %e,
                "cannot queue the starts of the orders accepted before this start; the next start, or a retry of their POSTs, does"
            ),
        }
    })
}

/// The approval keeper heartbeats parked approvals five times per heartbeat window.
pub fn keeper_interval(approval_heartbeat: Duration) -> Duration {
    (approval_heartbeat / 5).max(Duration::from_secs(1))
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
    /// The embedded backend's start queue, and the task re-filling it at start.
    start_queue: Option<(StartQueueTask, tokio::task::JoinHandle<()>)>,
    /// The embedded backend's engine, closed last.
    engine: Option<Engine>,
    /// Where the workers, the keeper and the start queue run.
    background: Background,
}

/// A backend, opened: the saga's ports and workflow, and what to close at the end.
struct Opened {
    ports: Ports,
    workflow: Arc<dyn WorkflowPort>,
    activity_arns: HashMap<Activity, String>,
    engine: Option<Engine>,
    /// The backend's own counters, for `/metrics`.
    sampled: Vec<SampledMetric>,
    /// Embedded: the orders still `ACCEPTED`, whose starts the start queue takes again. AWS:
    /// `None`, no queue (each replica is stateless, so a request starts its order's execution
    /// itself; Step Functions holds it from then on).
    unstarted: Option<Vec<OrderId>>,
    /// The principals and their API keys.
    keys: Arc<dyn KeyRepository>,
}

impl Opened {
    async fn close(self) {
        if let Some(engine) = self.engine {
            engine.shutdown().await;
        }
    }
}

impl Service {
    /// Opens the backend (embedded or AWS), starts the workers and binds the listener.
    pub async fn start(settings: &Settings) -> Result<Service, StartupError> {
        let payments = payments(&settings.backend)?;
        if settings.backend.kind == Backend::Aws && settings.operator_token.is_none() {
            return Err(StartupError::Config(
                "--backend aws needs --operator-token (FULFILLMENT_OPERATOR_TOKEN), the same on \
                 every replica"
                    .to_owned(),
            ));
        }
        // The address first: a start that cannot serve (a busy port) creates nothing on disk.
        let (listener, local_addr) = bind(settings.listen).await?;
        let opened = match settings.backend.kind {
            Backend::Embedded => open_embedded(&settings.backend, payments).await?,
            Backend::Aws => open_aws(&settings.backend, payments).await?,
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
            unstarted,
            keys: _,
        } = opened;
        let (queue, queued) = match unstarted {
            Some(ids) => {
                let (queue, task) =
                    StartQueue::spawn(workflow.clone(), StartQueueSettings::default());
                let depth = queue.clone();
                sampled.push(SampledMetric {
                    kind: SampledKind::Gauge,
                    name: "start_queue_orders",
                    help: "Accepted orders whose execution waits in the start queue to be started",
                    read: Box::new(move || depth.len() as u64),
                });
                (Some(queue), Some((task, ids)))
            }
            None => (None, None),
        };
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
            keeper_interval(settings.saga.approval_heartbeat),
        );
        let intake = Arc::new(OrderIntake {
            orders: ports.orders.clone(),
            inventory: ports.inventory.clone(),
            workflow: workflow.clone(),
            settings: settings.saga.clone(),
            queue,
        });
        let start_queue = queued.map(|(task, ids)| (task, resume(intake.clone(), ids)));
        drop(on_background);
        let router = http::router(AppState {
            ports,
            workflow,
            intake,
            auth,
            limits: settings.limits.clone(),
            metrics,
        });
        Ok(Service {
            listener,
            local_addr,
            bootstrap,
            router,
            read_timeout: settings.limits.read_timeout,
            workers,
            start_queue,
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
            engine,
            background,
            ..
        } = self;
        http::server::serve(listener, router, read_timeout, shutdown).await;
        if let Some((queue, resume)) = start_queue {
            resume.abort();
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

/// The payment provider chosen, checked: the sandbox by default on the embedded backend; the AWS
/// backend must be told (a deployment never simulates payments by accident).
fn payments(settings: &BackendSettings) -> Result<PaymentsSettings, StartupError> {
    match (&settings.payments, settings.kind) {
        (None, Backend::Embedded) => Ok(PaymentsSettings::Sandbox),
        (None, Backend::Aws) => Err(StartupError::Config(
            "--backend aws needs --payments (FULFILLMENT_PAYMENTS): `stripe` to charge through \
             the provider at --stripe-url, or `sandbox` for simulated payments (staging)"
                .to_owned(),
        )),
        (Some(PaymentsSettings::Stripe(c)), _) if c.secret_key.expose().is_empty() => {
            Err(StartupError::Config(
                "--payments stripe needs --stripe-key (FULFILLMENT_STRIPE_KEY)".to_owned(),
            ))
        }
        (Some(p), _) => Ok(p.clone()),
    }
}

fn stripe(config: &StripeConfig) -> Result<Arc<dyn PaymentGateway>, StartupError> {
    Ok(Arc::new(StripePayments::new(config.clone())?))
}

/// Opens the store's SQLite file with `open` (read-write for `serve`, read-only for the audit)
/// off the async runtime, naming the file in the error.
async fn open_store(
    path: &Path,
    open: fn(&Path) -> Result<SqliteStore, StoreError>,
) -> Result<SqliteStore, StartupError> {
    let owned = path.to_owned();
    tokio::task::spawn_blocking(move || open(&owned))
        .await
        .map_err(|e| StoreError::Internal(e.to_string()))
        .and_then(|r| r)
        .map_err(|source| StartupError::Store {
            path: path.to_owned(),
            source,
        })
}

/// The embedded backend: the SQLite store and the in-process engine beside it.
async fn open_embedded(
    settings: &BackendSettings,
    payments: PaymentsSettings,
) -> Result<Opened, StartupError> {
    let gateway = match &payments {
        PaymentsSettings::Sandbox => None,
        PaymentsSettings::Stripe(c) => Some(stripe(c)?),
    };
    let store = open_store(&settings.store_path, |p| SqliteStore::open(p)).await?;
    let engine_config = EngineConfig {
        // The engine runs the sagas: it yields to the threads accepting orders, as the workers do.
        on_writer_start: Some(lower_priority),
        ..EngineConfig::new(&settings.engine_path)
    };
    let engine =
        Engine::open(engine_config, None)
            .await
            .map_err(|source| StartupError::Engine {
                path: settings.engine_path.clone(),
                source,
            })?;
    let workflow = match EmbeddedWorkflow::setup(engine.clone()).await {
        Ok(w) => w,
        Err(e) => {
            engine.shutdown().await;
            return Err(e.into());
        }
    };
    // The engine and its workers share this process, so every task a worker held when the
    // last process stopped is lost with it: hand those out again now rather than after their
    // heartbeat timeouts. Parked approvals are held by the order, not by a worker, and stay.
    let held: Vec<String> = workflow
        .activity_arns()
        .iter()
        .filter(|(activity, _)| **activity != Activity::AwaitApproval)
        .map(|(_, arn)| arn.clone())
        .collect();
    match engine.expire_heartbeats(&held).await {
        Ok(0) => {}
        Ok(n) => tracing::info!(
            tasks = n,
            "tasks held when the last process stopped are handed out again"
        ),
        Err(e) => {
            tracing::warn!(error = %e, "tasks held when the last process stopped wait for their heartbeat timeouts")
        }
    }
    tracing::info!(
        store = %settings.store_path.display(),
        engine = %settings.engine_path.display(),
        "embedded backend open"
    );
    let unstarted = match store.accepted_order_ids().await {
        Ok(ids) => ids,
        Err(source) => {
            engine.shutdown().await;
            return Err(StartupError::Store {
                path: settings.store_path.clone(),
                source,
            });
        }
    };
    let mut ports = store.ports();
    if let Some(gateway) = gateway {
        ports.payments = gateway;
    }
    Ok(Opened {
        ports,
        activity_arns: workflow.activity_arns().clone(),
        workflow: Arc::new(workflow),
        sampled: embedded_counters(&engine, &store),
        engine: Some(engine),
        unstarted: Some(unstarted),
        keys: Arc::new(store),
    })
}

/// The embedded backend's commit counters: with `synchronous=FULL` each commit is one fsync,
/// so these say how much work each fsync carries.
fn embedded_counters(engine: &Engine, store: &SqliteStore) -> Vec<SampledMetric> {
    use std::sync::atomic::Ordering::Relaxed;
    let (e1, e2, s1, s2) = (engine.clone(), engine.clone(), store.clone(), store.clone());
    vec![
        SampledMetric {
            kind: SampledKind::Counter,
            name: "engine_commits",
            help: "Grouped transactions the workflow engine committed (one fsync each)",
            read: Box::new(move || e1.stats().commits.load(Relaxed)),
        },
        SampledMetric {
            kind: SampledKind::Counter,
            name: "engine_transitions",
            help: "States the workflow engine's executions entered",
            read: Box::new(move || e2.stats().transitions.load(Relaxed)),
        },
        SampledMetric {
            kind: SampledKind::Counter,
            name: "store_commits",
            help: "Grouped transactions the store committed (one fsync each)",
            read: Box::new(move || s1.writer_stats().commits.load(Relaxed)),
        },
        SampledMetric {
            kind: SampledKind::Counter,
            name: "store_writes",
            help: "Writes carried by the store's commits",
            read: Box::new(move || s2.writer_stats().writes.load(Relaxed)),
        },
    ]
}

/// The AWS SDK's configuration: the standard chain (environment, profiles, instance roles,
/// AWS_ENDPOINT_URL[_SFN|_DYNAMODB]) with the flags on top. A region is required.
pub async fn aws_sdk_config(aws: &AwsSettings) -> Result<aws_config::SdkConfig, StartupError> {
    let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest());
    if let Some(region) = &aws.region {
        loader = loader.region(aws_config::Region::new(region.clone()));
    }
    if let Some(profile) = &aws.profile {
        loader = loader.profile_name(profile);
    }
    if let Some(url) = &aws.endpoint_url {
        loader = loader.endpoint_url(url);
    }
    // A call that hangs is retried rather than waited on (the activity polls, which Step
    // Functions holds for up to 60 s, have their own timeout in the workflow adapter).
    loader = loader.timeout_config(
        aws_config::timeout::TimeoutConfig::builder()
            .connect_timeout(Duration::from_millis(3100))
            .operation_attempt_timeout(Duration::from_secs(10))
            .operation_timeout(Duration::from_secs(30))
            .build(),
    );
    let config = loader.load().await;
    if config.region().is_none() {
        return Err(StartupError::Config(
            "no AWS region: set --aws-region, AWS_REGION or the profile's region".to_owned(),
        ));
    }
    Ok(config)
}

/// The AWS backend's two services, each checked once (a wrong endpoint, table or credential
/// fails the start, not the first order).
async fn connect_aws(
    settings: &BackendSettings,
) -> Result<(AwsWorkflow, DynamoStore), StartupError> {
    let arn = settings.state_machine_arn.as_deref().ok_or_else(|| {
        StartupError::Config(
            "--backend aws needs --state-machine-arn (FULFILLMENT_STATE_MACHINE_ARN): \
             `fulfillment provision` prints it, deploy/template.yaml outputs it"
                .to_owned(),
        )
    })?;
    let sdk = aws_sdk_config(&settings.aws).await?;
    let workflow = AwsWorkflow::new(aws_sdk_sfn::Client::new(&sdk), arn)
        .map_err(|e| StartupError::Config(format!("--state-machine-arn: {e}")))?;
    let store = DynamoStore::new(
        aws_sdk_dynamodb::Client::new(&sdk),
        settings.aws.table.clone(),
    );
    if let Err(unready) = http::health::probe(&store, &workflow).await {
        return Err(StartupError::AwsUnreachable {
            what: unready.what,
            reason: unready.error,
        });
    }
    tracing::info!(
        state_machine = %arn,
        table = %settings.aws.table,
        region = ?sdk.region(),
        "AWS backend reachable"
    );
    Ok((workflow, store))
}

/// Who charges on the AWS backend: the sandbox keeps its ledger in the table.
fn aws_payments(
    store: &DynamoStore,
    payments: &PaymentsSettings,
) -> Result<Arc<dyn PaymentGateway>, StartupError> {
    match payments {
        PaymentsSettings::Sandbox => Ok(Arc::new(store.payments())),
        PaymentsSettings::Stripe(c) => stripe(c),
    }
}

/// The AWS backend: Step Functions and DynamoDB.
async fn open_aws(
    settings: &BackendSettings,
    payments: PaymentsSettings,
) -> Result<Opened, StartupError> {
    let (workflow, store) = connect_aws(settings).await?;
    let ports = Ports {
        payments: aws_payments(&store, &payments)?,
        ..store.ports()
    };
    Ok(Opened {
        ports,
        activity_arns: workflow.activity_arns().clone(),
        workflow: Arc::new(workflow),
        engine: None,
        sampled: Vec::new(),
        unstarted: None,
        keys: Arc::new(store),
    })
}

/// `fulfillment audit`: opens the backend for reading (the embedded one's files read-only, with
/// neither engine nor workers; on AWS the table, Step Functions and the provider as `serve`
/// reaches them), checks it, prints one line per violation and the summary on stdout, and
/// returns what it found.
pub async fn run_audit(settings: AuditSettings) -> Result<audit::Report, StartupError> {
    let backend = &settings.backend;
    let payments = payments(backend)?;
    let sources = match backend.kind {
        Backend::Embedded => audit_embedded(backend, payments).await?,
        Backend::Aws => audit_aws(backend, payments).await?,
    };
    let report = audit::run(&sources, audit::RECHECK_AFTER).await?;
    let mut out = std::io::stdout().lock();
    // A closed stdout (`| head`) loses lines, not the exit status.
    let _ = audit::print(&report, &mut out);
    let _ = out.flush();
    Ok(report)
}

/// The embedded backend for an audit: the store file and the engine's beside it, both opened
/// read-only (the service may be running on them). Neither is created: a missing one is a
/// wrong `--db`.
async fn audit_embedded(
    settings: &BackendSettings,
    payments: PaymentsSettings,
) -> Result<Sources, StartupError> {
    for (path, what) in [
        (&settings.store_path, "store"),
        (&settings.engine_path, "engine state"),
    ] {
        if !path.exists() {
            return Err(StartupError::Config(format!(
                "no {what} at {} (--db, FULFILLMENT_DB): point --db at the store `fulfillment \
                 serve` uses; its engine state sits beside it",
                path.display()
            )));
        }
    }
    let store = open_store(&settings.store_path, |p| SqliteStore::open_read_only(p)).await?;
    let engine_path = settings.engine_path.clone();
    let inspector = tokio::task::spawn_blocking(move || Inspector::open(&engine_path))
        .await
        .map_err(|e| EngineError::Internal(e.to_string()))
        .and_then(|r| r)
        .map_err(|source| StartupError::Engine {
            path: settings.engine_path.clone(),
            source,
        })?;
    let payments = match &payments {
        PaymentsSettings::Sandbox => Arc::new(store.payments()) as Arc<dyn PaymentGateway>,
        PaymentsSettings::Stripe(c) => stripe(c)?,
    };
    tracing::info!(
        store = %settings.store_path.display(),
        engine = %settings.engine_path.display(),
        "auditing the embedded backend (read-only)"
    );
    Ok(Sources {
        ports: Ports {
            payments,
            ..store.ports()
        },
        executions: Arc::new(EmbeddedExecutions::new(inspector)) as Arc<dyn Executions>,
    })
}

/// The AWS backend for an audit: the table, Step Functions and the provider, reached and
/// checked as `serve --backend aws` does.
async fn audit_aws(
    settings: &BackendSettings,
    payments: PaymentsSettings,
) -> Result<Sources, StartupError> {
    let (workflow, store) = connect_aws(settings).await?;
    Ok(Sources {
        ports: Ports {
            payments: aws_payments(&store, &payments)?,
            ..store.ports()
        },
        executions: Arc::new(WorkflowExecutions::new(Arc::new(workflow))),
    })
}

/// `fulfillment keys`: creates, lists or revokes API keys in the backend's store (the
/// embedded one's SQLite file, beside a running service; or the DynamoDB table).
pub async fn run_keys(settings: KeysSettings) -> Result<(), StartupError> {
    let backend = &settings.backend;
    let keys: Arc<dyn KeyRepository> = match backend.kind {
        Backend::Embedded => {
            let creating = matches!(settings.action, KeysAction::Create { .. });
            if !creating && !backend.store_path.exists() {
                return Err(StartupError::Config(format!(
                    "no store at {} (--db, FULFILLMENT_DB)",
                    backend.store_path.display()
                )));
            }
            Arc::new(open_store(&backend.store_path, |p| SqliteStore::open(p)).await?)
        }
        Backend::Aws => {
            let sdk = aws_sdk_config(&backend.aws).await?;
            Arc::new(DynamoStore::new(
                aws_sdk_dynamodb::Client::new(&sdk),
                backend.aws.table.clone(),
            ))
        }
    };
    let mut out = std::io::stdout().lock();
    match &settings.action {
        KeysAction::Create { name, role } => {
            let (text, key) = crate::keys::create(keys.as_ref(), name, *role)
                .await
                .map_err(StartupError::Keys)?;
            let _ = writeln!(out, "{}", text.expose());
            eprintln!(
                "key {} for {} ({}): shown this once, only its hash is kept",
                key.key_id,
                key.principal,
                key.role.as_str()
            );
        }
        KeysAction::List => {
            let listed = keys.list_keys().await.map_err(keys_failed)?;
            let _ = writeln!(out, "key_id\tprincipal\trole\tcreated\tlast_used\trevoked");
            for key in &listed {
                let _ = writeln!(out, "{}", crate::keys::list_line(key));
            }
        }
        KeysAction::Revoke { key_id } => {
            match keys
                .revoke(key_id, chrono::Utc::now())
                .await
                .map_err(keys_failed)?
            {
                Some(key) => {
                    let _ = writeln!(out, "{}", crate::keys::list_line(&key));
                    eprintln!(
                        "revoked: every replica refuses it within {} s",
                        http::auth::KEY_CACHE_TTL.as_secs()
                    );
                }
                None => {
                    return Err(StartupError::Config(format!("no key {key_id:?}")));
                }
            }
        }
    }
    let _ = out.flush();
    Ok(())
}

/// `fulfillment provision`: creates the table, the activities and the state machine (each
/// idempotently) and prints what `serve --backend aws` needs.
pub async fn run_provision(settings: ProvisionSettings) -> Result<(), StartupError> {
    let sdk = aws_sdk_config(&settings.aws).await?;
    let table = &settings.aws.table;
    store::dynamodb::create_table(&aws_sdk_dynamodb::Client::new(&sdk), table)
        .await
        .map_err(|source| StartupError::Table {
            table: table.clone(),
            source,
        })?;
    tracing::info!(%table, "table ready");
    let provisioned =
        workflow::aws::provision(&aws_sdk_sfn::Client::new(&sdk), &settings.role_arn).await?;
    tracing::info!(state_machine = %provisioned.state_machine_arn, "state machine ready");
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "FULFILLMENT_TABLE={table}");
    let _ = writeln!(
        out,
        "FULFILLMENT_STATE_MACHINE_ARN={}",
        provisioned.state_machine_arn
    );
    let _ = out.flush();
    Ok(())
}

/// A started `fulfillment engine`: the engine is open and the listener bound; the Step
/// Functions endpoint serves once [`EngineServer::serve`] runs.
pub struct EngineServer {
    listener: TcpListener,
    local_addr: SocketAddr,
    router: axum::Router,
    engine: Engine,
}

impl EngineServer {
    /// Opens the engine (no task handler: only activities run tasks) and binds the listener.
    pub async fn start(settings: &EngineSettings) -> Result<EngineServer, StartupError> {
        // The address first: a start that cannot serve creates nothing on disk.
        let (listener, local_addr) = bind(settings.listen).await?;
        let mut config = EngineConfig::new(&settings.db_path);
        config.region = settings.region.clone();
        config.account_id = settings.account_id.clone();
        let engine = Engine::open(config, None)
            .await
            .map_err(|source| StartupError::Engine {
                path: settings.db_path.clone(),
                source,
            })?;
        tracing::info!(engine = %settings.db_path.display(), "engine open");
        let router = sfn_server::router(engine.clone(), settings.endpoint.clone());
        Ok(EngineServer {
            listener,
            local_addr,
            router,
            engine,
        })
    }

    /// The address the listener is bound to (the real port when configured with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Serves until `shutdown` completes, finishes the requests in flight (long polls end
    /// within their wait), then closes the engine.
    pub async fn serve(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), StartupError> {
        let served = axum::serve(self.listener, self.router)
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(StartupError::Serve);
        self.engine.shutdown().await;
        tracing::info!("engine closed; bye");
        served
    }
}

/// `fulfillment engine`: the engine alone behind its Step Functions endpoint, until
/// SIGTERM/Ctrl-C (a second signal exits at once, status 130).
pub async fn run_engine(settings: EngineSettings) -> Result<(), StartupError> {
    let server = EngineServer::start(&settings).await?;
    let addr = server.local_addr();
    tracing::info!(%addr, "listening");
    announce(addr);
    server.serve(drain_on_signal()).await
}

/// The line scripts wait for: `listening on http://ADDR` on stdout.
fn announce(addr: SocketAddr) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "listening on http://{}", reachable(addr));
    let _ = out.flush();
}

/// Resolves on the first stop signal; a second one exits without waiting for the drain.
async fn drain_on_signal() {
    shutdown_signal().await;
    tracing::info!("shutdown requested: finishing the requests in flight");
    // The drain is bounded (request timeout, step durations), but an operator who asks twice
    // means it.
    tokio::spawn(async {
        shutdown_signal().await;
        eprintln!("second stop signal: exiting without finishing the drain");
        std::process::exit(130);
    });
}

/// The listener and the address it got (the real port when `addr` has port 0).
async fn bind(addr: SocketAddr) -> Result<(TcpListener, SocketAddr), StartupError> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| StartupError::Bind { addr, source })?;
    let local = listener
        .local_addr()
        .map_err(|source| StartupError::Bind { addr, source })?;
    Ok((listener, local))
}

/// The address a client on this machine reaches: a wildcard bind is reached on loopback.
fn reachable(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => {
            SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), addr.port())
        }
        IpAddr::V6(ip) if ip.is_unspecified() => {
            SocketAddr::new(IpAddr::V6(std::net::Ipv6Addr::LOCALHOST), addr.port())
        }
        _ => addr,
    }
}

/// What a person starting the service reads (on stderr, beside the logs): where it serves,
/// where its documentation is, and how to authenticate, with commands to paste. The keys a
/// first start created are shown here, once: only their hashes are kept.
pub fn start_banner(
    bootstrap: Option<&BootstrapKeys>,
    keys_command: &str,
    addr: SocketAddr,
) -> String {
    let base = format!("http://{}", reachable(addr));
    let keys = match bootstrap {
        Some(BootstrapKeys { operator, client }) => format!(
            "First start: two API keys were created. They are shown this once (only their hashes \
             are kept):\n\
             \x20 operator key ({}): {}\n\
             \x20   curl -H \"Authorization: Bearer {}\" {base}/approvals\n\
             \x20 client key ({}):   {}\n\
             \x20   curl -H \"Authorization: Bearer {}\" {base}/inventory\n",
            operator.0,
            operator.1.expose(),
            operator.1.expose(),
            client.0,
            client.1.expose(),
            client.1.expose(),
        ),
        None => String::new(),
    };
    format!(
        "\n\
         fulfillment {version} is serving on {base}\n\
         \x20 API docs (Swagger UI): {base}/docs\n\
         \x20 OpenAPI document:      {base}/openapi.json\n\
         \n\
         Every operation takes `Authorization: Bearer <API key>`: a client's key places and\n\
         reads its own orders, an operator's does everything.\n\
         {keys}\
         Keys: {keys_command}\n\n",
        version = env!("CARGO_PKG_VERSION"),
    )
}

/// Resolves on SIGTERM or Ctrl-C (SIGINT).
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}

/// `fulfillment serve`: starts, announces the address (and a generated token), serves until
/// SIGTERM/Ctrl-C, and shuts down in order. A second signal during the drain exits at once
/// (status 130); nothing is lost, running executions continue on the next start.
pub async fn run(settings: Settings) -> Result<(), StartupError> {
    let service = Service::start(&settings).await?;
    let addr = service.local_addr();
    let mut err = std::io::stderr().lock();
    let keys_command = match settings.backend.kind {
        Backend::Embedded => format!(
            "target/release/fulfillment keys create|list|revoke --db {}",
            settings.backend.store_path.display()
        ),
        Backend::Aws => "fulfillment keys create|list|revoke --backend aws (with the replicas' \
                         settings)"
            .to_owned(),
    };
    let banner = start_banner(service.bootstrap(), &keys_command, addr);
    let _ = err.write_all(banner.as_bytes());
    let _ = err.flush();
    drop(err);
    tracing::info!(%addr, "listening");
    announce(addr);
    service.serve(drain_on_signal()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keeper_heartbeats_five_times_a_window_at_most_once_a_second() {
        assert_eq!(
            keeper_interval(Duration::from_secs(300)),
            Duration::from_secs(60)
        );
        assert_eq!(
            keeper_interval(Duration::from_secs(2)),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn the_banner_shows_the_url_the_docs_and_ready_curl_lines_on_a_reachable_address() {
        let operator = crate::keys::generate("admin", Role::Operator, chrono::Utc::now()).0;
        let client = crate::keys::generate("shop", Role::Client, chrono::Utc::now()).0;
        let keys = BootstrapKeys {
            operator: ("admin".to_owned(), operator.clone()),
            client: ("shop".to_owned(), client.clone()),
        };
        let banner = start_banner(Some(&keys), "keys …", "0.0.0.0:8080".parse().unwrap());
        assert!(
            banner.contains("serving on http://127.0.0.1:8080\n"),
            "{banner}"
        );
        assert!(banner.contains("http://127.0.0.1:8080/docs"), "{banner}");
        assert!(
            banner.contains("http://127.0.0.1:8080/openapi.json"),
            "{banner}"
        );
        let curls: Vec<_> = banner.lines().filter(|l| l.contains("curl ")).collect();
        assert_eq!(
            curls,
            [
                format!(
                    "    curl -H \"Authorization: Bearer {}\" http://127.0.0.1:8080/approvals",
                    operator.expose()
                ),
                format!(
                    "    curl -H \"Authorization: Bearer {}\" http://127.0.0.1:8080/inventory",
                    client.expose()
                ),
            ]
        );
        let later = start_banner(None, "keys …", "127.0.0.1:8080".parse().unwrap());
        assert!(!later.contains("fk_"), "keys are shown once: {later}");
        assert!(later.contains("Keys: keys …"), "{later}");
    }

    #[tokio::test]
    async fn a_first_start_creates_an_operator_and_a_client_key_and_later_starts_none() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("s.db")).unwrap();
        let first = bootstrap_keys(Backend::Embedded, &store)
            .await
            .unwrap()
            .unwrap();
        let auth = Authenticator::new(Arc::new(store.clone()), None);
        let op = auth
            .authenticate(first.operator.1.expose().as_bytes())
            .await
            .unwrap();
        assert_eq!(
            op.map(|c| (c.principal, c.role)),
            Some(("admin".to_owned(), Role::Operator))
        );
        let cl = auth
            .authenticate(first.client.1.expose().as_bytes())
            .await
            .unwrap();
        assert_eq!(
            cl.map(|c| (c.principal, c.role)),
            Some(("shop".to_owned(), Role::Client))
        );
        assert!(
            bootstrap_keys(Backend::Embedded, &store)
                .await
                .unwrap()
                .is_none()
        );
        assert_eq!(store.list_keys().await.unwrap().len(), 2);
        // AWS replicas never create keys themselves.
        let other = SqliteStore::open(dir.path().join("t.db")).unwrap();
        assert!(
            bootstrap_keys(Backend::Aws, &other)
                .await
                .unwrap()
                .is_none()
        );
    }

    #[tokio::test]
    async fn a_start_on_a_busy_address_creates_nothing() {
        let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let settings = Settings {
            listen: busy.local_addr().unwrap(),
            ..settings(&dir)
        };
        let e = Service::start(&settings).await.err().unwrap();
        assert!(matches!(e, StartupError::Bind { .. }), "{e}");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert!(left.is_empty(), "nothing on disk: {left:?}");
    }

    #[tokio::test]
    async fn the_aws_backend_needs_its_state_machine_and_a_payments_choice() {
        let dir = tempfile::tempdir().unwrap();
        let base = settings(&dir).backend;
        for (backend, needs) in [
            (
                BackendSettings {
                    kind: Backend::Aws,
                    payments: Some(PaymentsSettings::Sandbox),
                    ..base.clone()
                },
                "--state-machine-arn",
            ),
            (
                BackendSettings {
                    kind: Backend::Aws,
                    state_machine_arn: Some(
                        "arn:aws:states:us-east-1:123456789012:stateMachine:fulfillment-order-saga"
                            .to_owned(),
                    ),
                    ..base.clone()
                },
                "--payments",
            ),
            (
                BackendSettings {
                    payments: Some(PaymentsSettings::Stripe(StripeConfig {
                        base_url: "https://api.stripe.com".to_owned(),
                        secret_key: store::stripe::SecretKey::new(""),
                        timeout: Duration::from_secs(5),
                    })),
                    ..base.clone()
                },
                "--stripe-key",
            ),
        ] {
            let serve = Settings {
                backend: backend.clone(),
                operator_token: Some(OperatorToken::new("configured-token-0123456789")),
                ..settings(&dir)
            };
            let e = Service::start(&serve).await.err().unwrap();
            assert_eq!(e.exit_code(), 2, "{e}");
            assert!(e.to_string().contains(needs), "{e}");
            let audit = AuditSettings {
                backend,
                log_format: crate::config::LogFormat::Text,
            };
            let e = run_audit(audit).await.err().unwrap();
            assert_eq!(e.exit_code(), 2, "audit: {e}");
            assert!(e.to_string().contains(needs), "audit: {e}");
            assert!(!base.store_path.exists(), "nothing was created");
        }
    }

    #[tokio::test]
    async fn an_audit_of_a_store_that_does_not_exist_is_a_wrong_setting_and_creates_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let backend = settings(&dir).backend;
        let audit = AuditSettings {
            backend: backend.clone(),
            log_format: crate::config::LogFormat::Text,
        };
        let e = run_audit(audit).await.err().unwrap();
        assert_eq!(e.exit_code(), 2, "{e}");
        assert!(e.to_string().contains("--db"), "{e}");
        assert!(!backend.store_path.exists() && !backend.engine_path.exists());
    }

    fn settings(dir: &tempfile::TempDir) -> Settings {
        let db = dir.path().join("f.db");
        Settings {
            listen: "127.0.0.1:0".parse().unwrap(),
            backend: BackendSettings {
                kind: Backend::Embedded,
                aws: crate::config::AwsSettings {
                    region: None,
                    profile: None,
                    endpoint_url: None,
                    table: "fulfillment".to_owned(),
                },
                state_machine_arn: None,
                payments: None,
                engine_path: crate::config::engine_path(&db),
                store_path: db,
            },
            operator_token: None,
            saga: Default::default(),
            limits: Default::default(),
            rate_limits: Default::default(),
            log_format: crate::config::LogFormat::Text,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn starts_serves_and_stops_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let settings = settings(&dir);
        let service = Service::start(&settings).await.unwrap();
        assert!(service.bootstrap().is_some(), "a first start creates keys");
        let addr = service.local_addr();
        assert_ne!(addr.port(), 0);
        assert!(settings.backend.store_path.exists());
        assert!(dir.path().join("f.engine.db").exists());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(service.serve(async {
            let _ = stopped.await;
        }));
        let health = reqwest::get(format!("http://{addr}/healthz"))
            .await
            .unwrap();
        assert_eq!(health.status(), 200);
        stop.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(30), server)
            .await
            .expect("the service stops")
            .unwrap()
            .unwrap();
        assert!(tokio::net::TcpStream::connect(addr).await.is_err());
    }
}
