//! Open loop: request `i` is *intended* at `t0 + i/R` and sent then on a free pooled connection
//! (a new one is opened, up to a cap, when none is free). Its latency is counted from the
//! intended time, not the send time, so a server that stalls shows its stall in every request
//! that should have gone out meanwhile (no coordinated omission).

use super::{Conn, MakeRequest, OnAnswer, Outcome};
use anyhow::Result;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use tokio::task::JoinSet;

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

/// Sends `count` requests made by `make` at `rate` per second to `addr`.
pub async fn run(
    addr: SocketAddr,
    rate: f64,
    count: u64,
    make: MakeRequest,
    on_answer: Option<OnAnswer>,
) -> Result<Outcome> {
    anyhow::ensure!(rate > 0.0, "an open loop needs a positive rate");
    let conns = Arc::new(Connections {
        idle: Mutex::new(Vec::new()),
        open: AtomicUsize::new(0),
        returned: Notify::new(),
    });
    let outcome = Arc::new(Mutex::new(Outcome::new()));
    let mut tasks = JoinSet::new();
    let t0 = Instant::now();
    for i in 0..count {
        let intended = t0 + offset(i, rate);
        tokio::time::sleep_until(intended.into()).await;
        // A free connection, a new one under the cap, or the next one returned. Waiting here
        // delays the send, never the latency's start: that stays `intended`.
        let conn = loop {
            if let Some(conn) = conns.idle.lock().unwrap().pop() {
                break Some(conn);
            }
            if conns.open.load(Ordering::SeqCst) < MAX_CONNECTIONS {
                conns.open.fetch_add(1, Ordering::SeqCst);
                break None;
            }
            conns.returned.notified().await;
        };
        let spec = make(i);
        let (conns, outcome, on_answer) = (conns.clone(), outcome.clone(), on_answer.clone());
        tasks.spawn(async move {
            let mut conn = match conn {
                Some(conn) => Ok(conn),
                None => Conn::open(addr).await,
            };
            let answer = match &mut conn {
                Ok(conn) => conn.send(&spec).await,
                Err(e) => Err(anyhow::anyhow!("{e:#}")),
            };
            let done = Instant::now();
            outcome
                .lock()
                .unwrap()
                .record(done.saturating_duration_since(intended), &answer);
            if let (Some(on_answer), Ok((status, body))) = (&on_answer, &answer) {
                on_answer(i, *status, body, done);
            }
            conns.put_back(conn.ok().filter(|_| answer.is_ok()));
        });
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
    let mut outcome = Arc::into_inner(outcome)
        .expect("every request task has ended")
        .into_inner()
        .unwrap();
    outcome.elapsed = t0.elapsed();
    Ok(outcome)
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

    #[test]
    fn a_run_sends_rate_times_duration_requests() {
        assert_eq!(count_for(500.0, Duration::from_secs(10)), 5000);
        assert_eq!(count_for(1000.0, Duration::from_millis(2500)), 2500);
    }
}
