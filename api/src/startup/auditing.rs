//! `fulfillment audit`: the backend opened read-only, checked, and the findings printed.

use super::*;

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
pub(super) async fn audit_embedded(
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
        PaymentsSettings::Stripe(c) => stripe(c)?.0,
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
pub(super) async fn audit_aws(
    settings: &BackendSettings,
    payments: PaymentsSettings,
) -> Result<Sources, StartupError> {
    let (workflow, store) = connect_aws(settings).await?;
    Ok(Sources {
        ports: Ports {
            payments: aws_payments(&store, &payments)?.0,
            ..store.ports()
        },
        executions: Arc::new(WorkflowExecutions::new(Arc::new(workflow))),
    })
}
