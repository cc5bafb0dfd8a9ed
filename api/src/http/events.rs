//! `GET /orders/{orderId}/events`: the order's status as server-sent events. The current status
//! at once, then each status the order reaches, read from the order's event list (the outbox
//! the store writes with each change, so no step is skipped however fast the saga runs); the
//! stream ends after a final status (`COMPLETED`, `CANCELLED`). Each event's `id` is the status:
//! a client reconnecting with `Last-Event-ID` gets every status after it, none twice.
//!
//! Bounded: a principal holds at most [`STREAMS_PER_PRINCIPAL`] streams at once (one more is a
//! `429`), and a stream ends after [`STREAM_LIFETIME`] (the client reconnects with its last id).

use super::AppState;
use super::answers;
use super::auth::Caller;
use super::extract::PathParam;
use super::orders::find_own_order;
use super::problem::{Problem, ProblemKind};
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use store::{OrderEvent, OrderId, OrderStatus, WebhookRepository};
use utoipa::ToSchema;

/// Streams one principal may hold open at once.
pub const STREAMS_PER_PRINCIPAL: usize = 8;
/// How long one stream lasts at most.
pub const STREAM_LIFETIME: Duration = Duration::from_secs(3600);
/// How often a stream looks for a new status.
const POLL: Duration = Duration::from_millis(250);

/// The open streams per principal.
#[derive(Debug, Default, Clone)]
pub struct OpenStreams(Arc<Mutex<HashMap<String, usize>>>);

/// A stream's place in its principal's count, given back when the stream ends.
struct Slot {
    open: OpenStreams,
    principal: String,
}

impl OpenStreams {
    fn take(&self, principal: &str) -> Option<Slot> {
        let mut open = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let n = open.entry(principal.to_owned()).or_default();
        if *n >= STREAMS_PER_PRINCIPAL {
            return None;
        }
        *n += 1;
        Some(Slot {
            open: self.clone(),
            principal: principal.to_owned(),
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.open.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = open.get_mut(&self.principal) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.principal);
            }
        }
    }
}

/// One event's data.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatusEvent {
    pub order_id: String,
    pub status: String,
    /// When the order reached it.
    pub at: chrono::DateTime<chrono::Utc>,
}

fn sse_event(event: &OrderEvent) -> Event {
    let data = StatusEvent {
        order_id: event.order_id.to_string(),
        status: event.status.as_str().to_owned(),
        at: event.at,
    };
    Event::default()
        .event("status")
        .id(event.status.as_str())
        .json_data(&data)
        .unwrap_or_else(|_| Event::default().comment("unencodable"))
}

/// The events to send first: after `last_id` when the client names one it was sent, else the
/// current status alone.
fn first_events(events: &[OrderEvent], last_id: Option<&str>) -> Vec<OrderEvent> {
    let seen = last_id.and_then(|id| events.iter().position(|e| e.status.as_str() == id));
    match seen {
        Some(i) => events[i + 1..].to_vec(),
        None => events.last().cloned().into_iter().collect(),
    }
}

/// Follow an order's status as server-sent events.
///
/// `text/event-stream`: an event `status` (data `{orderId, status, at}`, id the status) at once
/// for the current status, then one per status the order reaches; the stream ends after
/// `COMPLETED` or `CANCELLED`. Reconnect with `Last-Event-ID` to get what came after it.
#[utoipa::path(
    get,
    path = "/orders/{orderId}/events",
    operation_id = "streamOrderEvents",
    tag = "orders",
    security(("apiKey" = [])),
    params(
        ("orderId" = String, Path, description = "The order id"),
        ("Last-Event-ID" = Option<String>, Header, description = "The id of the last event received: the stream resumes after it"),
    ),
    responses(
        (status = 200, description = "The status stream", content_type = "text/event-stream", body = StatusEvent),
        answers::Unauthorized,
        (status = 404, description = "No such order of the caller's (`order-not-found`)", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "The caller holds the most streams allowed (`too-many-streams`)", body = Problem, content_type = "application/problem+json"),
        answers::ServiceUnavailable,
    )
)]
#[tracing::instrument(name = "order_events", skip_all, fields(order_id = %raw))]
pub async fn stream(
    State(state): State<AppState>,
    caller: Caller,
    PathParam(raw): PathParam,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let order = find_own_order(&state, &raw, &caller).await?;
    let slot = state.streams.take(&caller.principal).ok_or_else(|| {
        Problem::new(
            ProblemKind::TooManyStreams,
            format!("a principal may hold {STREAMS_PER_PRINCIPAL} status streams at once"),
        )
    })?;
    let last_id = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let mut events = state
        .webhooks
        .order_events(order.id())
        .await
        .map_err(|e| Problem::backend(&e, e.is_transient()))?;
    if events.is_empty() {
        // Past the event list's retention: the status as it is now.
        events.push(OrderEvent {
            order_id: order.id().clone(),
            owner: order.new.owner.clone(),
            status: order.status,
            at: order.updated_at,
            key: String::new(),
        });
    }
    let first = first_events(&events, last_id.as_deref());
    let stream = follow(
        state.webhooks.clone(),
        order.id().clone(),
        events,
        first,
        slot,
    );
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response())
}

fn follow(
    webhooks: Arc<dyn WebhookRepository>,
    id: OrderId,
    known: Vec<OrderEvent>,
    first: Vec<OrderEvent>,
    slot: Slot,
) -> impl Stream<Item = Result<Event, std::convert::Infallible>> {
    futures_util::stream::unfold(
        (
            known,
            first,
            slot,
            tokio::time::Instant::now() + STREAM_LIFETIME,
            false,
        ),
        move |(mut known, mut queue, slot, until, done)| {
            let webhooks = webhooks.clone();
            let id = id.clone();
            async move {
                loop {
                    if !queue.is_empty() {
                        let event = queue.remove(0);
                        let done = event.status.is_final();
                        return Some((Ok(sse_event(&event)), (known, queue, slot, until, done)));
                    }
                    let last = known.last().map(|e| e.status);
                    if done || last.is_some_and(OrderStatus::is_final) {
                        return None;
                    }
                    if tokio::time::Instant::now() >= until {
                        return None;
                    }
                    tokio::time::sleep(POLL).await;
                    let Ok(now) = webhooks.order_events(&id).await else {
                        continue;
                    };
                    let rank = last.map(OrderStatus::rank);
                    queue = now
                        .iter()
                        .filter(|e| rank.is_none_or(|r| e.status.rank() > r))
                        .cloned()
                        .collect();
                    if !queue.is_empty() {
                        known = now;
                    }
                }
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(status: OrderStatus) -> OrderEvent {
        OrderEvent {
            order_id: OrderId::parse("o-1").unwrap(),
            owner: None,
            status,
            at: chrono::Utc::now(),
            key: String::new(),
        }
    }

    #[test]
    fn a_reconnect_resumes_after_its_last_event_and_a_new_stream_starts_at_the_current_status() {
        let events = [
            event(OrderStatus::Accepted),
            event(OrderStatus::Reserved),
            event(OrderStatus::Charged),
        ];
        let statuses = |e: Vec<OrderEvent>| e.iter().map(|e| e.status).collect::<Vec<_>>();
        assert_eq!(
            statuses(first_events(&events, None)),
            [OrderStatus::Charged]
        );
        assert_eq!(
            statuses(first_events(&events, Some("ACCEPTED"))),
            [OrderStatus::Reserved, OrderStatus::Charged]
        );
        assert!(first_events(&events, Some("CHARGED")).is_empty());
        assert_eq!(
            statuses(first_events(&events, Some("nonsense"))),
            [OrderStatus::Charged]
        );
    }

    #[test]
    fn a_principal_holds_a_bounded_number_of_streams() {
        let open = OpenStreams::default();
        let slots: Vec<Slot> = (0..STREAMS_PER_PRINCIPAL)
            .map(|_| open.take("shop").expect("a slot"))
            .collect();
        assert!(open.take("shop").is_none());
        assert!(open.take("other").is_some(), "per principal");
        drop(slots);
        assert!(open.take("shop").is_some(), "given back");
    }
}
