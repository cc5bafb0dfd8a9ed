//! soak: many small orders through one service with a short retention, so pruning runs while
//! the orders flow, in windows of W orders. Orders go in as a steady stream, not a flood: chunks
//! of `CHUNK` (closed loop, 64 connections), each sent once no more than `IN_FLIGHT` orders are
//! unfinished, so the service runs at its saga rate with a bounded backlog (a flood of 100,000
//! at once measures a backlog, not the service). Each window reports completed sagas/s (W over
//! the window's first POST to its last saga finished), `POST /orders` p99 of its submissions,
//! and the bytes on disk (both SQLite files and their WALs). Speed and bytes per order should
//! not move as the orders pile up: the last window's figures are compared with the first's.
//! Ends with an audit of the whole store.

use super::{Ctx, Figure, Report};
use crate::load::closed;
use crate::metrics;
use crate::service::{PRICE_CENTS, Service, place_orders};
use crate::stats::{Latencies, mib, ms};
use anyhow::{Result, bail};
use std::time::{Duration, Instant};

/// Orders sent at once, and the most unfinished before the next chunk goes.
const CHUNK: u64 = 2_000;
const IN_FLIGHT: u64 = 4_000;

/// What `bench soak` runs.
#[derive(Debug, Clone)]
pub struct SoakSizes {
    pub orders: u64,
    pub window: u64,
    /// The service's `--retention` for the run (closed executions older are pruned).
    pub retention: Duration,
    /// The service's `--repair-window`: its repair loop runs as by default (a pass a minute,
    /// the whole books at the start and then daily), over the orders of this window.
    pub repair_window: Duration,
}

/// One window's figures.
struct Window {
    sagas_per_s: f64,
    p99: Duration,
    db_bytes: u64,
}

pub async fn run(ctx: &Ctx, sizes: &SoakSizes) -> Result<Report> {
    let (n, w) = (sizes.orders, sizes.window.clamp(1, sizes.orders.max(1)));
    let retention = format!("{}s", sizes.retention.as_secs().max(1));
    let repair_window = format!("{}s", sizes.repair_window.as_secs().max(60));
    let flags = ["--retention", &retention, "--repair-window", &repair_window];
    let mut service = Service::start(ctx.backend, &flags, 1_000_000_000).await?;
    let addr = service.addr();
    let make = place_orders(&ctx.run, "k", PRICE_CENTS);
    let mut windows: Vec<Window> = Vec::new();
    let mut done = 0u64;
    while done < n {
        let count = w.min(n - done);
        let first = done;
        let t0 = Instant::now();
        let mut latencies = Latencies::new();
        while done < first + count {
            let chunk = CHUNK.min(first + count - done);
            let from = done;
            let make = make.clone();
            let submitted = closed::run(
                addr,
                ctx.sizes.connections,
                closed::Until::count(chunk),
                std::sync::Arc::new(move |i| make(from + i)),
                None,
            )
            .await?;
            submitted.require_all(202, "submitting the orders")?;
            latencies.merge(&submitted.latencies);
            done += chunk;
            wait_finished(
                &service,
                done.saturating_sub(IN_FLIGHT - CHUNK),
                ctx.deadline(),
            )
            .await?;
        }
        let finished = wait_finished(&service, done, ctx.deadline()).await?;
        let window = Window {
            sagas_per_s: count as f64 / (finished - t0).as_secs_f64(),
            p99: latencies.quantile(0.99),
            db_bytes: service.db_bytes(),
        };
        let (_, pruned) = counts(&service).await;
        eprintln!(
            "bench soak: orders {first}..{done}: {:.0} sagas/s, POST p99 {}, on disk {} \
             ({} bytes/order so far), {pruned} executions pruned so far",
            window.sagas_per_s,
            ms(window.p99),
            mib(window.db_bytes),
            window.db_bytes / done
        );
        windows.push(window);
    }
    let (completed, pruned) = counts(&service).await;
    if completed != n {
        bail!("{completed} of {n} sagas COMPLETED");
    }
    let audit = service.audit().await?;
    service.stop().await?;
    let (first, last) = (&windows[0], &windows[windows.len() - 1]);
    let bytes_per_order = last.db_bytes / n.max(1);
    let label = window_label(w);
    let figures = vec![
        Figure::rate(format!("first {label} sagas/s"), first.sagas_per_s, "/s"),
        Figure::millis(format!("first {label} POST p99"), first.p99),
        Figure::rate(format!("last {label} sagas/s"), last.sagas_per_s, "/s"),
        Figure::millis(format!("last {label} POST p99"), last.p99),
        Figure::cost("bytes per order on disk", bytes_per_order as f64, "B"),
    ];
    eprintln!(
        "bench soak: {pruned} executions pruned (retention {retention}); audit: {audit}; \
         last window's sagas/s {:+.1}% and POST p99 {:+.1}% against the first",
        change(first.sagas_per_s, last.sagas_per_s),
        change(first.p99.as_secs_f64(), last.p99.as_secs_f64())
    );
    Ok(Report {
        summary: format!(
            "{n} orders, first {label} {:.0} sagas/s p99 {:.1} ms, last {label} {:.0} sagas/s \
             p99 {:.1} ms, {bytes_per_order} bytes/order on disk",
            first.sagas_per_s,
            first.p99.as_secs_f64() * 1e3,
            last.sagas_per_s,
            last.p99.as_secs_f64() * 1e3,
        ),
        figures,
    })
}

/// `100k`, `1k`, or the count itself below a thousand.
fn window_label(w: u64) -> String {
    if w >= 1000 && w % 1000 == 0 {
        format!("{}k", w / 1000)
    } else {
        w.to_string()
    }
}

fn change(from: f64, to: f64) -> f64 {
    if from == 0.0 {
        0.0
    } else {
        (to - from) / from * 100.0
    }
}

/// Waits until `goal` sagas have finished (the service's counter, polled every 100 ms).
async fn wait_finished(service: &Service, goal: u64, deadline: Instant) -> Result<Instant> {
    loop {
        let finished = service.finished().await.unwrap_or_default();
        if finished >= goal {
            return Ok(Instant::now());
        }
        if Instant::now() >= deadline {
            bail!("{finished} of {goal} sagas finished in time");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Sagas COMPLETED and executions pruned so far, from one read of `/metrics`.
async fn counts(service: &Service) -> (u64, u64) {
    match service.metrics().await {
        Ok((samples, _)) => (
            metrics::finished(&samples, "COMPLETED").unwrap_or_default(),
            metrics::value(&samples, "fulfillment_engine_executions_pruned_total", &[])
                .unwrap_or_default() as u64,
        ),
        Err(_) => (0, 0),
    }
}
