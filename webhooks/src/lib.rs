//! Webhooks, signed as Standard Webhooks 1.0 specifies. The order store writes each status
//! change's event to its outbox in the change's own write (`store::WebhookRepository`); this
//! loop, held by one replica at a time under a lease, fans each event out into a delivery per
//! endpoint that wants it ([`dispatch`]), then attempts the due deliveries ([`send`]): any 2xx
//! delivers, a 410 disables the endpoint, anything else is tried again on [`RETRY_SCHEDULE`]
//! (about three days, with jitter; a 429 or 503's `Retry-After` is honoured), and an endpoint
//! whose every attempt failed for [`WebhookSettings::disable_after`] is disabled.
//!
//! At least once: a crash between an attempt and its record sends it again, with the same
//! `webhook-id`, which receivers deduplicate on.

mod dispatch;
pub mod guard;
mod send;
pub mod signing;

use std::sync::Arc;
use std::time::Duration;
use store::{Lease, WebhookRepository};
use telemetry::Metrics;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// The delays before each attempt after the first, which is at once: about three days in all.
pub const RETRY_SCHEDULE: [Duration; 9] = [
    Duration::from_secs(5),
    Duration::from_secs(5 * 60),
    Duration::from_secs(30 * 60),
    Duration::from_secs(2 * 3600),
    Duration::from_secs(5 * 3600),
    Duration::from_secs(10 * 3600),
    Duration::from_secs(10 * 3600),
    Duration::from_secs(24 * 3600),
    Duration::from_secs(24 * 3600),
];

/// How long one attempt may take, connection to the end of the answer's head. Not a setting:
/// a receiver is expected to answer at once and do its work after (Standard Webhooks' advice),
/// so a longer wait would only hold a connection open for a receiver that is not doing so.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(15);

/// How webhooks are delivered (`serve`'s `--webhook-*` flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookSettings {
    /// The delays before each retry ([`RETRY_SCHEDULE`] by default).
    pub retries: Vec<Duration>,
    /// Whether endpoints may be on loopback, private and link-local addresses ([`guard`]).
    pub allow_private: bool,
    /// An endpoint whose every attempt failed for this long is disabled.
    pub disable_after: Duration,
    /// How long a rotated-out secret keeps signing beside the new one.
    pub rotation_overlap: Duration,
    /// How often the outbox and the due deliveries are read while nothing happens.
    pub poll: Duration,
}

impl Default for WebhookSettings {
    fn default() -> Self {
        WebhookSettings {
            retries: RETRY_SCHEDULE.to_vec(),
            allow_private: false,
            disable_after: Duration::from_secs(5 * 24 * 3600),
            rotation_overlap: Duration::from_secs(24 * 3600),
            poll: Duration::from_millis(200),
        }
    }
}

/// How often the holder renews the lease (its duration is several times this), and a replica
/// without it tries to take it.
pub const RENEW_EVERY: Duration = Duration::from_secs(2);

/// The longest pause between two idle passes.
pub const IDLE_POLL: Duration = Duration::from_secs(2);

/// How often the loop forgets old events and finished deliveries.
const PRUNE_EVERY: Duration = Duration::from_secs(600);

/// The running loop.
pub struct Webhooks {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl Webhooks {
    pub fn spawn(
        repo: Arc<dyn WebhookRepository>,
        lease: Arc<dyn Lease>,
        settings: WebhookSettings,
        metrics: Metrics,
    ) -> Webhooks {
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(run(repo, lease, settings, metrics, stopped));
        Webhooks { stop, task }
    }

    /// Stops the loop (attempts in flight are abandoned: sent again later) and gives the
    /// lease up.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

async fn run(
    repo: Arc<dyn WebhookRepository>,
    lease: Arc<dyn Lease>,
    settings: WebhookSettings,
    metrics: Metrics,
    mut stop: oneshot::Receiver<()>,
) {
    let client = match send::client(&settings) {
        Ok(client) => client,
        Err(e) => {
            tracing::error!(error = %e, "webhooks: cannot build the HTTP client; none are sent");
            return;
        }
    };
    let mut next_prune = Instant::now();
    let (mut held, mut renewed) = (false, Instant::now());
    let mut idle = settings.poll / 2;
    loop {
        if !held || renewed.elapsed() >= RENEW_EVERY {
            renewed = Instant::now();
            held = lease.hold().await.unwrap_or_else(|e| {
                tracing::warn!(error = %e, "webhooks: cannot take or renew the lease");
                false
            });
        }
        if !held {
            // Another replica delivers: look again now and then.
            tokio::select! {
                _ = &mut stop => break,
                () = tokio::time::sleep(RENEW_EVERY) => continue,
            }
        }
        let work = async {
            let fanned = dispatch::pass(repo.as_ref()).await?;
            let sent = send::pass(repo.as_ref(), &client, &settings, &metrics).await?;
            if Instant::now() >= next_prune {
                next_prune = Instant::now() + PRUNE_EVERY;
                let before = chrono::Utc::now() - store::EVENT_RETENTION;
                let pruned = repo.prune(before, 5_000).await?;
                tracing::debug!(pruned, "webhooks: old events and deliveries pruned");
            }
            Ok::<bool, store::StoreError>(fanned + sent > 0)
        };
        let busy = tokio::select! {
            _ = &mut stop => break,
            done = work => done.unwrap_or_else(|e| {
                tracing::warn!(error = %e, "webhooks: a pass failed; trying again");
                false
            }),
        };
        // Idle: look again after the poll interval, doubled at each idle pass up to
        // [`IDLE_POLL`] (the AWS backend's reads cost per query).
        idle = if busy {
            settings.poll / 2
        } else {
            (idle * 2).min(IDLE_POLL.max(settings.poll))
        };
        if !busy {
            tokio::select! {
                _ = &mut stop => break,
                () = tokio::time::sleep(idle) => {}
            }
        }
    }
    if let Err(e) = lease.release().await {
        tracing::warn!(error = %e, "webhooks: cannot give the lease up");
    }
}
