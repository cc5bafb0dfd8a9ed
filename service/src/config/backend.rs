//! Where the saga's state lives: the backend `serve` and `audit` share, and the engine's file beside the store's.

use super::*;

/// The workflow and state backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// The in-process, durable Step Functions engine and SQLite (no servers needed).
    Embedded,
    /// AWS Step Functions (Standard) and DynamoDB: stateless replicas (needs
    /// --state-machine-arn and --payments).
    Aws,
}

/// How log lines are written (to stdout).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Where the saga's state lives and who charges: the settings `serve` and `audit` share.
#[derive(Debug, Args)]
pub struct BackendArgs {
    /// The store's SQLite file (embedded backend); the engine's state is kept beside it.
    #[arg(long, env = "FULFILLMENT_DB", default_value = "./fulfillment.db")]
    pub db: PathBuf,

    /// Where workflows run and state is kept.
    #[arg(long, env = "FULFILLMENT_BACKEND", value_enum, default_value_t = Backend::Embedded)]
    pub backend: Backend,

    #[command(flatten)]
    pub aws: AwsArgs,

    /// The saga's state machine on AWS (`--backend aws`; printed by `provision`, an output of
    /// deploy/template.yaml). The activities' ARNs are derived from it.
    #[arg(long, env = "FULFILLMENT_STATE_MACHINE_ARN", value_parser = parse_arn, value_name = "ARN")]
    pub state_machine_arn: Option<String>,

    /// When this build's definition is new, the share of new orders (1-99 %) its version gets at
    /// first, beside the version that was live; `fulfillment versions promote` gives it all.
    /// Without it, a new version takes every new order at once.
    #[arg(long, env = "FULFILLMENT_CANARY_PERCENT", value_parser = clap::value_parser!(u8).range(1..=99), value_name = "N")]
    pub canary_percent: Option<u8>,

    /// Who charges and refunds: `sandbox` by default with the embedded backend; with
    /// `--backend aws` it must be chosen, so a deployment never simulates payments by accident.
    #[arg(long, env = "FULFILLMENT_PAYMENTS", value_enum)]
    pub payments: Option<PaymentsKind>,

    /// The Stripe-compatible API's base URL (`--payments stripe`).
    #[arg(long, env = "FULFILLMENT_STRIPE_URL", default_value = ::providers::stripe::STRIPE_API, value_parser = parse_url, value_name = "URL")]
    pub stripe_url: String,

    /// The provider's secret key (`--payments stripe`). Never logged.
    #[arg(
        long,
        env = "FULFILLMENT_STRIPE_KEY",
        hide_env_values = true,
        value_parser = Secret(|raw: &str| Ok(SecretKey::new(raw))),
        value_name = "KEY"
    )]
    pub stripe_key: Option<SecretKey>,

    /// How long one payment provider call may take before it counts as unavailable (retried).
    #[arg(
        long,
        env = "FULFILLMENT_STRIPE_TIMEOUT",
        default_value = "20s",
        value_parser = parse_duration,
        value_name = "DURATION"
    )]
    pub stripe_timeout: Duration,

    /// Put before every idempotency key sent to the payment provider, and required of every
    /// payment found there, so that two services sharing one Stripe account never collide.
    /// Set it before the first order: changing it while orders run lets a retried charge go
    /// under a new key.
    #[arg(
        long,
        env = "FULFILLMENT_IDEMPOTENCY_PREFIX",
        default_value = "",
        value_name = "PREFIX"
    )]
    pub idempotency_prefix: String,

    /// Log format; the level comes from RUST_LOG (default `info`).
    #[arg(long, env = "FULFILLMENT_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// Where the state lives and who charges, resolved: what `serve` and `audit` share.
#[derive(Debug, Clone)]
pub struct BackendSettings {
    pub kind: Backend,
    pub aws: AwsSettings,
    /// Required with the AWS backend (checked at start-up).
    pub state_machine_arn: Option<String>,
    /// The share of new orders a version this start publishes gets at first (`None`: all).
    pub canary_percent: Option<u8>,
    /// `None`: not chosen (the embedded backend then uses the sandbox; the AWS one refuses).
    pub payments: Option<PaymentsSettings>,
    pub store_path: PathBuf,
    pub engine_path: PathBuf,
}

impl From<BackendArgs> for BackendSettings {
    fn from(a: BackendArgs) -> Self {
        let payments = a.payments.map(|kind| match kind {
            PaymentsKind::Sandbox => PaymentsSettings::Sandbox,
            PaymentsKind::Stripe => PaymentsSettings::Stripe(StripeConfig {
                base_url: a.stripe_url.clone(),
                // A missing key is refused at start-up, with the other combinations.
                secret_key: a.stripe_key.clone().unwrap_or_else(|| SecretKey::new("")),
                timeout: a.stripe_timeout,
                key_prefix: a.idempotency_prefix.clone(),
            }),
        });
        BackendSettings {
            kind: a.backend,
            aws: a.aws.into(),
            state_machine_arn: a.state_machine_arn,
            canary_percent: a.canary_percent,
            payments,
            engine_path: engine_path(&a.db),
            store_path: a.db,
        }
    }
}

/// The engine's file beside the store's: `x.db` → `x.engine.db`, any other name `name.engine`.
pub fn engine_path(store: &Path) -> PathBuf {
    let name = store
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "fulfillment.db".to_owned());
    let engine = match name.strip_suffix(".db") {
        Some(stem) if !stem.is_empty() => format!("{stem}.engine.db"),
        _ => format!("{name}.engine"),
    };
    store.with_file_name(engine)
}
