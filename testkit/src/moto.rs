//! A DynamoDB emulator for tests: moto's server on a free loopback port, started on first use,
//! and a client for it. `bash .ci/run unit` installs moto (pinned) into
//! `<target dir>/ci-moto`; `$MOTO_SERVER` names another `moto_server` executable.
//!
//! Moto's own `moto_server` serves requests on many threads at once with nothing to isolate
//! them: a conditional write can interleave with another, and a cancelled transaction restores
//! a copy of the whole table taken when it began, undoing what others wrote meanwhile. DynamoDB
//! applies each request atomically, and the adapters rely on exactly that. So the server is
//! moto's application, from the Python that runs `moto_server`, with one lock around each
//! request ([`SERVE`]): requests still arrive and interleave concurrently, as on DynamoDB, but
//! each one is applied whole.
//!
//! The server stops when its [`MotoServer`] is dropped, and also when the test process ends
//! however it ends (the [`shared`] one lives in a `static`, which is never dropped): a small
//! shell stands between, and stops moto when its standard input, a pipe from this process,
//! closes.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::{BehaviorVersion, Credentials, Region};
use std::io::Read;
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The moto version `.ci/run` installs, and the one these tests were checked against.
pub const MOTO_VERSION: &str = "5.2.5";

/// A running `moto_server`.
#[derive(Debug)]
pub struct MotoServer {
    shell: Child,
    /// Closing it stops the server.
    stdin: Option<ChildStdin>,
    endpoint: String,
    log: PathBuf,
}

/// Moto's server (as `moto_server` runs it) with each request applied under one lock; the body
/// is read inside it, since a WSGI application may do its work lazily. Arguments: host, port.
pub const SERVE: &str = r#"import os, sys, threading
from werkzeug.serving import run_simple
from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication, MotoRequestHandler, create_backend_app)
host, port = sys.argv[1], int(sys.argv[2])
os.environ.setdefault("MOTO_PORT", str(port))
moto = DomainDispatcherApplication(create_backend_app)
lock = threading.Lock()
def one_at_a_time(environ, start_response):
    with lock:
        return list(moto(environ, start_response))
run_simple(host, port, one_at_a_time, threaded=True, request_handler=MotoRequestHandler)
"#;

/// Runs the server in the background and waits for it; a watcher stops it once fd 3 (this
/// process's pipe) reaches end of file. `$0` is Python, `$1` the program, `$2` the port, `$3`
/// the log file.
const SUPERVISOR: &str = r#"exec 3<&0
"$0" -c "$1" 127.0.0.1 "$2" 3<&- >"$3" 2>&1 &
moto=$!
(cat <&3 >/dev/null; kill "$moto" 2>/dev/null) &
wait "$moto""#;

/// How long moto may take to answer after it starts (it imports a lot of Python).
const START_WITHIN: Duration = Duration::from_secs(60);

/// The `moto_server` executable: `$MOTO_SERVER`, else the one `.ci/run` installs.
pub fn executable() -> PathBuf {
    if let Some(path) = std::env::var_os("MOTO_SERVER") {
        return PathBuf::from(path);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("ci-moto/bin/moto_server")
}

/// The Python that runs `moto_server` (its `#!` line), which has moto installed.
fn interpreter(moto_server: &Path) -> PathBuf {
    let script = std::fs::read(moto_server)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", moto_server.display()));
    let first_line = script.split(|b| *b == b'\n').next().unwrap_or_default();
    let shebang = String::from_utf8_lossy(first_line);
    let mut words = shebang
        .strip_prefix("#!")
        .unwrap_or_else(|| panic!("{} is not a Python script", moto_server.display()))
        .split_whitespace();
    match words.next() {
        // `#!/usr/bin/env python3`
        Some(env) if env.ends_with("/env") => PathBuf::from(words.next().unwrap_or("python3")),
        Some(python) => PathBuf::from(python),
        None => panic!("{} names no interpreter", moto_server.display()),
    }
}

impl MotoServer {
    /// Starts a server and waits until it accepts connections. Panics, saying how to install
    /// moto, when there is no `moto_server`.
    pub fn start() -> MotoServer {
        let exe = executable();
        assert!(
            exe.is_file(),
            "no moto_server at {}: run `bash .ci/run unit` once (it installs moto into \
             <target dir>/ci-moto), or `pip install 'moto[server]=={MOTO_VERSION}'` and set \
             MOTO_SERVER to the moto_server it installed",
            exe.display()
        );
        // A port just freed can be taken again before moto binds it: try a few.
        let mut failures = Vec::new();
        for _ in 0..3 {
            let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                .and_then(|l| l.local_addr())
                .expect("a free loopback port")
                .port();
            let log = std::env::temp_dir().join(format!("moto-{}-{port}.log", std::process::id()));
            let mut shell = Command::new("sh")
                .arg("-c")
                .arg(SUPERVISOR)
                .arg(interpreter(&exe))
                .arg(SERVE)
                .arg(port.to_string())
                .arg(&log)
                .stdin(Stdio::piped())
                // The server writes to the log; the shell only reports its job's end.
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start sh");
            let stdin = shell.stdin.take();
            let mut server = MotoServer {
                shell,
                stdin,
                endpoint: format!("http://127.0.0.1:{port}"),
                log,
            };
            let answering = server.wait_until_answering(port);
            let log = server.log_text();
            // Moto keeps writing to the file, but nobody reads it once the server answers.
            let _ = std::fs::remove_file(&server.log);
            match answering {
                Ok(()) => return server,
                Err(why) => failures.push(format!("port {port}: {why}\n{log}")),
            }
        }
        panic!("moto_server did not start:\n{}", failures.join("\n"));
    }

    fn wait_until_answering(&mut self, port: u16) -> Result<(), String> {
        let deadline = Instant::now() + START_WITHIN;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.shell.try_wait() {
                return Err(format!("moto_server exited ({status})"));
            }
            if TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!("no answer within {START_WITHIN:?}"))
    }

    fn log_text(&self) -> String {
        let mut text = String::new();
        if let Ok(mut file) = std::fs::File::open(&self.log) {
            let _ = file.read_to_string(&mut text);
        }
        text
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// A client for this server.
    pub fn client(&self) -> Client {
        client_for(&self.endpoint)
    }
}

impl Drop for MotoServer {
    fn drop(&mut self) {
        // End of file on the supervisor's input: it stops moto, then exits.
        drop(self.stdin.take());
        let _ = self.shell.wait();
    }
}

/// The server all tests of this process share, started on first use.
pub fn shared() -> &'static MotoServer {
    static SERVER: OnceLock<MotoServer> = OnceLock::new();
    SERVER.get_or_init(MotoServer::start)
}

/// A DynamoDB client for an emulator at `endpoint`: static test credentials, `us-east-1`.
pub fn client_for(endpoint: &str) -> Client {
    let config = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("test", "test", None, None, "test"))
        .endpoint_url(endpoint)
        .build();
    Client::from_conf(config)
}
