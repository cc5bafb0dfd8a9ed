//! recovery: N orders in flight when the server is SIGKILLed right after the last 202; it is
//! restarted on the same database, and the time until every order is terminal is measured;
//! then `fulfillment audit` must find the books clean.

use super::{Ctx, Figure, Report, Window};
use crate::load::closed;
use crate::service::{PRICE_CENTS, Service, is_terminal, order_ids, place_orders, tally};
use anyhow::Result;
use std::time::Instant;

pub async fn run(ctx: &Ctx) -> Result<Report> {
    let s = &ctx.sizes;
    let n = s.recovery;
    let mut service = Service::start(ctx.backend, &[], 1_000_000_000).await?;
    let submitted = closed::run(
        service.addr(),
        s.connections,
        closed::Until::count(n),
        place_orders(&ctx.run, "r", PRICE_CENTS),
        None,
    )
    .await?;
    // Read before the kill, as quickly as possible after the last 202.
    let done_at_kill = service.finished().await;
    service.kill().await;
    submitted.require_all(202, "submitting the orders")?;
    let done = done_at_kill.map_or("finished count not exported".to_owned(), |d| {
        format!("{d} done")
    });
    eprintln!("bench recovery: SIGKILLed with {n} submitted ({done}); restarting");

    let t0 = Instant::now();
    let ready = service.spawn().await?;
    let window = Window::open(&service).await;
    let ids = order_ids(&ctx.run, "r", n);
    // The metric restarts from zero with the process, so only the statuses can tell.
    let terminal_at = service
        .await_all(&ids, is_terminal, None, ctx.deadline())
        .await?;
    let recover_secs = (terminal_at - t0).as_secs_f64();
    let mut figures = vec![
        Figure::cost("SIGKILL to all terminal after restart", recover_secs, "s"),
        Figure::millis("restart-to-ready after SIGKILL", ready),
    ];
    let counters = window.close(&service, ctx, &mut figures).await;
    let statuses = service.statuses(&ids).await?;
    service.stop().await?;
    let audit = service.audit().await?;
    eprintln!("bench recovery: {audit}");
    Ok(Report {
        summary: format!(
            "{n} in flight at SIGKILL ({done}), all terminal {recover_secs:.1} s after restart \
             (ready in {:.0} ms; {}), audit clean{counters}",
            ready.as_secs_f64() * 1e3,
            tally(&statuses)
        ),
        figures,
    })
}
