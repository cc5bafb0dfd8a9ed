//! saga: small orders end to end. N orders are submitted (open loop at a rate, or closed loop
//! as fast as it goes); completed sagas/s is N over the time from the first POST until all N
//! have finished (by `fulfillment_sagas_finished_total`, read every 100 ms, or by status
//! sweeps where the metric is absent). The 202-to-COMPLETED latency of every order is the
//! time from its 202 (this process's wall clock) to the `updatedAt` its status shows once
//! COMPLETED (the service's, the same machine's clock): read once at the end, so measuring
//! adds no load while the sagas run.

use super::{Ctx, Figure, Report, Window};
use crate::load::{OnAnswer, closed, open};
use crate::service::{PRICE_CENTS, Service, is_terminal, order_ids, place_orders, tally};
use crate::stats::{Latencies, ms};
use anyhow::Result;
use chrono::{DateTime, Utc};
use std::sync::{Arc, Mutex};
use std::time::Instant;

mod webhook;

pub async fn run(ctx: &Ctx) -> Result<Report> {
    let s = &ctx.sizes;
    let n = s.saga_orders;
    let extra: &[&str] = match s.saga_webhook {
        true => &["--webhook-allow-private"],
        false => &[],
    };
    let mut service = Service::start(ctx.backend, extra, 1_000_000_000).await?;
    let addr = service.addr();
    let receiver = match s.saga_webhook {
        true => Some(webhook::Receiver::start(&service).await?),
        false => None,
    };
    let window = Window::open(&service).await;
    let cpu_before = service.cpu_time();

    let accepted: Arc<Mutex<Vec<Option<DateTime<Utc>>>>> =
        Arc::new(Mutex::new(vec![None; n as usize]));
    let deadline = ctx.deadline();
    let on_answer: OnAnswer = {
        let accepted = accepted.clone();
        Arc::new(move |i, status, _, _| {
            if status == 202 {
                accepted.lock().unwrap()[i as usize] = Some(Utc::now());
            }
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
    let webhooks = match &receiver {
        Some(r) => r.all_delivered(2 * n, finished, deadline).await?,
        None => String::new(),
    };
    let cpu = match (cpu_before, service.cpu_time()) {
        (Some(before), Some(after)) => after.per(&before, n, "saga"),
        _ => String::new(),
    };
    let mut engine_figures = Vec::new();
    let counters = window.close(&service, ctx, &mut engine_figures).await;
    let views = service.views(&ids).await?;
    service.stop().await?;
    let statuses: Vec<String> = views.iter().map(|v| v.status.clone()).collect();
    anyhow::ensure!(
        statuses.iter().all(|s| s == "COMPLETED"),
        "not every saga COMPLETED: {}",
        tally(&statuses)
    );
    let mut l = Latencies::new();
    for (view, accepted) in views.iter().zip(accepted.lock().unwrap().iter()) {
        if let (Some(done), Some(accepted)) = (view.updated_at, accepted) {
            l.record((done - *accepted).to_std().unwrap_or_default());
        }
    }

    let rate = n as f64 / elapsed.as_secs_f64();
    let mut figures = vec![
        Figure::rate("completed sagas/s", rate, "/s"),
        Figure::millis("202-to-COMPLETED p50", l.quantile(0.5)),
        Figure::millis("202-to-COMPLETED p99", l.quantile(0.99)),
    ];
    figures.extend(engine_figures);
    Ok(Report {
        summary: format!(
            "{rate:.0} sagas/s, 202-to-COMPLETED p50 {} p99 {} ({n} orders in {:.2} s, {how}; \
             latency of {}){webhooks}{cpu}{counters}",
            ms(l.quantile(0.5)),
            ms(l.quantile(0.99)),
            elapsed.as_secs_f64(),
            l.len()
        ),
        figures,
    })
}
