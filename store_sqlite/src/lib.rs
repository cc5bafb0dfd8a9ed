//! SQLite adapters of the embedded default. One database file holds the orders, the stock and
//! reservations, and the sandbox gateways' ledger; [`SqliteStore`] opens it, migrates it and
//! implements [`OrderRepository`](store::OrderRepository) and
//! [`InventoryRepository`](store::InventoryRepository).
//!
//! Writes go to one writer thread (`writer.rs`), which commits them in groups: each write runs
//! in a savepoint of its own inside the group's transaction, so it is atomic and isolated as if
//! alone, and a group costs one fsync however many writes it carries. Reads use a few other
//! connections on blocking threads, which WAL lets run beside the writer and which see every
//! committed write.

mod codec;
mod inventory;
mod keys;
mod labels;
mod ledger;
mod listing;
mod orders;
mod schema;
mod webhooks;
mod writer;

pub(crate) use codec::*;
pub use schema::SCHEMA_VERSION;
pub use writer::WriterStats;

use rusqlite::{Connection, OpenFlags, Savepoint, Transaction};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use store::error::StoreError;
use tokio::sync::Semaphore;
use writer::{Lane, Writer};

/// How hard a commit works to survive a power cut.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Durability {
    /// A commit is on disk before the call returns (the default): the WAL is flushed after it,
    /// off the writer's thread, and only then is anyone answered (the `durable` crate).
    #[default]
    Full,
    /// No flush after a commit: a power cut may lose the last commits, never corrupt the file; a
    /// process crash loses nothing. For tests and benchmarks.
    Normal,
}

/// The store: cheap to clone, every clone shares the same writer and readers.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    writer: Writer,
    readers: Vec<Mutex<Connection>>,
    /// One permit a reader: a read that goes to a blocking thread takes one first, so a burst
    /// of reads waits here as tasks, not as blocking threads parked on the readers' locks
    /// (Tokio would start one a read, up to 512, each with its stack and allocator heap:
    /// docs/benchmarks/performance-goals.md).
    permits: Semaphore,
    /// Where the next reader search starts, so readers are used evenly.
    next_reader: AtomicUsize,
    path: PathBuf,
}

/// Read connections: reads run on blocking threads, a few at a time, beside the writer.
const READERS: usize = 4;

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

/// Prepared statements each connection keeps. rusqlite's default of 16 is fewer than the
/// writer's statements for one saga's writes: it prepared a statement again on most writes
/// (`sqlite3_prepare` was 4 % of the writer's samples, as much again as the savepoints' own).
const STATEMENT_CACHE: usize = 64;

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
        writer.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        writer.pragma_update(None, "journal_mode", "WAL")?;
        // With full durability the writer flushes the WAL itself, on another thread, before it
        // answers for a commit (the `durable` crate); SQLite need not wait for the disk.
        writer.pragma_update(None, "synchronous", "NORMAL")?;
        // A reader that holds a snapshot long (`fulfillment backup`) holds checkpoints back and
        // the WAL grows meanwhile; once checkpointed, it is cut back to this size.
        writer.pragma_update(None, "journal_size_limit", 64 * 1024 * 1024)?;
        schema::migrate(&mut writer, SCHEMA_VERSION)?;
        let wal = match durability {
            Durability::Full => Some(durable::wal_of(&path).map_err(|e| {
                StoreError::Internal(format!("cannot open the WAL of {}: {e}", path.display()))
            })?),
            Durability::Normal => None,
        };

        let readers = (0..READERS)
            .map(|_| {
                let reader = Connection::open(&path)?;
                reader.busy_timeout(BUSY_TIMEOUT)?;
                reader.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
                // A guard against a read path that writes by mistake.
                reader.pragma_update(None, "query_only", true)?;
                Ok(Mutex::new(reader))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        SqliteStore::assemble(path, writer, wal, readers)
    }

    fn assemble(
        path: PathBuf,
        writer: Connection,
        wal: Option<std::fs::File>,
        readers: Vec<Mutex<Connection>>,
    ) -> Result<SqliteStore, StoreError> {
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                writer: Writer::start(writer, wal)?,
                permits: Semaphore::new(readers.len()),
                readers,
                next_reader: AtomicUsize::new(0),
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
        let readers = vec![Mutex::new(reader), Mutex::new(open()?)];
        let writer = open()?;
        SqliteStore::assemble(path, writer, None, readers)
    }

    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The schema version of the open file (`PRAGMA user_version`).
    pub async fn schema_version(&self) -> Result<u32, StoreError> {
        self.read(schema::version).await
    }

    /// The group-commit writer's counters.
    pub fn writer_stats(&self) -> &WriterStats {
        self.inner.writer.stats()
    }

    /// Runs `f` in the writer's next group transaction and answers once that is committed.
    /// `f` makes its changes in a savepoint ([`savepoint`]) and commits it; a savepoint it
    /// drops, by returning early or with an error, leaves nothing behind.
    pub(crate) async fn write<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&mut Transaction<'c>) -> Result<T, StoreError> + Send + 'static,
    {
        self.inner.writer.write(Lane::InTurn, f).await
    }

    /// [`SqliteStore::write`] in the first lane: for a write a client's request waits on (an
    /// order's intake), which must not wait behind a burst of the saga's writes.
    pub(crate) async fn write_first<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&mut Transaction<'c>) -> Result<T, StoreError> + Send + 'static,
    {
        self.inner.writer.write(Lane::First, f).await
    }

    /// Runs `f`, a lookup by key, on a read connection: here, when one is free (a read of a
    /// few cached pages takes microseconds, less than handing it to a blocking thread and
    /// back), else on a blocking thread.
    pub(crate) async fn read<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        if let Some(conn) = self.inner.free_reader() {
            return f(&conn);
        }
        self.scan(f).await
    }

    /// Runs `f`, which may read many rows (a listing), on a read connection on a blocking
    /// thread, once a reader's permit is free.
    pub(crate) async fn scan<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        // Never closed, so never an error. Held until the answer is back here, so the next
        // read finds the blocking thread this one used idle instead of starting another.
        let _permit = self.inner.permits.acquire().await.ok();
        let inner = self.inner.clone();
        run_blocking(move || f(&inner.reader())).await
    }
}

impl Inner {
    /// A read connection nobody is using, if there is one.
    fn free_reader(&self) -> Option<MutexGuard<'_, Connection>> {
        let start = self.next_reader.fetch_add(1, Ordering::Relaxed);
        let n = self.readers.len();
        (0..n).find_map(|i| self.readers[(start + i) % n].try_lock().ok())
    }

    /// A free read connection if there is one, else the next one's turn.
    fn reader(&self) -> MutexGuard<'_, Connection> {
        self.free_reader().unwrap_or_else(|| {
            lock(
                &self.readers
                    [self.next_reader.fetch_add(1, Ordering::Relaxed) % self.readers.len()],
            )
        })
    }
}

/// A write's own savepoint in the group transaction: the group holds the write lock from its
/// start, so what the write reads cannot change before it writes; committing the savepoint
/// keeps its changes, dropping it undoes them.
pub(crate) fn savepoint<'a>(tx: &'a mut Transaction<'_>) -> Result<Savepoint<'a>, StoreError> {
    Ok(tx.savepoint()?)
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
