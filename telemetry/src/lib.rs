//! What the service tells its operators about itself, shared by every part that counts
//! something: the Prometheus registry served at `/metrics` ([`Metrics`]: requests, business
//! outcomes, repairs, webhook deliveries, the backends' sampled counters) and the text of a
//! caught panic ([`panic::message`]) for the servers' logs and 500 answers.

mod metrics;
pub mod panic;
mod repair_kind;

pub use metrics::{Metrics, OrderOutcome, SampledKind, SampledMetric};
pub use repair_kind::RepairKind;
