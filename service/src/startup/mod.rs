//! The composition root: each `fulfillment` command composed from its parts. `serve` (the
//! service, [`Service`]) opens a backend (`backends`), starts the saga's workers, builds order
//! intake and the router, binds the listener, and on shutdown takes it all down in order;
//! `audit` (`auditing`), `keys`, `provision` and `engine` each have their file. Here: the start-up errors,
//! the banner, the signals and [`run`].

use crate::config::{
    AuditSettings, AwsSettings, Backend, BackendSettings, EngineSettings, KeysAction, KeysSettings,
    PaymentsSettings, ProvisionSettings, Settings, ShippingSettings,
};
use api::http::auth::Authenticator;
use api::http::{self, AppState, OperatorToken};
use api::keys::{KeyError, KeyText};
use engine::{Engine, EngineConfig, EngineError, Inspector};
use intake::OrderIntake;
use intake::start_queue::{StartQueue, StartQueueSettings, StartQueueTask};
use ops::audit::{self, AuditError, EmbeddedExecutions, Executions, Sources, WorkflowExecutions};
use ops::repair::{Plan, Reconciler, RepairError, RepairLoop, RepairSettings, lease_duration};
use providers::easypost::{EasyPostShipping, LabelBook};
use providers::sandbox::{self, SandboxPayments};
use providers::stripe::{StripeConfig, StripeConfigError, StripePayments};
use std::collections::HashMap;
use std::future::Future;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use store::{
    GatewayError, KeyRepository, Lease, PaymentGateway, Ports, Role, ShippingGateway, StoreError,
    Unshared, WebhookRepository,
};
use store_dynamodb::{DynamoLease, DynamoShardLeases, DynamoStore};
use store_sqlite::SqliteStore;
use telemetry::{Metrics, SampledKind, SampledMetric};
use tokio::net::TcpListener;
use webhooks::Webhooks;
use workflow::aws::AwsWorkflow;
use workflow::definition::Activity;
use workflow::steps::approval::{KeeperSettings, KeeperStats};
use workflow::{EmbeddedWorkflow, SagaWorkers, WorkerSettings, WorkflowError, WorkflowPort};

mod app;
mod auditing;
mod backends;
mod backup;
mod engine_server;
mod keys;
mod process;
mod provision;
mod serve;
mod versions;

pub use app::App;
use app::reconciler;
pub use auditing::{Audited, run_audit, run_repair};
use backends::*;
pub use backends::{Opened, aws_sdk_config, open};
pub use backup::{run_backup, run_restore};
pub use engine_server::{EngineServer, run_engine};
use keys::*;
pub use keys::{BOOTSTRAP_CLIENT_NAME, BOOTSTRAP_OPERATOR_NAME, BootstrapKeys, run_keys};
pub use process::tune as tune_process;
pub use provision::run_provision;
use serve::*;
pub use serve::{BLOCKING_THREADS, Service, keeper_interval};
pub use versions::run_versions;

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
    #[error("the repair could not finish: {0}")]
    Repair(#[from] RepairError),
    /// `audit --repair` on AWS while a replica's repair loop holds the lease.
    #[error(
        "a replica's repair loop holds the repair lease (it repairs every --repair-interval); \
         try again once it is stopped, or leave it to the loop"
    )]
    RepairLeaseHeld,
    #[error("{0}")]
    Keys(KeyError),
    #[error("backup or restore failed: {0}")]
    Backup(String),
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

/// The line scripts wait for: `listening on http://ADDR` on stdout.
fn announce(addr: SocketAddr) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "listening on http://{}", reachable(addr));
    let _ = out.flush();
}

/// Resolves on the first stop signal; a second one exits without waiting for the drain. The
/// signals are caught from the call on, not from the first poll: call it before announcing the
/// address, so that a stop sent as soon as the address is read is a graceful one (a SIGTERM
/// before the handler is installed kills the process outright).
fn drain_on_signal() -> impl Future<Output = ()> + Send + 'static {
    let first = shutdown_signal();
    async move {
        first.await;
        tracing::info!("shutdown requested: finishing the requests in flight");
        // The drain is bounded (request timeout, step durations), but an operator who asks
        // twice means it.
        tokio::spawn(async {
            shutdown_signal().await;
            eprintln!("second stop signal: exiting without finishing the drain");
            std::process::exit(130);
        });
    }
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

/// Resolves on SIGTERM or Ctrl-C (SIGINT), caught from this call on (on unix both handlers
/// are installed here, before the future is first polled; once installed, Tokio keeps them
/// for the process's life).
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::SignalKind;
        let (term, int) = (
            caught(SignalKind::terminate(), "SIGTERM"),
            caught(SignalKind::interrupt(), "Ctrl-C"),
        );
        async move {
            tokio::select! {
                () = term => {},
                () = int => {},
            }
        }
    }
    #[cfg(not(unix))]
    async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    }
}

/// Resolves when `kind` arrives; its handler is installed now. One that cannot be installed is
/// logged and never resolves.
#[cfg(unix)]
fn caught(
    kind: tokio::signal::unix::SignalKind,
    name: &'static str,
) -> impl Future<Output = ()> + Send + 'static {
    let listener = tokio::signal::unix::signal(kind)
        .inspect_err(|e| tracing::error!(error = %e, "cannot listen for {name}"))
        .ok();
    async move {
        match listener {
            Some(mut s) => drop(s.recv().await),
            None => std::future::pending::<()>().await,
        }
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
    let stop = drain_on_signal();
    announce(addr);
    service.serve(stop).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keeper_heartbeats_five_times_a_window_at_most_five_times_a_second() {
        assert_eq!(
            keeper_interval(Duration::from_secs(300)),
            Duration::from_secs(60)
        );
        assert_eq!(
            keeper_interval(Duration::from_secs(1)),
            Duration::from_millis(200)
        );
        assert_eq!(
            keeper_interval(Duration::from_millis(500)),
            Duration::from_millis(200)
        );
    }

    #[test]
    fn the_banner_shows_the_url_the_docs_and_ready_curl_lines_on_a_reachable_address() {
        let operator = api::keys::generate("admin", Role::Operator, chrono::Utc::now()).0;
        let client = api::keys::generate("shop", Role::Client, chrono::Utc::now()).0;
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
                        secret_key: providers::stripe::SecretKey::new(""),
                        timeout: Duration::from_secs(5),
                        key_prefix: String::new(),
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
                repair: None,
                shipping: None,
            };
            let e = run_audit(audit).await.err().unwrap();
            assert_eq!(e.exit_code(), 2, "audit: {e}");
            assert!(e.to_string().contains(needs), "audit: {e}");
            assert!(!base.store_path.exists(), "nothing was created");
        }
    }

    #[tokio::test]
    async fn a_live_payment_key_needs_its_carrier_chosen_by_name() {
        let stripe = |key: &str| {
            PaymentsSettings::Stripe(StripeConfig {
                base_url: "https://api.stripe.com".to_owned(),
                secret_key: providers::stripe::SecretKey::new(key),
                timeout: Duration::from_secs(5),
                key_prefix: String::new(),
            })
        };
        let e = shipping(None, &stripe("sk_live_x")).await.err().unwrap();
        assert_eq!(e.exit_code(), 2, "{e}");
        assert!(e.to_string().contains("--shipping sandbox"), "{e}");
        let said = shipping(Some(&ShippingSettings::Sandbox), &stripe("sk_live_x")).await;
        assert!(matches!(said, Ok(ShippingSettings::Sandbox)));
        for payments in [stripe("sk_test_x"), PaymentsSettings::Sandbox] {
            let default = shipping(None, &payments).await;
            assert!(matches!(default, Ok(ShippingSettings::Sandbox)));
        }
    }

    #[tokio::test]
    async fn an_audit_of_a_store_that_does_not_exist_is_a_wrong_setting_and_creates_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let backend = settings(&dir).backend;
        let audit = AuditSettings {
            backend: backend.clone(),
            log_format: crate::config::LogFormat::Text,
            repair: None,
            shipping: None,
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
            shipping: None,
            backend: BackendSettings {
                kind: Backend::Embedded,
                aws: crate::config::AwsSettings {
                    region: None,
                    profile: None,
                    endpoint_url: None,
                    table: "fulfillment".to_owned(),
                },
                state_machine_arn: None,
                canary_percent: None,
                payments: None,
                engine_path: crate::config::engine_path(&db),
                store_path: db,
            },
            operator_token: None,
            saga: Default::default(),
            keeper_rate: std::num::NonZeroU32::new(100).unwrap(),
            limits: Default::default(),
            rate_limits: Default::default(),
            log_format: crate::config::LogFormat::Text,
            repair: Default::default(),
            retention: None,
            webhooks: Default::default(),
            console: Default::default(),
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
