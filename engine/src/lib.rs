//! An embedded AWS Step Functions-compatible engine: a durable interpreter of the Amazon States
//! Language (JSONPath dialect) on SQLite, with activities and task tokens. It knows nothing about
//! the programs it runs.

pub mod api;
pub mod asl;
pub mod core;
pub mod data;
mod driver;
pub mod error;

pub use api::*;
pub use driver::{Engine, EngineConfig, SyncPolicy};
pub use error::EngineError;
