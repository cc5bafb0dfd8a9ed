//! What the engine's test binaries share: a temporary database file and the patience for an
//! answer.

use chrono::{TimeDelta, Utc};
use engine::Clock;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
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

/// The system time plus an offset the test moves forward (not every test binary uses it).
#[allow(dead_code)]
#[derive(Clone, Default)]
pub struct Skew(Arc<AtomicI64>);

#[allow(dead_code)]
impl Skew {
    pub fn clock(&self) -> Clock {
        let offset = self.0.clone();
        Clock::from_fn(move || Utc::now() + TimeDelta::milliseconds(offset.load(Ordering::SeqCst)))
    }

    pub fn advance(&self, by: TimeDelta) {
        self.0.fetch_add(by.num_milliseconds(), Ordering::SeqCst);
    }
}
