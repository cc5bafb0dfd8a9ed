//! The listings' one rule (orders, reservations, the sandbox's charges and refunds): every row
//! in the order of its key, or, `since` given, the rows created at or after it, in the order of
//! (`created_at`, key), read through an index on the two (`orders_by_created` and its kin in `schema.rs`). Keyset pagination
//! either way: the cursor is the last row's key, or its `created_at` and key, so a page never
//! skips or repeats a row that stood still.

use super::{parse_ts, ts};
use chrono::{DateTime, Utc};
use rusqlite::{Connection, Row, params};
use store::error::StoreError;
use store::ports::Page;

/// Which rows of a table a listing reads, and how a row names itself in a cursor.
pub(crate) struct Listing<'a> {
    /// `SELECT … FROM table`, without a `WHERE`.
    pub select: &'a str,
    /// The unique key column the rows are in order of (within one `created_at`).
    pub key: &'a str,
}

impl Listing<'_> {
    /// One page of at most `limit` rows after the cursor `after` (see the module docs);
    /// `cursor` gives a row's key and creation time.
    pub(crate) fn page<T>(
        &self,
        conn: &Connection,
        since: Option<DateTime<Utc>>,
        after: Option<&str>,
        limit: u32,
        from_row: impl FnMut(&Row) -> rusqlite::Result<T>,
        cursor: impl Fn(&T) -> (DateTime<Utc>, String),
    ) -> Result<Page<T>, StoreError> {
        let (select, key) = (self.select, self.key);
        let limit = limit.max(1);
        let Some(since) = since else {
            let mut stmt = conn.prepare_cached(&format!(
                "{select} WHERE {key} > ?1 ORDER BY {key} LIMIT ?2"
            ))?;
            let rows = stmt.query_map(
                params![after.unwrap_or_default(), i64::from(limit)],
                from_row,
            )?;
            let items = rows.collect::<Result<Vec<_>, _>>()?;
            return Ok(Page::keyed(items, limit, |item| cursor(item).1));
        };
        // Every key is longer than "": (since, "") comes before every row created at `since`.
        let (from, after_key) = match after {
            None => (ts(since), String::new()),
            Some(after) => {
                let bad = || StoreError::Internal(format!("not a cursor of this listing: {after}"));
                let (at, key) = after.split_once(' ').ok_or_else(bad)?;
                let at = parse_ts(0, at).map_err(|_| bad())?;
                (ts(at.max(since)), key.to_owned())
            }
        };
        let mut stmt = conn.prepare_cached(&format!(
            "{select} WHERE (created_at, {key}) > (?1, ?2) ORDER BY created_at, {key} LIMIT ?3"
        ))?;
        let rows = stmt.query_map(params![from, after_key, i64::from(limit)], from_row)?;
        let items = rows.collect::<Result<Vec<_>, _>>()?;
        Ok(Page::keyed(items, limit, |item| {
            let (at, key) = cursor(item);
            format!("{} {key}", ts(at))
        }))
    }
}
