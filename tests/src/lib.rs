//! The harness of the black-box tests: starts the real `fulfillment` binary on `127.0.0.1:0`
//! with a temporary database, reads the bound address from its stdout, talks HTTP to it, and
//! stops it with SIGTERM.
//!
//! The binary is `$FULFILLMENT_BIN`, or `fulfillment` in the target directory these tests run
//! from (`cargo test --release --workspace` builds it; so does `-p service -p blackbox`).

pub mod aws;
pub mod console;
pub mod faults;
pub mod raw;

use reqwest::{Client, Method, Response, StatusCode};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

/// How long anything the tests wait for may take.
pub const DEADLINE: Duration = Duration::from_secs(60);
/// How long the service may take to start or to stop.
pub const START_STOP: Duration = Duration::from_secs(30);
/// The operator token the tests configure (unless a test wants one generated).
pub const TOKEN: &str = "blackbox-operator-token-5e1f";

/// The `fulfillment` binary under test.
pub fn binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("FULFILLMENT_BIN") {
        return PathBuf::from(bin);
    }
    // …/target/release/deps/<test> → …/target/release/fulfillment
    let exe = std::env::current_exe().expect("the test executable's path");
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .map(|dir| dir.join(format!("fulfillment{}", std::env::consts::EXE_SUFFIX)))
        .expect("the test executable sits in target/<profile>/deps");
    assert!(
        bin.exists(),
        "{} does not exist: build it with `cargo build --release -p service --bin fulfillment` \
         (or run `cargo test --release --workspace`), or set FULFILLMENT_BIN",
        bin.display()
    );
    bin
}

/// A database for one or more runs of the service.
pub struct Db {
    dir: tempfile::TempDir,
}

impl Db {
    pub fn new() -> Db {
        Db {
            dir: tempfile::tempdir().expect("a temporary directory"),
        }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.path().join("fulfillment.db")
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Default for Db {
    fn default() -> Self {
        Db::new()
    }
}

/// A `fulfillment serve` command on a free loopback port and `db`, with the test token, and
/// no `FULFILLMENT_*` variable inherited from the test's environment.
pub fn serve_command(db: &Db) -> Command {
    let mut cmd = command_on(db, "serve");
    cmd.arg("--listen").arg("127.0.0.1:0");
    cmd
}

/// A new API key for `name` (`role`: `client` or `operator`) in `db`'s store, made with
/// `fulfillment keys create` as an operator would (beside a running service or before it).
pub fn keys_create(db: &Db, name: &str, role: &str) -> String {
    let output = command_on_store(db, &["keys", "create", "--name", name, "--role", role])
        .output()
        .expect("the binary runs");
    assert!(
        output.status.success(),
        "keys create: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let key = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    assert!(key.starts_with("fk_"), "a key on stdout: {key}");
    key
}

/// `fulfillment <words…> --db <db>` run in the database's directory, with no `FULFILLMENT_*`
/// variable inherited from the test's environment.
pub fn command_on_store(db: &Db, words: &[&str]) -> Command {
    let mut cmd = Command::new(binary());
    cmd.args(words)
        .arg("--db")
        .arg(db.path())
        .current_dir(db.dir());
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("FULFILLMENT_") {
            cmd.env_remove(key);
        }
    }
    cmd
}

/// A `fulfillment audit` command of `db` (the embedded backend), with no `FULFILLMENT_*`
/// variable inherited from the test's environment.
pub fn audit_command(db: &Db) -> Command {
    command_on(db, "audit")
}

/// `fulfillment versions <args…> --db <db>`, run to its end: exit code, stdout, stderr.
pub fn versions(db: &Db, args: &[&str]) -> (Option<i32>, String, String) {
    let mut all = vec!["versions"];
    all.extend_from_slice(args);
    let output = command_on_store(db, &all)
        .output()
        .expect("the binary runs");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// `fulfillment <subcommand> --db <db>`: see [`command_on_store`].
fn command_on(db: &Db, subcommand: &str) -> Command {
    command_on_store(db, &[subcommand])
}

/// What a finished `fulfillment audit` printed and how it exited.
#[derive(Debug)]
pub struct Audit {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Audit {
    /// Runs `cmd` (an audit) to its end.
    pub fn run(mut cmd: Command) -> Audit {
        let output = cmd.output().expect("the audit runs");
        Audit {
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// The `violation: …` lines.
    pub fn violations(&self) -> Vec<&str> {
        self.stdout
            .lines()
            .filter(|l| l.starts_with("violation: "))
            .collect()
    }

    /// The last line: `audit: N orders, S SKUs, C charges, V violations`.
    pub fn summary(&self) -> &str {
        self.stdout.lines().last().unwrap_or_default()
    }
}

/// Output of a child process, collected as it comes (so its pipes never fill up).
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<String>>);

impl Captured {
    pub fn text(&self) -> String {
        self.0.lock().unwrap().clone()
    }

    /// Waits (polling, within [`START_STOP`]) until the output contains `needle`; the output
    /// then.
    pub fn wait_for(&self, needle: &str) -> String {
        let until = Instant::now() + START_STOP;
        loop {
            let text = self.text();
            if text.contains(needle) {
                return text;
            }
            assert!(Instant::now() < until, "never printed {needle:?}: {text}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn push(&self, line: &str) {
        let mut s = self.0.lock().unwrap();
        s.push_str(line);
        s.push('\n');
    }
}

/// Reads `pipe` line by line into `into`; the first line starting with `announce` is also sent.
fn collect(
    pipe: impl Read + Send + 'static,
    into: Captured,
    announce: Option<(&'static str, mpsc::Sender<String>)>,
) {
    std::thread::spawn(move || {
        let mut announce = announce;
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            into.push(&line);
            if let Some((prefix, tx)) = &announce
                && let Some(rest) = line.strip_prefix(prefix)
            {
                let _ = tx.send(rest.trim().to_owned());
                announce = None;
            }
        }
    });
}

/// A running `fulfillment serve`.
pub struct Server {
    child: Child,
    pub base: String,
    pub addr: SocketAddr,
    pub stdout: Captured,
    pub stderr: Captured,
    pub client: Client,
}

impl Server {
    /// The service on `db` with the test token.
    pub fn start(db: &Db) -> Server {
        let mut cmd = serve_command(db);
        cmd.arg("--operator-token").arg(TOKEN);
        Server::spawn(cmd)
    }

    /// Runs `cmd` (a `serve` on port 0) and waits until it announces its address.
    pub fn spawn(mut cmd: Command) -> Server {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {:?}: {e}", cmd.get_program()));
        let (stdout, stderr) = (Captured::default(), Captured::default());
        let (tx, rx) = mpsc::channel();
        collect(
            child.stdout.take().unwrap(),
            stdout.clone(),
            Some(("listening on ", tx)),
        );
        collect(child.stderr.take().unwrap(), stderr.clone(), None);
        let base = match rx.recv_timeout(START_STOP) {
            Ok(base) => base,
            Err(_) => {
                let _ = child.kill();
                let status = child.wait();
                panic!(
                    "the service did not announce its address ({status:?})\nstdout:\n{}\nstderr:\n{}",
                    stdout.text(),
                    stderr.text()
                );
            }
        };
        let addr = base
            .strip_prefix("http://")
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("unexpected address line: {base}"));
        Server {
            child,
            base,
            addr,
            stdout,
            stderr,
            client: client(),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Sends SIGTERM (a graceful stop).
    pub fn sigterm(&self) {
        let pid = libc::pid_t::try_from(self.child.id()).expect("a pid");
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        let rc = unsafe { libc::kill(pid, libc::SIGTERM) };
        assert_eq!(rc, 0, "kill -TERM {pid}");
    }

    /// Sends SIGKILL (`Child::kill` on unix) and reaps the process: it dies mid-whatever, as
    /// in a crash.
    pub fn kill(&mut self) -> ExitStatus {
        let _ = self.child.kill();
        self.child.wait().expect("wait for the killed service")
    }

    /// Waits for the process to end (polled, within `deadline`); kills it and panics if it
    /// does not.
    pub fn wait(&mut self, deadline: Duration) -> ExitStatus {
        let until = Instant::now() + deadline;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            if Instant::now() >= until {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "the service did not exit within {deadline:?}\nstdout:\n{}\nstderr:\n{}",
                    self.stdout.text(),
                    self.stderr.text()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM, then waits for a clean exit (status 0).
    pub fn stop(mut self) -> Server {
        self.sigterm();
        let status = self.wait(START_STOP);
        assert!(
            status.success(),
            "the service exited with {status}\nstderr:\n{}",
            self.stderr.text()
        );
        self
    }

    /// A request with the operator token (operators may do everything: place orders, read
    /// every order); the ownership tests use clients' keys of their own ([`keys_create`]).
    pub async fn request(&self, method: Method, path: &str, body: Option<&Value>) -> Reply {
        self.send(method, path, body, Some(TOKEN)).await
    }

    /// A request with no credential.
    pub async fn anonymous(&self, method: Method, path: &str, body: Option<&Value>) -> Reply {
        self.send(method, path, body, None).await
    }

    /// The `/metrics` text.
    pub async fn metrics(&self) -> String {
        self.request(Method::GET, "/metrics", None).await.text
    }

    /// A request with the operator token.
    pub async fn operator(&self, method: Method, path: &str, body: Option<&Value>) -> Reply {
        self.send(method, path, body, Some(TOKEN)).await
    }

    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        token: Option<&str>,
    ) -> Reply {
        let mut req = self.client.request(method.clone(), self.url(path));
        if let Some(body) = body {
            req = req.json(body);
        }
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        let response = req
            .send()
            .await
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        Reply::read(response).await
    }

    /// Stocks `available` units of `sku` priced at `price_cents` EUR in the catalog.
    pub async fn stock(&self, sku: &str, available: u64, price_cents: u64) {
        let r = self
            .operator(
                Method::PUT,
                &format!("/inventory/{sku}"),
                Some(&json!({
                    "available": available,
                    "price": { "cents": price_cents, "currency": "EUR" },
                })),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    }

    /// A SKU's `(available, reserved)` units.
    pub async fn stock_of(&self, sku: &str) -> (u64, u64) {
        let r = self
            .request(Method::GET, &format!("/inventory/{sku}"), None)
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        let v = r.json();
        (
            v["available"].as_u64().unwrap(),
            v["reserved"].as_u64().unwrap(),
        )
    }

    pub async fn place(&self, order: &Value) -> Reply {
        self.request(Method::POST, "/orders", Some(order)).await
    }

    /// `GET path` with `key` until it is answered other than 200, at most `tries` times; that
    /// answer (a rate limit's refusal, say).
    pub async fn until_refused(&self, path: &str, key: &str, tries: usize) -> Option<Reply> {
        for _ in 0..tries {
            let r = self.send(Method::GET, path, None, Some(key)).await;
            if r.status != StatusCode::OK {
                return Some(r);
            }
        }
        None
    }

    /// `POST /orders` with `key` (a client's or an operator's).
    pub async fn place_as(&self, order: &Value, key: &str) -> Reply {
        self.send(Method::POST, "/orders", Some(order), Some(key))
            .await
    }

    pub async fn status(&self, order_id: &str) -> Value {
        let r = self
            .request(Method::GET, &format!("/orders/{order_id}/status"), None)
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        r.json()
    }

    /// Polls the order's status until it is `status` (within [`DEADLINE`]).
    pub async fn reaches(&self, order_id: &str, status: &str) -> Value {
        self.polls_until(order_id, |s| s["status"] == status, status)
            .await
    }

    /// Polls until the order is `status` and its execution has ended as `execution`. The
    /// status view reads the execution's status from the order's record, which the last step
    /// writes just before the workflow records the execution's end: this also waits until the
    /// history shows that end.
    pub async fn ends(&self, order_id: &str, status: &str, execution: &str) -> Value {
        let view = self
            .polls_until(
                order_id,
                |s| s["status"] == status && s["executionStatus"] == execution,
                &format!("{status} with its execution {execution}"),
            )
            .await;
        self.history_ends(order_id).await;
        view
    }

    /// Polls the order's history until its last event is the execution's end.
    async fn history_ends(&self, order_id: &str) {
        let until = Instant::now() + DEADLINE;
        loop {
            let history = self.history(order_id).await;
            let last = history.last().map(String::as_str);
            if matches!(
                last,
                Some(
                    "ExecutionSucceeded"
                        | "ExecutionFailed"
                        | "ExecutionAborted"
                        | "ExecutionTimedOut"
                )
            ) {
                return;
            }
            assert!(
                Instant::now() < until,
                "{order_id}'s execution never ended: {history:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn polls_until(
        &self,
        order_id: &str,
        done: impl Fn(&Value) -> bool,
        what: &str,
    ) -> Value {
        let until = Instant::now() + DEADLINE;
        loop {
            // Polled as a client polls: a 429 is waited out, not a failure.
            let r = self
                .get_within_rate_limit(&format!("/orders/{order_id}/status"))
                .await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.text);
            let s = r.json();
            if done(&s) {
                return s;
            }
            assert!(
                Instant::now() < until,
                "{order_id} is {} (execution {}), never {what}: {s}",
                s["status"],
                s["executionStatus"]
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Polls until the order is in a terminal status (`COMPLETED`, `CANCELLED`,
    /// `COMPENSATION_FAILED`) and its execution has ended too.
    pub async fn settles(&self, order_id: &str) -> Value {
        let view = self
            .polls_until(
                order_id,
                |s| is_terminal(s["status"].as_str()) && s["executionStatus"] != "RUNNING",
                "terminal with its execution ended",
            )
            .await;
        self.history_ends(order_id).await;
        view
    }

    pub async fn decide(&self, order_id: &str, decision: &str) -> Reply {
        self.operator(
            Method::POST,
            &format!("/orders/{order_id}/approval"),
            Some(&json!({ "decision": decision })),
        )
        .await
    }

    /// A GET as the client that waits out its key's rate limit as `Retry-After` says, as a
    /// client would: tests that poll or read many orders at once may pass it.
    async fn get_within_rate_limit(&self, path: &str) -> Reply {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let r = self.request(Method::GET, path, None).await;
            if r.status != StatusCode::TOO_MANY_REQUESTS || Instant::now() > deadline {
                return r;
            }
            let wait = r
                .headers
                .get("retry-after")
                .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
                .unwrap_or(1);
            tokio::time::sleep(Duration::from_secs(wait)).await;
        }
    }

    /// The execution history's event types, in order.
    pub async fn history(&self, order_id: &str) -> Vec<String> {
        let r = self
            .get_within_rate_limit(&format!("/orders/{order_id}/history?maxResults=1000"))
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text);
        r.json()["events"]
            .as_array()
            .expect("events")
            .iter()
            .map(|e| e["type"].as_str().unwrap_or_default().to_owned())
            .collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // A failed test must not leave its server running.
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// An HTTP client whose every request ends (a hang is a test failure, not a stuck test).
pub fn client() -> Client {
    Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .connect_timeout(Duration::from_secs(5))
        .build()
        .expect("an HTTP client")
}

/// An answer, read whole.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub text: String,
}

impl Reply {
    pub async fn read(response: Response) -> Reply {
        let status = response.status();
        let headers = response.headers().clone();
        let text = response.text().await.expect("a response body");
        Reply {
            status,
            headers,
            text,
        }
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn replayed(&self) -> bool {
        self.header("idempotent-replayed") == Some("true")
    }

    /// The kind of a problem+json answer: the last segment of its `type`
    /// (`https://fulfillment.dev/problems/approval-expired` → `approval-expired`).
    pub fn problem(&self) -> Option<String> {
        let body: Value = serde_json::from_str(&self.text).ok()?;
        let kind = body["type"].as_str()?.rsplit('/').next()?;
        Some(kind.to_owned())
    }
}

/// Whether an order status is one its saga ends in.
pub fn is_terminal(status: Option<&str>) -> bool {
    matches!(
        status,
        Some("COMPLETED" | "CANCELLED" | "COMPENSATION_FAILED")
    )
}

/// `order` without its lines' unit prices: priced by the catalog alone.
pub fn unpriced(mut order: Value) -> Value {
    if let Some(lines) = order["items"].as_array_mut() {
        for line in lines {
            if let Some(line) = line.as_object_mut() {
                line.remove("unitPriceCents");
            }
        }
    }
    order
}

/// An order for `quantity` × `sku` at `unit_price_cents`, paid with `payment_method`.
pub fn order(
    order_id: &str,
    sku: &str,
    quantity: u32,
    unit_price_cents: u64,
    payment_method: &str,
) -> Value {
    json!({
        "orderId": order_id,
        "customerId": "cus_blackbox",
        "items": [{ "sku": sku, "quantity": quantity, "unitPriceCents": unit_price_cents }],
        "currency": "EUR",
        "paymentMethod": payment_method,
        "shippingAddress": {
            "name": "Grace Hopper",
            "line1": "1 Compiler Street",
            "city": "Arlington",
            "postalCode": "22201",
            "country": "US"
        }
    })
}
