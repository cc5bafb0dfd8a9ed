//! The order saga's domain and its ports: the records (orders, stock, reservations, charges,
//! shipments, API keys, webhooks) and the traits through which the steps, the service and the
//! audit reach them (repositories and gateways, bundled as [`Ports`]; the sandbox's
//! [`Ledger`](ledger::Ledger) and the carrier's [`LabelBook`](labels::LabelBook), which the
//! stores keep for the providers). No adapter lives here: `store_sqlite` and `store_dynamodb`
//! implement the storage ports, `providers` the gateways, and `testkit` holds the contract suite
//! every adapter passes.

pub mod domain;
pub mod error;
pub mod labels;
pub mod lease;
pub mod ledger;
pub mod ports;
pub mod retry;
pub mod webhook;

pub use domain::*;
pub use error::{GatewayError, StoreError};
pub use lease::{Lease, ShardLeases, Unshared};
pub use ports::*;
pub use webhook::*;
