//! The composition root of `fulfillment serve`: opens the store and the engine, starts the
//! saga's workers, builds order intake and the router, binds the listener, and on shutdown
//! takes it all down in order (listener and requests, then workers, then engine).

use crate::config::{Backend, EngineSettings, Settings};
use crate::http::{self, AppState, Metrics, OperatorToken};
use crate::orders::OrderIntake;
use crate::saga::{SagaPorts, SagaWorkers};
use crate::sfn_server;
use engine::{Engine, EngineConfig, EngineError};
use std::future::Future;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use store::{SqliteStore, StoreError};
use tokio::net::TcpListener;
use workflow::runtime::WorkerSettings;
use workflow::{EmbeddedWorkflow, WorkflowError};

/// Why the service could not start or stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error(
        "the AWS backend (--backend aws) is not built yet; run with --backend embedded (the default)"
    )]
    AwsNotBuilt,
    #[error("cannot open the store {path}: {source}")]
    Store { path: PathBuf, source: StoreError },
    #[error("cannot open the engine's state {path}: {source}")]
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
}

impl StartupError {
    /// The process exit code: 2 for a configuration that cannot work, 1 for anything else.
    pub fn exit_code(&self) -> i32 {
        match self {
            StartupError::AwsNotBuilt => 2,
            _ => 1,
        }
    }
}

/// The operator token in use, and whether it was generated at start-up (then it is shown once).
#[derive(Debug, Clone)]
pub struct Token {
    pub token: OperatorToken,
    pub generated: bool,
}

/// 32 random bytes, hex: what the service uses when no operator token is configured.
pub fn generate_token() -> OperatorToken {
    let bytes: [u8; 32] = rand::random();
    OperatorToken::new(bytes.iter().map(|b| format!("{b:02x}")).collect::<String>())
}

/// How the activity workers run in the service. Polls are short so that a stop (which waits
/// for the polls in flight) is quick.
fn worker_settings() -> WorkerSettings {
    WorkerSettings {
        poll_wait: Duration::from_secs(1),
        ..WorkerSettings::default()
    }
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
    token: Token,
    router: axum::Router,
    workers: SagaWorkers,
    engine: Engine,
}

impl Service {
    /// Opens the embedded stack and binds the listener.
    pub async fn start(settings: &Settings) -> Result<Service, StartupError> {
        if settings.backend == Backend::Aws {
            return Err(StartupError::AwsNotBuilt);
        }
        let store_path = settings.store_path.clone();
        let store = tokio::task::spawn_blocking(move || SqliteStore::open(&store_path))
            .await
            .map_err(|e| StoreError::Internal(e.to_string()))
            .and_then(|r| r)
            .map_err(|source| StartupError::Store {
                path: settings.store_path.clone(),
                source,
            })?;
        let engine = Engine::open(EngineConfig::new(&settings.engine_path), None)
            .await
            .map_err(|source| StartupError::Engine {
                path: settings.engine_path.clone(),
                source,
            })?;
        let listener = match bind(settings.listen).await {
            Ok(l) => l,
            Err(e) => {
                engine.shutdown().await;
                return Err(e);
            }
        };
        let local_addr = listener.local_addr().map_err(|source| StartupError::Bind {
            addr: settings.listen,
            source,
        })?;
        let workflow = match EmbeddedWorkflow::setup(engine.clone()).await {
            Ok(w) => Arc::new(w),
            Err(e) => {
                engine.shutdown().await;
                return Err(e.into());
            }
        };
        tracing::info!(
            store = %settings.store_path.display(),
            engine = %settings.engine_path.display(),
            "embedded backend open"
        );

        let ports = SagaPorts::sqlite(&store);
        let workers = SagaWorkers::start_embedded(
            &ports,
            workflow.clone(),
            worker_settings(),
            keeper_interval(settings.saga.approval_heartbeat),
        );
        let intake = Arc::new(OrderIntake {
            orders: ports.orders.clone(),
            workflow: workflow.clone(),
            settings: settings.saga.clone(),
        });
        let token = match &settings.operator_token {
            Some(token) => Token {
                token: token.clone(),
                generated: false,
            },
            None => Token {
                token: generate_token(),
                generated: true,
            },
        };
        let router = http::router(AppState {
            orders: ports.orders.clone(),
            inventory: ports.inventory.clone(),
            workflow,
            intake,
            operator_token: token.token.clone(),
            limits: settings.limits.clone(),
            payments: ports.payments.clone(),
            shipping: ports.shipping.clone(),
            metrics: Metrics::new(),
        });
        Ok(Service {
            listener,
            local_addr,
            token,
            router,
            workers,
            engine,
        })
    }

    /// The address the listener is bound to (the real port when configured with port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub fn token(&self) -> &Token {
        &self.token
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
            workers,
            engine,
            ..
        } = self;
        let served = axum::serve(listener, router)
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(StartupError::Serve);
        tracing::info!("HTTP server stopped; stopping the workers");
        workers.stop().await;
        engine.shutdown().await;
        tracing::info!("engine closed; bye");
        served
    }
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
        let mut config = EngineConfig::new(&settings.db_path);
        config.region = settings.region.clone();
        config.account_id = settings.account_id.clone();
        let engine = Engine::open(config, None)
            .await
            .map_err(|source| StartupError::Engine {
                path: settings.db_path.clone(),
                source,
            })?;
        let bound = match bind(settings.listen).await {
            Ok(l) => l
                .local_addr()
                .map(|a| (l, a))
                .map_err(|source| StartupError::Bind {
                    addr: settings.listen,
                    source,
                }),
            Err(e) => Err(e),
        };
        let (listener, local_addr) = match bound {
            Ok(b) => b,
            Err(e) => {
                engine.shutdown().await;
                return Err(e);
            }
        };
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

async fn bind(addr: SocketAddr) -> Result<TcpListener, StartupError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| StartupError::Bind { addr, source })
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

/// The one time a generated token is shown: on stderr, with a command that uses it.
pub fn token_banner(token: &OperatorToken, addr: SocketAddr) -> String {
    format!(
        "No operator token configured (--operator-token / FULFILLMENT_OPERATOR_TOKEN); generated one for this run.\n\
         Operator endpoints need it, e.g.:\n\
         curl -H 'Authorization: Bearer {}' http://{}/approvals\n",
        token.expose(),
        reachable(addr)
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
    if service.token().generated {
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(token_banner(&service.token().token, addr).as_bytes());
        let _ = err.flush();
    }
    tracing::info!(%addr, "listening");
    announce(addr);
    service.serve(drain_on_signal()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_tokens_are_long_random_and_hex() {
        let a = generate_token();
        let b = generate_token();
        assert_eq!(a.expose().len(), 64);
        assert!(a.expose().bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a.expose(), b.expose());
    }

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
    fn the_banner_has_one_ready_curl_line_on_a_reachable_address() {
        let token = OperatorToken::new("t0k3n-0123456789abcdef");
        let banner = token_banner(&token, "0.0.0.0:8080".parse().unwrap());
        let curls: Vec<_> = banner.lines().filter(|l| l.starts_with("curl ")).collect();
        assert_eq!(
            curls,
            [
                "curl -H 'Authorization: Bearer t0k3n-0123456789abcdef' http://127.0.0.1:8080/approvals"
            ]
        );
        assert_eq!(banner.matches("t0k3n").count(), 1);
    }

    #[tokio::test]
    async fn the_aws_backend_refuses_to_start_with_exit_code_2() {
        let dir = tempfile::tempdir().unwrap();
        let settings = Settings {
            backend: Backend::Aws,
            ..settings(&dir)
        };
        let e = Service::start(&settings).await.err().unwrap();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("not built yet"));
        assert!(!settings.store_path.exists(), "nothing was created");
    }

    fn settings(dir: &tempfile::TempDir) -> Settings {
        let db = dir.path().join("f.db");
        Settings {
            listen: "127.0.0.1:0".parse().unwrap(),
            backend: Backend::Embedded,
            engine_path: crate::config::engine_path(&db),
            store_path: db,
            operator_token: None,
            saga: Default::default(),
            limits: Default::default(),
            log_format: crate::config::LogFormat::Text,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn starts_serves_and_stops_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let settings = settings(&dir);
        let service = Service::start(&settings).await.unwrap();
        assert!(service.token().generated);
        let addr = service.local_addr();
        assert_ne!(addr.port(), 0);
        assert!(settings.store_path.exists());
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
