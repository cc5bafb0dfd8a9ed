//! Listings of what was created since a moment, through the sparse index [`CREATED_INDEX`]:
//! every order, reservation and sandbox charge and refund carries [`CREATED_SHARD`], its kind's
//! prefix, the UTC day it was created and one of [`CREATED_SHARDS`] shards by a hash of its key
//! (`ORDER#2026-12-03#7`), with `created_at` as the range key. A listing since `t` queries each
//! shard of each day from `t`'s to tomorrow's (a replica's clock may run ahead), in that order,
//! for `created_at >= t`, then reads the items themselves, consistently. It reads what the
//! window holds, not the table: the repair loop's frequent passes (`ops/src/repair`).
//!
//! No day's partition takes every write of a busy day: 16 shards spread them, as the approvals'
//! queue does.

use super::DynamoStore;
use super::codec::{Fields, Item, s};
use super::error::sdk;
use super::table::{CREATED_INDEX, CREATED_SHARD, CREATED_SHARDS, PARTITION_KEY, shard_of};
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Days, NaiveDate, Utc};
use std::collections::HashMap;
use store::error::StoreError;

/// The [`CREATED_SHARD`] of an item of kind `prefix` with key `key`, created `at`.
pub(crate) fn created_shard(prefix: &str, key: &str, at: DateTime<Utc>) -> AttributeValue {
    s(partition(prefix, at.date_naive(), shard_of(key)))
}

fn partition(prefix: &str, day: NaiveDate, shard: u32) -> String {
    format!("{prefix}{day}#{shard}")
}

/// Where a listing stands: a day's shard, and in it after an entry (its `created_at` and `pk`),
/// or from its start.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Position {
    day: NaiveDate,
    shard: u32,
    after: Option<(String, String)>,
}

impl Position {
    /// `{day}|{shard}|{created_at}|{pk}`, the last two empty at a shard's start (a `pk` may
    /// hold `|`: it is the rest of the text).
    fn encode(&self) -> String {
        let (at, pk) = self.after.clone().unwrap_or_default();
        format!("{}|{}|{at}|{pk}", self.day, self.shard)
    }

    fn decode(cursor: &str) -> Result<Position, StoreError> {
        let bad = || StoreError::Internal(format!("not a cursor of this listing: {cursor}"));
        let mut parts = cursor.splitn(4, '|');
        let mut next = || parts.next().ok_or_else(bad);
        let day = next()?.parse::<NaiveDate>().map_err(|_| bad())?;
        let shard = next()?.parse::<u32>().map_err(|_| bad())?;
        let (at, pk) = (next()?, next()?);
        let after = (!at.is_empty()).then(|| (at.to_owned(), pk.to_owned()));
        Ok(Position { day, shard, after })
    }

    /// The next shard, or the next day's first.
    fn advance(&mut self) {
        self.after = None;
        self.shard += 1;
        if self.shard == CREATED_SHARDS {
            self.shard = 0;
            self.day = self
                .day
                .checked_add_days(Days::new(1))
                .unwrap_or(NaiveDate::MAX);
        }
    }
}

impl DynamoStore {
    /// A page of at most `limit` items of kind `prefix` created at or after `since`, each as
    /// it is now, and the cursor of the rest (`None` at the end). Items deleted since they were
    /// indexed are left out.
    pub(crate) async fn list_created(
        &self,
        prefix: &str,
        since: DateTime<Utc>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<(Vec<Item>, Option<String>), StoreError> {
        // One consistent batch read per page.
        let wanted = usize::try_from(limit.clamp(1, 100)).unwrap_or(100);
        let last_day = Utc::now()
            .date_naive()
            .checked_add_days(Days::new(1))
            .unwrap_or(NaiveDate::MAX);
        let mut at = match after {
            Some(cursor) => Position::decode(cursor)?,
            None => Position {
                day: since.date_naive(),
                shard: 0,
                after: None,
            },
        };
        let since = store::timestamp(since);
        let mut pks = Vec::new();
        while pks.len() < wanted && at.day <= last_day {
            let start = at.after.as_ref().map(|(created, pk)| {
                HashMap::from([
                    (PARTITION_KEY.to_owned(), s(pk)),
                    (
                        CREATED_SHARD.to_owned(),
                        s(partition(prefix, at.day, at.shard)),
                    ),
                    ("created_at".to_owned(), s(created)),
                ])
            });
            let page = self
                .client
                .query()
                .table_name(self.table())
                .index_name(CREATED_INDEX)
                .key_condition_expression(format!(
                    "#{CREATED_SHARD} = :shard AND #created_at >= :since"
                ))
                .expression_attribute_names(format!("#{CREATED_SHARD}"), CREATED_SHARD)
                .expression_attribute_names("#created_at", "created_at")
                .expression_attribute_values(":shard", s(partition(prefix, at.day, at.shard)))
                .expression_attribute_values(":since", s(&since))
                .limit(i32::try_from(wanted - pks.len()).unwrap_or(100))
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(sdk("Query"))?;
            for key in page.items() {
                pks.push(Fields::of(key).string(PARTITION_KEY)?);
            }
            match &page.last_evaluated_key {
                Some(last) => {
                    let f = Fields::of(last);
                    at.after = Some((f.string("created_at")?, f.string(PARTITION_KEY)?));
                }
                None => at.advance(),
            }
        }
        let now = self.get_items(&pks).await?;
        let items = pks.iter().filter_map(|pk| now.get(pk).cloned()).collect();
        let next = (at.day <= last_day).then(|| at.encode());
        Ok((items, next))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_position_reads_back_as_written_and_walks_the_shards_then_the_days() {
        let day = NaiveDate::from_ymd_opt(2026, 12, 31).unwrap();
        let mut at = Position {
            day,
            shard: CREATED_SHARDS - 1,
            after: Some((
                "2026-12-31T10:00:00.000000000Z".to_owned(),
                "SANDBOX#CHARGE#a|b".to_owned(),
            )),
        };
        assert_eq!(Position::decode(&at.encode()).unwrap(), at);
        at.advance();
        assert_eq!(
            at,
            Position {
                day: NaiveDate::from_ymd_opt(2027, 1, 1).unwrap(),
                shard: 0,
                after: None
            }
        );
        assert_eq!(Position::decode(&at.encode()).unwrap(), at);
        assert!(Position::decode("yesterday|1||").is_err());
        assert!(Position::decode("2026-12-31").is_err());
    }

    #[test]
    fn an_item_is_sharded_by_its_kind_day_and_key() {
        let at = DateTime::parse_from_rfc3339("2026-12-03T23:59:59Z")
            .unwrap()
            .with_timezone(&Utc);
        let AttributeValue::S(shard) = created_shard("ORDER#", "o-1", at) else {
            panic!("a string")
        };
        assert_eq!(shard, format!("ORDER#2026-12-03#{}", shard_of("o-1")));
    }
}
