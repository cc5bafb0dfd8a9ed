//! saga: small orders end to end. N orders are submitted (open loop at a rate, or closed loop
//! as fast as it goes); completed sagas/s is N over the time from the first POST until all N
//! have finished (by `fulfillment_sagas_finished_total`, read every 100 ms, or by status
//! sweeps where the metric is absent). Every 20th order is polled every 5 ms from its 202 for
//! the 202-to-COMPLETED latency.

use super::{Ctx, Figure, Report, Window};
use crate::load::{OnAnswer, Pool, Spec, closed, open};
use crate::service::{Service, is_terminal, order_id, order_ids, place_orders, tally};
use crate::stats::{Latencies, ms};
use anyhow::Result;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

const PRICE_CENTS: u64 = 1500;
/// One order in this many is followed from its 202 to its end.
const SAMPLE_EVERY: u64 = 20;
const SAMPLE_POLL: Duration = Duration::from_millis(5);
/// Connections the sampled orders' polls share. Few: with 1/20 of the orders in flight each
/// polled every 5 ms, unbounded polling would cost the server more than the sagas measured
/// (a poll then waits for a free connection, which can only make a latency look longer).
const SAMPLE_CONNECTIONS: usize = 8;

pub async fn run(ctx: &Ctx) -> Result<Report> {
    let s = &ctx.sizes;
    let n = s.saga_orders;
    let mut service = Service::start(ctx.backend, &[], 1_000_000_000).await?;
    let addr = service.addr();
    let window = Window::open(&service).await;

    let latencies = Arc::new(Mutex::new(Latencies::new()));
    let pollers: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
    let pool = Pool::new(addr, SAMPLE_CONNECTIONS);
    let deadline = ctx.deadline();
    let on_answer: OnAnswer = {
        let (latencies, pollers, run) = (latencies.clone(), pollers.clone(), ctx.run.clone());
        Arc::new(move |i, status, _, answered| {
            if status != 202 || i % SAMPLE_EVERY != 0 {
                return;
            }
            let spec = Spec::get(format!("/orders/{}/status", order_id(&run, "s", i)));
            let (latencies, pool) = (latencies.clone(), pool.clone());
            pollers.lock().unwrap().push(tokio::spawn(async move {
                while Instant::now() < deadline {
                    let status = pool.json(&spec).await.ok();
                    let status = status.as_ref().and_then(|v| v["status"].as_str());
                    if status == Some("COMPLETED") {
                        latencies.lock().unwrap().record(answered.elapsed());
                        return;
                    }
                    if status.is_some_and(is_terminal) {
                        return;
                    }
                    tokio::time::sleep(SAMPLE_POLL).await;
                }
            }));
        })
    };

    let make = place_orders(&ctx.run, "s", PRICE_CENTS);
    let t0 = Instant::now();
    let (submitted, how) = match s.saga_rate {
        Some(rate) => (
            open::run(addr, rate, n, make, Some(on_answer)).await?,
            format!("open loop at {rate} req/s"),
        ),
        None => (
            closed::run(
                addr,
                s.connections,
                closed::Until::count(n),
                make,
                Some(on_answer),
            )
            .await?,
            format!("closed loop, {} connections", s.connections),
        ),
    };
    submitted.require_all(202, "submitting the orders")?;
    eprintln!(
        "bench saga: {n} orders submitted in {:.2} s ({how}); waiting for them to finish",
        t0.elapsed().as_secs_f64()
    );
    let ids = order_ids(&ctx.run, "s", n);
    let finished = service
        .await_all(&ids, is_terminal, Some(n), deadline)
        .await?;
    let elapsed = finished - t0;
    let mut engine_figures = Vec::new();
    let counters = window.close(&service, ctx, &mut engine_figures).await;
    let handles = std::mem::take(&mut *pollers.lock().unwrap());
    for handle in handles {
        let _ = handle.await;
    }
    let statuses = service.statuses(&ids).await?;
    service.stop().await?;
    anyhow::ensure!(
        statuses.iter().all(|s| s == "COMPLETED"),
        "not every saga COMPLETED: {}",
        tally(&statuses)
    );

    let rate = n as f64 / elapsed.as_secs_f64();
    let l = latencies.lock().unwrap().clone();
    let mut figures = vec![
        Figure::rate("completed sagas/s", rate, "/s"),
        Figure::millis("202-to-COMPLETED p50", l.quantile(0.5)),
        Figure::millis("202-to-COMPLETED p99", l.quantile(0.99)),
    ];
    figures.extend(engine_figures);
    Ok(Report {
        summary: format!(
            "{rate:.0} sagas/s, 202-to-COMPLETED p50 {} p99 {} ({n} orders in {:.2} s, {how}; \
             {} sampled){counters}",
            ms(l.quantile(0.5)),
            ms(l.quantile(0.99)),
            elapsed.as_secs_f64(),
            l.len()
        ),
        figures,
    })
}
