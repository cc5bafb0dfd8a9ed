//! `fulfillment engine`: the embedded engine alone, serving the Step Functions protocol.

use super::*;

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
    let stop = drain_on_signal();
    announce(addr);
    server.serve(stop).await
}
