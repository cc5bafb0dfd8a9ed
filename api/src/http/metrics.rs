//! `/metrics`' request counters: every request counted and timed by its matched route, in the
//! registry of [`telemetry::Metrics`].

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use std::time::Instant;
use telemetry::Metrics;

/// Counts and times every request by its matched route (`unmatched` for unknown paths, so
/// scanners cannot blow up the label set).
pub async fn track(State(metrics): State<Metrics>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = match request.method().as_str() {
        m @ ("GET" | "HEAD" | "POST" | "PUT" | "PATCH" | "DELETE" | "OPTIONS") => m,
        _ => "OTHER",
    }
    .to_owned();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |p| p.as_str())
        .to_owned();
    let response = next.run(request).await;
    metrics.request(
        &method,
        &route,
        response.status().as_u16(),
        started.elapsed().as_secs_f64(),
    );
    response
}
