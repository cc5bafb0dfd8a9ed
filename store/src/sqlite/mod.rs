//! SQLite adapters of the embedded default. One database file holds the orders, the stock and
//! reservations, and the sandbox gateways' ledger; [`SqliteStore`] opens it, migrates it and
//! implements [`OrderRepository`](crate::OrderRepository) and
//! [`InventoryRepository`](crate::InventoryRepository).
//!
//! Every operation is one short transaction on a blocking thread. Writes go through a single
//! writer connection (SQLite allows one writer at a time anyway, and queuing on a mutex is
//! cheaper than spinning on `SQLITE_BUSY`); reads use a second connection, which WAL lets run
//! beside the writer and which sees every committed write.

mod codec;
mod inventory;
mod ledger;
mod orders;
mod schema;

pub(crate) use codec::*;
pub use schema::SCHEMA_VERSION;

use crate::error::StoreError;
use crate::sandbox::{SandboxPayments, SandboxShipping};
use rusqlite::{Connection, OpenFlags, Transaction, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// How hard a commit works to survive a power cut.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Durability {
    /// `synchronous=FULL`: a commit is on disk before the call returns (the default).
    #[default]
    Full,
    /// `synchronous=NORMAL`: a power cut may lose the last commits, never corrupt the file; a
    /// process crash loses nothing. For tests and benchmarks.
    Normal,
}

/// The store: cheap to clone, every clone shares the same two connections.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    writer: Mutex<Connection>,
    reader: Mutex<Connection>,
    path: PathBuf,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

/// How long a connection waits for another process's write lock before reporting
/// `StoreError::Unavailable`.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

impl SqliteStore {
    /// Opens (creating if needed) the database file with full durability and brings its schema
    /// up to date. Blocking: call it at startup, before serving.
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteStore, StoreError> {
        SqliteStore::open_with(path, Durability::Full)
    }

    pub fn open_with(
        path: impl AsRef<Path>,
        durability: Durability,
    ) -> Result<SqliteStore, StoreError> {
        let path = path.as_ref().to_path_buf();
        let mut writer = Connection::open(&path)?;
        writer.busy_timeout(BUSY_TIMEOUT)?;
        writer.pragma_update(None, "journal_mode", "WAL")?;
        let synchronous = match durability {
            Durability::Full => "FULL",
            Durability::Normal => "NORMAL",
        };
        writer.pragma_update(None, "synchronous", synchronous)?;
        schema::migrate(&mut writer, SCHEMA_VERSION)?;

        let reader = Connection::open(&path)?;
        reader.busy_timeout(BUSY_TIMEOUT)?;
        // A guard against a read path that writes by mistake.
        reader.pragma_update(None, "query_only", true)?;
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                writer: Mutex::new(writer),
                reader: Mutex::new(reader),
                path,
            }),
        })
    }

    /// Opens an existing file for reading only, beside a service that may be writing it (WAL
    /// lets readers run beside the writer, in this process or another): nothing is created or
    /// migrated, and every write is refused by SQLite. The file must have this build's schema
    /// version, so that each read means what this build means by it. Blocking.
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<SqliteStore, StoreError> {
        let path = path.as_ref().to_path_buf();
        let open = || -> Result<Connection, StoreError> {
            let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
            let conn = Connection::open_with_flags(&path, flags)?;
            conn.busy_timeout(BUSY_TIMEOUT)?;
            Ok(conn)
        };
        let reader = open()?;
        let version = schema::version(&reader)?;
        if version != SCHEMA_VERSION {
            let advice = if version < SCHEMA_VERSION {
                "start `fulfillment serve` of this build on it once to migrate it"
            } else {
                "use the build that wrote it"
            };
            return Err(StoreError::Internal(format!(
                "{} has schema version {version}, this build reads {SCHEMA_VERSION}: {advice}",
                path.display()
            )));
        }
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                writer: Mutex::new(open()?),
                reader: Mutex::new(reader),
                path,
            }),
        })
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The schema version of the open file (`PRAGMA user_version`).
    pub async fn schema_version(&self) -> Result<u32, StoreError> {
        self.read(schema::version).await
    }

    /// The sandbox payment gateway over this file's ledger.
    pub fn payments(&self) -> SandboxPayments {
        SandboxPayments::new(self.clone())
    }

    /// The sandbox carrier over this file's ledger.
    pub fn shipping(&self) -> SandboxShipping {
        SandboxShipping::new(self.clone())
    }

    /// Runs `f` on the writer connection on a blocking thread.
    pub(crate) async fn write<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let inner = self.inner.clone();
        run_blocking(move || f(&mut lock(&inner.writer))).await
    }

    /// Runs `f` on the read connection on a blocking thread.
    pub(crate) async fn read<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let inner = self.inner.clone();
        run_blocking(move || f(&lock(&inner.reader))).await
    }
}

/// Starts a write transaction that takes the write lock at once, so what it reads cannot change
/// before it writes (a deferred transaction could fail to upgrade with `SQLITE_BUSY` half-way).
pub(crate) fn immediate(conn: &mut Connection) -> Result<Transaction<'_>, StoreError> {
    Ok(conn.transaction_with_behavior(TransactionBehavior::Immediate)?)
}

fn lock(m: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    // A panic while holding the lock poisons it; the connection itself is still sound once any
    // transaction the panic interrupted is rolled back.
    let guard = m.lock().unwrap_or_else(PoisonError::into_inner);
    if !guard.is_autocommit() {
        let _ = guard.execute_batch("ROLLBACK");
    }
    guard
}

async fn run_blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| StoreError::Internal(format!("store task failed: {e}")))?
}
