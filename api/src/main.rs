//! The `fulfillment` binary: `fulfillment serve` runs the HTTP API and the saga's workers.
//! Everything is composed in [`api::startup`]; `--help` documents every setting.

use api::config::{Cli, Command, Settings};
use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let Cli { command } = Cli::parse();
    let Command::Serve(args) = command;
    let settings = Settings::from(args);
    api::telemetry::init(settings.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(api::startup::run(settings)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(1))
        }
    }
}
