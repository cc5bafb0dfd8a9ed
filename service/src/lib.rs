//! The `fulfillment` binary's library: its command line and settings ([`config`]), logging, and
//! start-up, which composes the service (the backends, the saga's workers and keeper, intake, the
//! HTTP API and the console, webhook delivery, the repair loop) and runs its commands.

pub mod config;
pub mod logging;
pub mod startup;
