//! Logging: `tracing` events to stdout (stderr for commands whose stdout is their result), as
//! text or one JSON object per line, filtered by `RUST_LOG` (default `info`).

use crate::config::LogFormat;
use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::writer::BoxMakeWriter;

/// Where log lines go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogTo {
    /// The services (`serve`, `engine`): logs are their output.
    Stdout,
    /// Commands that print a result for scripts (`provision`).
    Stderr,
}

/// Installs the global subscriber. Call once, first thing in `main`; a second call (tests)
/// leaves the first subscriber in place.
pub fn init(format: LogFormat, to: LogTo) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let (writer, terminal) = match to {
        LogTo::Stdout => (
            BoxMakeWriter::new(std::io::stdout),
            std::io::stdout().is_terminal(),
        ),
        LogTo::Stderr => (
            BoxMakeWriter::new(std::io::stderr),
            std::io::stderr().is_terminal(),
        ),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_ansi(terminal);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
    };
}
