//! The service under torture: one `fulfillment serve` at a time on one database, killed with
//! SIGKILL and started again at once; and the client side, which, like a real client, sends a
//! request the kill cut off again, with the same body, to whichever process serves now.

use blackbox::{Db, Server, TOKEN, serve_command};
use reqwest::{Method, StatusCode};
use serde_json::Value;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// How long one request may keep being retried (across kills and 503s) before the run gives up.
const REQUEST_DEADLINE: Duration = Duration::from_secs(120);

/// An answer read whole.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: StatusCode,
    pub replayed: bool,
    pub text: String,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or(Value::Null)
    }

    /// The kind of a problem+json answer (the last segment of its `type`).
    pub fn problem(&self) -> Option<String> {
        let body = self.json();
        let kind = body["type"].as_str()?.rsplit('/').next()?;
        Some(kind.to_owned())
    }
}

pub struct Service {
    db: Db,
    args: Vec<String>,
    server: Mutex<Option<Server>>,
    /// The address of the process serving now; `None` while there is none.
    base: watch::Sender<Option<String>>,
    kills: AtomicU32,
    /// Requests a kill cut off (sent again).
    cut_off: AtomicU32,
    /// Panics seen in the output of any process of the run.
    panics: Mutex<Vec<String>>,
    http: reqwest::Client,
}

impl Service {
    /// Starts `fulfillment serve` on a new database with the test token and `args`.
    pub fn start(args: &[&str]) -> Service {
        let db = Db::new();
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        let server = Server::spawn(command(&db, &args));
        let (base, _) = watch::channel(Some(server.base.clone()));
        Service {
            db,
            args,
            server: Mutex::new(Some(server)),
            base,
            kills: AtomicU32::new(0),
            cut_off: AtomicU32::new(0),
            panics: Mutex::new(Vec::new()),
            http: blackbox::client(),
        }
    }

    pub fn db(&self) -> &Db {
        &self.db
    }

    pub fn kills(&self) -> u32 {
        self.kills.load(Ordering::SeqCst)
    }

    /// How many requests were cut off (and sent again).
    pub fn cut_off(&self) -> u32 {
        self.cut_off.load(Ordering::SeqCst)
    }

    /// SIGKILL, then a new process on the same database at once. Blocks (run it off the
    /// runtime's workers).
    pub fn kill_and_restart(&self) {
        let mut current = self.server.lock().unwrap();
        self.base.send_replace(None);
        if let Some(mut old) = current.take() {
            old.kill();
            self.note_panics(&old);
        }
        self.kills.fetch_add(1, Ordering::SeqCst);
        let server = Server::spawn(command(&self.db, &self.args));
        self.base.send_replace(Some(server.base.clone()));
        *current = Some(server);
    }

    /// A graceful stop of the last process; its exit status, if it was not a clean one.
    pub fn stop(&self) -> Option<String> {
        let mut current = self.server.lock().unwrap();
        self.base.send_replace(None);
        let mut server = current.take()?;
        server.sigterm();
        let status = server.wait(blackbox::START_STOP);
        self.note_panics(&server);
        (!status.success()).then(|| {
            format!(
                "the last process exited with {status} on SIGTERM: {}",
                server.stderr.text()
            )
        })
    }

    pub fn panics(&self) -> Vec<String> {
        self.panics.lock().unwrap().clone()
    }

    fn note_panics(&self, server: &Server) {
        let output = server.stderr.text() + &server.stdout.text();
        let mut panics = self.panics.lock().unwrap();
        panics.extend(
            output
                .lines()
                .filter(|l| l.contains("panicked"))
                .map(str::to_owned),
        );
    }

    /// Sends a request until it is answered: a request the kill cut off (refused, reset, an
    /// answer cut short) and a 503 are sent again, unchanged. Every other answer is final.
    pub async fn call(&self, method: Method, path: &str, body: Option<&Value>) -> Answer {
        let until = Instant::now() + REQUEST_DEADLINE;
        let mut serving = self.base.subscribe();
        loop {
            assert!(
                Instant::now() < until,
                "{method} {path} got no answer within {REQUEST_DEADLINE:?}"
            );
            let base = match serving.wait_for(Option::is_some).await {
                Ok(base) => base.clone().unwrap_or_default(),
                Err(_) => panic!("the service is gone"),
            };
            let mut request = self.http.request(method.clone(), format!("{base}{path}"));
            if let Some(body) = body {
                request = request.json(body);
            }
            // The torture's clients place and follow orders with the operator's key (an
            // operator may do everything); who may see what has tests of its own.
            request = request.bearer_auth(TOKEN);
            let answered = match request.send().await {
                Ok(response) => {
                    let status = response.status();
                    let replayed = response
                        .headers()
                        .get("idempotent-replayed")
                        .is_some_and(|v| v == "true");
                    response.text().await.ok().map(|text| Answer {
                        status,
                        replayed,
                        text,
                    })
                }
                Err(_) => None,
            };
            match answered {
                Some(answer) if answer.status != StatusCode::SERVICE_UNAVAILABLE => return answer,
                // Unavailable for a moment: the same request again, shortly.
                Some(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                // Cut off: most likely killed; wait for the next process (or a moment, if
                // this one lives on).
                None => {
                    self.cut_off.fetch_add(1, Ordering::SeqCst);
                    let _ = tokio::time::timeout(
                        Duration::from_millis(500),
                        serving.wait_for(|b| b.as_deref() != Some(base.as_str())),
                    )
                    .await;
                }
            }
        }
    }

    pub async fn get(&self, path: &str) -> Answer {
        self.call(Method::GET, path, None).await
    }
}

fn command(db: &Db, args: &[String]) -> std::process::Command {
    let mut cmd = serve_command(db);
    // One key sends every call of the workload, in bursts: no limit is meant to refuse them.
    cmd.arg("--operator-token")
        .arg(TOKEN)
        .args(["--rate-limit", "0"])
        // Orders a kill left unstarted are started by the repair loop: soon, so that the run
        // settles within its deadline (a start racing the order's own is harmless).
        .args(["--repair-interval", "5s", "--repair-grace", "5s"])
        .args(args);
    cmd
}
