//! Orders newest first, through the indexes [`NEWEST_INDEX`] (every order) and [`OWNER_INDEX`]
//! (one client's): each splits its orders into shards by a hash of the order id, each shard in
//! creation order. A page queries every shard backwards from the listing's position at once and
//! merges them: down to the newest place where a shard stopped reading, every shard's entries
//! are known, so the merge is exact there, and the position moves to it.
//!
//! Positions are [`QueueCursor`]s of (`created_at`, order id), compared as a pair: two orders
//! created in the same nanosecond are still in one order.

use super::DynamoStore;
use super::codec::{Fields, Item, s};
use super::error::sdk;
use super::table::{
    CREATED_AT, CREATED_SHARDS, LIST_SHARD, NEWEST_INDEX, OWNER_INDEX, OWNER_SHARD, OWNER_SHARDS,
    PARTITION_KEY, list_shard, owner_shard, prefix,
};
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use store::domain::OrderId;
use store::error::StoreError;
use store::ports::QueueCursor;

/// One shard of one of the two indexes: its name, hash key attribute and value.
struct Shard {
    index: &'static str,
    attribute: &'static str,
    value: String,
}

/// The shards a listing of `owner`'s orders (or, `None`, of every order) reads.
fn shards(owner: Option<&str>) -> Vec<Shard> {
    match owner {
        Some(owner) => (0..OWNER_SHARDS)
            .map(|k| Shard {
                index: OWNER_INDEX,
                attribute: OWNER_SHARD,
                value: owner_shard(owner, k),
            })
            .collect(),
        None => (0..CREATED_SHARDS)
            .map(|k| Shard {
                index: NEWEST_INDEX,
                attribute: LIST_SHARD,
                value: list_shard(k),
            })
            .collect(),
    }
}

/// The position of an index entry (its keys).
fn position(key: &Item) -> Result<QueueCursor, StoreError> {
    let f = Fields::of(key);
    let pk = f.string(PARTITION_KEY)?;
    let id = pk.strip_prefix(prefix::ORDER).unwrap_or(&pk);
    Ok(QueueCursor {
        at: f.string(CREATED_AT)?,
        order_id: OrderId::parse(id).map_err(StoreError::Internal)?,
    })
}

impl DynamoStore {
    /// The positions of the orders next below `start` (all, without one), newest first, down
    /// to `since` (inclusive): at most `limit`, and the position the next page starts below
    /// (`None`: no order is left).
    pub(crate) async fn newest_positions(
        &self,
        owner: Option<&str>,
        start: Option<&QueueCursor>,
        since: Option<DateTime<Utc>>,
        limit: u32,
    ) -> Result<(Vec<QueueCursor>, Option<QueueCursor>), StoreError> {
        let limit = limit.clamp(1, 100);
        let since = since.map(store::timestamp);
        // An empty window (DynamoDB refuses a BETWEEN whose bounds are reversed).
        if let (Some(start), Some(since)) = (start, &since)
            && *since > start.at
        {
            return Ok((Vec::new(), None));
        }
        let pages = futures_util::future::try_join_all(
            shards(owner)
                .iter()
                .map(|shard| self.shard_page(shard, start, since.as_deref(), limit)),
        )
        .await?;
        // Below the newest place a shard stopped, that shard's entries are not yet read.
        let horizon = pages.iter().filter_map(|(_, more)| more.clone()).max();
        let mut entries: Vec<QueueCursor> = pages
            .into_iter()
            .flat_map(|(entries, _)| entries)
            .filter(|at| horizon.as_ref().is_none_or(|h| at >= h))
            .collect();
        entries.sort_by(|a, b| b.cmp(a));
        let next = if entries.len() > limit as usize {
            entries.truncate(limit as usize);
            entries.last().cloned()
        } else {
            horizon
        };
        Ok((entries, next))
    }

    /// One shard's next entries below `start`, newest first, and the last one read when the
    /// shard holds more.
    async fn shard_page(
        &self,
        shard: &Shard,
        start: Option<&QueueCursor>,
        since: Option<&str>,
        limit: u32,
    ) -> Result<(Vec<QueueCursor>, Option<QueueCursor>), StoreError> {
        let mut from = None;
        loop {
            let range = match (start, since) {
                (Some(_), Some(_)) => " AND #at BETWEEN :since AND :start",
                (Some(_), None) => " AND #at <= :start",
                (None, Some(_)) => " AND #at >= :since",
                (None, None) => "",
            };
            let mut names = HashMap::from([("#shard".to_owned(), shard.attribute.to_owned())]);
            let mut values = HashMap::from([(":shard".to_owned(), s(&shard.value))]);
            if !range.is_empty() {
                names.insert("#at".to_owned(), CREATED_AT.to_owned());
            }
            if let Some(start) = start {
                values.insert(":start".to_owned(), s(&start.at));
            }
            if let Some(since) = since {
                values.insert(":since".to_owned(), s(since));
            }
            let page = self
                .client
                .query()
                .table_name(self.table())
                .index_name(shard.index)
                .key_condition_expression(format!("#shard = :shard{range}"))
                .set_expression_attribute_names(Some(names))
                .set_expression_attribute_values(Some(values))
                .scan_index_forward(false)
                .limit(i32::try_from(limit).unwrap_or(100))
                .set_exclusive_start_key(from.take())
                .send()
                .await
                .map_err(sdk("Query"))?;
            let mut entries = Vec::new();
            for key in page.items() {
                let at = position(key)?;
                // The key condition includes the start's own time: keep what is below it.
                if start.is_none_or(|s| &at < s) {
                    entries.push(at);
                }
            }
            let more = page.last_evaluated_key.as_ref().map(position).transpose()?;
            // A whole page at the start's time, none below it: read on.
            if entries.is_empty() && more.is_some() {
                from = page.last_evaluated_key;
                continue;
            }
            return Ok((entries, more));
        }
    }
}
