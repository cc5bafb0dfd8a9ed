//! The execution snapshot as a stored format: a snapshot the engine wrote mid-flight (checked in,
//! `fixtures/snapshot-v1.json`) still decodes and runs to its end, so does the redrive point kept
//! when that execution is stopped (`fixtures/snapshot-v1-redrive-point.json`), and a snapshot
//! that cannot be read fails its execution visibly instead of leaving it RUNNING, with nothing
//! to redrive.

use chrono::{DateTime, TimeZone, Utc};
use engine::core::{Action, Event, ExecInfo, ExecState, FrameWait, Interpreter, Seed, snapshot};
use engine::{Engine, EngineConfig, EngineError, ExecutionStatus, StartExecutionInput};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

const LONG: Duration = Duration::from_secs(20);

/// The activity the fixture's definition names (the engine's ARN for an activity `work`).
const ACTIVITY: &str = "arn:aws:states:us-east-1:123456789012:activity:work";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn fixture_definition() -> String {
    std::fs::read_to_string(fixture("snapshot-v1.asl.json")).expect("the fixture's definition")
}

fn fixture_input() -> Value {
    json!({"count": 2, "items": ["a", "b"]})
}

// ---- today's format -------------------------------------------------------------------------

/// The frame waiting on an activity task: `(frame id, token)`.
fn parked_task(state: &ExecState) -> (u64, String) {
    let parked: Vec<(u64, String)> = state
        .frames
        .iter()
        .filter_map(|(id, f)| match &f.wait {
            FrameWait::Task { token, .. } => Some((*id, token.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(parked.len(), 1, "one parked task");
    parked.into_iter().next().unwrap()
}

#[test]
fn the_v1_snapshot_decodes_and_its_execution_runs_to_the_expected_result() {
    let bytes = std::fs::read(fixture("snapshot-v1.json")).expect("the fixture");
    let mut state = snapshot::decode(&bytes).expect("today's format decodes");

    // What the fixture holds: a Parallel whose Map iteration is parked on a retried, handed-out
    // activity task with a heartbeat, while the other branch waits on its timer.
    assert_eq!(state.status, ExecutionStatus::Running);
    let (task_frame, token) = parked_task(&state);
    let work = &state.frames[&task_frame];
    assert_eq!(work.state, "Work");
    assert_eq!(work.retry_counts, [1], "one retry made");
    assert_eq!(work.input, json!({"item": "a", "index": 0}));
    assert_eq!(work.variables["greeting"], json!("hello"));
    assert!(matches!(
        work.wait,
        FrameWait::Task {
            activity: true,
            heartbeat_seconds: Some(600),
            ..
        }
    ));
    let wait_timer = state
        .frames
        .values()
        .find_map(|f| match f.wait {
            FrameWait::Wait { timer_id, .. } => Some(timer_id),
            _ => None,
        })
        .expect("the Pause branch waits on a timer");
    let map = state
        .frames
        .values()
        .find_map(|f| match &f.wait {
            FrameWait::Children(c) if f.state == "Items" => Some(c),
            _ => None,
        })
        .expect("the Map frame");
    assert_eq!(
        (map.next_index, map.running, map.max_concurrency),
        (1, 1, 1)
    );
    assert!(map.tolerated.is_some());
    // Decoding and encoding again loses nothing.
    assert_eq!(
        snapshot::decode(&snapshot::encode(&state))
            .map(|s| snapshot::encode(&s))
            .expect("decodes"),
        snapshot::encode(&state)
    );

    // The execution goes on from there.
    let ended = run_to_end(&mut state, token, wait_timer);
    assert_eq!(ended.status, ExecutionStatus::Succeeded);
    assert_eq!(ended.output, Some(expected_output()));
}

/// What the fixture's execution outputs when every task succeeds.
fn expected_output() -> Value {
    json!({
        "greeting": "hello",
        "count": 2,
        "results": [[{"done": "a"}, {"done": "b"}], "waited"]
    })
}

fn fixture_info() -> ExecInfo {
    ExecInfo {
        execution_arn: "arn:aws:states:us-east-1:123456789012:execution:snapshot:v1".to_owned(),
        name: "v1".to_owned(),
        state_machine_arn: "arn:aws:states:us-east-1:123456789012:stateMachine:snapshot".to_owned(),
        state_machine_name: "snapshot".to_owned(),
        role_arn: "arn:aws:iam::123456789012:role/StepFunctionsEngine".to_owned(),
        state_machine_version_arn: None,
        state_machine_alias_arn: None,
        start_time: Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0).unwrap(),
        input: fixture_input(),
    }
}

/// Applies `events` in turn to the fixture's execution, one hour after it started; returns what
/// each step did.
fn apply_all(state: &mut ExecState, events: Vec<Event>) -> Vec<engine::core::Applied> {
    let definition = engine::asl::parse(&fixture_definition()).expect("the definition parses");
    let info = fixture_info();
    let is_activity = |r: &str| r == ACTIVITY;
    let it = Interpreter {
        definition: &definition,
        info: &info,
        is_activity: &is_activity,
    };
    let now: DateTime<Utc> = Utc.with_ymd_and_hms(2030, 1, 1, 1, 0, 0).unwrap();
    let mut applied = Vec::new();
    for event in events {
        let seed = Seed::from_u64(applied.len() as u64 + 1);
        applied.push(it.apply(state, event, now, seed));
    }
    applied
}

fn scheduled(step: &engine::core::Applied) -> Vec<engine::core::ScheduledTask> {
    step.actions
        .iter()
        .filter_map(|a| match a {
            Action::ScheduleTask(t) => Some(t.clone()),
            _ => None,
        })
        .collect()
}

/// Runs the fixture's execution from `state` to its end: item a's task (`token`) answered, item
/// b's then scheduled, taken and answered, the Pause branch's timer fired.
fn run_to_end(state: &mut ExecState, token: String, wait_timer: u64) -> engine::core::ExecutionEnd {
    let first_new_event = state.last_event_id + 1;
    let done_a = apply_all(
        state,
        vec![Event::TaskSucceeded {
            token,
            output: json!({"done": "a"}),
        }],
    );
    assert_eq!(done_a[0].events[0].id, first_new_event);
    let next = scheduled(&done_a[0])
        .pop()
        .expect("the Map's second item is scheduled");
    assert_eq!(next.input, json!({"item": "b", "index": 1}));
    let rest = apply_all(
        state,
        vec![
            Event::TaskStarted {
                token: next.token.clone(),
                worker_name: Some("w".to_owned()),
            },
            Event::TaskSucceeded {
                token: next.token,
                output: json!({"done": "b"}),
            },
            Event::TimerFired {
                timer_id: wait_timer,
            },
        ],
    );
    rest[2]
        .actions
        .iter()
        .find_map(|a| match a {
            Action::Finish(e) => Some(e.clone()),
            _ => None,
        })
        .expect("the execution ends")
}

// ---- a redrive point --------------------------------------------------------------------------

/// The fixture's execution stopped (ABORTED): what the engine keeps of an unsuccessful execution
/// for a redrive, as it stores it.
fn stopped_fixture() -> ExecState {
    let bytes = std::fs::read(fixture("snapshot-v1.json")).expect("the fixture");
    let mut state = snapshot::decode(&bytes).expect("today's format decodes");
    apply_all(
        &mut state,
        vec![Event::Stop {
            error: Some("Operator".to_owned()),
            cause: None,
        }],
    );
    state
}

#[test]
fn the_v1_redrive_point_decodes_and_its_redrive_runs_to_the_expected_result() {
    let bytes = std::fs::read(fixture("snapshot-v1-redrive-point.json")).expect("the fixture");
    let mut state = snapshot::decode(&bytes).expect("the redrive point decodes");
    assert_eq!(state.status, ExecutionStatus::Aborted);
    assert!(state.frames.is_empty());
    let parked: Vec<&str> = state.resume.values().map(|f| f.state.as_str()).collect();
    assert!(
        parked.contains(&"Work") && parked.contains(&"Pause"),
        "{parked:?}"
    );
    assert_eq!(state.redrive_count, 0);

    let redriven = apply_all(&mut state, vec![Event::Redrive]).remove(0);
    assert_eq!(redriven.events[0].event_type, "ExecutionRedriven");
    assert_eq!(state.redrive_count, 1);
    let work = scheduled(&redriven).pop().expect("item a's task, again");
    assert_eq!(work.input, json!({"item": "a", "index": 0}));
    let wait_timer = redriven
        .actions
        .iter()
        .find_map(|a| match a {
            Action::StartTimer { timer_id, .. } => Some(*timer_id),
            _ => None,
        })
        .expect("the Pause branch waits again");
    let ended = run_to_end(&mut state, work.token, wait_timer);
    assert_eq!(ended.status, ExecutionStatus::Succeeded);
    assert_eq!(ended.output, Some(expected_output()));
}

/// Writes `fixtures/snapshot-v1-redrive-point.json` (the v1 fixture's execution stopped): run by
/// hand like `write_a_snapshot_fixture`
/// (`REDRIVE_FIXTURE_OUT=engine/tests/fixtures/snapshot-v1-redrive-point.json`).
#[test]
#[ignore = "writes a fixture file; run by hand for a new snapshot format version"]
fn write_a_redrive_point_fixture() {
    let out = std::env::var_os("REDRIVE_FIXTURE_OUT").expect("set REDRIVE_FIXTURE_OUT");
    std::fs::write(out, snapshot::encode(&stopped_fixture())).unwrap();
}

/// Writes a snapshot like the checked-in one, from a real engine: run by hand, only to add the
/// fixture of a new format version (`SNAPSHOT_FIXTURE_OUT=engine/tests/fixtures/snapshot-vN.json
/// cargo test --release -p engine --test snapshot -- --ignored`); a checked-in fixture is never
/// rewritten, it is what older engines stored.
#[tokio::test]
#[ignore = "writes a fixture file; run by hand for a new snapshot format version"]
async fn write_a_snapshot_fixture() {
    let out = std::env::var_os("SNAPSHOT_FIXTURE_OUT").expect("set SNAPSHOT_FIXTURE_OUT");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("engine.db");
    let engine = open(&db).await;
    let activity = engine.create_activity("work").await.unwrap().activity_arn;
    assert_eq!(activity, ACTIVITY);
    let sm = engine
        .create_state_machine("snapshot", &fixture_definition(), None)
        .await
        .unwrap()
        .state_machine_arn;
    let execution = start(&engine, &sm, "v1", fixture_input()).await;
    let first = poll(&engine).await.expect("item a's task");
    engine
        .send_task_failure(&first.task_token, Some("Flaky"), Some("try again"))
        .await
        .unwrap();
    // Handed out again after the one-second back-off.
    let again = poll(&engine).await.expect("item a's task, retried");
    assert_ne!(again.task_token, first.task_token);
    engine.shutdown().await;
    let bytes: Vec<u8> = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row(
            "SELECT snapshot FROM executions WHERE name = ?",
            [execution.rsplit(':').next().unwrap()],
            |r| r.get(0),
        )
        .unwrap();
    std::fs::write(&out, bytes).unwrap();
}

// ---- an unreadable snapshot -----------------------------------------------------------------

async fn open(db: &Path) -> Engine {
    Engine::open(EngineConfig::new(db), None).await.unwrap()
}

async fn start(engine: &Engine, sm: &str, name: &str, input: Value) -> String {
    engine
        .start_execution(StartExecutionInput {
            state_machine_arn: sm.to_owned(),
            name: Some(name.to_owned()),
            input: Some(input.to_string()),
        })
        .await
        .unwrap()
        .execution_arn
}

async fn poll(engine: &Engine) -> Option<engine::ActivityTask> {
    engine
        .get_activity_task(ACTIVITY, Some("w"), LONG)
        .await
        .unwrap()
}

/// An engine with the activity and a one-Task machine on it (`extra` fields on the Task).
async fn engine_with_task_machine(db: &Path, extra: Value) -> (Engine, String) {
    let engine = open(db).await;
    engine.create_activity("work").await.unwrap();
    let mut task = json!({"Type": "Task", "Resource": ACTIVITY, "End": true});
    if let (Value::Object(t), Value::Object(e)) = (&mut task, extra) {
        t.extend(e);
    }
    let definition = json!({"StartAt": "Work", "States": {"Work": task}});
    let sm = engine
        .create_state_machine("m", &definition.to_string(), None)
        .await
        .unwrap()
        .state_machine_arn;
    (engine, sm)
}

/// Cuts the stored snapshot of `execution` in half, as a torn write would (the engine closed).
fn tear_snapshot(db: &Path, execution: &str) {
    let conn = rusqlite::Connection::open(db).unwrap();
    let torn = conn
        .execute(
            "UPDATE executions SET snapshot = substr(snapshot, 1, length(snapshot) / 2) \
             WHERE name = ?",
            [execution.rsplit(':').next().unwrap()],
        )
        .unwrap();
    assert_eq!(torn, 1);
}

/// `(open tasks, timers)` left in the database (the engine closed).
fn open_tasks_and_timers(db: &Path) -> (i64, i64) {
    let conn = rusqlite::Connection::open(db).unwrap();
    let count = |sql: &str| conn.query_row(sql, [], |r| r.get::<_, i64>(0)).unwrap();
    (
        count("SELECT COUNT(*) FROM tasks WHERE status < 2"),
        count("SELECT COUNT(*) FROM timers"),
    )
}

#[tokio::test]
async fn an_unreadable_snapshot_fails_its_execution_when_its_timer_fires() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("engine.db");
    let (engine, sm) = engine_with_task_machine(&db, json!({"TimeoutSeconds": 3600})).await;
    let execution = start(&engine, &sm, "torn", json!({"n": 1})).await;
    let held = poll(&engine).await.expect("the task");
    engine.shutdown().await;
    drop(engine);

    tear_snapshot(&db, &execution);
    // The task's timeout is due at once: the first event the reopened engine has for it.
    rusqlite::Connection::open(&db)
        .unwrap()
        .execute("UPDATE timers SET due_ms = 0", [])
        .unwrap();
    let engine = open(&db).await;
    let ended = engine.wait_for_completion(&execution, LONG).await.unwrap();
    assert_eq!(ended.status, ExecutionStatus::Failed);
    assert_eq!(ended.error.as_deref(), Some("States.Runtime"));
    let cause = ended.cause.unwrap_or_default();
    assert!(cause.contains("could not read"), "{cause}");

    let history = engine
        .get_execution_history(engine::GetExecutionHistoryInput {
            execution_arn: execution.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .events;
    let types: Vec<&str> = history.iter().map(|e| e.event_type.as_str()).collect();
    assert_eq!(
        types,
        [
            "ExecutionStarted",
            "TaskStateEntered",
            "ActivityScheduled",
            "ActivityStarted",
            "ExecutionFailed"
        ]
    );
    let failed = history.last().unwrap();
    assert_eq!((failed.id, failed.previous_event_id), (5, 4));
    assert_eq!(
        failed.details,
        Some(json!({"error": "States.Runtime", "cause": cause}))
    );
    // The worker that held the task finds it closed.
    let late = engine.send_task_success(&held.task_token, "{}").await;
    assert!(
        matches!(late, Err(EngineError::TaskTimedOut(_))),
        "{late:?}"
    );
    engine.shutdown().await;
    drop(engine);
    assert_eq!(open_tasks_and_timers(&db), (0, 0));
}

#[tokio::test]
async fn a_worker_is_handed_the_next_task_not_one_whose_execution_cannot_be_read() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("engine.db");
    let (engine, sm) = engine_with_task_machine(&db, json!({})).await;
    let torn = start(&engine, &sm, "torn", json!({"n": 1})).await;
    let sound = start(&engine, &sm, "sound", json!({"n": 2})).await;
    engine.shutdown().await;
    drop(engine);

    tear_snapshot(&db, &torn);
    let engine = open(&db).await;
    let task = poll(&engine).await.expect("a task");
    assert_eq!(
        serde_json::from_str::<Value>(&task.input).unwrap(),
        json!({"n": 2}),
        "the older task belongs to the execution that cannot be read"
    );
    let described = engine.describe_execution(&torn).await.unwrap();
    assert_eq!(described.status, ExecutionStatus::Failed);
    assert_eq!(described.error.as_deref(), Some("States.Runtime"));
    assert_eq!(
        described.redrive_status,
        engine::RedriveStatus::NotRedrivable
    );
    let refused = engine.redrive_execution(&torn, None).await;
    assert!(
        matches!(refused, Err(EngineError::ExecutionNotRedrivable(_))),
        "{refused:?}"
    );

    engine
        .send_task_success(&task.task_token, r#"{"ok": true}"#)
        .await
        .unwrap();
    let ended = engine.wait_for_completion(&sound, LONG).await.unwrap();
    assert_eq!(ended.status, ExecutionStatus::Succeeded);
    engine.shutdown().await;
    drop(engine);
    assert_eq!(open_tasks_and_timers(&db), (0, 0));
}
