//! A fault-injecting HTTP proxy on `127.0.0.1:0`, put between the service and one of its
//! dependencies (the fake Stripe, the fake EasyPost, moto's DynamoDB, the engine standing in
//! for Step Functions). Each request, by a seeded draw, is passed through untouched or meets one
//! fault, answered in the dependency's own error shape:
//! - **unavailable**: a 5xx before anything reaches the dependency (nothing was done);
//! - **throttled**: the dependency's "slow down" answer (429 for the providers, a 400
//!   `ThrottlingException` for AWS), before anything reaches it;
//! - **lost**: the request goes through and is applied, and its answer is replaced by a 500, as
//!   when a load balancer loses it: the caller cannot tell this from "unavailable" and must
//!   find out, or retry idempotently;
//! - **cut**: the request goes through and is applied, and the connection breaks halfway
//!   through its answer (the status and headers sent, the body cut short).
//!
//! Faults can be switched off ([`FaultProxy::pause`]) for a run's set-up and its final checks,
//! and every fault is counted ([`FaultProxy::injected`]), as is every AWS call by its API
//! ([`FaultProxy::calls`], from the `X-Amz-Target` header).

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Whose error shapes the proxy answers in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// AWS's JSON protocols (DynamoDB, Step Functions): `{"__type", "message"}` and the
    /// `x-amzn-ErrorType` header.
    Aws,
    /// Stripe's `{"error": {"type", "code", "message"}}`.
    Stripe,
    /// EasyPost's `{"error": {"code", "message", "errors"}}`.
    EasyPost,
}

/// The chance of each fault per request (the rest pass untouched).
#[derive(Debug, Clone, Copy, Default)]
pub struct Faults {
    pub unavailable: f64,
    pub throttled: f64,
    pub lost: f64,
    pub cut: f64,
}

/// How many requests passed and how many met each fault.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Injected {
    pub requests: u64,
    pub unavailable: u64,
    pub throttled: u64,
    pub lost: u64,
    pub cut: u64,
}

impl fmt::Display for Injected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} requests, {} unavailable, {} throttled, {} applied with the answer lost, {} \
             applied with the answer cut short",
            self.requests, self.unavailable, self.throttled, self.lost, self.cut
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    Unavailable,
    Throttled,
    Lost,
    Cut,
}

struct Shared {
    upstream: String,
    dialect: Dialect,
    faults: Faults,
    rng: Mutex<StdRng>,
    paused: AtomicBool,
    requests: AtomicU64,
    unavailable: AtomicU64,
    throttled: AtomicU64,
    lost: AtomicU64,
    cut: AtomicU64,
    /// Requests by their `X-Amz-Target` (`AWSStepFunctions.DescribeExecution`, …): calls,
    /// and the items they carried ([`items_in`]).
    targets: Mutex<HashMap<String, ApiCalls>>,
    http: reqwest::Client,
}

/// The requests of one AWS API that reached the proxy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ApiCalls {
    pub calls: u64,
    /// The items they carried: a transaction's or a batch's items (DynamoDB bills each,
    /// a transactional one twice), one for any other call.
    pub items: u64,
}

/// The items of one AWS request: `TransactItems` of a DynamoDB transaction, the requests or
/// keys of a batch, else 1.
fn items_in(target: &str, body: &[u8]) -> u64 {
    let batch = target.ends_with(".BatchWriteItem") || target.ends_with(".BatchGetItem");
    if !batch && !target.contains(".Transact") {
        return 1;
    }
    let Ok(body) = serde_json::from_slice::<Value>(body) else {
        return 1;
    };
    let count = |v: &Value| v.as_array().map_or(0, |a| a.len() as u64);
    let n = match body.get("TransactItems") {
        Some(items) => count(items),
        None => body
            .get("RequestItems")
            .and_then(Value::as_object)
            .map_or(0, |tables| {
                tables
                    .values()
                    .map(|t| count(t.get("Keys").unwrap_or(t)))
                    .sum()
            }),
    };
    n.max(1)
}

/// A running proxy; it stops with the test's runtime.
#[derive(Clone)]
pub struct FaultProxy {
    /// Scheme, host and port: use it where the dependency's base URL or endpoint goes.
    pub base_url: String,
    shared: Arc<Shared>,
}

impl FaultProxy {
    /// A proxy to `upstream` (scheme, host and port), drawing its faults from `seed`.
    pub async fn start(upstream: &str, dialect: Dialect, faults: Faults, seed: u64) -> FaultProxy {
        let shared = Arc::new(Shared {
            upstream: upstream.trim_end_matches('/').to_owned(),
            dialect,
            faults,
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            paused: AtomicBool::new(false),
            requests: AtomicU64::new(0),
            unavailable: AtomicU64::new(0),
            throttled: AtomicU64::new(0),
            lost: AtomicU64::new(0),
            cut: AtomicU64::new(0),
            targets: Mutex::new(HashMap::new()),
            // No timeout of its own: the caller's decides how long it waits (a held answer
            // is the dependency's to give).
            http: reqwest::Client::builder()
                .no_proxy()
                .build()
                .expect("an HTTP client"),
        });
        let app = Router::new().fallback(forward).with_state(shared.clone());
        let base_url = testkit::serve_on_loopback(app).await;
        FaultProxy { base_url, shared }
    }

    /// While paused, every request passes untouched.
    pub fn pause(&self, paused: bool) {
        self.shared.paused.store(paused, Ordering::SeqCst);
    }

    /// How many requests named `target` in their `X-Amz-Target` header (an AWS API, e.g.
    /// `AWSStepFunctions.DescribeExecution`) reached the proxy, faulted or not.
    pub fn calls(&self, target: &str) -> u64 {
        let targets = self.shared.targets.lock().expect("targets");
        targets.get(target).map_or(0, |c| c.calls)
    }

    /// Every AWS API called through the proxy so far, by its `X-Amz-Target`.
    pub fn api_calls(&self) -> HashMap<String, ApiCalls> {
        self.shared.targets.lock().expect("targets").clone()
    }

    pub fn injected(&self) -> Injected {
        let s = &self.shared;
        Injected {
            requests: s.requests.load(Ordering::SeqCst),
            unavailable: s.unavailable.load(Ordering::SeqCst),
            throttled: s.throttled.load(Ordering::SeqCst),
            lost: s.lost.load(Ordering::SeqCst),
            cut: s.cut.load(Ordering::SeqCst),
        }
    }
}

impl Shared {
    fn draw(&self) -> Option<Fault> {
        if self.paused.load(Ordering::SeqCst) {
            return None;
        }
        let u: f64 = self.rng.lock().expect("rng").random();
        let f = self.faults;
        if u < f.unavailable {
            Some(Fault::Unavailable)
        } else if u < f.unavailable + f.throttled {
            Some(Fault::Throttled)
        } else if u < f.unavailable + f.throttled + f.lost {
            Some(Fault::Lost)
        } else if u < f.unavailable + f.throttled + f.lost + f.cut {
            Some(Fault::Cut)
        } else {
            None
        }
    }

    fn count(&self, fault: Fault) {
        let counter = match fault {
            Fault::Unavailable => &self.unavailable,
            Fault::Throttled => &self.throttled,
            Fault::Lost => &self.lost,
            Fault::Cut => &self.cut,
        };
        counter.fetch_add(1, Ordering::SeqCst);
    }

    /// The dependency's own answer for `fault`.
    fn answer(&self, fault: Fault) -> Response {
        let (status, kind, message) = match fault {
            Fault::Unavailable => (
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                "injected outage",
            ),
            Fault::Throttled => (
                match self.dialect {
                    Dialect::Aws => StatusCode::BAD_REQUEST,
                    _ => StatusCode::TOO_MANY_REQUESTS,
                },
                "throttled",
                "injected throttling: rate exceeded",
            ),
            Fault::Lost | Fault::Cut => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "lost",
                "injected: the request was applied and its answer lost",
            ),
        };
        let (body, error_type): (Value, Option<&str>) = match (self.dialect, kind) {
            (Dialect::Aws, "throttled") => (
                json!({"__type": "ThrottlingException", "message": message}),
                Some("ThrottlingException"),
            ),
            (Dialect::Aws, "unavailable") => (
                json!({"__type": "ServiceUnavailable", "message": message}),
                Some("ServiceUnavailable"),
            ),
            (Dialect::Aws, _) => (
                json!({"__type": "InternalFailure", "message": message}),
                Some("InternalFailure"),
            ),
            (Dialect::Stripe, "throttled") => (
                json!({"error": {"type": "invalid_request_error", "code": "rate_limit", "message": message}}),
                None,
            ),
            (Dialect::Stripe, _) => (
                json!({"error": {"type": "api_error", "message": message}}),
                None,
            ),
            (Dialect::EasyPost, "throttled") => (
                json!({"error": {"code": "RATE_LIMITED", "message": message, "errors": []}}),
                None,
            ),
            (Dialect::EasyPost, _) => (
                json!({"error": {"code": "INTERNAL_SERVER_ERROR", "message": message, "errors": []}}),
                None,
            ),
        };
        let mut response = (status, axum::Json(body)).into_response();
        if let Some(error_type) = error_type {
            let headers = response.headers_mut();
            headers.insert("x-amzn-errortype", error_type.parse().expect("header"));
            headers.insert(
                "content-type",
                "application/x-amz-json-1.0".parse().expect("header"),
            );
        }
        response
    }
}

/// Headers that belong to one hop, never forwarded.
fn hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "host" | "connection" | "content-length" | "transfer-encoding" | "keep-alive" | "upgrade"
    )
}

async fn forward(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    shared.requests.fetch_add(1, Ordering::SeqCst);
    if let Some(target) = headers.get("x-amz-target").and_then(|t| t.to_str().ok()) {
        let items = items_in(target, &body);
        let mut targets = shared.targets.lock().expect("targets");
        let counted = targets.entry(target.to_owned()).or_default();
        counted.calls += 1;
        counted.items += items;
    }
    let fault = shared.draw();
    if let Some(fault @ (Fault::Unavailable | Fault::Throttled)) = fault {
        shared.count(fault);
        return shared.answer(fault);
    }
    let target = format!(
        "{}{}",
        shared.upstream,
        uri.path_and_query().map_or("/", |p| p.as_str())
    );
    let mut request = shared.http.request(method, target).body(body);
    for (name, value) in &headers {
        if !hop_by_hop(name) {
            request = request.header(name, value);
        }
    }
    let upstream = match request.send().await {
        Ok(upstream) => upstream,
        Err(e) => {
            return (
                StatusCode::BAD_GATEWAY,
                format!("the proxy's upstream did not answer: {e}"),
            )
                .into_response();
        }
    };
    let status = upstream.status();
    let mut answer = HeaderMap::new();
    for (name, value) in upstream.headers() {
        if !hop_by_hop(name) {
            answer.append(name, value.clone());
        }
    }
    let bytes = match upstream.bytes().await {
        Ok(bytes) => bytes,
        Err(e) => {
            return (
                StatusCode::BAD_GATEWAY,
                format!("the proxy's upstream answer was cut short: {e}"),
            )
                .into_response();
        }
    };
    match fault {
        Some(Fault::Lost) => {
            shared.count(Fault::Lost);
            shared.answer(Fault::Lost)
        }
        Some(Fault::Cut) => {
            shared.count(Fault::Cut);
            // The length promised, half the body sent, then the connection breaks.
            answer.insert(
                "content-length",
                bytes.len().max(2).to_string().parse().expect("header"),
            );
            let half = bytes.slice(..bytes.len() / 2);
            let broken: [Result<Bytes, std::io::Error>; 2] = [
                Ok(half),
                Err(std::io::Error::other("injected: the connection broke")),
            ];
            let body = Body::from_stream(futures_util::stream::iter(broken));
            (status, answer, body).into_response()
        }
        _ => (status, answer, bytes).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use testkit::fake_stripe::{FakeStripe, SECRET_KEY};

    const CHARGE: [(&str, &str); 5] = [
        ("amount", "1500"),
        ("currency", "usd"),
        ("payment_method", "pm_card_visa"),
        ("confirm", "true"),
        ("metadata[order_id]", "o-1"),
    ];

    async fn try_charge(proxy: &FaultProxy) -> reqwest::Result<reqwest::Response> {
        crate::client()
            .post(format!("{}/v1/payment_intents", proxy.base_url))
            .bearer_auth(SECRET_KEY)
            .header("Idempotency-Key", "charge:o-1")
            .form(&CHARGE)
            .send()
            .await
    }

    async fn charge(proxy: &FaultProxy) -> reqwest::Response {
        try_charge(proxy).await.expect("the proxy answers")
    }

    async fn proxy_to(stripe: &FakeStripe, dialect: Dialect, faults: Faults) -> FaultProxy {
        FaultProxy::start(&stripe.base_url, dialect, faults, 1).await
    }

    #[tokio::test]
    async fn an_answer_lost_after_the_work_is_a_500_and_the_work_stays_done() {
        let stripe = FakeStripe::start().await;
        let lost = Faults {
            lost: 1.0,
            ..Faults::default()
        };
        let proxy = proxy_to(&stripe, Dialect::Stripe, lost).await;
        let answer = charge(&proxy).await;
        assert_eq!(answer.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body: Value = answer.json().await.expect("Stripe's error shape");
        assert_eq!(body["error"]["type"], "api_error");
        assert_eq!(stripe.charges_of("o-1"), 1);
        assert_eq!(proxy.injected().lost, 1);
    }

    #[tokio::test]
    async fn an_answer_cut_short_breaks_after_the_work_is_done() {
        let stripe = FakeStripe::start().await;
        let cut = Faults {
            cut: 1.0,
            ..Faults::default()
        };
        let proxy = proxy_to(&stripe, Dialect::Stripe, cut).await;
        // Broken before the client read the head, or while it read the body.
        let read = match try_charge(&proxy).await {
            Ok(answer) => answer.bytes().await.map(|_| ()),
            Err(e) => Err(e),
        };
        assert!(read.is_err(), "the answer must break");
        assert_eq!(stripe.charges_of("o-1"), 1);
        assert_eq!(proxy.injected().cut, 1);
    }

    #[tokio::test]
    async fn an_outage_or_a_throttle_answers_before_the_dependency_sees_anything() {
        let stripe = FakeStripe::start().await;
        let down = Faults {
            unavailable: 1.0,
            ..Faults::default()
        };
        let proxy = proxy_to(&stripe, Dialect::Stripe, down).await;
        assert_eq!(
            charge(&proxy).await.status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
        let slow_down = Faults {
            throttled: 1.0,
            ..Faults::default()
        };
        let aws = proxy_to(&stripe, Dialect::Aws, slow_down).await;
        let answer = charge(&aws).await;
        assert_eq!(answer.status(), StatusCode::BAD_REQUEST);
        assert_eq!(
            answer.headers()["x-amzn-errortype"],
            "ThrottlingException",
            "the header the AWS SDK reads the error code from"
        );
        assert!(stripe.requests().is_empty(), "{:?}", stripe.requests());
        assert_eq!(stripe.charges_of("o-1"), 0);
    }

    #[tokio::test]
    async fn a_paused_proxy_passes_every_request_and_answer_untouched() {
        let stripe = FakeStripe::start().await;
        let everything = Faults {
            unavailable: 0.25,
            throttled: 0.25,
            lost: 0.25,
            cut: 0.25,
        };
        let proxy = proxy_to(&stripe, Dialect::Stripe, everything).await;
        proxy.pause(true);
        let answer = charge(&proxy).await;
        assert_eq!(answer.status(), StatusCode::OK);
        let intent: Value = answer.json().await.expect("the intent");
        assert_eq!(intent["status"], "succeeded");
        let again = charge(&proxy).await;
        assert_eq!(again.headers()["idempotent-replayed"], "true");
        assert_eq!(proxy.injected().requests, 2);
        assert_eq!(stripe.charges_of("o-1"), 1);
    }

    #[test]
    fn a_transaction_or_a_batch_counts_its_items_and_any_other_call_one() {
        let transaction =
            br#"{"TransactItems": [{"Put": {}}, {"Update": {}}, {"ConditionCheck": {}}]}"#;
        assert_eq!(
            items_in("DynamoDB_20120810.TransactWriteItems", transaction),
            3
        );
        let gets = br#"{"RequestItems": {"t": {"Keys": [{}, {}]}, "u": {"Keys": [{}]}}}"#;
        assert_eq!(items_in("DynamoDB_20120810.BatchGetItem", gets), 3);
        let writes = br#"{"RequestItems": {"t": [{"PutRequest": {}}, {"DeleteRequest": {}}]}}"#;
        assert_eq!(items_in("DynamoDB_20120810.BatchWriteItem", writes), 2);
        assert_eq!(items_in("DynamoDB_20120810.UpdateItem", b"{}"), 1);
        assert_eq!(items_in("AWSStepFunctions.SendTaskSuccess", b"not json"), 1);
    }
}
