//! Logging: `tracing` events to stdout (stderr for commands whose stdout is their result), as
//! text or one JSON object per line, filtered by `RUST_LOG` (default `info`). Lines are written
//! by a thread of their own (`tracing-appender`), so a request never waits on a write to the
//! terminal or pipe; none is dropped (a full buffer, 128,000 lines, makes loggers wait).

use crate::config::LogFormat;
use std::io::{BufWriter, IsTerminal};
use tracing_appender::non_blocking::{NonBlockingBuilder, WorkerGuard};
use tracing_subscriber::EnvFilter;

/// The most bytes of lines the log writer gathers into one `write`: it writes what it has
/// each time it has taken every line waiting, so a terminal still sees each line at once, but
/// a busy service makes one system call (and one wake-up of whoever reads its pipe) for many
/// lines, not one for each.
const BATCH_BYTES: usize = 64 * 1024;

/// Where log lines go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogTo {
    /// The services (`serve`, `engine`): logs are their output.
    Stdout,
    /// Commands that print a result for scripts (`provision`).
    Stderr,
}

/// Installs the global subscriber. Call once, first thing in `main`, and keep the guard until
/// the end: dropping it writes the lines still buffered. A second call (tests) leaves the
/// first subscriber in place.
pub fn init(format: LogFormat, to: LogTo) -> WorkerGuard {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let buffered = NonBlockingBuilder::default()
        .lossy(false)
        .thread_name("log-writer");
    let ((writer, guard), terminal) = match to {
        LogTo::Stdout => (
            buffered.finish(BufWriter::with_capacity(BATCH_BYTES, std::io::stdout())),
            std::io::stdout().is_terminal(),
        ),
        LogTo::Stderr => (
            buffered.finish(BufWriter::with_capacity(BATCH_BYTES, std::io::stderr())),
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
    guard
}
