//! The repair loop of `serve`: a pass soon after the start, then one every interval, each only
//! while this replica holds the repair [`Lease`] (renewed during the pass; a pass whose lease
//! is lost stops where it is, which is safe: every repair is idempotent and the next holder's
//! pass finds what is left). The lease outlasts the interval, so the replica that holds it
//! keeps it from pass to pass, and another takes over only once it has stopped renewing it.

use super::Reconciler;
use std::sync::Arc;
use std::time::Duration;
use store::Lease;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// How often a held lease is renewed during a pass.
const RENEW_EVERY: Duration = Duration::from_secs(10);

/// The first pass comes this long after the start at most (sooner with a shorter interval).
const FIRST_PASS_AFTER: Duration = Duration::from_secs(5);

/// How long the repair lease lasts from each renewal, for passes `interval` apart: past the
/// interval, so its holder renews it at its next pass before another replica may take it.
pub fn lease_duration(interval: Duration) -> Duration {
    interval + 3 * RENEW_EVERY
}

/// The running loop, held by the service to stop it.
pub struct RepairLoop {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl RepairLoop {
    /// Spawns passes of `reconciler` every `interval` under `lease` (of [`lease_duration`]).
    pub fn spawn(
        reconciler: Arc<Reconciler>,
        lease: Arc<dyn Lease>,
        interval: Duration,
    ) -> RepairLoop {
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(run(reconciler, lease, interval, stopped));
        RepairLoop { stop, task }
    }

    /// Stops the loop (a pass in flight is abandoned) and gives the lease up, so another
    /// replica's next pass need not wait for it to expire.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.task.await;
    }
}

async fn run(
    reconciler: Arc<Reconciler>,
    lease: Arc<dyn Lease>,
    interval: Duration,
    mut stop: oneshot::Receiver<()>,
) {
    let mut next = Instant::now() + interval.min(FIRST_PASS_AFTER);
    loop {
        tokio::select! {
            _ = &mut stop => break,
            () = tokio::time::sleep_until(next) => {}
        }
        next = Instant::now() + interval;
        match lease.hold().await {
            Ok(true) => {}
            Ok(false) => {
                tracing::debug!("another replica holds the repair lease; no pass here");
                continue;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot take the repair lease; no pass this time");
                continue;
            }
        }
        tokio::select! {
            _ = &mut stop => break,
            () = keep(lease.as_ref(), lease_duration(interval)) => {
                tracing::warn!("the repair lease was lost during a pass; the pass stops here (its repairs so far stand)");
            }
            pass = reconciler.pass() => match pass {
                Ok(pass) if pass.repairs.is_empty() => tracing::debug!(
                    violations = pass.audit.violations.len(),
                    "repair pass: nothing repaired"
                ),
                Ok(pass) => tracing::info!(
                    violations = pass.audit.violations.len(),
                    repairs = pass.repairs.len(),
                    left = pass.left,
                    "repair pass done"
                ),
                Err(e) => tracing::warn!(error = %e, transient = e.is_transient(), "the repair pass could not read the books; the next one tries again"),
            },
        }
    }
    if let Err(e) = lease.release().await {
        tracing::warn!(error = %e, "cannot give the repair lease up; another replica takes it once it expires");
    }
}

/// Renews the lease until it is lost: refused (another holder took it) or not renewed in
/// time for a while (errors), before it could have expired.
async fn keep(lease: &dyn Lease, duration: Duration) {
    let mut renewed = Instant::now();
    loop {
        tokio::time::sleep(RENEW_EVERY).await;
        match lease.hold().await {
            Ok(true) => renewed = Instant::now(),
            Ok(false) => return,
            Err(e) => {
                tracing::warn!(error = %e, "cannot renew the repair lease");
                if renewed.elapsed() + RENEW_EVERY >= duration {
                    return;
                }
            }
        }
    }
}
