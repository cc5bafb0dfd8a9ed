//! The embedded backend's start queue: `POST /orders` answers 202 once the order is committed
//! to the store, and the order's execution is started from here, off the request's path.
//!
//! The queue is in memory, but nothing in it can be lost: an order is offered only after it is
//! committed with its execution's ARN, and an order whose execution was never started is still
//! `ACCEPTED` (its first step moves it on). The repair loop (`ops::repair`) starts every
//! order left `ACCEPTED` without an execution past its grace period (after a crash, the orders
//! this queue held); starts are idempotent by the execution name, the order id.
//!
//! The queue is bounded. When it is full, or closed, the request starts its execution itself,
//! as the AWS backend always does: a burst beyond the queue slows intake down instead of
//! growing memory.

use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use store::OrderId;
use tokio::sync::{mpsc, oneshot};
use tokio::task::{JoinHandle, JoinSet};
use tracing::Instrument;
use workflow::{WorkflowError, WorkflowPort};

/// An order whose execution is to be started, with its saga input as JSON text (a few hundred
/// bytes: a full queue costs tens of MB, where parsed values would cost several times that).
#[derive(Debug, Clone, PartialEq)]
pub struct Queued {
    pub order_id: OrderId,
    pub input: Box<str>,
}

impl Queued {
    pub fn new(order_id: OrderId, input: &Value) -> Queued {
        Queued {
            order_id,
            input: input.to_string().into(),
        }
    }
}

/// How the queue runs.
#[derive(Debug, Clone, Copy)]
pub struct StartQueueSettings {
    /// Orders waiting at most (each a few hundred bytes).
    pub capacity: usize,
    /// Starts in flight at once: each waits for an engine commit, so many share one.
    pub in_flight: usize,
    /// The first and the longest wait before a start that failed transiently is tried again.
    pub retry_from: Duration,
    pub retry_up_to: Duration,
}

impl Default for StartQueueSettings {
    fn default() -> Self {
        StartQueueSettings {
            capacity: 100_000,
            in_flight: 64,
            retry_from: Duration::from_millis(50),
            retry_up_to: Duration::from_secs(5),
        }
    }
}

/// The sending side, held by order intake.
#[derive(Debug, Clone)]
pub struct StartQueue {
    tx: mpsc::Sender<Queued>,
}

/// The task that starts the queued executions, held by the service to stop it.
pub struct StartQueueTask {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl StartQueue {
    /// Spawns the task that starts the executions of the orders offered.
    pub fn spawn(
        workflow: Arc<dyn WorkflowPort>,
        settings: StartQueueSettings,
    ) -> (StartQueue, StartQueueTask) {
        let (tx, rx) = mpsc::channel(settings.capacity.max(1));
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(run(workflow, settings, rx, stopped));
        (StartQueue { tx }, StartQueueTask { stop, task })
    }

    /// Queues the start without waiting; hands the order back when the queue is full or
    /// stopped (the caller then starts it itself).
    pub fn offer(&self, queued: Queued) -> Result<(), Queued> {
        self.tx.try_send(queued).map_err(|e| match e {
            mpsc::error::TrySendError::Full(q) | mpsc::error::TrySendError::Closed(q) => q,
        })
    }

    /// Queues the start, waiting for room; hands the order back when the queue is stopped.
    pub async fn put(&self, queued: Queued) -> Result<(), Queued> {
        self.tx.send(queued).await.map_err(|e| e.0)
    }

    /// Orders waiting to be started.
    pub fn len(&self) -> usize {
        self.tx.max_capacity() - self.tx.capacity()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl StartQueueTask {
    /// Stops starting. The starts in flight are abandoned (each either reached the engine or
    /// not; both are safe) and the orders still queued wait for the next start of the service.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

async fn run(
    workflow: Arc<dyn WorkflowPort>,
    settings: StartQueueSettings,
    mut rx: mpsc::Receiver<Queued>,
    mut stopped: oneshot::Receiver<()>,
) {
    let in_flight = settings.in_flight.max(1);
    let mut starting = JoinSet::new();
    loop {
        tokio::select! {
            biased;
            _ = &mut stopped => break,
            Some(_) = starting.join_next(), if !starting.is_empty() => {}
            next = rx.recv(), if starting.len() < in_flight => match next {
                Some(queued) => {
                    let span = tracing::info_span!("start", order_id = %queued.order_id);
                    starting.spawn(start(workflow.clone(), settings, queued).instrument(span));
                }
                None => break,
            },
        }
    }
    starting.shutdown().await;
    rx.close();
    let left = rx.len();
    if left > 0 {
        tracing::info!(
            orders = left,
            "start queue stopped; its orders are started at the next start of the service"
        );
    }
}

/// Starts one order's execution, trying again after transient failures until the queue stops.
async fn start(workflow: Arc<dyn WorkflowPort>, settings: StartQueueSettings, queued: Queued) {
    let input: Value = match serde_json::from_str(&queued.input) {
        Ok(input) => input,
        Err(e) => {
            tracing::error!(error = %e, "a queued saga input is not JSON; the order is not started");
            return;
        }
    };
    let mut wait = settings.retry_from;
    loop {
        match workflow
            .start_execution(queued.order_id.as_str(), &input)
            .await
        {
            // Another input: the order's execution, started before the settings changed.
            Ok(_) | Err(WorkflowError::ExecutionAlreadyExists(_)) => return,
            Err(e) if e.is_transient() => {
                tracing::warn!(error = %e, retry_in = ?wait, "cannot start the order's execution yet");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(settings.retry_up_to);
            }
            Err(e) => {
                tracing::error!(
                    error = %e,
                    "cannot start the order's execution; the next start of the service, or a \
                     retry of its POST, tries again"
                );
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_trait::async_trait;
    use std::sync::Mutex;
    use workflow::{
        ExecutionInfo, HistoryPage, RedriveOutcome, RunningPage, StartedExecution, TaskHandle,
    };

    /// A workflow that records the starts it is asked for, failing the first `unavailable`
    /// of them transiently.
    #[derive(Default)]
    struct Starts {
        unavailable: Mutex<usize>,
        started: Mutex<Vec<String>>,
    }

    #[async_trait]
    impl WorkflowPort for Starts {
        fn execution_arn(&self, name: &str) -> String {
            format!("arn:{name}")
        }
        async fn start_execution(
            &self,
            name: &str,
            _input: &Value,
        ) -> Result<StartedExecution, WorkflowError> {
            {
                let mut left = self.unavailable.lock().unwrap();
                if *left > 0 {
                    *left -= 1;
                    return Err(WorkflowError::Unavailable("busy".into()));
                }
            }
            self.started.lock().unwrap().push(name.to_owned());
            Ok(StartedExecution {
                execution_arn: self.execution_arn(name),
                already_started: false,
            })
        }
        async fn describe_execution(&self, _: &str) -> Result<ExecutionInfo, WorkflowError> {
            unimplemented!()
        }
        async fn list_running_executions(
            &self,
            _: Option<String>,
        ) -> Result<RunningPage, WorkflowError> {
            unimplemented!()
        }
        async fn get_execution_history(
            &self,
            _: &str,
            _: Option<String>,
            _: u32,
        ) -> Result<HistoryPage, WorkflowError> {
            unimplemented!()
        }
        async fn stop_execution(&self, _: &str, _: &str, _: &str) -> Result<(), WorkflowError> {
            unimplemented!()
        }
        async fn redrive_execution(&self, _: &str) -> Result<RedriveOutcome, WorkflowError> {
            unimplemented!()
        }
        async fn get_activity_task(
            &self,
            _: &str,
            _: &str,
            _: Duration,
        ) -> Result<Option<TaskHandle>, WorkflowError> {
            unimplemented!()
        }
        async fn send_task_success(&self, _: &str, _: &Value) -> Result<(), WorkflowError> {
            unimplemented!()
        }
        async fn send_task_failure(&self, _: &str, _: &str, _: &str) -> Result<(), WorkflowError> {
            unimplemented!()
        }
        async fn send_task_heartbeat(&self, _: &str) -> Result<(), WorkflowError> {
            unimplemented!()
        }
    }

    fn queued(id: &str) -> Queued {
        Queued::new(
            OrderId::parse(id).unwrap(),
            &serde_json::json!({ "orderId": id }),
        )
    }

    fn fast() -> StartQueueSettings {
        StartQueueSettings {
            capacity: 2,
            in_flight: 1,
            retry_from: Duration::from_millis(1),
            retry_up_to: Duration::from_millis(4),
        }
    }

    async fn until_started(starts: &Starts, n: usize) -> Vec<String> {
        for _ in 0..1000 {
            let started = starts.started.lock().unwrap().clone();
            if started.len() >= n {
                return started;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("not started: {:?}", starts.started.lock().unwrap());
    }

    #[tokio::test]
    async fn queued_orders_are_started_and_transient_failures_are_retried() {
        let starts = Arc::new(Starts {
            unavailable: Mutex::new(3),
            ..Starts::default()
        });
        let (queue, task) = StartQueue::spawn(starts.clone(), fast());
        queue.offer(queued("o-1")).unwrap();
        queue.put(queued("o-2")).await.unwrap();
        assert_eq!(until_started(&starts, 2).await, ["o-1", "o-2"]);
        task.stop().await;
    }

    #[tokio::test]
    async fn a_full_or_stopped_queue_hands_the_order_back() {
        let starts = Arc::new(Starts {
            // Holds the one start in flight back for a while.
            unavailable: Mutex::new(usize::MAX),
            ..Starts::default()
        });
        let (queue, task) = StartQueue::spawn(starts.clone(), fast());
        queue.offer(queued("o-1")).unwrap();
        // Once o-1 is taken, two more fill the queue and a fourth is handed back.
        let mut handed_back = None;
        for i in 2..10 {
            if let Err(q) = queue.offer(queued(&format!("o-{i}"))) {
                handed_back = Some(q);
                break;
            }
        }
        assert!(handed_back.is_some(), "a queue of 2 took 8 orders");
        assert_eq!(queue.len(), 2);
        task.stop().await;
        assert_eq!(queue.offer(queued("o-late")), Err(queued("o-late")));
        assert!(starts.started.lock().unwrap().is_empty());
    }
}
