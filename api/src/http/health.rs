//! Liveness (`/healthz`: the process answers), readiness (`/readyz`: the store and the workflow
//! answer) and the metrics exposition.

use super::AppState;
use super::problem::{Problem, ProblemKind};
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use store::OrderId;
use utoipa::ToSchema;
use workflow::WorkflowError;

/// The order id readiness looks up: never a real order's, and it needs no such order to exist.
const PROBE_ID: &str = "fulfillment-readiness-probe";

#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    #[schema(example = "ok")]
    pub status: String,
}

/// Liveness: the process answers.
#[utoipa::path(
    get,
    path = "/healthz",
    operation_id = "healthz",
    tag = "service",
    responses((status = 200, description = "Alive", body = Health))
)]
pub async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok".to_owned(),
    })
}

/// Readiness: the store and the workflow service answer.
#[utoipa::path(
    get,
    path = "/readyz",
    operation_id = "readyz",
    tag = "service",
    responses(
        (status = 200, description = "Ready", body = Health),
        (status = 503, description = "The store or the workflow service does not answer (`not-ready`)", body = Problem, content_type = "application/problem+json"),
    )
)]
#[tracing::instrument(name = "readiness", skip_all)]
pub async fn readyz(State(state): State<AppState>) -> Result<Json<Health>, Problem> {
    let id = OrderId::parse(PROBE_ID).expect("a valid id");
    let not_ready =
        |what: &str| Problem::new(ProblemKind::NotReady, format!("{what} does not answer"));
    if let Err(e) = state.orders.get(&id).await {
        tracing::warn!(error = %e, "store not ready");
        return Err(not_ready("the store"));
    }
    let arn = state.workflow.execution_arn(PROBE_ID);
    match state.workflow.describe_execution(&arn).await {
        Ok(_) | Err(WorkflowError::ExecutionDoesNotExist(_)) => Ok(Json(Health {
            status: "ready".to_owned(),
        })),
        Err(e) => {
            tracing::warn!(error = %e, "workflow not ready");
            Err(not_ready("the workflow service"))
        }
    }
}

/// Prometheus metrics (OpenMetrics text).
#[utoipa::path(
    get,
    path = "/metrics",
    operation_id = "metrics",
    tag = "service",
    responses((status = 200, description = "Request counts and durations by route and status, order and approval outcomes", body = String, content_type = "application/openmetrics-text"))
)]
pub async fn metrics(State(state): State<AppState>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
        )],
        state.metrics.render(),
    )
        .into_response()
}
