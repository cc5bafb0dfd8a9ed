//! Stock levels: `PUT /inventory/{sku}` sets what is available (an operator's stock count) and
//! `GET /inventory/{sku}` reads it.

use super::AppState;
use super::auth::Operator;
use super::extract::{JsonBody, PathParam};
use super::problem::{FieldError, Problem, ProblemKind};
use super::validate::{self, sku_error};
use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use store::StockLevel;
use utoipa::ToSchema;

/// An operator's stock count.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // documents the body; the handler validates the JSON by hand
pub struct StockCount {
    /// Units available to reserve.
    #[schema(minimum = 0, maximum = 1000000000, example = 10)]
    pub available: u64,
}

/// The stock of one SKU.
#[derive(Debug, Serialize, ToSchema)]
pub struct Stock {
    #[schema(example = "book")]
    pub sku: String,
    /// Units that can be reserved.
    pub available: u64,
    /// Units held by orders that have not shipped.
    pub reserved: u64,
    /// Units the SKU holds in all, shipped ones included: the last count plus what was reserved
    /// and shipped then. Only a count changes it. Absent for a SKU last counted before it was
    /// kept (its next count records it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stocked: Option<u64>,
}

impl From<StockLevel> for Stock {
    fn from(s: StockLevel) -> Self {
        Stock {
            sku: s.sku,
            available: s.available,
            reserved: s.reserved,
            stocked: s.stocked,
        }
    }
}

/// Set the available stock of a SKU.
#[utoipa::path(
    put,
    path = "/inventory/{sku}",
    operation_id = "setStock",
    tag = "operator",
    security(("operatorToken" = [])),
    params(("sku" = String, Path, min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9_.-]+$",
        description = "1–64 characters of `[A-Za-z0-9_.-]`; another SKU is a 422")),
    request_body(content = StockCount, content_type = "application/json"),
    responses(
        (status = 200, description = "The SKU's stock now", body = Stock),
        (status = 400, description = "The body is not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "No or a wrong operator token", body = Problem, content_type = "application/problem+json",
            headers(("WWW-Authenticate" = String, description = "`Bearer`"))),
        (status = 408, description = "The body did not arrive within the read timeout (`body-timeout`); the connection is closed", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "The body is too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "The body is not `application/json`", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "An invalid SKU or count, listed in `errors`", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "A backend is unavailable", body = Problem, content_type = "application/problem+json"),
    )
)]
#[tracing::instrument(name = "set_stock", skip_all, fields(sku = %sku))]
pub async fn put_stock(
    State(state): State<AppState>,
    _operator: Operator,
    PathParam(sku): PathParam,
    JsonBody(body): JsonBody,
) -> Result<Json<Stock>, Problem> {
    let mut errors = Vec::new();
    if let Some(m) = sku_error(&sku) {
        errors.push(FieldError::new("sku", m));
    }
    let available = validate::stock_count(&body)
        .map_err(|e| errors.extend(e))
        .ok();
    let Some(available) = available.filter(|_| errors.is_empty()) else {
        return Err(Problem::validation(errors));
    };
    let level = state
        .inventory
        .set_available(&sku, available)
        .await
        .map_err(|e| Problem::backend(&e, e.is_transient()))?;
    tracing::info!(available, "stock set");
    Ok(Json(level.into()))
}

/// The stock of a SKU.
#[utoipa::path(
    get,
    path = "/inventory/{sku}",
    operation_id = "getStock",
    tag = "inventory",
    params(("sku" = String, Path, min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9_.-]+$",
        description = "The SKU: 1–64 characters of `[A-Za-z0-9_.-]` (another was never stocked: 404)")),
    responses(
        (status = 200, description = "The SKU's stock", body = Stock),
        (status = 404, description = "The SKU was never stocked (`sku-not-found`)", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "A backend is unavailable", body = Problem, content_type = "application/problem+json"),
    )
)]
#[tracing::instrument(name = "get_stock", skip_all, fields(sku = %sku))]
pub async fn get_stock(
    State(state): State<AppState>,
    PathParam(sku): PathParam,
) -> Result<Json<Stock>, Problem> {
    let not_found = || Problem::new(ProblemKind::SkuNotFound, format!("no stock of {sku:?}"));
    if sku_error(&sku).is_some() {
        return Err(not_found());
    }
    match state.inventory.stock(&sku).await {
        Ok(Some(level)) => Ok(Json(level.into())),
        Ok(None) => Err(not_found()),
        Err(e) => Err(Problem::backend(&e, e.is_transient())),
    }
}
