//! An embedded AWS Step Functions-compatible engine: a durable interpreter of the Amazon States
//! Language (JSONPath dialect) on SQLite, with activities and task tokens. It knows nothing about
//! the programs it runs.

pub mod api;
mod arn;
pub mod asl;
pub mod core;
pub mod data;
mod driver;
pub mod error;
pub mod inspect;
mod store;

pub use api::*;
pub use driver::{Engine, EngineConfig, Stats, SyncPolicy};
pub use error::EngineError;
pub use inspect::Inspector;
