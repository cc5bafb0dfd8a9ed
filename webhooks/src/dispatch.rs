//! The outbox's events fanned out into deliveries: one per endpoint of the order's owner that
//! wants the event, each due at once, all stored with the event's removal from the outbox.

use chrono::Utc;
use futures_util::StreamExt;
use serde_json::json;
use std::collections::{BTreeSet, HashMap};
use store::{
    Delivery, DeliveryState, EventType, OrderEvent, StoreError, WebhookEndpoint, WebhookRepository,
};

/// Events read from the outbox a pass.
const BATCH: u32 = 500;
/// Owners whose endpoints are read at once.
const CONCURRENCY: usize = 64;
/// Events dispatched a write (the embedded store's; elsewhere, at once).
const DISPATCH_CHUNK: usize = 64;

/// The body of the event's webhook: the spec's `{type, timestamp, data}`, thin (the status URL
/// has the rest).
pub fn payload(event: &OrderEvent, kind: EventType) -> String {
    json!({
        "type": kind.as_str(),
        "timestamp": event.at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        "data": {
            "orderId": event.order_id.as_str(),
            "status": event.status.as_str(),
            "statusUrl": format!("/orders/{}/status", event.order_id),
        },
    })
    .to_string()
}

/// The deliveries of `event` to `endpoints` (those that want it).
fn deliveries(event: &OrderEvent, endpoints: &[WebhookEndpoint]) -> Vec<Delivery> {
    let Some(kind) = EventType::of_status(event.status) else {
        return Vec::new();
    };
    let now = Utc::now();
    let body = payload(event, kind);
    endpoints
        .iter()
        .filter(|e| e.wants(kind))
        .map(|e| Delivery {
            message_id: event.message_id(),
            endpoint_id: e.id.clone(),
            order_id: event.order_id.clone(),
            event_type: kind,
            payload: body.clone(),
            created_at: event.at,
            state: DeliveryState::Pending,
            next_attempt_at: Some(now),
            attempts: Vec::new(),
        })
        .collect()
}

/// One pass over the outbox; how many events it dispatched.
pub async fn pass(repo: &dyn WebhookRepository) -> Result<usize, StoreError> {
    let events = repo.undispatched(BATCH).await?;
    if events.is_empty() {
        return Ok(0);
    }
    // Each owner's endpoints, read once a pass, several owners at once.
    let owners: BTreeSet<String> = events.iter().filter_map(|e| e.owner.clone()).collect();
    let endpoints: HashMap<String, Vec<WebhookEndpoint>> = futures_util::stream::iter(owners)
        .map(|owner| async move {
            let theirs = repo.endpoints_of(&owner).await?;
            Ok::<_, StoreError>((owner, theirs))
        })
        .buffer_unordered(CONCURRENCY)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    let count = events.len();
    let none = Vec::new();
    let batch: Vec<(OrderEvent, Vec<Delivery>)> = events
        .into_iter()
        .map(|event| {
            let theirs = event
                .owner
                .as_ref()
                .and_then(|o| endpoints.get(o))
                .unwrap_or(&none);
            let deliveries = deliveries(&event, theirs);
            (event, deliveries)
        })
        .collect();
    // A write a chunk, so that one commit does not carry a whole pass.
    for chunk in batch.chunks(DISPATCH_CHUNK) {
        repo.dispatch_all(chunk).await?;
    }
    Ok(count)
}
