//! Operator approvals: `POST /orders/{orderId}/approval` answers a parked approval task once
//! (through [`decide`]), and `GET /approvals` lists the orders waiting for one.

use super::AppState;
use super::answers;
use super::auth::Operator;
use super::extract::{JsonBody, PathParam, QueryParams};
use super::orders::{IDEMPOTENT_REPLAYED, decision_name, find_order};
use super::problem::{Problem, ProblemKind};
use super::validate;
use axum::Json;
use axum::extract::State;
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use store::{Decision, Order, OrderStatus};
use tracing::Span;
use tracing::field::Empty;
use utoipa::{IntoParams, ToSchema};
use workflow::steps::approval::{DecisionResult, decide};

/// The errors an approval window that closed undecided leaves on the order: ours, from the
/// keeper, and `States.Timeout` from the state's own timeout (the backstop, and executions
/// started before windows were fixed on the order).
const WINDOW_CLOSED: [&str; 2] = ["Order.ApprovalExpired", "States.Timeout"];

/// An operator's decision.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalRequest {
    pub decision: DecisionName,
    /// Why (kept on the approval record; a rejection's cause).
    #[schema(
        pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]+$",
        min_length = 1,
        max_length = 500
    )]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum DecisionName {
    Approve,
    Reject,
}

impl From<DecisionName> for Decision {
    fn from(d: DecisionName) -> Self {
        match d {
            DecisionName::Approve => Decision::Approve,
            DecisionName::Reject => Decision::Reject,
        }
    }
}

impl From<Decision> for DecisionName {
    fn from(d: Decision) -> Self {
        match d {
            Decision::Approve => DecisionName::Approve,
            Decision::Reject => DecisionName::Reject,
        }
    }
}

/// The decision recorded on the order.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalResult {
    pub order_id: String,
    pub decision: DecisionName,
    /// The order's saga status after the decision.
    pub status: OrderStatus,
}

/// An order waiting for an operator.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingApprovalView {
    pub order_id: String,
    pub amount_cents: u64,
    pub currency: String,
    pub requested_at: DateTime<Utc>,
    /// When the approval window closes: a decision must come before it. Null for approvals
    /// requested before windows were fixed on the order.
    pub deadline: Option<DateTime<Utc>>,
}

/// A page of the orders waiting for an operator, oldest request first.
#[derive(Debug, Serialize, ToSchema)]
pub struct PendingApprovals {
    pub items: Vec<PendingApprovalView>,
    /// Pass as `after` for the next page; null on the last page.
    pub next: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PendingQuery {
    /// Orders per page (1–1000, default 100).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    pub limit: Option<String>,
    /// The `next` of the previous page, as given (text of another shape is a 400).
    #[param(pattern = "^[0-9T:.Z-]{1,40}\\|[A-Za-z0-9_-]{1,80}$")]
    pub after: Option<String>,
}

/// Whether the order's approval window ran out before anyone decided.
fn expired(order: &Order) -> bool {
    let undecided = order
        .approval
        .as_ref()
        .is_some_and(|a| a.decision.is_none());
    let compensated = matches!(
        order.status,
        OrderStatus::Compensating | OrderStatus::Cancelled | OrderStatus::CompensationFailed
    );
    let timed_out = order
        .failure
        .as_ref()
        .is_some_and(|f| WINDOW_CLOSED.contains(&f.error.as_str()));
    undecided && compensated && timed_out
}

fn window_closed(order: &Order) -> Response {
    let closed = match order.approval.as_ref().and_then(|a| a.deadline) {
        Some(d) => format!(
            "closed at {}",
            d.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        ),
        None => "ran out".to_owned(),
    };
    Problem::new(
        ProblemKind::ApprovalExpired,
        format!(
            "the approval window of order {} {closed} before a decision; the order is \
             cancelled",
            order.id()
        ),
    )
    .into_response()
}

fn result(order: &Order, decision: Decision) -> Json<ApprovalResult> {
    Json(ApprovalResult {
        order_id: order.id().to_string(),
        decision: order
            .approval
            .as_ref()
            .and_then(|a| a.decision)
            .unwrap_or(decision)
            .into(),
        status: order.status,
    })
}

/// Decide an order's approval.
///
/// Approving lets the saga ship; rejecting cancels it (refund, release). A decision is recorded
/// once: the same decision again replays (`Idempotent-Replayed: true`), another is a 409. Who
/// decided is the operator whose key made the request.
#[utoipa::path(
    post,
    path = "/orders/{orderId}/approval",
    operation_id = "decideApproval",
    tag = "operator",
    security(("apiKey" = [])),
    params(
        ("orderId" = String, Path, description = "The order id"),
    ),
    request_body(content = ApprovalRequest, content_type = "application/json"),
    responses(
        (status = 200, description = "Decided (or, with `Idempotent-Replayed: true`, decided so before)", body = ApprovalResult,
            headers(("Idempotent-Replayed" = String, description = "`true` when this decision was made before"))),
        answers::MalformedJson,
        answers::Unauthorized,
        answers::Forbidden,
        answers::OrderNotFound,
        (status = 409, description = "Another decision was made (`approval-conflict`), the order is not awaiting approval (`not-awaiting-approval`), its approval window ran out (`approval-expired`) or it was cancelled first (`order-cancelled`)", body = Problem, content_type = "application/problem+json"),
        answers::BodyTimeout,
        answers::PayloadTooLarge,
        answers::UnsupportedMediaType,
        answers::ValidationFailed,
        answers::ServiceUnavailable,
    )
)]
#[tracing::instrument(name = "decide_approval", skip_all, fields(order_id = %raw, execution_arn = Empty, operator = %operator.name))]
pub async fn decide_approval(
    State(state): State<AppState>,
    operator: Operator,
    PathParam(raw): PathParam,
    JsonBody(body): JsonBody,
) -> Response {
    let order = match find_order(&state, &raw).await {
        Ok(order) => order,
        Err(p) => return p.into_response(),
    };
    if let Some(arn) = &order.execution_arn {
        Span::current().record("execution_arn", arn.as_str());
    }
    let (decision, reason) = match validate::approval_decision(&body) {
        Ok(d) => d,
        Err(errors) => return Problem::validation(errors).into_response(),
    };
    let name = decision_name(decision);
    let outcome = decide(
        state.ports.orders.as_ref(),
        state.workflow.as_ref(),
        order.id(),
        decision,
        &operator.name,
        reason.as_deref(),
    )
    .await;
    let (label, response) = match outcome {
        Ok(DecisionResult::Applied(order)) => {
            tracing::info!(decision = name, "approval decided");
            ("applied", result(&order, decision).into_response())
        }
        Ok(DecisionResult::Replayed(order)) => {
            let mut response = result(&order, decision).into_response();
            response
                .headers_mut()
                .insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
            ("replayed", response)
        }
        Ok(DecisionResult::Conflict(order)) => {
            let made = order
                .approval
                .as_ref()
                .and_then(|a| a.decision)
                .map_or("another decision", decision_name);
            let problem = Problem::new(
                ProblemKind::ApprovalConflict,
                format!("order {} was decided before: {made}", order.id()),
            );
            ("conflict", problem.into_response())
        }
        Ok(DecisionResult::Expired(order)) => ("expired", window_closed(&order)),
        Ok(DecisionResult::Cancelled(order)) => {
            let problem = Problem::new(
                ProblemKind::OrderCancelled,
                format!(
                    "order {} was cancelled before a decision; the decision took no effect",
                    order.id()
                ),
            );
            ("cancelled", problem.into_response())
        }
        Ok(DecisionResult::NotAwaiting(order)) if expired(&order) => {
            ("expired", window_closed(&order))
        }
        Ok(DecisionResult::NotAwaiting(order)) => {
            let problem = Problem::new(
                ProblemKind::NotAwaitingApproval,
                format!(
                    "order {} is {}, not awaiting approval",
                    order.id(),
                    order.status.as_str()
                ),
            );
            ("not_awaiting", problem.into_response())
        }
        Ok(DecisionResult::NotFound) => (
            "not_found",
            Problem::new(ProblemKind::OrderNotFound, format!("no order {raw:?}")).into_response(),
        ),
        Err(e) => return Problem::backend(&e, e.is_transient()).into_response(),
    };
    state.metrics.decision(name, label);
    response
}

/// List the orders waiting for an operator's approval, oldest request first, a page at a time.
#[utoipa::path(
    get,
    path = "/approvals",
    operation_id = "listPendingApprovals",
    tag = "operator",
    security(("apiKey" = [])),
    params(PendingQuery),
    responses(
        (status = 200, description = "A page of the waiting orders, oldest request first", body = PendingApprovals),
        answers::InvalidPage,
        answers::Unauthorized,
        answers::Forbidden,
        answers::ServiceUnavailable,
    )
)]
#[tracing::instrument(name = "pending_approvals", skip_all)]
pub async fn pending(
    State(state): State<AppState>,
    _operator: Operator,
    QueryParams(query): QueryParams<PendingQuery>,
) -> Result<Json<PendingApprovals>, Problem> {
    let mut errors = Vec::new();
    let limit = validate::query_integer("limit", query.limit.as_deref(), 1, 1000, &mut errors);
    let after = validate::queue_cursor(query.after.as_deref(), "approvals", &mut errors);
    Problem::check_query(errors)?;
    let limit = limit.map_or(100, |n| n as u32);
    let page = state
        .ports
        .orders
        .pending_approvals(after.as_ref(), limit)
        .await
        .map_err(|e| Problem::backend(&e, e.is_transient()))?;
    Ok(Json(PendingApprovals {
        items: page
            .items
            .into_iter()
            .map(|p| PendingApprovalView {
                order_id: p.order_id.to_string(),
                amount_cents: p.amount_cents,
                currency: p.currency,
                requested_at: p.requested_at,
                deadline: p.deadline,
            })
            .collect(),
        next: page.next,
    }))
}
