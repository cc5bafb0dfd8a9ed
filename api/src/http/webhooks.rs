//! A principal's webhook endpoints: register one (its signing secret is shown once, then on each
//! rotation), list, read, delete, rotate the secret (the old one keeps signing beside the new
//! for the overlap), enable one that was disabled, read its delivery log, and replay its failed
//! deliveries since a time. Each principal sees its own endpoints only; another's is a 404.

use super::AppState;
use super::answers;
use super::auth::Caller;
use super::extract::{JsonBody, PathParam, QueryParams};
use super::problem::{FieldError, Problem, ProblemKind};
use super::validate;
use ::webhooks::{guard, signing};
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use store::{Delivery, DeliveryState, EventType, SigningSecret, WebhookEndpoint};
use utoipa::{IntoParams, ToSchema};

/// The most endpoints one principal may have.
pub const MAX_ENDPOINTS: usize = 10;

/// An event type, as endpoints subscribe to it and payloads name it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema, PartialEq, Eq)]
pub enum EventTypeName {
    #[serde(rename = "order.accepted")]
    Accepted,
    #[serde(rename = "order.awaiting_approval")]
    AwaitingApproval,
    #[serde(rename = "order.completed")]
    Completed,
    #[serde(rename = "order.cancelled")]
    Cancelled,
    #[serde(rename = "order.compensation_failed")]
    CompensationFailed,
}

impl From<EventTypeName> for EventType {
    fn from(e: EventTypeName) -> Self {
        match e {
            EventTypeName::Accepted => EventType::Accepted,
            EventTypeName::AwaitingApproval => EventType::AwaitingApproval,
            EventTypeName::Completed => EventType::Completed,
            EventTypeName::Cancelled => EventType::Cancelled,
            EventTypeName::CompensationFailed => EventType::CompensationFailed,
        }
    }
}

impl From<EventType> for EventTypeName {
    fn from(e: EventType) -> Self {
        match e {
            EventType::Accepted => EventTypeName::Accepted,
            EventType::AwaitingApproval => EventTypeName::AwaitingApproval,
            EventType::Completed => EventTypeName::Completed,
            EventType::Cancelled => EventTypeName::Cancelled,
            EventType::CompensationFailed => EventTypeName::CompensationFailed,
        }
    }
}

/// An endpoint to register.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EndpointRequest {
    /// Where events are POSTed: `https`, on a public address.
    #[schema(
        min_length = 1,
        max_length = 2048,
        example = "https://shop.example.com/hooks/orders"
    )]
    pub url: String,
    /// The events it wants; every event when absent or empty.
    #[schema(max_items = 5)]
    pub event_types: Option<Vec<EventTypeName>>,
}

/// Replay the failed deliveries of events since a time.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplayRequest {
    pub since: DateTime<Utc>,
}

/// Why an endpoint receives nothing.
#[derive(Debug, Serialize, ToSchema)]
pub struct DisabledView {
    pub at: DateTime<Utc>,
    pub reason: String,
}

/// A webhook endpoint (its secrets are shown only when made).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointView {
    #[schema(example = "ep_2b7c0f5e9d3a4c1b8e6f")]
    pub id: String,
    pub url: String,
    /// The events it wants; empty: every event.
    pub event_types: Vec<EventTypeName>,
    pub created_at: DateTime<Utc>,
    /// Set when it stopped receiving: it answered `410 Gone`, or every delivery failed for
    /// days. `POST …/enable` starts it again, `POST …/replay` resends what it missed.
    pub disabled: Option<DisabledView>,
    /// Since when every attempt to it failed; null while it answers.
    pub failing_since: Option<DateTime<Utc>>,
    /// When the secret rotated out last keeps signing until; null when only one signs.
    pub previous_secret_expires_at: Option<DateTime<Utc>>,
}

impl From<&WebhookEndpoint> for EndpointView {
    fn from(e: &WebhookEndpoint) -> Self {
        EndpointView {
            id: e.id.clone(),
            url: e.url.clone(),
            event_types: e.event_types.iter().map(|t| (*t).into()).collect(),
            created_at: e.created_at,
            disabled: e.disabled.as_ref().map(|d| DisabledView {
                at: d.at,
                reason: d.reason.clone(),
            }),
            failing_since: e.failing_since,
            previous_secret_expires_at: e.secrets.iter().filter_map(|s| s.expires_at).max(),
        }
    }
}

/// An endpoint with its signing secret, shown once.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointWithSecret {
    #[serde(flatten)]
    pub endpoint: EndpointView,
    /// `whsec_…`: verify each delivery's `webhook-signature` with it (Standard Webhooks 1.0).
    pub secret: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct EndpointList {
    pub items: Vec<EndpointView>,
}

/// One attempt to deliver.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AttemptView {
    pub at: DateTime<Utc>,
    /// The endpoint's HTTP status, if it answered.
    pub status: Option<u16>,
    /// What went wrong, if nothing answered (a timeout, a refused connection, a forbidden
    /// address).
    pub error: Option<String>,
    pub duration_ms: u64,
}

/// An event on its way to the endpoint.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryView {
    /// `webhook-id`: the same on every attempt.
    pub webhook_id: String,
    pub event_type: EventTypeName,
    pub order_id: String,
    /// `PENDING`, `DELIVERED` or `FAILED`.
    #[schema(example = "DELIVERED")]
    pub state: String,
    pub created_at: DateTime<Utc>,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub attempts: Vec<AttemptView>,
}

impl From<&Delivery> for DeliveryView {
    fn from(d: &Delivery) -> Self {
        DeliveryView {
            webhook_id: d.message_id.clone(),
            event_type: d.event_type.into(),
            order_id: d.order_id.to_string(),
            state: d.state.as_str().to_owned(),
            created_at: d.created_at,
            next_attempt_at: d
                .next_attempt_at
                .filter(|_| d.state == DeliveryState::Pending),
            attempts: d
                .attempts
                .iter()
                .map(|a| AttemptView {
                    at: a.at,
                    status: a.status,
                    error: a.error.clone(),
                    duration_ms: a.duration_ms,
                })
                .collect(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryPage {
    pub items: Vec<DeliveryView>,
    /// Pass as `after` for the next page; null on the last.
    pub next: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DeliveryQuery {
    /// Deliveries per page (1–100, default 20).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 100)]
    pub limit: Option<String>,
    /// The `next` of the previous page, as given.
    #[param(max_length = 200)]
    pub after: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Replayed {
    /// How many failed deliveries are due again.
    pub replayed: u32,
}

fn backend(e: store::StoreError) -> Problem {
    Problem::backend(&e, e.is_transient())
}

/// The caller's endpoint `id`; another's, or none, is a 404.
async fn own_endpoint(
    state: &AppState,
    caller: &Caller,
    id: &str,
) -> Result<WebhookEndpoint, Problem> {
    let found = state.webhooks.endpoint(id).await.map_err(backend)?;
    found
        .filter(|e| e.owner == caller.principal)
        .ok_or_else(|| {
            Problem::new(
                ProblemKind::EndpointNotFound,
                format!("no webhook endpoint {id:?}"),
            )
        })
}

fn new_id() -> String {
    format!("ep_{}", uuid::Uuid::new_v4().simple())
}

/// Register a webhook endpoint.
///
/// Events of the caller's orders are POSTed to it, signed as Standard Webhooks 1.0 specifies
/// (`webhook-id`, `webhook-timestamp`, `webhook-signature`). The answer holds the signing
/// secret: it is not shown again (rotate to get a new one).
#[utoipa::path(
    post,
    path = "/webhooks/endpoints",
    operation_id = "createWebhookEndpoint",
    tag = "webhooks",
    security(("apiKey" = [])),
    request_body(content = EndpointRequest, content_type = "application/json"),
    responses(
        (status = 201, description = "Registered", body = EndpointWithSecret,
            headers(("Location" = String, description = "The endpoint's URL"))),
        answers::MalformedJson,
        answers::Unauthorized,
        (status = 409, description = "The caller has the most endpoints allowed (`too-many-endpoints`)", body = Problem, content_type = "application/problem+json"),
        answers::UnsupportedMediaType,
        (status = 422, description = "Invalid fields, each listed in `errors` (a URL that is not https, or points at a private address)", body = Problem, content_type = "application/problem+json"),
        answers::ServiceUnavailable,
    )
)]
#[tracing::instrument(name = "create_webhook_endpoint", skip_all, fields(principal = %caller.principal))]
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    JsonBody(body): JsonBody,
) -> Result<Response, Problem> {
    let request = validate::parse::<EndpointRequest>(&body).map_err(Problem::validation)?;
    let url = guard::check_url(&request.url, state.webhook_settings.allow_private)
        .map_err(|why| Problem::validation(vec![FieldError::new("/url", why)]))?;
    let mut event_types: Vec<EventType> = request
        .event_types
        .unwrap_or_default()
        .into_iter()
        .map(EventType::from)
        .collect();
    event_types.sort();
    event_types.dedup();
    let existing = state
        .webhooks
        .endpoints_of(&caller.principal)
        .await
        .map_err(backend)?;
    if existing.len() >= MAX_ENDPOINTS {
        return Err(Problem::new(
            ProblemKind::TooManyEndpoints,
            format!("a principal may have {MAX_ENDPOINTS} webhook endpoints; delete one first"),
        ));
    }
    let now = Utc::now();
    let secret = signing::new_secret();
    let endpoint = WebhookEndpoint {
        id: new_id(),
        owner: caller.principal.clone(),
        url: url.to_string(),
        event_types,
        secrets: vec![SigningSecret {
            secret: secret.clone(),
            created_at: now,
            expires_at: None,
        }],
        created_at: now,
        disabled: None,
        failing_since: None,
    };
    state
        .webhooks
        .put_endpoint(&endpoint)
        .await
        .map_err(backend)?;
    tracing::info!(endpoint = %endpoint.id, url = %endpoint.url, "webhook endpoint registered");
    let location = format!("/webhooks/endpoints/{}", endpoint.id);
    let mut response = (
        StatusCode::CREATED,
        Json(EndpointWithSecret {
            endpoint: EndpointView::from(&endpoint),
            secret,
        }),
    )
        .into_response();
    if let Ok(value) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    Ok(response)
}

/// List the caller's webhook endpoints, oldest first.
#[utoipa::path(
    get,
    path = "/webhooks/endpoints",
    operation_id = "listWebhookEndpoints",
    tag = "webhooks",
    security(("apiKey" = [])),
    responses(
        (status = 200, description = "The caller's endpoints", body = EndpointList),
        answers::Unauthorized,
        answers::ServiceUnavailable,
    )
)]
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<EndpointList>, Problem> {
    let endpoints = state
        .webhooks
        .endpoints_of(&caller.principal)
        .await
        .map_err(backend)?;
    Ok(Json(EndpointList {
        items: endpoints.iter().map(EndpointView::from).collect(),
    }))
}

/// Read a webhook endpoint: whether it is disabled, and why.
#[utoipa::path(
    get,
    path = "/webhooks/endpoints/{endpointId}",
    operation_id = "getWebhookEndpoint",
    tag = "webhooks",
    security(("apiKey" = [])),
    params(("endpointId" = String, Path, description = "The endpoint's id")),
    responses(
        (status = 200, description = "The endpoint", body = EndpointView),
        answers::Unauthorized,
        answers::EndpointNotFound,
        answers::ServiceUnavailable,
    )
)]
pub async fn get(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(id): PathParam,
) -> Result<Json<EndpointView>, Problem> {
    let endpoint = own_endpoint(&state, &caller, &id).await?;
    Ok(Json(EndpointView::from(&endpoint)))
}

/// Delete a webhook endpoint: nothing more is sent to it.
#[utoipa::path(
    delete,
    path = "/webhooks/endpoints/{endpointId}",
    operation_id = "deleteWebhookEndpoint",
    tag = "webhooks",
    security(("apiKey" = [])),
    params(("endpointId" = String, Path, description = "The endpoint's id")),
    responses(
        (status = 204, description = "Deleted"),
        answers::Unauthorized,
        answers::EndpointNotFound,
        answers::ServiceUnavailable,
    )
)]
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(id): PathParam,
) -> Result<StatusCode, Problem> {
    let endpoint = own_endpoint(&state, &caller, &id).await?;
    state
        .webhooks
        .delete_endpoint(&endpoint.id)
        .await
        .map_err(backend)?;
    Ok(StatusCode::NO_CONTENT)
}

/// Rotate an endpoint's signing secret.
///
/// The answer holds the new secret. The previous one keeps signing beside it (two signatures
/// in `webhook-signature`) for the overlap, so a receiver can switch without losing a message.
#[utoipa::path(
    post,
    path = "/webhooks/endpoints/{endpointId}/rotate",
    operation_id = "rotateWebhookSecret",
    tag = "webhooks",
    security(("apiKey" = [])),
    params(("endpointId" = String, Path, description = "The endpoint's id")),
    responses(
        (status = 200, description = "Rotated", body = EndpointWithSecret),
        answers::Unauthorized,
        answers::EndpointNotFound,
        answers::ServiceUnavailable,
    )
)]
pub async fn rotate(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(id): PathParam,
) -> Result<Json<EndpointWithSecret>, Problem> {
    let mut endpoint = own_endpoint(&state, &caller, &id).await?;
    let now = Utc::now();
    let overlap =
        chrono::Duration::from_std(state.webhook_settings.rotation_overlap).unwrap_or_default();
    // The current secret signs on for the overlap; ones already rotated out keep their end.
    endpoint
        .secrets
        .retain(|s| s.expires_at.is_none_or(|t| t > now));
    for s in &mut endpoint.secrets {
        s.expires_at = Some(s.expires_at.unwrap_or(now + overlap).min(now + overlap));
    }
    let secret = signing::new_secret();
    endpoint.secrets.insert(
        0,
        SigningSecret {
            secret: secret.clone(),
            created_at: now,
            expires_at: None,
        },
    );
    state
        .webhooks
        .put_endpoint(&endpoint)
        .await
        .map_err(backend)?;
    tracing::info!(endpoint = %endpoint.id, "webhook secret rotated");
    Ok(Json(EndpointWithSecret {
        endpoint: EndpointView::from(&endpoint),
        secret,
    }))
}

/// Enable an endpoint that was disabled (its failures forgotten). What it missed stays failed:
/// replay it.
#[utoipa::path(
    post,
    path = "/webhooks/endpoints/{endpointId}/enable",
    operation_id = "enableWebhookEndpoint",
    tag = "webhooks",
    security(("apiKey" = [])),
    params(("endpointId" = String, Path, description = "The endpoint's id")),
    responses(
        (status = 200, description = "Enabled", body = EndpointView),
        answers::Unauthorized,
        answers::EndpointNotFound,
        answers::ServiceUnavailable,
    )
)]
pub async fn enable(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(id): PathParam,
) -> Result<Json<EndpointView>, Problem> {
    let mut endpoint = own_endpoint(&state, &caller, &id).await?;
    if endpoint.disabled.take().is_some() || endpoint.failing_since.take().is_some() {
        state
            .webhooks
            .put_endpoint(&endpoint)
            .await
            .map_err(backend)?;
    }
    Ok(Json(EndpointView::from(&endpoint)))
}

/// An endpoint's delivery log, newest first: each event sent or to send, with every attempt.
#[utoipa::path(
    get,
    path = "/webhooks/endpoints/{endpointId}/deliveries",
    operation_id = "listWebhookDeliveries",
    tag = "webhooks",
    security(("apiKey" = [])),
    params(("endpointId" = String, Path, description = "The endpoint's id"), DeliveryQuery),
    responses(
        (status = 200, description = "A page of deliveries, newest first", body = DeliveryPage),
        answers::InvalidPage,
        answers::Unauthorized,
        answers::EndpointNotFound,
        answers::ServiceUnavailable,
    )
)]
pub async fn deliveries(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(id): PathParam,
    QueryParams(query): QueryParams<DeliveryQuery>,
) -> Result<Json<DeliveryPage>, Problem> {
    let mut errors = Vec::new();
    let limit = validate::query_integer("limit", query.limit.as_deref(), 1, 100, &mut errors);
    let after = query.after.as_deref();
    let well_formed = after.is_none_or(|a| {
        a.len() <= 200
            && a.split_once('|')
                .is_some_and(|(at, _)| DateTime::parse_from_rfc3339(at).is_ok())
    });
    if !well_formed {
        errors.push(FieldError::new(
            "after",
            "must be the `next` of a page of deliveries",
        ));
    }
    Problem::check_query(errors)?;
    let endpoint = own_endpoint(&state, &caller, &id).await?;
    let page = state
        .webhooks
        .deliveries(&endpoint.id, after, limit.map_or(20, |n| n as u32))
        .await
        .map_err(backend)?;
    Ok(Json(DeliveryPage {
        items: page.items.iter().map(DeliveryView::from).collect(),
        next: page.next,
    }))
}

/// Send again the endpoint's failed deliveries of events since a time.
#[utoipa::path(
    post,
    path = "/webhooks/endpoints/{endpointId}/replay",
    operation_id = "replayWebhookDeliveries",
    tag = "webhooks",
    security(("apiKey" = [])),
    params(("endpointId" = String, Path, description = "The endpoint's id")),
    request_body(content = ReplayRequest, content_type = "application/json"),
    responses(
        (status = 202, description = "Due again, each with its own `webhook-id`", body = Replayed),
        answers::MalformedJson,
        answers::Unauthorized,
        answers::EndpointNotFound,
        answers::UnsupportedMediaType,
        answers::ValidationFailed,
        answers::ServiceUnavailable,
    )
)]
pub async fn replay(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(id): PathParam,
    JsonBody(body): JsonBody,
) -> Result<(StatusCode, Json<Replayed>), Problem> {
    let request = validate::parse::<ReplayRequest>(&body).map_err(Problem::validation)?;
    let endpoint = own_endpoint(&state, &caller, &id).await?;
    let replayed = state
        .webhooks
        .replay(&endpoint.id, request.since, Utc::now())
        .await
        .map_err(backend)?;
    tracing::info!(endpoint = %endpoint.id, replayed, "webhook deliveries replayed");
    Ok((StatusCode::ACCEPTED, Json(Replayed { replayed })))
}
