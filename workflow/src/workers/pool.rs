//! The worker pool: pollers per activity, each taking a slot of its activity's in-flight limit
//! before it polls, and a graceful stop that abandons no task.

use super::Step;
use super::task;
use crate::port::WorkflowPort;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;

/// How the pool polls, runs and reports.
#[derive(Debug, Clone)]
pub struct WorkerSettings {
    /// The name workers give when they poll (shown in the `ActivityStarted` history event).
    pub worker_name: String,
    /// How long one `GetActivityTask` long-polls. AWS holds a poll for at most 60 s. A stop
    /// waits for the polls in flight, so this also bounds how long a stop takes beyond the
    /// steps still running.
    pub poll_wait: Duration,
    /// Concurrent polls per activity (at most `max_in_flight` of them).
    pub pollers_per_activity: usize,
    /// The most tasks of one activity that are polled for or run at once.
    pub max_in_flight: usize,
    /// How often a running step's task is heartbeated; must be shorter than the Task's
    /// `HeartbeatSeconds` (20 s in the saga).
    pub heartbeat_interval: Duration,
    /// The first back-off after a transient error of the workflow service; it doubles up to
    /// `max_retry_backoff`, each pause lengthened by a random part of itself
    /// (`store::retry::pauses`), so workers that failed together do not try again together.
    pub retry_backoff: Duration,
    pub max_retry_backoff: Duration,
    /// How many times a step's answer is tried when the workflow service is unavailable.
    pub answer_attempts: u32,
    /// How long a stop waits for a poll in flight before abandoning it; `None`: it waits
    /// for the poll to end. Step Functions holds a poll up to 60 s, longer than orchestrators
    /// wait for a stop (ECS and Kubernetes: 30 s). A task handed to an abandoned poll is not
    /// lost: nobody heartbeats it, so its heartbeat lapses after every Task's `HeartbeatSeconds`
    /// and the definition's Retry on `States.HeartbeatTimeout` hands it out again. Steps already running
    /// always finish.
    pub abandon_polls_after: Option<Duration>,
}

impl Default for WorkerSettings {
    fn default() -> Self {
        WorkerSettings {
            worker_name: default_worker_name(),
            poll_wait: Duration::from_secs(5),
            pollers_per_activity: 2,
            max_in_flight: 16,
            heartbeat_interval: Duration::from_secs(10),
            retry_backoff: Duration::from_millis(200),
            max_retry_backoff: Duration::from_secs(5),
            answer_attempts: 5,
            abandon_polls_after: None,
        }
    }
}

/// `<hostname>-<pid>`, at most 80 characters (AWS's limit on a worker name).
fn default_worker_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "fulfillment".to_owned());
    // A hostname has at most 64 characters, so the pid always fits.
    format!("{host}-{}", std::process::id())
        .chars()
        .take(80)
        .collect()
}

/// A pool being put together: the steps it runs, by activity ARN, and its settings.
pub struct WorkerPool {
    port: Arc<dyn WorkflowPort>,
    settings: WorkerSettings,
    steps: Vec<(String, Arc<dyn Step>)>,
}

/// What every task of one activity needs.
pub(super) struct ActivityWorker {
    pub port: Arc<dyn WorkflowPort>,
    pub activity_arn: String,
    /// The activity's name (the last part of its ARN), for logs.
    pub activity: String,
    pub step: Arc<dyn Step>,
    pub settings: WorkerSettings,
}

impl WorkerPool {
    pub fn builder(port: Arc<dyn WorkflowPort>) -> WorkerPool {
        WorkerPool {
            port,
            settings: WorkerSettings::default(),
            steps: Vec::new(),
        }
    }

    pub fn settings(mut self, settings: WorkerSettings) -> WorkerPool {
        self.settings = settings;
        self
    }

    /// Runs `step` for every task of `activity_arn`.
    ///
    /// # Panics
    /// When a step is already registered for `activity_arn` (two steps for one activity would
    /// take each other's tasks).
    pub fn step(mut self, activity_arn: impl Into<String>, step: Arc<dyn Step>) -> WorkerPool {
        let activity_arn = activity_arn.into();
        assert!(
            self.steps.iter().all(|(arn, _)| *arn != activity_arn),
            "a step is already registered for {activity_arn}"
        );
        self.steps.push((activity_arn, step));
        self
    }

    /// Starts polling. Must be called within a Tokio runtime. Dropping the [`RunningPool`]
    /// without [`RunningPool::stop`] stops polling the same way but waits for nothing.
    pub fn start(self) -> RunningPool {
        let mut settings = self.settings;
        settings.max_in_flight = settings.max_in_flight.max(1);
        settings.pollers_per_activity = settings
            .pollers_per_activity
            .clamp(1, settings.max_in_flight);
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut pollers = Vec::new();
        let mut slots = Vec::new();
        for (activity_arn, step) in self.steps {
            let activity = activity_arn
                .rsplit(':')
                .next()
                .unwrap_or(&activity_arn)
                .to_owned();
            let worker = Arc::new(ActivityWorker {
                port: self.port.clone(),
                activity_arn,
                activity,
                step,
                settings: settings.clone(),
            });
            let activity_slots = Arc::new(Semaphore::new(settings.max_in_flight));
            for _ in 0..settings.pollers_per_activity {
                pollers.push(tokio::spawn(poll_loop(
                    worker.clone(),
                    activity_slots.clone(),
                    stop_rx.clone(),
                )));
            }
            slots.push(activity_slots);
        }
        RunningPool {
            stop_tx,
            pollers,
            slots,
            max_in_flight: settings.max_in_flight as u32,
        }
    }
}

/// A started pool. [`RunningPool::stop`] ends it gracefully.
pub struct RunningPool {
    stop_tx: watch::Sender<bool>,
    pollers: Vec<JoinHandle<()>>,
    /// Each activity's in-flight slots: all free again means no step of it is running.
    slots: Vec<Arc<Semaphore>>,
    max_in_flight: u32,
}

impl RunningPool {
    /// Stops starting polls, lets the polls in flight end (within `poll_wait`) and runs any
    /// task they bring, then waits until every step has finished and been answered.
    pub async fn stop(self) {
        let _ = self.stop_tx.send(true);
        for poller in self.pollers {
            if let Err(e) = poller.await {
                tracing::error!(error = %e, "an activity poller ended abnormally");
            }
        }
        // The pollers are gone, so every slot still taken belongs to a running step; it is
        // given back when the step has been answered.
        for slots in &self.slots {
            let _all = slots
                .acquire_many(self.max_in_flight)
                .await
                .expect("the pool never closes its semaphores");
        }
        tracing::info!("activity workers stopped");
    }
}

/// One poller: takes a slot, polls, hands a task with its slot to a new task runner; repeats
/// until stopped. A poll in flight at a stop is awaited, or abandoned after
/// `abandon_polls_after`.
async fn poll_loop(
    worker: Arc<ActivityWorker>,
    slots: Arc<Semaphore>,
    mut stop: watch::Receiver<bool>,
) {
    let settings = &worker.settings;
    let fresh = || store::retry::pauses(settings.retry_backoff, settings.max_retry_backoff, None);
    let mut pauses = fresh();
    loop {
        let slot = tokio::select! {
            biased;
            _ = stop.wait_for(|stopped| *stopped) => break,
            slot = slots.clone().acquire_owned() => slot.expect("the pool never closes its semaphores"),
        };
        if *stop.borrow() {
            break;
        }
        let poll = worker.port.get_activity_task(
            &worker.activity_arn,
            &settings.worker_name,
            settings.poll_wait,
        );
        let abandon = async {
            let _ = stop.wait_for(|stopped| *stopped).await;
            match settings.abandon_polls_after {
                Some(grace) => tokio::time::sleep(grace).await,
                None => std::future::pending().await,
            }
        };
        let polled = tokio::select! {
            polled = poll => polled,
            () = abandon => {
                tracing::info!(activity = %worker.activity, "stopping: abandoned a poll in flight");
                break;
            }
        };
        let error = match polled {
            Ok(Some(handle)) => {
                pauses = fresh();
                tokio::spawn(task::run(worker.clone(), handle, slot));
                continue;
            }
            Ok(None) => {
                pauses = fresh();
                continue;
            }
            Err(e) => e,
        };
        drop(slot);
        let delay = pauses.next().unwrap_or(settings.max_retry_backoff);
        if error.is_transient() {
            tracing::warn!(activity = %worker.activity, error = %error, ?delay, "polling failed; retrying");
        } else {
            tracing::error!(activity = %worker.activity, error = %error, ?delay, "polling failed; retrying");
        }
        tokio::select! {
            biased;
            _ = stop.wait_for(|stopped| *stopped) => break,
            _ = tokio::time::sleep(delay) => {}
        }
    }
}
