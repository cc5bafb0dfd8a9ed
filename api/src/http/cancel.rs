//! `POST /orders/{orderId}/cancel`: the order's client or an operator cancels an order before it
//! ships (through [`workflow::cancel`]); the order ends `CANCELLED` through the saga's own
//! compensations.

use super::AppState;
use super::answers;
use super::auth::Caller;
use super::extract::{JsonBody, PathParam};
use super::orders::{OrderStatusView, accepted_at_status, find_own_order, status_view};
use super::problem::{Problem, ProblemKind};
use super::validate;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use store::{Cancellation, Order, Role};
use tracing::Span;
use tracing::field::Empty;
use utoipa::ToSchema;
use workflow::CancelResult;

/// A request to cancel an order: `{}`, or with a reason.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelRequest {
    /// Why (shown in the order's status, and the cause of its `Order.Cancelled` failure).
    #[schema(
        pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]+$",
        min_length = 1,
        max_length = 500
    )]
    pub reason: Option<String>,
}

/// Who asked to cancel the order, when and why.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct CancellationView {
    /// `client` (the order's own) or `operator`.
    #[schema(example = "client")]
    pub requested_by: String,
    /// The operator who asked; shown to operators only (null for the order's client).
    pub operator: Option<String>,
    pub reason: Option<String>,
    pub requested_at: DateTime<Utc>,
}

impl CancellationView {
    pub fn new(c: &Cancellation, caller: &Caller) -> CancellationView {
        CancellationView {
            requested_by: c.role.as_str().to_owned(),
            operator: (c.role == Role::Operator && caller.is_operator()).then(|| c.by.clone()),
            reason: c.reason.clone(),
            requested_at: c.at,
        }
    }
}

/// The order's status, `202` with `Location` (its status URL), marked as a replay when it is one.
async fn accepted(state: &AppState, order: &Order, caller: &Caller, replayed: bool) -> Response {
    match status_view(state, order, caller).await {
        Ok(view) => accepted_at_status(order.id(), view, replayed),
        Err(problem) => problem.into_response(),
    }
}

/// Cancel an order.
///
/// Accepted at any point before the order's shipment begins: the saga's next step sees the
/// cancellation before it acts (an order waiting for approval is released from the wait at
/// once), and the order ends `CANCELLED` through the same compensations as a failure (refund,
/// release), with failure `Order.Cancelled` and the reason. The first cancellation is kept: a
/// repeat answers the same (`Idempotent-Replayed: true`). Once the shipment began, or the order
/// is already being undone for another reason, the answer is a 409 and nothing changes. The
/// order's client or any operator may cancel it.
#[utoipa::path(
    post,
    path = "/orders/{orderId}/cancel",
    operation_id = "cancelOrder",
    tag = "orders",
    security(("apiKey" = [])),
    params(("orderId" = String, Path, description = "The order id")),
    request_body(content = CancelRequest, content_type = "application/json"),
    responses(
        (status = 202, description = "Cancelled (or, with `Idempotent-Replayed: true`, cancelled before): the compensation runs; poll the status URL", body = OrderStatusView,
            headers(
                ("Location" = String, description = "The order's status URL"),
                ("Idempotent-Replayed" = String, description = "`true` when the order's cancellation was recorded before"),
            )),
        answers::MalformedJson,
        answers::Unauthorized,
        answers::OwnOrderNotFound,
        (status = 409, description = "The order shipped or its shipment began (`order-shipped`), or it is already being undone or ended so for another reason (`not-cancellable`); nothing changed", body = Problem, content_type = "application/problem+json"),
        answers::BodyTimeout,
        answers::PayloadTooLarge,
        answers::UnsupportedMediaType,
        answers::ValidationFailed,
        answers::ServiceUnavailable,
    )
)]
#[tracing::instrument(name = "cancel_order", skip_all, fields(order_id = %raw, execution_arn = Empty, principal = %caller.principal))]
pub async fn cancel(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(raw): PathParam,
    JsonBody(body): JsonBody,
) -> Response {
    let order = match find_own_order(&state, &raw, &caller).await {
        Ok(order) => order,
        Err(p) => return p.into_response(),
    };
    if let Some(arn) = &order.execution_arn {
        Span::current().record("execution_arn", arn.as_str());
    }
    let request = match validate::parse::<CancelRequest>(&body) {
        Ok(r) => r,
        Err(errors) => return Problem::validation(errors).into_response(),
    };
    let cancellation = Cancellation {
        by: caller.principal.clone(),
        role: caller.role,
        reason: request.reason,
        at: Utc::now(),
    };
    let outcome = workflow::cancel(
        state.ports.orders.as_ref(),
        state.workflow.as_ref(),
        order.id(),
        &cancellation,
    )
    .await;
    let (label, response) = match outcome {
        Ok(CancelResult::Accepted(order)) => {
            tracing::info!(status = order.status.as_str(), "order cancelled");
            ("accepted", accepted(&state, &order, &caller, false).await)
        }
        Ok(CancelResult::Replayed(order)) => {
            ("replayed", accepted(&state, &order, &caller, true).await)
        }
        Ok(CancelResult::TooLate(order)) => {
            let problem = Problem::new(
                ProblemKind::OrderShipped,
                format!(
                    "order {} is {}: its shipment began, so it can no longer be cancelled",
                    order.id(),
                    order.status.as_str()
                ),
            );
            ("too_late", problem.into_response())
        }
        Ok(CancelResult::Ended(order)) => {
            let why = order
                .failure
                .as_ref()
                .map(|f| format!(" ({})", f.error))
                .unwrap_or_default();
            let problem = Problem::new(
                ProblemKind::NotCancellable,
                format!(
                    "order {} is {}{why}: it is already being undone, or was, for another reason",
                    order.id(),
                    order.status.as_str()
                ),
            );
            ("ended", problem.into_response())
        }
        Ok(CancelResult::NotFound) => (
            "not_found",
            Problem::new(ProblemKind::OrderNotFound, format!("no order {raw:?}")).into_response(),
        ),
        Err(e) => return Problem::backend(&e, e.is_transient()).into_response(),
    };
    state.metrics.cancel(label);
    response
}
