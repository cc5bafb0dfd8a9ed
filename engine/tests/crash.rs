//! Crash recovery: runs a workload of executions (activities with heartbeats, Waits, Retry with
//! back-off, a Task timeout, Choice, Parallel, Map, and a redrive of those that fail) in a child
//! process, kills it with SIGKILL at random moments, restarts it on the same database, and
//! checks that every execution ends with the same status, output, error, cause and redrive
//! count as an uninterrupted run of the same workload, and that each activity task's completion
//! was applied exactly once.
//!
//! Run it with `cargo test --release -p engine --test crash -- --nocapture`. Environment:
//! - `CRASH_SEEDS`: comma-separated seeds (default `1,2,3`); each seed changes the inputs and
//!   the kill times;
//! - `CRASH_KILLS`: kills per seed before the final run (default 10, at least 1);
//! - `CRASH_EXECUTIONS`: executions per seed (default 24).
//!
//! The child is this test binary run again on the single test `crash_child`, which does nothing
//! unless `CRASH_CHILD_DB` is set.

use anyhow::{Context, Result, bail, ensure};
use engine::{
    Engine, EngineConfig, EngineError, ExecutionStatus, GetExecutionHistoryInput, HistoryEvent,
    ListExecutionsInput, StartExecutionInput, TaskFailure, TaskFuture, TaskHandler, TaskRequest,
};
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MACHINE: &str = "crashflow";
/// Polled by in-process workers; its tasks carry a heartbeat.
const WORK: &str = "work";
/// Nobody polls it: its task ends by TimeoutSeconds.
const IDLE: &str = "idle";
const FLAKY: &str = "arn:aws:lambda:us-east-1:123456789012:function:flaky";
/// Printed by the child once every execution has ended.
const DONE_MARKER: &str = "CRASH_CHILD_DONE";
/// The states whose task is an answered activity (their completion must happen exactly once).
const WORKED_STATES: [&str; 2] = ["Work", "ItemWork"];
/// How long a worker spends on a task before answering it.
const WORK_TIME: Duration = Duration::from_millis(200);
/// How long one child may take to finish the workload on its final run.
const FINAL_RUN_LIMIT: Duration = Duration::from_secs(90);

fn activity_arn(name: &str) -> String {
    format!("arn:aws:states:us-east-1:123456789012:activity:{name}")
}

fn execution_arn(name: &str) -> String {
    format!("arn:aws:states:us-east-1:123456789012:execution:{MACHINE}:{name}")
}

fn definition() -> String {
    let work = activity_arn(WORK);
    let idle = activity_arn(IDLE);
    // A task handed out just before a kill is never answered: its heartbeat (2 s) times out and
    // the Retry hands it out again.
    let lost_task_retry = json!([{
        "ErrorEquals": ["States.HeartbeatTimeout", "States.Timeout"],
        "IntervalSeconds": 1, "MaxAttempts": 30, "BackoffRate": 1.0
    }]);
    json!({
        "Comment": "crash recovery workload",
        "StartAt": "Delay",
        "States": {
            "Delay": {"Type": "Wait", "SecondsPath": "$.delay", "Next": "Work"},
            "Work": {
                "Type": "Task", "Resource": work, "HeartbeatSeconds": 2,
                "ResultPath": "$.work", "Retry": lost_task_retry, "Next": "Pause"
            },
            "Pause": {"Type": "Wait", "Seconds": 1, "Next": "Route"},
            "Route": {
                "Type": "Choice",
                "Choices": [
                    {"Variable": "$.mode", "StringEquals": "doomed", "Next": "Doomed"},
                    {"Variable": "$.work.parity", "StringEquals": "even", "Next": "Fan"}
                ],
                "Default": "Odd"
            },
            "Odd": {"Type": "Pass", "Result": "odd", "ResultPath": "$.path", "Next": "Fan"},
            "Doomed": {
                "Type": "Task", "Resource": FLAKY,
                "Parameters": {
                    "n.$": "$.n", "mode.$": "$.mode", "redrives.$": "$$.Execution.RedriveCount"
                },
                "Retry": [{"ErrorEquals": ["Flaky"], "IntervalSeconds": 1, "MaxAttempts": 1}],
                "End": true
            },
            "Fan": {
                "Type": "Parallel", "ResultPath": "$.branches", "Next": "Items",
                "Branches": [
                    {
                        "StartAt": "Flaky",
                        "States": {
                            "Flaky": {
                                "Type": "Task", "Resource": FLAKY,
                                "Retry": [{
                                    "ErrorEquals": ["Flaky"], "IntervalSeconds": 1,
                                    "MaxAttempts": 2, "BackoffRate": 1.5
                                }],
                                "Catch": [{
                                    "ErrorEquals": ["Flaky"], "ResultPath": "$.caught",
                                    "Next": "FlakyCaught"
                                }],
                                "End": true
                            },
                            "FlakyCaught": {
                                "Type": "Pass",
                                "Parameters": {"recovered.$": "$.caught.Error", "n.$": "$.n"},
                                "End": true
                            }
                        }
                    },
                    {
                        "StartAt": "Unpolled",
                        "States": {
                            "Unpolled": {
                                "Type": "Task", "Resource": idle, "TimeoutSeconds": 2,
                                "Catch": [{
                                    "ErrorEquals": ["States.Timeout"], "ResultPath": "$.timeout",
                                    "Next": "TimedOutCaught"
                                }],
                                "End": true
                            },
                            "TimedOutCaught": {
                                "Type": "Pass",
                                "Parameters": {"timedOut.$": "$.timeout.Error"},
                                "End": true
                            }
                        }
                    }
                ]
            },
            "Items": {
                "Type": "Map", "ItemsPath": "$.items", "MaxConcurrency": 2,
                "ResultPath": "$.mapped", "Next": "Done",
                "ItemProcessor": {
                    "StartAt": "ItemWork",
                    "States": {
                        "ItemWork": {
                            "Type": "Task", "Resource": work, "HeartbeatSeconds": 2,
                            "Retry": lost_task_retry, "End": true
                        }
                    }
                }
            },
            "Done": {"Type": "Pass", "End": true}
        }
    })
    .to_string()
}

/// The workload of one seed: execution name → input. Delays spread the work over ~12 s so the
/// kills land while executions are at every stage.
fn workload(seed: u64, executions: usize) -> Vec<(String, Value)> {
    (0..executions)
        .map(|i| {
            let n = seed * 1000 + i as u64;
            let mode = match i % 6 {
                5 => "doomed",
                _ => "normal",
            };
            let items: Vec<Value> = (0..(i % 4)).map(|k| json!(n + k as u64)).collect();
            let input = json!({"n": n, "delay": i % 12, "mode": mode, "items": items});
            (format!("exec-{seed}-{i}"), input)
        })
        .collect()
}

/// The activity worker's answer: a deterministic function of the task's input.
fn work_result(input: &Value) -> Value {
    let n = input
        .get("n")
        .and_then(Value::as_u64)
        .or_else(|| input.as_u64())
        .unwrap_or(0);
    json!({
        "parity": if n % 2 == 0 { "even" } else { "odd" },
        "square": n * n,
    })
}

/// The in-process handler of `FLAKY`: always fails when `n` is a multiple of 3 (or the input is
/// `doomed` and not yet redriven), otherwise succeeds.
struct Flaky;

impl TaskHandler for Flaky {
    fn invoke(&self, request: TaskRequest) -> TaskFuture {
        let n = request.input.get("n").and_then(Value::as_u64).unwrap_or(0);
        let doomed = request.input.get("mode").and_then(Value::as_str) == Some("doomed")
            && request.input.get("redrives").and_then(Value::as_u64) == Some(0);
        Box::pin(async move {
            if doomed || n % 3 == 0 {
                Err(TaskFailure {
                    error: "Flaky".to_owned(),
                    cause: format!("flaky fails for n={n}"),
                })
            } else {
                Ok(json!({"flaky": "ok", "n": n}))
            }
        })
    }
}

// ---- child ------------------------------------------------------------------------------

/// The child process: runs the workload on `CRASH_CHILD_DB` until every execution has ended.
#[test]
fn crash_child() -> Result<()> {
    let Some(db) = std::env::var_os("CRASH_CHILD_DB") else {
        return Ok(());
    };
    let seed: u64 = env_parse("CRASH_CHILD_SEED")?.context("CRASH_CHILD_SEED")?;
    let executions: usize = env_parse("CRASH_CHILD_EXECUTIONS")?.context("executions")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(child(PathBuf::from(db), seed, executions))
}

/// The engine's configuration, with a dictionary trained early: the kills land before, during
/// and after its training and storing, and most values are read back packed.
fn packing(db: impl Into<PathBuf>) -> EngineConfig {
    EngineConfig {
        dictionary_samples: 32 * 1024,
        ..EngineConfig::new(db)
    }
}

async fn child(db: PathBuf, seed: u64, executions: usize) -> Result<()> {
    let engine = Engine::open(packing(db), Some(Arc::new(Flaky))).await?;
    let work = engine.create_activity(WORK).await?.activity_arn;
    engine.create_activity(IDLE).await?;
    let machine = engine
        .create_state_machine(MACHINE, &definition(), None)
        .await?
        .state_machine_arn;
    for w in 0..6 {
        let (engine, work) = (engine.clone(), work.clone());
        tokio::spawn(async move { worker(engine, work, format!("worker-{w}")).await });
    }
    let mut arns = Vec::new();
    for (name, input) in workload(seed, executions) {
        let started = engine
            .start_execution(StartExecutionInput {
                state_machine_arn: machine.clone(),
                name: Some(name.clone()),
                input: Some(input.to_string()),
            })
            .await;
        match started {
            Ok(s) => ensure!(s.execution_arn == execution_arn(&name), "unexpected ARN"),
            // Started and finished by an earlier run.
            Err(EngineError::ExecutionAlreadyExists(_)) => {}
            Err(e) => return Err(e).context("StartExecution"),
        }
        arns.push(execution_arn(&name));
    }
    for arn in &arns {
        let d = engine
            .wait_for_completion(arn, Duration::from_secs(600))
            .await?;
        ensure!(d.status.is_terminal(), "{arn} still running");
        // A doomed execution fails once, then is redriven (once: a run killed after the redrive
        // finds it redriven already) and succeeds.
        if d.status == ExecutionStatus::Failed && d.redrive_count == 0 {
            engine.redrive_execution(arn, Some("crash-redrive")).await?;
        }
    }
    for arn in &arns {
        let d = engine
            .wait_for_completion(arn, Duration::from_secs(600))
            .await?;
        ensure!(
            d.status.is_terminal(),
            "{arn} still running after its redrive"
        );
    }
    println!("\n{DONE_MARKER}");
    engine.shutdown().await;
    Ok(())
}

async fn worker(engine: Engine, activity: String, name: String) {
    loop {
        match engine
            .get_activity_task(&activity, Some(&name), Duration::from_secs(1))
            .await
        {
            Ok(Some(task)) => {
                let input: Value = serde_json::from_str(&task.input).unwrap_or(Value::Null);
                // Work takes a while, so kills land while tasks are handed out and unanswered.
                tokio::time::sleep(WORK_TIME).await;
                let output = work_result(&input).to_string();
                // A task whose heartbeat already ran out answers TaskTimedOut: ignore it.
                let _ = engine.send_task_success(&task.task_token, &output).await;
            }
            Ok(None) => {}
            Err(e) if e.is_transient() => return,
            Err(e) => panic!("GetActivityTask: {e}"),
        }
    }
}

fn env_parse<T: std::str::FromStr>(name: &str) -> Result<Option<T>>
where
    T::Err: std::error::Error + Send + Sync + 'static,
{
    match std::env::var(name) {
        Ok(v) if !v.trim().is_empty() => Ok(Some(v.trim().parse().context(name.to_owned())?)),
        _ => Ok(None),
    }
}

// ---- parent -----------------------------------------------------------------------------

struct ChildRun {
    db: PathBuf,
    seed: u64,
    executions: usize,
    log: PathBuf,
}

impl ChildRun {
    fn spawn(&self) -> Result<std::process::Child> {
        let log = File::options().create(true).append(true).open(&self.log)?;
        Command::new(std::env::current_exe()?)
            .args([
                "--exact",
                "crash_child",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env("CRASH_CHILD_DB", &self.db)
            .env("CRASH_CHILD_SEED", self.seed.to_string())
            .env("CRASH_CHILD_EXECUTIONS", self.executions.to_string())
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("spawning the child")
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    fn done_count(&self) -> usize {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(DONE_MARKER))
            .count()
    }

    /// Waits for a child to exit by itself, killing it after `limit`.
    fn finish(&self, mut child: std::process::Child, limit: Duration) -> Result<()> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = child.try_wait()? {
                ensure!(
                    status.success() && self.done_count() > 0,
                    "child on {} exited with {status} without finishing; log:\n{}",
                    self.db.display(),
                    self.log_tail()
                );
                return Ok(());
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                bail!(
                    "child on {} did not finish in {} s; log:\n{}",
                    self.db.display(),
                    limit.as_secs(),
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn crash_recovery() -> Result<()> {
    if std::env::var_os("CRASH_CHILD_DB").is_some() {
        return Ok(());
    }
    let seeds: Vec<u64> = match std::env::var("CRASH_SEEDS") {
        Ok(s) if !s.trim().is_empty() => s
            .split(',')
            .map(|p| p.trim().parse().context("CRASH_SEEDS"))
            .collect::<Result<_>>()?,
        _ => vec![1, 2, 3],
    };
    let kills: usize = env_parse("CRASH_KILLS")?.unwrap_or(10).max(1);
    let executions: usize = env_parse("CRASH_EXECUTIONS")?.unwrap_or(24).max(1);
    let started = Instant::now();
    let mut failures = Vec::new();
    for seed in seeds {
        match run_seed(seed, kills, executions) {
            Ok(line) => println!("{line}"),
            Err(e) => {
                println!("crash seed {seed}: FAILED\n{e:#}");
                failures.push(seed);
            }
        }
    }
    println!("crash: took {:.1} s", started.elapsed().as_secs_f64());
    ensure!(failures.is_empty(), "crash seeds failed: {failures:?}");
    Ok(())
}

fn run_seed(seed: u64, kills: usize, executions: usize) -> Result<String> {
    let dir = tempfile::tempdir()?;
    let reference = ChildRun {
        db: dir.path().join("reference.db"),
        seed,
        executions,
        log: dir.path().join("reference.log"),
    };
    let crashed = ChildRun {
        db: dir.path().join("crashed.db"),
        seed,
        executions,
        log: dir.path().join("crashed.log"),
    };
    // The uninterrupted run goes on beside the crashed one (timers are wall-clock).
    let reference_child = reference.spawn()?;

    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut killed = 0;
    let mut finished_early = false;
    while killed < kills {
        let mut child = crashed.spawn()?;
        let live_for = Duration::from_millis(rng.random_range(50..=1500));
        let deadline = Instant::now() + live_for;
        let mut exited = None;
        while Instant::now() < deadline {
            if let Some(status) = child.try_wait()? {
                exited = Some(status);
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        match exited {
            None => {
                child.kill().context("SIGKILL")?; // SIGKILL on Unix
                child.wait()?;
                killed += 1;
            }
            Some(status) => {
                ensure!(
                    status.success() && crashed.done_count() > 0,
                    "crashed-run child exited by itself with {status}; log:\n{}",
                    crashed.log_tail()
                );
                finished_early = true;
                break;
            }
        }
    }
    if !finished_early {
        let child = crashed.spawn()?;
        crashed.finish(child, FINAL_RUN_LIMIT)?;
    }
    reference.finish(reference_child, FINAL_RUN_LIMIT)?;

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let (want, got) = runtime.block_on(async {
        let want = collect(&reference.db)
            .await
            .context("reading the reference")?;
        let got = collect(&crashed.db)
            .await
            .context("reading the crashed run")?;
        Ok::<_, anyhow::Error>((want, got))
    })?;
    let problems = compare(&want, &got, executions);
    if !problems.is_empty() {
        bail!(
            "{} mismatches after {killed} kills:\n{}\ncrashed-run log tail:\n{}",
            problems.len(),
            problems.join("\n"),
            crashed.log_tail()
        );
    }
    let statuses = tally(&got);
    let timeouts =
        |m: &BTreeMap<String, Ended>| -> usize { m.values().map(|e| e.activity_timeouts).sum() };
    let lost = timeouts(&got).saturating_sub(timeouts(&want));
    if std::env::var_os("CRASH_DUMP").is_some() {
        for (name, e) in &got {
            println!("{name}: {e:?}");
        }
    }
    Ok(format!(
        "crash seed {seed}: {killed} kills, {} executions, all match ({statuses}; \
         {lost} activity tasks lost with a killed worker and handed out again)",
        got.len()
    ))
}

/// What one execution ended as, and what its history says.
#[derive(Debug, Clone, PartialEq)]
struct Ended {
    status: ExecutionStatus,
    output: Option<Value>,
    error: Option<String>,
    cause: Option<String>,
    redrive_count: u32,
    /// `ActivitySucceeded` events.
    activity_successes: usize,
    /// `TaskStateExited` events of states answered by a worker.
    worked_exits: usize,
    /// `ActivityTimedOut` events: the unpolled task's timeout, plus tasks lost with a killed
    /// worker and handed out again after their heartbeat ran out (not compared).
    activity_timeouts: usize,
    /// `(event type, state name)` of every `…StateExited`, sorted: Parallel branches and Map
    /// iterations interleave differently from run to run, so the order is not compared.
    exits: Vec<(String, String)>,
}

async fn collect(db: &Path) -> Result<BTreeMap<String, Ended>> {
    // No handler: every execution should have ended, so nothing is invoked.
    let engine = Engine::open(packing(db), None).await?;
    let machine = format!("arn:aws:states:us-east-1:123456789012:stateMachine:{MACHINE}");
    let mut arns = Vec::new();
    let mut next_token = None;
    loop {
        let page = engine
            .list_executions(ListExecutionsInput {
                state_machine_arn: machine.clone(),
                max_results: Some(1000),
                next_token,
                ..Default::default()
            })
            .await?;
        arns.extend(page.executions.into_iter().map(|e| e.execution_arn));
        next_token = page.next_token;
        if next_token.is_none() {
            break;
        }
    }
    let mut out = BTreeMap::new();
    for arn in arns {
        let d = engine.describe_execution(&arn).await?;
        let events = history(&engine, &arn).await?;
        let state_name = |e: &HistoryEvent| {
            e.details
                .as_ref()
                .and_then(|d| d.get("name"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        let mut exits: Vec<(String, String)> = events
            .iter()
            .filter(|e| e.event_type.ends_with("StateExited"))
            .map(|e| (e.event_type.clone(), state_name(e)))
            .collect();
        exits.sort();
        let ended = Ended {
            status: d.status,
            output: d.output.as_deref().map(serde_json::from_str).transpose()?,
            error: d.error,
            cause: d.cause,
            redrive_count: d.redrive_count,
            activity_successes: events
                .iter()
                .filter(|e| e.event_type == "ActivitySucceeded")
                .count(),
            activity_timeouts: events
                .iter()
                .filter(|e| e.event_type == "ActivityTimedOut")
                .count(),
            worked_exits: exits
                .iter()
                .filter(|(t, n)| t == "TaskStateExited" && WORKED_STATES.contains(&n.as_str()))
                .count(),
            exits,
        };
        out.insert(d.name, ended);
    }
    engine.shutdown().await;
    Ok(out)
}

async fn history(engine: &Engine, arn: &str) -> Result<Vec<HistoryEvent>> {
    let mut events = Vec::new();
    let mut next_token = None;
    loop {
        let page = engine
            .get_execution_history(GetExecutionHistoryInput {
                execution_arn: arn.to_owned(),
                max_results: Some(1000),
                next_token,
                ..Default::default()
            })
            .await?;
        events.extend(page.events);
        next_token = page.next_token;
        if next_token.is_none() {
            return Ok(events);
        }
    }
}

fn compare(
    want: &BTreeMap<String, Ended>,
    got: &BTreeMap<String, Ended>,
    executions: usize,
) -> Vec<String> {
    let mut problems = Vec::new();
    if want.len() != executions {
        problems.push(format!(
            "the reference run has {} executions, not {executions}",
            want.len()
        ));
    }
    for (name, w) in want {
        if w.status == ExecutionStatus::Running {
            problems.push(format!("{name}: still RUNNING in the reference run"));
        }
        if w.activity_successes != w.worked_exits {
            problems.push(format!(
                "{name} (reference): {} ActivitySucceeded but {} worked TaskStateExited",
                w.activity_successes, w.worked_exits
            ));
        }
        let Some(g) = got.get(name) else {
            problems.push(format!("{name}: missing from the crashed run"));
            continue;
        };
        if (g.status, &g.output, &g.error, &g.cause, g.redrive_count)
            != (w.status, &w.output, &w.error, &w.cause, w.redrive_count)
        {
            problems.push(format!(
                "{name}: ended {} output={} error={:?} cause={:?} redrives={}; uninterrupted: {} output={} error={:?} cause={:?} redrives={}",
                g.status.as_str(),
                g.output.as_ref().map(Value::to_string).unwrap_or_default(),
                g.error,
                g.cause,
                g.redrive_count,
                w.status.as_str(),
                w.output.as_ref().map(Value::to_string).unwrap_or_default(),
                w.error,
                w.cause,
                w.redrive_count,
            ));
        }
        if g.activity_successes != g.worked_exits || g.activity_successes != w.activity_successes {
            problems.push(format!(
                "{name}: {} ActivitySucceeded and {} worked TaskStateExited; uninterrupted: {} and {} \
                 (an activity completion applied more or less than once)",
                g.activity_successes, g.worked_exits, w.activity_successes, w.worked_exits
            ));
        }
        if g.exits != w.exits {
            problems.push(format!(
                "{name}: states exited {:?}; uninterrupted: {:?}",
                g.exits, w.exits
            ));
        }
    }
    for name in got.keys().filter(|n| !want.contains_key(*n)) {
        problems.push(format!("{name}: only in the crashed run"));
    }
    problems
}

fn tally(got: &BTreeMap<String, Ended>) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for e in got.values() {
        *counts.entry(e.status.as_str()).or_default() += 1;
    }
    counts
        .iter()
        .map(|(s, n)| format!("{n} {s}"))
        .collect::<Vec<_>>()
        .join(", ")
}
