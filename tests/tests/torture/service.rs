//! The service under torture: one `fulfillment serve` at a time on one store (a database file,
//! or the emulated AWS account), killed with SIGKILL and started again at once; and the client
//! side, which, like a real client, sends a request the kill cut off again, with the same body,
//! to whichever process serves now.

use blackbox::{Server, TOKEN};
use reqwest::{Method, StatusCode};
use serde_json::Value;
use std::process::Command;
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

/// Makes a `fulfillment serve` command (on port 0) of the variant under torture.
pub type Launcher = Box<dyn Fn() -> Command + Send + Sync>;

pub struct Service {
    launch: Launcher,
    args: Vec<String>,
    server: Mutex<Option<Server>>,
    /// The address of the process serving now; `None` while there is none.
    base: watch::Sender<Option<String>>,
    kills: AtomicU32,
    /// Requests a kill cut off (sent again).
    cut_off: AtomicU32,
    /// Panics seen in the output of any process of the run.
    panics: Mutex<Vec<String>>,
    /// What the repair loops of every process of the run logged having repaired.
    repairs: Mutex<Repairs>,
    http: reqwest::Client,
}

impl Service {
    /// Starts the service `launch` makes, with the test token and `args`.
    pub fn start(launch: Launcher, args: &[&str]) -> Service {
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        let server = Server::spawn(command(&launch, &args));
        let (base, _) = watch::channel(Some(server.base.clone()));
        Service {
            launch,
            args,
            server: Mutex::new(Some(server)),
            base,
            kills: AtomicU32::new(0),
            cut_off: AtomicU32::new(0),
            panics: Mutex::new(Vec::new()),
            repairs: Mutex::new(Repairs::default()),
            http: blackbox::client(),
        }
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
            self.note_output(&old);
        }
        self.kills.fetch_add(1, Ordering::SeqCst);
        let server = Server::spawn(command(&self.launch, &self.args));
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
        self.note_output(&server);
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

    /// What the repair loops logged (complete once the last process stopped).
    pub fn repairs(&self) -> Repairs {
        *self.repairs.lock().unwrap()
    }

    fn note_output(&self, server: &Server) {
        let output = server.stderr.text() + &server.stdout.text();
        let mut panics = self.panics.lock().unwrap();
        panics.extend(
            output
                .lines()
                .filter(|l| l.contains("panicked"))
                .map(str::to_owned),
        );
        self.repairs.lock().unwrap().add(&output);
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

/// The repairs a run's repair loops logged, by kind (one log line each).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Repairs {
    pub started: usize,
    pub refunded_late_charges: usize,
    pub released_stock: usize,
    pub marked_shipped: usize,
    pub incidents_recorded: usize,
}

impl Repairs {
    pub fn total(&self) -> usize {
        self.started
            + self.refunded_late_charges
            + self.released_stock
            + self.marked_shipped
            + self.incidents_recorded
    }

    fn add(&mut self, output: &str) {
        let count = |what: &str| output.lines().filter(|l| l.contains(what)).count();
        self.started += count("repair: started the execution");
        self.refunded_late_charges += count("repair: refunded a charge");
        self.released_stock += count("repair: released the stock");
        self.marked_shipped += count("repair: marked shipped");
        self.incidents_recorded += count("repair: the order's execution ended");
    }
}

fn command(launch: &Launcher, args: &[String]) -> Command {
    let mut cmd = launch();
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
