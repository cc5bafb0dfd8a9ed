//! The engine's own SQLite database (not the service's `store` crate): the connection and its
//! transactions here, the schema in `schema.rs`, and the queries of each table family in a file
//! of its own. Writes happen only on the driver's writer thread inside its grouped
//! transactions; reads use their own connection (WAL lets them run beside the writer).

mod aliases;
mod codec;
mod event_types;
mod executions;
mod history;
mod machines;
mod payloads;
mod redrive;
mod retention;
mod schema;
mod tasks;
mod timers;

#[cfg(test)]
mod test_support;

pub use aliases::AliasRow;
pub use executions::{ExecutionRow, StartedBy};
pub use machines::{DefinitionRow, StateMachineRow, VersionRow};
pub use tasks::{TaskRow, TaskStatus};
pub use timers::TimerKind;

use crate::driver::SyncPolicy;
use codec::Codec;
use rusqlite::Connection;
use std::path::Path;

pub type Result<T> = std::result::Result<T, rusqlite::Error>;

pub struct Store {
    conn: Connection,
    /// Packs the JSON the writer stores and unpacks what any connection reads (`codec.rs`).
    codec: std::cell::RefCell<Codec>,
    /// With [`SyncPolicy::Full`], the WAL the writer's syncer flushes after each commit before
    /// anyone is answered (the `durable` crate); taken by the writer.
    wal: Option<std::fs::File>,
}

/// An I/O failure outside SQLite, as SQLite would report one.
pub(crate) fn io_failure(what: String) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(
        rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_IOERR),
        Some(what),
    )
}

impl Store {
    /// Opens the database, sets WAL and the sync policy, and brings the schema up to date.
    /// The first `dictionary_samples` bytes of JSON it stores train the dictionary that packs
    /// the rest (`0`: stored as text; see `codec.rs`).
    /// With [`SyncPolicy::Full`] SQLite still runs with `synchronous=NORMAL`: the writer flushes
    /// the WAL itself, on another thread, before it answers for a commit ([`Store::take_wal`]).
    pub fn open(path: &Path, sync: SyncPolicy, dictionary_samples: usize) -> Result<Store> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        // Freed pages go back to the file system on request ([`Store::release_free_pages`]).
        // SQLite takes this setting only while the file is still empty, so it comes before
        // WAL, which writes the file's first page; on a file of this schema it is already set.
        conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        // Checkpoints run on the writer thread between batches; keep the WAL bounded.
        conn.pragma_update(None, "wal_autocheckpoint", 4000)?;
        // A reader that holds a snapshot long (`fulfillment backup`) holds checkpoints back and
        // the WAL grows meanwhile; once checkpointed, it is cut back to this size.
        conn.pragma_update(None, "journal_size_limit", 64 * 1024 * 1024)?;
        conn.set_prepared_statement_cache_capacity(64);
        schema::migrate(&conn, path)?;
        let codec = Codec::writer(&conn, dictionary_samples)?;
        let wal = if sync == SyncPolicy::Full {
            Some(durable::wal_of(path).map_err(|e| {
                io_failure(format!("cannot open the WAL of {}: {e}", path.display()))
            })?)
        } else {
            None
        };
        Ok(Store {
            conn,
            codec: std::cell::RefCell::new(codec),
            wal,
        })
    }

    /// The WAL to flush after each commit, once (see the field).
    pub fn take_wal(&mut self) -> Option<std::fs::File> {
        self.wal.take()
    }

    /// A second connection for reads.
    pub fn open_reader(path: &Path) -> Result<Store> {
        let conn = Connection::open(path)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.set_prepared_statement_cache_capacity(32);
        Ok(Store::reading(conn))
    }

    /// A read-only connection to an existing file, for another process than the engine's
    /// (WAL lets it read beside the writer): nothing is created, migrated or written. The file
    /// must hold this build's schema.
    pub fn open_read_only(path: &Path) -> Result<Store> {
        use rusqlite::OpenFlags;
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags)?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        schema::require_current(&conn, path)?;
        conn.set_prepared_statement_cache_capacity(8);
        Ok(Store::reading(conn))
    }

    fn reading(conn: Connection) -> Store {
        Store {
            conn,
            codec: std::cell::RefCell::new(Codec::reader()),
            wal: None,
        }
    }

    pub fn begin(&self) -> Result<()> {
        self.conn.execute_batch("BEGIN IMMEDIATE")
    }

    pub fn commit(&self) -> Result<()> {
        self.conn.execute_batch("COMMIT")?;
        self.codec.borrow_mut().committed();
        Ok(())
    }

    /// Rows inserted, updated or deleted on this connection since it opened: a transaction that
    /// leaves it unchanged wrote nothing (and its commit wrote nothing to disk).
    pub fn total_changes(&self) -> u64 {
        self.conn.total_changes()
    }

    pub fn rollback(&self) {
        let _ = self.conn.execute_batch("ROLLBACK");
        self.codec.borrow_mut().rolled_back();
    }

    /// `text` as it is to be stored: packed once a dictionary exists (`codec.rs`).
    fn pack<'a>(&self, text: &'a [u8]) -> Result<codec::Packed<'a>> {
        self.codec.borrow_mut().pack(&self.conn, text)
    }

    /// Column `i` as text, bytes that are not UTF-8 replaced: an execution's input or output,
    /// which the writer reads to run it (a corrupt one reads as what it is, not JSON, as a
    /// corrupt text value would, rather than stopping the writer).
    fn lenient_text(&self, r: &rusqlite::Row, i: usize) -> Result<Option<String>> {
        let bytes = self.codec.borrow_mut().unpack(&self.conn, r.get_ref(i)?)?;
        Ok(bytes.map(|b| match String::from_utf8(b) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        }))
    }

    /// Column `i` of a row as text: stored plain or packed (`codec.rs`).
    fn text(&self, r: &rusqlite::Row, i: usize) -> Result<Option<String>> {
        let bytes = self.codec.borrow_mut().unpack(&self.conn, r.get_ref(i)?)?;
        bytes
            .map(|b| {
                String::from_utf8(b).map_err(|e| {
                    rusqlite::Error::FromSqlConversionFailure(
                        i,
                        rusqlite::types::Type::Text,
                        e.into(),
                    )
                })
            })
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_file_is_made_to_give_freed_pages_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("e.db"), SyncPolicy::Normal, 0).unwrap();
        let mode: i64 = store
            .conn
            .pragma_query_value(None, "auto_vacuum", |r| r.get(0))
            .unwrap();
        assert_eq!(mode, 2, "auto_vacuum=INCREMENTAL");
    }
}
