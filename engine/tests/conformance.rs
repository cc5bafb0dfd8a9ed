//! Conformance run: every case of the recorded corpus (`engine/conformance/`, a copy kept in
//! the repository) executed on one engine, each result matched against what AWS Step Functions
//! recorded. Prints one line per failing case and `conformance: N passed, M failed`, and fails
//! when fewer cases pass than `tests/conformance_floor.txt` says. See `CONFORMANCE.md`.
//!
//! Run it with `cargo test --release -p engine --test conformance -- --nocapture`. Environment:
//! - `ASL_CONFORMANCE_DIR`: run the cases below this directory instead (no floor check);
//! - `ASL_CONFORMANCE_FILTER`: only cases whose name contains this text (no floor check);
//! - `ASL_CONFORMANCE_RESULTS`: write each case's actual result to `<dir>/<name>.json`, in the
//!   format `check_corpus.py --compare CASE RESULT` reads.

#[path = "conformance/case.rs"]
mod case;
#[path = "conformance/matcher.rs"]
mod matcher;
#[path = "conformance/mocks.rs"]
mod mocks;

use anyhow::{Context, Result, bail, ensure};
use case::{Case, load_cases};
use engine::{
    Engine, EngineConfig, ExecutionStatus, GetExecutionHistoryInput, StartExecutionInput,
};
use matcher::{ActualResult, compare, truncate};
use mocks::MockDispatcher;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// The corpus recorded ARNs with this account id literally.
const ACCOUNT_ID: &str = "111111111111";
/// Outputs show the role only as a placeholder; any role will do.
const ROLE_ARN: &str = "arn:aws:iam::111111111111:role/conformance";
/// The slowest cases wait about 11 s of real time (Retry back-off); leave room for a loaded
/// machine, but do not let a hung execution stall the run forever.
const CASE_TIMEOUT: Duration = Duration::from_secs(120);
/// Cases in flight at once: most finish in milliseconds, a few sleep for seconds, so running
/// many together keeps the run near the longest case rather than the sum of them.
const CONCURRENCY: usize = 64;

#[tokio::test(flavor = "multi_thread")]
async fn conformance_corpus() -> Result<()> {
    let settings = Settings::from_env();
    let mut cases = load_cases(&settings.cases_dir)?;
    if let Some(filter) = &settings.filter {
        cases.retain(|c| c.name.contains(filter.as_str()));
    }
    ensure!(
        !cases.is_empty(),
        "no cases found in {}",
        settings.cases_dir.display()
    );
    println!(
        "conformance: running {} cases from {}",
        cases.len(),
        settings.cases_dir.display()
    );

    let started = Instant::now();
    let db_dir = tempfile::tempdir()?;
    let dispatcher = MockDispatcher::new(
        cases
            .iter()
            .map(|c| (c.resource_name(), Arc::new(c.task_mocks.clone())))
            .collect(),
    );
    let config = EngineConfig {
        account_id: ACCOUNT_ID.into(),
        // The first cases train the dictionary; the rest read their histories back packed.
        dictionary_samples: 64 * 1024,
        ..EngineConfig::new(db_dir.path().join("conformance.db"))
    };
    let engine = Engine::open(config, Some(Arc::new(dispatcher))).await?;
    let outcomes = run_all(&engine, cases).await;
    engine.shutdown().await;

    if let Some(dir) = &settings.results_dir {
        write_results(dir, &outcomes)?;
    }
    let (main, jsonata): (Vec<_>, Vec<_>) = outcomes.iter().partition(|o| !o.jsonata);
    print_failures("conformance", &main);
    print_failures("conformance (JSONata)", &jsonata);
    println!("conformance: took {:.1} s", started.elapsed().as_secs_f64());
    let (jsonata_passed, jsonata_failed) = tally(&jsonata);
    println!("conformance (JSONata): {jsonata_passed} passed, {jsonata_failed} failed");
    let (passed, failed) = tally(&main);
    println!("conformance: {passed} passed, {failed} failed");

    if settings.checks_floor() {
        check_floor(passed)?;
    } else {
        println!("conformance: floor not checked (custom case directory or filter)");
    }
    Ok(())
}

/// Where the cases come from and what to do with the results.
struct Settings {
    cases_dir: PathBuf,
    /// `$ASL_CONFORMANCE_DIR` was set: another corpus, to which the floor does not apply.
    custom_dir: bool,
    filter: Option<String>,
    results_dir: Option<PathBuf>,
}

impl Settings {
    fn from_env() -> Self {
        let custom = std::env::var_os("ASL_CONFORMANCE_DIR").map(PathBuf::from);
        Settings {
            custom_dir: custom.is_some(),
            // The repository keeps its own copy of the corpus.
            cases_dir: custom
                .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/cases")),
            filter: std::env::var("ASL_CONFORMANCE_FILTER")
                .ok()
                .filter(|f| !f.is_empty()),
            results_dir: std::env::var_os("ASL_CONFORMANCE_RESULTS").map(PathBuf::from),
        }
    }

    fn checks_floor(&self) -> bool {
        !self.custom_dir && self.filter.is_none()
    }
}

/// One case's verdict.
struct Outcome {
    name: String,
    jsonata: bool,
    /// What the engine produced, when it got as far as a finished execution.
    actual: Option<ActualResult>,
    /// Why the case failed; `None` when it passed.
    failure: Option<String>,
}

async fn run_all(engine: &Engine, cases: Vec<Case>) -> Vec<Outcome> {
    let permits = Arc::new(Semaphore::new(CONCURRENCY));
    let mut tasks = JoinSet::new();
    // A panic in the engine fails one case, not the run; its task id says which case it was.
    let mut names = HashMap::new();
    for case in cases {
        let (engine, permits) = (engine.clone(), permits.clone());
        let (name, jsonata) = (case.name.clone(), case.is_jsonata());
        let handle = tasks.spawn(async move {
            let _permit = permits
                .acquire_owned()
                .await
                .expect("semaphore is never closed");
            run_case(&engine, &case).await
        });
        names.insert(handle.id(), (name, jsonata));
    }
    let mut outcomes = Vec::with_capacity(names.len());
    while let Some(joined) = tasks.join_next_with_id().await {
        outcomes.push(match joined {
            Ok((_, outcome)) => outcome,
            Err(e) => {
                let (name, jsonata) = names[&e.id()].clone();
                let failure = if e.is_panic() {
                    format!("panicked: {}", truncate(panic_message(e.into_panic())))
                } else {
                    format!("task ended: {e}")
                };
                Outcome {
                    name,
                    jsonata,
                    actual: None,
                    failure: Some(one_line(failure)),
                }
            }
        });
    }
    outcomes.sort_by(|a, b| a.name.cmp(&b.name));
    outcomes
}

async fn run_case(engine: &Engine, case: &Case) -> Outcome {
    // Bounds every verb, not just the wait: a hung call fails its case instead of the run.
    let limit = CASE_TIMEOUT + Duration::from_secs(30);
    let result = tokio::time::timeout(limit, execute(engine, case))
        .await
        .unwrap_or_else(|_| Err(anyhow::anyhow!("no result after {} s", limit.as_secs())));
    let (actual, failure) = match result {
        Ok(actual) => {
            let verdict = compare(
                &case.expected,
                case.expected_states_entered.as_deref(),
                &actual,
            );
            (Some(actual), verdict.err().map(|m| m.to_string()))
        }
        Err(e) => (None, Some(truncate(format!("{e:#}")))),
    };
    Outcome {
        name: case.name.clone(),
        jsonata: case.is_jsonata(),
        actual,
        failure: failure.map(one_line),
    }
}

/// Creates the case's state machine, runs one execution to its end and collects its result.
/// EXPRESS cases run as STANDARD: the engine has only STANDARD, and the outcome is the same.
async fn execute(engine: &Engine, case: &Case) -> Result<ActualResult> {
    let name = case.resource_name();
    let machine = engine
        .create_state_machine(
            &name,
            &serde_json::to_string(&case.definition)?,
            Some(ROLE_ARN),
        )
        .await
        .context("CreateStateMachine")?;
    let started = engine
        .start_execution(StartExecutionInput {
            state_machine_arn: machine.state_machine_arn,
            // The mock dispatcher finds the case by this name.
            name: Some(name),
            input: Some(serde_json::to_string(&case.input)?),
        })
        .await
        .context("StartExecution")?;
    let done = engine
        .wait_for_completion(&started.execution_arn, CASE_TIMEOUT)
        .await
        .context("waiting for the execution")?;
    if !done.status.is_terminal() {
        bail!(
            "still {} after {} s",
            done.status.as_str(),
            CASE_TIMEOUT.as_secs()
        );
    }
    let output = match (&done.status, &done.output) {
        (ExecutionStatus::Succeeded, Some(text)) => serde_json::from_str(text)
            .with_context(|| format!("output is not JSON: {}", truncate(text.clone())))?,
        _ => Value::Null,
    };
    let states_entered = match case.expected_states_entered {
        Some(_) => Some(states_entered(engine, &started.execution_arn).await?),
        None => None,
    };
    Ok(ActualResult {
        status: done.status.as_str().to_owned(),
        output,
        error: done.error,
        cause: done.cause,
        states_entered,
    })
}

/// The state names of the execution's `*StateEntered` events, in history order.
async fn states_entered(engine: &Engine, execution_arn: &str) -> Result<Vec<String>> {
    let mut names = Vec::new();
    let mut next_token = None;
    loop {
        let page = engine
            .get_execution_history(GetExecutionHistoryInput {
                execution_arn: execution_arn.to_owned(),
                max_results: Some(1000),
                next_token,
                reverse_order: false,
                include_execution_data: Some(false),
            })
            .await
            .context("GetExecutionHistory")?;
        for event in page
            .events
            .iter()
            .filter(|e| e.event_type.ends_with("StateEntered"))
        {
            let name = event
                .details
                .as_ref()
                .and_then(|d| d.get("name"))
                .and_then(Value::as_str)
                .with_context(|| {
                    format!(
                        "{} event {} has no details.name",
                        event.event_type, event.id
                    )
                })?;
            names.push(name.to_owned());
        }
        match page.next_token {
            Some(token) => next_token = Some(token),
            None => return Ok(names),
        }
    }
}

fn tally(outcomes: &[&Outcome]) -> (usize, usize) {
    let failed = outcomes.iter().filter(|o| o.failure.is_some()).count();
    (outcomes.len() - failed, failed)
}

fn print_failures(label: &str, outcomes: &[&Outcome]) {
    let failures: Vec<_> = outcomes
        .iter()
        .filter_map(|o| Some((&o.name, o.failure.as_ref()?)))
        .collect();
    if failures.is_empty() {
        return;
    }
    println!("{label}: {} failing cases", failures.len());
    for (name, reason) in failures {
        println!("FAIL {name}: {reason}");
    }
}

fn write_results(dir: &Path, outcomes: &[Outcome]) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for outcome in outcomes {
        if let Some(actual) = &outcome.actual {
            let path = dir.join(format!("{}.json", outcome.name));
            std::fs::write(&path, serde_json::to_vec_pretty(actual)?)
                .with_context(|| format!("writing {}", path.display()))?;
        }
    }
    println!("conformance: results written to {}", dir.display());
    Ok(())
}

/// The pass count may not drop below the committed floor; raising the floor as the engine
/// improves keeps a regression from going unnoticed.
fn check_floor(passed: usize) -> Result<()> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance_floor.txt");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let floor: usize = text
        .trim()
        .parse()
        .with_context(|| format!("{} must hold one integer", path.display()))?;
    if passed < floor {
        bail!(
            "conformance: {passed} cases passed, below the floor of {floor} in {}: \
             cases that used to pass now fail",
            path.display()
        );
    }
    if passed > floor {
        println!(
            "conformance: {passed} passed, above the floor of {floor}; raise it in {}",
            path.display()
        );
    }
    Ok(())
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_owned())
}

/// Reasons go on one line each (their long values are already cut).
fn one_line(reason: String) -> String {
    reason.replace(['\n', '\r'], " ")
}
