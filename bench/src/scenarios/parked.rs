//! parked: N orders waiting for an operator. What they cost while parked (the server's RSS,
//! the database on disk), how long a restart takes with all of them parked (spawn to `/readyz`
//! 200), and how fast they are approved and then complete.

use super::{Ctx, Figure, Report, Window};
use crate::load::{MakeRequest, Spec, closed};
use crate::service::{Backend, PRICE_CENTS, Service, order_id, order_ids, place_orders};
use crate::stats::{mib, ms};
use anyhow::Result;
use hyper::Method;
use std::sync::Arc;
use std::time::Instant;

/// Every order needs approval: the service runs with a threshold of one cent.
const THRESHOLD: &[&str] = &["--approval-threshold-cents", "1"];

pub async fn run(ctx: &Ctx) -> Result<Report> {
    let s = &ctx.sizes;
    let n = s.parked;
    let mut service = Service::start(ctx.backend, THRESHOLD, 1_000_000_000).await?;
    let t0 = Instant::now();
    let submitted = closed::run(
        service.addr(),
        s.connections,
        closed::Until::count(n),
        place_orders(&ctx.run, "p", PRICE_CENTS),
        None,
    )
    .await?;
    submitted.require_all(202, "submitting the orders")?;
    let ids = order_ids(&ctx.run, "p", n);
    let parked_at = service
        .await_all(&ids, |s| s == "AWAITING_APPROVAL", None, ctx.deadline())
        .await?;
    let park_secs = (parked_at - t0).as_secs_f64();
    eprintln!("bench parked: {n} orders parked in {park_secs:.2} s");
    let rss_before = service.rss()?;
    service.stop().await?;
    let db_bytes = service.db_bytes();

    let ready = service.spawn().await?;
    let rss_after = service.rss()?;
    let window = Window::open(&service).await;
    let approve: MakeRequest = {
        let (run, token) = (ctx.run.clone(), service.token.clone());
        Arc::new(move |i| {
            Spec::json(
                Method::POST,
                format!("/orders/{}/approval", order_id(&run, "p", i)),
                r#"{"decision":"approve"}"#,
            )
            .operator(&token)
        })
    };
    let t1 = Instant::now();
    let approved = closed::run(
        service.addr(),
        s.connections,
        closed::Until::count(n),
        approve,
        None,
    )
    .await?;
    approved.require_all(200, "approving")?;
    let approvals = approved.rate(approved.count(200));
    let completed_at = service
        .await_all(&ids, |s| s == "COMPLETED", None, ctx.deadline())
        .await?;
    let complete_secs = (completed_at - t1).as_secs_f64();
    let mut figures = vec![
        Figure::rate("approvals/s", approvals, "/s"),
        Figure::cost("RSS with all parked", rss_before as f64 / 1048576.0, "MiB"),
        Figure::millis("restart-to-ready", ready),
        Figure::cost("RSS after restart", rss_after as f64 / 1048576.0, "MiB"),
        Figure::cost("approve-to-all-COMPLETED", complete_secs, "s"),
    ];
    let disk = if ctx.backend == Backend::Embedded {
        figures.push(Figure::cost(
            "database on disk",
            db_bytes as f64 / 1048576.0,
            "MiB",
        ));
        format!(
            ", database {} ({} bytes/order)",
            mib(db_bytes),
            db_bytes / n.max(1)
        )
    } else {
        String::new()
    };
    let counters = window.close(&service, ctx, &mut figures).await;
    service.stop().await?;
    Ok(Report {
        summary: format!(
            "{n} parked in {park_secs:.1} s: RSS {}{disk}; restart-to-ready {}, RSS {} after; \
             {approvals:.0} approvals/s, all COMPLETED {complete_secs:.1} s after the first \
             approval{counters}",
            mib(rss_before),
            ms(ready),
            mib(rss_after),
        ),
        figures,
    })
}
