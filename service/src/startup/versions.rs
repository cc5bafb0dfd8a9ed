//! `fulfillment versions`: the saga's versions, listed, rolled back or promoted, on either
//! backend (`workflow::versions` does the work).

use super::*;
use crate::config::{VersionsAction, VersionsSettings};
use workflow::AwsWorkflow;
use workflow::versions::{VersionsError, VersionsReport};

impl From<VersionsError> for StartupError {
    fn from(e: VersionsError) -> Self {
        match e {
            VersionsError::Workflow(e) => StartupError::Workflow(e),
            e => StartupError::Config(e.to_string()),
        }
    }
}

/// The backend's workflow, for its versions only: no upgrade, no worker.
enum Handle {
    Embedded(EmbeddedWorkflow),
    Aws(AwsWorkflow),
}

pub async fn run_versions(settings: VersionsSettings) -> Result<(), StartupError> {
    let backend = &settings.backend;
    let handle = match backend.kind {
        Backend::Embedded => {
            if !backend.engine_path.exists() {
                return Err(StartupError::Config(format!(
                    "no engine state at {} (beside --db, FULFILLMENT_DB): start the service once",
                    backend.engine_path.display()
                )));
            }
            // The running service holds the file (an exclusive lock): this says so and stops.
            let engine = Engine::open(EngineConfig::new(&backend.engine_path), None)
                .await
                .map_err(|source| StartupError::Engine {
                    path: backend.engine_path.clone(),
                    source,
                })?;
            Handle::Embedded(EmbeddedWorkflow::attach(engine))
        }
        Backend::Aws => {
            let arn = backend.state_machine_arn.as_deref().ok_or_else(|| {
                StartupError::Config(
                    "--backend aws needs --state-machine-arn (FULFILLMENT_STATE_MACHINE_ARN)"
                        .to_owned(),
                )
            })?;
            let sdk = aws_sdk_config(&backend.aws).await?;
            let workflow = AwsWorkflow::new(aws_sdk_sfn::Client::new(&sdk), arn)
                .map_err(|e| StartupError::Config(format!("--state-machine-arn: {e}")))?;
            Handle::Aws(workflow)
        }
    };
    let done = act(&handle, &settings.action).await;
    if let Handle::Embedded(w) = &handle {
        w.engine().shutdown().await;
    }
    done
}

async fn act(handle: &Handle, action: &VersionsAction) -> Result<(), StartupError> {
    let mut out = std::io::stdout().lock();
    match action {
        VersionsAction::List { limit } => {
            let report = match handle {
                Handle::Embedded(w) => w.versions(*limit).await?,
                Handle::Aws(w) => w.versions(*limit).await?,
            };
            let _ = out.write_all(table(&report).as_bytes());
        }
        VersionsAction::Rollback { to } => {
            let done = match handle {
                Handle::Embedded(w) => w.rollback(*to).await?,
                Handle::Aws(w) => w.rollback(*to).await?,
            };
            let _ = writeln!(
                out,
                "live: version {} -> {} (pinned; `fulfillment versions promote` unpins)",
                done.from, done.to
            );
        }
        VersionsAction::Promote => {
            let version = match handle {
                Handle::Embedded(w) => w.promote().await?,
                Handle::Aws(w) => w.promote().await?,
            };
            let _ = writeln!(out, "live: version {version} (this build's), unpinned");
        }
    }
    let _ = out.flush();
    Ok(())
}

/// `versions list`'s table, then what `live` says of itself.
fn table(report: &VersionsReport) -> String {
    let mut text = format!(
        "{:<8} {:>5} {:>8}  {:<20}  {}\n",
        "VERSION", "LIVE", "RUNNING", "CREATED", "DESCRIPTION"
    );
    for v in &report.versions {
        let live = v
            .live_weight
            .map_or_else(|| "-".to_owned(), |w| format!("{w}%"));
        text.push_str(&format!(
            "{:<8} {:>5} {:>8}  {:<20}  {}\n",
            v.version.number,
            live,
            v.running,
            v.version
                .created
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            v.version.description.as_deref().unwrap_or("")
        ));
    }
    if report.pinned {
        text.push_str(&format!(
            "live is pinned: {}\n",
            report.live_description.as_deref().unwrap_or("")
        ));
    }
    text
}
