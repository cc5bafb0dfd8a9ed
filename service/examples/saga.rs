//! The order saga on the embedded default, from a terminal: stocks a few SKUs, places orders
//! that take each path (completed, approved, declined and compensated, a replayed duplicate, a
//! conflicting one), and prints what happened. The service is `serve`'s own composition
//! (`service::startup::App`) without a listener; state lives in two SQLite files in a
//! directory, so a second run shows the first run's orders are still there.
//!
//! ```text
//! cargo run --release -p service --example saga [-- DIR]
//! ```

use anyhow::{Context, Result};
use engine::EngineError;
use intake::pricing::RequestedLine;
use intake::{OrderRequest, Placed};
use service::config::Settings;
use service::startup::{App, open};
use std::time::Duration;
use store::{Address, Decision, OrderId, Price};
use workflow::steps::approval::decide;

fn order(
    id: &str,
    sku: &str,
    quantity: u32,
    unit_price_cents: u64,
    payment_method: &str,
) -> Result<OrderRequest> {
    Ok(OrderRequest {
        order_id: OrderId::parse(id).map_err(anyhow::Error::msg)?,
        customer_id: "cus_demo".into(),
        items: vec![RequestedLine {
            sku: sku.into(),
            quantity,
            unit_price_cents: Some(unit_price_cents),
        }],
        currency: "EUR".into(),
        payment_method: payment_method.into(),
        shipping_address: Address {
            name: "Grace Hopper".into(),
            line1: "1 Compiler Street".into(),
            city: "Arlington".into(),
            postal_code: "22201".into(),
            country: "US".into(),
        },
    })
}

#[tokio::main]
async fn main() -> Result<()> {
    let dir = std::path::PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "saga-demo".into()),
    );
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    // The service as `serve` composes it, on the files in `dir`, without a listener.
    let settings = Settings::embedded(&dir.join("store.db"))?;
    let app = App::build(&settings, open(&settings).await?).await?;
    let ports = app.state.ports.clone();
    let intake = app.state.intake.clone();
    let workflow = app.embedded().context("the embedded backend")?.clone();
    let engine = workflow.engine().clone();

    let eur = |cents| Price {
        cents,
        currency: "EUR".into(),
    };
    ports
        .inventory
        .set_stock("book", Some(10), Some(&eur(1_500)))
        .await?;
    ports
        .inventory
        .set_stock("piano", Some(1), Some(&eur(450_000)))
        .await?;
    let run = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    let id = |name: &str| format!("{name}-{run}");

    let plan = [
        (
            id("small"),
            order(&id("small"), "book", 2, 1_500, "pm_card_visa")?,
            None,
        ),
        (
            id("large"),
            order(&id("large"), "piano", 1, 450_000, "pm_card_visa")?,
            Some(Decision::Approve),
        ),
        (
            id("declined"),
            order(&id("declined"), "book", 1, 1_500, "pm_card_chargeDeclined")?,
            None,
        ),
        (
            id("flaky"),
            order(&id("flaky"), "book", 1, 1_500, "pm_card_unavailable_once")?,
            None,
        ),
    ];
    for (name, request, decision) in plan {
        let placed = intake.place(request.clone(), "example-shop").await?;
        let Placed::Accepted(placed) = placed else {
            anyhow::bail!("{name}: {placed:?}")
        };
        let arn = placed.execution_arn.clone().unwrap_or_default();
        println!("\n{name}: 202 Accepted, execution {arn}");
        if let Some(decision) = decision {
            // An operator approves once the order waits for it.
            loop {
                let o = ports.orders.get(placed.id()).await?.context("order")?;
                if o.status == store::OrderStatus::AwaitingApproval {
                    println!(
                        "  {} {} awaits approval; approving",
                        o.new.amount_cents, o.new.currency
                    );
                    decide(
                        ports.orders.as_ref(),
                        workflow.as_ref(),
                        placed.id(),
                        decision,
                        "ops@example.com",
                        None,
                    )
                    .await?;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        // The start queue starts the execution a moment after the order is accepted.
        while let Err(EngineError::ExecutionDoesNotExist(_)) = engine.describe_execution(&arn).await
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let done = engine
            .wait_for_completion(&arn, Duration::from_secs(60))
            .await?;
        let order = ports.orders.get(placed.id()).await?.context("order")?;
        print!(
            "  execution {} · order {}",
            done.status.as_str(),
            order.status.as_str()
        );
        match &order.failure {
            Some(f) => println!(" · {}: {}", f.error, f.cause),
            None => println!(),
        }
        if name == id("small") {
            let again = intake.place(request.clone(), "example-shop").await?;
            println!(
                "  the same order again: {}",
                if matches!(again, Placed::Replayed(_)) {
                    "replayed (same execution)"
                } else {
                    "?"
                }
            );
            let mut other = request;
            other.items[0].quantity = 5;
            let conflict = intake.place(other, "example-shop").await?;
            println!(
                "  the same id with another body: {}",
                if matches!(conflict, Placed::Conflict(_)) {
                    "409 Conflict, nothing changed"
                } else {
                    "?"
                }
            );
        }
    }
    for sku in ["book", "piano"] {
        let s = ports.inventory.stock(sku).await?.context("stock")?;
        println!(
            "\nstock {sku}: {} available, {} reserved, {} shipped",
            s.available, s.reserved, s.shipped
        );
    }
    app.stop().await;
    Ok(())
}
