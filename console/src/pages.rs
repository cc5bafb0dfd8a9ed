//! The console's pages that read: the dashboard, the orders (a filtered list, and one order with
//! its saga drawn and its history), the approvals queue, the incidents, the stock. Every list is
//! paged on the server.

use super::ConsoleState;
use super::graph::Graph;
use super::layout::{self, Notice, csrf, json_block, money, page, span, status_badge, time};
use super::session::ConsoleOperator;
use api::http::AppState;
use api::http::problem::FieldError;
use api::http::validate;
use axum::Extension;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use chrono::{DateTime, NaiveDateTime, Utc};
use maud::{Markup, html};
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashSet;
use std::sync::LazyLock;
use store::{Order, OrderFilter, OrderId, OrderStatus, QueueCursor};
use workflow::WorkflowError;

/// Orders on one page of the list.
const PAGE_SIZE: u32 = 50;
/// Events of an order's history the page shows (the saga takes a few dozen).
const HISTORY_EVENTS: u32 = 1000;

/// The saga's layout, from the definition the binary deploys.
static SAGA: LazyLock<Option<Graph>> = LazyLock::new(|| {
    let definition: Value = serde_json::from_str(workflow::definition::TEMPLATE).ok()?;
    Graph::layout(&definition).ok()
});

/// A notice carried to the page an action redirected to (`?done=` / `?failed=`), signed for
/// the session ([`super::actions::notice_sig`]).
#[derive(Debug, Default, Clone, Deserialize)]
pub struct NoticeQuery {
    pub done: Option<String>,
    pub failed: Option<String>,
    pub sig: Option<String>,
}

impl NoticeQuery {
    /// The notice, if this session's own redirect put it there.
    fn notice(&self, operator: &ConsoleOperator) -> Option<Notice> {
        let notice = match (&self.done, &self.failed) {
            (_, Some(f)) => Notice::Failed(f.clone()),
            (Some(d), None) => Notice::Done(d.clone()),
            _ => return None,
        };
        let text = match &notice {
            Notice::Done(t) | Notice::Failed(t) => t,
        };
        let expected = super::actions::notice_sig(operator, text);
        self.sig
            .as_deref()
            .is_some_and(|s| {
                bool::from(subtle::ConstantTimeEq::ct_eq(
                    s.as_bytes(),
                    expected.as_bytes(),
                ))
            })
            .then_some(notice)
    }
}

/// `GET /console`: what operators look at first.
pub async fn dashboard(
    State(state): State<AppState>,
    Extension(console): Extension<ConsoleState>,
    operator: ConsoleOperator,
) -> Response {
    let counts = match console.counts(state.ports.orders.as_ref()).await {
        Ok(c) => c,
        Err(e) => return layout::unavailable(&e),
    };
    let rate = console.sagas_per_second(state.metrics.sagas_finished());
    let count = |s: OrderStatus| counts.0.get(&s).copied().flatten();
    let figure = |n: Option<u64>| n.map_or("not counted".to_owned(), |n| n.to_string());
    let body = html! {
        section aria-labelledby="figures" data-refresh="5" id="live" {
            h2 id="figures" { "Now" }
            dl class="figures" {
                div { dt { "Sagas finished per second" } dd { (rate.map_or("measuring…".to_owned(), |r| format!("{r:.1}"))) } }
                div { dt { a href="/console/approvals" { "Approvals waiting" } } dd { (figure(count(OrderStatus::AwaitingApproval))) } }
                div { dt { a href="/console/incidents" { "Incidents open" } } dd { (figure(count(OrderStatus::CompensationFailed))) } }
            }
            h2 { "Orders by status" }
            (status_counts(&counts))
            p class="hint" {
                "Sagas per second is this replica's, over the last minute. Every figure is also at "
                a href="/metrics" { "/metrics" } "."
            }
        }
    };
    page(&operator, "/console", "Dashboard", None, body)
}

/// The counts per status as links to the filtered list.
fn status_counts(counts: &store::StatusCounts) -> Markup {
    html! {
        table class="counts" {
            caption class="visually-hidden" { "Orders by status" }
            thead { tr { th scope="col" { "Status" } th scope="col" class="num" { "Orders" } } }
            tbody {
                @for (status, n) in &counts.0 {
                    tr {
                        th scope="row" { a href={ "/console/orders?status=" (status.as_str()) } { (status_badge(*status)) } }
                        td class="num" {
                            @match n {
                                Some(n) => (n),
                                None => abbr title="not counted on this backend (see docs/console.md)" { "—" },
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The orders list's filters, as the form sends them (every field may be empty).
#[derive(Debug, Default, Clone, Deserialize)]
pub struct OrdersQuery {
    pub status: Option<String>,
    pub since: Option<String>,
    pub until: Option<String>,
    /// An order id (opens it) or the start of a customer id.
    pub q: Option<String>,
    pub after: Option<String>,
    #[serde(flatten)]
    pub notice: NoticeQuery,
}

/// A time from a filter: RFC 3339, or the `datetime-local` input's `2026-12-04T08:30` (UTC).
fn filter_time(
    field: &str,
    raw: Option<&str>,
    errors: &mut Vec<FieldError>,
) -> Option<DateTime<Utc>> {
    let raw = raw.map(str::trim).filter(|r| !r.is_empty())?;
    let parsed = DateTime::parse_from_rfc3339(raw)
        .map(|t| t.with_timezone(&Utc))
        .ok()
        .or_else(|| {
            ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"]
                .iter()
                .find_map(|f| NaiveDateTime::parse_from_str(raw, f).ok())
                .map(|t| t.and_utc())
        });
    if parsed.is_none() {
        errors.push(FieldError::new(field, "must be a date and time (UTC)"));
    }
    parsed
}

impl OrdersQuery {
    fn trimmed(value: &Option<String>) -> Option<&str> {
        value.as_deref().map(str::trim).filter(|v| !v.is_empty())
    }

    /// The store's filter, or what is wrong with the form.
    pub fn filter(&self) -> Result<OrderFilter, String> {
        let mut errors = Vec::new();
        let status = Self::trimmed(&self.status)
            .map(|raw| OrderStatus::parse(raw).ok_or_else(|| format!("{raw:?} is not a status")));
        let status = status.transpose()?;
        let created_since = filter_time("since", self.since.as_deref(), &mut errors);
        let created_until = filter_time("until", self.until.as_deref(), &mut errors);
        if let Some(e) = errors.first() {
            return Err(format!("{}: {}", e.field, e.message));
        }
        Ok(OrderFilter {
            owner: None,
            status,
            created_since,
            created_until,
            customer_prefix: Self::trimmed(&self.q).map(str::to_owned),
        })
    }

    /// The query string of this filter (without the cursor), for links and forms.
    pub fn query_string(&self) -> String {
        let pairs: Vec<(&str, &str)> = [
            ("status", Self::trimmed(&self.status)),
            ("since", Self::trimmed(&self.since)),
            ("until", Self::trimmed(&self.until)),
            ("q", Self::trimmed(&self.q)),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k, v)))
        .collect();
        serde_urlencoded::to_string(pairs).unwrap_or_default()
    }
}

/// `GET /console/orders`: the orders a filter selects, newest first, a page at a time.
pub async fn orders(
    State(state): State<AppState>,
    Extension(console): Extension<ConsoleState>,
    operator: ConsoleOperator,
    Query(query): Query<OrdersQuery>,
) -> Response {
    // An order id opens the order.
    if let Some(q) = OrdersQuery::trimmed(&query.q)
        && let Ok(id) = OrderId::parse(q)
    {
        match state.ports.orders.get(&id).await {
            Ok(Some(_)) => return Redirect::to(&format!("/console/orders/{id}")).into_response(),
            Ok(None) => {}
            Err(e) => return layout::unavailable(&e),
        }
    }
    let filter = match query.filter() {
        Ok(f) => f,
        Err(e) => return layout::bad_request(&e),
    };
    let after = match cursor(&query.after) {
        Ok(a) => a,
        Err(e) => return layout::bad_request(e),
    };
    let (found, counts) = tokio::join!(
        state
            .ports
            .orders
            .find_orders(&filter, after.as_ref(), PAGE_SIZE),
        console.counts(state.ports.orders.as_ref()),
    );
    let (found, counts) = match (found, counts) {
        (Ok(f), Ok(c)) => (f, c),
        (Err(e), _) | (_, Err(e)) => return layout::unavailable(&e),
    };
    let filter_qs = query.query_string();
    let next_link = found.next.as_ref().map(|n| {
        let cursor = serde_urlencoded::to_string([("after", n)]).unwrap_or_default();
        if filter_qs.is_empty() {
            format!("/console/orders?{cursor}")
        } else {
            format!("/console/orders?{filter_qs}&{cursor}")
        }
    });
    let body = html! {
        (filter_form(&query))
        div id="live" data-refresh=[after.is_none().then_some("10")] {
            details class="counts-box" {
                summary { "Counts per status" }
                (status_counts(&counts))
            }
            @if found.items.is_empty() {
                p { "No orders on this page." }
            } @else {
                (order_table(&found.items))
            }
            nav aria-label="Pages" class="pager" {
                @if after.is_some() {
                    a href={ "/console/orders?" (filter_qs) } { "Newest" }
                }
                @if let Some(next) = &next_link {
                    a href=(next) rel="next" { "Older orders" }
                }
            }
        }
        (bulk_form(&operator, &query))
    };
    page(
        &operator,
        "/console/orders",
        "Orders",
        query.notice.notice(&operator).as_ref(),
        body,
    )
}

fn filter_form(query: &OrdersQuery) -> Markup {
    let status = OrdersQuery::trimmed(&query.status).unwrap_or("");
    html! {
        form class="filters" method="get" action="/console/orders" role="search" aria-label="Filter orders" {
            div {
                label for="f-status" { "Status" }
                select id="f-status" name="status" {
                    option value="" selected[status.is_empty()] { "Any" }
                    @for s in OrderStatus::ALL {
                        option value=(s.as_str()) selected[status == s.as_str()] {
                            (match s {
                                OrderStatus::AwaitingApproval => "AWAITING_APPROVAL (needs approval)",
                                OrderStatus::CompensationFailed => "COMPENSATION_FAILED (incident)",
                                _ => s.as_str(),
                            })
                        }
                    }
                }
            }
            div {
                label for="f-since" { "Created since (UTC)" }
                input id="f-since" name="since" type="datetime-local" value=(OrdersQuery::trimmed(&query.since).unwrap_or(""));
            }
            div {
                label for="f-until" { "Created before (UTC)" }
                input id="f-until" name="until" type="datetime-local" value=(OrdersQuery::trimmed(&query.until).unwrap_or(""));
            }
            div {
                label for="f-q" { "Order id or customer prefix" }
                input id="f-q" name="q" type="search" value=(OrdersQuery::trimmed(&query.q).unwrap_or(""));
            }
            button type="submit" { "Find" }
        }
    }
}

fn order_table(orders: &[Order]) -> Markup {
    html! {
        table class="orders" {
            caption class="visually-hidden" { "Orders, newest first" }
            thead {
                tr {
                    th scope="col" { "Order" }
                    th scope="col" { "Status" }
                    th scope="col" { "Customer" }
                    th scope="col" class="num" { "Total" }
                    th scope="col" { "Created" }
                }
            }
            tbody {
                @for o in orders {
                    tr {
                        td { a href={ "/console/orders/" (o.id()) } { (o.id()) } }
                        td { (status_badge(o.status)) }
                        td { (o.new.customer_id) }
                        td class="num" { (money(o.new.amount_cents, &o.new.currency)) }
                        td { (time(o.new.created_at)) }
                    }
                }
            }
        }
    }
}

/// The bulk action's form: the current filter, an action, and a dry run first.
fn bulk_form(operator: &ConsoleOperator, query: &OrdersQuery) -> Markup {
    html! {
        section aria-labelledby="bulk" class="bulk" {
            h2 id="bulk" { "Act on every order this filter selects" }
            p class="hint" { "Not only this page: every order the filter selects now. A dry run counts them first; nothing changes until you confirm." }
            form method="post" action="/console/bulk" {
                (csrf(operator))
                input type="hidden" name="filter" value=(query.query_string());
                label for="bulk-action" { "Action" }
                select id="bulk-action" name="action" {
                    option value="approve" { "Approve (orders awaiting approval)" }
                    option value="reject" { "Reject (orders awaiting approval)" }
                    option value="cancel" { "Cancel (orders not shipped)" }
                }
                label for="bulk-note" { "Note (optional)" }
                input id="bulk-note" name="note" type="text" maxlength="500";
                button type="submit" name="step" value="dry-run" { "Dry run" }
            }
        }
    }
}

/// Where the saga went, from its history: the states entered, and the one it is in.
fn path_through(events: &[Value]) -> (HashSet<String>, Option<String>) {
    let mut visited = HashSet::new();
    let mut open: Vec<String> = Vec::new();
    for event in events {
        if let Some(name) = event
            .pointer("/stateEnteredEventDetails/name")
            .and_then(Value::as_str)
        {
            visited.insert(name.to_owned());
            open.push(name.to_owned());
        }
        if let Some(name) = event
            .pointer("/stateExitedEventDetails/name")
            .and_then(Value::as_str)
        {
            open.retain(|n| n != name);
        }
    }
    (visited, open.pop())
}

/// The details of one history event worth reading: input, output, error and cause.
fn event_details(event: &Value) -> Vec<(&'static str, Value)> {
    let mut out = Vec::new();
    let Some(object) = event.as_object() else {
        return out;
    };
    for (key, value) in object {
        if !key.ends_with("EventDetails") {
            continue;
        }
        for (field, label) in [
            ("input", "Input"),
            ("output", "Output"),
            ("error", "Error"),
            ("cause", "Cause"),
            ("resource", "Resource"),
        ] {
            if let Some(v) = value.get(field) {
                // Inputs and outputs are JSON carried as text: show them parsed.
                let shown = v
                    .as_str()
                    .and_then(|s| serde_json::from_str::<Value>(s).ok())
                    .filter(|_| matches!(field, "input" | "output"))
                    .unwrap_or_else(|| v.clone());
                out.push((label, shown));
            }
        }
    }
    out
}

/// `GET /console/orders/{id}`: one order, whole.
pub async fn order(
    State(state): State<AppState>,
    operator: ConsoleOperator,
    Path(raw): Path<String>,
    Query(notice): Query<NoticeQuery>,
) -> Response {
    let order = match api::http::orders::find_order(&state, &raw).await {
        Ok(o) => o,
        Err(p) if p.status == 404 => return layout::not_found(&p.detail),
        Err(p) => return layout::unavailable_text(&p.detail),
    };
    let caller = operator.caller();
    let view = match api::http::orders::status_view(&state, &order, &caller).await {
        Ok(v) => v,
        Err(p) => return layout::unavailable_text(&p.detail),
    };
    let history = match order.execution_arn.as_deref() {
        None => Ok(Vec::new()),
        Some(arn) => match state
            .workflow
            .get_execution_history(arn, None, HISTORY_EVENTS)
            .await
        {
            Ok(page) => Ok(page.events),
            Err(WorkflowError::ExecutionDoesNotExist(_)) if order.status.is_terminal() => {
                Err("its execution's history was deleted after the workflow's retention")
            }
            Err(WorkflowError::ExecutionDoesNotExist(_)) => Ok(Vec::new()),
            Err(e) => {
                tracing::warn!(error = %e, "console: history unavailable");
                Err("the workflow service did not answer; reload in a moment")
            }
        },
    };
    let (visited, current) = history
        .as_ref()
        .map(|events| path_through(events))
        .unwrap_or_default();
    let view_json = serde_json::to_value(&view).unwrap_or(Value::Null);
    let title = format!("Order {}", order.id());
    let body = html! {
        div id="live" data-refresh=[(!order.status.is_terminal()).then_some("3")] {
            p class="lead" { (status_badge(order.status)) " " (money(order.new.amount_cents, &order.new.currency)) " for customer " strong { (order.new.customer_id) } }
            (order_actions(&order))
            div class="columns" {
                section aria-labelledby="lines" {
                    h2 id="lines" { "Lines" }
                    table {
                        thead { tr { th scope="col" { "SKU" } th scope="col" class="num" { "Quantity" } th scope="col" class="num" { "Unit price" } th scope="col" class="num" { "Line total" } } }
                        tbody {
                            @for line in &order.new.items {
                                tr {
                                    td { (line.sku) }
                                    td class="num" { (line.quantity) }
                                    td class="num" { (money(line.unit_price_cents, &order.new.currency)) }
                                    td class="num" { (money(line.unit_price_cents.saturating_mul(u64::from(line.quantity)), &order.new.currency)) }
                                }
                            }
                        }
                        tfoot { tr { th scope="row" colspan="3" { "Total" } td class="num" { (money(order.new.amount_cents, &order.new.currency)) } } }
                    }
                    h2 { "Order" }
                    dl class="facts" {
                        dt { "Customer" } dd { (order.new.customer_id) }
                        dt { "Placed by" } dd { (order.new.owner.as_deref().unwrap_or("(before principals)")) }
                        dt { "Payment method" } dd { (order.new.payment_method) }
                        dt { "Ship to" } dd { (order.new.shipping_address.name) ", " (order.new.shipping_address.city) " " (order.new.shipping_address.postal_code) ", " (order.new.shipping_address.country) }
                        dt { "Created" } dd { (time(order.new.created_at)) }
                        dt { "Updated" } dd { (time(order.updated_at)) }
                        dt { "Execution" } dd { code { (order.execution_arn.as_deref().unwrap_or("not started yet")) } }
                    }
                    @for (label, key) in [("Payment", "payment"), ("Refund", "refund"), ("Shipment", "shipment"), ("Reservation", "reservation"), ("Approval", "approval"), ("Failure", "failure"), ("Incident", "incident"), ("Cancellation", "cancellation")] {
                        @if let Some(part) = view_json.get(key).filter(|v| !v.is_null()) {
                            h2 { (label) }
                            (facts(part))
                        }
                    }
                }
                section aria-labelledby="saga" {
                    h2 id="saga" { "Saga" }
                    @match SAGA.as_ref() {
                        Some(graph) => (layout::trusted(graph.svg(&visited, current.as_deref()))),
                        None => p { "The saga's definition could not be drawn." },
                    }
                }
            }
            (operator_record(&order))
            section aria-labelledby="history" {
                h2 id="history" { "History" }
                p { a href={ "/console/orders/" (order.id()) "/history.json" } { "Raw history (AWS Step Functions JSON)" } }
                @match &history {
                    Err(why) => p { (why) },
                    Ok(events) if events.is_empty() => p { "The saga has not started yet." },
                    Ok(events) => ol class="timeline" {
                        @for event in events {
                            li class={ "event" @if event.get("type").and_then(Value::as_str).is_some_and(|t| t.contains("Failed") || t.contains("TimedOut")) { " failed" } } {
                                span class="when" { (event.get("timestamp").and_then(Value::as_str).unwrap_or("")) }
                                " "
                                strong { (event.get("type").and_then(Value::as_str).unwrap_or("?")) }
                                @if let Some(name) = event.pointer("/stateEnteredEventDetails/name").or_else(|| event.pointer("/stateExitedEventDetails/name")).and_then(Value::as_str) {
                                    " " span class="state-name" { (name) }
                                }
                                @let details = event_details(event);
                                @if !details.is_empty() {
                                    details {
                                        summary { (details.iter().map(|(l, _)| *l).collect::<Vec<_>>().join(", ")) }
                                        @for (label, value) in &details {
                                            h3 { (label) }
                                            (json_block(value))
                                        }
                                    }
                                }
                            }
                        }
                    },
                }
            }
        }
    };
    page(
        &operator,
        "/console/orders",
        &title,
        notice.notice(&operator).as_ref(),
        body,
    )
}

/// A JSON object as a definition list (nested values as JSON).
fn facts(value: &Value) -> Markup {
    html! {
        @match value.as_object() {
            Some(object) => dl class="facts" {
                @for (k, v) in object {
                    dt { (k) }
                    dd {
                        @match v {
                            Value::String(s) => (s),
                            Value::Null => "—",
                            Value::Number(n) => (n),
                            Value::Bool(b) => (b),
                            other => (json_block(other)),
                        }
                    }
                }
            },
            None => (json_block(value)),
        }
    }
}

/// The actions the order allows now, as links to their confirmation pages.
fn order_actions(order: &Order) -> Markup {
    let awaiting = order.status == OrderStatus::AwaitingApproval
        && order.cancellation.is_none()
        && order
            .approval
            .as_ref()
            .is_some_and(|a| a.decision.is_none() && a.task_token.is_some());
    let cancellable = !order.status.is_terminal()
        && order.shipping_started_at.is_none()
        && order.cancellation.is_none();
    let incident = order.incident.is_some();
    let id = order.id();
    html! {
        @if awaiting || cancellable || incident {
            nav aria-label="Actions" class="actions" {
                @if awaiting {
                    a class="button primary" href={ "/console/orders/" (id) "/approve" } { "Approve…" }
                    a class="button" href={ "/console/orders/" (id) "/reject" } { "Reject…" }
                }
                @if cancellable {
                    a class="button danger" href={ "/console/orders/" (id) "/cancel" } { "Cancel order…" }
                }
                @if incident {
                    a class="button primary" href={ "/console/orders/" (id) "/redrive" } { "Redrive the failed step…" }
                    a class="button" href={ "/console/orders/" (id) "/resolve" } { "Resolve by hand…" }
                }
            }
        }
    }
}

/// Who did what to the order: the approval decision, the cancellation, the incident actions.
fn operator_record(order: &Order) -> Markup {
    let approval = order.approval.as_ref().filter(|a| a.decision.is_some());
    html! {
        section aria-labelledby="record" {
            h2 id="record" { "Operators' actions" }
            @if approval.is_none() && order.cancellation.is_none() && order.actions.is_empty() {
                p { "None." }
            } @else {
                ul class="record" {
                    @if let Some(a) = approval {
                        li {
                            (a.decision.map_or("", |d| match d { store::Decision::Approve => "Approved", store::Decision::Reject => "Rejected" }))
                            " by " strong { (a.decided_by.as_deref().unwrap_or("?")) }
                            @if let Some(at) = a.decided_at { " at " (time(at)) }
                            @if let Some(r) = &a.reason { ": " q { (r) } }
                        }
                    }
                    @if let Some(c) = &order.cancellation {
                        li {
                            "Cancellation asked by " strong { (c.by) } " (" (match c.role { store::Role::Client => "client", store::Role::Operator => "operator" }) ") at " (time(c.at))
                            @if let Some(r) = &c.reason { ": " q { (r) } }
                        }
                    }
                    @for a in &order.actions {
                        li {
                            (match a.action { store::ActionKind::Redrive => "Redriven", store::ActionKind::Resolve => "Resolved by hand" })
                            " by " strong { (a.by) } " at " (time(a.at))
                            @if let Some(n) = &a.note { ": " q { (n) } }
                        }
                    }
                }
            }
        }
    }
}

/// `GET /console/orders/{id}/history.json`: the raw history, as `GET /orders/{id}/history`
/// answers an operator (AWS Step Functions' `GetExecutionHistory` shape).
pub async fn raw_history(
    State(state): State<AppState>,
    operator: ConsoleOperator,
    Path(raw): Path<String>,
) -> Response {
    let query = api::http::orders::HistoryQuery {
        max_results: Some(HISTORY_EVENTS.to_string()),
        next_token: None,
    };
    api::http::orders::history(
        State(state),
        operator.caller(),
        api::http::extract::PathParam(raw),
        api::http::extract::QueryParams(query),
    )
    .await
    .into_response()
}

/// `GET /console/approvals`: the orders waiting for a decision, oldest first, with the time
/// left in each window.
pub async fn approvals(
    State(state): State<AppState>,
    operator: ConsoleOperator,
    Query(query): Query<CursorQuery>,
) -> Response {
    let after = match cursor(&query.after) {
        Ok(a) => a,
        Err(e) => return layout::bad_request(e),
    };
    let page_of = match state
        .ports
        .orders
        .pending_approvals(after.as_ref(), PAGE_SIZE)
        .await
    {
        Ok(p) => p,
        Err(e) => return layout::unavailable(&e),
    };
    let now = Utc::now();
    let body = html! {
        div id="live" data-refresh="10" {
            @if page_of.items.is_empty() {
                p { "No order is waiting for approval." }
            } @else {
                table {
                    caption class="visually-hidden" { "Orders awaiting approval, oldest first" }
                    thead { tr { th scope="col" { "Order" } th scope="col" class="num" { "Total" } th scope="col" { "Waiting since" } th scope="col" { "Time left" } th scope="col" { "Decide" } } }
                    tbody {
                        @for p in &page_of.items {
                            tr {
                                td { a href={ "/console/orders/" (p.order_id) } { (p.order_id) } }
                                td class="num" { (money(p.amount_cents, &p.currency)) }
                                td { (time(p.requested_at)) }
                                td { (p.deadline.map_or("no deadline".to_owned(), |d| span(d - now))) }
                                td {
                                    a href={ "/console/orders/" (p.order_id) "/approve" } aria-label={ "Approve " (p.order_id) } { "Approve…" }
                                    " "
                                    a href={ "/console/orders/" (p.order_id) "/reject" } aria-label={ "Reject " (p.order_id) } { "Reject…" }
                                }
                            }
                        }
                    }
                }
            }
            (pager("/console/approvals", after.is_some(), page_of.next.as_deref()))
        }
    };
    page(
        &operator,
        "/console/approvals",
        "Approvals",
        query.notice.notice(&operator).as_ref(),
        body,
    )
}

/// `GET /console/incidents`: the orders whose compensation gave up and waits for a person.
pub async fn incidents(
    State(state): State<AppState>,
    operator: ConsoleOperator,
    Query(query): Query<CursorQuery>,
) -> Response {
    let after = match cursor(&query.after) {
        Ok(a) => a,
        Err(e) => return layout::bad_request(e),
    };
    let page_of = match state
        .ports
        .orders
        .open_incidents(after.as_ref(), PAGE_SIZE)
        .await
    {
        Ok(p) => p,
        Err(e) => return layout::unavailable(&e),
    };
    let body = html! {
        div id="live" data-refresh="10" {
            @if page_of.items.is_empty() {
                p { "No incident is open." }
            } @else {
                table {
                    caption class="visually-hidden" { "Open incidents, oldest first" }
                    thead { tr { th scope="col" { "Order" } th scope="col" { "Step" } th scope="col" { "Error" } th scope="col" class="num" { "Attempts" } th scope="col" { "Since" } } }
                    tbody {
                        @for o in &page_of.items {
                            @if let Some(i) = &o.incident {
                                tr {
                                    td { a href={ "/console/orders/" (o.id()) } { (o.id()) } }
                                    td { (i.step) }
                                    td { (i.error) ": " (i.cause) }
                                    td class="num" { (i.attempts) }
                                    td { (time(i.since)) }
                                }
                            }
                        }
                    }
                }
            }
            (pager("/console/incidents", after.is_some(), page_of.next.as_deref()))
        }
    };
    page(
        &operator,
        "/console/incidents",
        "Incidents",
        query.notice.notice(&operator).as_ref(),
        body,
    )
}

/// `GET /console/stock`: every SKU's counts and price, with a form to set each.
pub async fn stock(
    State(state): State<AppState>,
    operator: ConsoleOperator,
    Query(query): Query<CursorQuery>,
) -> Response {
    let after = OrdersQuery::trimmed(&query.after);
    let page_of = match state.ports.inventory.list_stock(after, PAGE_SIZE).await {
        Ok(p) => p,
        Err(e) => return layout::unavailable(&e),
    };
    let body = html! {
        table class="stock" {
            caption class="visually-hidden" { "Stock by SKU" }
            thead { tr { th scope="col" { "SKU" } th scope="col" class="num" { "Available" } th scope="col" class="num" { "Reserved" } th scope="col" class="num" { "Shipped" } th scope="col" { "Price" } th scope="col" { "Set count and price" } } }
            tbody {
                @for s in &page_of.items {
                    tr {
                        th scope="row" { (s.sku) }
                        td class="num" { (s.available) }
                        td class="num" { (s.reserved) }
                        td class="num" { (s.shipped) }
                        td { (s.price.as_ref().map_or("no price".to_owned(), |p| money(p.cents, &p.currency))) }
                        td {
                            form class="inline" method="post" action={ "/console/stock/" (s.sku) } {
                                (csrf(&operator))
                                label for={ "avail-" (s.sku) } { "Available" }
                                input id={ "avail-" (s.sku) } name="available" type="number" min="0" max="1000000000" value=(s.available);
                                label for={ "cents-" (s.sku) } { "Price (cents)" }
                                input id={ "cents-" (s.sku) } name="cents" type="number" min="0" max="100000000" value=[s.price.as_ref().map(|p| p.cents)];
                                label for={ "cur-" (s.sku) } { "Currency" }
                                input id={ "cur-" (s.sku) } name="currency" type="text" size="3" pattern="[A-Z]{3}" value=[s.price.as_ref().map(|p| p.currency.as_str())];
                                button type="submit" { "Save " span class="visually-hidden" { (s.sku) } }
                            }
                        }
                    }
                }
            }
        }
        (pager("/console/stock", after.is_some(), page_of.next.as_deref()))
        section aria-labelledby="new-sku" {
            h2 id="new-sku" { "Add a SKU" }
            form method="post" action="/console/stock/new" class="inline" {
                (csrf(&operator))
                label for="new-sku-name" { "SKU" }
                input id="new-sku-name" name="sku" type="text" required maxlength="64";
                label for="new-avail" { "Available" }
                input id="new-avail" name="available" type="number" min="0" max="1000000000" required;
                label for="new-cents" { "Price (cents)" }
                input id="new-cents" name="cents" type="number" min="0" max="100000000";
                label for="new-cur" { "Currency" }
                input id="new-cur" name="currency" type="text" size="3" pattern="[A-Z]{3}";
                button type="submit" { "Add" }
            }
        }
    };
    page(
        &operator,
        "/console/stock",
        "Stock",
        query.notice.notice(&operator).as_ref(),
        body,
    )
}

/// A list's cursor (`after`) and the notice of the action that led here.
#[derive(Debug, Default, Deserialize)]
pub struct CursorQuery {
    pub after: Option<String>,
    #[serde(flatten)]
    pub notice: NoticeQuery,
}

/// The cursor `after` of a list's page, or why it is not one the list gave.
fn cursor(after: &Option<String>) -> Result<Option<QueueCursor>, &'static str> {
    let mut errors = Vec::new();
    let after = validate::queue_cursor(OrdersQuery::trimmed(after), "this list", &mut errors);
    if errors.is_empty() {
        Ok(after)
    } else {
        Err("that page's cursor is not one this list gave")
    }
}

fn pager(base: &str, paged: bool, next: Option<&str>) -> Markup {
    html! {
        nav aria-label="Pages" class="pager" {
            @if paged { a href=(base) { "First page" } }
            @if let Some(n) = next {
                a rel="next" href={ (base) "?" (serde_urlencoded::to_string([("after", n)]).unwrap_or_default()) } { "Next page" }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_path_through_the_saga_comes_from_entered_and_exited_states() {
        let events = vec![
            json!({"type": "StateEntered", "stateEnteredEventDetails": {"name": "ReserveInventory"}}),
            json!({"type": "StateExited", "stateExitedEventDetails": {"name": "ReserveInventory"}}),
            json!({"type": "StateEntered", "stateEnteredEventDetails": {"name": "ChargePayment"}}),
        ];
        let (visited, current) = path_through(&events);
        assert_eq!(visited.len(), 2);
        assert_eq!(current.as_deref(), Some("ChargePayment"));
    }

    #[test]
    fn filters_read_datetime_local_as_utc_and_refuse_bad_input() {
        let q = OrdersQuery {
            status: Some("AWAITING_APPROVAL".into()),
            since: Some("2026-12-04T08:30".into()),
            q: Some(" acme ".into()),
            ..Default::default()
        };
        let f = q.filter().unwrap();
        assert_eq!(f.status, Some(OrderStatus::AwaitingApproval));
        assert_eq!(
            f.created_since.unwrap().to_rfc3339(),
            "2026-12-04T08:30:00+00:00"
        );
        assert_eq!(f.customer_prefix.as_deref(), Some("acme"));
        assert_eq!(
            q.query_string(),
            "status=AWAITING_APPROVAL&since=2026-12-04T08%3A30&q=acme"
        );
        let bad = OrdersQuery {
            status: Some("NOPE".into()),
            ..Default::default()
        };
        assert!(bad.filter().is_err());
        let bad = OrdersQuery {
            until: Some("yesterday".into()),
            ..Default::default()
        };
        assert!(bad.filter().is_err());
    }

    #[test]
    fn the_saga_definition_draws() {
        assert!(SAGA.is_some());
    }
}
