//! The `fulfillment` binary: `fulfillment serve` runs the HTTP API and the saga's workers;
//! `fulfillment engine` runs the embedded engine alone as a local Step Functions endpoint.
//! Everything is composed in [`api::startup`]; `--help` documents every setting.

use api::config::{Cli, Command, EngineSettings, Settings};
use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let Cli { command } = Cli::parse();
    let log_format = match &command {
        Command::Serve(a) => a.log_format,
        Command::Engine(a) => a.log_format,
    };
    api::telemetry::init(log_format);
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
    let ran = match command {
        Command::Serve(args) => runtime.block_on(api::startup::run(Settings::from(args))),
        Command::Engine(args) => {
            runtime.block_on(api::startup::run_engine(EngineSettings::from(args)))
        }
    };
    match ran {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(1))
        }
    }
}
