//! The service's front door (`/`: where the documentation is), liveness (`/healthz`: the
//! process answers), readiness (`/readyz`: the store and the workflow answer) and the metrics
//! exposition.

use super::AppState;
use super::problem::{Problem, ProblemKind};
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use store::{OrderId, OrderRepository};
use utoipa::ToSchema;
use workflow::{WorkflowError, WorkflowPort};

/// The order id readiness looks up: never a real order's, and it needs no such order to exist.
const PROBE_ID: &str = "fulfillment-readiness-probe";

#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    #[schema(example = "ok")]
    pub status: String,
}

/// Where to start: the service's name and version, and links to its documentation.
#[derive(Debug, Serialize, ToSchema)]
pub struct ServiceIndex {
    #[schema(example = "fulfillment")]
    pub service: String,
    #[schema(example = "0.1.0")]
    pub version: String,
    /// Swagger UI: every operation, tried from the browser.
    #[schema(example = "/docs")]
    pub docs: String,
    /// The OpenAPI 3.1 document.
    #[schema(example = "/openapi.json")]
    pub openapi: String,
    #[schema(example = "/healthz")]
    pub health: String,
    #[schema(example = "/metrics")]
    pub metrics: String,
}

/// Where to start: links to the API's documentation.
#[utoipa::path(
    get,
    path = "/",
    operation_id = "index",
    tag = "service",
    responses((status = 200, description = "The service and its documentation", body = ServiceIndex))
)]
pub async fn index() -> Json<ServiceIndex> {
    Json(ServiceIndex {
        service: "fulfillment".to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        docs: "/docs".to_owned(),
        openapi: "/openapi.json".to_owned(),
        health: "/healthz".to_owned(),
        metrics: "/metrics".to_owned(),
    })
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
        (status = 503, description = "The store or the workflow service does not answer, or the payment provider or the carrier refuses the service's key or URL (`not-ready`)", body = Problem, content_type = "application/problem+json"),
    )
)]
#[tracing::instrument(name = "readiness", skip_all)]
pub async fn readyz(State(state): State<AppState>) -> Result<Json<Health>, Problem> {
    if let Err(unready) = state
        .readiness
        .probe(state.ports.orders.as_ref(), state.workflow.as_ref())
        .await
    {
        tracing::warn!(error = %unready.error, "{} not ready", unready.what);
        return Err(Problem::new(
            ProblemKind::NotReady,
            format!("{} does not answer", unready.what),
        ));
    }
    // A provider that does not answer is no reason to stop taking orders (their charges are
    // retried); one that refuses our settings is, until an operator fixes them.
    if let Err(e) = state.ports.payments.health().await {
        tracing::warn!(error = %e, "the payment provider refuses this service's settings");
        return Err(Problem::new(ProblemKind::NotReady, e.to_string()));
    }
    if let Err(e) = state.ports.shipping.health().await {
        tracing::warn!(error = %e, "the carrier refuses this service's settings");
        return Err(Problem::new(ProblemKind::NotReady, e.to_string()));
    }
    Ok(Json(Health {
        status: "ready".to_owned(),
    }))
}

/// Which backend did not answer a [`probe`], and what it said.
#[derive(Debug)]
pub struct Unready {
    /// `the store` or `the workflow service`.
    pub what: &'static str,
    pub error: String,
}

/// How long `/readyz` trusts what the workflow service last answered it. Load balancers probe
/// every few seconds, each replica on its own, and AWS refills `DescribeExecution` at about 15
/// a second for the whole account (the status polls' quota too): each replica asks at most
/// once in this long.
pub const WORKFLOW_PROBE_TTL: Duration = Duration::from_secs(10);

/// `/readyz`'s probe, with the workflow service's answer kept for [`WORKFLOW_PROBE_TTL`] (the
/// store, whose reads are plentiful, is asked every time).
#[derive(Default)]
pub struct Readiness {
    /// When the workflow service last answered, and whether it was ready.
    workflow: Mutex<Option<(Instant, Result<(), String>)>>,
}

impl Readiness {
    pub async fn probe(
        &self,
        orders: &dyn OrderRepository,
        workflow: &dyn WorkflowPort,
    ) -> Result<(), Unready> {
        probe_store(orders).await?;
        let kept = self
            .workflow
            .lock()
            .expect("the readiness lock")
            .as_ref()
            .filter(|(at, _)| at.elapsed() < WORKFLOW_PROBE_TTL)
            .map(|(_, answer)| answer.clone());
        let answer = match kept {
            Some(answer) => answer,
            None => {
                let answer = probe_workflow(workflow).await.map_err(|u| u.error);
                *self.workflow.lock().expect("the readiness lock") =
                    Some((Instant::now(), answer.clone()));
                answer
            }
        };
        answer.map_err(|error| Unready {
            what: "the workflow service",
            error,
        })
    }
}

/// Checks that the store and the workflow service answer: a read of an order no order has, and
/// a description of its execution, which need not exist. Used at start-up (`/readyz` asks the
/// workflow service less often: [`Readiness`]).
pub async fn probe(
    orders: &dyn OrderRepository,
    workflow: &dyn WorkflowPort,
) -> Result<(), Unready> {
    probe_store(orders).await?;
    probe_workflow(workflow).await
}

async fn probe_store(orders: &dyn OrderRepository) -> Result<(), Unready> {
    let id = OrderId::parse(PROBE_ID).expect("a valid id");
    match orders.get(&id).await {
        Ok(_) => Ok(()),
        Err(e) => Err(Unready {
            what: "the store",
            error: e.to_string(),
        }),
    }
}

async fn probe_workflow(workflow: &dyn WorkflowPort) -> Result<(), Unready> {
    match workflow
        .describe_execution(&workflow.execution_arn(PROBE_ID))
        .await
    {
        Ok(_) | Err(WorkflowError::ExecutionDoesNotExist(_)) => Ok(()),
        Err(e) => Err(Unready {
            what: "the workflow service",
            error: e.to_string(),
        }),
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
