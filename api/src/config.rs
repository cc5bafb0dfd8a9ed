//! The service's settings: the command line and its `FULFILLMENT_*` environment variables
//! (clap), turned into one typed [`Settings`] value. Only `main` parses them; everything else
//! receives the parts it needs.

use crate::http::rate_limit::RateLimitSettings;
use crate::http::{HttpLimits, OperatorToken};
use crate::sfn_server::SfnSettings;
use crate::webhooks::WebhookSettings;
use clap::builder::TypedValueParser;
use clap::error::ErrorKind;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::ffi::OsStr;
use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::time::Duration;
use store::easypost::{EASYPOST_API, EasyPostConfig, parse_from_address};
use store::stripe::{SecretKey, StripeConfig};
use workflow::SagaSettings;

/// Order fulfillment as durable sagas: an HTTP API that runs every order as a Step Functions
/// Standard workflow (reserve, charge, approve, ship; refund and release on failure).
#[derive(Debug, Parser)]
#[command(
    name = "fulfillment",
    version,
    propagate_version = true,
    after_help = "Every setting of `serve` can also come from a FULFILLMENT_* environment variable \
                  (FULFILLMENT_LISTEN, FULFILLMENT_DB, FULFILLMENT_OPERATOR_TOKEN, …); flags win. \
                  See `fulfillment serve --help`, `fulfillment audit --help` and `fulfillment engine --help`. \
                  Log level: RUST_LOG (default info)."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the HTTP API and run the saga's activity workers.
    ///
    /// With the embedded backend (the default) all state lives in two SQLite files: the
    /// store in --db and the workflow engine's state beside it (`fulfillment.db` →
    /// `fulfillment.engine.db`; a name not ending in `.db` gets `.engine` appended). Both
    /// are created when missing; running orders continue after a restart.
    ///
    /// Stops gracefully on SIGTERM or Ctrl-C: stops accepting, finishes the requests in
    /// flight, lets the running steps finish, closes the engine, exits 0.
    // Boxed: the other commands' arguments are a fraction of its size (clippy).
    Serve(Box<ServeArgs>),

    /// Run the embedded Step Functions engine alone (no saga, no workers) as a durable local
    /// Step Functions endpoint speaking the AWS JSON protocol.
    ///
    /// Drive it with the AWS CLI or any AWS SDK (any credentials are accepted), e.g.
    /// `aws --endpoint-url http://127.0.0.1:8083 stepfunctions list-executions …`.
    /// Implemented: CreateActivity, CreateStateMachine (STANDARD), DescribeStateMachine,
    /// StartExecution, DescribeExecution, ListExecutions, StopExecution, GetExecutionHistory,
    /// GetActivityTask, SendTaskSuccess, SendTaskFailure, SendTaskHeartbeat.
    ///
    /// Stops gracefully on SIGTERM or Ctrl-C; running executions continue on the next start.
    Engine(EngineArgs),

    /// Create the AWS resources `serve --backend aws` needs, idempotently: the DynamoDB table,
    /// the saga's activities and its Standard state machine (the rendered definition). For
    /// first-time setups and emulators; `deploy/template.yaml` is the production route.
    ///
    /// Prints the state machine's ARN as `FULFILLMENT_STATE_MACHINE_ARN=…` (and the table as
    /// `FULFILLMENT_TABLE=…`), ready for `serve`. Running it again changes nothing and prints
    /// the same; a changed definition updates the state machine (running executions keep the
    /// version they started with).
    Provision(ProvisionArgs),

    /// Check a store for invariant violations and print them; read-only, safe while the
    /// service runs (against its store, engine and payment provider).
    ///
    /// Takes the backend, store and payment settings of `serve`. Checks: every charge at the
    /// provider belongs to an order, once, and matches its end (a COMPLETED order's charge is
    /// whole and not refunded, a CANCELLED or COMPENSATION_FAILED order's is refunded in full);
    /// no refund without its charge, nor more than it; each SKU's counts agree with the
    /// reservations and add up to what was stocked (available + reserved + shipped = stocked);
    /// a COMPLETED order's reservation shipped, a CANCELLED one's holds nothing; every order is
    /// finished or has a RUNNING execution; every parked approval token is an open task of a
    /// running execution (on AWS this is asked with SendTaskHeartbeat, as the service's keeper
    /// does every few minutes: the audit's one write). A suspected violation is checked once
    /// more, a moment later, before it is reported (an order in flight moves between reads).
    ///
    /// Prints one line per violation, `violation: <subject>: <what is wrong>`, then
    /// `audit: N orders, S SKUs, C charges, V violations`. Logs go to stderr. Exit status: 0
    /// without violations, 1 with some, 2 when the settings are wrong, 3 when the audit could
    /// not finish (a backend it cannot reach).
    ///
    /// With --repair, it then does what the service's repair loop does once (README, "The
    /// repair loop"): starts orders left ACCEPTED past --repair-grace, refunds charges of
    /// CANCELLED orders that ended without their refund, releases stock held by CANCELLED
    /// orders (marks it shipped for COMPLETED ones), and reports the rest. It prints a line
    /// per repair, `repair: <kind>: <subject>: <what was done>`, and their counts; exit status
    /// 0 when everything found was repaired, 1 otherwise. On the embedded backend it needs the
    /// service stopped (the service's own loop repairs while it runs); on AWS it takes the
    /// replicas' repair lease, and is refused while a replica holds it.
    Audit(AuditArgs),

    /// Create, list and revoke API keys, beside a running service.
    ///
    /// A principal is a client (a system that places orders: it sees its own orders only) or
    /// an operator (a person: approvals, stock, every order), by a unique name, and holds one
    /// or more keys, so a key can be rotated without downtime: create a second, move the
    /// callers over, revoke the first. A key is shown once, when created (on stdout); only
    /// its hash is stored. A revoked key is refused by every replica within seconds.
    #[command(subcommand)]
    Keys(KeysCommand),

    /// Copy the embedded backend's two SQLite files (the store in --db and the engine's state
    /// beside it) into a new directory, consistently with each other, while the service runs.
    ///
    /// Both copies are taken from read snapshots opened one right after the other, the engine's
    /// first: the store's copy is never behind the engine's, so every execution in the copy
    /// has its order (what the copy can hold that the engine's lacks, a step's record written
    /// in between, is what a crash leaves, and the saga's idempotent steps repair it). Writes
    /// `manifest.json` last: a directory without it is not a backup. With `--backend aws`,
    /// back up with DynamoDB's point-in-time recovery; Step Functions keeps its own state.
    Backup(BackupArgs),

    /// Put a backup made by `fulfillment backup` in place of a store (--db) and its engine
    /// file, which must not exist yet (move the old ones aside first). Checks both copies
    /// before it writes anything. Orders accepted after the backup are not in it: a client's
    /// retry of its POST (same order id) places each again.
    Restore(RestoreArgs),
}

#[derive(Debug, Args)]
pub struct BackupArgs {
    /// The directory to write the backup into: created, or an empty one.
    #[arg(long, value_name = "DIR")]
    pub to: PathBuf,
    /// The store's SQLite file; the engine's state is beside it.
    #[arg(long, env = "FULFILLMENT_DB", default_value = "./fulfillment.db")]
    pub db: PathBuf,
}

#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// A directory `fulfillment backup` wrote.
    #[arg(long, value_name = "DIR")]
    pub from: PathBuf,
    /// Where the store's SQLite file goes; the engine's state goes beside it. Neither may
    /// exist.
    #[arg(long, env = "FULFILLMENT_DB", default_value = "./fulfillment.db")]
    pub db: PathBuf,
}

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Issue a new key for a principal (created with its role when new; a principal keeps its
    /// role). Prints the key alone on stdout.
    Create(KeysCreateArgs),
    /// List every key: id, principal, role, created, last used, revoked.
    List(KeysStoreArgs),
    /// Revoke a key by its id (the part after `fk_` and before the next `_`); idempotent.
    Revoke(KeysRevokeArgs),
}

#[derive(Debug, Args)]
pub struct KeysCreateArgs {
    /// The principal: 1–64 characters of A-Z a-z 0-9 . _ @ -
    #[arg(long)]
    pub name: String,
    /// What the principal may do.
    #[arg(long, value_enum)]
    pub role: RoleArg,
    #[command(flatten)]
    pub backend: BackendArgs,
}

#[derive(Debug, Args)]
pub struct KeysStoreArgs {
    #[command(flatten)]
    pub backend: BackendArgs,
}

#[derive(Debug, Args)]
pub struct KeysRevokeArgs {
    /// The key's id, as `keys list` shows it.
    pub key_id: String,
    #[command(flatten)]
    pub backend: BackendArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RoleArg {
    Client,
    Operator,
}

impl From<RoleArg> for store::Role {
    fn from(r: RoleArg) -> Self {
        match r {
            RoleArg::Client => store::Role::Client,
            RoleArg::Operator => store::Role::Operator,
        }
    }
}

/// What `keys` does.
#[derive(Debug, Clone)]
pub enum KeysAction {
    Create { name: String, role: store::Role },
    List,
    Revoke { key_id: String },
}

/// Everything `keys` runs with.
#[derive(Debug, Clone)]
pub struct KeysSettings {
    pub action: KeysAction,
    pub backend: BackendSettings,
    pub log_format: LogFormat,
}

impl From<KeysCommand> for KeysSettings {
    fn from(c: KeysCommand) -> Self {
        let (action, backend) = match c {
            KeysCommand::Create(a) => (
                KeysAction::Create {
                    name: a.name,
                    role: a.role.into(),
                },
                a.backend,
            ),
            KeysCommand::List(a) => (KeysAction::List, a.backend),
            KeysCommand::Revoke(a) => (KeysAction::Revoke { key_id: a.key_id }, a.backend),
        };
        KeysSettings {
            action,
            log_format: backend.log_format,
            backend: backend.into(),
        }
    }
}

#[derive(Debug, Args)]
pub struct EngineArgs {
    /// The address the endpoint listens on (port 0 picks a free port; the address bound is
    /// printed as `listening on http://ADDR`).
    #[arg(long, env = "FULFILLMENT_LISTEN", default_value = "127.0.0.1:8083")]
    pub listen: SocketAddr,

    /// The engine's SQLite file (created when missing).
    #[arg(long, env = "FULFILLMENT_DB", default_value = "./engine.db")]
    pub db: PathBuf,

    /// The region in the ARNs the engine makes.
    #[arg(long, env = "FULFILLMENT_REGION", default_value = "us-east-1", value_parser = parse_region)]
    pub region: String,

    /// The account id in the ARNs the engine makes.
    #[arg(
        long,
        env = "FULFILLMENT_ACCOUNT_ID",
        default_value = "123456789012",
        value_parser = parse_account_id
    )]
    pub account_id: String,

    /// Log format; the level comes from RUST_LOG (default `info`).
    #[arg(long, env = "FULFILLMENT_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// Everything `engine` runs with.
#[derive(Debug, Clone)]
pub struct EngineSettings {
    pub listen: SocketAddr,
    pub db_path: PathBuf,
    pub region: String,
    pub account_id: String,
    pub endpoint: SfnSettings,
    pub log_format: LogFormat,
}

impl From<EngineArgs> for EngineSettings {
    fn from(a: EngineArgs) -> Self {
        EngineSettings {
            listen: a.listen,
            db_path: a.db,
            region: a.region,
            account_id: a.account_id,
            endpoint: SfnSettings::default(),
            log_format: a.log_format,
        }
    }
}

/// Where AWS is: the standard AWS configuration (environment, profiles, instance roles) read by
/// `aws-config`, with these flags on top.
#[derive(Debug, Clone, Args)]
pub struct AwsArgs {
    /// The AWS region (default: AWS_REGION, then the profile's region).
    #[arg(long, value_parser = parse_region, value_name = "REGION")]
    pub aws_region: Option<String>,

    /// The AWS profile of the shared config files (default: AWS_PROFILE, then `default`).
    #[arg(long, value_name = "NAME")]
    pub aws_profile: Option<String>,

    /// One endpoint for both Step Functions and DynamoDB (an emulator). Without it the standard
    /// variables apply: AWS_ENDPOINT_URL, or per service AWS_ENDPOINT_URL_SFN and
    /// AWS_ENDPOINT_URL_DYNAMODB.
    #[arg(long, value_parser = parse_url, value_name = "URL")]
    pub endpoint_url: Option<String>,

    /// The DynamoDB table holding orders, stock, reservations and the sandbox ledgers.
    #[arg(long, env = "FULFILLMENT_TABLE", default_value = "fulfillment", value_parser = parse_table)]
    pub table: String,
}

/// The AWS settings of `serve --backend aws` and `provision`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsSettings {
    pub region: Option<String>,
    pub profile: Option<String>,
    pub endpoint_url: Option<String>,
    pub table: String,
}

impl From<AwsArgs> for AwsSettings {
    fn from(a: AwsArgs) -> Self {
        AwsSettings {
            region: a.aws_region,
            profile: a.aws_profile,
            endpoint_url: a.endpoint_url,
            table: a.table,
        }
    }
}

#[derive(Debug, Args)]
pub struct ProvisionArgs {
    #[command(flatten)]
    pub aws: AwsArgs,

    /// The IAM role the state machine runs as (it needs no permissions: every Task is an
    /// activity; only its trust policy must allow states.amazonaws.com). Any ARN works on an
    /// emulator.
    #[arg(long, env = "FULFILLMENT_STATE_MACHINE_ROLE_ARN", value_parser = parse_arn, value_name = "ARN")]
    pub state_machine_role_arn: String,

    /// Log format; the level comes from RUST_LOG (default `info`).
    #[arg(long, env = "FULFILLMENT_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

/// Everything `provision` runs with.
#[derive(Debug, Clone)]
pub struct ProvisionSettings {
    pub aws: AwsSettings,
    pub role_arn: String,
}

impl From<ProvisionArgs> for ProvisionSettings {
    fn from(a: ProvisionArgs) -> Self {
        ProvisionSettings {
            aws: a.aws.into(),
            role_arn: a.state_machine_role_arn,
        }
    }
}

/// Who charges and refunds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PaymentsKind {
    /// Simulated by magic payment methods (README), ledger in the store: no money moves.
    Sandbox,
    /// A Stripe-compatible provider over HTTPS (--stripe-url, --stripe-key).
    Stripe,
}

/// The payment provider, resolved.
#[derive(Debug, Clone)]
pub enum PaymentsSettings {
    Sandbox,
    Stripe(StripeConfig),
}

/// Who buys shipping labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ShippingKind {
    /// Simulated by magic postal codes (docs/saga.md), records in the store: nothing ships.
    Sandbox,
    /// EasyPost's API (--easypost-key, --easypost-carrier, --easypost-from-address).
    Easypost,
}

/// The carrier, resolved.
#[derive(Debug, Clone)]
pub enum ShippingSettings {
    Sandbox,
    EasyPost(EasyPostConfig),
}

/// Who ships, and how EasyPost is reached: `serve`'s settings (the audit ships nothing).
#[derive(Debug, Args)]
pub struct ShippingArgs {
    /// Who buys shipping labels: `sandbox` by default, except beside a live payment key
    /// (`sk_live_…`), where it must be said (`--shipping sandbox` to simulate knowingly), so that
    /// real charges never go with simulated shipping by accident.
    #[arg(long, env = "FULFILLMENT_SHIPPING", value_enum)]
    pub shipping: Option<ShippingKind>,

    /// EasyPost's API base URL (`--shipping easypost`).
    #[arg(long, env = "FULFILLMENT_EASYPOST_URL", default_value = EASYPOST_API, value_parser = parse_url, value_name = "URL")]
    pub easypost_url: String,

    /// The EasyPost API key (`--shipping easypost`; test keys buy test labels). Checked once at
    /// start-up. Never logged.
    #[arg(
        long,
        env = "FULFILLMENT_EASYPOST_KEY",
        hide_env_values = true,
        value_parser = Secret(|raw: &str| Ok(SecretKey::new(raw))),
        value_name = "KEY"
    )]
    pub easypost_key: Option<SecretKey>,

    /// How long one EasyPost call may take before it counts as unavailable (retried).
    #[arg(long, env = "FULFILLMENT_EASYPOST_TIMEOUT", default_value = "20s", value_parser = parse_duration, value_name = "DURATION")]
    pub easypost_timeout: Duration,

    /// The carrier whose rate is bought, as EasyPost names it on rates.
    #[arg(
        long,
        env = "FULFILLMENT_EASYPOST_CARRIER",
        default_value = "USPS",
        value_name = "CARRIER"
    )]
    pub easypost_carrier: String,

    /// The carrier's service to buy (e.g. `GroundAdvantage`); without it the carrier's cheapest
    /// rate is bought.
    #[arg(long, env = "FULFILLMENT_EASYPOST_SERVICE", value_name = "SERVICE")]
    pub easypost_service: Option<String>,

    /// Where parcels leave from: an EasyPost address id (`adr_…`) or a JSON object of
    /// EasyPost's address fields (`street1`, `city`, `state`, `zip`, `country`, `name`, …).
    #[arg(long, env = "FULFILLMENT_EASYPOST_FROM_ADDRESS", value_parser = parse_from_address, value_name = "ADDRESS")]
    pub easypost_from_address: Option<serde_json::Value>,

    /// What one unit weighs, in ounces: a parcel weighs the order's units times this.
    #[arg(long, env = "FULFILLMENT_EASYPOST_UNIT_WEIGHT_OZ", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..), value_name = "OUNCES")]
    pub easypost_unit_weight_oz: u32,
}

impl From<ShippingArgs> for Option<ShippingSettings> {
    fn from(a: ShippingArgs) -> Self {
        a.shipping.map(|kind| match kind {
            ShippingKind::Sandbox => ShippingSettings::Sandbox,
            // What is missing is refused at start-up, with the other combinations.
            ShippingKind::Easypost => ShippingSettings::EasyPost(EasyPostConfig {
                base_url: a.easypost_url,
                api_key: a.easypost_key.unwrap_or_else(|| SecretKey::new("")),
                timeout: a.easypost_timeout,
                carrier: a.easypost_carrier,
                service: a.easypost_service,
                from_address: a.easypost_from_address.unwrap_or_default(),
                unit_weight_oz: a.easypost_unit_weight_oz,
            }),
        })
    }
}

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

    /// Who charges and refunds: `sandbox` by default with the embedded backend; with
    /// `--backend aws` it must be chosen, so a deployment never simulates payments by accident.
    #[arg(long, env = "FULFILLMENT_PAYMENTS", value_enum)]
    pub payments: Option<PaymentsKind>,

    /// The Stripe-compatible API's base URL (`--payments stripe`).
    #[arg(long, env = "FULFILLMENT_STRIPE_URL", default_value = store::stripe::STRIPE_API, value_parser = parse_url, value_name = "URL")]
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

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The address the HTTP API listens on (port 0 picks a free port; the address bound is
    /// printed as `listening on http://ADDR`).
    #[arg(long, env = "FULFILLMENT_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    #[command(flatten)]
    pub backend: BackendArgs,

    #[command(flatten)]
    pub shipping: ShippingArgs,

    /// One more operator API key, for the principal `operator`: at least 16 printable
    /// characters, no spaces; never logged. Required with --backend aws (replicas create no keys:
    /// this is how the first operator gets in). On the embedded backend a first start creates an
    /// operator key and a client key itself; `fulfillment keys` makes the rest.
    #[arg(
        long,
        env = "FULFILLMENT_OPERATOR_TOKEN",
        hide_env_values = true,
        value_parser = Secret(parse_token),
        value_name = "TOKEN"
    )]
    pub operator_token: Option<OperatorToken>,

    /// Orders whose total (in cents) is at or above this wait for an operator's approval.
    #[arg(
        long,
        env = "FULFILLMENT_APPROVAL_THRESHOLD_CENTS",
        default_value_t = 100_000,
        value_name = "CENTS"
    )]
    pub approval_threshold_cents: u64,

    /// How long an operator has to decide before the order is cancelled (e.g. `3d`, `12h`,
    /// `30s`).
    #[arg(
        long,
        env = "FULFILLMENT_APPROVAL_TIMEOUT",
        default_value = "3d",
        value_parser = parse_duration,
        value_name = "DURATION"
    )]
    pub approval_timeout: Duration,

    /// How long a waiting approval may go without a heartbeat before its task is re-issued:
    /// the recovery time after a crash (parked approvals are heartbeated every fifth of it).
    #[arg(
        long,
        env = "FULFILLMENT_APPROVAL_HEARTBEAT",
        default_value = "5m",
        value_parser = parse_duration,
        value_name = "DURATION"
    )]
    pub approval_heartbeat: Duration,

    /// With `--backend aws`: how many heartbeats per second the approval keepers of all
    /// replicas send together (each its shards' share), well below Step Functions'
    /// `SendTaskHeartbeat` refill (300–500 a second per account). With the heartbeat, it bounds
    /// how many approvals can wait at once: each is heartbeaten several times a heartbeat.
    #[arg(
        long,
        env = "FULFILLMENT_APPROVAL_KEEPER_RATE",
        default_value_t = NonZeroU32::new(100).expect("non-zero"),
        value_name = "PER_SECOND"
    )]
    pub approval_keeper_rate: NonZeroU32,

    /// How long the embedded engine keeps a finished order's execution (its history, tasks
    /// and timers) after it closed, e.g. `90d`, `12h`; `off` keeps everything. The order's own
    /// record (status, prices, charge, shipment, approval) is kept for good; its history
    /// answers `410 Gone` once pruned. With `--backend aws`, Step Functions applies its own
    /// retention (90 days after an execution closes) and this setting has no effect.
    #[arg(
        long,
        env = "FULFILLMENT_RETENTION",
        default_value = "90d",
        value_parser = parse_retention,
        value_name = "DURATION"
    )]
    pub retention: Retention,

    /// The delays between a webhook's attempts (after the first, which is at once), e.g.
    /// `5s,5m,30m,2h`: a delivery fails for good after the last. The default spreads ten
    /// attempts over about three days.
    #[arg(
        long,
        env = "FULFILLMENT_WEBHOOK_RETRIES",
        default_value = "5s,5m,30m,2h,5h,10h,10h,24h,24h",
        value_parser = parse_schedule,
        value_name = "DURATIONS"
    )]
    pub webhook_retries: Schedule,

    /// How long one webhook attempt may take before it counts as failed.
    #[arg(
        long,
        env = "FULFILLMENT_WEBHOOK_TIMEOUT",
        default_value = "15s",
        value_parser = parse_duration,
        value_name = "DURATION"
    )]
    pub webhook_timeout: Duration,

    /// Let webhook endpoints be on loopback, private and link-local addresses, over `http` too
    /// (a receiver on the same network, a test). Off: such URLs are refused when registered,
    /// and a name resolving to such an address is not called.
    #[arg(long, env = "FULFILLMENT_WEBHOOK_ALLOW_PRIVATE")]
    pub webhook_allow_private: bool,

    /// An endpoint whose every attempt failed for this long is disabled (its client sees why
    /// on `GET /webhooks/endpoints/{id}`).
    #[arg(
        long,
        env = "FULFILLMENT_WEBHOOK_DISABLE_AFTER",
        default_value = "5d",
        value_parser = parse_duration,
        value_name = "DURATION"
    )]
    pub webhook_disable_after: Duration,

    /// Mark the operator console's session cookie `Secure`, so browsers send it over HTTPS
    /// only: set it when operators reach the console through TLS (a proxy in front).
    #[arg(long, env = "FULFILLMENT_CONSOLE_SECURE_COOKIE")]
    pub console_secure_cookie: bool,

    /// The largest request body accepted (larger ones are answered 413).
    #[arg(
        long,
        env = "FULFILLMENT_MAX_BODY_BYTES",
        default_value_t = 64 * 1024,
        value_name = "BYTES"
    )]
    pub max_body_bytes: usize,

    /// How long a request may take before it is answered 503.
    #[arg(
        long,
        env = "FULFILLMENT_REQUEST_TIMEOUT",
        default_value = "30s",
        value_parser = parse_duration,
        value_name = "DURATION"
    )]
    pub request_timeout: Duration,

    /// How long a client may take to send a request's headers (the connection is then closed)
    /// and, after them, its body (answered 408). A connection idle this long between requests
    /// is closed too: behind a load balancer, set it above the balancer's idle timeout.
    #[arg(
        long,
        env = "FULFILLMENT_READ_TIMEOUT",
        default_value = "10s",
        value_parser = parse_duration,
        value_name = "DURATION"
    )]
    pub read_timeout: Duration,

    /// Requests per second each API key may send (a token bucket per key, in each replica);
    /// past it the answer is 429 with `Retry-After`. 0 turns the limit off.
    #[arg(
        long,
        env = "FULFILLMENT_RATE_LIMIT",
        default_value_t = 100,
        value_name = "PER_SECOND"
    )]
    pub rate_limit: u32,

    /// How many requests a key may send at once above its rate (the bucket's size).
    #[arg(
        long,
        env = "FULFILLMENT_RATE_LIMIT_BURST",
        default_value_t = 200,
        value_parser = clap::value_parser!(u32).range(1..),
        value_name = "REQUESTS"
    )]
    pub rate_limit_burst: u32,

    /// Failed authentications (unknown or revoked keys) per minute from one address; past it
    /// the address gets 429 for any key this replica has not checked lately.
    #[arg(
        long,
        env = "FULFILLMENT_FAILED_AUTH_LIMIT",
        default_value_t = 20,
        value_parser = clap::value_parser!(u32).range(1..),
        value_name = "PER_MINUTE"
    )]
    pub failed_auth_limit: u32,

    /// The header a proxy in front sets to the caller's address (e.g. `X-Forwarded-For`; its
    /// last value counts). Without it the connection's peer is the caller's address: behind a
    /// load balancer, that is the balancer's, and every caller shares one failure budget.
    #[arg(long, env = "FULFILLMENT_CLIENT_ADDRESS_HEADER", value_name = "HEADER")]
    pub client_address_header: Option<axum::http::HeaderName>,

    /// How often the repair loop runs (README, "The repair loop"): it starts orders left
    /// ACCEPTED, refunds late charges of CANCELLED orders, releases stock held by finished
    /// ones and reports what it may not fix; the first pass comes a few seconds after the
    /// start. One replica at a time on AWS (a lease in the table). `0` or `off` turns it off,
    /// and with it, on AWS, the start of orders a crash left ACCEPTED (a retry of their POST
    /// still starts them; the embedded backend queues them again at every start).
    #[arg(
        long,
        env = "FULFILLMENT_REPAIR_INTERVAL",
        default_value = "60s",
        value_parser = parse_repair_interval,
        value_name = "DURATION"
    )]
    pub repair_interval: RepairInterval,

    #[command(flatten)]
    pub repair_grace: RepairGraceArgs,

    /// How far back the repair loop's frequent passes look: they read the orders created
    /// within it and what was made for them, so their cost follows the orders of the window,
    /// not the years of history. Longer than an order lives (default: --approval-timeout plus
    /// a day); orders older than it are checked by the passes over the whole books.
    #[arg(long, env = "FULFILLMENT_REPAIR_WINDOW", value_parser = parse_repair_window, value_name = "DURATION")]
    pub repair_window: Option<Duration>,

    /// How often the repair loop reads the whole books instead of the window (every order,
    /// reservation, charge and refund; and every SKU's counts against all its reservations):
    /// the first pass after the start, then this often.
    #[arg(
        long,
        env = "FULFILLMENT_REPAIR_WHOLE_EVERY",
        default_value = "24h",
        value_parser = parse_duration,
        value_name = "DURATION"
    )]
    pub repair_whole_every: Duration,
}

#[derive(Debug, Args)]
pub struct AuditArgs {
    #[command(flatten)]
    pub backend: BackendArgs,

    /// Repair what can be repaired alone (one pass of the repair loop) after the audit.
    /// Without it the audit changes nothing.
    #[arg(long)]
    pub repair: bool,

    #[command(flatten)]
    pub repair_grace: RepairGraceArgs,

    /// The carrier, as `serve` has it: --repair voids the shipping of the orders whose charge
    /// it refunds or whose stock it releases, as the saga's compensations do.
    #[command(flatten)]
    pub shipping: ShippingArgs,
}

/// The grace an order stored but not started gets before the repair loop starts it.
#[derive(Debug, Args)]
pub struct RepairGraceArgs {
    /// How long an order may stay ACCEPTED with no execution before the repair loop starts
    /// it: longer than a POST takes from storing the order to starting its execution, so
    /// none in flight is raced (which would be harmless, but is pointless work).
    #[arg(
        long,
        env = "FULFILLMENT_REPAIR_GRACE",
        default_value = "60s",
        value_parser = parse_duration,
        value_name = "DURATION"
    )]
    pub repair_grace: Duration,
}

/// The repair loop's interval as given: a duration, or none (`0`/`off`: no loop). A type of
/// its own: clap takes a field of type `Option<_>` for an optional flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RepairInterval(pub Option<Duration>);

/// A window of at least a minute: a pass must see an order for longer than its grace.
fn parse_repair_window(raw: &str) -> Result<Duration, String> {
    let window = parse_duration(raw)?;
    match window >= Duration::from_secs(60) {
        true => Ok(window),
        false => Err("the repair window is a minute or more".to_owned()),
    }
}

fn parse_repair_interval(raw: &str) -> Result<RepairInterval, String> {
    match raw.trim() {
        "0" | "off" => Ok(RepairInterval(None)),
        other => parse_duration(other).map(|d| RepairInterval(Some(d))),
    }
}

/// How long closed executions are kept, as given: a duration, or none (`off`: for ever).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention(pub Option<Duration>);

fn parse_retention(raw: &str) -> Result<Retention, String> {
    match raw.trim() {
        "off" => Ok(Retention(None)),
        other => parse_duration(other).map(|d| Retention(Some(d))),
    }
}

/// A value parser for a secret: a value it refuses is not quoted in the error (clap quotes the
/// value it was given, and a mistyped secret is still a secret, now on stderr and in the logs).
#[derive(Clone, Copy)]
struct Secret<T>(fn(&str) -> Result<T, String>);

impl<T: Clone + Send + Sync + 'static> TypedValueParser for Secret<T> {
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<T, clap::Error> {
        let flag = arg.map_or_else(|| "the secret".to_owned(), ToString::to_string);
        let parsed = match value.to_str() {
            Some(raw) => (self.0)(raw),
            None => Err("it is not valid UTF-8".to_owned()),
        };
        parsed.map_err(|reason| {
            clap::Error::raw(
                ErrorKind::ValueValidation,
                format!("invalid value for '{flag}' (not shown: it is a secret): {reason}\n"),
            )
            .with_cmd(cmd)
        })
    }
}

pub(crate) fn parse_token(raw: &str) -> Result<OperatorToken, String> {
    let token = raw.trim();
    if token.len() < 16 {
        return Err("an operator token needs at least 16 characters".to_owned());
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("an operator token is printable ASCII without spaces".to_owned());
    }
    Ok(OperatorToken::new(token))
}

fn parse_region(raw: &str) -> Result<String, String> {
    let ok = !raw.is_empty()
        && raw
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok {
        Ok(raw.to_owned())
    } else {
        Err("a region is lowercase letters, digits and hyphens (e.g. us-east-1)".to_owned())
    }
}

fn parse_account_id(raw: &str) -> Result<String, String> {
    if raw.len() == 12 && raw.bytes().all(|b| b.is_ascii_digit()) {
        Ok(raw.to_owned())
    } else {
        Err("an account id is 12 digits".to_owned())
    }
}

fn parse_url(raw: &str) -> Result<String, String> {
    let url = raw.trim_end_matches('/');
    match url.split_once("://") {
        Some(("http" | "https", rest))
            if !rest.is_empty() && !rest.contains(char::is_whitespace) =>
        {
            Ok(url.to_owned())
        }
        _ => Err("a URL starts with http:// or https:// and has a host".to_owned()),
    }
}

fn parse_arn(raw: &str) -> Result<String, String> {
    let parts: Vec<&str> = raw.splitn(6, ':').collect();
    if parts.len() == 6 && parts[0] == "arn" && !parts[1].is_empty() && !parts[2].is_empty() {
        Ok(raw.to_owned())
    } else {
        Err("an ARN looks like arn:aws:SERVICE:REGION:ACCOUNT:RESOURCE".to_owned())
    }
}

/// DynamoDB's table name rule: 3–255 of letters, digits, `_`, `-` and `.`.
fn parse_table(raw: &str) -> Result<String, String> {
    let ok = (3..=255).contains(&raw.len())
        && raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok {
        Ok(raw.to_owned())
    } else {
        Err("a table name is 3 to 255 letters, digits, '_', '-' or '.'".to_owned())
    }
}

fn parse_duration(raw: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(raw).map_err(|e| e.to_string())?;
    if d < Duration::from_secs(1) {
        return Err("at least 1s".to_owned());
    }
    Ok(d)
}

/// Where the state lives and who charges, resolved: what `serve` and `audit` share.
#[derive(Debug, Clone)]
pub struct BackendSettings {
    pub kind: Backend,
    pub aws: AwsSettings,
    /// Required with the AWS backend (checked at start-up).
    pub state_machine_arn: Option<String>,
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
            payments,
            engine_path: engine_path(&a.db),
            store_path: a.db,
        }
    }
}

/// Everything `serve` runs with.
#[derive(Debug, Clone)]
pub struct Settings {
    pub listen: SocketAddr,
    pub backend: BackendSettings,
    /// `None`: not chosen (the sandbox, unless the payment key is live: see `--shipping`).
    pub shipping: Option<ShippingSettings>,
    /// `None`: generate one at start-up.
    pub operator_token: Option<OperatorToken>,
    pub saga: SagaSettings,
    /// Heartbeats per second of all replicas' approval keepers together (AWS backend).
    pub keeper_rate: NonZeroU32,
    pub limits: HttpLimits,
    pub rate_limits: RateLimitSettings,
    pub log_format: LogFormat,
    pub repair: RepairLoopSettings,
    /// How long the embedded engine keeps a closed execution; `None`: for ever.
    pub retention: Option<Duration>,
    pub webhooks: WebhookSettings,
    pub console: crate::console::ConsoleSettings,
}

/// The repair loop of `serve`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RepairLoopSettings {
    /// `None`: no loop.
    pub interval: Option<Duration>,
    pub grace: Duration,
    /// How far back the frequent passes read.
    pub window: Duration,
    /// How often a pass reads the whole books.
    pub whole_every: Duration,
}

impl Default for RepairLoopSettings {
    fn default() -> Self {
        RepairLoopSettings {
            interval: Some(Duration::from_secs(60)),
            grace: Duration::from_secs(60),
            window: Duration::from_secs(4 * 24 * 3600),
            whole_every: Duration::from_secs(24 * 3600),
        }
    }
}

/// Everything `audit` runs with.
#[derive(Debug, Clone)]
pub struct AuditSettings {
    pub backend: BackendSettings,
    pub log_format: LogFormat,
    /// `Some`: repair after the audit (`--repair`), with this grace for orders not started.
    pub repair: Option<Duration>,
    pub shipping: Option<ShippingSettings>,
}

impl From<AuditArgs> for AuditSettings {
    fn from(a: AuditArgs) -> Self {
        AuditSettings {
            log_format: a.backend.log_format,
            backend: a.backend.into(),
            repair: a.repair.then_some(a.repair_grace.repair_grace),
            shipping: a.shipping.into(),
        }
    }
}

impl From<ServeArgs> for Settings {
    fn from(a: ServeArgs) -> Self {
        Settings {
            listen: a.listen,
            log_format: a.backend.log_format,
            backend: a.backend.into(),
            shipping: a.shipping.into(),
            operator_token: a.operator_token,
            saga: SagaSettings {
                approval_threshold_cents: a.approval_threshold_cents,
                approval_timeout: a.approval_timeout,
                approval_heartbeat: a.approval_heartbeat,
            },
            keeper_rate: a.approval_keeper_rate,
            limits: HttpLimits {
                max_body_bytes: a.max_body_bytes,
                request_timeout: a.request_timeout,
                read_timeout: a.read_timeout,
            },
            rate_limits: RateLimitSettings {
                per_key: NonZeroU32::new(a.rate_limit).map(|rate| {
                    let burst = NonZeroU32::new(a.rate_limit_burst).unwrap_or(rate);
                    (rate, burst)
                }),
                failed_auth_per_minute: NonZeroU32::new(a.failed_auth_limit)
                    .unwrap_or(NonZeroU32::MIN),
                address_header: a.client_address_header,
            },
            repair: RepairLoopSettings {
                interval: a.repair_interval.0,
                grace: a.repair_grace.repair_grace,
                window: a
                    .repair_window
                    .unwrap_or(a.approval_timeout + Duration::from_secs(24 * 3600)),
                whole_every: a.repair_whole_every,
            },
            retention: a.retention.0,
            webhooks: WebhookSettings {
                retries: a.webhook_retries.0,
                timeout: a.webhook_timeout,
                allow_private: a.webhook_allow_private,
                disable_after: a.webhook_disable_after,
                ..WebhookSettings::default()
            },
            console: crate::console::ConsoleSettings {
                secure_cookie: a.console_secure_cookie,
            },
        }
    }
}

/// A schedule of delays, `5s,5m,…` (empty: no retries).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule(pub Vec<Duration>);

fn parse_schedule(raw: &str) -> Result<Schedule, String> {
    raw.split(',')
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .map(parse_duration)
        .collect::<Result<Vec<_>, _>>()
        .map(Schedule)
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn serve(args: &[&str]) -> Result<Settings, clap::Error> {
        let argv = ["fulfillment", "serve"].iter().chain(args);
        let Command::Serve(a) = Cli::try_parse_from(argv)?.command else {
            panic!("not serve");
        };
        Ok((*a).into())
    }

    fn engine(args: &[&str]) -> Result<EngineSettings, clap::Error> {
        let argv = ["fulfillment", "engine"].iter().chain(args);
        let Command::Engine(a) = Cli::try_parse_from(argv)?.command else {
            panic!("not engine");
        };
        Ok(a.into())
    }

    #[test]
    fn engine_defaults_are_the_documented_ones() {
        let s = engine(&[]).unwrap();
        assert_eq!(s.listen, "127.0.0.1:8083".parse().unwrap());
        assert_eq!(s.db_path, PathBuf::from("./engine.db"));
        assert_eq!(s.region, "us-east-1");
        assert_eq!(s.account_id, "123456789012");
        assert_eq!(s.endpoint.poll_wait, Duration::from_secs(60));
        assert_eq!(s.log_format, LogFormat::Text);
    }

    #[test]
    fn engine_refuses_malformed_arn_parts() {
        for (args, flag) in [
            (&["--account-id", "12345"][..], "--account-id"),
            (&["--region", "US East"][..], "--region"),
        ] {
            let e = engine(args).unwrap_err().to_string();
            assert!(e.contains(flag), "{args:?}: {e}");
        }
    }

    #[test]
    fn engine_flags_set_every_setting() {
        let s = engine(&[
            "--listen",
            "0.0.0.0:0",
            "--db",
            "/tmp/e.db",
            "--region",
            "eu-west-1",
            "--account-id",
            "000000000000",
            "--log-format",
            "json",
        ])
        .unwrap();
        assert_eq!(s.listen, "0.0.0.0:0".parse().unwrap());
        assert_eq!(s.db_path, PathBuf::from("/tmp/e.db"));
        assert_eq!(s.region, "eu-west-1");
        assert_eq!(s.account_id, "000000000000");
        assert_eq!(s.log_format, LogFormat::Json);
    }

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn defaults_are_the_documented_ones() {
        let s = serve(&[]).unwrap();
        assert_eq!(s.listen, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(s.backend.kind, Backend::Embedded);
        assert_eq!(s.backend.store_path, PathBuf::from("./fulfillment.db"));
        assert_eq!(
            s.backend.engine_path,
            PathBuf::from("./fulfillment.engine.db")
        );
        assert!(s.operator_token.is_none());
        assert_eq!(s.saga.approval_threshold_cents, 100_000);
        assert_eq!(s.saga.approval_timeout, Duration::from_secs(3 * 24 * 3600));
        assert_eq!(s.saga.approval_heartbeat, Duration::from_secs(300));
        assert_eq!(s.keeper_rate.get(), 100);
        assert_eq!(s.limits.max_body_bytes, 64 * 1024);
        assert_eq!(s.limits.request_timeout, Duration::from_secs(30));
        assert_eq!(s.limits.read_timeout, Duration::from_secs(10));
        assert_eq!(s.log_format, LogFormat::Text);
        assert_eq!(s.repair, RepairLoopSettings::default());
        assert_eq!(s.repair.interval, Some(Duration::from_secs(60)));
        assert_eq!(s.retention, Some(Duration::from_secs(90 * 24 * 3600)));
    }

    #[test]
    fn retention_is_a_duration_of_a_second_or_more_or_off() {
        let s = serve(&["--retention", "36h"]).unwrap();
        assert_eq!(s.retention, Some(Duration::from_secs(36 * 3600)));
        assert_eq!(serve(&["--retention", "off"]).unwrap().retention, None);
        for bad in ["0", "500ms", "forever", ""] {
            assert!(serve(&["--retention", bad]).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_repair_loop_is_set_by_its_flags_and_off_is_no_loop() {
        let s = serve(&["--repair-interval", "5m", "--repair-grace", "10s"]).unwrap();
        assert_eq!(
            s.repair,
            RepairLoopSettings {
                interval: Some(Duration::from_secs(300)),
                grace: Duration::from_secs(10),
                ..RepairLoopSettings::default()
            }
        );
        // The window follows the approval window unless given; whole passes daily unless told.
        let s = serve(&["--approval-timeout", "1d"]).unwrap();
        assert_eq!(s.repair.window, Duration::from_secs(2 * 24 * 3600));
        let s = serve(&["--repair-window", "10m", "--repair-whole-every", "6h"]).unwrap();
        assert_eq!(s.repair.window, Duration::from_secs(600));
        assert_eq!(s.repair.whole_every, Duration::from_secs(6 * 3600));
        for bad in ["30s", "0", "soon"] {
            assert!(serve(&["--repair-window", bad]).is_err(), "{bad:?}");
        }
        for off in ["0", "off"] {
            assert_eq!(
                serve(&["--repair-interval", off]).unwrap().repair.interval,
                None
            );
        }
        assert!(serve(&["--repair-interval", "soon"]).is_err());
        let plain = audit(&[]).unwrap();
        assert_eq!(plain.repair, None, "a plain audit repairs nothing");
        let repair = audit(&["--repair", "--repair-grace", "2m"]).unwrap();
        assert_eq!(repair.repair, Some(Duration::from_secs(120)));
    }

    #[test]
    fn flags_set_every_setting() {
        let s = serve(&[
            "--listen",
            "0.0.0.0:0",
            "--db",
            "/var/lib/f/state.sqlite",
            "--backend",
            "aws",
            "--operator-token",
            "0123456789abcdef-token",
            "--approval-threshold-cents",
            "5000",
            "--approval-timeout",
            "30s",
            "--approval-heartbeat",
            "10s",
            "--max-body-bytes",
            "1024",
            "--request-timeout",
            "2s",
            "--read-timeout",
            "3s",
            "--log-format",
            "json",
        ])
        .unwrap();
        assert_eq!(s.listen, "0.0.0.0:0".parse().unwrap());
        assert_eq!(s.backend.kind, Backend::Aws);
        assert_eq!(
            s.backend.engine_path,
            PathBuf::from("/var/lib/f/state.sqlite.engine")
        );
        assert_eq!(s.operator_token.unwrap().expose(), "0123456789abcdef-token");
        assert_eq!(s.saga.approval_threshold_cents, 5000);
        assert_eq!(s.saga.approval_timeout, Duration::from_secs(30));
        assert_eq!(s.saga.approval_heartbeat, Duration::from_secs(10));
        assert_eq!(s.limits.max_body_bytes, 1024);
        assert_eq!(s.limits.request_timeout, Duration::from_secs(2));
        assert_eq!(s.limits.read_timeout, Duration::from_secs(3));
        assert_eq!(s.log_format, LogFormat::Json);
    }

    #[test]
    fn bad_values_are_refused_with_the_flag_named() {
        for (args, flag) in [
            (&["--approval-timeout", "soon"][..], "--approval-timeout"),
            (
                &["--approval-heartbeat", "10ms"][..],
                "--approval-heartbeat",
            ),
            (&["--operator-token", "short"][..], "--operator-token"),
            (&["--backend", "gcp"][..], "--backend"),
            (&["--listen", "localhost"][..], "--listen"),
            (
                &["--state-machine-arn", "fulfillment"][..],
                "--state-machine-arn",
            ),
            (&["--table", "a b"][..], "--table"),
            (&["--endpoint-url", "localhost:4566"][..], "--endpoint-url"),
            (&["--payments", "paypal"][..], "--payments"),
            (&["--stripe-url", "ftp://x"][..], "--stripe-url"),
            (&["--read-timeout", "0s"][..], "--read-timeout"),
        ] {
            let e = serve(args).unwrap_err().to_string();
            assert!(e.contains(flag), "{args:?}: {e}");
        }
    }

    #[test]
    fn the_engine_file_sits_beside_the_store() {
        for (store, engine) in [
            ("fulfillment.db", "fulfillment.engine.db"),
            ("/data/orders.db", "/data/orders.engine.db"),
            ("state", "state.engine"),
            ("dir/x.sqlite", "dir/x.sqlite.engine"),
            (".db", ".db.engine"),
        ] {
            assert_eq!(engine_path(Path::new(store)), PathBuf::from(engine));
        }
    }

    #[test]
    fn aws_flags_set_the_aws_settings() {
        let arn = "arn:aws:states:eu-west-1:123456789012:stateMachine:fulfillment-order-saga";
        let s = serve(&[
            "--backend",
            "aws",
            "--aws-region",
            "eu-west-1",
            "--aws-profile",
            "prod",
            "--endpoint-url",
            "http://127.0.0.1:4566/",
            "--table",
            "orders-prod",
            "--state-machine-arn",
            arn,
            "--payments",
            "stripe",
            "--stripe-url",
            "http://127.0.0.1:12111",
            "--stripe-key",
            "sk_test_abc",
            "--stripe-timeout",
            "5s",
        ])
        .unwrap();
        assert_eq!(
            s.backend.aws,
            AwsSettings {
                region: Some("eu-west-1".to_owned()),
                profile: Some("prod".to_owned()),
                endpoint_url: Some("http://127.0.0.1:4566".to_owned()),
                table: "orders-prod".to_owned(),
            }
        );
        assert_eq!(s.backend.state_machine_arn.as_deref(), Some(arn));
        let Some(PaymentsSettings::Stripe(stripe)) = s.backend.payments else {
            panic!("stripe chosen");
        };
        assert_eq!(stripe.base_url, "http://127.0.0.1:12111");
        assert_eq!(stripe.secret_key.expose(), "sk_test_abc");
        assert_eq!(stripe.timeout, Duration::from_secs(5));
    }

    #[test]
    fn payments_are_unchosen_by_default_and_the_table_is_fulfillment() {
        let s = serve(&[]).unwrap();
        assert!(s.backend.payments.is_none());
        assert!(s.backend.state_machine_arn.is_none());
        assert_eq!(s.backend.aws.table, "fulfillment");
        assert_eq!(s.backend.aws.endpoint_url, None);
    }

    #[test]
    fn provision_takes_the_aws_settings_and_a_role() {
        let argv = [
            "fulfillment",
            "provision",
            "--endpoint-url",
            "http://127.0.0.1:9000",
            "--state-machine-role-arn",
            "arn:aws:iam::123456789012:role/fulfillment-sfn",
        ];
        let Command::Provision(a) = Cli::try_parse_from(argv).unwrap().command else {
            panic!("not provision");
        };
        let p = ProvisionSettings::from(a);
        assert_eq!(p.aws.endpoint_url.as_deref(), Some("http://127.0.0.1:9000"));
        assert_eq!(p.aws.table, "fulfillment");
        assert_eq!(p.role_arn, "arn:aws:iam::123456789012:role/fulfillment-sfn");
        let missing = Cli::try_parse_from(["fulfillment", "provision"]).unwrap_err();
        assert!(missing.to_string().contains("--state-machine-role-arn"));
    }

    fn audit(args: &[&str]) -> Result<AuditSettings, clap::Error> {
        let argv = ["fulfillment", "audit"].iter().chain(args);
        let Command::Audit(a) = Cli::try_parse_from(argv)?.command else {
            panic!("not audit");
        };
        Ok(a.into())
    }

    #[test]
    fn audit_takes_the_backend_settings_of_serve() {
        let arn = "arn:aws:states:eu-west-1:123456789012:stateMachine:fulfillment-order-saga";
        let args = [
            "--db",
            "/data/f.db",
            "--backend",
            "aws",
            "--table",
            "orders-prod",
            "--state-machine-arn",
            arn,
            "--payments",
            "stripe",
            "--stripe-key",
            "sk_test_abc",
            "--log-format",
            "json",
        ];
        let a = audit(&args).unwrap();
        let s = serve(&args).unwrap();
        assert_eq!(format!("{:?}", a.backend), format!("{:?}", s.backend));
        assert_eq!(a.backend.kind, Backend::Aws);
        assert_eq!(a.backend.engine_path, PathBuf::from("/data/f.engine.db"));
        assert_eq!(a.log_format, LogFormat::Json);
        let defaults = audit(&[]).unwrap();
        assert_eq!(defaults.backend.kind, Backend::Embedded);
        assert_eq!(
            defaults.backend.store_path,
            PathBuf::from("./fulfillment.db")
        );
        // Only serve's own settings are serve's.
        let e = audit(&["--listen", "127.0.0.1:0"]).unwrap_err().to_string();
        assert!(e.contains("--listen"), "{e}");
    }

    #[test]
    fn shipping_is_unchosen_by_default_and_its_flags_set_the_easypost_settings() {
        assert!(serve(&[]).unwrap().shipping.is_none());
        assert!(matches!(
            serve(&["--shipping", "sandbox"]).unwrap().shipping,
            Some(ShippingSettings::Sandbox)
        ));
        let s = serve(&[
            "--shipping",
            "easypost",
            "--easypost-url",
            "http://127.0.0.1:12112/",
            "--easypost-key",
            "EZTK_abc",
            "--easypost-timeout",
            "5s",
            "--easypost-carrier",
            "UPS",
            "--easypost-service",
            "Ground",
            "--easypost-from-address",
            "adr_123",
            "--easypost-unit-weight-oz",
            "8",
        ])
        .unwrap();
        let Some(ShippingSettings::EasyPost(c)) = s.shipping else {
            panic!("easypost chosen");
        };
        assert_eq!(c.base_url, "http://127.0.0.1:12112");
        assert_eq!(c.api_key.expose(), "EZTK_abc");
        assert_eq!(c.timeout, Duration::from_secs(5));
        assert_eq!(
            (c.carrier.as_str(), c.service.as_deref()),
            ("UPS", Some("Ground"))
        );
        assert_eq!(c.from_address, serde_json::json!({"id": "adr_123"}));
        assert_eq!(c.unit_weight_oz, 8);
        let Some(ShippingSettings::EasyPost(d)) =
            serve(&["--shipping", "easypost"]).unwrap().shipping
        else {
            panic!("easypost chosen");
        };
        assert_eq!(d.base_url, "https://api.easypost.com");
        assert_eq!((d.carrier.as_str(), d.service), ("USPS", None));
        assert_eq!((d.timeout, d.unit_weight_oz), (Duration::from_secs(20), 16));
        for (args, flag) in [
            (&["--shipping", "ups"][..], "--shipping"),
            (
                &["--easypost-from-address", "the warehouse"][..],
                "--easypost-from-address",
            ),
            (
                &["--easypost-unit-weight-oz", "0"][..],
                "--easypost-unit-weight-oz",
            ),
            (
                &["--easypost-url", "api.easypost.com"][..],
                "--easypost-url",
            ),
        ] {
            let e = serve(args).unwrap_err().to_string();
            assert!(e.contains(flag), "{args:?}: {e}");
        }
        let s = serve(&[
            "--shipping",
            "easypost",
            "--easypost-key",
            "EZAK_live_secret",
        ])
        .unwrap();
        assert!(!format!("{s:?}").contains("EZAK_live_secret"));
    }

    #[test]
    fn the_stripe_key_never_prints() {
        let s = serve(&["--payments", "stripe", "--stripe-key", "sk_live_secret"]).unwrap();
        assert!(!format!("{s:?}").contains("sk_live_secret"));
    }

    #[test]
    fn a_refused_secret_is_not_quoted_in_the_error() {
        let e = serve(&["--operator-token", "my secret pass phrase"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--operator-token"), "{e}");
        assert!(e.contains("without spaces"), "{e}");
        assert!(!e.contains("secret pass"), "{e}");
        let e = serve(&["--operator-token", "short-secret"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("at least 16"), "{e}");
        assert!(!e.contains("short-secret"), "{e}");
    }

    #[test]
    fn the_service_listens_on_loopback_unless_told_otherwise() {
        assert!(serve(&[]).unwrap().listen.ip().is_loopback());
        assert!(engine(&[]).unwrap().listen.ip().is_loopback());
    }

    #[test]
    fn the_token_never_prints() {
        let s = serve(&["--operator-token", "0123456789abcdef-secret"]).unwrap();
        assert!(!format!("{s:?}").contains("secret"));
    }
}
