//! An embedded AWS Step Functions-compatible engine: a durable interpreter of the Amazon States
//! Language (JSONPath dialect) on SQLite, with activities and task tokens. It knows nothing about
//! the programs it runs.

mod arn;
pub mod asl;
pub mod core;
pub mod data;
mod db;
mod driver;
pub mod error;
pub mod inspect;
pub mod sfn;

pub use driver::{Clock, Engine, EngineConfig, Stats, SyncPolicy};
pub use error::EngineError;
pub use inspect::Inspector;
pub use sfn::*;

/// The recorded AWS conformance corpus the unit tests read: `$ASL_CONFORMANCE_DIR` when set,
/// else the copy kept in the repository (`engine/conformance/cases`). A missing corpus fails
/// the test that needs it: a skipped check would pass with less coverage unnoticed.
#[cfg(test)]
pub(crate) fn conformance_cases() -> std::path::PathBuf {
    let dir = std::env::var_os("ASL_CONFORMANCE_DIR").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/cases"),
        std::path::PathBuf::from,
    );
    assert!(
        dir.is_dir(),
        "the conformance corpus is missing at {}",
        dir.display()
    );
    dir
}
