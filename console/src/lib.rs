//! The operator console at `/console`: server-rendered HTML (maud, escaped by construction)
//! with one small script of ours for live updates, every byte served by the binary. Operators
//! sign in with their API key into a session cookie ([`session`]); the pages read through the
//! same ports as the JSON API, and every action goes through the JSON API's own handler, so an
//! action from the console is validated, recorded (with the operator's name) and answered
//! exactly as the same request with the operator's key would be.
//!
//! | page | what |
//! |---|---|
//! | `/console` | the dashboard: orders by status, sagas/s, approvals waiting, incidents open |
//! | `/console/orders` | find orders (filters, a cursor, newest first) and act on a whole filter ([`bulk`]) |
//! | `/console/orders/{id}` | one order: lines, money, the saga drawn from its definition ([`graph`]), the history |
//! | `/console/approvals`, `/console/incidents` | the two queues that wait for a person |
//! | `/console/stock` | counts and catalog prices |

pub mod actions;
pub mod bulk;
pub mod graph;
mod layout;
pub mod pages;
pub mod session;

use api::http::AppState;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use store::StatusCounts;

/// How the console is served.
#[derive(Debug, Clone, Default)]
pub struct ConsoleSettings {
    /// Mark the session cookie `Secure` (browsers then send it over HTTPS only): set it when the
    /// console is reached through TLS.
    pub secure_cookie: bool,
}

/// The console's own state on this replica: running bulk actions, the throughput samples, the
/// counts' cache.
#[derive(Clone, Default)]
pub struct ConsoleState(Arc<Inner>);

#[derive(Default)]
struct Inner {
    settings: ConsoleSettings,
    jobs: bulk::Jobs,
    /// (when, sagas finished by then) samples of this replica's counter, newest last.
    throughput: Mutex<VecDeque<(Instant, u64)>>,
    /// The last counts per status, and when they were read.
    counts: tokio::sync::Mutex<Option<(Instant, StatusCounts)>>,
}

/// How long counts per status are reused: they cost a read of an index, and the pages that show
/// them refresh every few seconds.
const COUNTS_TTL: Duration = Duration::from_secs(5);
/// The window sagas/s is measured over.
const THROUGHPUT_WINDOW: Duration = Duration::from_secs(60);

impl ConsoleState {
    /// The console of a replica starting now: its throughput is measured from now on (the
    /// first minute's figure spans the time since the start).
    pub fn new(settings: ConsoleSettings, finished_so_far: u64) -> ConsoleState {
        ConsoleState(Arc::new(Inner {
            settings,
            throughput: Mutex::new(VecDeque::from([(Instant::now(), finished_so_far)])),
            ..Inner::default()
        }))
    }

    pub fn settings(&self) -> &ConsoleSettings {
        &self.0.settings
    }

    pub(crate) fn jobs(&self) -> &bulk::Jobs {
        &self.0.jobs
    }

    /// Sagas finished a second on this replica over about the last minute, from the samples
    /// the pages took (`finished`: the counter now); `None` until two samples are apart.
    pub(crate) fn sagas_per_second(&self, finished: u64) -> Option<f64> {
        let now = Instant::now();
        let mut samples = self.0.throughput.lock().unwrap_or_else(|e| e.into_inner());
        if samples
            .back()
            .is_none_or(|(at, _)| now.duration_since(*at) >= Duration::from_secs(1))
        {
            samples.push_back((now, finished));
        }
        // Keep one sample older than the window, so the rate spans all of it.
        while samples.len() > 2
            && samples
                .get(1)
                .is_some_and(|(at, _)| now.duration_since(*at) >= THROUGHPUT_WINDOW)
        {
            samples.pop_front();
        }
        let (at, count) = *samples.front()?;
        let elapsed = now.duration_since(at).as_secs_f64();
        (elapsed >= 1.0).then(|| finished.saturating_sub(count) as f64 / elapsed)
    }

    /// The counts per status, read at most every [`COUNTS_TTL`].
    pub(crate) async fn counts(
        &self,
        orders: &dyn store::OrderRepository,
    ) -> Result<StatusCounts, store::StoreError> {
        let mut cached = self.0.counts.lock().await;
        if let Some((at, counts)) = cached.as_ref()
            && at.elapsed() < COUNTS_TTL
        {
            return Ok(counts.clone());
        }
        let counts = orders.count_by_status().await?;
        *cached = Some((Instant::now(), counts.clone()));
        Ok(counts)
    }
}

/// The console's routes with its state, to merge into the service's router
/// ([`api::http::router`]'s `more`).
pub fn routes(console: ConsoleState) -> Router<AppState> {
    Router::new()
        .route("/console", get(pages::dashboard))
        .route(
            "/console/sign-in",
            get(session::sign_in_page).post(session::sign_in),
        )
        .route("/console/sign-out", post(session::sign_out))
        .route("/console/orders", get(pages::orders))
        .route("/console/orders/{order_id}", get(pages::order))
        .route(
            "/console/orders/{order_id}/history.json",
            get(pages::raw_history),
        )
        .route(
            "/console/orders/{order_id}/{action}",
            get(actions::confirm).post(actions::act),
        )
        .route("/console/approvals", get(pages::approvals))
        .route("/console/incidents", get(pages::incidents))
        .route("/console/stock", get(pages::stock))
        .route("/console/stock/{sku}", post(actions::set_stock))
        .route("/console/bulk", post(bulk::start))
        .route("/console/bulk/{job_id}", get(bulk::progress))
        .route("/console/assets/{file}", get(asset))
        .layer(Extension(console))
}

/// The console's static files, compiled into the binary (no CDN, nothing fetched at run time).
async fn asset(Path(file): Path<String>) -> Response {
    let (body, content_type) = match file.as_str() {
        "console.css" => (
            include_str!("assets/console.css"),
            "text/css; charset=utf-8",
        ),
        "console.js" => (
            include_str!("assets/console.js"),
            "text/javascript; charset=utf-8",
        ),
        _ => return layout::not_found("no such file"),
    };
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=300"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throughput_needs_two_samples_a_second_apart() {
        let state = ConsoleState::default();
        assert_eq!(state.sagas_per_second(10), None);
        // Within the same second: still one sample.
        assert_eq!(state.sagas_per_second(20), None);
    }
}
