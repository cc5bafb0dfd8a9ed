//! The fulfillment service: the saga's composition (steps, workers, keeper), order intake, the
//! HTTP API, the store audit, and the `fulfillment` binary's configuration and start-up (the
//! composition root).

pub mod audit;
pub mod config;
pub mod http;
pub mod keys;
pub mod orders;
mod panic;
pub mod pricing;
pub mod saga;
pub mod sfn_server;
pub mod start_queue;
pub mod startup;
pub mod telemetry;
