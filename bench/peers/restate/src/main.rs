//! `peer-restate`: the order saga of `bench peers` written for Restate, the way Restate's docs
//! and examples write one with the Rust SDK: a workflow per order (`OrderSaga`), a virtual
//! object per SKU (`Sku`) and one per payment idempotency key (`Payments`). See
//! `bench/peers/README.md` for the contract it keeps and for how the server is run.
//!
//! This binary is only the service endpoint: Restate's server (`restate-server`) owns the
//! durability, calls this endpoint over HTTP/2 to run handlers, and serves the ingress that
//! clients (the bench) talk to. Register it with the server's admin API
//! (`POST /deployments {"uri":"http://127.0.0.1:<PORT>"}`) before sending orders.
//!
//! Environment:
//! - `PORT` (default 9080): the endpoint listens on `127.0.0.1:$PORT`, loopback only.
//! - `APPROVAL_THRESHOLD_CENTS` (default 100000): orders totalling at least this wait for an
//!   operator's decision.
//! - `RUST_LOG` (default `warn`): the SDK's log filter.

mod payments;
mod saga;
mod sku;

use std::net::{Ipv4Addr, SocketAddr};

use restate_sdk::prelude::*;

const DEFAULT_PORT: u16 = 9080;
const DEFAULT_APPROVAL_THRESHOLD_CENTS: i64 = 100_000;

/// Reads a numeric environment variable; a value that does not parse is an error, not the
/// default, so a typo in the bench's settings cannot silently change what is measured.
fn env_number<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(value) => value.trim().parse().unwrap_or_else(|_| {
            eprintln!("peer-restate: {name}={value:?} is not a number");
            std::process::exit(2)
        }),
        Err(_) => default,
    }
}

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();

    let port = env_number("PORT", DEFAULT_PORT);
    let approval_threshold_cents =
        env_number("APPROVAL_THRESHOLD_CENTS", DEFAULT_APPROVAL_THRESHOLD_CENTS);
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));

    let endpoint = Endpoint::builder()
        .bind(sku::Sku)
        .bind(payments::Payments)
        .bind(saga::OrderSaga {
            approval_threshold_cents,
        })
        .build();
    eprintln!(
        "peer-restate: serving Sku, Payments, OrderSaga on {addr} (approval threshold {approval_threshold_cents} cents)"
    );
    // Returns on SIGINT (the SDK's graceful shutdown); SIGTERM/SIGKILL end the process outright,
    // which the server treats like any lost connection: it retries the invocations in flight.
    HttpServer::new(endpoint).listen_and_serve(addr).await;
}
