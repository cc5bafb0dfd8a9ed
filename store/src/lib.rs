//! The order saga's domain: records (orders, stock, reservations, charges, shipments), the ports
//! through which steps reach them (repositories and gateways, bundled as [`Ports`]), the SQLite
//! adapters of the embedded default, the DynamoDB adapters of AWS mode, the sandbox gateways
//! over either, a Stripe-compatible payment gateway over HTTP (`stripe`) and a carrier
//! aggregator's shipping gateway over HTTP (`easypost`).

#[cfg(feature = "contract")]
pub mod contract;
pub mod domain;
pub mod error;
mod http;
pub mod lease;
pub mod ports;
pub mod retry;
pub mod webhook;

pub use domain::*;
pub use error::{GatewayError, StoreError};
pub use lease::{Lease, ShardLeases, Unshared};
pub use ports::*;
pub use webhook::*;
pub mod dynamodb;
pub mod easypost;
pub mod sandbox;
pub mod sqlite;
pub mod stripe;

pub use dynamodb::DynamoStore;
pub use easypost::{EasyPostConfig, EasyPostShipping};
pub use sandbox::{SandboxPayments, SandboxShipping};
pub use sqlite::{Durability, SqliteStore};
pub use stripe::{SecretKey, StripeConfig, StripePayments};
