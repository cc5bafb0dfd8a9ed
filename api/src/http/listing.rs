//! `GET /orders`: the caller's orders (an operator's: every order), newest first, a page at a
//! time, filtered by status and creation window. The store reads them through an index by
//! owner (or by creation time) and bounds what one page examines, so a page may be short and
//! still have a `next` (`OrderRepository::find_orders`).

use super::AppState;
use super::answers;
use super::auth::Caller;
use super::extract::QueryParams;
use super::problem::{FieldError, Problem};
use super::validate;
use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use store::{Order, OrderFilter, OrderStatus, QueueCursor};
use utoipa::{IntoParams, ToSchema};

/// An order as a listing shows it; its status URL has the rest.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OrderSummary {
    pub order_id: String,
    pub customer_id: String,
    pub status: OrderStatus,
    pub amount_cents: u64,
    pub currency: String,
    pub requires_approval: bool,
    pub created_at: DateTime<Utc>,
    /// When the order last changed.
    pub updated_at: DateTime<Utc>,
    /// `/orders/{orderId}/status`.
    pub status_url: String,
}

impl From<&Order> for OrderSummary {
    fn from(o: &Order) -> Self {
        OrderSummary {
            order_id: o.id().to_string(),
            customer_id: o.new.customer_id.clone(),
            status: o.status,
            amount_cents: o.new.amount_cents,
            currency: o.new.currency.clone(),
            requires_approval: o.new.requires_approval,
            created_at: o.new.created_at,
            updated_at: o.updated_at,
            status_url: format!("/orders/{}/status", o.id()),
        }
    }
}

/// A page of orders, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct OrderList {
    pub items: Vec<OrderSummary>,
    /// Pass as `after` for the next page; null on the last page. A page may hold fewer orders
    /// than `limit` (even none) and still have a `next`: one page reads a bounded number of
    /// orders to find those that match.
    pub next: Option<String>,
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct ListQuery {
    /// Only orders in this status now.
    #[param(value_type = Option<OrderStatus>)]
    pub status: Option<String>,
    /// Only orders created at or after this time (RFC 3339).
    #[param(value_type = Option<DateTime<Utc>>)]
    pub created_since: Option<String>,
    /// Only orders created before this time (RFC 3339); at or before `createdSince`, none.
    #[param(value_type = Option<DateTime<Utc>>)]
    pub created_until: Option<String>,
    /// Orders per page (1–100, default 20).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 100)]
    pub limit: Option<String>,
    /// The `next` of the previous page, as given (text of another shape is a 400).
    #[param(pattern = "^[0-9T:.Z-]{1,40}\\|[A-Za-z0-9_-]{1,80}$")]
    pub after: Option<String>,
}

/// A time query parameter; `None` when absent or (with an error) not RFC 3339.
fn time(name: &str, raw: Option<&str>, errors: &mut Vec<FieldError>) -> Option<DateTime<Utc>> {
    let parsed = DateTime::parse_from_rfc3339(raw?).map(|t| t.with_timezone(&Utc));
    if parsed.is_err() {
        errors.push(FieldError::new(
            name,
            "must be an RFC 3339 time, e.g. 2026-12-04T10:00:00Z",
        ));
    }
    parsed.ok()
}

/// The filter, page size and cursor a query asks for; each problem with it added to `errors`.
fn filter(
    caller: &Caller,
    query: &ListQuery,
    errors: &mut Vec<FieldError>,
) -> (OrderFilter, u32, Option<QueueCursor>) {
    let status = query.status.as_deref().and_then(|raw| {
        let status = OrderStatus::parse(raw);
        if status.is_none() {
            let names: Vec<&str> = OrderStatus::ALL.iter().map(|s| s.as_str()).collect();
            errors.push(FieldError::new(
                "status",
                format!("must be one of {}", names.join(", ")),
            ));
        }
        status
    });
    let created_since = time("createdSince", query.created_since.as_deref(), errors);
    let created_until = time("createdUntil", query.created_until.as_deref(), errors);
    let limit = validate::query_integer("limit", query.limit.as_deref(), 1, 100, errors);
    let after = validate::queue_cursor(query.after.as_deref(), "orders", errors);
    let filter = OrderFilter {
        // A client lists its own orders; an operator, everyone's.
        owner: (!caller.is_operator()).then(|| caller.principal.clone()),
        status,
        created_since,
        created_until,
        ..OrderFilter::default()
    };
    (filter, limit.map_or(20, |n| n as u32), after)
}

/// List orders, newest first.
///
/// A client's key lists the orders it placed; an operator's, every order. Filter by status and
/// creation window; page with `after` (each page's `next`) until `next` is null.
#[utoipa::path(
    get,
    path = "/orders",
    operation_id = "listOrders",
    tag = "orders",
    security(("apiKey" = [])),
    params(ListQuery),
    responses(
        (status = 200, description = "A page of orders, newest first", body = OrderList),
        (status = 400, description = "An invalid filter, `limit` or `after`, each listed in `errors`", body = Problem, content_type = "application/problem+json"),
        answers::Unauthorized,
        answers::ServiceUnavailable,
    )
)]
#[tracing::instrument(name = "list_orders", skip_all, fields(principal = %caller.principal))]
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    QueryParams(query): QueryParams<ListQuery>,
) -> Result<Json<OrderList>, Problem> {
    let mut errors = Vec::new();
    let (filter, limit, after) = filter(&caller, &query, &mut errors);
    Problem::check_query(errors)?;
    let page = state
        .ports
        .orders
        .find_orders(&filter, after.as_ref(), limit)
        .await
        .map_err(|e| Problem::backend(&e, e.is_transient()))?;
    Ok(Json(OrderList {
        items: page.items.iter().map(OrderSummary::from).collect(),
        next: page.next,
    }))
}
