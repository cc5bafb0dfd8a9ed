//! The real service behind the router, on temporary SQLite files: `serve`'s own composition
//! (`service::startup::App`: the embedded engine, the store with its sandbox gateways, the
//! saga's workers, order intake and its start queue, the repair loop, webhook delivery),
//! driven without a socket.

use api::http::{AppState, HttpLimits, OperatorToken};
use axum::Router;
use axum::body::{Body, to_bytes};
use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use intake::OrderIntake;
use serde_json::{Value, json};
use service::config::Settings;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant};
use store::{Order, OrderId, OrderRepository, PaymentGateway};
use tower::ServiceExt;
use workflow::SagaSettings;

/// The operator token the service is started with (`--operator-token`).
pub const TOKEN: &str = "op-token-7f3a9c1e5b";
/// The client principal whose key the tests place and read orders with.
pub const CLIENT: &str = "shop";
pub const DEADLINE: Duration = Duration::from_secs(60);
pub const PROBLEM_JSON: &str = "application/problem+json";

pub struct App {
    dir: tempfile::TempDir,
    /// The key of [`CLIENT`].
    pub client_key: String,
    pub router: Router,
    pub state: AppState,
    /// The composed service: its workers, start queue, repair loop and webhook delivery run.
    app: service::startup::App,
}

/// An answer of the router.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub bytes: Vec<u8>,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.bytes)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.bytes)))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|v| v.to_str().unwrap())
    }

    /// Asserts a problem+json answer of `status` and type `…/problems/{slug}`; returns its body.
    pub fn problem(&self, status: u16, slug: &str) -> Value {
        assert_eq!(self.status.as_u16(), status, "{}", self.text());
        assert_eq!(
            self.header("content-type"),
            Some(PROBLEM_JSON),
            "{}",
            self.text()
        );
        let body = self.json();
        assert_eq!(
            body["type"],
            format!("https://fulfillment.dev/problems/{slug}"),
            "{body}"
        );
        assert_eq!(body["status"], status, "{body}");
        assert!(
            body["title"].as_str().is_some_and(|t| !t.is_empty()),
            "{body}"
        );
        assert!(body["detail"].is_string(), "{body}");
        assert!(
            body["instance"]
                .as_str()
                .is_some_and(|i| i.starts_with('/')),
            "{body}"
        );
        body
    }

    /// The fields a 422 lists.
    pub fn invalid_fields(&self) -> Vec<String> {
        let body = self.problem(422, "validation-failed");
        body["errors"]
            .as_array()
            .expect("errors")
            .iter()
            .map(|e| {
                assert!(e["message"].as_str().is_some_and(|m| !m.is_empty()), "{e}");
                e["field"].as_str().unwrap().to_owned()
            })
            .collect()
    }
}

impl App {
    pub async fn start() -> App {
        App::with(SagaSettings::default(), HttpLimits::default()).await
    }

    pub async fn with(settings: SagaSettings, limits: HttpLimits) -> App {
        App::build(settings, limits, |payments| payments).await
    }

    /// The service as `serve` composes it ([`service::startup::App`]) on temporary files, with
    /// its payment gateway (the saga's and the HTTP layer's) wrapped by `payments`.
    pub async fn build(
        saga: SagaSettings,
        limits: HttpLimits,
        payments: impl FnOnce(Arc<dyn PaymentGateway>) -> Arc<dyn PaymentGateway>,
    ) -> App {
        let dir = tempfile::tempdir().unwrap();
        let mut settings = Settings::embedded(&dir.path().join("store.db")).unwrap();
        settings.saga = saga;
        settings.limits = limits;
        settings.operator_token = Some(OperatorToken::new(TOKEN));
        // Requests through the router have no peer address: they would all share one
        // failed-authentication budget, which the credential tests spend many times over.
        // The limits have tests of their own (`rate_limit`, tests/tests/rate_limits.rs).
        settings.rate_limits.failed_auth_per_minute = NonZeroU32::MAX;
        let mut opened = service::startup::open(&settings).await.unwrap();
        opened.ports.payments = payments(opened.ports.payments);
        let (client_key, _) = api::keys::create(opened.keys.as_ref(), CLIENT, store::Role::Client)
            .await
            .unwrap();
        let app = service::startup::App::build(&settings, opened)
            .await
            .unwrap();
        App {
            dir,
            client_key: client_key.expose().to_owned(),
            router: app.router.clone(),
            state: app.state.clone(),
            app,
        }
    }

    /// Stops the saga's workers and the approval keeper (see `service::startup::App`).
    pub async fn stop_workers(&mut self) {
        self.app.stop_workers().await;
    }

    /// Starts them again.
    pub fn start_workers(&mut self) {
        self.app.start_workers();
    }

    /// The same service with another order repository (for the HTTP layer and order intake).
    pub fn with_orders(&self, orders: Arc<dyn OrderRepository>) -> Router {
        let mut state = self.state.clone();
        state.ports.orders = orders.clone();
        state.intake = Arc::new(OrderIntake {
            orders,
            inventory: state.ports.inventory.clone(),
            workflow: state.workflow.clone(),
            settings: self.state.intake.settings.clone(),
            queue: None,
        });
        self.app.router_for(state)
    }

    /// The same service with another workflow port for the HTTP layer (the saga's workers keep
    /// the real one).
    pub fn with_workflow(&self, workflow: Arc<dyn workflow::WorkflowPort>) -> Router {
        let mut state = self.state.clone();
        state.workflow = workflow;
        self.app.router_for(state)
    }

    /// The same service with another payment gateway for the HTTP layer (the saga's workers keep
    /// the real one).
    pub fn with_payments(&self, payments: Arc<dyn PaymentGateway>) -> Router {
        let mut state = self.state.clone();
        state.ports.payments = payments;
        self.app.router_for(state)
    }

    /// Sends `request` as the client [`CLIENT`] unless it carries an `Authorization` of its own.
    pub async fn send(&self, request: Request<Body>) -> Reply {
        send(&self.router, self.as_client(request)).await
    }

    /// Sends `request` exactly as it is (no credential added).
    pub async fn send_anonymous(&self, request: Request<Body>) -> Reply {
        send(&self.router, request).await
    }

    /// `request` with the client's key, unless it carries an `Authorization` already.
    pub fn as_client(&self, mut request: Request<Body>) -> Request<Body> {
        if !request.headers().contains_key(header::AUTHORIZATION) {
            let bearer = format!("Bearer {}", self.client_key).parse().unwrap();
            request.headers_mut().insert(header::AUTHORIZATION, bearer);
        }
        request
    }

    /// A GET as the client [`CLIENT`].
    pub async fn get(&self, path: &str) -> Reply {
        self.send(Request::get(path).body(Body::empty()).unwrap())
            .await
    }

    pub async fn operator_get(&self, path: &str) -> Reply {
        self.send(
            Request::get(path)
                .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
                .body(Body::empty())
                .unwrap(),
        )
        .await
    }

    /// A JSON request with exactly `headers` (no credential unless they hold one).
    pub async fn json(
        &self,
        method: Method,
        path: &str,
        body: &Value,
        headers: &[(&str, &str)],
    ) -> Reply {
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header(header::CONTENT_TYPE, "application/json");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        self.send_anonymous(request.body(Body::from(body.to_string())).unwrap())
            .await
    }

    /// A JSON POST as the client [`CLIENT`].
    pub async fn post(&self, path: &str, body: &Value) -> Reply {
        let bearer = format!("Bearer {}", self.client_key);
        self.json(Method::POST, path, body, &[("authorization", &bearer)])
            .await
    }

    /// A JSON request as an operator.
    pub async fn operator(&self, method: Method, path: &str, body: &Value) -> Reply {
        let bearer = format!("Bearer {TOKEN}");
        self.json(method, path, body, &[("authorization", &bearer)])
            .await
    }

    pub async fn decide(&self, id: &str, decision: &str) -> Reply {
        self.operator(
            Method::POST,
            &format!("/orders/{id}/approval"),
            &json!({ "decision": decision }),
        )
        .await
    }

    /// Stocks `available` units of `sku`, priced at `price_cents` EUR in the catalog.
    pub async fn stock(&self, sku: &str, available: u64, price_cents: u64) {
        let r = self
            .operator(
                Method::PUT,
                &format!("/inventory/{sku}"),
                &json!({ "available": available, "price": {"cents": price_cents, "currency": "EUR"} }),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    }

    /// How many orders the store holds and how many executions the engine has, read from
    /// their SQLite files: what a refused request must leave as it was.
    pub fn footprint(&self) -> (u64, u64) {
        let count = |file: &str, table: &str| -> u64 {
            let conn = rusqlite::Connection::open_with_flags(
                self.dir.path().join(file),
                rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
            )
            .unwrap();
            conn.query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
                .unwrap()
        };
        (
            count("store.db", "orders"),
            count("store.engine.db", "executions"),
        )
    }

    /// The stored order, if any.
    pub async fn stored(&self, id: &str) -> Option<Order> {
        match OrderId::parse(id) {
            Ok(id) => self.state.ports.orders.get(&id).await.unwrap(),
            Err(_) => None,
        }
    }

    /// Polls the status endpoint until the order's saga status is `status`.
    pub async fn reaches(&self, id: &str, status: &str) -> Value {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let r = self.get(&format!("/orders/{id}/status")).await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.text());
            let body = r.json();
            if body["status"] == status {
                return body;
            }
            assert!(
                Instant::now() < deadline,
                "{id} never reached {status}: {body}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Polls until the order's execution has ended, and returns the status body.
    ///
    /// The status view reads the execution's status from the order's record, which the last
    /// step writes just before the execution ends: this also waits for the history to end.
    pub async fn settled(&self, id: &str) -> Value {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let body = self.get(&format!("/orders/{id}/status")).await.json();
            if body["executionStatus"]
                .as_str()
                .is_some_and(|s| s != "RUNNING")
                && self.history_ended(id).await
            {
                return body;
            }
            assert!(Instant::now() < deadline, "{id} never settled: {body}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Whether the order's execution history ends with the execution's end.
    async fn history_ended(&self, id: &str) -> bool {
        let history = self
            .get(&format!("/orders/{id}/history?maxResults=1000"))
            .await
            .json();
        let last = history["events"]
            .as_array()
            .and_then(|events| events.last())
            .map(|e| e["type"].clone());
        matches!(
            last.as_ref().and_then(Value::as_str),
            Some(
                "ExecutionSucceeded" | "ExecutionFailed" | "ExecutionAborted" | "ExecutionTimedOut"
            )
        )
    }
}

/// Sends `request` to `router` and reads the whole answer.
pub async fn send(router: &Router, request: Request<Body>) -> Reply {
    let response = router.clone().oneshot(request).await.unwrap();
    let (parts, body) = response.into_parts();
    let bytes = to_bytes(body, usize::MAX).await.unwrap().to_vec();
    Reply {
        status: parts.status,
        headers: parts.headers,
        bytes,
    }
}

/// A valid order body: `items` as (sku, quantity, unit price).
pub fn order(id: &str, items: &[(&str, u64, u64)]) -> Value {
    json!({
        "orderId": id,
        "customerId": "cus_1",
        "items": items
            .iter()
            .map(|(sku, q, p)| json!({"sku": sku, "quantity": q, "unitPriceCents": p}))
            .collect::<Vec<_>>(),
        "currency": "EUR",
        "paymentMethod": "pm_card_visa",
        "shippingAddress": {
            "name": "Ada Lovelace",
            "line1": "1 Analytical Way",
            "city": "London",
            "postalCode": "10115",
            "country": "GB"
        }
    })
}

/// One unit of `sku` at 25.00: below the approval threshold.
pub fn small(id: &str, sku: &str) -> Value {
    order(id, &[(sku, 1, 2_500)])
}

/// One unit of `sku` at 2,500.00: needs approval.
pub fn large(id: &str, sku: &str) -> Value {
    order(id, &[(sku, 1, 250_000)])
}
