//! Where the peers are installed: `bench/peers/setup.sh` puts them, pinned, under
//! `<target>/peers/` (the target directory this bench was built in). Running it again is
//! cheap when they are there, so the bench runs it every time rather than guess.

use anyhow::{Context, Result, bail};
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// The peers' sources: the set-up script and the Temporal worker and front.
const SOURCES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/peers");

#[derive(Debug, Clone)]
pub struct Installed {
    pub restate_server: PathBuf,
    /// Our Restate service endpoint (`bench/peers/restate`), built beside this bench.
    pub restate_endpoint: PathBuf,
    pub temporal: PathBuf,
    pub python: PathBuf,
    /// Where `worker.py` and `front.py` are.
    pub temporal_src: PathBuf,
}

/// Runs the set-up once per bench process; every later call answers from memory.
pub fn ensure() -> Result<Installed> {
    static ONCE: OnceLock<Result<Installed, String>> = OnceLock::new();
    ONCE.get_or_init(|| install().map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(anyhow::Error::msg)
}

fn install() -> Result<Installed> {
    let bin_dir = std::env::current_exe()?
        .parent()
        .context("the bench's directory")?
        .to_path_buf();
    // <target>/release/bench → <target>
    let target = bin_dir
        .parent()
        .context("the target directory")?
        .to_path_buf();
    let script = PathBuf::from(SOURCES).join("setup.sh");
    let status = Command::new("bash")
        .arg(&script)
        .env("CARGO_TARGET_DIR", &target)
        // Its progress is the bench's progress: stderr; its last line (stdout) is a path.
        .stdout(std::process::Stdio::null())
        .status()
        .with_context(|| format!("running {}", script.display()))?;
    if !status.success() {
        bail!("{} failed ({status})", script.display());
    }
    let peers = target.join("peers");
    let arch = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        other => bail!("no restate-server build for {other}"),
    };
    let installed = Installed {
        restate_server: peers.join(format!(
            "restate/node_modules/@restatedev/restate-server-linux-{arch}/bin/restate-server"
        )),
        restate_endpoint: bin_dir.join("peer-restate"),
        temporal: peers.join("venv/bin/temporal"),
        python: peers.join("venv/bin/python"),
        temporal_src: PathBuf::from(SOURCES).join("temporal"),
    };
    for path in [
        &installed.restate_server,
        &installed.temporal,
        &installed.python,
    ] {
        if !path.exists() {
            bail!("{} is missing after the set-up", path.display());
        }
    }
    if !installed.restate_endpoint.exists() {
        bail!(
            "{} is missing: build it with `cargo build --release --workspace`",
            installed.restate_endpoint.display()
        );
    }
    Ok(installed)
}
