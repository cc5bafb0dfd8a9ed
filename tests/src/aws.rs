//! The AWS backend, locally: `fulfillment engine` stands in for Step Functions, moto for
//! DynamoDB and the contract suite's fake Stripe for the payment provider. `fulfillment
//! provision` creates the table, the activities and the state machine on them, and replicas of
//! `fulfillment serve --backend aws` know them only by endpoint URL (the standard per-service
//! variables `AWS_ENDPOINT_URL_SFN` and `AWS_ENDPOINT_URL_DYNAMODB`).

use crate::{Db, Server, TOKEN, binary};
use std::process::Command;
use testkit::fake_stripe::{FakeStripe, SECRET_KEY};
use testkit::moto::MotoServer;

/// The emulated AWS account and the provider, provisioned; replicas start with [`AwsStack::replica`].
pub struct AwsStack {
    pub moto: MotoServer,
    pub engine: Server,
    pub stripe: FakeStripe,
    pub state_machine_arn: String,
    pub table: String,
    /// The engine's state and the replicas' working directory.
    dir: Db,
    /// Where replicas reach Step Functions and DynamoDB, when not straight at the emulators
    /// (through a proxy: [`AwsStack::route_replicas_through`]).
    routes: Option<(String, String)>,
}

impl AwsStack {
    /// Starts moto, the engine and the fake Stripe, and provisions (twice: it is idempotent).
    pub async fn start() -> AwsStack {
        let moto = tokio::task::spawn_blocking(MotoServer::start)
            .await
            .expect("moto starts");
        let dir = Db::new();
        let mut engine = Command::new(binary());
        engine
            .args(["engine", "--listen", "127.0.0.1:0", "--db"])
            .arg(dir.dir().join("sfn.db"))
            .current_dir(dir.dir());
        let engine = Server::spawn(engine);
        let stripe = FakeStripe::start().await;
        let mut stack = AwsStack {
            moto,
            engine,
            stripe,
            state_machine_arn: String::new(),
            table: format!("fulfillment-{}", std::process::id()),
            dir,
            routes: None,
        };
        let first = stack.provision();
        assert_eq!(
            stack.provision(),
            first,
            "provisioning again changes nothing"
        );
        stack.state_machine_arn = first
            .lines()
            .find_map(|l| l.strip_prefix("FULFILLMENT_STATE_MACHINE_ARN="))
            .unwrap_or_else(|| panic!("no state machine ARN printed: {first}"))
            .to_owned();
        assert!(
            first.contains(&format!("FULFILLMENT_TABLE={}\n", stack.table)),
            "{first}"
        );
        stack
    }

    /// A command of the binary with the emulators' endpoints and test credentials, and no
    /// `AWS_*` or `FULFILLMENT_*` variable of the test's own environment.
    pub fn command(&self, subcommand: &str) -> Command {
        emulated_aws_command(
            subcommand,
            self.dir.dir(),
            &self.engine.base,
            self.moto.endpoint(),
            &self.table,
        )
    }

    /// Runs `fulfillment provision`; its standard output.
    fn provision(&self) -> String {
        let output = self
            .command("provision")
            .args([
                "--state-machine-role-arn",
                "arn:aws:iam::123456789012:role/fulfillment-saga",
            ])
            .output()
            .expect("provision runs");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "provision failed ({}):\n{stdout}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        stdout
    }

    /// Replicas started from now on reach Step Functions at `sfn` and DynamoDB at `dynamodb`
    /// (e.g. a fault-injecting proxy in front of each); provisioning, keys and the audit still
    /// go straight to the emulators.
    pub fn route_replicas_through(&mut self, sfn: &str, dynamodb: &str) {
        self.routes = Some((sfn.to_owned(), dynamodb.to_owned()));
    }

    /// `subcommand` with the backend settings of the replicas: AWS, paying through the fake
    /// Stripe.
    fn on_the_backend(&self, subcommand: &str) -> Command {
        let mut cmd = match (&self.routes, subcommand) {
            (Some((sfn, dynamodb)), "serve") => {
                emulated_aws_command(subcommand, self.dir.dir(), sfn, dynamodb, &self.table)
            }
            _ => self.command(subcommand),
        };
        cmd.args(["--backend", "aws"])
            .args(["--state-machine-arn", &self.state_machine_arn])
            .args([
                "--payments",
                "stripe",
                "--stripe-url",
                &self.stripe.base_url,
            ])
            .args(["--stripe-key", SECRET_KEY]);
        cmd
    }

    /// A replica of `serve --backend aws` paying through the fake Stripe, with the test token
    /// and `args` on top.
    pub fn replica(&self, args: &[&str]) -> Server {
        let mut cmd = self.serve_command();
        cmd.args(["--operator-token", TOKEN]).args(args);
        Server::spawn(cmd)
    }

    /// A `serve --backend aws` command on port 0, paying through the fake Stripe, without a
    /// token.
    pub fn serve_command(&self) -> Command {
        let mut cmd = self.on_the_backend("serve");
        cmd.args(["--listen", "127.0.0.1:0"]);
        cmd
    }

    /// `fulfillment versions <words…>` on the replicas' state machine, run to its end: exit
    /// code, stdout, stderr.
    pub fn versions(&self, words: &[&str]) -> (Option<i32>, String, String) {
        let output = self
            .command("versions")
            .args(words)
            .args(["--backend", "aws"])
            .args(["--state-machine-arn", &self.state_machine_arn])
            .output()
            .expect("the binary runs");
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    }

    /// `fulfillment keys <words…>` on the replicas' table; its standard output, trimmed.
    pub fn keys(&self, words: &[&str]) -> String {
        let output = self
            .command("keys")
            .args(words)
            .args(["--backend", "aws"])
            .output()
            .expect("the binary runs");
        assert!(
            output.status.success(),
            "keys {words:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    /// A new key for the principal `name` with `role`, made as an operator would.
    pub fn keys_create(&self, name: &str, role: &str) -> String {
        let key = self.keys(&["create", "--name", name, "--role", role]);
        assert!(key.starts_with("fk_"), "a key on stdout: {key}");
        key
    }

    /// `fulfillment audit` with the replicas' settings.
    pub fn audit_command(&self) -> Command {
        self.on_the_backend("audit")
    }
}

/// `fulfillment <subcommand>` run in `dir` against emulated AWS: Step Functions at
/// `sfn_endpoint`, DynamoDB at `dynamodb_endpoint` (table `table`), with test credentials and
/// none of the caller's own `AWS_*` or `FULFILLMENT_*` variables.
pub fn emulated_aws_command(
    subcommand: &str,
    dir: &std::path::Path,
    sfn_endpoint: &str,
    dynamodb_endpoint: &str,
    table: &str,
) -> Command {
    let mut cmd = Command::new(binary());
    cmd.arg(subcommand).current_dir(dir);
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        if key.starts_with("FULFILLMENT_") || key.starts_with("AWS_") {
            cmd.env_remove(key.as_ref());
        }
    }
    cmd.env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_CONFIG_FILE", "/dev/null")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .env("AWS_ENDPOINT_URL_SFN", sfn_endpoint)
        .env("AWS_ENDPOINT_URL_DYNAMODB", dynamodb_endpoint)
        .env("FULFILLMENT_TABLE", table);
    cmd
}
