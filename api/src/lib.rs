//! The fulfillment service's composition root: it builds the store, the workflow adapter, the
//! saga's steps and workers, and order intake, and (with the HTTP API, to come) serves them.

pub mod http;
pub mod orders;
pub mod saga;
