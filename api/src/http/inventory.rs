//! Stock levels and the catalog: `PUT /inventory/{sku}` sets what is available (an operator's
//! stock count) and what one unit costs (the catalog price orders are charged at),
//! `GET /inventory/{sku}` reads one SKU and `GET /inventory` lists them all, a page at a time.

use super::AppState;
use super::answers;
use super::auth::{Caller, Operator};
use super::extract::{JsonBody, PathParam, QueryParams};
use super::problem::{FieldError, Problem, ProblemKind};
use super::validate::{self, sku_error};
use axum::Json;
use axum::extract::State;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use store::StockLevel;
use utoipa::{IntoParams, ToSchema};

/// An operator's stock count, catalog price, or both (at least one). What is left out stays as
/// it was.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StockCount {
    /// Units on the shelf that orders may reserve from now on. Units already reserved by
    /// orders in progress, or shipped, are not part of it (they stay as they are).
    #[schema(minimum = 0, maximum = 1000000000, example = 10, nullable = false)]
    #[serde(default, deserialize_with = "intake::numbers::whole_opt")]
    pub available: Option<u64>,
    /// The catalog price of one unit: what new orders are charged. Orders placed before keep
    /// the price they were placed at. Only orders in its currency can buy the SKU.
    #[schema(nullable = false)]
    #[serde(default)]
    pub price: Option<CatalogPrice>,
}

/// A catalog price: one unit of a SKU.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CatalogPrice {
    /// One unit, in the currency's minor unit.
    #[schema(minimum = 0, maximum = 100000000, example = 2500)]
    #[serde(deserialize_with = "intake::numbers::whole")]
    pub cents: u64,
    /// ISO 4217.
    #[schema(pattern = "^[A-Z]{3}$", example = "EUR")]
    pub currency: String,
}

/// The stock of one SKU. Every unit is in exactly one of `available`, `reserved` and `shipped`,
/// and `stocked` is their sum: an order's reservation moves units from `available` to
/// `reserved`, a release moves them back, a shipment moves them on to `shipped`.
#[derive(Debug, Serialize, ToSchema)]
pub struct Stock {
    #[schema(example = "book")]
    pub sku: String,
    /// Units that can be reserved now (what the last count set, less what orders reserved
    /// since, plus what they released).
    pub available: u64,
    /// Units held by orders that have not shipped yet.
    pub reserved: u64,
    /// Units that left with shipments.
    pub shipped: u64,
    /// Units the SKU holds in all: `available + reserved + shipped`. A count sets `available`
    /// and so changes it; orders only move units between the other three.
    pub stocked: u64,
    /// The catalog price of one unit; null until an operator sets one (the SKU cannot be
    /// ordered until then).
    pub price: Option<CatalogPrice>,
}

/// A page of SKUs (in SKU order on the embedded backend; in the table's order on AWS).
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StockPage {
    pub items: Vec<Stock>,
    /// Pass as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

/// Paging of the stock list.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StockQuery {
    /// SKUs per page (1–1000, default 100).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    pub limit: Option<String>,
    /// The `nextCursor` of the previous page, as given (any other text is a 400).
    #[param(min_length = 1, max_length = 200)]
    pub cursor: Option<String>,
}

impl From<StockLevel> for Stock {
    fn from(s: StockLevel) -> Self {
        Stock {
            sku: s.sku,
            available: s.available,
            reserved: s.reserved,
            shipped: s.shipped,
            stocked: s.stocked,
            price: s.price.map(|p| CatalogPrice {
                cents: p.cents,
                currency: p.currency,
            }),
        }
    }
}

/// Count and price a SKU.
///
/// Sets the units available to reserve, the catalog price, or both. A SKU not stocked before
/// starts with what is given (nothing available when only priced).
#[utoipa::path(
    put,
    path = "/inventory/{sku}",
    operation_id = "setStock",
    tag = "operator",
    security(("apiKey" = [])),
    params(("sku" = String, Path, min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9_.-]+$",
        description = "1–64 characters of `[A-Za-z0-9_.-]`; another SKU is a 422")),
    request_body(content = StockCount, content_type = "application/json"),
    responses(
        (status = 200, description = "The SKU's stock now", body = Stock),
        answers::MalformedJson,
        answers::Unauthorized,
        answers::Forbidden,
        answers::BodyTimeout,
        answers::PayloadTooLarge,
        answers::UnsupportedMediaType,
        (status = 422, description = "An invalid SKU, count or price, or neither a count nor a price, listed in `errors`", body = Problem, content_type = "application/problem+json"),
        answers::ServiceUnavailable,
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
    let change = validate::stock_change(&body)
        .map_err(|e| errors.extend(e))
        .ok();
    let Some(change) = change.filter(|_| errors.is_empty()) else {
        return Err(Problem::validation(errors));
    };
    let level = state
        .ports
        .inventory
        .set_stock(&sku, change.available, change.price.as_ref())
        .await
        .map_err(|e| Problem::backend(&e, e.is_transient()))?;
    tracing::info!(
        available = ?change.available,
        price = ?change.price,
        "stock set"
    );
    Ok(Json(level.into()))
}

/// The stock of a SKU.
#[utoipa::path(
    get,
    path = "/inventory/{sku}",
    operation_id = "getStock",
    tag = "inventory",
    security(("apiKey" = [])),
    params(("sku" = String, Path, min_length = 1, max_length = 64, pattern = "^[A-Za-z0-9_.-]+$",
        description = "The SKU: 1–64 characters of `[A-Za-z0-9_.-]` (another was never stocked: 404)")),
    responses(
        (status = 200, description = "The SKU's stock", body = Stock),
        answers::Unauthorized,
        (status = 404, description = "The SKU was never stocked (`sku-not-found`)", body = Problem, content_type = "application/problem+json"),
        answers::ServiceUnavailable,
    )
)]
#[tracing::instrument(name = "get_stock", skip_all, fields(sku = %sku))]
pub async fn get_stock(
    State(state): State<AppState>,
    _caller: Caller,
    PathParam(sku): PathParam,
) -> Result<Json<Stock>, Problem> {
    let not_found = || Problem::new(ProblemKind::SkuNotFound, format!("no stock of {sku:?}"));
    if sku_error(&sku).is_some() {
        return Err(not_found());
    }
    match state.ports.inventory.stock(&sku).await {
        Ok(Some(level)) => Ok(Json(level.into())),
        Ok(None) => Err(not_found()),
        Err(e) => Err(Problem::backend(&e, e.is_transient())),
    }
}

/// Where a cursor continues: the store's own position (the last SKU on SQLite, the last key
/// on DynamoDB), base64url-encoded so that clients treat it as opaque. Text that does not
/// decode is not a cursor this service gave.
fn cursor_after(cursor: &str) -> Option<String> {
    let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
    String::from_utf8(bytes).ok().filter(|s| !s.is_empty())
}

/// Every SKU's stock, a page at a time.
#[utoipa::path(
    get,
    path = "/inventory",
    operation_id = "listStock",
    tag = "inventory",
    security(("apiKey" = [])),
    params(StockQuery),
    responses(
        (status = 200, description = "A page of SKUs", body = StockPage),
        answers::Unauthorized,
        (status = 400, description = "Invalid `limit`, or a `cursor` this service did not give (`invalid-request`, naming the parameter in `errors`)", body = Problem, content_type = "application/problem+json"),
        answers::ServiceUnavailable,
    )
)]
#[tracing::instrument(name = "list_stock", skip_all)]
pub async fn list_stock(
    State(state): State<AppState>,
    _caller: Caller,
    QueryParams(query): QueryParams<StockQuery>,
) -> Result<Json<StockPage>, Problem> {
    let mut errors = Vec::new();
    let limit = validate::query_integer("limit", query.limit.as_deref(), 1, 1000, &mut errors)
        .map_or(100, |n| n as u32);
    let after = match query.cursor.as_deref() {
        None => None,
        Some(c) => {
            let after = cursor_after(c);
            if after.is_none() {
                errors.push(FieldError::new("cursor", "is not a cursor this list gave"));
            }
            after
        }
    };
    Problem::check_query(errors)?;
    let page = state
        .ports
        .inventory
        .list_stock(after.as_deref(), limit)
        .await
        .map_err(|e| Problem::backend(&e, e.is_transient()))?;
    Ok(Json(StockPage {
        items: page.items.into_iter().map(Stock::from).collect(),
        next_cursor: page.next.map(|sku| URL_SAFE_NO_PAD.encode(sku)),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_is_the_last_sku_and_nothing_else_is_one() {
        let cursor = URL_SAFE_NO_PAD.encode("book-2");
        assert_eq!(cursor_after(&cursor).as_deref(), Some("book-2"));
        assert_eq!(cursor_after("%%%"), None);
        assert_eq!(cursor_after(&URL_SAFE_NO_PAD.encode([0xff, 0xfe])), None);
        assert_eq!(cursor_after(""), None);
    }
}
