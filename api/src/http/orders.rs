//! `POST /orders`, `GET /orders/{orderId}`, `GET /orders/{orderId}/status` and
//! `GET /orders/{orderId}/history`: placing an order (business-key idempotency through
//! [`OrderIntake`](intake::OrderIntake)), reading it back, and watching its saga.

use super::AppState;
use super::answers;
use super::auth::Caller;
use super::cancel::CancellationView;
use super::conditional;
use super::extract::{JsonBody, PathParam, QueryParams};
use super::incidents::{ActionView, IncidentDetail};
use super::problem::{FieldError, Problem, ProblemKind};
use super::validate;
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use intake::pricing::{LineProblem, Mispriced, RequestedLine};
use intake::{IntakeError, OrderRequest, Placed};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use store::{Address, Order, OrderId, OrderStatus};
use telemetry::OrderOutcome;
use tracing::Span;
use tracing::field::Empty;
use utoipa::{IntoParams, ToSchema};
use workflow::WorkflowError;

/// Marks a response that repeats an earlier one (the request was a replay).
pub const IDEMPOTENT_REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// Where the order ships to.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ShippingAddress {
    #[schema(
        pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]+$",
        min_length = 1,
        max_length = 200,
        example = "Ada Lovelace"
    )]
    pub name: String,
    #[schema(
        pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]+$",
        min_length = 1,
        max_length = 200,
        example = "1 Analytical Way"
    )]
    pub line1: String,
    #[schema(
        pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]+$",
        min_length = 1,
        max_length = 200,
        example = "London"
    )]
    pub city: String,
    /// `00000` makes the sandbox carrier reject the shipment; `99999` makes it unavailable once.
    #[schema(
        pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]+$",
        min_length = 1,
        max_length = 200,
        example = "10115"
    )]
    pub postal_code: String,
    /// ISO 3166-1 alpha-2.
    #[schema(pattern = "^[A-Z]{2}$", example = "GB")]
    pub country: String,
}

/// An order to place. Orders whose total is at or above the approval threshold wait for an
/// operator's approval.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlaceOrder {
    /// The business key: placing the same order again replays; another body with the same id
    /// is a conflict. Required, unless the `Idempotency-Key` header carries it.
    #[serde(default)]
    #[schema(
        min_length = 1,
        max_length = 80,
        pattern = "^[A-Za-z0-9_-]+$",
        example = "o-1001"
    )]
    pub order_id: String,
    #[schema(
        pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]+$",
        min_length = 1,
        max_length = 80,
        example = "cus_1"
    )]
    pub customer_id: String,
    #[schema(min_items = 1, max_items = 50)]
    pub items: Vec<RequestedLine>,
    /// ISO 4217.
    #[schema(pattern = "^[A-Z]{3}$", example = "EUR")]
    pub currency: String,
    /// In the sandbox: `pm_card_visa` succeeds, `pm_card_chargeDeclined` is declined.
    #[schema(
        pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]+$",
        min_length = 1,
        max_length = 100,
        example = "pm_card_visa"
    )]
    pub payment_method: String,
    pub shipping_address: ShippingAddress,
}

impl TryFrom<PlaceOrder> for OrderRequest {
    /// The message for `/orderId` (its schema admits only valid ids, so this is a bug guard).
    type Error = String;

    fn try_from(body: PlaceOrder) -> Result<OrderRequest, String> {
        let a = body.shipping_address;
        Ok(OrderRequest {
            order_id: OrderId::parse(&body.order_id)?,
            customer_id: body.customer_id,
            items: body.items,
            currency: body.currency,
            payment_method: body.payment_method,
            shipping_address: Address {
                name: a.name,
                line1: a.line1,
                city: a.city,
                postal_code: a.postal_code,
                country: a.country,
            },
        })
    }
}

/// An order was accepted (or, on a replay, had been): its saga runs; poll `statusUrl`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OrderAccepted {
    #[schema(example = "o-1001")]
    pub order_id: String,
    /// The Step Functions execution running the order's saga (its name is the order id).
    pub execution_arn: String,
    pub status: OrderStatus,
    #[schema(example = "/orders/o-1001/status")]
    pub status_url: String,
}

/// The stock the order reserved, and what became of it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReservationView {
    /// `HELD` (reserved for the order), `RELEASED` (given back to `available` by the
    /// compensation: `lines` are what was released) or `SHIPPED` (left with the shipment).
    #[schema(example = "HELD")]
    pub status: String,
    /// The units reserved, per SKU.
    pub lines: Vec<ReservedLineView>,
    /// When the stock was reserved.
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReservedLineView {
    pub sku: String,
    pub quantity: u32,
}

/// The order's charge.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PaymentView {
    pub charge_id: String,
    pub amount_cents: u64,
    pub currency: String,
    pub created_at: DateTime<Utc>,
}

/// The refund of the order's charge, made by the compensation.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RefundView {
    /// The payment provider's id of the refund.
    pub refund_id: String,
    /// What was given back (the whole charge).
    pub amount_cents: u64,
    pub currency: String,
    pub refunded_at: DateTime<Utc>,
}

/// The approval of an order that needs one.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalView {
    pub requested_at: DateTime<Utc>,
    /// When the approval window closes (fixed when it opened): a decision must come before it.
    pub deadline: Option<DateTime<Utc>>,
    /// `approve` or `reject`, once decided.
    #[schema(example = "approve")]
    pub decision: Option<String>,
    /// The operator who decided; shown to operators only (null for the order's client).
    pub decided_by: Option<String>,
    pub decided_at: Option<DateTime<Utc>>,
    pub reason: Option<String>,
}

/// The order's shipment.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShipmentView {
    pub shipment_id: String,
    pub tracking_number: String,
    pub created_at: DateTime<Utc>,
}

/// Why the order was cancelled: the error and cause that started the compensation.
#[derive(Debug, Serialize, ToSchema)]
pub struct FailureView {
    #[schema(example = "Payment.Declined")]
    pub error: String,
    pub cause: String,
}

/// Where an order's saga is.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OrderStatusView {
    pub order_id: String,
    pub status: OrderStatus,
    pub execution_arn: Option<String>,
    /// The execution's Step Functions status: `RUNNING`, `SUCCEEDED` or `FAILED` as the order's
    /// record implies it (the saga writes each status before its step reports, so a final order's
    /// execution may take a moment more to end); null while the order is `ACCEPTED`. Step
    /// Functions itself is asked only for a `COMPENSATION_FAILED` order (`FAILED`, or `RUNNING`
    /// while a redrive runs; `TIMED_OUT` or `ABORTED` for an execution stopped otherwise). An
    /// execution stopped from outside the service shows `RUNNING` until the repair loop records
    /// its incident. The history has the execution's own record.
    #[schema(example = "RUNNING")]
    pub execution_status: Option<String>,
    pub requires_approval: bool,
    pub amount_cents: u64,
    pub currency: String,
    /// The stock reserved for the order; null when none was (out of stock, or not yet).
    pub reservation: Option<ReservationView>,
    /// The charge; null when none was made.
    pub payment: Option<PaymentView>,
    /// The charge's refund, once a compensation made it; null otherwise.
    pub refund: Option<RefundView>,
    pub approval: Option<ApprovalView>,
    pub shipment: Option<ShipmentView>,
    pub failure: Option<FailureView>,
    /// The compensation that gave up, while the order waits for an operator
    /// (`COMPENSATION_FAILED`); null otherwise.
    pub incident: Option<IncidentDetail>,
    /// The request to cancel the order, once one was accepted; null otherwise. The order ends
    /// `CANCELLED` with failure `Order.Cancelled` once the compensation has run.
    pub cancellation: Option<CancellationView>,
    /// What operators did about the order (redrives, resolutions), oldest first; shown to
    /// operators only (empty for the order's client).
    pub actions: Vec<ActionView>,
    pub updated_at: DateTime<Utc>,
}

/// A line of an order as placed, with its price.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OrderLineView {
    #[schema(example = "book")]
    pub sku: String,
    pub quantity: u32,
    pub unit_price_cents: u64,
    /// `quantity × unitPriceCents`.
    pub line_total_cents: u64,
}

/// The shipping address as placed.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddressView {
    pub name: String,
    pub line1: String,
    pub city: String,
    pub postal_code: String,
    pub country: String,
}

/// An order as placed, with where its saga is.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct OrderView {
    #[schema(example = "o-1001")]
    pub order_id: String,
    pub customer_id: String,
    pub items: Vec<OrderLineView>,
    pub currency: String,
    /// The order's total: the sum of its lines.
    pub amount_cents: u64,
    /// Whether the total is at or above the approval threshold (an operator decides).
    pub requires_approval: bool,
    pub payment_method: String,
    pub shipping_address: AddressView,
    pub status: OrderStatus,
    pub execution_arn: Option<String>,
    /// Where the saga is in detail: payment, shipment, refund, approval.
    #[schema(example = "/orders/o-1001/status")]
    pub status_url: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<&Order> for OrderView {
    fn from(order: &Order) -> Self {
        let new = &order.new;
        let address = &new.shipping_address;
        OrderView {
            order_id: new.order_id.to_string(),
            customer_id: new.customer_id.clone(),
            items: new
                .items
                .iter()
                .map(|l| OrderLineView {
                    sku: l.sku.clone(),
                    quantity: l.quantity,
                    unit_price_cents: l.unit_price_cents,
                    // Bounded at intake (10,000 × 10^8 fits many times over).
                    line_total_cents: u64::from(l.quantity).saturating_mul(l.unit_price_cents),
                })
                .collect(),
            currency: new.currency.clone(),
            amount_cents: new.amount_cents,
            requires_approval: new.requires_approval,
            payment_method: new.payment_method.clone(),
            shipping_address: AddressView {
                name: address.name.clone(),
                line1: address.line1.clone(),
                city: address.city.clone(),
                postal_code: address.postal_code.clone(),
                country: address.country.clone(),
            },
            status: order.status,
            execution_arn: order.execution_arn.clone(),
            status_url: status_url(order.id()),
            created_at: new.created_at,
            updated_at: order.updated_at,
        }
    }
}

/// A page of the execution's history, oldest event first.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct HistoryView {
    /// AWS-shaped history events (`timestamp`, `type`, `id`, `previousEventId`, details).
    #[schema(value_type = Vec<Object>)]
    pub events: Vec<Value>,
    /// Pass as `nextToken` to get the next page; null on the last page.
    pub next_token: Option<String>,
}

/// Paging of the history.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase")]
#[into_params(parameter_in = Query)]
pub struct HistoryQuery {
    /// Events per page (1–1000, default 100).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    pub max_results: Option<String>,
    /// The `nextToken` of the previous page, as given (any other text is a 400).
    #[param(min_length = 1, max_length = 1024)]
    pub next_token: Option<String>,
}

pub(super) fn status_url(id: &OrderId) -> String {
    format!("/orders/{id}/status")
}

/// The order with id `raw`, or 404 (an id that cannot exist is unknown too).
pub async fn find_order(state: &AppState, raw: &str) -> Result<Order, Problem> {
    let id = OrderId::parse(raw).map_err(|_| order_not_found(raw))?;
    match state.ports.orders.get(&id).await {
        Ok(Some(order)) => Ok(order),
        Ok(None) => Err(order_not_found(raw)),
        Err(e) => Err(Problem::backend(&e, e.is_transient())),
    }
}

fn order_not_found(raw: &str) -> Problem {
    Problem::new(ProblemKind::OrderNotFound, format!("no order {raw:?}"))
}

/// The order with id `raw` as `caller` may see it: an operator sees every order, a client only
/// its own. Another principal's order is a 404, exactly as one that does not exist, so ids
/// cannot be probed.
pub(super) async fn find_own_order(
    state: &AppState,
    raw: &str,
    caller: &Caller,
) -> Result<Order, Problem> {
    let order = find_order(state, raw).await?;
    if caller.is_operator() || order.new.owner.as_deref() == Some(caller.principal.as_str()) {
        Ok(order)
    } else {
        Err(order_not_found(raw))
    }
}

fn accepted(state: &AppState, order: &Order, replayed: bool) -> Response {
    let arn = order
        .execution_arn
        .clone()
        .unwrap_or_else(|| state.workflow.execution_arn(order.id().as_str()));
    Span::current().record("execution_arn", arn.as_str());
    let body = OrderAccepted {
        order_id: order.id().to_string(),
        execution_arn: arn,
        status: order.status,
        status_url: status_url(order.id()),
    };
    accepted_at_status(order.id(), body, replayed)
}

/// `202 Accepted` with `body`, `Location` the order's status URL (where the operation's progress
/// is polled), and `Idempotent-Replayed: true` when it repeats an earlier request.
pub(super) fn accepted_at_status(id: &OrderId, body: impl Serialize, replayed: bool) -> Response {
    let location = HeaderValue::from_str(&status_url(id)).unwrap_or(HeaderValue::from_static("/"));
    let mut response = (
        StatusCode::ACCEPTED,
        [(header::LOCATION, location)],
        Json(body),
    )
        .into_response();
    if replayed {
        response
            .headers_mut()
            .insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
    }
    response
}

/// Place an order.
///
/// Stores the order and starts its saga. The order id is the idempotency key: the same body
/// again answers the same (with `Idempotent-Replayed: true`); another body is a 409 and changes
/// nothing.
#[utoipa::path(
    post,
    path = "/orders",
    operation_id = "placeOrder",
    tag = "orders",
    security(("apiKey" = [])),
    params(PlaceOrderHeaders),
    request_body(content = PlaceOrder, content_type = "application/json"),
    responses(
        (status = 202, description = "Accepted: the saga runs; poll the status URL", body = OrderAccepted,
            headers(
                ("Location" = String, description = "The order's status URL"),
                ("Idempotent-Replayed" = String, description = "`true` when this repeats an earlier placement"),
            )),
        answers::Unauthorized,
        (status = 400, description = "The body is not JSON, or the `Idempotency-Key` header is not a valid order id (`invalid-request`)", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The caller's order with this id has another body (`order-conflict`), or the id is another principal's (`order-id-taken`); nothing changed", body = Problem, content_type = "application/problem+json"),
        answers::BodyTimeout,
        answers::PayloadTooLarge,
        answers::UnsupportedMediaType,
        (status = 422, description = "Invalid fields (`validation-failed`), or lines the catalog cannot price as asked: a SKU without a price (`sku-not-priced`), priced in another currency (`currency-mismatch`), or a `unitPriceCents` that is not the catalog's (`price-mismatch`); each listed in `errors`, nothing stored", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "A backend is unavailable; retry after `Retry-After`", body = Problem, content_type = "application/problem+json"),
    )
)]
#[tracing::instrument(name = "place_order", skip_all, fields(order_id = Empty, execution_arn = Empty))]
pub async fn place(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> Response {
    let body = match with_idempotency_key(body, &headers) {
        Ok(body) => body,
        Err(refused) => return refused,
    };
    let request = match validate::order_request(&body) {
        Ok(r) => r,
        Err(errors) => return Problem::validation(errors).into_response(),
    };
    let id = request.order_id.clone();
    let currency = request.currency.clone();
    Span::current().record("order_id", id.as_str());
    match state.intake.place(request, &caller.principal).await {
        Ok(Placed::Accepted(order)) => {
            state.metrics.order(OrderOutcome::Accepted);
            tracing::info!("order accepted");
            accepted(&state, &order, false)
        }
        Ok(Placed::Replayed(order)) => {
            state.metrics.order(OrderOutcome::Replayed);
            accepted(&state, &order, true)
        }
        Ok(Placed::Conflict(order)) => {
            state.metrics.order(OrderOutcome::Conflict);
            if let Some(arn) = &order.execution_arn {
                Span::current().record("execution_arn", arn.as_str());
            }
            Problem::new(
                ProblemKind::OrderConflict,
                format!("order {id} exists with a different body; nothing was changed"),
            )
            .into_response()
        }
        Ok(Placed::IdTaken) => {
            state.metrics.order(OrderOutcome::Conflict);
            Problem::new(
                ProblemKind::OrderIdTaken,
                format!("the order id {id} is in use; choose another (nothing was changed)"),
            )
            .into_response()
        }
        Err(IntakeError::Mispriced(lines)) => {
            state.metrics.order(OrderOutcome::Mispriced);
            mispriced(&lines, &currency).into_response()
        }
        Err(IntakeError::AmountOverflow) => {
            Problem::validation(vec![FieldError::new("/items", "the order total overflows")])
                .into_response()
        }
        Err(e) => Problem::backend(&e, e.is_transient()).into_response(),
    }
}

/// The headers `POST /orders` reads, as the document shows them (the handler reads them from
/// the request's header map: [`with_idempotency_key`]).
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Header)]
pub struct PlaceOrderHeaders {
    /// An alias of the body's `orderId` (the order's idempotency key): a body without `orderId`
    /// takes it as the id; one with it must carry the same (else 422). A plain token or a quoted
    /// structured-field string; 400 unless it is a valid order id.
    #[serde(rename = "Idempotency-Key")]
    #[param(
        pattern = "^([A-Za-z0-9_-]{1,80}|\"[A-Za-z0-9_-]{1,80}\")$",
        example = "o-1001"
    )]
    pub idempotency_key: Option<String>,
}

/// The `Idempotency-Key` request header (the IETF httpapi draft's; Stripe's too).
const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// The body of `POST /orders` with the `Idempotency-Key` header applied. The order id is the
/// order's idempotency key, so the header is its alias: a body without `orderId` takes the
/// header's value as its id; a body with one must carry the same. The value is a plain token or
/// a quoted structured-field string (`"…"`), and must be a valid order id.
fn with_idempotency_key(mut body: Value, headers: &HeaderMap) -> Result<Value, Response> {
    let Some(value) = headers.get(IDEMPOTENCY_KEY) else {
        return Ok(body);
    };
    let key = value
        .to_str()
        .ok()
        .map(|v| v.trim())
        .map(|v| {
            v.strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(v)
        })
        .filter(|v| OrderId::parse(v).is_ok())
        .ok_or_else(|| {
            Problem::new(
                ProblemKind::InvalidRequest,
                "the Idempotency-Key header must be an order id: 1 to 80 letters, digits, '-' \
                 and '_' (it is an alias of orderId)",
            )
            .into_response()
        })?;
    let Some(fields) = body.as_object_mut() else {
        // Not an object: the body's own validation says so.
        return Ok(body);
    };
    match fields.get("orderId") {
        None => {
            fields.insert("orderId".to_owned(), Value::String(key.to_owned()));
        }
        Some(id) if id.as_str() == Some(key) => {}
        Some(_) => {
            return Err(Problem::validation(vec![FieldError::new(
                "/orderId",
                "must equal the Idempotency-Key header (the order id is the order's \
                 idempotency key; the header is its alias)",
            )])
            .into_response());
        }
    }
    Ok(body)
}

/// 422 for lines the catalog cannot price as asked, each named in `errors`. The type is the
/// gravest problem among them: a SKU without a price, then one in another currency, then a
/// price that is not the catalog's.
fn mispriced(lines: &[Mispriced], currency: &str) -> Problem {
    let kind = if lines.iter().any(|l| l.problem == LineProblem::NotPriced) {
        ProblemKind::SkuNotPriced
    } else if lines
        .iter()
        .any(|l| matches!(l.problem, LineProblem::OtherCurrency { .. }))
    {
        ProblemKind::CurrencyMismatch
    } else {
        ProblemKind::PriceMismatch
    };
    let detail = match lines.len() {
        1 => "1 line cannot be priced from the catalog; nothing was stored".to_owned(),
        n => format!("{n} lines cannot be priced from the catalog; nothing was stored"),
    };
    Problem {
        errors: Some(
            lines
                .iter()
                .map(|l| FieldError::new(l.pointer(), l.message(currency)))
                .collect(),
        ),
        ..Problem::new(kind, detail)
    }
}

/// The execution's status as the order's record implies it, without asking Step Functions:
/// status polls are the service's most frequent request, and AWS refills `DescribeExecution`
/// at about 15 a second for the whole account. The saga's steps write each status before they
/// report: an order moving on has a running execution, a `COMPLETED` one an execution that
/// succeeds, a `CANCELLED` one an execution that fails (at `OrderCancelled`, or a compensation
/// an operator resolved by hand). An order just `ACCEPTED` has none to show yet (its execution
/// is starting; the repair loop starts one a crash left unstarted). Not asked of an order whose
/// compensation failed, where a redrive may be running it again: only Step Functions knows.
fn implied_execution_status(status: OrderStatus) -> Option<&'static str> {
    match status {
        OrderStatus::Accepted | OrderStatus::CompensationFailed => None,
        OrderStatus::Completed => Some("SUCCEEDED"),
        OrderStatus::Cancelled => Some("FAILED"),
        OrderStatus::Reserved
        | OrderStatus::Charged
        | OrderStatus::AwaitingApproval
        | OrderStatus::Approved
        | OrderStatus::Compensating => Some("RUNNING"),
    }
}

/// The execution status: from the order's record ([`implied_execution_status`]), and from Step
/// Functions only for an order whose compensation failed (an operator's case, polled rarely).
/// `None` when the execution has not started (or does not exist).
async fn execution_status(state: &AppState, order: &Order) -> Result<Option<String>, Problem> {
    let Some(arn) = order.execution_arn.as_deref() else {
        return Ok(None);
    };
    if order.status != OrderStatus::CompensationFailed {
        return Ok(implied_execution_status(order.status).map(str::to_owned));
    }
    match state.workflow.describe_execution(arn).await {
        Ok(info) => Ok(Some(info.status)),
        Err(WorkflowError::ExecutionDoesNotExist(_)) => Ok(None),
        Err(e) => Err(Problem::backend(&e, e.is_transient())),
    }
}

/// The order's charge, from the order itself: statuses are polled often and for days, and the
/// provider's lookup is rate-limited and lags (Stripe's search), so a status never asks it. The
/// charge step records the charge (`record_charge`: its id and time, together) before the order
/// moves to `CHARGED`, so an order without them has no charge to show: not yet charged,
/// declined, out of stock, or a charge step that never answered, whose charge the refund looks
/// up itself.
fn payment(order: &Order) -> Option<PaymentView> {
    let (charge_id, charged_at) = (order.charge_id.as_ref()?, order.charged_at?);
    // The charge step charges exactly the order's amount in its currency.
    Some(PaymentView {
        charge_id: charge_id.clone(),
        amount_cents: order.new.amount_cents,
        currency: order.new.currency.clone(),
        created_at: charged_at,
    })
}

/// Where an order's saga is.
///
/// The saga status kept on the order, the execution's status, and what each step did.
#[utoipa::path(
    get,
    path = "/orders/{orderId}/status",
    operation_id = "getOrderStatus",
    tag = "orders",
    security(("apiKey" = [])),
    params(
        ("orderId" = String, Path, description = "The order id"),
        ("If-None-Match" = Option<String>, Header, description = "An `ETag` of an earlier answer: `304` while the status is unchanged"),
    ),
    responses(
        (status = 200, description = "The order's saga", body = OrderStatusView,
            headers(
                ("ETag" = String, description = "The answer's entity tag, for `If-None-Match`"),
                ("Retry-After" = Option<String>, description = "Seconds to wait before polling again (1 while the saga moves, 60 while it waits for an operator); absent once the status is terminal"),
            )),
        (status = 304, description = "Not modified: the status is the one whose `ETag` was sent",
            headers(
                ("ETag" = String, description = "The answer's entity tag"),
                ("Retry-After" = Option<String>, description = "As for 200"),
            )),
        answers::Unauthorized,
        answers::OwnOrderNotFound,
        answers::ServiceUnavailable,
    )
)]
#[tracing::instrument(name = "order_status", skip_all, fields(order_id = %raw, execution_arn = Empty))]
pub async fn status(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(raw): PathParam,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let order = find_own_order(&state, &raw, &caller).await?;
    if let Some(arn) = order.execution_arn.as_deref() {
        Span::current().record("execution_arn", arn);
    }
    let view = status_view(&state, &order, &caller).await?;
    Ok(conditional::json(&headers, &view, poll_after(&order)))
}

/// How long a client polling the order's status should wait before it asks again (seconds), as
/// `Retry-After`; `None` once nothing will change by itself (a terminal status).
fn poll_after(order: &Order) -> Option<u64> {
    let waits_for_a_person = order.status == OrderStatus::AwaitingApproval
        && order.cancellation.is_none()
        && order
            .approval
            .as_ref()
            .is_some_and(|a| a.decision.is_none());
    if order.status.is_terminal() {
        None
    } else if waits_for_a_person {
        Some(POLL_AWAITING_APPROVAL_SECS)
    } else {
        Some(POLL_RUNNING_SECS)
    }
}

/// `Retry-After` of a status whose saga is moving: its steps take milliseconds to seconds.
const POLL_RUNNING_SECS: u64 = 1;
/// `Retry-After` of an order waiting for an operator, which takes minutes to days.
const POLL_AWAITING_APPROVAL_SECS: u64 = 60;

/// The status view of `order` as `caller` may see it (the status endpoint's answer, and a
/// cancel's).
pub async fn status_view(
    state: &AppState,
    order: &Order,
    caller: &Caller,
) -> Result<OrderStatusView, Problem> {
    let id = order.id();
    let (execution_status, reservation, shipment) = tokio::join!(
        execution_status(state, order),
        state.ports.inventory.reservation(id),
        state.ports.shipping.shipment(id),
    );
    let execution_status = execution_status?;
    let reservation = reservation.map_err(|e| Problem::backend(&e, e.is_transient()))?;
    let shipment = shipment.map_err(|e| Problem::backend(&e, e.is_transient()))?;
    Ok(OrderStatusView {
        order_id: id.to_string(),
        status: order.status,
        execution_arn: order.execution_arn.clone(),
        execution_status,
        requires_approval: order.new.requires_approval,
        amount_cents: order.new.amount_cents,
        currency: order.new.currency.clone(),
        // A release that came before any reservation leaves a marker with no lines: nothing
        // was reserved, so there is nothing to show.
        reservation: reservation
            .filter(|r| !r.lines.is_empty())
            .map(|r| ReservationView {
                status: serde_json::to_value(r.status)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default(),
                lines: r
                    .lines
                    .into_iter()
                    .map(|l| ReservedLineView {
                        sku: l.sku,
                        quantity: l.quantity,
                    })
                    .collect(),
                created_at: r.created_at,
            }),
        payment: payment(order),
        refund: order.refund.as_ref().map(|r| RefundView {
            refund_id: r.refund_id.clone(),
            amount_cents: r.amount_cents,
            currency: order.new.currency.clone(),
            refunded_at: r.refunded_at,
        }),
        approval: order.approval.as_ref().map(|a| ApprovalView {
            requested_at: a.requested_at,
            deadline: a.deadline,
            decision: a.decision.map(|d| decision_name(d).to_owned()),
            // Who decided is for operators: a client sees that it was decided, not by whom.
            decided_by: a.decided_by.clone().filter(|_| caller.is_operator()),
            decided_at: a.decided_at,
            reason: a.reason.clone(),
        }),
        shipment: shipment.map(|s| ShipmentView {
            shipment_id: s.shipment_id,
            tracking_number: s.tracking_number,
            created_at: s.created_at,
        }),
        failure: order.failure.as_ref().map(|f| FailureView {
            error: f.error.clone(),
            cause: f.cause.clone(),
        }),
        incident: order.incident.as_ref().map(IncidentDetail::from),
        cancellation: order
            .cancellation
            .as_ref()
            .map(|c| CancellationView::new(c, caller)),
        actions: if caller.is_operator() {
            order.actions.iter().map(ActionView::from).collect()
        } else {
            Vec::new()
        },
        updated_at: order.updated_at,
    })
}

/// An order as placed.
///
/// Its lines with their prices, the total, the customer and address, and its saga status (the
/// details of each step are at `statusUrl`).
#[utoipa::path(
    get,
    path = "/orders/{orderId}",
    operation_id = "getOrder",
    tag = "orders",
    security(("apiKey" = [])),
    params(("orderId" = String, Path, description = "The order id")),
    responses(
        (status = 200, description = "The order", body = OrderView),
        answers::Unauthorized,
        answers::OwnOrderNotFound,
        answers::ServiceUnavailable,
    )
)]
#[tracing::instrument(name = "get_order", skip_all, fields(order_id = %raw))]
pub async fn get_order(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(raw): PathParam,
) -> Result<Json<OrderView>, Problem> {
    let order = find_own_order(&state, &raw, &caller).await?;
    Ok(Json(OrderView::from(&order)))
}

/// A history event as the order's owner sees it: without the worker that ran a step (a host
/// name of ours). The execution's data carries no operator identity (see the approval step).
fn for_client(mut event: Value) -> Value {
    if let Some(details) = event
        .get_mut("activityStartedEventDetails")
        .and_then(Value::as_object_mut)
    {
        details.remove("workerName");
    }
    event
}

pub(super) fn decision_name(d: store::Decision) -> &'static str {
    match d {
        store::Decision::Approve => "approve",
        store::Decision::Reject => "reject",
    }
}

/// The execution history of an order's saga, a page at a time.
#[utoipa::path(
    get,
    path = "/orders/{orderId}/history",
    operation_id = "getOrderHistory",
    tag = "orders",
    security(("apiKey" = [])),
    params(("orderId" = String, Path, description = "The order id"), HistoryQuery),
    responses(
        (status = 200, description = "A page of events, oldest first", body = HistoryView),
        answers::Unauthorized,
        (status = 400, description = "Invalid `maxResults`, or a `nextToken` that is not one this order's history gave (`invalid-request`, naming the parameter in `errors`)", body = Problem, content_type = "application/problem+json"),
        answers::OwnOrderNotFound,
        (status = 410, description = "The order finished longer ago than the workflow keeps a closed execution (`--retention`, 90 days by default; on AWS, Step Functions' own 90 days): its history is gone, its record is not (`history-pruned`; `GET /orders/{orderId}/status` still answers)", body = Problem, content_type = "application/problem+json"),
        answers::ServiceUnavailable,
    )
)]
#[tracing::instrument(name = "order_history", skip_all, fields(order_id = %raw, execution_arn = Empty))]
pub async fn history(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(raw): PathParam,
    QueryParams(query): QueryParams<HistoryQuery>,
) -> Result<Json<HistoryView>, Problem> {
    let mut errors = Vec::new();
    let max_results = validate::query_integer(
        "maxResults",
        query.max_results.as_deref(),
        1,
        1000,
        &mut errors,
    )
    .map_or(100, |n| n as u32);
    if query
        .next_token
        .as_ref()
        .is_some_and(|t| t.is_empty() || t.chars().count() > 1024)
    {
        errors.push(FieldError::new("nextToken", "must be 1 to 1024 characters"));
    }
    Problem::check_query(errors)?;
    let order = find_own_order(&state, &raw, &caller).await?;
    let Some(arn) = order.execution_arn.as_deref() else {
        return Ok(Json(HistoryView {
            events: Vec::new(),
            next_token: None,
        }));
    };
    Span::current().record("execution_arn", arn);
    let had_token = query.next_token.is_some();
    match state
        .workflow
        .get_execution_history(arn, query.next_token, max_results)
        .await
    {
        Ok(page) => Ok(Json(HistoryView {
            events: if caller.is_operator() {
                page.events
            } else {
                page.events.into_iter().map(for_client).collect()
            },
            next_token: page.next_token,
        })),
        // A finished order's execution is gone only once retention deleted it: say so, rather
        // than show an empty history as if the saga never ran.
        Err(WorkflowError::ExecutionDoesNotExist(_)) if order.status.is_terminal() => {
            Err(Problem::new(
                ProblemKind::HistoryPruned,
                format!(
                    "order {} finished on {}; its execution's history was deleted after the \
                     workflow's retention. Its status and record remain at /orders/{}/status",
                    order.id(),
                    order
                        .updated_at
                        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                    order.id()
                ),
            ))
        }
        // Accepted but not started yet.
        Err(WorkflowError::ExecutionDoesNotExist(_)) => Ok(Json(HistoryView {
            events: Vec::new(),
            next_token: None,
        })),
        // The only request input the workflow can refuse here is the token.
        Err(WorkflowError::Other(_) | WorkflowError::InvalidToken(_)) if had_token => {
            let mut p = Problem::new(ProblemKind::InvalidRequest, "nextToken is not valid");
            p.errors = Some(vec![FieldError::new(
                "nextToken",
                "is not a token of this history",
            )]);
            Err(p)
        }
        Err(e) => Err(Problem::backend(&e, e.is_transient())),
    }
}
