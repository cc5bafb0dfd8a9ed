//! The load generator: HTTP/1.1 keep-alive on raw hyper client connections (cheap in CPU, since
//! it shares two cores with the server under test), driven open loop ([`open`], a fixed arrival
//! rate, latency from the *intended* send time) or closed loop ([`closed`], C connections each
//! sending as soon as answered). Requests come from a closure of the request index, so every
//! order gets its own id.

pub mod closed;
pub mod open;

use crate::stats::Latencies;
use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::TcpStream;

/// How long one request may take before it counts as an error (a hung server ends the run).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// One request to send.
#[derive(Debug, Clone)]
pub struct Spec {
    pub method: Method,
    pub path: String,
    pub token: Option<Arc<str>>,
    pub body: Option<Bytes>,
    /// More headers (e.g. the `accept` a peer's admin API needs).
    pub headers: Vec<(&'static str, &'static str)>,
}

impl Spec {
    pub fn get(path: impl Into<String>) -> Spec {
        Spec {
            method: Method::GET,
            path: path.into(),
            token: None,
            body: None,
            headers: Vec::new(),
        }
    }

    pub fn json(method: Method, path: impl Into<String>, body: impl Into<Bytes>) -> Spec {
        Spec {
            method,
            path: path.into(),
            token: None,
            body: Some(body.into()),
            headers: Vec::new(),
        }
    }

    pub fn header(mut self, name: &'static str, value: &'static str) -> Spec {
        self.headers.push((name, value));
        self
    }

    /// With a bearer key (the operator token the bench starts the service with).
    pub fn operator(mut self, token: &Arc<str>) -> Spec {
        self.token = Some(token.clone());
        self
    }

    fn request(&self, host: &str) -> Request<Full<Bytes>> {
        let mut builder = Request::builder()
            .method(self.method.clone())
            .uri(&self.path)
            .header("host", host);
        if let Some(token) = &self.token {
            builder = builder.header("authorization", format!("Bearer {token}"));
        }
        if self.body.is_some() {
            builder = builder.header("content-type", "application/json");
        }
        for (name, value) in &self.headers {
            builder = builder.header(*name, *value);
        }
        builder
            .body(Full::new(self.body.clone().unwrap_or_default()))
            .expect("a request from valid parts")
    }
}

/// Makes request `i` of a run.
pub type MakeRequest = Arc<dyn Fn(u64) -> Spec + Send + Sync>;

/// Told of every answer: request index, status, body, when it arrived. Lets a scenario start
/// work on an answer (the saga's sampled status polls) without waiting for the run to end.
pub type OnAnswer = Arc<dyn Fn(u64, u16, &Bytes, Instant) + Send + Sync>;

/// An open keep-alive connection.
pub struct Conn {
    sender: SendRequest<Full<Bytes>>,
    host: Arc<str>,
}

impl Conn {
    pub async fn open(addr: SocketAddr) -> Result<Conn> {
        let stream = tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(addr))
            .await
            .context("connect timed out")?
            .with_context(|| format!("connect to {addr}"))?;
        // Small requests and answers: no Nagle delay on either side of a keep-alive exchange.
        stream.set_nodelay(true)?;
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .context("HTTP/1 handshake")?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(Conn {
            sender,
            host: Arc::from(addr.to_string()),
        })
    }

    /// Sends `spec` and reads the whole answer: (status, body).
    pub async fn send(&mut self, spec: &Spec) -> Result<(u16, Bytes)> {
        let exchange = async {
            self.sender.ready().await?;
            let response = self.sender.send_request(spec.request(&self.host)).await?;
            let status = response.status().as_u16();
            let body = response.into_body().collect().await?.to_bytes();
            anyhow::Ok((status, body))
        };
        tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .with_context(|| format!("{} {} timed out", spec.method, spec.path))?
    }

    /// Whether the connection can take another request (the server may have closed it).
    pub fn usable(&self) -> bool {
        !self.sender.is_closed()
    }
}

/// Idle connections to one address, opened on demand up to a cap.
pub struct Pool {
    addr: SocketAddr,
    idle: Mutex<Vec<Conn>>,
    open: tokio::sync::Semaphore,
}

impl Pool {
    pub fn new(addr: SocketAddr, cap: usize) -> Arc<Pool> {
        Arc::new(Pool {
            addr,
            idle: Mutex::new(Vec::new()),
            open: tokio::sync::Semaphore::new(cap),
        })
    }

    /// Sends on an idle connection, or a new one while under the cap, or waits for one.
    pub async fn send(&self, spec: &Spec) -> Result<(u16, Bytes)> {
        let permit = self
            .open
            .acquire()
            .await
            .expect("the pool's semaphore is never closed");
        let idle = self.idle.lock().unwrap().pop();
        let mut conn = match idle {
            Some(conn) if conn.usable() => conn,
            _ => Conn::open(self.addr).await?,
        };
        let mut answer = conn.send(spec).await;
        if answer
            .as_ref()
            .is_err_and(|e| !e.is::<tokio::time::error::Elapsed>())
        {
            // The server closes a keep-alive connection idle for its read timeout, and may do
            // so just as it is used: send again once on a fresh connection, as HTTP clients
            // do. Safe for every request here: orders and decisions are idempotent by key.
            conn = Conn::open(self.addr).await?;
            answer = conn.send(spec).await;
        }
        if answer.is_ok() && conn.usable() {
            self.idle.lock().unwrap().push(conn);
        }
        drop(permit);
        answer
    }

    /// `send`, the answer's body as JSON when it is 2xx.
    pub async fn json(&self, spec: &Spec) -> Result<serde_json::Value> {
        let (status, body) = self.send(spec).await?;
        anyhow::ensure!(
            (200..300).contains(&status),
            "{} {} answered {status}: {}",
            spec.method,
            spec.path,
            String::from_utf8_lossy(&body)
        );
        Ok(serde_json::from_slice(&body)?)
    }
}

/// What a run measured.
#[derive(Debug)]
pub struct Outcome {
    pub latencies: Latencies,
    /// Open loop: how late after its intended time each request was handed to its connection
    /// (the generator's own delay, part of every latency above).
    pub lateness: Latencies,
    /// Answers by HTTP status.
    pub statuses: BTreeMap<u16, u64>,
    /// Requests that got no answer (connection refused or reset, timeout).
    pub failures: u64,
    pub first_failure: Option<String>,
    /// From the first send to the last answer.
    pub elapsed: Duration,
}

impl Outcome {
    fn new() -> Outcome {
        Outcome {
            latencies: Latencies::new(),
            lateness: Latencies::new(),
            statuses: BTreeMap::new(),
            failures: 0,
            first_failure: None,
            elapsed: Duration::ZERO,
        }
    }

    fn record(&mut self, latency: Duration, answer: &Result<(u16, Bytes)>) {
        match answer {
            Ok((status, _)) => {
                self.latencies.record(latency);
                *self.statuses.entry(*status).or_default() += 1;
            }
            Err(e) => {
                self.failures += 1;
                self.first_failure.get_or_insert_with(|| format!("{e:#}"));
            }
        }
    }

    /// Answers with this status.
    pub fn count(&self, status: u16) -> u64 {
        self.statuses.get(&status).copied().unwrap_or_default()
    }

    pub fn answered(&self) -> u64 {
        self.statuses.values().sum()
    }

    /// Answers per second over the run.
    pub fn rate(&self, count: u64) -> f64 {
        count as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Everything that was not `expected`: `"503×4, 2 without answer (reason)"`, or "".
    pub fn errors(&self, expected: u16) -> String {
        let mut parts: Vec<String> = self
            .statuses
            .iter()
            .filter(|(s, _)| **s != expected)
            .map(|(s, n)| format!("{s}×{n}"))
            .collect();
        if self.failures > 0 {
            parts.push(format!(
                "{} without answer ({})",
                self.failures,
                self.first_failure.as_deref().unwrap_or("?")
            ));
        }
        parts.join(", ")
    }

    /// Fails unless every request was answered `expected`.
    pub fn require_all(&self, expected: u16, what: &str) -> Result<()> {
        let errors = self.errors(expected);
        anyhow::ensure!(errors.is_empty(), "{what}: {errors}");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A keep-alive HTTP/1.1 server on loopback answering every GET `200 ok` after `delay`
    /// (`/slow` after a second): enough to drive the loops without the service.
    async fn server(delay: Duration) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 1024];
                    loop {
                        let Ok(n) = stream.read(&mut chunk).await else {
                            return;
                        };
                        if n == 0 {
                            return;
                        }
                        buf.extend_from_slice(&chunk[..n]);
                        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                            buf.drain(..end + 4);
                            let wait = if head.starts_with("GET /slow") {
                                Duration::from_secs(1)
                            } else {
                                delay
                            };
                            tokio::time::sleep(wait).await;
                            let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                            if stream.write_all(answer).await.is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        });
        addr
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_closed_loop_sends_exactly_its_count_on_its_connections() {
        let addr = server(Duration::from_millis(1)).await;
        let make: MakeRequest = Arc::new(|i| Spec::get(format!("/n/{i}")));
        let outcome = closed::run(addr, 4, closed::Until::count(40), make, None)
            .await
            .unwrap();
        assert_eq!(outcome.count(200), 40);
        assert_eq!(outcome.failures, 0);
        outcome.require_all(200, "closed loop").unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_open_loop_counts_a_stall_from_the_intended_time() {
        // Request 0 stalls for a second; at 100 req/s the other 49 are due during it. They go
        // out on new connections, so they are answered quickly, but request 0's latency is
        // the whole second — and it is not hidden by the later requests' short ones.
        let addr = server(Duration::from_millis(1)).await;
        let make: MakeRequest = Arc::new(|i| {
            Spec::get(if i == 0 {
                "/slow".to_owned()
            } else {
                format!("/n/{i}")
            })
        });
        let outcome = open::run(addr, 100.0, 50, make, None).await.unwrap();
        assert_eq!(outcome.count(200), 50);
        // Every request's lateness is recorded, and request 0's stall made none of the others
        // late to go out: they went on new connections.
        assert_eq!(outcome.lateness.len(), 50);
        assert!(outcome.lateness.max() < Duration::from_millis(500));
        assert!(outcome.latencies.max() >= Duration::from_secs(1));
        assert!(outcome.latencies.quantile(0.5) < Duration::from_millis(500));
        // The run lasts as long as its slowest request, not rate × count.
        assert!(outcome.elapsed >= Duration::from_secs(1));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unreachable_server_is_counted_not_hung_on() {
        let addr = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let make: MakeRequest = Arc::new(|_| Spec::get("/"));
        let outcome = open::run(addr, 1000.0, 5, make, None).await.unwrap();
        assert_eq!(outcome.failures, 5);
        assert!(outcome.errors(200).contains("5 without answer"));
    }
}
