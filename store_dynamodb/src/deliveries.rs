//! Webhook deliveries on DynamoDB: one item per event and endpoint
//! (`WEBHOOK#DELIVERY#{message id}#{endpoint id}`), replaced whole as each attempt leaves it.
//! A pending one is in the sparse index [`DUE_INDEX`], in [`CREATED_SHARDS`] shards by a hash
//! of its message id, by when it is due; every one is in [`DELIVERIES_INDEX`] under its endpoint
//! by `{created_at}|{message id}`, which is also the listing's cursor. A finished one carries
//! [`RETAIN_UNTIL`]: DynamoDB's time to live deletes it [`EVENT_RETENTION`] after its event.
//! Both indexes are read for keys only; the items are then read consistently.

use super::codec::{Fields, Item, json, s, ts};
use super::error::sdk;
use super::table::{
    CREATED_SHARDS, DELIVERIES_INDEX, DELIVERY_ENDPOINT, DELIVERY_POSITION, DUE_INDEX, DUE_SHARD,
    NEXT_ATTEMPT_AT, PARTITION_KEY, RETAIN_UNTIL, due_shard, prefix, shard_of,
};
use super::{DynamoStore, Written};
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use store::error::StoreError;
use store::ports::{EVENT_RETENTION, Page};
use store::webhook::{Delivery, DeliveryState, EventType};

fn delivery_pk(message_id: &str, endpoint_id: &str) -> String {
    format!("{}{message_id}#{endpoint_id}", prefix::WEBHOOK_DELIVERY)
}

/// Where a delivery is in its endpoint's listing: `{created_at}|{message id}`, which sorts as
/// text by creation (timestamps are fixed width), then by message id.
fn position(created_at: DateTime<Utc>, message_id: &str) -> String {
    format!("{}|{message_id}", store::timestamp(created_at))
}

/// The [`DUE_SHARD`] of the deliveries of the message `message_id`.
fn due_shard_of(message_id: &str) -> AttributeValue {
    s(due_shard(shard_of(message_id)))
}

fn delivery_item(d: &Delivery) -> Result<Item, StoreError> {
    let mut item = HashMap::from([
        (
            PARTITION_KEY.to_owned(),
            s(delivery_pk(&d.message_id, &d.endpoint_id)),
        ),
        ("message_id".to_owned(), s(&d.message_id)),
        ("endpoint_id".to_owned(), s(&d.endpoint_id)),
        ("order_id".to_owned(), s(d.order_id.as_str())),
        ("event_type".to_owned(), s(d.event_type.as_str())),
        ("payload".to_owned(), s(&d.payload)),
        ("created_at".to_owned(), ts(d.created_at)),
        ("state".to_owned(), s(d.state.as_str())),
        ("attempts".to_owned(), json(&d.attempts)?),
        (DELIVERY_ENDPOINT.to_owned(), s(&d.endpoint_id)),
        (
            DELIVERY_POSITION.to_owned(),
            s(position(d.created_at, &d.message_id)),
        ),
    ]);
    if let Some(at) = d.next_attempt_at {
        item.insert(NEXT_ATTEMPT_AT.to_owned(), ts(at));
    }
    match d.state {
        DeliveryState::Pending => {
            item.insert(DUE_SHARD.to_owned(), due_shard_of(&d.message_id));
        }
        DeliveryState::Delivered | DeliveryState::Failed => {
            let until = (d.created_at + EVENT_RETENTION).timestamp();
            item.insert(
                RETAIN_UNTIL.to_owned(),
                AttributeValue::N(until.to_string()),
            );
        }
    }
    Ok(item)
}

fn delivery_from(item: &Item) -> Result<Delivery, StoreError> {
    let f = Fields::of(item);
    let event_type = f.s("event_type")?;
    let state = f.s("state")?;
    Ok(Delivery {
        message_id: f.string("message_id")?,
        endpoint_id: f.string("endpoint_id")?,
        order_id: f.order_id("order_id")?,
        event_type: EventType::parse(event_type).ok_or_else(|| {
            StoreError::Internal(format!("delivery of unknown event {event_type}"))
        })?,
        payload: f.string("payload")?,
        created_at: f.ts("created_at")?,
        state: DeliveryState::parse(state)
            .ok_or_else(|| StoreError::Internal(format!("delivery in unknown state {state}")))?,
        next_attempt_at: f.opt_ts(NEXT_ATTEMPT_AT)?,
        attempts: f.json("attempts")?,
    })
}

/// The cursor `after` of an endpoint's listing, checked: a position.
fn cursor(after: &str) -> Result<&str, StoreError> {
    let bad = || StoreError::Internal(format!("not a cursor of this listing: {after}"));
    let (at, _) = after.split_once('|').ok_or_else(bad)?;
    DateTime::parse_from_rfc3339(at).map_err(|_| bad())?;
    Ok(after)
}

impl DynamoStore {
    /// Puts `deliveries` unless stored already: a delivery stored before (by a dispatch that
    /// died before it marked its event) is kept as it is.
    pub(crate) async fn put_new_deliveries(
        &self,
        deliveries: &[Delivery],
    ) -> Result<(), StoreError> {
        let items = deliveries
            .iter()
            .map(delivery_item)
            .collect::<Result<Vec<_>, _>>()?;
        futures_util::future::try_join_all(items.into_iter().map(|item| self.put_new(item)))
            .await
            .map(drop)
    }

    pub(crate) async fn put_delivery(&self, delivery: &Delivery) -> Result<(), StoreError> {
        self.client
            .put_item()
            .table_name(self.table())
            .set_item(Some(delivery_item(delivery)?))
            .send()
            .await
            .map_err(sdk("PutItem"))
            .map(drop)
    }

    /// The pending deliveries due at `now`, the longest due first, at most `limit`: each due
    /// shard's first `limit` merged, then read again consistently (one attempted since is left
    /// out).
    pub(crate) async fn due(
        &self,
        now: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<Delivery>, StoreError> {
        let limit = limit.max(1);
        let now_ts = store::timestamp(now);
        let shards = futures_util::future::try_join_all(
            (0..CREATED_SHARDS).map(|shard| self.due_shard_page(shard, &now_ts, limit)),
        )
        .await?;
        let mut entries: Vec<(String, String)> = shards.into_iter().flatten().collect();
        entries.sort();
        entries.truncate(limit as usize);
        let pks: Vec<String> = entries.into_iter().map(|(_, pk)| pk).collect();
        let items = self.get_items(&pks).await?;
        let mut due = Vec::new();
        for pk in &pks {
            let Some(item) = items.get(pk) else { continue };
            let delivery = delivery_from(item)?;
            if delivery.state == DeliveryState::Pending
                && delivery.next_attempt_at.is_some_and(|at| at <= now)
            {
                due.push(delivery);
            }
        }
        Ok(due)
    }

    /// The first `limit` entries of one due shard up to `now`: (`next_attempt_at`, `pk`).
    async fn due_shard_page(
        &self,
        shard: u32,
        now: &str,
        limit: u32,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let query = self
            .client
            .query()
            .table_name(self.table())
            .index_name(DUE_INDEX)
            .key_condition_expression("#shard = :shard AND #at <= :now")
            .expression_attribute_names("#shard", DUE_SHARD)
            .expression_attribute_names("#at", NEXT_ATTEMPT_AT)
            .expression_attribute_values(":shard", s(due_shard(shard)))
            .expression_attribute_values(":now", s(now))
            .scan_index_forward(true);
        self.index_entries(query, NEXT_ATTEMPT_AT, limit).await
    }

    /// The keys of `endpoint_id`'s deliveries in its listing's order (newest first), below the
    /// position `below`, or (`below` `None`) from the position `from` on, at most `limit` (all
    /// when `None`); and each one's position.
    async fn endpoint_positions(
        &self,
        endpoint_id: &str,
        range: Range<'_>,
        limit: Option<u32>,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let (condition, bound) = match range {
            Range::Below(at) => (" AND #position < :bound", Some(at)),
            Range::From(at) => (" AND #position >= :bound", Some(at)),
            Range::All => ("", None),
        };
        let mut entries = Vec::new();
        let mut start = None;
        loop {
            let mut query = self
                .client
                .query()
                .table_name(self.table())
                .index_name(DELIVERIES_INDEX)
                .key_condition_expression(format!("#endpoint = :endpoint{condition}"))
                .expression_attribute_names("#endpoint", DELIVERY_ENDPOINT)
                .expression_attribute_values(":endpoint", s(endpoint_id))
                .scan_index_forward(false)
                .set_limit(
                    limit.map(|l| i32::try_from(l as usize - entries.len()).unwrap_or(i32::MAX)),
                )
                .set_exclusive_start_key(start.take());
            if let Some(bound) = bound {
                query = query
                    .expression_attribute_names("#position", DELIVERY_POSITION)
                    .expression_attribute_values(":bound", s(bound));
            }
            let page = query.send().await.map_err(sdk("Query"))?;
            for key in page.items() {
                let f = Fields::of(key);
                entries.push((f.string(PARTITION_KEY)?, f.string(DELIVERY_POSITION)?));
            }
            start = page.last_evaluated_key;
            let full = limit.is_some_and(|l| entries.len() >= l as usize);
            if start.is_none() || full {
                return Ok(entries);
            }
        }
    }

    /// A page of `endpoint_id`'s deliveries, newest first, below the cursor `after` (a
    /// position); the next cursor is the last one's position when the page is full.
    pub(crate) async fn endpoint_deliveries(
        &self,
        endpoint_id: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<Delivery>, StoreError> {
        // One consistent batch read per page.
        let limit = limit.clamp(1, 100);
        let range = match after {
            Some(after) => Range::Below(cursor(after)?),
            None => Range::All,
        };
        let entries = self
            .endpoint_positions(endpoint_id, range, Some(limit))
            .await?;
        let pks: Vec<String> = entries.iter().map(|(pk, _)| pk.clone()).collect();
        let items = self.get_items(&pks).await?;
        let mut deliveries = Vec::new();
        for pk in &pks {
            // One its time to live deleted since the query is left out.
            if let Some(item) = items.get(pk) {
                deliveries.push(delivery_from(item)?);
            }
        }
        // Full by what the index gave, kept or not: the listing goes on below its last.
        let next = (entries.len() >= limit as usize)
            .then(|| entries.last().map(|(_, at)| at.clone()))
            .flatten();
        Ok(Page {
            items: deliveries,
            next,
        })
    }

    /// Makes `endpoint_id`'s failed deliveries of events since `since` pending, due at `now`,
    /// each on condition that it is still failed; how many.
    pub(crate) async fn replay_failed(
        &self,
        endpoint_id: &str,
        since: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<u32, StoreError> {
        // A position from `since` on is one of an event at or after it.
        let from = store::timestamp(since);
        let entries = self
            .endpoint_positions(endpoint_id, Range::From(&from), None)
            .await?;
        let pks: Vec<String> = entries.into_iter().map(|(pk, _)| pk).collect();
        let items = self.get_items(&pks).await?;
        let mut replayed = 0;
        for pk in &pks {
            let Some(item) = items.get(pk) else { continue };
            let delivery = delivery_from(item)?;
            if delivery.state != DeliveryState::Failed {
                continue;
            }
            let values = HashMap::from([
                (":pending".to_owned(), s(DeliveryState::Pending.as_str())),
                (":failed".to_owned(), s(DeliveryState::Failed.as_str())),
                (":now".to_owned(), ts(now)),
                (":due".to_owned(), due_shard_of(&delivery.message_id)),
            ]);
            let written = self
                .update(
                    pk.clone(),
                    &format!(
                        "SET #state = :pending, #{NEXT_ATTEMPT_AT} = :now, #{DUE_SHARD} = :due \
                         REMOVE #{RETAIN_UNTIL}"
                    ),
                    Some("#state = :failed"),
                    values,
                )
                .await?;
            // Refused: attempted or replayed since it was read.
            if let Written::Done(_) = written {
                replayed += 1;
            }
        }
        Ok(replayed)
    }
}

/// Which of an endpoint's positions a query reads.
enum Range<'a> {
    Below(&'a str),
    From(&'a str),
    All,
}

#[cfg(test)]
mod tests {
    use super::*;
    use store::domain::OrderId;
    use store::webhook::Attempt;

    fn delivery(state: DeliveryState) -> Delivery {
        let at = DateTime::parse_from_rfc3339("2026-12-03T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        Delivery {
            message_id: "msg_o-1.completed".to_owned(),
            endpoint_id: "ep_1".to_owned(),
            order_id: OrderId::parse("o-1").unwrap(),
            event_type: EventType::Completed,
            payload: "{}".to_owned(),
            created_at: at,
            state,
            next_attempt_at: (state == DeliveryState::Pending).then_some(at),
            attempts: vec![Attempt {
                at,
                status: Some(500),
                error: None,
                duration_ms: 3,
            }],
        }
    }

    #[test]
    fn only_a_pending_delivery_is_due_and_only_a_finished_one_expires() {
        let pending = delivery_item(&delivery(DeliveryState::Pending)).unwrap();
        assert!(pending.contains_key(DUE_SHARD) && !pending.contains_key(RETAIN_UNTIL));
        for state in [DeliveryState::Delivered, DeliveryState::Failed] {
            let d = delivery(state);
            let item = delivery_item(&d).unwrap();
            assert!(!item.contains_key(DUE_SHARD), "{state:?}");
            let until = (d.created_at + EVENT_RETENTION).timestamp().to_string();
            assert_eq!(item[RETAIN_UNTIL], AttributeValue::N(until));
            assert_eq!(delivery_from(&item).unwrap(), d);
        }
    }

    #[test]
    fn a_cursor_is_a_position() {
        let d = delivery(DeliveryState::Pending);
        let at = position(d.created_at, &d.message_id);
        assert_eq!(cursor(&at).unwrap(), at);
        assert!(cursor("yesterday|msg").is_err());
        assert!(cursor("msg").is_err());
    }
}
