//! Bulk actions: approve, reject or cancel every order a filter selects (not only the page on
//! screen). A dry run counts the orders the action applies to, over the filter frozen at that
//! moment (orders created after it never join); confirming starts a job that walks the same
//! frozen filter on the server, page by page, acting on each order through the same path as a
//! single action (so each is validated and recorded with the operator's name), a few at a time,
//! and a page shows its progress until it ends.
//!
//! A job runs on the replica that started it and its progress lives there: behind a load
//! balancer without sticky sessions, the progress page may answer from another replica, which
//! does not know the job (each order's own page still shows what was done to it). A replica
//! that dies mid-job stops it; running it again acts only on the orders still eligible.

use super::ConsoleState;
use super::actions::{Action, perform};
use super::layout::{self, csrf, page, time};
use super::pages::OrdersQuery;
use super::session::{CSRF_FIELD, ConsoleOperator, same_origin};
use api::http::AppState;
use axum::Extension;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use maud::html;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use store::{Order, OrderFilter, OrderStatus, StoreError};

/// The most orders one bulk action takes: a larger set is a sign the filter is wrong.
pub const MAX_ORDERS: u64 = 10_000;
/// Orders acted on at once by a job.
const IN_FLIGHT: usize = 4;
/// Orders read per page while walking the filter.
const PAGE: u32 = 500;
/// Failures a job keeps to show (it counts them all).
const FAILURES_SHOWN: usize = 50;
/// Jobs a replica remembers (the oldest finished ones are forgotten first).
const JOBS_KEPT: usize = 100;

/// Whether `action` applies to `order` as it is now.
pub fn eligible(action: Action, order: &Order) -> bool {
    match action {
        Action::Approve | Action::Reject => {
            order.status == OrderStatus::AwaitingApproval
                && order.cancellation.is_none()
                && order
                    .approval
                    .as_ref()
                    .is_some_and(|a| a.decision.is_none() && a.task_token.is_some())
        }
        Action::Cancel => {
            !order.status.is_terminal()
                && order.shipping_started_at.is_none()
                && order.cancellation.is_none()
        }
        Action::Redrive | Action::Resolve => false,
    }
}

/// Walks every order `filter` selects (as frozen), handing the eligible ones to `each`; stops
/// after [`MAX_ORDERS`] of them. Returns how many were eligible.
async fn walk(
    state: &AppState,
    filter: &OrderFilter,
    action: Action,
    mut each: impl FnMut(Order),
) -> Result<u64, StoreError> {
    let mut after = None;
    let mut count = 0;
    loop {
        let page = state
            .ports
            .orders
            .find_orders(filter, after.as_ref(), PAGE)
            .await?;
        for order in page.items {
            if eligible(action, &order) {
                count += 1;
                each(order);
                if count >= MAX_ORDERS {
                    return Ok(count);
                }
            }
        }
        match page.next.as_deref().and_then(store::QueueCursor::parse) {
            Some(next) => after = Some(next),
            None => return Ok(count),
        }
    }
}

/// One running or finished bulk action.
pub struct Job {
    pub action: Action,
    pub operator: String,
    pub started_at: DateTime<Utc>,
    /// The filter as the orders page wrote it (empty: every order), and the note.
    pub filter: String,
    pub note: Option<String>,
    /// The orders the dry run counted.
    pub expected: u64,
    pub succeeded: AtomicU64,
    pub failed: AtomicU64,
    pub finished: AtomicBool,
    /// (order id, why) of the first failures.
    pub failures: Mutex<Vec<(String, String)>>,
    /// A failure to read the orders, which ended the job early.
    pub aborted: Mutex<Option<String>>,
}

/// This replica's jobs by id.
#[derive(Default)]
pub struct Jobs(Mutex<HashMap<String, Arc<Job>>>);

impl Jobs {
    fn insert(&self, id: String, job: Arc<Job>) {
        let mut jobs = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if jobs.len() >= JOBS_KEPT {
            let oldest = jobs
                .iter()
                .filter(|(_, j)| j.finished.load(Relaxed))
                .min_by_key(|(_, j)| j.started_at)
                .map(|(id, _)| id.clone());
            if let Some(oldest) = oldest {
                jobs.remove(&oldest);
            }
        }
        jobs.insert(id, job);
    }

    fn get(&self, id: &str) -> Option<Arc<Job>> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()
    }
}

/// The filter of a bulk form, frozen at `until` (orders created later never join).
fn frozen(form: &HashMap<String, String>, until: DateTime<Utc>) -> Result<OrderFilter, String> {
    let query: OrdersQuery =
        serde_urlencoded::from_str(form.get("filter").map_or("", String::as_str))
            .map_err(|_| "the filter could not be read".to_owned())?;
    let mut filter = query.filter()?;
    filter.created_until = Some(filter.created_until.map_or(until, |u| u.min(until)));
    Ok(filter)
}

fn verb(action: Action) -> &'static str {
    match action {
        Action::Approve => "Approve",
        Action::Reject => "Reject",
        Action::Cancel => "Cancel",
        Action::Redrive => "Redrive",
        Action::Resolve => "Resolve",
    }
}

/// `POST /console/bulk`: `step=dry-run` counts and asks to confirm; `step=run` starts the job.
pub async fn start(
    State(state): State<AppState>,
    Extension(console): Extension<ConsoleState>,
    operator: ConsoleOperator,
    headers: HeaderMap,
    axum::Form(form): axum::Form<HashMap<String, String>>,
) -> Response {
    if !same_origin(&headers) || !operator.csrf_ok(form.get(CSRF_FIELD).map(String::as_str)) {
        return layout::forbidden(
            "this form's token is not this session's; reload the page and try again",
        );
    }
    let action = match form.get("action").and_then(|a| Action::parse(a)) {
        Some(a @ (Action::Approve | Action::Reject | Action::Cancel)) => a,
        _ => return layout::bad_request("a bulk action is approve, reject or cancel"),
    };
    let note = form
        .get("note")
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty());
    // The moment the dry run froze the filter at, carried to the run.
    let until = match form.get("frozen").map(|f| DateTime::parse_from_rfc3339(f)) {
        None => Utc::now(),
        Some(Ok(t)) => t.with_timezone(&Utc),
        Some(Err(_)) => return layout::bad_request("the form's frozen time could not be read"),
    };
    let filter = match frozen(&form, until) {
        Ok(f) => f,
        Err(e) => return layout::bad_request(&e),
    };
    match form.get("step").map(String::as_str) {
        Some("run") => run(state, &console, operator, action, note, filter, &form),
        _ => dry_run(state, operator, action, note, filter, until, &form).await,
    }
}

async fn dry_run(
    state: AppState,
    operator: ConsoleOperator,
    action: Action,
    note: Option<String>,
    filter: OrderFilter,
    until: DateTime<Utc>,
    form: &HashMap<String, String>,
) -> Response {
    let count = match walk(&state, &filter, action, |_| {}).await {
        Ok(n) => n,
        Err(e) => return layout::unavailable(&e),
    };
    let filter_qs = form.get("filter").cloned().unwrap_or_default();
    let title = format!("{} {count} orders?", verb(action));
    let body = html! {
        p {
            "The filter selects " strong { (count) } " orders that can be "
            (match action { Action::Approve => "approved", Action::Reject => "rejected", _ => "cancelled" })
            " now (orders created up to " (time(until)) "; later ones never join)."
            @if count >= MAX_ORDERS { " That is the most one bulk action takes: narrow the filter to act on the rest." }
        }
        p { "Filter: " code { @if filter_qs.is_empty() { "every order" } @else { (filter_qs) } } }
        @if let Some(n) = &note { p { "Note recorded with each: " q { (n) } } }
        @if count == 0 {
            p { a href={ "/console/orders?" (filter_qs) } { "Back to the orders" } }
        } @else {
            form method="post" action="/console/bulk" {
                (csrf(&operator))
                input type="hidden" name="filter" value=(filter_qs);
                input type="hidden" name="action" value=(action.name());
                input type="hidden" name="frozen" value=(until.to_rfc3339());
                input type="hidden" name="expected" value=(count);
                @if let Some(n) = &note { input type="hidden" name="note" value=(n); }
                div class="buttons" {
                    button type="submit" name="step" value="run" class="danger" { (verb(action)) " " (count) " orders" }
                    a class="button" href={ "/console/orders?" (filter_qs) } { "Back" }
                }
            }
        }
    };
    page(&operator, "/console/orders", &title, None, body)
}

fn run(
    state: AppState,
    console: &ConsoleState,
    operator: ConsoleOperator,
    action: Action,
    note: Option<String>,
    filter: OrderFilter,
    form: &HashMap<String, String>,
) -> Response {
    let expected = form
        .get("expected")
        .and_then(|e| e.parse().ok())
        .unwrap_or(0);
    let id = uuid::Uuid::new_v4().simple().to_string();
    let job = Arc::new(Job {
        action,
        operator: operator.name.clone(),
        started_at: Utc::now(),
        filter: form.get("filter").cloned().unwrap_or_default(),
        note: note.clone(),
        expected,
        succeeded: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        finished: AtomicBool::new(false),
        failures: Mutex::new(Vec::new()),
        aborted: Mutex::new(None),
    });
    console.jobs().insert(id.clone(), job.clone());
    tracing::info!(operator = %operator.name, job = %id, action = action.name(), expected, "console bulk action started");
    let job_id = id.clone();
    tokio::spawn(async move {
        // The set is bounded (at most MAX_ORDERS), so it is read first, then acted on.
        let mut pending = Vec::new();
        if let Err(e) = walk(&state, &filter, action, |order| pending.push(order)).await {
            *job.aborted.lock().unwrap_or_else(|e| e.into_inner()) =
                Some(format!("reading the orders failed: {e}"));
        }
        futures_util::stream::iter(pending)
            .for_each_concurrent(IN_FLIGHT, |order| {
                let (state, operator, job, note) = (&state, &operator, &job, &note);
                async move {
                    let id = order.id().to_string();
                    match perform(state, operator, &id, action, note.as_deref()).await {
                        Ok(()) => {
                            job.succeeded.fetch_add(1, Relaxed);
                        }
                        Err(why) => {
                            job.failed.fetch_add(1, Relaxed);
                            let mut f = job.failures.lock().unwrap_or_else(|e| e.into_inner());
                            if f.len() < FAILURES_SHOWN {
                                f.push((id, why));
                            }
                        }
                    }
                }
            })
            .await;
        job.finished.store(true, Relaxed);
        tracing::info!(job = %job_id, succeeded = job.succeeded.load(Relaxed), failed = job.failed.load(Relaxed), "console bulk action finished");
    });
    Redirect::to(&format!("/console/bulk/{id}")).into_response()
}

/// `GET /console/bulk/{id}`: a job's progress.
pub async fn progress(
    Extension(console): Extension<ConsoleState>,
    operator: ConsoleOperator,
    Path(id): Path<String>,
) -> Response {
    let Some(job) = console.jobs().get(&id) else {
        return layout::not_found(
            "this replica knows no such bulk action (it may have run on another replica, or this one restarted)",
        );
    };
    let (succeeded, failed) = (job.succeeded.load(Relaxed), job.failed.load(Relaxed));
    let finished = job.finished.load(Relaxed);
    let done = succeeded + failed;
    let failures = job
        .failures
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let aborted = job
        .aborted
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let title = format!("Bulk {}", job.action.name());
    let body = html! {
        div id="live" data-refresh=[(!finished).then_some("1")] {
            p { "Started by " strong { (job.operator) } " at " (time(job.started_at)) "." }
            p { "Filter: " code { @if job.filter.is_empty() { "every order" } @else { (job.filter) } }
                @if let Some(n) = &job.note { " · note: " q { (n) } } }
            label for="bulk-progress" { (if finished { "Finished" } else { "Running" }) ": " (done) " of " (job.expected) " orders" }
            progress id="bulk-progress" max=(job.expected.max(done).max(1)) value=(done) { (done) " of " (job.expected) }
            dl class="figures" {
                div { dt { "Succeeded" } dd id="bulk-succeeded" { (succeeded) } }
                div { dt { "Failed" } dd id="bulk-failed" { (failed) } }
                div { dt { "State" } dd id="bulk-state" { (if finished { "finished" } else { "running" }) } }
            }
            @if let Some(why) = &aborted { p class="notice failed" { (why) } }
            @if !failures.is_empty() {
                h2 { "Failures" }
                ul {
                    @for (order, why) in &failures {
                        li { a href={ "/console/orders/" (order) } { (order) } ": " (why) }
                    }
                }
            }
            @if finished { p { a href="/console/orders" { "Back to the orders" } } }
        }
    };
    page(&operator, "/console/orders", &title, None, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bulk_filter_is_frozen_at_the_dry_run() {
        let until = "2026-12-04T10:00:00Z".parse::<DateTime<Utc>>().unwrap();
        let mut form = HashMap::new();
        form.insert("filter".to_owned(), "status=AWAITING_APPROVAL".to_owned());
        let f = frozen(&form, until).unwrap();
        assert_eq!(f.status, Some(OrderStatus::AwaitingApproval));
        assert_eq!(f.created_until, Some(until));
        // An earlier end of the operator's own stays.
        form.insert("filter".to_owned(), "until=2026-12-01T00:00".to_owned());
        let f = frozen(&form, until).unwrap();
        assert_eq!(
            f.created_until.unwrap().to_rfc3339(),
            "2026-12-01T00:00:00+00:00"
        );
        form.insert("filter".to_owned(), "status=NOPE".to_owned());
        assert!(frozen(&form, until).is_err());
    }
}
