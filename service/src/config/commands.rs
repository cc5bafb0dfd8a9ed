//! `backup`, `restore`, `keys`, `versions` and `engine`: their arguments and what each runs with.

use super::*;

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

#[derive(Debug, Subcommand)]
pub enum VersionsCommand {
    /// The newest versions: number, share of new orders, orders running, created, description.
    List(VersionsListArgs),
    /// Route new orders wholly to VERSION (default: the version before the live one) and pin
    /// `live` there; orders already started keep their versions.
    Rollback(VersionsRollbackArgs),
    /// Route new orders wholly to this build's definition (publishing it when needed), and
    /// unpin `live`: ends a canary or a rollback.
    Promote(VersionsStoreArgs),
}

#[derive(Debug, Args)]
pub struct VersionsListArgs {
    /// How many versions, newest first.
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
    #[command(flatten)]
    pub backend: BackendArgs,
}

#[derive(Debug, Args)]
pub struct VersionsRollbackArgs {
    /// The version to route new orders to, as `versions list` numbers it.
    pub version: Option<u64>,
    #[command(flatten)]
    pub backend: BackendArgs,
}

#[derive(Debug, Args)]
pub struct VersionsStoreArgs {
    #[command(flatten)]
    pub backend: BackendArgs,
}

/// What `versions` does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionsAction {
    List { limit: usize },
    Rollback { to: Option<u64> },
    Promote,
}

/// Everything `versions` runs with.
#[derive(Debug, Clone)]
pub struct VersionsSettings {
    pub action: VersionsAction,
    pub backend: BackendSettings,
    pub log_format: LogFormat,
}

impl VersionsCommand {
    pub fn log_format(&self) -> LogFormat {
        match self {
            VersionsCommand::List(a) => a.backend.log_format,
            VersionsCommand::Rollback(a) => a.backend.log_format,
            VersionsCommand::Promote(a) => a.backend.log_format,
        }
    }
}

impl From<VersionsCommand> for VersionsSettings {
    fn from(c: VersionsCommand) -> Self {
        let (action, backend) = match c {
            VersionsCommand::List(a) => (VersionsAction::List { limit: a.limit }, a.backend),
            VersionsCommand::Rollback(a) => (VersionsAction::Rollback { to: a.version }, a.backend),
            VersionsCommand::Promote(a) => (VersionsAction::Promote, a.backend),
        };
        VersionsSettings {
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
