//! The activity-worker runtime against the real embedded engine, on state machines of its own
//! (a chain of activity Tasks, no Retry or Catch, so an outcome shows in the execution's end).

use async_trait::async_trait;
use engine::{Engine, EngineConfig, ExecutionStatus, StartExecutionInput};
use serde_json::{Value, json};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::{Semaphore, mpsc, watch};
use workflow::port::HistoryPage;
use workflow::{
    EmbeddedWorkflow, ExecutionInfo, RedriveOutcome, RunningPage, StartedExecution, Step,
    StepOutcome, StepTask, TaskHandle, WorkerPool, WorkerSettings, WorkflowError, WorkflowPort,
};

const WAIT: Duration = Duration::from_secs(20);

/// A step made of a closure.
struct FnStep<F>(F);

#[async_trait]
impl<F> Step for FnStep<F>
where
    F: Fn(StepTask) -> Pin<Box<dyn Future<Output = StepOutcome> + Send>> + Send + Sync,
{
    async fn run(&self, task: StepTask) -> StepOutcome {
        (self.0)(task).await
    }
}

fn step<F, Fut>(f: F) -> Arc<dyn Step>
where
    F: Fn(StepTask) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = StepOutcome> + Send + 'static,
{
    Arc::new(FnStep(move |task| {
        Box::pin(f(task)) as Pin<Box<dyn Future<Output = StepOutcome> + Send>>
    }))
}

fn done() -> Arc<dyn Step> {
    step(|task: StepTask| async move { StepOutcome::Done(json!({ "seen": task.input })) })
}

struct Fixture {
    _dir: tempfile::TempDir,
    engine: Engine,
    port: Arc<dyn WorkflowPort>,
    machine: String,
    activities: Vec<String>,
}

/// An engine with activities `a0…` and a machine running one Task on each, in order.
async fn fixture(tasks: usize, heartbeat_seconds: u64) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let engine = Engine::open(EngineConfig::new(dir.path().join("engine.db")), None)
        .await
        .unwrap();
    let port: Arc<dyn WorkflowPort> =
        Arc::new(EmbeddedWorkflow::setup(engine.clone()).await.unwrap());
    let mut activities = Vec::new();
    let mut states = serde_json::Map::new();
    for i in 0..tasks {
        let arn = engine
            .create_activity(&format!("a{i}"))
            .await
            .unwrap()
            .activity_arn;
        let mut state = json!({
            "Type": "Task",
            "Resource": arn,
            "TimeoutSeconds": 60,
            "HeartbeatSeconds": heartbeat_seconds,
            "ResultPath": format!("$.r{i}"),
        });
        if i + 1 < tasks {
            state["Next"] = json!(format!("T{}", i + 1));
        } else {
            state["End"] = json!(true);
        }
        states.insert(format!("T{i}"), state);
        activities.push(arn);
    }
    let definition = json!({ "StartAt": "T0", "States": states }).to_string();
    let machine = engine
        .create_state_machine("test", &definition, None)
        .await
        .unwrap()
        .state_machine_arn;
    Fixture {
        _dir: dir,
        engine,
        port,
        machine,
        activities,
    }
}

impl Fixture {
    fn settings(&self) -> WorkerSettings {
        WorkerSettings {
            worker_name: "test-worker".to_owned(),
            poll_wait: Duration::from_millis(500),
            heartbeat_interval: Duration::from_millis(300),
            retry_backoff: Duration::from_millis(20),
            ..WorkerSettings::default()
        }
    }

    async fn start(&self, name: &str) -> String {
        self.engine
            .start_execution(StartExecutionInput {
                state_machine_arn: self.machine.clone(),
                name: Some(name.to_owned()),
                input: Some(json!({ "orderId": name }).to_string()),
            })
            .await
            .unwrap()
            .execution_arn
    }

    async fn finish(&self, arn: &str) -> engine::ExecutionDescription {
        self.engine.wait_for_completion(arn, WAIT).await.unwrap()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn done_steps_complete_the_execution() {
    let f = fixture(2, 20).await;
    let pool = WorkerPool::builder(f.port.clone())
        .settings(f.settings())
        .step(f.activities[0].clone(), done())
        .step(
            f.activities[1].clone(),
            step(|_| async { StepOutcome::Done(json!("second")) }),
        )
        .start();
    let arn = f.start("order-1").await;
    let end = f.finish(&arn).await;
    assert_eq!(end.status, ExecutionStatus::Succeeded);
    let output: Value = serde_json::from_str(end.output.as_deref().unwrap()).unwrap();
    assert_eq!(output["r0"], json!({ "seen": { "orderId": "order-1" } }));
    assert_eq!(output["r1"], "second");
    pool.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_step_fails_the_task_with_its_error_name() {
    let f = fixture(2, 20).await;
    let pool = WorkerPool::builder(f.port.clone())
        .settings(f.settings())
        .step(f.activities[0].clone(), done())
        .step(
            f.activities[1].clone(),
            step(|_| async {
                StepOutcome::Failed {
                    error: "Payment.Declined".to_owned(),
                    // Longer than a cause may be: the runtime cuts it.
                    cause: "x".repeat(40_000),
                }
            }),
        )
        .start();
    let arn = f.start("order-1").await;
    let end = f.finish(&arn).await;
    assert_eq!(end.status, ExecutionStatus::Failed);
    assert_eq!(end.error.as_deref(), Some("Payment.Declined"));
    assert_eq!(end.cause.map(|c| c.len()), Some(32_768));
    pool.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_parked_task_stays_open_until_someone_answers_it() {
    let f = fixture(1, 20).await;
    let (parked_tx, mut parked_rx) = mpsc::unbounded_channel();
    let pool = WorkerPool::builder(f.port.clone())
        .settings(f.settings())
        .step(
            f.activities[0].clone(),
            step(move |task: StepTask| {
                let parked = parked_tx.clone();
                async move {
                    parked.send(task.task_token).unwrap();
                    StepOutcome::Parked
                }
            }),
        )
        .start();
    let arn = f.start("order-1").await;
    let token = tokio::time::timeout(WAIT, parked_rx.recv())
        .await
        .unwrap()
        .unwrap();
    // The pool is stopped (so nothing of it is pending) and the task is still open.
    pool.stop().await;
    let now = f.engine.describe_execution(&arn).await.unwrap();
    assert_eq!(now.status, ExecutionStatus::Running);
    f.port
        .send_task_success(&token, &json!({ "approved": true }))
        .await
        .unwrap();
    let end = f.finish(&arn).await;
    assert_eq!(end.status, ExecutionStatus::Succeeded);
    assert!(end.output.unwrap().contains("approved"));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_step_longer_than_the_heartbeat_timeout_succeeds_by_heartbeating() {
    let f = fixture(1, 1).await;
    let pool = WorkerPool::builder(f.port.clone())
        .settings(f.settings())
        .step(
            f.activities[0].clone(),
            step(|_| async {
                // The step's own slow work, 2.5 heartbeat timeouts long.
                tokio::time::sleep(Duration::from_millis(2_500)).await;
                StepOutcome::Done(json!("slow"))
            }),
        )
        .start();
    let arn = f.start("order-1").await;
    let end = f.finish(&arn).await;
    assert_eq!(end.status, ExecutionStatus::Succeeded, "{:?}", end.error);
    pool.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_panicking_step_fails_its_task_and_the_pool_goes_on() {
    let f = fixture(1, 20).await;
    let pool = WorkerPool::builder(f.port.clone())
        .settings(f.settings())
        .step(
            f.activities[0].clone(),
            step(|task: StepTask| async move {
                if task.input["orderId"] == "order-1" {
                    panic!("the step broke");
                }
                StepOutcome::Done(json!("fine"))
            }),
        )
        .start();
    let broken = f.start("order-1").await;
    let end = f.finish(&broken).await;
    assert_eq!(end.status, ExecutionStatus::Failed);
    assert_eq!(end.error.as_deref(), Some("Step.Failed"));
    assert!(end.cause.unwrap().contains("the step broke"));

    let fine = f.start("order-2").await;
    assert_eq!(f.finish(&fine).await.status, ExecutionStatus::Succeeded);
    pool.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn no_more_than_max_in_flight_steps_run_at_once() {
    let f = fixture(1, 20).await;
    let gate = Arc::new(Semaphore::new(0));
    let (running_tx, mut running_rx) = watch::channel(0usize);
    let running_tx = Arc::new(running_tx);
    let most = Arc::new(AtomicUsize::new(0));
    let blocked = {
        let (gate, running, most) = (gate.clone(), running_tx.clone(), most.clone());
        step(move |_| {
            let (gate, running, most) = (gate.clone(), running.clone(), most.clone());
            async move {
                running.send_modify(|n| {
                    *n += 1;
                    most.fetch_max(*n, Ordering::SeqCst);
                });
                gate.acquire().await.unwrap().forget();
                running.send_modify(|n| *n -= 1);
                StepOutcome::Done(json!("done"))
            }
        })
    };
    let pool = WorkerPool::builder(f.port.clone())
        .settings(WorkerSettings {
            max_in_flight: 2,
            pollers_per_activity: 4,
            ..f.settings()
        })
        .step(f.activities[0].clone(), blocked)
        .start();
    let mut arns = Vec::new();
    for i in 0..6 {
        arns.push(f.start(&format!("order-{i}")).await);
    }
    tokio::time::timeout(WAIT, running_rx.wait_for(|n| *n == 2))
        .await
        .unwrap()
        .unwrap();
    // Both slots are taken by running steps, so no poll of the pool is in flight: the other
    // four tasks are still scheduled, and the test can take one itself.
    let stolen = f
        .port
        .get_activity_task(&f.activities[0], "thief", Duration::ZERO)
        .await
        .unwrap()
        .expect("a task the pool did not take");
    f.port
        .send_task_success(&stolen.task_token, &json!("by the test"))
        .await
        .unwrap();

    gate.add_permits(6);
    for arn in &arns {
        assert_eq!(f.finish(arn).await.status, ExecutionStatus::Succeeded);
    }
    assert_eq!(most.load(Ordering::SeqCst), 2);
    pool.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stop_lets_running_steps_finish_and_takes_no_new_task() {
    let f = fixture(1, 20).await;
    let gate = Arc::new(Semaphore::new(0));
    let (running_tx, mut running_rx) = watch::channel(0usize);
    let running_tx = Arc::new(running_tx);
    let blocked = {
        let (gate, running) = (gate.clone(), running_tx.clone());
        step(move |_| {
            let (gate, running) = (gate.clone(), running.clone());
            async move {
                running.send_modify(|n| *n += 1);
                gate.acquire().await.unwrap().forget();
                StepOutcome::Done(json!("finished"))
            }
        })
    };
    let pool = WorkerPool::builder(f.port.clone())
        .settings(f.settings())
        .step(f.activities[0].clone(), blocked)
        .start();
    let mut arns = Vec::new();
    for i in 0..3 {
        arns.push(f.start(&format!("order-{i}")).await);
    }
    tokio::time::timeout(WAIT, running_rx.wait_for(|n| *n == 3))
        .await
        .unwrap()
        .unwrap();

    let stopping = tokio::spawn(pool.stop());
    // Started while the pool stops: a poll still in flight may take it (and must then run
    // it), or it stays scheduled.
    let racing = f.start("order-racing").await;
    assert!(
        !stopping.is_finished(),
        "the stop waits for the running steps"
    );
    gate.add_permits(100);
    tokio::time::timeout(WAIT, stopping).await.unwrap().unwrap();

    for arn in &arns {
        let now = f.engine.describe_execution(arn).await.unwrap();
        assert_eq!(
            now.status,
            ExecutionStatus::Succeeded,
            "answered before the stop ended"
        );
    }
    let racing_now = f.engine.describe_execution(&racing).await.unwrap();
    if racing_now.status == ExecutionStatus::Running {
        let task = f
            .port
            .get_activity_task(&f.activities[0], "after-stop", Duration::from_secs(5))
            .await
            .unwrap();
        assert!(
            task.is_some(),
            "a task taken during the stop was run, not dropped"
        );
    } else {
        assert_eq!(racing_now.status, ExecutionStatus::Succeeded);
    }

    // After the stop nothing polls: a new execution's task waits for the next worker.
    let after = f.start("order-after").await;
    let task = f
        .port
        .get_activity_task(&f.activities[0], "after-stop", Duration::from_secs(5))
        .await
        .unwrap()
        .expect("the task is still scheduled");
    assert_eq!(task.input["orderId"], "order-after");
    assert_eq!(
        f.engine.describe_execution(&after).await.unwrap().status,
        ExecutionStatus::Running
    );
    f.port
        .send_task_success(&task.task_token, &json!({}))
        .await
        .unwrap();
    assert_eq!(f.finish(&after).await.status, ExecutionStatus::Succeeded);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stop_abandons_a_poll_that_outlasts_its_grace_and_the_task_is_not_lost() {
    let f = fixture(1, 1).await;
    let settings = WorkerSettings {
        // Held far longer than the test waits: only abandoning it lets the stop end.
        poll_wait: Duration::from_secs(600),
        abandon_polls_after: Some(Duration::from_millis(100)),
        ..f.settings()
    };
    let pool = WorkerPool::builder(f.port.clone())
        .settings(settings)
        .step(
            f.activities[0].clone(),
            step(|_| async { StepOutcome::Done(json!("done")) }),
        )
        .start();
    // Let the pollers reach their (long) polls.
    tokio::time::sleep(Duration::from_millis(200)).await;
    tokio::time::timeout(WAIT, pool.stop())
        .await
        .expect("the stop ends once the grace is over");

    // Nothing polls any more; an execution's task waits, scheduled, for the next worker.
    let arn = f.start("order-after-abandon").await;
    let task = f
        .port
        .get_activity_task(&f.activities[0], "next", Duration::from_secs(5))
        .await
        .unwrap()
        .expect("the task is still there for a worker");
    f.port
        .send_task_success(&task.task_token, &json!({}))
        .await
        .unwrap();
    assert_eq!(f.finish(&arn).await.status, ExecutionStatus::Succeeded);
}

/// A port that is unavailable for its first few polls and answers.
struct Flaky {
    inner: Arc<dyn WorkflowPort>,
    polls_to_fail: AtomicUsize,
    answers_to_fail: AtomicUsize,
}

fn fails(counter: &AtomicUsize) -> Result<(), WorkflowError> {
    match counter.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)) {
        Ok(_) => Err(WorkflowError::Unavailable("flaky".to_owned())),
        Err(_) => Ok(()),
    }
}

#[async_trait]
impl WorkflowPort for Flaky {
    fn execution_arn(&self, name: &str) -> String {
        self.inner.execution_arn(name)
    }
    async fn start_execution(
        &self,
        name: &str,
        input: &Value,
    ) -> Result<StartedExecution, WorkflowError> {
        self.inner.start_execution(name, input).await
    }
    async fn describe_execution(&self, arn: &str) -> Result<ExecutionInfo, WorkflowError> {
        self.inner.describe_execution(arn).await
    }
    async fn list_running_executions(
        &self,
        next_token: Option<String>,
    ) -> Result<RunningPage, WorkflowError> {
        self.inner.list_running_executions(next_token).await
    }
    async fn get_execution_history(
        &self,
        arn: &str,
        next_token: Option<String>,
        max_results: u32,
    ) -> Result<HistoryPage, WorkflowError> {
        self.inner
            .get_execution_history(arn, next_token, max_results)
            .await
    }
    async fn stop_execution(
        &self,
        arn: &str,
        error: &str,
        cause: &str,
    ) -> Result<(), WorkflowError> {
        self.inner.stop_execution(arn, error, cause).await
    }
    async fn redrive_execution(&self, arn: &str) -> Result<RedriveOutcome, WorkflowError> {
        self.inner.redrive_execution(arn).await
    }
    async fn get_activity_task(
        &self,
        arn: &str,
        worker: &str,
        wait: Duration,
    ) -> Result<Option<TaskHandle>, WorkflowError> {
        fails(&self.polls_to_fail)?;
        self.inner.get_activity_task(arn, worker, wait).await
    }
    async fn send_task_success(&self, token: &str, output: &Value) -> Result<(), WorkflowError> {
        fails(&self.answers_to_fail)?;
        self.inner.send_task_success(token, output).await
    }
    async fn send_task_failure(
        &self,
        token: &str,
        error: &str,
        cause: &str,
    ) -> Result<(), WorkflowError> {
        fails(&self.answers_to_fail)?;
        self.inner.send_task_failure(token, error, cause).await
    }
    async fn send_task_heartbeat(&self, token: &str) -> Result<(), WorkflowError> {
        self.inner.send_task_heartbeat(token).await
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn transient_errors_of_the_workflow_service_are_retried() {
    let f = fixture(1, 20).await;
    let flaky = Arc::new(Flaky {
        inner: f.port.clone(),
        polls_to_fail: AtomicUsize::new(3),
        answers_to_fail: AtomicUsize::new(2),
    });
    let pool = WorkerPool::builder(flaky.clone())
        .settings(f.settings())
        .step(f.activities[0].clone(), done())
        .start();
    let arn = f.start("order-1").await;
    assert_eq!(f.finish(&arn).await.status, ExecutionStatus::Succeeded);
    assert_eq!(flaky.polls_to_fail.load(Ordering::SeqCst), 0);
    assert_eq!(flaky.answers_to_fail.load(Ordering::SeqCst), 0);
    pool.stop().await;
}
