//! `fulfillment backup` and `fulfillment restore`: the embedded backend's two SQLite files (the
//! store and the engine's state) copied consistently with each other while the service runs, and
//! put back in place of missing ones.
//!
//! The copies come from SQLite's online backup, each from a read snapshot (WAL: the service's
//! writers go on meanwhile). The engine's snapshot is opened first and the store's right after,
//! so the store's copy is never behind the engine's: every execution in the copy has its order,
//! and what the store's copy may hold beyond the engine's (a step's record written between the
//! two snapshots, an order accepted then) is what a crash between a step's side effect and the
//! engine's commit leaves, which the idempotent steps and the start queue repair.

use super::StartupError;
use crate::config::engine_path;
use rusqlite::{Connection, OpenFlags};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

const MANIFEST: &str = "manifest.json";
const STORE_FILE: &str = "store.db";
const ENGINE_FILE: &str = "engine.db";
const FORMAT: u32 = 1;

/// What a backup holds, written last (a directory without it is an unfinished backup).
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Manifest {
    format: u32,
    /// When the snapshots were taken (RFC 3339): orders accepted later are not in the backup.
    taken_at: String,
    /// The `fulfillment` version that took it.
    version: String,
    store: Copied,
    engine: Copied,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Copied {
    file: String,
    bytes: u64,
    sha256: String,
    /// Orders (store) or executions (engine) in the copy.
    rows: u64,
}

fn failed(what: impl std::fmt::Display) -> StartupError {
    StartupError::Backup(what.to_string())
}

fn sql(path: &Path) -> impl Fn(rusqlite::Error) -> StartupError + '_ {
    move |e| failed(format!("{}: {e}", path.display()))
}

/// Copies the store `store` and the engine file beside it into `to` (created, or empty).
pub fn run_backup(store: &Path, to: &Path) -> Result<(), StartupError> {
    let engine = engine_path(store);
    for file in [store, engine.as_path()] {
        if !file.is_file() {
            return Err(StartupError::Config(format!(
                "{} does not exist: --db names the store of the service to back up",
                file.display()
            )));
        }
    }
    prepare_dir(to)?;
    let started = Instant::now();
    let engine_db = open_source(&engine)?;
    let store_db = open_source(store)?;
    // The engine's snapshot, then the store's (see the module's comment): each read
    // transaction sees its file as of its first read, and the backups below read inside them.
    let taken_at = chrono::Utc::now();
    let executions = begin_snapshot(&engine_db, "executions").map_err(sql(&engine))?;
    let orders = begin_snapshot(&store_db, "orders").map_err(sql(store))?;
    let engine_copy = copy(&engine_db, &to.join(ENGINE_FILE), executions)?;
    let store_copy = copy(&store_db, &to.join(STORE_FILE), orders)?;
    drop((engine_db, store_db));
    let manifest = Manifest {
        format: FORMAT,
        taken_at: taken_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        store: store_copy,
        engine: engine_copy,
    };
    write_manifest(to, &manifest)?;
    println!(
        "backup: {} orders and {} executions as of {} in {} ({} bytes, {} ms)",
        manifest.store.rows,
        manifest.engine.rows,
        manifest.taken_at,
        to.display(),
        manifest.store.bytes + manifest.engine.bytes,
        started.elapsed().as_millis()
    );
    Ok(())
}

/// Puts the backup in `from` in place of the store `store` and the engine file beside it,
/// neither of which may exist.
pub fn run_restore(from: &Path, store: &Path) -> Result<(), StartupError> {
    let engine = engine_path(store);
    let manifest = read_manifest(from)?;
    for file in [store.to_path_buf(), engine.clone()] {
        for f in [file.clone(), wal_of(&file)] {
            if f.exists() {
                return Err(StartupError::Config(format!(
                    "{} exists: restore writes only where no store is (stop the service and \
                     move its files aside first)",
                    f.display()
                )));
            }
        }
    }
    // Check both copies before anything is written.
    for copied in [&manifest.store, &manifest.engine] {
        verify(&from.join(&copied.file), copied)?;
    }
    // The engine first: a restore cut short leaves no store whose engine is missing.
    place(&from.join(&manifest.engine.file), &engine)?;
    place(&from.join(&manifest.store.file), store)?;
    println!(
        "restored: {} orders and {} executions as of {} into {} and {}. Orders accepted after \
         {} are not in it: a client's retry of its POST /orders (same order id) places each \
         again; run `fulfillment audit` once the service is up",
        manifest.store.rows,
        manifest.engine.rows,
        manifest.taken_at,
        store.display(),
        engine.display(),
        manifest.taken_at
    );
    Ok(())
}

fn wal_of(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push("-wal");
    PathBuf::from(name)
}

fn prepare_dir(dir: &Path) -> Result<(), StartupError> {
    std::fs::create_dir_all(dir).map_err(|e| failed(format!("{}: {e}", dir.display())))?;
    let mut entries =
        std::fs::read_dir(dir).map_err(|e| failed(format!("{}: {e}", dir.display())))?;
    if entries.next().is_some() {
        return Err(StartupError::Config(format!(
            "{} is not empty: a backup goes into a new or empty directory",
            dir.display()
        )));
    }
    Ok(())
}

/// A connection that only reads `path` (it must exist; WAL lets it read beside the writers).
fn open_source(path: &Path) -> Result<Connection, StartupError> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(sql(path))?;
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .map_err(sql(path))?;
    Ok(conn)
}

/// Opens a read transaction and reads from it (a WAL snapshot is fixed at the first read):
/// the rows of `table` as of the snapshot.
fn begin_snapshot(conn: &Connection, table: &str) -> rusqlite::Result<u64> {
    conn.execute_batch("BEGIN DEFERRED")?;
    conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| {
        r.get::<_, i64>(0)
    })
    .map(|n| n as u64)
}

/// Copies the snapshot `source` reads into a new file `to`: one backup step for the whole
/// database (inside the source's read transaction, so the copy is that snapshot), then a
/// rollback-journal file that stands alone, checked.
fn copy(source: &Connection, to: &Path, rows: u64) -> Result<Copied, StartupError> {
    let mut dest = Connection::open(to).map_err(sql(to))?;
    {
        let backup = rusqlite::backup::Backup::new(source, &mut dest).map_err(sql(to))?;
        backup.step(-1).map_err(sql(to))?;
    }
    dest.pragma_update(None, "journal_mode", "DELETE")
        .map_err(sql(to))?;
    quick_check(&dest, to)?;
    dest.close().map_err(|(_, e)| sql(to)(e))?;
    let (bytes, sha256) = digest(to)?;
    Ok(Copied {
        file: to
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        bytes,
        sha256,
        rows,
    })
}

fn quick_check(conn: &Connection, path: &Path) -> Result<(), StartupError> {
    let verdict: String = conn
        .query_row("PRAGMA quick_check", [], |r| r.get(0))
        .map_err(sql(path))?;
    if verdict != "ok" {
        return Err(failed(format!(
            "{} fails SQLite's check: {verdict}",
            path.display()
        )));
    }
    Ok(())
}

fn digest(path: &Path) -> Result<(u64, String), StartupError> {
    let mut file =
        std::fs::File::open(path).map_err(|e| failed(format!("{}: {e}", path.display())))?;
    let mut hasher = Sha256::new();
    let bytes = std::io::copy(&mut file, &mut hasher)
        .map_err(|e| failed(format!("{}: {e}", path.display())))?;
    let hash = hasher.finalize();
    Ok((bytes, hash.iter().map(|b| format!("{b:02x}")).collect()))
}

fn write_manifest(dir: &Path, manifest: &Manifest) -> Result<(), StartupError> {
    let text = serde_json::to_vec_pretty(manifest).map_err(failed)?;
    let tmp = dir.join(format!("{MANIFEST}.tmp"));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&text)?;
        f.sync_all()?;
        std::fs::rename(&tmp, dir.join(MANIFEST))?;
        std::fs::File::open(dir)?.sync_all()
    };
    write().map_err(|e| failed(format!("{}: {e}", dir.display())))
}

fn read_manifest(dir: &Path) -> Result<Manifest, StartupError> {
    let path = dir.join(MANIFEST);
    let text = std::fs::read(&path).map_err(|e| {
        StartupError::Config(format!(
            "{}: {e}: not a finished backup (`fulfillment backup` writes it last)",
            path.display()
        ))
    })?;
    let manifest: Manifest = serde_json::from_slice(&text)
        .map_err(|e| StartupError::Config(format!("{}: {e}", path.display())))?;
    if manifest.format != FORMAT {
        return Err(StartupError::Config(format!(
            "{}: backup format {} (this build restores format {FORMAT})",
            path.display(),
            manifest.format
        )));
    }
    Ok(manifest)
}

/// The copy is the one the manifest describes, and SQLite finds it sound.
fn verify(path: &Path, copied: &Copied) -> Result<(), StartupError> {
    let (bytes, sha256) = digest(path)?;
    if bytes != copied.bytes || sha256 != copied.sha256 {
        return Err(failed(format!(
            "{} is not the file the backup wrote (size or SHA-256 differ)",
            path.display()
        )));
    }
    let conn =
        Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(sql(path))?;
    quick_check(&conn, path)
}

/// Copies `from` to `to` through a temporary name beside it, synced, then renamed.
fn place(from: &Path, to: &Path) -> Result<(), StartupError> {
    let mut tmp = to.as_os_str().to_owned();
    tmp.push(".restoring");
    let tmp = PathBuf::from(tmp);
    let put = || -> std::io::Result<()> {
        if let Some(parent) = to.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::copy(from, &tmp)?;
        std::fs::File::open(&tmp)?.sync_all()?;
        std::fs::rename(&tmp, to)?;
        let parent = to
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::File::open(parent)?.sync_all()
    };
    put().map_err(|e| failed(format!("{}: {e}", to.display())))
}
