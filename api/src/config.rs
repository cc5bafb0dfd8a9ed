//! The service's settings: the command line and its `FULFILLMENT_*` environment variables
//! (clap), turned into one typed [`Settings`] value. Only `main` parses them; everything else
//! receives the parts it needs.

use crate::http::{HttpLimits, OperatorToken};
use crate::orders::SagaSettings;
use crate::sfn_server::SfnSettings;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Order fulfillment as durable sagas: an HTTP API that runs every order as a Step Functions
/// Standard workflow (reserve, charge, approve, ship; refund and release on failure).
#[derive(Debug, Parser)]
#[command(
    name = "fulfillment",
    version,
    propagate_version = true,
    after_help = "Every setting of `serve` can also come from a FULFILLMENT_* environment variable \
                  (FULFILLMENT_LISTEN, FULFILLMENT_DB, FULFILLMENT_OPERATOR_TOKEN, …); flags win. \
                  See `fulfillment serve --help` and `fulfillment engine --help`. Log level: RUST_LOG (default info)."
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
    Serve(ServeArgs),

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

/// The workflow and state backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// The in-process, durable Step Functions engine and SQLite (no servers needed).
    Embedded,
    /// AWS Step Functions and DynamoDB (not built yet).
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

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The address the HTTP API listens on (port 0 picks a free port; the address bound is
    /// printed as `listening on http://ADDR`).
    #[arg(long, env = "FULFILLMENT_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,

    /// The store's SQLite file (embedded backend); the engine's state is kept beside it.
    #[arg(long, env = "FULFILLMENT_DB", default_value = "./fulfillment.db")]
    pub db: PathBuf,

    /// Where workflows run and state is kept.
    #[arg(long, env = "FULFILLMENT_BACKEND", value_enum, default_value_t = Backend::Embedded)]
    pub backend: Backend,

    /// The bearer token operator endpoints require (approvals, inventory): at least 16
    /// printable characters, no spaces. When none is given, one is generated at start-up and
    /// printed once to stderr with a ready-to-paste curl line; it is never logged.
    #[arg(
        long,
        env = "FULFILLMENT_OPERATOR_TOKEN",
        hide_env_values = true,
        value_parser = parse_token,
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

    /// Log format; the level comes from RUST_LOG (default `info`).
    #[arg(long, env = "FULFILLMENT_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

fn parse_token(raw: &str) -> Result<OperatorToken, String> {
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

fn parse_duration(raw: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(raw).map_err(|e| e.to_string())?;
    if d < Duration::from_secs(1) {
        return Err("at least 1s".to_owned());
    }
    Ok(d)
}

/// Everything `serve` runs with.
#[derive(Debug, Clone)]
pub struct Settings {
    pub listen: SocketAddr,
    pub backend: Backend,
    pub store_path: PathBuf,
    pub engine_path: PathBuf,
    /// `None`: generate one at start-up.
    pub operator_token: Option<OperatorToken>,
    pub saga: SagaSettings,
    pub limits: HttpLimits,
    pub log_format: LogFormat,
}

impl From<ServeArgs> for Settings {
    fn from(a: ServeArgs) -> Self {
        Settings {
            listen: a.listen,
            backend: a.backend,
            engine_path: engine_path(&a.db),
            store_path: a.db,
            operator_token: a.operator_token,
            saga: SagaSettings {
                approval_threshold_cents: a.approval_threshold_cents,
                approval_timeout: a.approval_timeout,
                approval_heartbeat: a.approval_heartbeat,
            },
            limits: HttpLimits {
                max_body_bytes: a.max_body_bytes,
                request_timeout: a.request_timeout,
            },
            log_format: a.log_format,
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn serve(args: &[&str]) -> Result<Settings, clap::Error> {
        let argv = ["fulfillment", "serve"].iter().chain(args);
        let Command::Serve(a) = Cli::try_parse_from(argv)?.command else {
            panic!("not serve");
        };
        Ok(a.into())
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
        assert_eq!(s.backend, Backend::Embedded);
        assert_eq!(s.store_path, PathBuf::from("./fulfillment.db"));
        assert_eq!(s.engine_path, PathBuf::from("./fulfillment.engine.db"));
        assert!(s.operator_token.is_none());
        assert_eq!(s.saga.approval_threshold_cents, 100_000);
        assert_eq!(s.saga.approval_timeout, Duration::from_secs(3 * 24 * 3600));
        assert_eq!(s.saga.approval_heartbeat, Duration::from_secs(300));
        assert_eq!(s.limits.max_body_bytes, 64 * 1024);
        assert_eq!(s.limits.request_timeout, Duration::from_secs(30));
        assert_eq!(s.log_format, LogFormat::Text);
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
            "--log-format",
            "json",
        ])
        .unwrap();
        assert_eq!(s.listen, "0.0.0.0:0".parse().unwrap());
        assert_eq!(s.backend, Backend::Aws);
        assert_eq!(
            s.engine_path,
            PathBuf::from("/var/lib/f/state.sqlite.engine")
        );
        assert_eq!(s.operator_token.unwrap().expose(), "0123456789abcdef-token");
        assert_eq!(s.saga.approval_threshold_cents, 5000);
        assert_eq!(s.saga.approval_timeout, Duration::from_secs(30));
        assert_eq!(s.saga.approval_heartbeat, Duration::from_secs(10));
        assert_eq!(s.limits.max_body_bytes, 1024);
        assert_eq!(s.limits.request_timeout, Duration::from_secs(2));
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
    fn the_token_never_prints() {
        let s = serve(&["--operator-token", "0123456789abcdef-secret"]).unwrap();
        assert!(!format!("{s:?}").contains("secret"));
    }
}
