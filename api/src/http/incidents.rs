//! Incidents: orders whose compensation gave up and wait for a person. `GET /incidents` lists
//! them (the failing step, its error, the attempts it made, since when); an operator either
//! redrives the execution (`POST /orders/{orderId}/redrive`: the compensation runs again from
//! the state that failed, as `RedriveExecution` does) or, having finished the undo by hand,
//! resolves the incident (`POST /orders/{orderId}/resolve`, with a note). Both are recorded on
//! the order with the operator's name.

use super::AppState;
use super::answers;
use super::auth::Operator;
use super::extract::{JsonBody, PathParam, QueryParams};
use super::orders::{FailureView, find_order};
use super::problem::{FieldError, Problem, ProblemKind};
use super::validate;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use store::{ActionKind, Incident, OperatorAction, Order, OrderStatus, Resolved};
use tracing::Span;
use tracing::field::Empty;
use utoipa::{IntoParams, ToSchema};
use workflow::WorkflowError;

/// The compensation step that gave up.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct IncidentDetail {
    /// The state of the saga that failed; a redrive resumes there.
    #[schema(example = "RefundPayment")]
    pub step: String,
    #[schema(example = "Payment.Invalid")]
    pub error: String,
    pub cause: String,
    /// The attempts the step made (1: a permanent error, never retried).
    pub attempts: u32,
    /// When the order first needed a person.
    pub since: DateTime<Utc>,
}

impl From<&Incident> for IncidentDetail {
    fn from(i: &Incident) -> Self {
        IncidentDetail {
            step: i.step.clone(),
            error: i.error.clone(),
            cause: i.cause.clone(),
            attempts: i.attempts,
            since: i.since,
        }
    }
}

/// What an operator did about the order.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActionView {
    /// `redrive` or `resolve`.
    #[schema(example = "redrive")]
    pub action: String,
    /// The operator.
    pub by: String,
    pub note: Option<String>,
    pub at: DateTime<Utc>,
}

impl From<&OperatorAction> for ActionView {
    fn from(a: &OperatorAction) -> Self {
        ActionView {
            action: action_name(a.action).to_owned(),
            by: a.by.clone(),
            note: a.note.clone(),
            at: a.at,
        }
    }
}

fn action_name(kind: ActionKind) -> &'static str {
    match kind {
        ActionKind::Redrive => "redrive",
        ActionKind::Resolve => "resolve",
    }
}

/// An order that needs a person.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct IncidentView {
    #[schema(example = "o-1001")]
    pub order_id: String,
    pub status: OrderStatus,
    pub execution_arn: Option<String>,
    pub incident: IncidentDetail,
    /// Why the order was being undone: the failure that started the compensation.
    pub failure: Option<FailureView>,
    pub amount_cents: u64,
    pub currency: String,
    /// What operators did about it so far (redrives), oldest first.
    pub actions: Vec<ActionView>,
}

impl IncidentView {
    fn of(order: &Order, incident: &Incident) -> IncidentView {
        IncidentView {
            order_id: order.id().to_string(),
            status: order.status,
            execution_arn: order.execution_arn.clone(),
            incident: incident.into(),
            failure: order.failure.as_ref().map(|f| FailureView {
                error: f.error.clone(),
                cause: f.cause.clone(),
            }),
            amount_cents: order.new.amount_cents,
            currency: order.new.currency.clone(),
            actions: order.actions.iter().map(ActionView::from).collect(),
        }
    }
}

/// A page of open incidents, the oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct IncidentsPage {
    pub items: Vec<IncidentView>,
    /// Pass as `after` for the next page; null on the last page.
    pub next: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct IncidentsQuery {
    /// Incidents per page (1–1000, default 100).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    pub limit: Option<String>,
    /// The `next` of the previous page, as given (text of another shape is a 400).
    #[param(pattern = "^[0-9T:.Z-]{1,40}\\|[A-Za-z0-9_-]{1,80}$")]
    pub after: Option<String>,
}

/// An operator's note on a redrive (optional) or a resolution (required: what was done by
/// hand).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct IncidentActionRequest {
    #[schema(
        pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]+$",
        min_length = 1,
        max_length = 500
    )]
    pub note: Option<String>,
}

/// A redrive made: the execution runs again from the state that failed.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RedriveResult {
    pub order_id: String,
    pub execution_arn: String,
    pub redrive_date: DateTime<Utc>,
    /// The incident stays open until the compensation finishes: poll the order's status.
    #[schema(example = "/orders/o-1001/status")]
    pub status_url: String,
}

/// An incident resolved by hand.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResolveResult {
    pub order_id: String,
    pub status: OrderStatus,
    pub actions: Vec<ActionView>,
}

/// List the orders that need an operator: their compensation gave up.
#[utoipa::path(
    get,
    path = "/incidents",
    operation_id = "listIncidents",
    tag = "operator",
    security(("apiKey" = [])),
    params(IncidentsQuery),
    responses(
        (status = 200, description = "A page of open incidents, oldest first", body = IncidentsPage),
        answers::InvalidPage,
        answers::Unauthorized,
        answers::Forbidden,
        answers::ServiceUnavailable,
    )
)]
#[tracing::instrument(name = "list_incidents", skip_all)]
pub async fn list(
    State(state): State<AppState>,
    _operator: Operator,
    QueryParams(query): QueryParams<IncidentsQuery>,
) -> Result<Json<IncidentsPage>, Problem> {
    let mut errors = Vec::new();
    let limit = validate::query_integer("limit", query.limit.as_deref(), 1, 1000, &mut errors);
    let after = validate::queue_cursor(query.after.as_deref(), "incidents", &mut errors);
    Problem::check_query(errors)?;
    let limit = limit.map_or(100, |n| n as u32);
    let page = state
        .ports
        .orders
        .open_incidents(after.as_ref(), limit)
        .await
        .map_err(|e| Problem::backend(&e, e.is_transient()))?;
    Ok(Json(IncidentsPage {
        items: page
            .items
            .iter()
            .filter_map(|o| o.incident.as_ref().map(|i| IncidentView::of(o, i)))
            .collect(),
        next: page.next,
    }))
}

/// The order with id `raw` if it has an open incident; 409 `no-open-incident` otherwise.
async fn with_incident(state: &AppState, raw: &str) -> Result<(Order, Incident), Problem> {
    let order = find_order(state, raw).await?;
    if let Some(arn) = &order.execution_arn {
        Span::current().record("execution_arn", arn.as_str());
    }
    match order.incident.clone() {
        Some(incident) => Ok((order, incident)),
        None => Err(no_open_incident(&order)),
    }
}

fn no_open_incident(order: &Order) -> Problem {
    Problem::new(
        ProblemKind::NoOpenIncident,
        format!(
            "order {} is {} and has no open incident",
            order.id(),
            order.status.as_str()
        ),
    )
}

/// The operator's note from the body (`{}` or `{"note": "…"}`).
fn note(body: &serde_json::Value) -> Result<Option<String>, Problem> {
    validate::parse::<IncidentActionRequest>(body)
        .map(|r| r.note)
        .map_err(Problem::validation)
}

/// Redrive an order's failed execution: the compensation that gave up runs again.
///
/// The execution resumes at the state that failed (`RedriveExecution`); the steps that had
/// finished are not run again. The incident stays open until the compensation finishes (the
/// order then ends `CANCELLED`), or is updated when it gives up again. Recorded on the order
/// with the operator's name and the optional note.
#[utoipa::path(
    post,
    path = "/orders/{orderId}/redrive",
    operation_id = "redriveOrder",
    tag = "operator",
    security(("apiKey" = [])),
    params(("orderId" = String, Path, description = "The order id")),
    request_body(content = IncidentActionRequest, content_type = "application/json"),
    responses(
        (status = 202, description = "Redriven: the compensation runs again", body = RedriveResult),
        answers::MalformedJson,
        answers::Unauthorized,
        answers::Forbidden,
        answers::OrderNotFound,
        (status = 409, description = "The order has no open incident (`no-open-incident`), or its execution cannot be redriven: still running, or closed too long ago (`not-redrivable`, with the workflow service's reason)", body = Problem, content_type = "application/problem+json"),
        answers::UnsupportedMediaType,
        answers::ValidationFailed,
        answers::ServiceUnavailable,
    )
)]
#[tracing::instrument(name = "redrive_order", skip_all, fields(order_id = %raw, execution_arn = Empty, operator = %operator.name))]
pub async fn redrive(
    State(state): State<AppState>,
    operator: Operator,
    PathParam(raw): PathParam,
    JsonBody(body): JsonBody,
) -> Result<(StatusCode, Json<RedriveResult>), Problem> {
    let (order, incident) = with_incident(&state, &raw).await?;
    let note = note(&body)?;
    let arn = order
        .execution_arn
        .clone()
        .unwrap_or_else(|| state.workflow.execution_arn(order.id().as_str()));
    let redriven = match state.workflow.redrive_execution(&arn).await {
        Ok(r) => r,
        Err(WorkflowError::NotRedrivable(reason)) => {
            return Err(Problem::new(
                ProblemKind::NotRedrivable,
                format!(
                    "the execution of order {} cannot be redriven: {reason}",
                    order.id()
                ),
            ));
        }
        // Deleted past the retention: nothing is left to resume (AWS allows a redrive for 14
        // days after the stop anyway); the incident can still be resolved by hand.
        Err(WorkflowError::ExecutionDoesNotExist(_)) => {
            return Err(Problem::new(
                ProblemKind::NotRedrivable,
                format!(
                    "the execution of order {} no longer exists (deleted after the workflow's \
                     retention): resolve the incident by hand",
                    order.id()
                ),
            ));
        }
        Err(e) => return Err(Problem::backend(&e, e.is_transient())),
    };
    // Recorded after the redrive: an action is only recorded when it happened. Should the
    // store fail now, the redrive stands (the order's execution shows it) and the answer says
    // the backend failed.
    let action = OperatorAction {
        action: ActionKind::Redrive,
        by: operator.name.clone(),
        note,
        at: Utc::now(),
    };
    state
        .ports
        .orders
        .record_action(order.id(), &action)
        .await
        .map_err(|e| Problem::backend(&e, e.is_transient()))?;
    tracing::warn!(
        step = %incident.step,
        error = %incident.error,
        "an operator redrove the order's execution"
    );
    Ok((
        StatusCode::ACCEPTED,
        Json(RedriveResult {
            order_id: order.id().to_string(),
            execution_arn: arn,
            redrive_date: redriven.redrive_date,
            status_url: format!("/orders/{}/status", order.id()),
        }),
    ))
}

/// Resolve an order's incident by hand: the undo was finished outside the saga.
///
/// For what no redrive can fix (a charge the provider will never refund through the API, a
/// disputed payment): the operator did what was needed by hand, and says what in the note. The
/// order ends `CANCELLED` and the incident closes; the action is recorded with the operator's
/// name. Refused while the order's execution still runs (a redrive in progress, or retries not
/// yet exhausted).
#[utoipa::path(
    post,
    path = "/orders/{orderId}/resolve",
    operation_id = "resolveIncident",
    tag = "operator",
    security(("apiKey" = [])),
    params(("orderId" = String, Path, description = "The order id")),
    request_body(content = IncidentActionRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "Resolved: the order is cancelled", body = ResolveResult),
        answers::MalformedJson,
        answers::Unauthorized,
        answers::Forbidden,
        answers::OrderNotFound,
        (status = 409, description = "The order has no open incident (`no-open-incident`: never had one, or resolved before), or its execution is still running (`execution-running`)", body = Problem, content_type = "application/problem+json"),
        answers::UnsupportedMediaType,
        (status = 422, description = "Invalid fields, each listed in `errors` (`note` is required)", body = Problem, content_type = "application/problem+json"),
        answers::ServiceUnavailable,
    )
)]
#[tracing::instrument(name = "resolve_incident", skip_all, fields(order_id = %raw, execution_arn = Empty, operator = %operator.name))]
pub async fn resolve(
    State(state): State<AppState>,
    operator: Operator,
    PathParam(raw): PathParam,
    JsonBody(body): JsonBody,
) -> Result<Json<ResolveResult>, Problem> {
    let (order, incident) = with_incident(&state, &raw).await?;
    let Some(note) = note(&body)? else {
        return Err(Problem::validation(vec![FieldError::new(
            "/note",
            "is required: say what was done by hand",
        )]));
    };
    if let Some(arn) = &order.execution_arn {
        match state.workflow.describe_execution(arn).await {
            Ok(info) if info.status == "RUNNING" => {
                return Err(Problem::new(
                    ProblemKind::ExecutionRunning,
                    format!(
                        "the execution of order {} is running (a redrive, or retries of {}); \
                         resolve it once it has ended",
                        order.id(),
                        incident.step
                    ),
                ));
            }
            Ok(_) | Err(WorkflowError::ExecutionDoesNotExist(_)) => {}
            Err(e) => return Err(Problem::backend(&e, e.is_transient())),
        }
    }
    let action = OperatorAction {
        action: ActionKind::Resolve,
        by: operator.name.clone(),
        note: Some(note),
        at: Utc::now(),
    };
    let resolved = state
        .ports
        .orders
        .resolve_incident(order.id(), &action)
        .await
        .map_err(|e| Problem::backend(&e, e.is_transient()))?;
    match resolved {
        Resolved::Now(order) => {
            tracing::warn!(
                step = %incident.step,
                error = %incident.error,
                "an operator resolved the order's incident by hand"
            );
            state.metrics.saga_finished(OrderStatus::Cancelled);
            Ok(Json(ResolveResult {
                order_id: order.id().to_string(),
                status: order.status,
                actions: order.actions.iter().map(ActionView::from).collect(),
            }))
        }
        // Resolved (or finished by a redrive) between the read and the write.
        Resolved::NotOpen(order) => Err(no_open_incident(&order)),
    }
}
