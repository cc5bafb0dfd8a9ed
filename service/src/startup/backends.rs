//! Opening a backend: the embedded one (SQLite store and engine files) or AWS (DynamoDB and
//! Step Functions, each checked once), with the payment provider each is configured with.

use super::*;

/// A backend, opened: the saga's ports and workflow, and what to close at the end.
pub struct Opened {
    pub ports: Ports,
    pub workflow: Arc<dyn WorkflowPort>,
    pub activity_arns: HashMap<Activity, String>,
    pub engine: Option<Engine>,
    /// The embedded backend's workflow as itself, beside [`Opened::workflow`]: the engine's
    /// own operations (redrive, histories) for the tools and tests that drive it.
    pub embedded: Option<Arc<EmbeddedWorkflow>>,
    /// Taken before the backend was opened: on the embedded one, nothing stored before this
    /// instant can be in flight in this process (see `RepairSettings::sole_owner_since`).
    pub opened_at: chrono::DateTime<chrono::Utc>,
    /// The backend's own counters, for `/metrics`.
    pub sampled: Vec<SampledMetric>,
    /// Embedded: new orders are started through a start queue. AWS: no queue (each replica is
    /// stateless, so a request starts its order's execution itself; Step Functions holds it
    /// from then on). Either way the repair loop starts what a crash left unstarted.
    pub start_queue: bool,
    /// Embedded: the store whose orders still `ACCEPTED` at the start (what the last process's
    /// start queue held when it stopped) are queued again at once ([`requeue_accepted`]),
    /// rather than left to the repair loop's first pass.
    pub requeue_from: Option<SqliteStore>,
    /// AWS: the table that holds the repair loop's lease, shared by the replicas. Embedded:
    /// `None`, one process owns the backend and always holds the lease ([`Unshared`]).
    pub lease_table: Option<DynamoStore>,
    /// The principals and their API keys.
    pub keys: Arc<dyn KeyRepository>,
    /// Webhook endpoints and deliveries, and the outbox of order events.
    pub webhooks: Arc<dyn WebhookRepository>,
}

impl Opened {
    pub async fn close(self) {
        if let Some(engine) = self.engine {
            engine.shutdown().await;
        }
    }
}

/// Opens the backend `settings` choose, checking first what can be checked (the saga's timing,
/// the payment provider's key, the carrier): everything [`App::build`] composes the service
/// from. The binary's `serve`, the test harnesses and the examples all open it here.
pub async fn open(settings: &Settings) -> Result<Opened, StartupError> {
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
    match settings.backend.kind {
        Backend::Embedded => {
            open_embedded(&settings.backend, payments, &shipping, settings.retention).await
        }
        Backend::Aws => open_aws(&settings.backend, payments, &shipping, Upgrade::Run).await,
    }
}

/// The payment provider chosen, checked: the sandbox by default on the embedded backend; the AWS
/// backend must be told (a deployment never simulates payments by accident).
pub(super) fn payments(settings: &BackendSettings) -> Result<PaymentsSettings, StartupError> {
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

/// The Stripe gateway, and its count of answers that refused the service's key or URL.
pub(super) fn stripe(
    config: &StripeConfig,
) -> Result<(Arc<dyn PaymentGateway>, SampledMetric), StartupError> {
    let gateway = StripePayments::new(config.clone())?;
    let health = gateway.health_counts();
    let metric = SampledMetric {
        kind: SampledKind::Counter,
        name: "payment_provider_misconfigured_answers",
        help: "Payment provider answers that refused this service's key or URL (401, 403, not \
               Stripe's API): the operator's to fix; /readyz fails while the last one did",
        read: Box::new(move || health.misconfigured_answers()),
    };
    Ok((Arc::new(gateway), metric))
}

/// Asks the payment provider once, changing nothing, whether it takes the service's key and
/// URL: a start with settings it refuses is refused; a provider that does not answer now only
/// delays charges, which are retried, so that start goes on with a warning.
pub(super) async fn check_payments(payments: &PaymentsSettings) -> Result<(), StartupError> {
    let PaymentsSettings::Stripe(config) = payments else {
        return Ok(());
    };
    match StripePayments::new(config.clone())?.check().await {
        Ok(()) => Ok(()),
        Err(GatewayError::Misconfigured(why)) => Err(StartupError::Config(format!(
            "the payment provider refuses this service's settings: {why}"
        ))),
        Err(e) => {
            tracing::warn!(error = %e, "the payment provider did not answer the start-up check; charges are retried until it does");
            Ok(())
        }
    }
}

/// The carrier chosen, checked: the sandbox by default, except beside a live payment key, where
/// simulated shipping must be asked for by name; EasyPost's key is checked with EasyPost once.
pub(super) async fn shipping(
    chosen: Option<&ShippingSettings>,
    payments: &PaymentsSettings,
) -> Result<ShippingSettings, StartupError> {
    let live = matches!(payments, PaymentsSettings::Stripe(c) if c.secret_key.expose().starts_with("sk_live_"));
    let config = match chosen {
        None if live => {
            return Err(StartupError::Config(
                "a live payment key (sk_live_…) charges real money, but no carrier was chosen: --shipping easypost (FULFILLMENT_SHIPPING) ships for real; --shipping sandbox simulates shipping, knowingly"
                    .to_owned(),
            ));
        }
        None | Some(ShippingSettings::Sandbox) => return Ok(ShippingSettings::Sandbox),
        Some(ShippingSettings::EasyPost(c)) => c,
    };
    if config.from_address.is_null() {
        return Err(StartupError::Config(
            "--shipping easypost needs --easypost-from-address (FULFILLMENT_EASYPOST_FROM_ADDRESS): an EasyPost address id (adr_…) or the address as JSON"
                .to_owned(),
        ));
    }
    match providers::easypost::check_key(config).await {
        Ok(()) => tracing::info!(carrier = %config.carrier, "EasyPost accepted the API key"),
        Err(GatewayError::Misconfigured(reason)) => return Err(StartupError::Config(reason)),
        Err(e) => tracing::warn!(
            error = %e,
            "EasyPost could not check the API key; starting anyway (shipments are retried)"
        ),
    }
    Ok(ShippingSettings::EasyPost(config.clone()))
}

/// The carrier over `book`, the store that keeps its label records (the sandbox's ledger is
/// `sandbox`, already among the store's ports), and for a real carrier its count of answers
/// that refused the service's key.
pub(super) fn carrier(
    shipping: &ShippingSettings,
    book: Arc<dyn LabelBook>,
    sandbox: Arc<dyn ShippingGateway>,
) -> Result<(Arc<dyn ShippingGateway>, Option<SampledMetric>), StartupError> {
    match shipping {
        ShippingSettings::Sandbox => Ok((sandbox, None)),
        ShippingSettings::EasyPost(c) => {
            let gateway = EasyPostShipping::new(c.clone(), book)
                .map_err(|e| StartupError::Config(e.to_string()))?;
            let health = gateway.health_counts();
            let metric = SampledMetric {
                kind: SampledKind::Counter,
                name: "shipping_provider_misconfigured_answers",
                help: "Carrier answers that refused this service's key or could not bill its \
                       account: the operator's to fix; /readyz fails while the last one did",
                read: Box::new(move || health.misconfigured_answers()),
            };
            Ok((Arc::new(gateway), Some(metric)))
        }
    }
}

/// Opens the store's SQLite file with `open` (read-write for `serve`, read-only for the audit)
/// off the async runtime, naming the file in the error.
pub(super) async fn open_store(
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
pub(super) async fn open_embedded(
    settings: &BackendSettings,
    payments: PaymentsSettings,
    shipping: &ShippingSettings,
    retention: Option<std::time::Duration>,
) -> Result<Opened, StartupError> {
    let opened_at = chrono::Utc::now();
    let gateway = match &payments {
        PaymentsSettings::Sandbox => None,
        PaymentsSettings::Stripe(c) => Some(stripe(c)?),
    };
    let store = open_store(&settings.store_path, |p| SqliteStore::open(p)).await?;
    let engine_config = EngineConfig {
        // The engine runs the sagas: it yields to the threads accepting orders, as the workers do.
        on_writer_start: Some(lower_priority),
        retention,
        ..EngineConfig::new(&settings.engine_path)
    };
    let engine =
        Engine::open(engine_config, None)
            .await
            .map_err(|source| StartupError::Engine {
                path: settings.engine_path.clone(),
                source,
            })?;
    let workflow = match EmbeddedWorkflow::setup_with(engine.clone(), settings.canary_percent).await
    {
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
    let mut ports = sandbox::ports(&store);
    let mut sampled = embedded_counters(&engine, &store);
    if let Some((gateway, metric)) = gateway {
        ports.payments = gateway;
        sampled.push(metric);
    }
    let (carrier, metric) = carrier(shipping, Arc::new(store.clone()), ports.shipping)?;
    ports.shipping = carrier;
    sampled.extend(metric);
    let workflow = Arc::new(workflow);
    Ok(Opened {
        ports,
        activity_arns: workflow.activity_arns().clone(),
        workflow: workflow.clone(),
        embedded: Some(workflow),
        opened_at,
        sampled,
        engine: Some(engine),
        start_queue: true,
        requeue_from: Some(store.clone()),
        lease_table: None,
        webhooks: Arc::new(store.clone()),
        keys: Arc::new(store),
    })
}

/// The embedded backend's commit counters: each commit is flushed by at most one fsync (one
/// covers every commit that queued while the last ran, the `durable` crate), so these say how
/// much work each commit carries.
pub(super) fn embedded_counters(engine: &Engine, store: &SqliteStore) -> Vec<SampledMetric> {
    use std::sync::atomic::Ordering::Relaxed;
    let (e1, e2, e3) = (engine.clone(), engine.clone(), engine.clone());
    let (s1, s2) = (store.clone(), store.clone());
    vec![
        SampledMetric {
            kind: SampledKind::Counter,
            name: "engine_commits",
            help: "Grouped transactions the workflow engine committed (each flushed by at most one fsync)",
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
            name: "engine_executions_pruned",
            help: "Closed executions the workflow engine deleted past the retention (--retention)",
            read: Box::new(move || e3.stats().pruned.load(Relaxed)),
        },
        SampledMetric {
            kind: SampledKind::Counter,
            name: "store_commits",
            help: "Grouped transactions the store committed (each flushed by at most one fsync)",
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

/// Whether a start runs the saga's upgrade (`serve`), or only starts orders through `live`
/// without publishing anything (`audit`, whose policy may not publish).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Upgrade {
    Run,
    Skip,
}

/// How often the start probes the AWS backend before it gives up.
const START_PROBE_ATTEMPTS: u32 = 5;

/// The AWS backend's two services, each checked at the start (a wrong endpoint, table or
/// credential fails the start, not the first order; a passing blip does not).
pub(super) async fn connect_aws(
    settings: &BackendSettings,
    upgrade: Upgrade,
) -> Result<(AwsWorkflow, DynamoStore), StartupError> {
    let arn = settings.state_machine_arn.as_deref().ok_or_else(|| {
        StartupError::Config(
            "--backend aws needs --state-machine-arn (FULFILLMENT_STATE_MACHINE_ARN): \
             `fulfillment provision` prints it, deploy/template.yaml outputs it"
                .to_owned(),
        )
    })?;
    let sdk = aws_sdk_config(&settings.aws).await?;
    let mut workflow = AwsWorkflow::new(aws_sdk_sfn::Client::new(&sdk), arn)
        .map_err(|e| StartupError::Config(format!("--state-machine-arn: {e}")))?;
    let store = DynamoStore::new(
        aws_sdk_dynamodb::Client::new(&sdk),
        settings.aws.table.clone(),
    );
    // A dependency that blips (a dropped connection, a throttle) while a replica restarts must
    // not keep it down: a few tries, half a second apart, before the start fails.
    let mut attempt = 1;
    while let Err(unready) = http::health::probe(&store, &workflow).await {
        if attempt == START_PROBE_ATTEMPTS {
            return Err(StartupError::AwsUnreachable {
                what: unready.what,
                reason: unready.error,
            });
        }
        tracing::warn!(what = unready.what, error = %unready.error, attempt, "the AWS backend did not answer; trying again");
        attempt += 1;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    match upgrade {
        // Publishes this build's definition and routes new orders to it (or leaves them where
        // an operator or a newer release put them); starts go through the alias from here on.
        Upgrade::Run => {
            let upgraded = workflow.upgrade(settings.canary_percent).await?;
            tracing::info!(live = ?upgraded.routing, decision = ?upgraded.decision, "saga versions checked");
        }
        Upgrade::Skip => workflow.start_through_live(),
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
pub(super) fn aws_payments(
    store: &DynamoStore,
    payments: &PaymentsSettings,
) -> Result<(Arc<dyn PaymentGateway>, Vec<SampledMetric>), StartupError> {
    match payments {
        PaymentsSettings::Sandbox => {
            Ok((Arc::new(SandboxPayments::new(store.clone())), Vec::new()))
        }
        PaymentsSettings::Stripe(c) => stripe(c).map(|(gateway, metric)| (gateway, vec![metric])),
    }
}

/// The AWS backend: Step Functions and DynamoDB.
pub(super) async fn open_aws(
    settings: &BackendSettings,
    payments: PaymentsSettings,
    shipping: &ShippingSettings,
    upgrade: Upgrade,
) -> Result<Opened, StartupError> {
    let opened_at = chrono::Utc::now();
    let (workflow, store) = connect_aws(settings, upgrade).await?;
    let (payments, mut sampled) = aws_payments(&store, &payments)?;
    let ports = sandbox::ports(&store);
    let (shipping, metric) = carrier(shipping, Arc::new(store.clone()), ports.shipping.clone())?;
    sampled.extend(metric);
    let ports = Ports {
        payments,
        shipping,
        ..ports
    };
    Ok(Opened {
        ports,
        activity_arns: workflow.activity_arns().clone(),
        workflow: Arc::new(workflow),
        embedded: None,
        opened_at,
        engine: None,
        sampled,
        start_queue: false,
        requeue_from: None,
        lease_table: Some(store.clone()),
        webhooks: Arc::new(store.clone()),
        keys: Arc::new(store),
    })
}
