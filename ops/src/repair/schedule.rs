//! The repair loop of `serve`: a pass soon after the start, then one every interval, each only
//! while this replica holds the repair [`Lease`] (renewed during the pass; a pass whose lease
//! is lost stops where it is, which is safe: every repair is idempotent and the next holder's
//! pass finds what is left). The lease outlasts the interval, so the replica that holds it
//! keeps it from pass to pass, and another takes over only once it has stopped renewing it.
//!
//! Which books a pass reads ([`Plan`]): the first pass of a replica, and then one a day, the
//! whole books; the others only the orders of a recent window and what was made for them
//! ([`Scope::Since`]), so that a pass every minute costs what the window holds, not what the
//! years have piled up.

use super::Reconciler;
use crate::audit::Scope;
use chrono::Utc;
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

/// A pass over the whole books (every order, reservation and charge) grows with the data, and
/// one over a busy window with the load: the next pass waits at least this many times as long
/// as the last one took, so the loop never takes more than a tenth of the time whatever
/// `--repair-interval` says (at a million orders a whole pass takes seconds, and passes back
/// to back would slow the sagas).
const REST_PER_PASS: u32 = 9;

/// When the loop runs and what each pass reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// From the end of one pass to the start of the next (at least; see [`REST_PER_PASS`]).
    pub interval: Duration,
    /// How far back a frequent pass reads: longer than an order lives.
    pub window: Duration,
    /// How often a pass reads the whole books (the first one does).
    pub whole_every: Duration,
}

impl Plan {
    /// The books of a pass starting now: the whole ones when they are due, else the window's.
    fn scope(&self, now: Instant, whole_due: Instant) -> Scope {
        if now >= whole_due {
            return Scope::Whole;
        }
        let window = chrono::Duration::from_std(self.window).unwrap_or(chrono::Duration::MAX);
        Scope::Since(Utc::now().checked_sub_signed(window).unwrap_or_default())
    }
}

/// When the pass after one that started at `started` and ended at `ended` is due.
fn next_pass(started: Instant, ended: Instant, interval: Duration) -> Instant {
    let took = ended.saturating_duration_since(started);
    ended + interval.max(took * REST_PER_PASS)
}

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
    /// Spawns passes of `reconciler` as `plan` says under `lease` (of [`lease_duration`] of
    /// its interval).
    pub fn spawn(reconciler: Arc<Reconciler>, lease: Arc<dyn Lease>, plan: Plan) -> RepairLoop {
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(run(reconciler, lease, plan, stopped));
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
    plan: Plan,
    mut stop: oneshot::Receiver<()>,
) {
    let interval = plan.interval;
    let mut next = Instant::now() + interval.min(FIRST_PASS_AFTER);
    let mut whole_due = Instant::now();
    loop {
        tokio::select! {
            _ = &mut stop => break,
            () = tokio::time::sleep_until(next) => {}
        }
        let started = Instant::now();
        next = started + interval;
        let scope = plan.scope(started, whole_due);
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
            pass = reconciler.pass(scope) => match pass {
                Ok(pass) => {
                    if scope == Scope::Whole {
                        whole_due = started + plan.whole_every;
                    }
                    match pass.repairs.is_empty() {
                        true => tracing::debug!(
                            whole = scope == Scope::Whole,
                            orders = pass.audit.orders,
                            violations = pass.audit.violations.len(),
                            "repair pass: nothing repaired"
                        ),
                        false => tracing::info!(
                            whole = scope == Scope::Whole,
                            orders = pass.audit.orders,
                            violations = pass.audit.violations.len(),
                            repairs = pass.repairs.len(),
                            left = pass.left,
                            "repair pass done"
                        ),
                    }
                }
                Err(e) => tracing::warn!(error = %e, transient = e.is_transient(), "the repair pass could not read the books; the next one tries again"),
            },
        }
        next = next_pass(started, Instant::now(), interval);
        tracing::debug!(
            took_ms = started.elapsed().as_millis() as u64,
            next_in_s = next.saturating_duration_since(Instant::now()).as_secs(),
            "repair pass ended"
        );
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_that_takes_long_pushes_the_next_one_back_to_keep_the_loop_under_a_tenth() {
        let start = Instant::now();
        let minute = Duration::from_secs(60);
        // A quick pass: the interval rules.
        let quick = start + Duration::from_millis(200);
        assert_eq!(next_pass(start, quick, minute), quick + minute);
        // A 20-second pass: 180 s of rest before the next.
        let slow = start + Duration::from_secs(20);
        assert_eq!(
            next_pass(start, slow, minute),
            slow + Duration::from_secs(180)
        );
    }

    #[test]
    fn a_pass_reads_the_whole_books_when_due_and_the_window_otherwise() {
        let plan = Plan {
            interval: Duration::from_secs(60),
            window: Duration::from_secs(3600),
            whole_every: Duration::from_secs(24 * 3600),
        };
        let now = Instant::now();
        assert_eq!(plan.scope(now, now), Scope::Whole);
        assert_eq!(plan.scope(now + Duration::from_secs(1), now), Scope::Whole);
        let before = Utc::now();
        let Scope::Since(since) = plan.scope(now, now + Duration::from_secs(1)) else {
            panic!("a whole pass is not due yet: the window's books");
        };
        let hour = chrono::Duration::hours(1);
        assert!(
            since >= before - hour && since <= Utc::now() - hour,
            "{since}"
        );
    }
}
