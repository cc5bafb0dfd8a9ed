//! The webhooks' outbox on DynamoDB, kept in the order item itself, so the write that changes an
//! order's status records the event in the same `PutItem` or `UpdateItem`, with no transaction:
//! `reached` maps each status the order reached to when, `dispatched` marks those fanned out
//! into deliveries. Statuses only move forward (`OrderStatus::rank`), so an order reaches each
//! one at most once, and the order it reached them in is their rank order: the map is the
//! order's whole event list, bounded by the nine statuses.
//!
//! The sparse index [`OUTBOX_INDEX`] holds the orders with something left to dispatch: every
//! status change sets [`OUTBOX_SHARD`], and the dispatch of the last reached status removes it,
//! on condition that no status arrived meanwhile.
//!
//! Every order item carries both maps from the `PutItem` that creates it: a status change on an
//! item without them would fail (DynamoDB refuses to set a key of a missing map), and the 0.1.0
//! baseline has no such item.

use super::codec::{Fields, Item, s, ts};
use super::orders::order_pk;
use super::table::{
    CREATED_AT, CREATED_SHARDS, OUTBOX_INDEX, OUTBOX_SHARD, PARTITION_KEY, outbox_shard, shard_of,
};
use super::{DynamoStore, Written};
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use store::domain::{OrderId, OrderStatus};
use store::error::StoreError;
use store::webhook::OrderEvent;

/// The order item's map of the statuses it reached: `{STATUS: timestamp}`.
const REACHED: &str = "reached";
/// The order item's map of the statuses dispatched: `{STATUS: true}`.
const DISPATCHED: &str = "dispatched";

/// The outbox's attributes of a new order, which reached `ACCEPTED` at `now` (the time its
/// `updated_at` gets).
pub(crate) fn new_order_outbox(
    order_id: &OrderId,
    now: DateTime<Utc>,
) -> [(String, AttributeValue); 3] {
    [
        (
            REACHED.to_owned(),
            AttributeValue::M(HashMap::from([(
                OrderStatus::Accepted.as_str().to_owned(),
                ts(now),
            )])),
        ),
        (DISPATCHED.to_owned(), AttributeValue::M(HashMap::new())),
        (
            OUTBOX_SHARD.to_owned(),
            s(outbox_shard(shard_of(order_id.as_str()))),
        ),
    ]
}

/// Adds to the `SET` clause of an update that moves the order to `status` the recording of its
/// event: when it was reached (`:now`, which the update binds for `updated_at`; kept if it was
/// reached before, as by a re-park) and its place in the outbox.
pub(crate) fn record_reached(
    set: &mut String,
    values: &mut Item,
    status: OrderStatus,
    order_id: &OrderId,
) {
    debug_assert!(values.contains_key(":now"), "the update binds :now");
    // The status is the map key: a name placeholder of its own (`#COMPLETED`), which
    // `codec::names` declares like any other.
    let key = status.as_str();
    set.push_str(&format!(
        ", #{REACHED}.#{key} = if_not_exists(#{REACHED}.#{key}, :now), #{OUTBOX_SHARD} = :outbox"
    ));
    values.insert(
        ":outbox".to_owned(),
        s(outbox_shard(shard_of(order_id.as_str()))),
    );
}

/// The statuses in the order item's map `name`, with its values (none when the map is absent).
fn status_map<'a>(
    item: &'a Item,
    name: &str,
) -> Result<Vec<(OrderStatus, &'a AttributeValue)>, StoreError> {
    let bad = |what: String| {
        let pk = item.get(PARTITION_KEY).and_then(|v| v.as_s().ok());
        StoreError::Internal(format!(
            "DynamoDB item {}: attribute {name} {what}",
            pk.map_or("?", String::as_str)
        ))
    };
    let map = match item.get(name) {
        None | Some(AttributeValue::Null(_)) => return Ok(Vec::new()),
        Some(AttributeValue::M(map)) => map,
        Some(_) => return Err(bad("is not a map".to_owned())),
    };
    map.iter()
        .map(|(key, value)| {
            OrderStatus::parse(key)
                .map(|status| (status, value))
                .ok_or_else(|| bad(format!("holds an unknown status {key}")))
        })
        .collect()
}

/// The key of an event in the outbox: `{order id}|{STATUS}`.
fn event_key(order_id: &OrderId, status: OrderStatus) -> String {
    format!("{order_id}|{}", status.as_str())
}

fn parse_event_key(key: &str) -> Result<(OrderId, OrderStatus), StoreError> {
    let bad = || StoreError::Internal(format!("not an outbox key: {key}"));
    let (id, status) = key.rsplit_once('|').ok_or_else(bad)?;
    Ok((
        OrderId::parse(id).map_err(|_| bad())?,
        OrderStatus::parse(status).ok_or_else(bad)?,
    ))
}

/// The events of the order `item`: every status it reached, or only those not dispatched, in
/// rank order.
fn events_of(item: &Item, undispatched_only: bool) -> Result<Vec<OrderEvent>, StoreError> {
    let f = Fields::of(item);
    let order_id = f.order_id("order_id")?;
    let owner = f.opt_string("owner")?;
    let dispatched: Vec<OrderStatus> = status_map(item, DISPATCHED)?
        .into_iter()
        .map(|(status, _)| status)
        .collect();
    let mut events = Vec::new();
    for (status, at) in status_map(item, REACHED)? {
        if undispatched_only && dispatched.contains(&status) {
            continue;
        }
        let at = HashMap::from([(REACHED.to_owned(), at.clone())]);
        events.push(OrderEvent {
            order_id: order_id.clone(),
            owner: owner.clone(),
            status,
            at: Fields::of(&at).ts(REACHED)?,
            key: event_key(&order_id, status),
        });
    }
    events.sort_by_key(|e| e.status.rank());
    Ok(events)
}

/// How many statuses the order `item` reached, when all of them are dispatched.
fn all_dispatched(item: &Item) -> Result<Option<usize>, StoreError> {
    let reached = status_map(item, REACHED)?;
    let dispatched: Vec<OrderStatus> = status_map(item, DISPATCHED)?
        .into_iter()
        .map(|(status, _)| status)
        .collect();
    Ok(reached
        .iter()
        .all(|(status, _)| dispatched.contains(status))
        .then_some(reached.len()))
}

impl DynamoStore {
    /// The oldest orders (by creation) in the outbox, at most `limit`: each shard's first
    /// `limit`, merged.
    async fn outbox_orders(&self, limit: u32) -> Result<Vec<String>, StoreError> {
        let shards = futures_util::future::try_join_all(
            (0..CREATED_SHARDS).map(|shard| self.outbox_shard_page(shard, limit)),
        )
        .await?;
        let mut entries: Vec<(String, String)> = shards.into_iter().flatten().collect();
        entries.sort();
        entries.truncate(limit as usize);
        Ok(entries.into_iter().map(|(_, pk)| pk).collect())
    }

    /// The first `limit` entries of one outbox shard: (`created_at`, `pk`).
    async fn outbox_shard_page(
        &self,
        shard: u32,
        limit: u32,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let query = self
            .client
            .query()
            .table_name(self.table())
            .index_name(OUTBOX_INDEX)
            .key_condition_expression("#shard = :shard")
            .expression_attribute_names("#shard", OUTBOX_SHARD)
            .expression_attribute_values(":shard", s(outbox_shard(shard)))
            .scan_index_forward(true);
        self.index_entries(query, CREATED_AT, limit).await
    }

    /// The outbox's events not dispatched: those of its oldest orders, read consistently, the
    /// oldest event first. An order the index still lists with nothing left to dispatch (a
    /// re-park, or a repeated incident, sets its shard again without a new status) is taken
    /// out of the outbox on the way.
    pub(crate) async fn undispatched_events(
        &self,
        limit: u32,
    ) -> Result<Vec<OrderEvent>, StoreError> {
        let limit = limit.max(1);
        let pks = self.outbox_orders(limit).await?;
        let items = self.get_items(&pks).await?;
        let mut events = Vec::new();
        let mut done = Vec::new();
        for pk in &pks {
            let Some(item) = items.get(pk) else { continue };
            if !item.contains_key(OUTBOX_SHARD) {
                continue;
            }
            let pending = events_of(item, true)?;
            if pending.is_empty()
                && let Some(n) = all_dispatched(item)?
            {
                done.push((pk.clone(), n));
            }
            events.extend(pending);
        }
        futures_util::future::try_join_all(
            done.into_iter()
                .map(|(pk, reached)| self.leave_outbox(pk, reached)),
        )
        .await?;
        events.sort_by(|a, b| {
            (a.at, &a.order_id, a.status.rank()).cmp(&(b.at, &b.order_id, b.status.rank()))
        });
        events.truncate(limit as usize);
        Ok(events)
    }

    /// Marks `event` dispatched; takes its order out of the outbox when nothing is left there.
    pub(crate) async fn mark_dispatched(&self, event: &OrderEvent) -> Result<(), StoreError> {
        let (order_id, status) = parse_event_key(&event.key)?;
        let update = format!("SET #{DISPATCHED}.#{} = :true", status.as_str());
        let condition = format!("attribute_exists(#{PARTITION_KEY})");
        let values = HashMap::from([(":true".to_owned(), AttributeValue::Bool(true))]);
        let pk = order_pk(&order_id);
        let item = match self
            .update(pk.clone(), &update, Some(&condition), values)
            .await?
        {
            Written::Done(item) => item,
            Written::Refused(_) => return Err(StoreError::NotFound(format!("order {order_id}"))),
        };
        if item.contains_key(OUTBOX_SHARD)
            && let Some(reached) = all_dispatched(&item)?
        {
            self.leave_outbox(pk, reached).await?;
        }
        Ok(())
    }

    /// Takes the order `pk` out of the outbox, unless it reached a status since it had
    /// `reached` (all dispatched): then it stays, for that one.
    async fn leave_outbox(&self, pk: String, reached: usize) -> Result<(), StoreError> {
        let values = HashMap::from([(":n".to_owned(), super::codec::n(reached as u64))]);
        // Refused: a status arrived meanwhile, and the order is in the outbox for it.
        self.update(
            pk,
            &format!("REMOVE #{OUTBOX_SHARD}"),
            Some(&format!("size(#{REACHED}) = :n")),
            values,
        )
        .await
        .map(drop)
    }

    /// Every status `order_id` reached, in order; none for an unknown order.
    pub(crate) async fn events_of_order(
        &self,
        order_id: &OrderId,
    ) -> Result<Vec<OrderEvent>, StoreError> {
        match self.get_item(order_pk(order_id)).await? {
            Some(item) => events_of(&item, false),
            None => Ok(Vec::new()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order_item(reached: &[(OrderStatus, &str)], dispatched: &[OrderStatus]) -> Item {
        let mut item = HashMap::from([
            (PARTITION_KEY.to_owned(), s("ORDER#o-1")),
            ("order_id".to_owned(), s("o-1")),
            ("owner".to_owned(), s("shop-1")),
        ]);
        item.insert(
            REACHED.to_owned(),
            AttributeValue::M(
                reached
                    .iter()
                    .map(|(st, at)| (st.as_str().to_owned(), s(*at)))
                    .collect(),
            ),
        );
        item.insert(
            DISPATCHED.to_owned(),
            AttributeValue::M(
                dispatched
                    .iter()
                    .map(|st| (st.as_str().to_owned(), AttributeValue::Bool(true)))
                    .collect(),
            ),
        );
        item
    }

    #[test]
    fn events_come_in_rank_order_and_dispatched_ones_leave_the_outbox_only() {
        let item = order_item(
            &[
                (OrderStatus::Completed, "2026-01-01T00:00:02.000000000Z"),
                (OrderStatus::Accepted, "2026-01-01T00:00:00.000000000Z"),
                (OrderStatus::Reserved, "2026-01-01T00:00:01.000000000Z"),
            ],
            &[OrderStatus::Reserved],
        );
        let statuses =
            |events: Vec<OrderEvent>| events.into_iter().map(|e| e.status).collect::<Vec<_>>();
        assert_eq!(
            statuses(events_of(&item, false).unwrap()),
            [
                OrderStatus::Accepted,
                OrderStatus::Reserved,
                OrderStatus::Completed
            ]
        );
        let pending = events_of(&item, true).unwrap();
        assert_eq!(pending[1].key, "o-1|COMPLETED");
        assert_eq!(pending[0].owner.as_deref(), Some("shop-1"));
        assert_eq!(
            statuses(pending),
            [OrderStatus::Accepted, OrderStatus::Completed]
        );
        assert_eq!(all_dispatched(&item).unwrap(), None);
    }

    #[test]
    fn an_order_from_before_the_outbox_has_no_events() {
        let mut item = order_item(&[], &[]);
        item.remove(REACHED);
        item.remove(DISPATCHED);
        assert!(events_of(&item, false).unwrap().is_empty());
        assert_eq!(all_dispatched(&item).unwrap(), Some(0));
    }

    #[test]
    fn an_event_key_reads_back_as_written() {
        let id = OrderId::parse("o-1_x").unwrap();
        let key = event_key(&id, OrderStatus::AwaitingApproval);
        assert_eq!(
            parse_event_key(&key).unwrap(),
            (id, OrderStatus::AwaitingApproval)
        );
        assert!(parse_event_key("o-1").is_err());
        assert!(parse_event_key("o-1|NOPE").is_err());
    }

    #[test]
    fn a_status_change_records_its_event_under_a_name_of_its_own() {
        let mut set = "SET #status = :to, #updated_at = :now".to_owned();
        let mut values = HashMap::from([(":now".to_owned(), s("t"))]);
        let id = OrderId::parse("o-1").unwrap();
        record_reached(&mut set, &mut values, OrderStatus::AwaitingApproval, &id);
        let names = super::super::codec::names(&[&set]);
        assert_eq!(names["#AWAITING_APPROVAL"], "AWAITING_APPROVAL");
        assert_eq!(names["#reached"], REACHED);
        assert_eq!(values[":outbox"], s(outbox_shard(shard_of("o-1"))));
    }
}
