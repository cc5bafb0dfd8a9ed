//! fsync: the machine's limit under every durable figure: appending 4 KiB blocks to a file in
//! the databases' directory, each followed by `fdatasync`, for a couple of seconds.

use super::{Figure, Report};
use anyhow::Result;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

/// Appending 4 KiB + `sync_data` in `dir` for `secs`: fsyncs per second.
pub fn measure(dir: &Path, secs: f64) -> Result<f64> {
    let path = dir.join("bench-fsync.tmp");
    let mut file = std::fs::File::create(&path)?;
    let block = [0x5au8; 4096];
    let window = Duration::from_secs_f64(secs);
    let t0 = Instant::now();
    let mut syncs = 0u64;
    while t0.elapsed() < window {
        file.write_all(&block)?;
        file.sync_data()?;
        syncs += 1;
    }
    let rate = syncs as f64 / t0.elapsed().as_secs_f64();
    drop(file);
    std::fs::remove_file(&path)?;
    Ok(rate)
}

/// The measurement in a fresh directory beside the databases' (the system's temporary
/// directory, where the harness puts them).
pub fn measure_here(secs: f64) -> Result<f64> {
    let dir = blackbox::Db::new();
    measure(dir.dir(), secs)
}

/// The scenario's report of a measurement.
pub fn report(rate: f64, secs: f64) -> Report {
    Report {
        summary: format!(
            "{rate:.0} fsyncs/s appending 4 KiB blocks (write + fdatasync, {secs} s) in {}",
            std::env::temp_dir().display()
        ),
        figures: vec![Figure::rate("fsyncs/s", rate, "/s")],
    }
}
