//! `WebhookRepository` on DynamoDB. Endpoints are items `WEBHOOK#ENDPOINT#{id}`, listed per
//! owner through [`ENDPOINTS_INDEX`]; the outbox lives in the order items (`outbox.rs`), the
//! deliveries in items of their own (`deliveries.rs`). Index reads give keys; the items are
//! then read consistently, so a listing never shows an endpoint as it was.

use super::DynamoStore;
use super::codec::{Fields, Item, json, key, s, ts};
use super::error::sdk;
use super::table::{CREATED_AT, ENDPOINT_OWNER, ENDPOINTS_INDEX, PARTITION_KEY, prefix};
use async_trait::async_trait;
use aws_sdk_dynamodb::types::ReturnValue;
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use store::domain::OrderId;
use store::error::StoreError;
use store::ports::{Page, WebhookRepository};
use store::webhook::*;

fn endpoint_pk(id: &str) -> String {
    format!("{}{id}", prefix::WEBHOOK_ENDPOINT)
}

fn endpoint_item(e: &WebhookEndpoint) -> Result<Item, StoreError> {
    let mut item = HashMap::from([
        (PARTITION_KEY.to_owned(), s(endpoint_pk(&e.id))),
        ("endpoint_id".to_owned(), s(&e.id)),
        // The owner is the index's hash key itself.
        (ENDPOINT_OWNER.to_owned(), s(&e.owner)),
        ("url".to_owned(), s(&e.url)),
        ("event_types".to_owned(), json(&e.event_types)?),
        ("secrets".to_owned(), json(&e.secrets)?),
        (CREATED_AT.to_owned(), ts(e.created_at)),
    ]);
    if let Some(disabled) = &e.disabled {
        item.insert("disabled".to_owned(), json(disabled)?);
    }
    if let Some(at) = e.failing_since {
        item.insert("failing_since".to_owned(), ts(at));
    }
    Ok(item)
}

fn endpoint_from(item: &Item) -> Result<WebhookEndpoint, StoreError> {
    let f = Fields::of(item);
    Ok(WebhookEndpoint {
        id: f.string("endpoint_id")?,
        owner: f.string(ENDPOINT_OWNER)?,
        url: f.string("url")?,
        event_types: f.json("event_types")?,
        secrets: f.json("secrets")?,
        created_at: f.ts(CREATED_AT)?,
        disabled: f.opt_json("disabled")?,
        failing_since: f.opt_ts("failing_since")?,
    })
}

impl DynamoStore {
    /// The keys of `owner`'s endpoints, from the index.
    async fn endpoint_keys(&self, owner: &str) -> Result<Vec<String>, StoreError> {
        let query = self
            .client
            .query()
            .table_name(self.table())
            .index_name(ENDPOINTS_INDEX)
            .key_condition_expression("#owner = :owner")
            .expression_attribute_names("#owner", ENDPOINT_OWNER)
            .expression_attribute_values(":owner", s(owner));
        let entries = self.index_entries(query, CREATED_AT, u32::MAX).await?;
        Ok(entries.into_iter().map(|(_, pk)| pk).collect())
    }
}

#[async_trait]
impl WebhookRepository for DynamoStore {
    async fn put_endpoint(&self, endpoint: &WebhookEndpoint) -> Result<(), StoreError> {
        self.client
            .put_item()
            .table_name(self.table())
            .set_item(Some(endpoint_item(endpoint)?))
            .send()
            .await
            .map_err(sdk("PutItem"))
            .map(drop)
    }

    async fn endpoint(&self, id: &str) -> Result<Option<WebhookEndpoint>, StoreError> {
        self.get_item(endpoint_pk(id))
            .await?
            .as_ref()
            .map(endpoint_from)
            .transpose()
    }

    /// Oldest first; endpoints created at the same moment by id.
    async fn endpoints_of(&self, owner: &str) -> Result<Vec<WebhookEndpoint>, StoreError> {
        let pks = self.endpoint_keys(owner).await?;
        let items = self.get_items(&pks).await?;
        let mut endpoints = items
            .values()
            .map(endpoint_from)
            .collect::<Result<Vec<_>, _>>()?;
        // The index is eventually consistent: one moved to another owner since is not theirs.
        endpoints.retain(|e| e.owner == owner);
        endpoints.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        Ok(endpoints)
    }

    async fn delete_endpoint(&self, id: &str) -> Result<bool, StoreError> {
        let out = self
            .client
            .delete_item()
            .table_name(self.table())
            .set_key(Some(key(endpoint_pk(id))))
            .return_values(ReturnValue::AllOld)
            .send()
            .await
            .map_err(sdk("DeleteItem"))?;
        Ok(out.attributes.is_some_and(|old| !old.is_empty()))
    }

    async fn undispatched(&self, limit: u32) -> Result<Vec<OrderEvent>, StoreError> {
        self.undispatched_events(limit).await
    }

    /// The deliveries first, then the mark: a dispatcher that dies in between finds the event
    /// still in the outbox, and its deliveries, stored already, are kept.
    async fn dispatch(
        &self,
        event: &OrderEvent,
        deliveries: &[Delivery],
    ) -> Result<(), StoreError> {
        self.put_new_deliveries(deliveries).await?;
        self.mark_dispatched(event).await
    }

    /// For the order's life: its item keeps every status it reached.
    async fn order_events(&self, order_id: &OrderId) -> Result<Vec<OrderEvent>, StoreError> {
        self.events_of_order(order_id).await
    }

    async fn due_deliveries(
        &self,
        now: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<Delivery>, StoreError> {
        self.due(now, limit).await
    }

    async fn save_delivery(&self, delivery: &Delivery) -> Result<(), StoreError> {
        self.put_delivery(delivery).await
    }

    async fn deliveries(
        &self,
        endpoint_id: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<Delivery>, StoreError> {
        self.endpoint_deliveries(endpoint_id, after, limit).await
    }

    async fn replay(
        &self,
        endpoint_id: &str,
        since: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<u32, StoreError> {
        self.replay_failed(endpoint_id, since, now).await
    }

    /// Nothing to do here: an order's events are a map in its item, at most one per status,
    /// kept for the order's life; finished deliveries carry
    /// [`RETAIN_UNTIL`](super::table::RETAIN_UNTIL), and DynamoDB's time to live deletes them
    /// [`EVENT_RETENTION`](store::ports::EVENT_RETENTION) after their event.
    async fn prune(&self, _before: DateTime<Utc>, _limit: u32) -> Result<u32, StoreError> {
        Ok(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_reads_back_as_written() {
        let at = Utc::now();
        let mut endpoint = WebhookEndpoint {
            id: "ep_1".to_owned(),
            owner: "shop-1".to_owned(),
            url: "https://hooks.example.com/1".to_owned(),
            event_types: vec![EventType::Completed],
            secrets: vec![SigningSecret {
                secret: "whsec_x".to_owned(),
                created_at: at,
                expires_at: None,
            }],
            created_at: at,
            disabled: None,
            failing_since: None,
        };
        let item = endpoint_item(&endpoint).unwrap();
        assert_eq!(endpoint_from(&item).unwrap(), endpoint);
        endpoint.disabled = Some(Disabled {
            at,
            reason: "410 Gone".to_owned(),
        });
        endpoint.failing_since = Some(at);
        let item = endpoint_item(&endpoint).unwrap();
        assert_eq!(endpoint_from(&item).unwrap(), endpoint);
    }
}
