//! The fulfillment service: order intake, the HTTP API, the store audit, and the `fulfillment`
//! binary's configuration and start-up (the composition root). The saga itself (definition,
//! steps, workers) is the `workflow` crate.

pub mod audit;
pub mod config;
pub mod console;
pub mod counted_orders;
pub mod http;
pub mod intake;
pub mod keys;
mod panic;
pub mod pricing;
pub mod repair;
pub mod sfn_server;
pub mod start_queue;
pub mod startup;
pub mod telemetry;
pub mod webhooks;
