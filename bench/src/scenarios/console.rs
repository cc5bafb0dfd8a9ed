//! console: the operator console's pages over many orders (100,000 by default). N small orders
//! complete and one in a hundred waits for approval; then an operator's session reads each page
//! in a closed loop: the dashboard (counts per status), the orders list (its first page, a rare
//! status, a customer prefix that matches nothing: the bounded worst case), one order (its
//! drawing and history) and the approvals queue. Each page's p50 and p99 show whether the
//! console stays fast as the orders grow (every list is paged on the server).

use super::{Ctx, Figure, Report};
use crate::load::{MakeRequest, Spec, closed};
use crate::service::{PRICE_CENTS, Service, order_body, order_id, order_ids, place_orders};
use crate::stats::ms;
use anyhow::{Context, Result};
use hyper::Method;
use std::sync::Arc;
use std::time::Duration;

/// Units of a large order: at the catalog's price, above the default approval threshold
/// (1,000 EUR), so it waits for an operator.
const LARGE_QUANTITY: u32 = 100;
/// How long each page is read for.
const READ_FOR: Duration = Duration::from_secs(5);
/// Connections reading each page (operators are few).
const READERS: usize = 2;

pub async fn run(ctx: &Ctx, orders: u64) -> Result<Report> {
    let mut service = Service::start(ctx.backend, &[], 1_000_000_000).await?;
    let parked = (orders / 100).max(1);
    let small = orders - parked;
    let large: MakeRequest = {
        let (run, token) = (ctx.run.clone(), service.token.clone());
        Arc::new(move |i| {
            let body = order_body(&order_id(&run, "cl", i), i, PRICE_CENTS).replace(
                r#""quantity":1,"#,
                &format!(r#""quantity":{LARGE_QUANTITY},"#),
            );
            Spec::json(Method::POST, "/orders", body).operator(&token)
        })
    };
    for (n, make) in [
        (small, place_orders(&ctx.run, "cs", PRICE_CENTS)),
        (parked, large),
    ] {
        closed::run(
            service.addr(),
            ctx.sizes.connections,
            closed::Until::count(n),
            make,
            None,
        )
        .await?
        .require_all(202, "placing the orders")?;
    }
    let waiting = order_ids(&ctx.run, "cl", parked);
    service
        .await_all(&waiting, |s| s == "AWAITING_APPROVAL", None, ctx.deadline())
        .await?;
    loop {
        if service.finished().await.unwrap_or(0) >= small {
            break;
        }
        anyhow::ensure!(
            std::time::Instant::now() < ctx.deadline(),
            "the small orders did not finish in time"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eprintln!("bench console: {orders} orders in place ({parked} awaiting approval)");

    let cookie = sign_in(&service).await?;
    // One cookie for the whole run: the load generator's headers are static.
    let cookie: &'static str = Box::leak(cookie.into_boxed_str());
    let one_order = order_id(&ctx.run, "cl", 0);
    let pages = [
        ("dashboard", "/console".to_owned()),
        ("orders", "/console/orders".to_owned()),
        (
            "awaiting approval",
            "/console/orders?status=AWAITING_APPROVAL".to_owned(),
        ),
        ("no such customer", "/console/orders?q=nobody".to_owned()),
        ("one order", format!("/console/orders/{one_order}")),
        ("approvals", "/console/approvals".to_owned()),
    ];
    let mut figures = Vec::new();
    let mut parts = Vec::new();
    for (name, path) in pages {
        let path: Arc<str> = Arc::from(path);
        let make: MakeRequest =
            Arc::new(move |_| Spec::get(path.to_string()).header("cookie", cookie));
        let outcome = closed::run(
            service.addr(),
            READERS,
            closed::Until::duration(READ_FOR),
            make,
            None,
        )
        .await?;
        outcome.require_all(200, name)?;
        let l = &outcome.latencies;
        parts.push(format!(
            "{name} p50 {} p99 {} max {}",
            ms(l.quantile(0.5)),
            ms(l.quantile(0.99)),
            ms(l.quantile(1.0))
        ));
        figures.push(Figure::millis(format!("{name} p99"), l.quantile(0.99)));
    }
    service.stop().await?;
    Ok(Report {
        summary: format!("{orders} orders: {}", parts.join(", ")),
        figures,
    })
}

/// Opens an operator session with the bench's token: the cookie `name=value`.
async fn sign_in(service: &Service) -> Result<String> {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let answer = client
        .post(format!("http://{}/console/sign-in", service.addr()))
        .form(&[("key", &*service.token)])
        .send()
        .await?;
    anyhow::ensure!(
        answer.status().as_u16() == 303,
        "sign-in answered {}",
        answer.status()
    );
    answer
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|c| c.starts_with("fulfillment_console="))
        .and_then(|c| c.split(';').next())
        .map(str::to_owned)
        .context("no session cookie")
}
