//! The HTTP API: `fn router(state) -> Router`. Handlers, problem+json errors, operator auth,
//! the OpenAPI document and Swagger UI live below this module.

pub mod answers;
pub mod approvals;
pub mod auth;
pub mod cancel;
pub mod conditional;
pub mod events;
pub mod extract;
pub mod health;
pub mod incidents;
pub mod inventory;
pub mod listing;
pub mod metrics;
pub mod openapi;
pub mod orders;
pub mod problem;
pub mod rate_limit;
pub mod server;
pub mod validate;
pub mod webhooks;

use axum::body::Body;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use intake::OrderIntake;
use problem::{Problem, ProblemKind};
use std::any::Any;
use std::sync::Arc;
use std::time::Duration;
use store::Ports;
use tower::ServiceBuilder;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::sensitive_headers::SetSensitiveRequestHeadersLayer;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::{DefaultOnResponse, TraceLayer};
use tracing::Level;
use utoipa_swagger_ui::{Config, SwaggerUi};
use workflow::WorkflowPort;

use telemetry::Metrics;

/// An operator bearer token. Never printed: `Debug` shows a placeholder.
#[derive(Clone)]
pub struct OperatorToken(Arc<str>);

impl OperatorToken {
    pub fn new(token: impl Into<Arc<str>>) -> Self {
        OperatorToken(token.into())
    }

    /// The token itself, for the one place that must show it (the start-up banner).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for OperatorToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OperatorToken(***)")
    }
}

/// Limits every request is held to.
#[derive(Debug, Clone)]
pub struct HttpLimits {
    /// The largest request body accepted (413 above).
    pub max_body_bytes: usize,
    /// How long a request may take before it is answered 503.
    pub request_timeout: Duration,
    /// How long a client may take to send a request's headers (then the connection is closed;
    /// see [`server::serve`]) and, once they are in, its body (then it is answered 408).
    pub read_timeout: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_body_bytes: 64 * 1024,
            request_timeout: Duration::from_secs(30),
            read_timeout: Duration::from_secs(10),
        }
    }
}

/// What the handlers share.
#[derive(Clone)]
pub struct AppState {
    /// The orders and stock, and the payment provider and carrier (read by the status view).
    pub ports: Ports,
    pub workflow: Arc<dyn WorkflowPort>,
    pub intake: Arc<OrderIntake>,
    /// Checks the API keys requests present.
    pub auth: Arc<auth::Authenticator>,
    pub limits: HttpLimits,
    /// `Metrics::new()`; served at `/metrics`.
    pub metrics: Metrics,
    /// `/readyz`'s probe, which asks the workflow service at most once in a while.
    pub readiness: Arc<health::Readiness>,
    /// Webhook endpoints, their deliveries, and each order's events (the status stream's).
    pub webhooks: Arc<dyn store::WebhookRepository>,
    pub webhook_settings: ::webhooks::WebhookSettings,
    /// The status streams open, per principal.
    pub streams: events::OpenStreams,
}

/// The header carrying a request's id (set when the client sends none, and echoed back).
pub const REQUEST_ID: &str = "x-request-id";

/// The service's routes, and `more` of the same state (the operator console's), with their
/// middleware: request ids, tracing, metrics, problem+json for every error, body limit and read
/// deadline, timeout and panic recovery.
pub fn router(state: AppState, more: Router<AppState>) -> Router {
    let limits = state.limits.clone();
    let metrics = state.metrics.clone();
    let swagger = SwaggerUi::new("/docs").config(Config::from("/openapi.json"));
    Router::new()
        .route("/", get(health::index))
        .route("/orders", post(orders::place).get(listing::list))
        .route("/orders/{order_id}", get(orders::get_order))
        .route("/orders/{order_id}/status", get(orders::status))
        .route("/orders/{order_id}/history", get(orders::history))
        .route("/orders/{order_id}/cancel", post(cancel::cancel))
        .route("/orders/{order_id}/events", get(events::stream))
        .route(
            "/webhooks/endpoints",
            post(webhooks::create).get(webhooks::list),
        )
        .route(
            "/webhooks/endpoints/{endpoint_id}",
            get(webhooks::get).delete(webhooks::delete),
        )
        .route(
            "/webhooks/endpoints/{endpoint_id}/rotate",
            post(webhooks::rotate),
        )
        .route(
            "/webhooks/endpoints/{endpoint_id}/enable",
            post(webhooks::enable),
        )
        .route(
            "/webhooks/endpoints/{endpoint_id}/deliveries",
            get(webhooks::deliveries),
        )
        .route(
            "/webhooks/endpoints/{endpoint_id}/replay",
            post(webhooks::replay),
        )
        .route(
            "/orders/{order_id}/approval",
            post(approvals::decide_approval),
        )
        .route("/approvals", get(approvals::pending))
        .route("/incidents", get(incidents::list))
        .route("/orders/{order_id}/redrive", post(incidents::redrive))
        .route("/orders/{order_id}/resolve", post(incidents::resolve))
        .route("/inventory", get(inventory::list_stock))
        .route(
            "/inventory/{sku}",
            get(inventory::get_stock).put(inventory::put_stock),
        )
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(health::metrics))
        .route("/openapi.json", get(openapi::openapi_json))
        .merge(more)
        .merge(swagger)
        .fallback(unknown_route)
        .with_state(state)
        .layer(DefaultBodyLimit::max(limits.max_body_bytes))
        .layer(Extension(extract::BodyLimits {
            max_bytes: limits.max_body_bytes,
            read_timeout: limits.read_timeout,
        }))
        .layer(
            ServiceBuilder::new()
                .layer(SetSensitiveRequestHeadersLayer::new([
                    header::AUTHORIZATION,
                ]))
                .layer(SetRequestIdLayer::new(
                    header::HeaderName::from_static(REQUEST_ID),
                    MakeRequestUuid,
                ))
                .layer(
                    TraceLayer::new_for_http()
                        .make_span_with(request_span)
                        .on_response(DefaultOnResponse::new().level(Level::INFO)),
                )
                .layer(PropagateRequestIdLayer::new(
                    header::HeaderName::from_static(REQUEST_ID),
                ))
                .layer(axum::middleware::from_fn(problem::render_problems))
                .layer(axum::middleware::from_fn_with_state(
                    metrics,
                    metrics::track,
                ))
                .layer(CatchPanicLayer::custom(panicked))
                .layer(TimeoutLayer::with_status_code(
                    StatusCode::SERVICE_UNAVAILABLE,
                    limits.request_timeout,
                )),
        )
}

/// The span of one request: method, matched route, path and request id (never headers).
fn request_span(request: &Request<Body>) -> tracing::Span {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |p| p.as_str());
    let request_id = request
        .headers()
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    tracing::info_span!(
        "request",
        method = %request.method(),
        route,
        path = %request.uri().path(),
        request_id,
    )
}

async fn unknown_route() -> Problem {
    Problem::new(ProblemKind::NotFound, "no such resource")
}

fn panicked(panic: Box<dyn Any + Send + 'static>) -> Response {
    let message = telemetry::panic::message(panic.as_ref());
    Problem::internal(&format_args!("handler panicked: {message}")).into_response()
}
