//! Closed loop: C connections, each sending its next request as soon as the last is answered,
//! until a count of requests or a duration is reached: the server's maximum throughput, and
//! the latencies at it.

use super::{Conn, MakeRequest, OnAnswer, Outcome};
use anyhow::Result;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// When a closed-loop run ends: after `count` requests, after `duration`, whichever is first.
#[derive(Debug, Clone, Copy)]
pub struct Until {
    pub count: Option<u64>,
    pub duration: Option<Duration>,
}

impl Until {
    pub fn count(count: u64) -> Until {
        Until {
            count: Some(count),
            duration: None,
        }
    }

    pub fn duration(duration: Duration) -> Until {
        Until {
            count: None,
            duration: Some(duration),
        }
    }
}

/// Runs `connections` closed loops against `addr`.
pub async fn run(
    addr: SocketAddr,
    connections: usize,
    until: Until,
    make: MakeRequest,
    on_answer: Option<OnAnswer>,
) -> Result<Outcome> {
    let next = Arc::new(AtomicU64::new(0));
    let outcome = Arc::new(Mutex::new(Outcome::new()));
    let t0 = Instant::now();
    let deadline = until.duration.map(|d| t0 + d);
    let mut tasks = JoinSet::new();
    for _ in 0..connections.max(1) {
        let (next, outcome, make, on_answer) = (
            next.clone(),
            outcome.clone(),
            make.clone(),
            on_answer.clone(),
        );
        tasks.spawn(async move {
            let mut conn: Option<Conn> = None;
            loop {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                if until.count.is_some_and(|n| i >= n) {
                    break;
                }
                let spec = make(i);
                let sent = Instant::now();
                let answer = match conn.take().filter(Conn::usable) {
                    Some(mut c) => c.send(&spec).await.map(|a| (a, c)),
                    None => match Conn::open(addr).await {
                        Ok(mut c) => c.send(&spec).await.map(|a| (a, c)),
                        Err(e) => Err(e),
                    },
                };
                let done = Instant::now();
                let answer = answer.map(|(a, c)| {
                    conn = Some(c);
                    a
                });
                outcome.lock().unwrap().record(done - sent, &answer);
                if let (Some(on_answer), Ok((status, body))) = (&on_answer, &answer) {
                    on_answer(i, *status, body, done);
                }
                if answer.is_err() {
                    // A refused connection would otherwise spin: give the server a moment.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    let mut outcome = Arc::into_inner(outcome)
        .expect("every connection's task has ended")
        .into_inner()
        .unwrap();
    outcome.elapsed = t0.elapsed();
    Ok(outcome)
}
