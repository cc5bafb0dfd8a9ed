//! `fulfillment audit`: the backend opened read-only, checked, and the findings printed; with
//! `--repair`, opened as `serve` opens it and repaired by one pass of the repair loop.

use super::*;
use ops::audit::Scope;
use ops::repair::{self, Pass};
use workflow::SagaSettings;

/// What `fulfillment audit` did.
#[derive(Debug)]
pub enum Audited {
    /// A plain audit's findings.
    Report(audit::Report),
    /// `--repair`: the findings and what was done about them.
    Repaired(Pass),
}

impl Audited {
    /// Nothing is left wrong: no violation found, or (with `--repair`) every one repaired.
    pub fn clean(&self) -> bool {
        match self {
            Audited::Report(report) => report.violations.is_empty(),
            Audited::Repaired(pass) => pass.all_repaired(),
        }
    }
}

/// `fulfillment audit`: opens the backend for reading (the embedded one's files read-only, with
/// neither engine nor workers; on AWS the table, Step Functions and the provider as `serve`
/// reaches them), checks it, prints one line per violation and the summary on stdout, and
/// returns what it found. With `--repair`, see [`run_repair`].
pub async fn run_audit(settings: AuditSettings) -> Result<Audited, StartupError> {
    if let Some(grace) = settings.repair {
        return run_repair(&settings, grace).await.map(Audited::Repaired);
    }
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
    Ok(Audited::Report(report))
}

/// `fulfillment audit --repair`: the backend opened as `serve` opens it (embedded: the store
/// and the engine, whose lock refuses this while the service runs; AWS: the table, Step
/// Functions and the provider, under the replicas' repair lease), one pass of the repair loop,
/// and what it found and did printed on stdout. Orders it starts get the saga settings'
/// defaults (approval window and heartbeat), which `serve` may have been given otherwise.
pub async fn run_repair(settings: &AuditSettings, grace: Duration) -> Result<Pass, StartupError> {
    let payments = payments(&settings.backend)?;
    check_payments(&payments).await?;
    let shipping = shipping(settings.shipping.as_ref(), &payments).await?;
    let opened = match settings.backend.kind {
        // An audit's repair pass prunes nothing: that is the serving engine's background work.
        Backend::Embedded => open_embedded(&settings.backend, payments, &shipping, None).await?,
        // The repair starts orders through `live`, and publishes nothing: that is `serve`'s.
        Backend::Aws => open_aws(&settings.backend, payments, &shipping, Upgrade::Skip).await?,
    };
    let lease: Arc<dyn Lease> = match &opened.lease_table {
        // Held for as long as one pass can take, renewed by nobody: a replica takes it back
        // once it expires, or at once when this pass gives it up.
        Some(table) => Arc::new(DynamoLease::new(
            table.clone(),
            REPAIR_LEASE,
            format!("audit-{}-{}", std::process::id(), uuid::Uuid::new_v4()),
            Duration::from_secs(600),
        )),
        None => Arc::new(Unshared),
    };
    let passed = repair_once(&opened, lease.as_ref(), grace).await;
    if let Err(e) = lease.release().await {
        tracing::warn!(error = %e, "cannot give the repair lease up; the replicas take it once it expires");
    }
    opened.close().await;
    let pass = passed?;
    let mut out = std::io::stdout().lock();
    let _ = repair::print(&pass, &mut out);
    let _ = out.flush();
    Ok(pass)
}

async fn repair_once(
    opened: &Opened,
    lease: &dyn Lease,
    grace: Duration,
) -> Result<Pass, StartupError> {
    if !lease.hold().await.map_err(RepairError::Lease)? {
        return Err(StartupError::RepairLeaseHeld);
    }
    let intake = Arc::new(OrderIntake {
        orders: opened.ports.orders.clone(),
        inventory: opened.ports.inventory.clone(),
        workflow: opened.workflow.clone(),
        settings: SagaSettings::default(),
        queue: None,
    });
    let reconciler = reconciler(
        &opened.ports,
        &opened.workflow,
        intake,
        RepairSettings {
            grace,
            // Embedded: the engine's lock says no service runs on these files now.
            sole_owner_since: opened.lease_table.is_none().then(chrono::Utc::now),
            ..RepairSettings::default()
        },
        true,
        Metrics::new(),
    );
    Ok(reconciler.pass(Scope::Whole).await?)
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
        PaymentsSettings::Sandbox => {
            Arc::new(SandboxPayments::new(store.clone())) as Arc<dyn PaymentGateway>
        }
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
            ..::providers::sandbox::ports(&store)
        },
        executions: Arc::new(EmbeddedExecutions::new(inspector)) as Arc<dyn Executions>,
        check_parked_tokens: true,
    })
}

/// The AWS backend for an audit: the table, Step Functions and the provider, reached and
/// checked as `serve --backend aws` does.
pub(super) async fn audit_aws(
    settings: &BackendSettings,
    payments: PaymentsSettings,
) -> Result<Sources, StartupError> {
    let (workflow, store) = connect_aws(settings, Upgrade::Skip).await?;
    Ok(Sources {
        ports: Ports {
            payments: aws_payments(&store, &payments)?.0,
            ..::providers::sandbox::ports(&store)
        },
        executions: Arc::new(WorkflowExecutions::new(Arc::new(workflow))),
        check_parked_tokens: true,
    })
}
