//! Open loop: request `i` is *intended* at `t0 + i/R` and sent then on a free pooled connection
//! (a new one is opened, up to a cap, when none is free). Its latency is counted from the
//! intended time, not the send time, so a server that stalls shows its stall in every request
//! that should have gone out meanwhile (no coordinated omission).
//!
//! The whole client of a run (its schedule, its connections, its requests and answers) runs on
//! a thread of its own, the pacer, in a runtime of its own, woken by a timerfd to the
//! microsecond. Tokio's timers fire on whole milliseconds: sleeping on them sent requests 1.4 ms
//! late at the median (3.6 ms at p99) at 1,000 req/s. And on two cores shared with the service
//! under test, a request handed to the bench's main runtime waited for one of its workers to
//! be scheduled, and its answer waited again to be read (another 1.6 – 1.8 ms at p99): the
//! generator's own delays, counted in every latency. [`Outcome::lateness`] reports what is
//! left of them on the way out.

use super::{Conn, MakeRequest, OnAnswer, Outcome, Spec};
use anyhow::Result;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// The most connections an open-loop run opens.
pub const MAX_CONNECTIONS: usize = 512;

/// When request `i` is intended, after the run's start, at `rate` requests per second.
pub fn offset(i: u64, rate: f64) -> Duration {
    Duration::from_secs_f64(i as f64 / rate)
}

/// How many requests a run of `duration` at `rate` sends.
pub fn count_for(rate: f64, duration: Duration) -> u64 {
    (rate * duration.as_secs_f64()).round() as u64
}

/// The connections of one run: idle ones, how many are open, a wake-up when one is returned.
struct Connections {
    idle: Mutex<Vec<Conn>>,
    open: AtomicUsize,
    returned: Notify,
}

impl Connections {
    /// A free connection, or `None` when a new one may be opened (under the cap); waits for
    /// one to be returned when neither.
    async fn take(&self) -> Option<Conn> {
        loop {
            if let Some(conn) = self.idle.lock().unwrap().pop() {
                return Some(conn);
            }
            let open = self.open.load(Ordering::SeqCst);
            if open < MAX_CONNECTIONS {
                if self
                    .open
                    .compare_exchange(open, open + 1, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
                {
                    return None;
                }
                continue;
            }
            self.returned.notified().await;
        }
    }

    fn put_back(&self, conn: Option<Conn>) {
        match conn {
            Some(conn) if conn.usable() => self.idle.lock().unwrap().push(conn),
            // A broken connection frees its place under the cap.
            _ => {
                self.open.fetch_sub(1, Ordering::SeqCst);
            }
        }
        self.returned.notify_one();
    }
}

/// The nice value the pacer asks for: on two cores shared with the service under test, a
/// thread at the service's own priority waits behind it for a CPU (3 ms at p99 at 1,000 req/s
/// with the sagas running), and that wait, counted in every latency, is the generator's, not
/// the service's. Lowering a nice value needs privileges: without them the pacer keeps the
/// default, and [`Outcome::lateness`] shows what that costs.
const PACER_NICE: i32 = -10;

/// Runs the calling thread (the pacer) ahead of the service's threads, when allowed.
fn ahead_of_the_service() {
    #[cfg(target_os = "linux")]
    // SAFETY: plain system calls on the calling thread, with no pointers.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, PACER_NICE);
    }
}

/// What every request of a run shares.
struct Shared {
    addr: SocketAddr,
    conns: Connections,
    outcome: Mutex<Outcome>,
    on_answer: Option<OnAnswer>,
    /// Requests handed to the runtime and not yet answered or failed.
    pending: AtomicU64,
    /// Told when `pending` drops to zero.
    settled: Notify,
}

/// Counts one pending request down when its task ends, however it ends.
struct Pending(Arc<Shared>);

impl Drop for Pending {
    fn drop(&mut self) {
        if self.0.pending.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.settled.notify_one();
        }
    }
}

/// Sends `count` requests made by `make` at `rate` per second to `addr`, from the pacer thread.
pub async fn run(
    addr: SocketAddr,
    rate: f64,
    count: u64,
    make: MakeRequest,
    on_answer: Option<OnAnswer>,
) -> Result<Outcome> {
    anyhow::ensure!(rate > 0.0, "an open loop needs a positive rate");
    let plan = Plan {
        addr,
        rate,
        count,
        make,
        on_answer,
    };
    let (finished, outcome) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("bench-pacer".into())
        .spawn(move || {
            ahead_of_the_service();
            let outcome = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(anyhow::Error::from)
                .and_then(|rt| rt.block_on(pace(plan)));
            let _ = finished.send(outcome);
        })?;
    outcome
        .await
        .map_err(|_| anyhow::anyhow!("the open loop's pacer ended early (a panic)"))?
}

/// What an open loop is asked to send.
struct Plan {
    addr: SocketAddr,
    rate: f64,
    count: u64,
    make: MakeRequest,
    on_answer: Option<OnAnswer>,
}

/// The pacer's run: each request handed to its own task at its intended time, then every
/// answer awaited.
async fn pace(plan: Plan) -> Result<Outcome> {
    let Plan {
        addr,
        rate,
        count,
        make,
        on_answer,
    } = plan;
    let shared = Arc::new(Shared {
        addr,
        conns: Connections {
            idle: Mutex::new(Vec::new()),
            open: AtomicUsize::new(0),
            returned: Notify::new(),
        },
        outcome: Mutex::new(Outcome::new()),
        on_answer,
        pending: AtomicU64::new(0),
        settled: Notify::new(),
    });
    let clock = Clock::new()?;
    let t0 = Instant::now();
    for i in 0..count {
        let intended = t0 + offset(i, rate);
        clock.until(intended).await?;
        shared.pending.fetch_add(1, Ordering::SeqCst);
        tokio::spawn(send(Pending(shared.clone()), i, make(i), intended));
    }
    loop {
        let settled = shared.settled.notified();
        if shared.pending.load(Ordering::SeqCst) == 0 {
            break;
        }
        settled.await;
    }
    // Every request has been recorded; the last task may still hold its reference a moment.
    let mut outcome = std::mem::replace(&mut *shared.outcome.lock().unwrap(), Outcome::new());
    outcome.elapsed = t0.elapsed();
    Ok(outcome)
}

/// The pacer's timer: a timerfd in its runtime's epoll, which wakes it at the time asked, where
/// Tokio's own timers round up to the next whole millisecond.
#[cfg(target_os = "linux")]
struct Clock(tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>);

#[cfg(target_os = "linux")]
impl Clock {
    fn new() -> Result<Clock> {
        use rustix::time::{TimerfdClockId, TimerfdFlags, timerfd_create};
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )?;
        // SAFETY: an `OwnedFd` stays open, and is the same descriptor, until it is dropped
        // with the `AsyncFd` that owns it.
        let fd = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
        };
        Ok(Clock(fd.map_err(|e| e.into_parts().1)?))
    }

    /// Returns at `at`, or at once (after letting the runtime's other tasks run) when it has
    /// passed.
    async fn until(&self, at: Instant) -> Result<()> {
        use rustix::time::{Itimerspec, TimerfdTimerFlags, Timespec, timerfd_settime};
        let wait = at.saturating_duration_since(Instant::now());
        if wait.is_zero() {
            tokio::task::yield_now().await;
            return Ok(());
        }
        let at = Itimerspec {
            it_interval: Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: Timespec {
                tv_sec: wait.as_secs() as _,
                tv_nsec: wait.subsec_nanos() as _,
            },
        };
        timerfd_settime(self.0.get_ref(), TimerfdTimerFlags::empty(), &at)?;
        loop {
            let mut ready = self.0.readable().await?;
            let mut expirations = [0u8; 8];
            match ready.try_io(|fd| Ok(rustix::io::read(fd.get_ref(), &mut expirations)?)) {
                Ok(read) => return Ok(read.map(drop)?),
                // Woken without an expiry to read: the readiness is cleared; wait again.
                Err(_would_block) => continue,
            }
        }
    }
}

/// Elsewhere, Tokio's timer (whole milliseconds; the lateness shows it).
#[cfg(not(target_os = "linux"))]
struct Clock;

#[cfg(not(target_os = "linux"))]
impl Clock {
    fn new() -> Result<Clock> {
        Ok(Clock)
    }

    async fn until(&self, at: Instant) -> Result<()> {
        tokio::time::sleep_until(at.into()).await;
        Ok(())
    }
}

/// Sends request `i`, intended at `intended`, on a free connection of the run's, and records
/// its latency (from `intended`) and its lateness.
async fn send(pending: Pending, i: u64, spec: Spec, intended: Instant) {
    let shared = &pending.0;
    // Waiting for a connection delays the send, never the latency's start: that stays
    // `intended`.
    let mut conn = match shared.conns.take().await {
        Some(conn) => Ok(conn),
        None => Conn::open(shared.addr).await,
    };
    let sent = Instant::now();
    let answer = match &mut conn {
        Ok(conn) => conn.send(&spec).await,
        Err(e) => Err(anyhow::anyhow!("{e:#}")),
    };
    let done = Instant::now();
    {
        let mut outcome = shared.outcome.lock().unwrap();
        outcome.record(done.saturating_duration_since(intended), &answer);
        outcome
            .lateness
            .record(sent.saturating_duration_since(intended));
    }
    if let (Some(on_answer), Ok((status, body))) = (&shared.on_answer, &answer) {
        on_answer(i, *status, body, done);
    }
    shared.conns.put_back(conn.ok().filter(|_| answer.is_ok()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_spaced_evenly_at_the_rate() {
        assert_eq!(offset(0, 1000.0), Duration::ZERO);
        assert_eq!(offset(1, 1000.0), Duration::from_millis(1));
        assert_eq!(offset(500, 1000.0), Duration::from_millis(500));
        assert_eq!(offset(3, 2.0), Duration::from_millis(1500));
    }

    #[test]
    fn the_schedule_does_not_drift_over_a_long_run() {
        // 1/3 ms is not exact in binary; computing each time from the index keeps request
        // 3,000,000 at 1000 s rather than accumulating the rounding of 3 million additions.
        let late = offset(3_000_000, 3000.0);
        assert!(late.abs_diff(Duration::from_secs(1000)) < Duration::from_micros(1));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_pacers_clock_never_wakes_before_the_time_asked() {
        let clock = Clock::new().unwrap();
        let start = Instant::now();
        for i in 1..=50u64 {
            let at = start + Duration::from_micros(i * 137);
            clock.until(at).await.unwrap();
            assert!(Instant::now() >= at, "woke before request {i}'s time");
        }
        // A time already past returns at once, without waiting for another expiry.
        clock.until(start).await.unwrap();
    }

    #[test]
    fn a_run_sends_rate_times_duration_requests() {
        assert_eq!(count_for(500.0, Duration::from_secs(10)), 5000);
        assert_eq!(count_for(1000.0, Duration::from_millis(2500)), 2500);
    }
}
