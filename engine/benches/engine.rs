//! Engine benchmark (not a timed test): throughput, memory and reopen time of the durable
//! engine with its default `SyncPolicy::Full`.
//!
//! `cargo bench -p engine --bench engine [-- SCENARIO...]`, where SCENARIO is one of
//! `fsync`, `transitions`, `activities`, `parked`, `reopen` or `all` (the default). `reopen`
//! reopens the database `parked` filled, so it runs `parked` first when asked alone.
//!
//! Sizes (environment):
//! - `BENCH_EXECUTIONS` (20000): executions of the 10-state Pass/Choice machine;
//! - `BENCH_CONCURRENCY` (256): tokio tasks starting executions at once;
//! - `BENCH_ACTIVITY_TASKS` (20000): activity tasks answered in `activities`;
//! - `BENCH_WORKERS` (64): in-process activity workers;
//! - `BENCH_PARKED` (100000): executions parked on an activity nobody polls;
//! - `BENCH_DIR`: where the databases go (default: the system temp dir).

use engine::{Engine, EngineConfig, StartExecutionInput, SyncPolicy};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

const TARGET_TRANSITIONS: f64 = 20_000.0;
const TARGET_ROUND_TRIPS: f64 = 5_000.0;
const TARGET_BYTES_PER_PARKED: f64 = 1024.0;
const TARGET_REOPEN: Duration = Duration::from_secs(2);

fn main() -> Result<()> {
    // The child of `reopen`: adds executions to a database and exits without closing it.
    if let Some(db) = std::env::var_os("BENCH_CRASH_FILL") {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        runtime.block_on(crash_fill(Path::new(&db)))?;
    }
    // `cargo bench` passes `--bench`; anything else not starting with `-` is a scenario.
    let mut wanted: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    if wanted.is_empty() || wanted.iter().any(|w| w == "all") {
        wanted = ["fsync", "transitions", "activities", "parked", "reopen"]
            .map(str::to_owned)
            .to_vec();
    }
    for w in &wanted {
        if !["fsync", "transitions", "activities", "parked", "reopen"].contains(&w.as_str()) {
            return Err(format!("unknown scenario {w:?}").into());
        }
    }
    let dir = match std::env::var_os("BENCH_DIR") {
        Some(d) => tempfile::tempdir_in(d)?,
        None => tempfile::tempdir()?,
    };
    println!(
        "bench: databases in {}; {} CPUs",
        dir.path().display(),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let has = |s: &str| wanted.iter().any(|w| w == s);
    if has("fsync") {
        fsync(dir.path())?;
    }
    if has("transitions") {
        runtime.block_on(transitions(dir.path()))?;
    }
    if has("activities") {
        runtime.block_on(activities(dir.path()))?;
    }
    if has("parked") || has("reopen") {
        let db = runtime.block_on(parked(dir.path()))?;
        if has("reopen") {
            runtime.block_on(reopen(&db))?;
        }
    }
    Ok(())
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

fn verdict(ok: bool) -> &'static str {
    if ok { "meets target" } else { "MISSES target" }
}

async fn open(db: &Path) -> Result<Engine> {
    let config = EngineConfig::new(db);
    assert_eq!(config.sync, SyncPolicy::Full);
    Ok(Engine::open(config, None).await?)
}

/// Starts `count` executions named `{prefix}-{i}` with `concurrency` tasks at once.
async fn start_many(
    engine: &Engine,
    machine: &str,
    prefix: &str,
    count: usize,
    concurrency: usize,
) -> Result<()> {
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..concurrency.max(1) {
        let (engine, machine, next, prefix) = (
            engine.clone(),
            machine.to_owned(),
            next.clone(),
            prefix.to_owned(),
        );
        tasks.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= count {
                    return Ok::<_, engine::EngineError>(());
                }
                engine
                    .start_execution(StartExecutionInput {
                        state_machine_arn: machine.clone(),
                        name: Some(format!("{prefix}-{i}")),
                        input: Some(format!(r#"{{"i":{i}}}"#)),
                    })
                    .await?;
            }
        });
    }
    while let Some(r) = tasks.join_next().await {
        r??;
    }
    Ok(())
}

// ---- fsync ------------------------------------------------------------------------------

/// What the disk under the databases allows: 4 KiB writes each followed by `fdatasync`.
fn fsync(dir: &Path) -> Result<()> {
    let run = |append: bool| -> Result<f64> {
        let path = dir.join(if append {
            "fsync-append"
        } else {
            "fsync-rewrite"
        });
        let mut file = std::fs::File::create(&path)?;
        let block = [0x5au8; 4096];
        let started = Instant::now();
        let mut n = 0u64;
        while started.elapsed() < Duration::from_secs(2) {
            if !append {
                use std::io::Seek;
                file.seek(std::io::SeekFrom::Start(0))?;
            }
            file.write_all(&block)?;
            file.sync_data()?;
            n += 1;
        }
        let rate = n as f64 / started.elapsed().as_secs_f64();
        drop(file);
        std::fs::remove_file(&path)?;
        Ok(rate)
    };
    let rewrite = run(false)?;
    let append = run(true)?;
    println!(
        "bench fsync: {rewrite:.0} fsyncs/s rewriting one 4 KiB block, {append:.0} fsyncs/s appending 4 KiB blocks (write + fdatasync, 2 s each)"
    );
    Ok(())
}

// ---- transitions ------------------------------------------------------------------------

/// Ten states, all entered by every execution: P1 C1 P2 C2 P3 C3 P4 C4 P5 Done — six Pass
/// states and four Choice states routing on what the Pass before them wrote.
fn pass_choice_machine() -> String {
    use serde_json::json;
    let mut states = serde_json::Map::new();
    for k in 1..=5 {
        let next = if k < 5 {
            format!("C{k}")
        } else {
            "Done".to_owned()
        };
        states.insert(
            format!("P{k}"),
            json!({"Type": "Pass", "Result": k, "ResultPath": format!("$.p{k}"), "Next": next}),
        );
        if k < 5 {
            let next = format!("P{}", k + 1);
            states.insert(
                format!("C{k}"),
                json!({
                    "Type": "Choice",
                    "Choices": [{"Variable": format!("$.p{k}"), "NumericEquals": k, "Next": next}],
                    "Default": "Done"
                }),
            );
        }
    }
    states.insert("Done".to_owned(), json!({"Type": "Pass", "End": true}));
    json!({"StartAt": "P1", "States": states}).to_string()
}

async fn transitions(dir: &Path) -> Result<()> {
    let executions = env_usize("BENCH_EXECUTIONS", 20_000);
    let concurrency = env_usize("BENCH_CONCURRENCY", 256);
    let engine = open(&dir.join("transitions.db")).await?;
    let machine = engine
        .create_state_machine("passchoice", &pass_choice_machine(), None)
        .await?
        .state_machine_arn;
    let (t0, c0) = counters(&engine);
    let started = Instant::now();
    start_many(&engine, &machine, "t", executions, concurrency).await?;
    let elapsed = started.elapsed().as_secs_f64();
    let (t1, c1) = counters(&engine);
    // Pass and Choice states run inside the commit that starts the execution.
    let last = machine.replace(":stateMachine:", ":execution:") + &format!(":t-{}", executions - 1);
    let last = engine.describe_execution(&last).await?;
    assert_eq!(last.status, engine::ExecutionStatus::Succeeded);
    let (transitions, commits) = ((t1 - t0) as f64, (c1 - c0) as f64);
    assert_eq!(
        t1 - t0,
        10 * executions as u64,
        "every execution enters 10 states"
    );
    let rate = transitions / elapsed;
    println!(
        "bench transitions: {rate:.0} transitions/s ({:.0} executions/s, {:.1} transitions/commit, {:.0} commits/s; {executions} executions by {concurrency} tasks in {elapsed:.2} s) — target ≥ {TARGET_TRANSITIONS:.0}: {}",
        executions as f64 / elapsed,
        transitions / commits.max(1.0),
        commits / elapsed,
        verdict(rate >= TARGET_TRANSITIONS),
    );
    engine.shutdown().await;
    Ok(())
}

fn counters(engine: &Engine) -> (u64, u64) {
    let s = engine.stats();
    (
        s.transitions.load(Ordering::Relaxed),
        s.commits.load(Ordering::Relaxed),
    )
}

// ---- activities -------------------------------------------------------------------------

fn one_task_machine(activity_arn: &str) -> String {
    serde_json::json!({
        "StartAt": "T",
        "States": {"T": {"Type": "Task", "Resource": activity_arn, "End": true}}
    })
    .to_string()
}

async fn activities(dir: &Path) -> Result<()> {
    let tasks = env_usize("BENCH_ACTIVITY_TASKS", 20_000);
    let workers = env_usize("BENCH_WORKERS", 64);
    let concurrency = env_usize("BENCH_CONCURRENCY", 256);
    let engine = open(&dir.join("activities.db")).await?;
    let activity = engine.create_activity("bench-work").await?.activity_arn;
    let machine = engine
        .create_state_machine("onetask", &one_task_machine(&activity), None)
        .await?
        .state_machine_arn;
    let started = Instant::now();
    start_many(&engine, &machine, "a", tasks, concurrency).await?;
    let start_secs = started.elapsed().as_secs_f64();

    let (_, c0) = counters(&engine);
    let done = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for w in 0..workers.max(1) {
        let (engine, activity, done) = (engine.clone(), activity.clone(), done.clone());
        set.spawn(async move {
            let name = format!("w{w}");
            while done.load(Ordering::Relaxed) < tasks {
                let Some(task) = engine
                    .get_activity_task(&activity, Some(&name), Duration::from_millis(200))
                    .await?
                else {
                    continue;
                };
                engine
                    .send_task_success(&task.task_token, r#"{"ok":true}"#)
                    .await?;
                done.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<_, engine::EngineError>(())
        });
    }
    while let Some(r) = set.join_next().await {
        r??;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let (_, c1) = counters(&engine);
    let rate = tasks as f64 / elapsed;
    println!(
        "bench activities: {rate:.0} round trips/s ({tasks} tasks, {workers} workers, {elapsed:.2} s, {:.1} round trips/commit; the {tasks} executions were started beforehand at {:.0}/s) — target ≥ {TARGET_ROUND_TRIPS:.0}: {}",
        tasks as f64 / (c1 - c0).max(1) as f64,
        tasks as f64 / start_secs,
        verdict(rate >= TARGET_ROUND_TRIPS),
    );
    engine.shutdown().await;
    Ok(())
}

// ---- parked and reopen ------------------------------------------------------------------

/// Resident set size of this process, in bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Gives freed heap back to the kernel, so RSS shows what is still in use.
fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        unsafe extern "C" {
            fn malloc_trim(pad: usize) -> i32;
        }
        // SAFETY: glibc's malloc_trim only releases free memory.
        unsafe {
            malloc_trim(0);
        }
    }
}

/// Sizes of the database file and of its write-ahead log.
fn db_bytes(db: &Path) -> (u64, u64) {
    let size = |suffix: &str| {
        let mut p = db.as_os_str().to_owned();
        p.push(suffix);
        std::fs::metadata(PathBuf::from(p)).map_or(0, |m| m.len())
    };
    (size(""), size("-wal"))
}

const MIB: f64 = 1024.0 * 1024.0;

async fn parked(dir: &Path) -> Result<PathBuf> {
    let count = env_usize("BENCH_PARKED", 100_000);
    let concurrency = env_usize("BENCH_CONCURRENCY", 256);
    let db = dir.join("parked.db");
    let engine = open(&db).await?;
    let activity = engine.create_activity("nobody-polls").await?.activity_arn;
    let machine = engine
        .create_state_machine("parked", &one_task_machine(&activity), None)
        .await?
        .state_machine_arn;
    // Warm the engine (first statements prepared, pools grown) before the baseline.
    start_many(&engine, &machine, "warm", 256, concurrency).await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    trim_heap();
    let before = rss();

    let started = Instant::now();
    start_many(&engine, &machine, "p", count, concurrency).await?;
    let elapsed = started.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let settled = rss();
    trim_heap();
    let trimmed = rss();
    let per = |after: u64| after.saturating_sub(before) as f64 / count as f64;
    let (size, wal) = db_bytes(&db);
    println!(
        "bench parked: {count} executions parked on an activity: RSS {:.1} MiB → {:.1} MiB, {:.0} bytes per parked execution after malloc_trim ({:.0} before trim) — target ≤ {TARGET_BYTES_PER_PARKED:.0}: {}; db file {:.1} MiB ({:.0} bytes/execution) + WAL {:.1} MiB; started at {:.0}/s",
        before as f64 / MIB,
        trimmed as f64 / MIB,
        per(trimmed),
        per(settled),
        verdict(per(trimmed) <= TARGET_BYTES_PER_PARKED),
        size as f64 / MIB,
        size as f64 / (count + 256) as f64,
        wal as f64 / MIB,
        count as f64 / elapsed,
    );
    engine.shutdown().await;
    Ok(db)
}

async fn reopen(db: &Path) -> Result<()> {
    let count = env_usize("BENCH_PARKED", 100_000);
    trim_heap();
    let before = rss();
    let probe = format!(
        "arn:aws:states:us-east-1:123456789012:execution:parked:p-{}",
        count / 2
    );
    let started = Instant::now();
    let engine = open(db).await?;
    let opened = started.elapsed();
    let d = engine.describe_execution(&probe).await?;
    let first = started.elapsed();
    assert_eq!(d.status, engine::ExecutionStatus::Running);
    tokio::time::sleep(Duration::from_millis(500)).await;
    trim_heap();
    let after = rss();
    println!(
        "bench reopen: {:.0} ms to reopen with {count} parked ({:.0} ms in Engine::open, then the first DescribeExecution); RSS +{:.1} MiB after reopening — target ≤ {} ms: {}",
        first.as_secs_f64() * 1000.0,
        opened.as_secs_f64() * 1000.0,
        after.saturating_sub(before) as f64 / MIB,
        TARGET_REOPEN.as_millis(),
        verdict(first <= TARGET_REOPEN),
    );
    engine.shutdown().await;
    drop(engine);
    reopen_after_crash(db, count).await
}

/// Child process: starts executions on the parked database, then exits without shutting the
/// engine down or closing SQLite, as a crash would, so the next open finds a full WAL.
async fn crash_fill(db: &Path) -> Result<()> {
    let engine = open(db).await?;
    let machine = "arn:aws:states:us-east-1:123456789012:stateMachine:parked";
    start_many(&engine, machine, "crashed", 5_000, 256).await?;
    std::process::exit(0);
}

async fn reopen_after_crash(db: &Path, count: usize) -> Result<()> {
    let status = std::process::Command::new(std::env::current_exe()?)
        .env("BENCH_CRASH_FILL", db)
        .status()?;
    if !status.success() {
        return Err(format!("the crash-fill child failed: {status}").into());
    }
    let (_, wal) = db_bytes(db);
    let probe = "arn:aws:states:us-east-1:123456789012:execution:parked:crashed-4999";
    let started = Instant::now();
    let engine = open(db).await?;
    let opened = started.elapsed();
    let d = engine.describe_execution(probe).await?;
    let first = started.elapsed();
    assert_eq!(d.status, engine::ExecutionStatus::Running);
    println!(
        "bench reopen after crash: {:.0} ms to reopen with {} parked and a {:.1} MiB WAL left by a process that exited without closing the database ({:.0} ms in Engine::open) — target ≤ {} ms: {}",
        first.as_secs_f64() * 1000.0,
        count + 5_256,
        wal as f64 / MIB,
        opened.as_secs_f64() * 1000.0,
        TARGET_REOPEN.as_millis(),
        verdict(first <= TARGET_REOPEN),
    );
    engine.shutdown().await;
    Ok(())
}
