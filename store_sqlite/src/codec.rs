//! Conversions between domain values and SQLite columns: timestamps as fixed-width RFC 3339
//! text (readable in the `sqlite3` shell, and sorting as text sorts by time), unsigned counts as
//! checked `INTEGER`s, nested records as JSON text.

use chrono::{DateTime, Utc};
use rusqlite::types::Type;
use serde::Serialize;
use serde::de::DeserializeOwned;
use store::error::StoreError;

/// A timestamp column value. Nanosecond precision with `Z` keeps every value the same width, so
/// `ORDER BY` on the text is chronological and a stored time reads back exactly.
pub(crate) fn ts(at: DateTime<Utc>) -> String {
    store::timestamp(at)
}

pub(crate) fn now() -> String {
    ts(Utc::now())
}

/// A column value that does not decode: reported as a conversion failure of that column, which
/// the store maps to `StoreError::Internal` (the file holds something this build never wrote).
pub(crate) fn bad_column(
    idx: usize,
    err: impl Into<Box<dyn std::error::Error + Send + Sync>>,
) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(idx, Type::Text, err.into())
}

pub(crate) fn parse_ts(idx: usize, s: &str) -> rusqlite::Result<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| bad_column(idx, e))
}

pub(crate) fn get_ts(r: &rusqlite::Row, idx: usize) -> rusqlite::Result<DateTime<Utc>> {
    parse_ts(idx, &r.get::<_, String>(idx)?)
}

pub(crate) fn get_opt_ts(r: &rusqlite::Row, idx: usize) -> rusqlite::Result<Option<DateTime<Utc>>> {
    r.get::<_, Option<String>>(idx)?
        .map(|s| parse_ts(idx, &s))
        .transpose()
}

/// SQLite integers are signed; a `u64` beyond `i64::MAX` is refused rather than wrapped.
pub(crate) fn to_sql_u64(v: u64, what: &str) -> Result<i64, StoreError> {
    i64::try_from(v).map_err(|_| StoreError::Internal(format!("{what} {v} is too large to store")))
}

pub(crate) fn get_u64(r: &rusqlite::Row, idx: usize) -> rusqlite::Result<u64> {
    let v: i64 = r.get(idx)?;
    u64::try_from(v).map_err(|e| bad_column(idx, e))
}

pub(crate) fn to_json<T: Serialize + ?Sized>(v: &T) -> Result<String, StoreError> {
    serde_json::to_string(v).map_err(|e| StoreError::Internal(format!("cannot encode: {e}")))
}

pub(crate) fn get_json<T: DeserializeOwned>(r: &rusqlite::Row, idx: usize) -> rusqlite::Result<T> {
    let s: String = r.get(idx)?;
    serde_json::from_str(&s).map_err(|e| bad_column(idx, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn timestamps_round_trip_exactly_and_sort_as_text() {
        let early = Utc.timestamp_opt(1_700_000_000, 5).unwrap();
        let late = Utc.timestamp_opt(1_700_000_000, 100_000_000).unwrap();
        assert_eq!(parse_ts(0, &ts(early)).unwrap(), early);
        assert_eq!(ts(early).len(), ts(late).len());
        assert!(ts(early) < ts(late));
    }

    #[test]
    fn counts_beyond_i64_are_refused() {
        assert!(to_sql_u64(u64::MAX, "amount").is_err());
        assert_eq!(to_sql_u64(7, "amount").unwrap(), 7);
    }
}
