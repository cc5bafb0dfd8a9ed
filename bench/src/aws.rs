//! The AWS side of the comparison, as a user would run it locally: **fakecloud** for Step
//! Functions and **moto** for DynamoDB, provisioned by `fulfillment provision`, with the
//! service on `--backend aws --payments sandbox`. The same shape as the black-box tests'
//! `tests::aws::AwsStack`, with fakecloud in place of `fulfillment engine` and no fake Stripe.

use anyhow::{Context, Result, bail};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use tempfile::TempDir;
use testkit::moto::MotoServer;

/// The role `provision` names on the state machine (the emulators do not check it).
const ROLE_ARN: &str = "arn:aws:iam::123456789012:role/fulfillment";
/// How long fakecloud may take to listen.
const START_WITHIN: Duration = Duration::from_secs(60);

/// fakecloud, moto, and the provisioned state machine and table.
pub struct Stack {
    moto: MotoServer,
    fakecloud: Child,
    sfn_endpoint: String,
    state_machine_arn: String,
    table: String,
    dir: TempDir,
}

/// The `fakecloud` executable: on `PATH`, else `~/.cargo/bin/fakecloud`, else installed with
/// `cargo install fakecloud --locked` (a long build, said on stderr) — once per run, whatever
/// the outcome, so a failed install is not retried by every scenario.
pub fn fakecloud_executable() -> Result<PathBuf> {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    FOUND
        .get_or_init(|| find_or_install().map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(|e| anyhow::anyhow!(e))
}

fn find_or_install() -> Result<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|dir| dir.join("fakecloud"));
    let cargo_bin = std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo/bin/fakecloud"));
    if let Some(found) = on_path.chain(cargo_bin.clone()).find(|p| p.is_file()) {
        return Ok(found);
    }
    eprintln!(
        "bench: fakecloud is not installed: running `cargo install fakecloud --locked` once \
         (about 30 minutes on two cores)"
    );
    let status = Command::new("cargo")
        .args(["install", "fakecloud", "--locked"])
        .stdout(Stdio::null())
        .status()
        .context("cannot run cargo install fakecloud")?;
    if !status.success() {
        bail!("cargo install fakecloud failed ({status})");
    }
    cargo_bin
        .filter(|p| p.is_file())
        .context("cargo install fakecloud left no ~/.cargo/bin/fakecloud")
}

fn free_port() -> Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port())
}

impl Stack {
    /// Starts moto and fakecloud and provisions; blocking (call it off the async threads).
    pub fn start() -> Result<Stack> {
        let fakecloud_bin = fakecloud_executable()?;
        let moto = std::panic::catch_unwind(MotoServer::start)
            .map_err(|_| anyhow::anyhow!("moto did not start (see above; MOTO_SERVER)"))?;
        let dir = tempfile::tempdir()?;
        let port = free_port()?;
        let log = std::fs::File::create(dir.path().join("fakecloud.log"))?;
        let mut fakecloud = Command::new(&fakecloud_bin)
            .args([
                "--addr",
                &format!("127.0.0.1:{port}"),
                "--log-level",
                "warn",
            ])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("cannot run {}", fakecloud_bin.display()))?;
        let until = Instant::now() + START_WITHIN;
        while TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err() {
            if let Some(status) = fakecloud.try_wait()? {
                bail!("fakecloud exited ({status}) before listening");
            }
            if Instant::now() >= until {
                let _ = fakecloud.kill();
                bail!("fakecloud did not listen within {START_WITHIN:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut stack = Stack {
            moto,
            fakecloud,
            sfn_endpoint: format!("http://127.0.0.1:{port}"),
            state_machine_arn: String::new(),
            table: format!("fulfillment-bench-{}", std::process::id()),
            dir,
        };
        let output = stack
            .command("provision")
            .args(["--state-machine-role-arn", ROLE_ARN])
            .output()
            .context("provision runs")?;
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        if !output.status.success() {
            bail!(
                "provision on fakecloud+moto failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
                    .lines()
                    .last()
                    .unwrap_or_default()
            );
        }
        stack.state_machine_arn = stdout
            .lines()
            .find_map(|l| l.strip_prefix("FULFILLMENT_STATE_MACHINE_ARN="))
            .with_context(|| format!("provision printed no state machine ARN: {stdout}"))?
            .to_owned();
        Ok(stack)
    }

    /// A command of the binary with the emulators' endpoints and test credentials, and none of
    /// the bench's own `AWS_*` or `FULFILLMENT_*` variables.
    pub fn command(&self, subcommand: &str) -> Command {
        blackbox::aws::emulated_aws_command(
            subcommand,
            self.dir.path(),
            &self.sfn_endpoint,
            self.moto.endpoint(),
            &self.table,
        )
    }

    fn on_the_backend(&self, subcommand: &str) -> Command {
        let mut cmd = self.command(subcommand);
        cmd.args(["--backend", "aws"])
            .args(["--state-machine-arn", &self.state_machine_arn])
            .args(["--payments", "sandbox"]);
        cmd
    }

    /// `fulfillment serve --backend aws` on a free loopback port.
    pub fn serve_command(&self) -> Command {
        let mut cmd = self.on_the_backend("serve");
        cmd.args(["--listen", "127.0.0.1:0"]);
        cmd
    }

    /// `fulfillment audit` of the table and the executions.
    pub fn audit_command(&self) -> Command {
        self.on_the_backend("audit")
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        let _ = self.fakecloud.kill();
        let _ = self.fakecloud.wait();
    }
}
