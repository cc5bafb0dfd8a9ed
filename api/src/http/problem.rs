//! RFC 9457 problem details: every error the API answers, with a stable `type` URI per kind.
//! Handlers return [`Problem`]s; the outermost middleware ([`render_problems`]) fills in the
//! `instance` and turns any other error response (405, 408, 413 from a layer) into one too.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

/// The media type of every error body.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// Where the problem types live (`type` = this + the kind's slug).
pub const TYPE_BASE: &str = "https://fulfillment.dev/problems/";

/// Every kind of error the API answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProblemKind {
    MalformedJson,
    InvalidRequest,
    ValidationFailed,
    PriceMismatch,
    SkuNotPriced,
    CurrencyMismatch,
    Unauthorized,
    Forbidden,
    NotFound,
    OrderNotFound,
    SkuNotFound,
    MethodNotAllowed,
    PayloadTooLarge,
    UnsupportedMediaType,
    BodyTimeout,
    OrderConflict,
    OrderIdTaken,
    ApprovalConflict,
    NotAwaitingApproval,
    ApprovalExpired,
    OrderCancelled,
    OrderShipped,
    NotCancellable,
    NoOpenIncident,
    NotRedrivable,
    ExecutionRunning,
    HistoryPruned,
    EndpointNotFound,
    TooManyEndpoints,
    TooManyStreams,
    RateLimited,
    ServiceUnavailable,
    NotReady,
    Timeout,
    Internal,
}

impl ProblemKind {
    pub const ALL: [ProblemKind; 35] = [
        ProblemKind::MalformedJson,
        ProblemKind::InvalidRequest,
        ProblemKind::ValidationFailed,
        ProblemKind::PriceMismatch,
        ProblemKind::SkuNotPriced,
        ProblemKind::CurrencyMismatch,
        ProblemKind::Unauthorized,
        ProblemKind::Forbidden,
        ProblemKind::NotFound,
        ProblemKind::OrderNotFound,
        ProblemKind::SkuNotFound,
        ProblemKind::MethodNotAllowed,
        ProblemKind::PayloadTooLarge,
        ProblemKind::UnsupportedMediaType,
        ProblemKind::BodyTimeout,
        ProblemKind::OrderConflict,
        ProblemKind::OrderIdTaken,
        ProblemKind::ApprovalConflict,
        ProblemKind::NotAwaitingApproval,
        ProblemKind::ApprovalExpired,
        ProblemKind::OrderCancelled,
        ProblemKind::OrderShipped,
        ProblemKind::NotCancellable,
        ProblemKind::NoOpenIncident,
        ProblemKind::NotRedrivable,
        ProblemKind::ExecutionRunning,
        ProblemKind::HistoryPruned,
        ProblemKind::EndpointNotFound,
        ProblemKind::TooManyEndpoints,
        ProblemKind::TooManyStreams,
        ProblemKind::RateLimited,
        ProblemKind::ServiceUnavailable,
        ProblemKind::NotReady,
        ProblemKind::Timeout,
        ProblemKind::Internal,
    ];

    pub fn slug(self) -> &'static str {
        match self {
            ProblemKind::MalformedJson => "malformed-json",
            ProblemKind::InvalidRequest => "invalid-request",
            ProblemKind::ValidationFailed => "validation-failed",
            ProblemKind::PriceMismatch => "price-mismatch",
            ProblemKind::SkuNotPriced => "sku-not-priced",
            ProblemKind::CurrencyMismatch => "currency-mismatch",
            ProblemKind::Unauthorized => "unauthorized",
            ProblemKind::Forbidden => "forbidden",
            ProblemKind::NotFound => "not-found",
            ProblemKind::OrderNotFound => "order-not-found",
            ProblemKind::SkuNotFound => "sku-not-found",
            ProblemKind::MethodNotAllowed => "method-not-allowed",
            ProblemKind::PayloadTooLarge => "payload-too-large",
            ProblemKind::UnsupportedMediaType => "unsupported-media-type",
            ProblemKind::BodyTimeout => "body-timeout",
            ProblemKind::OrderConflict => "order-conflict",
            ProblemKind::OrderIdTaken => "order-id-taken",
            ProblemKind::ApprovalConflict => "approval-conflict",
            ProblemKind::NotAwaitingApproval => "not-awaiting-approval",
            ProblemKind::ApprovalExpired => "approval-expired",
            ProblemKind::OrderCancelled => "order-cancelled",
            ProblemKind::OrderShipped => "order-shipped",
            ProblemKind::NotCancellable => "not-cancellable",
            ProblemKind::NoOpenIncident => "no-open-incident",
            ProblemKind::NotRedrivable => "not-redrivable",
            ProblemKind::ExecutionRunning => "execution-running",
            ProblemKind::HistoryPruned => "history-pruned",
            ProblemKind::EndpointNotFound => "webhook-endpoint-not-found",
            ProblemKind::TooManyEndpoints => "too-many-endpoints",
            ProblemKind::TooManyStreams => "too-many-streams",
            ProblemKind::RateLimited => "rate-limited",
            ProblemKind::ServiceUnavailable => "service-unavailable",
            ProblemKind::NotReady => "not-ready",
            ProblemKind::Timeout => "timeout",
            ProblemKind::Internal => "internal",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            ProblemKind::MalformedJson => "Malformed JSON body",
            ProblemKind::InvalidRequest => "Invalid request",
            ProblemKind::ValidationFailed => "The request is not valid",
            ProblemKind::PriceMismatch => "A price is not the catalog's",
            ProblemKind::SkuNotPriced => "A SKU has no price",
            ProblemKind::CurrencyMismatch => "A SKU is priced in another currency",
            ProblemKind::Unauthorized => "Authentication required",
            ProblemKind::Forbidden => "An operator key is required",
            ProblemKind::NotFound => "Not found",
            ProblemKind::OrderNotFound => "Order not found",
            ProblemKind::SkuNotFound => "SKU not found",
            ProblemKind::MethodNotAllowed => "Method not allowed",
            ProblemKind::PayloadTooLarge => "Request body too large",
            ProblemKind::UnsupportedMediaType => "Unsupported media type",
            ProblemKind::BodyTimeout => "Request body not received in time",
            ProblemKind::OrderConflict => "Order exists with a different body",
            ProblemKind::OrderIdTaken => "Order id in use",
            ProblemKind::ApprovalConflict => "Another decision was made",
            ProblemKind::NotAwaitingApproval => "Order is not awaiting approval",
            ProblemKind::ApprovalExpired => "Approval window expired",
            ProblemKind::OrderCancelled => "The order was cancelled",
            ProblemKind::OrderShipped => "The order has shipped",
            ProblemKind::NotCancellable => "The order is already being undone",
            ProblemKind::NoOpenIncident => "Order has no open incident",
            ProblemKind::NotRedrivable => "Execution cannot be redriven",
            ProblemKind::ExecutionRunning => "Order's execution is still running",
            ProblemKind::HistoryPruned => "The order's history is past its retention",
            ProblemKind::EndpointNotFound => "Webhook endpoint not found",
            ProblemKind::TooManyEndpoints => "Too many webhook endpoints",
            ProblemKind::TooManyStreams => "Too many open status streams",
            ProblemKind::RateLimited => "Too many requests",
            ProblemKind::ServiceUnavailable => "Service temporarily unavailable",
            ProblemKind::NotReady => "Service not ready",
            ProblemKind::Timeout => "Request timed out",
            ProblemKind::Internal => "Internal server error",
        }
    }

    pub fn status(self) -> StatusCode {
        match self {
            ProblemKind::MalformedJson | ProblemKind::InvalidRequest => StatusCode::BAD_REQUEST,
            ProblemKind::ValidationFailed
            | ProblemKind::PriceMismatch
            | ProblemKind::SkuNotPriced
            | ProblemKind::CurrencyMismatch => StatusCode::UNPROCESSABLE_ENTITY,
            ProblemKind::RateLimited | ProblemKind::TooManyStreams => StatusCode::TOO_MANY_REQUESTS,
            ProblemKind::EndpointNotFound => StatusCode::NOT_FOUND,
            ProblemKind::Unauthorized => StatusCode::UNAUTHORIZED,
            ProblemKind::Forbidden => StatusCode::FORBIDDEN,
            ProblemKind::NotFound | ProblemKind::OrderNotFound | ProblemKind::SkuNotFound => {
                StatusCode::NOT_FOUND
            }
            ProblemKind::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ProblemKind::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ProblemKind::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ProblemKind::BodyTimeout => StatusCode::REQUEST_TIMEOUT,
            ProblemKind::OrderConflict
            | ProblemKind::OrderIdTaken
            | ProblemKind::ApprovalConflict
            | ProblemKind::NotAwaitingApproval
            | ProblemKind::ApprovalExpired
            | ProblemKind::OrderCancelled
            | ProblemKind::OrderShipped
            | ProblemKind::NotCancellable
            | ProblemKind::NoOpenIncident
            | ProblemKind::NotRedrivable
            | ProblemKind::ExecutionRunning
            | ProblemKind::TooManyEndpoints => StatusCode::CONFLICT,
            ProblemKind::HistoryPruned => StatusCode::GONE,
            ProblemKind::ServiceUnavailable | ProblemKind::NotReady | ProblemKind::Timeout => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ProblemKind::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn type_uri(self) -> String {
        format!("{TYPE_BASE}{}", self.slug())
    }

    /// The kind a bare error status stands for (a response some layer made without a body).
    fn for_status(status: StatusCode) -> Option<ProblemKind> {
        Some(match status {
            StatusCode::BAD_REQUEST => ProblemKind::InvalidRequest,
            StatusCode::UNAUTHORIZED => ProblemKind::Unauthorized,
            StatusCode::FORBIDDEN => ProblemKind::Forbidden,
            StatusCode::NOT_FOUND => ProblemKind::NotFound,
            StatusCode::METHOD_NOT_ALLOWED => ProblemKind::MethodNotAllowed,
            StatusCode::PAYLOAD_TOO_LARGE => ProblemKind::PayloadTooLarge,
            StatusCode::UNSUPPORTED_MEDIA_TYPE => ProblemKind::UnsupportedMediaType,
            StatusCode::UNPROCESSABLE_ENTITY => ProblemKind::ValidationFailed,
            StatusCode::TOO_MANY_REQUESTS => ProblemKind::RateLimited,
            StatusCode::REQUEST_TIMEOUT => ProblemKind::BodyTimeout,
            // Handlers answer 503 with a problem; a bare one is the timeout layer's.
            StatusCode::SERVICE_UNAVAILABLE => ProblemKind::Timeout,
            StatusCode::INTERNAL_SERVER_ERROR => ProblemKind::Internal,
            _ => return None,
        })
    }
}

/// One invalid field of a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct FieldError {
    /// JSON pointer into the request body (`/items/0/quantity`; `""` is the whole body), or the
    /// name of a path parameter, query parameter or header.
    #[schema(example = "/items/0/quantity")]
    pub field: String,
    #[schema(example = "must be an integer from 1 to 10000")]
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// An error, as RFC 9457 problem details (`application/problem+json`).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Problem {
    /// A URI naming the kind of error; stable, one per kind
    /// (`https://fulfillment.dev/problems/{kind}`).
    #[serde(rename = "type")]
    #[schema(example = "https://fulfillment.dev/problems/order-conflict")]
    pub type_uri: String,
    /// A short summary of the kind of error.
    pub title: String,
    /// The HTTP status code.
    #[schema(example = 409)]
    pub status: u16,
    /// What went wrong with this request.
    pub detail: String,
    /// The request path this occurrence is about.
    #[schema(example = "/orders/o-1")]
    pub instance: String,
    /// Every invalid field (validation errors only).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub errors: Option<Vec<FieldError>>,
    /// Seconds after which a retry may work (sent as `Retry-After` too).
    #[serde(skip)]
    pub retry_after: Option<u32>,
    /// The authentication challenge (`WWW-Authenticate`) of a 401.
    #[serde(skip)]
    pub challenge: bool,
}

impl Problem {
    pub fn new(kind: ProblemKind, detail: impl Into<String>) -> Self {
        Problem {
            type_uri: kind.type_uri(),
            title: kind.title().to_owned(),
            status: kind.status().as_u16(),
            detail: detail.into(),
            instance: String::new(),
            errors: None,
            retry_after: match kind.status() {
                StatusCode::SERVICE_UNAVAILABLE => Some(1),
                _ => None,
            },
            challenge: kind == ProblemKind::Unauthorized,
        }
    }

    /// 400: query parameters that are not valid, each listed in `errors`; `Ok` when there are
    /// none.
    pub fn check_query(errors: Vec<FieldError>) -> Result<(), Self> {
        if errors.is_empty() {
            return Ok(());
        }
        Err(Problem {
            errors: Some(errors),
            ..Problem::new(ProblemKind::InvalidRequest, "invalid query parameters")
        })
    }

    pub fn validation(errors: Vec<FieldError>) -> Self {
        let detail = match errors.len() {
            1 => "1 field is invalid".to_owned(),
            n => format!("{n} fields are invalid"),
        };
        Problem {
            errors: Some(errors),
            ..Problem::new(ProblemKind::ValidationFailed, detail)
        }
    }

    /// A 500 that tells nothing of the cause; the cause is logged in the request's span.
    pub fn internal(cause: &dyn std::fmt::Display) -> Self {
        tracing::error!(error = %cause, "request failed");
        Problem::new(
            ProblemKind::Internal,
            "the request could not be completed; it has been logged",
        )
    }

    /// A 503 for a backend that may work again soon; the cause is logged, not shown.
    pub fn unavailable(cause: &dyn std::fmt::Display) -> Self {
        tracing::warn!(error = %cause, "backend unavailable");
        Problem::new(
            ProblemKind::ServiceUnavailable,
            "a backend is temporarily unavailable; retry later",
        )
    }

    /// A backend error: 503 when transient, else 500.
    pub fn backend(cause: &dyn std::fmt::Display, transient: bool) -> Self {
        if transient {
            Problem::unavailable(cause)
        } else {
            Problem::internal(cause)
        }
    }

    pub fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    fn render(&self) -> Response {
        let body = serde_json::to_vec(self).unwrap_or_default();
        let mut response = (
            self.status_code(),
            [(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON))],
            body,
        )
            .into_response();
        let headers = response.headers_mut();
        if let Some(secs) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        // The rest of a body that came too slowly is not waited for: the connection ends here
        // (RFC 9110 §15.5.9).
        if self.status == StatusCode::REQUEST_TIMEOUT.as_u16() {
            headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        if self.challenge {
            headers.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"fulfillment\""),
            );
        }
        response
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let mut response = self.render();
        // The outer middleware re-renders it with the request's path as `instance`.
        response.extensions_mut().insert(self);
        response
    }
}

/// The outermost middleware: every error response leaves as problem+json with its `instance`.
pub async fn render_problems(request: Request, next: Next) -> Response {
    let instance = request.uri().path().to_owned();
    let mut response = next.run(request).await;
    if let Some(mut problem) = response.extensions_mut().remove::<Problem>() {
        problem.instance = instance;
        return keep_headers(problem.render(), response);
    }
    let status = response.status();
    let is_problem = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(PROBLEM_JSON.as_bytes()));
    // The operator console's own error pages are HTML, for a person.
    let is_page = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"text/html"));
    if !(status.is_client_error() || status.is_server_error()) || is_problem || is_page {
        return response;
    }
    let kind = ProblemKind::for_status(status);
    let detail = match kind {
        Some(ProblemKind::MethodNotAllowed) => "this method is not allowed on this resource",
        Some(ProblemKind::PayloadTooLarge) => "the request body is larger than allowed",
        Some(ProblemKind::Timeout) => "the request took too long",
        Some(ProblemKind::BodyTimeout) => "the request body did not arrive in time",
        Some(ProblemKind::NotFound) => "no such resource",
        _ => "the request failed",
    };
    let mut problem = match kind {
        Some(kind) => Problem::new(kind, detail),
        None => Problem {
            type_uri: "about:blank".to_owned(),
            title: status.canonical_reason().unwrap_or("Error").to_owned(),
            status: status.as_u16(),
            ..Problem::new(ProblemKind::InvalidRequest, detail)
        },
    };
    problem.instance = instance;
    keep_headers(problem.render(), response)
}

/// The rendered problem with the original response's headers (`Allow`, request id, …) that do
/// not describe the old body.
fn keep_headers(mut rendered: Response, original: Response) -> Response {
    let (parts, _body): (_, Body) = original.into_parts();
    let own: Vec<_> = rendered.headers().keys().cloned().collect();
    for (name, value) in parts.headers.iter() {
        if name == header::CONTENT_TYPE || name == header::CONTENT_LENGTH || own.contains(name) {
            continue;
        }
        rendered.headers_mut().append(name.clone(), value.clone());
    }
    rendered
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_own_type() {
        let types: std::collections::HashSet<_> =
            ProblemKind::ALL.iter().map(|k| k.type_uri()).collect();
        assert_eq!(types.len(), ProblemKind::ALL.len());
    }

    #[test]
    fn unavailability_asks_for_a_retry_and_401_for_a_bearer() {
        let p = Problem::new(ProblemKind::ServiceUnavailable, "x");
        assert_eq!(p.retry_after, Some(1));
        let r = Problem::new(ProblemKind::Unauthorized, "x").render();
        assert!(
            r.headers()[header::WWW_AUTHENTICATE]
                .to_str()
                .unwrap()
                .starts_with("Bearer")
        );
    }
}
