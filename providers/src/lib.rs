//! The payment and shipping gateways ([`PaymentGateway`](store::PaymentGateway),
//! [`ShippingGateway`](store::ShippingGateway)): a Stripe-compatible payment provider over HTTP
//! (`stripe`), a carrier aggregator's shipping over HTTP (`easypost`), their shared HTTP client
//! (`http`), and the sandbox providers of the embedded default over a store's ledger (`sandbox`).

pub mod easypost;
mod http;
pub mod sandbox;
pub mod stripe;

pub use easypost::{EasyPostConfig, EasyPostShipping};
pub use sandbox::{SandboxPayments, SandboxShipping};
pub use stripe::{SecretKey, StripeConfig, StripePayments};
