//! What the engine's test binaries share: a temporary database file and the patience for an
//! answer.

use std::time::Duration;

/// How long a test waits for an execution or a task before it fails.
pub const LONG: Duration = Duration::from_secs(20);

/// An engine database in a temporary directory, removed with it.
pub struct Db {
    _dir: tempfile::TempDir,
    pub path: std::path::PathBuf,
}

pub fn db() -> Db {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("engine.db");
    Db { _dir: dir, path }
}
