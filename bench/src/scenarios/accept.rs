//! accept: how fast and how steadily `POST /orders` is durably accepted (202). Open loop at
//! fixed rates (latency from the intended send time), then a closed loop at saturation for the
//! most accepts per second. The sagas the orders start run meanwhile, as they would.

use super::{Ctx, Figure, Report, Window};
use crate::load::{closed, open};
use crate::service::{PRICE_CENTS, Service, place_orders};
use crate::stats::ms;
use anyhow::Result;
use std::time::Duration;

pub async fn run(ctx: &Ctx) -> Result<Report> {
    let s = &ctx.sizes;
    let mut service = Service::start(ctx.backend, &[], 1_000_000_000).await?;
    let window = Window::open(&service).await;
    let mut parts = Vec::new();
    let mut figures = Vec::new();
    for &rate in &s.accept_rates {
        let count = open::count_for(rate, Duration::from_secs_f64(s.accept_secs));
        eprintln!(
            "bench accept: open loop {rate} req/s for {} s",
            s.accept_secs
        );
        let make = place_orders(&ctx.run, &format!("a{rate}"), PRICE_CENTS);
        let outcome = open::run(service.addr(), rate, count, make, None).await?;
        let l = &outcome.latencies;
        let errors = outcome.errors(202);
        parts.push(format!(
            "{rate} req/s {} (achieved {:.0}/s, sent p50 {} p99 {} late{})",
            l.summary(),
            outcome.rate(outcome.answered()),
            ms(outcome.lateness.quantile(0.5)),
            ms(outcome.lateness.quantile(0.99)),
            if errors.is_empty() {
                String::new()
            } else {
                format!(", errors {errors}")
            }
        ));
        figures.push(Figure::millis(
            format!("p99 at {rate} req/s"),
            l.quantile(0.99),
        ));
        figures.push(Figure::millis(
            format!("p99.9 at {rate} req/s"),
            l.quantile(0.999),
        ));
    }
    eprintln!(
        "bench accept: closed loop, {} connections for {} s",
        s.connections, s.saturation_secs
    );
    let outcome = closed::run(
        service.addr(),
        s.connections,
        closed::Until::duration(Duration::from_secs_f64(s.saturation_secs)),
        place_orders(&ctx.run, "asat", PRICE_CENTS),
        None,
    )
    .await?;
    let accepted = outcome.rate(outcome.count(202));
    let errors = outcome.errors(202);
    parts.push(format!(
        "saturation {accepted:.0} accepts/s p50 {} p99 {} ({} connections{})",
        ms(outcome.latencies.quantile(0.5)),
        ms(outcome.latencies.quantile(0.99)),
        s.connections,
        if errors.is_empty() {
            String::new()
        } else {
            format!(", errors {errors}")
        }
    ));
    figures.insert(0, Figure::rate("saturation accepts/s", accepted, "/s"));
    figures.push(Figure::millis(
        "p99 at saturation",
        outcome.latencies.quantile(0.99),
    ));
    let counters = window.close(&service, ctx, &mut figures).await;
    service.stop().await?;
    anyhow::ensure!(
        outcome.count(202) > 0,
        "no order accepted at saturation: {errors}"
    );
    Ok(Report {
        summary: format!("{}{counters}", parts.join("; ")),
        figures,
    })
}
