//! The service's settings: the command line and its `FULFILLMENT_*` environment variables
//! (clap), turned into one typed [`Settings`] value. Only `main` parses them; everything else
//! receives the parts it needs.

use ::providers::easypost::{EASYPOST_API, EasyPostConfig, parse_from_address};
use ::providers::stripe::{SecretKey, StripeConfig};
use api::http::rate_limit::RateLimitSettings;
use api::http::{HttpLimits, OperatorToken};
use clap::builder::TypedValueParser;
use clap::error::ErrorKind;
use clap::{Args, Parser, Subcommand, ValueEnum};
use sfn_server::SfnSettings;
use std::ffi::OsStr;
use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::time::Duration;
use webhooks::WebhookSettings;
use workflow::SagaSettings;

mod audit;
mod aws;
mod backend;
mod commands;
mod providers;
mod serve;
mod values;

pub use audit::*;
pub use aws::*;
pub use backend::*;
pub use commands::*;
pub use providers::*;
pub use serve::*;
pub use values::*;

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

    /// See and steer the saga's versions: which definition new orders start on.
    ///
    /// Every start of the service publishes its definition as a version of the state machine
    /// and routes the alias `live` to it (docs/upgrading.md); orders already started finish
    /// on the version they started on. `list` shows each version, its share of new orders
    /// and how many orders run on it; `rollback` routes new orders back to an earlier
    /// version and pins `live` there, so that no start moves it again; `promote` routes them
    /// all to this build's definition (ending a canary or a rollback). On the embedded
    /// backend they need the service stopped (it holds the engine's file); on AWS they run
    /// beside the replicas.
    #[command(subcommand)]
    Versions(VersionsCommand),

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

#[cfg(test)]
mod tests;
