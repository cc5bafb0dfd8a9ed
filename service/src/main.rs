//! The `fulfillment` binary: `fulfillment serve` runs the HTTP API and the saga's workers;
//! `fulfillment engine` runs the embedded engine alone as a local Step Functions endpoint;
//! `fulfillment provision` creates the AWS resources `serve --backend aws` needs;
//! `fulfillment audit` checks a store for invariant violations.
//! Everything is composed in [`service::startup`]; `--help` documents every setting.

use clap::Parser;
use service::config::{
    AuditSettings, Cli, Command, EngineSettings, KeysCommand, KeysSettings, LogFormat,
    ProvisionSettings, Settings, VersionsSettings,
};
use service::logging::LogTo;
use std::process::ExitCode;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    service::startup::tune_process();
    let Cli { command } = Cli::parse();
    let (log_format, log_to) = match &command {
        Command::Serve(a) => (a.backend.log_format, LogTo::Stdout),
        Command::Engine(a) => (a.log_format, LogTo::Stdout),
        // Their standard output is for scripts (`eval "$(fulfillment provision …)"`, the
        // audit's violations and summary).
        Command::Provision(a) => (a.log_format, LogTo::Stderr),
        Command::Audit(a) => (a.backend.log_format, LogTo::Stderr),
        // A new key goes to stdout, alone.
        Command::Keys(KeysCommand::Create(a)) => (a.backend.log_format, LogTo::Stderr),
        Command::Keys(KeysCommand::List(a)) => (a.backend.log_format, LogTo::Stderr),
        Command::Keys(KeysCommand::Revoke(a)) => (a.backend.log_format, LogTo::Stderr),
        // `versions list` prints its table on stdout.
        Command::Versions(c) => (c.log_format(), LogTo::Stderr),
        Command::Backup(_) | Command::Restore(_) => (LogFormat::Text, LogTo::Stderr),
    };
    let _logs = service::logging::init(log_format, log_to);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .max_blocking_threads(service::startup::BLOCKING_THREADS)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    // An audit that could not look must not read as one that found something (exit 1).
    let audit = matches!(command, Command::Audit(_));
    let ran = match command {
        Command::Serve(args) => runtime
            .block_on(service::startup::run(Settings::from(*args)))
            .map(|()| ExitCode::SUCCESS),
        Command::Engine(args) => runtime
            .block_on(service::startup::run_engine(EngineSettings::from(args)))
            .map(|()| ExitCode::SUCCESS),
        Command::Provision(args) => runtime
            .block_on(service::startup::run_provision(ProvisionSettings::from(
                args,
            )))
            .map(|()| ExitCode::SUCCESS),
        Command::Keys(command) => runtime
            .block_on(service::startup::run_keys(KeysSettings::from(command)))
            .map(|()| ExitCode::SUCCESS),
        Command::Versions(command) => runtime
            .block_on(service::startup::run_versions(VersionsSettings::from(
                command,
            )))
            .map(|()| ExitCode::SUCCESS),
        Command::Backup(args) => {
            service::startup::run_backup(&args.db, &args.to).map(|()| ExitCode::SUCCESS)
        }
        Command::Restore(args) => {
            service::startup::run_restore(&args.from, &args.db).map(|()| ExitCode::SUCCESS)
        }
        Command::Audit(args) => runtime
            .block_on(service::startup::run_audit(AuditSettings::from(args)))
            .map(|audited| {
                if audited.clean() {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::from(1)
                }
            }),
    };
    match ran {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            let code = match e.exit_code() {
                1 if audit => 3,
                code => code,
            };
            ExitCode::from(u8::try_from(code).unwrap_or(1))
        }
    }
}
