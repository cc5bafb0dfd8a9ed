//! Webhook endpoints, the outbox of order events, deliveries.

use super::Page;
use crate::domain::*;
use crate::error::StoreError;
use crate::webhook::*;
use async_trait::async_trait;
use chrono::{DateTime, Utc};

/// Events [`WebhookRepository::dispatch_all`]'s default dispatches at once.
pub const DISPATCH_CONCURRENCY: usize = 64;

/// Webhook endpoints, the outbox of order events, and the deliveries with their attempts.
/// The outbox is written by the order store itself, with each status change, so an event is
/// never lost to a crash nor made up by one; the service's dispatcher fans each event out into
/// deliveries, and its sender attempts them.
#[async_trait]
pub trait WebhookRepository: Send + Sync {
    /// Stores `endpoint`, replacing the one with its id (a rotation, a disable).
    async fn put_endpoint(&self, endpoint: &WebhookEndpoint) -> Result<(), StoreError>;

    async fn endpoint(&self, id: &str) -> Result<Option<WebhookEndpoint>, StoreError>;

    /// `owner`'s endpoints, oldest first.
    async fn endpoints_of(&self, owner: &str) -> Result<Vec<WebhookEndpoint>, StoreError>;

    /// `false`: there was none. Its deliveries stay, for the record.
    async fn delete_endpoint(&self, id: &str) -> Result<bool, StoreError>;

    /// The outbox's oldest events not yet dispatched, at most `limit`.
    async fn undispatched(&self, limit: u32) -> Result<Vec<OrderEvent>, StoreError>;

    /// Stores `deliveries` (of `event`; one already stored is kept as it is) and takes `event`
    /// out of the outbox. Idempotent: a dispatcher that died between the two does it again.
    async fn dispatch(&self, event: &OrderEvent, deliveries: &[Delivery])
    -> Result<(), StoreError>;

    /// [`dispatch`](Self::dispatch) for each event of `batch` with its deliveries. The embedded
    /// store writes them all at once (one job on its writer, where one an event cost a small
    /// saga four of its fourteen writes); this default dispatches them one by one,
    /// [`DISPATCH_CONCURRENCY`] at a time. An error may leave some of them dispatched (each is
    /// idempotent).
    async fn dispatch_all(&self, batch: &[(OrderEvent, Vec<Delivery>)]) -> Result<(), StoreError> {
        use futures_util::StreamExt;
        let each: Vec<_> = batch
            .iter()
            .map(|(event, deliveries)| self.dispatch(event, deliveries))
            .collect();
        futures_util::stream::iter(each)
            .buffer_unordered(DISPATCH_CONCURRENCY)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect()
    }

    /// The statuses `order_id` reached, in order, for the status stream. The embedded store
    /// keeps them for [`EVENT_RETENTION`] after their dispatch; the AWS one for the order's life.
    async fn order_events(&self, order_id: &OrderId) -> Result<Vec<OrderEvent>, StoreError>;

    /// Pending deliveries due at `now`, the longest due first, at most `limit`.
    async fn due_deliveries(
        &self,
        now: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<Delivery>, StoreError>;

    /// Stores `delivery` as an attempt left it.
    async fn save_delivery(&self, delivery: &Delivery) -> Result<(), StoreError>;

    /// `endpoint_id`'s deliveries, newest first, a page of at most `limit` after the cursor
    /// `after`.
    async fn deliveries(
        &self,
        endpoint_id: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<Delivery>, StoreError>;

    /// Makes `endpoint_id`'s failed deliveries of events since `since` pending again, due at
    /// `now`, their attempts kept; how many.
    async fn replay(
        &self,
        endpoint_id: &str,
        since: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<u32, StoreError>;

    /// Forgets, at most `limit` of each, dispatched events and finished deliveries older than
    /// `before`; how many.
    async fn prune(&self, before: DateTime<Utc>, limit: u32) -> Result<u32, StoreError>;
}

/// How long the embedded store keeps an order event after its dispatch (the status stream's
/// reach back for a reconnecting client), and a finished delivery (its endpoint's log).
pub const EVENT_RETENTION: chrono::Duration = chrono::Duration::days(7);
