//! Conversions between domain values and DynamoDB attributes: counts as numbers, timestamps as
//! fixed-width RFC 3339 text with nanoseconds (exact, and sorting as text sorts by time, which
//! the pending-approvals index relies on), nested records (items, address, lines) as JSON text
//! read and written whole, as in SQLite. Also the helpers every request uses: item keys and
//! expression attribute names.

use super::table::PARTITION_KEY;
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::HashMap;
use store::error::StoreError;

pub(crate) type Item = HashMap<String, AttributeValue>;

pub(crate) fn s(v: impl Into<String>) -> AttributeValue {
    AttributeValue::S(v.into())
}

pub(crate) fn n(v: u64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

pub(crate) fn ts(at: DateTime<Utc>) -> AttributeValue {
    s(store::timestamp(at))
}

pub(crate) fn json<T: Serialize + ?Sized>(v: &T) -> Result<AttributeValue, StoreError> {
    serde_json::to_string(v)
        .map(s)
        .map_err(|e| StoreError::Internal(format!("cannot encode: {e}")))
}

/// The key of the item `pk`.
pub(crate) fn key(pk: String) -> Item {
    HashMap::from([(PARTITION_KEY.to_owned(), s(pk))])
}

/// Expression attribute names for every `#name` in `expressions`, each standing for the
/// attribute `name`. Every attribute is named through one, so none can clash with DynamoDB's
/// reserved words (`status`, `count`, …), and none is declared that no expression uses (which
/// DynamoDB refuses).
pub(crate) fn names(expressions: &[&str]) -> HashMap<String, String> {
    let mut names = HashMap::new();
    for expression in expressions {
        let mut rest = *expression;
        while let Some(at) = rest.find('#') {
            rest = &rest[at + 1..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            names.insert(format!("#{}", &rest[..end]), rest[..end].to_owned());
            rest = &rest[end..];
        }
    }
    names
}

/// The attributes of one stored item, read with errors that name the item and the attribute:
/// an item that does not decode holds something this build never wrote.
pub(crate) struct Fields<'a> {
    item: &'a Item,
}

impl<'a> Fields<'a> {
    pub(crate) fn of(item: &'a Item) -> Fields<'a> {
        Fields { item }
    }

    fn bad(&self, name: &str, what: impl std::fmt::Display) -> StoreError {
        let pk = self.item.get(PARTITION_KEY).and_then(|v| v.as_s().ok());
        StoreError::Internal(format!(
            "DynamoDB item {}: attribute {name} {what}",
            pk.map_or("?", String::as_str)
        ))
    }

    pub(crate) fn has(&self, name: &str) -> bool {
        self.item.contains_key(name)
    }

    pub(crate) fn opt_s(&self, name: &str) -> Result<Option<&'a str>, StoreError> {
        match self.item.get(name) {
            None | Some(AttributeValue::Null(_)) => Ok(None),
            Some(AttributeValue::S(v)) => Ok(Some(v)),
            Some(_) => Err(self.bad(name, "is not a string")),
        }
    }

    pub(crate) fn s(&self, name: &str) -> Result<&'a str, StoreError> {
        self.opt_s(name)?
            .ok_or_else(|| self.bad(name, "is missing"))
    }

    pub(crate) fn string(&self, name: &str) -> Result<String, StoreError> {
        self.s(name).map(str::to_owned)
    }

    pub(crate) fn opt_string(&self, name: &str) -> Result<Option<String>, StoreError> {
        Ok(self.opt_s(name)?.map(str::to_owned))
    }

    pub(crate) fn n(&self, name: &str) -> Result<u64, StoreError> {
        match self.item.get(name) {
            Some(AttributeValue::N(v)) => v
                .parse()
                .map_err(|_| self.bad(name, format!("{v} is not a count"))),
            Some(_) => Err(self.bad(name, "is not a number")),
            None => Err(self.bad(name, "is missing")),
        }
    }

    pub(crate) fn opt_n(&self, name: &str) -> Result<Option<u64>, StoreError> {
        match self.item.get(name) {
            None | Some(AttributeValue::Null(_)) => Ok(None),
            Some(_) => self.n(name).map(Some),
        }
    }

    pub(crate) fn bool(&self, name: &str) -> Result<bool, StoreError> {
        match self.item.get(name) {
            None => Ok(false),
            Some(AttributeValue::Bool(v)) => Ok(*v),
            Some(_) => Err(self.bad(name, "is not a boolean")),
        }
    }

    pub(crate) fn opt_ts(&self, name: &str) -> Result<Option<DateTime<Utc>>, StoreError> {
        self.opt_s(name)?
            .map(|v| {
                DateTime::parse_from_rfc3339(v)
                    .map(|t| t.with_timezone(&Utc))
                    .map_err(|e| self.bad(name, e))
            })
            .transpose()
    }

    pub(crate) fn ts(&self, name: &str) -> Result<DateTime<Utc>, StoreError> {
        self.opt_ts(name)?
            .ok_or_else(|| self.bad(name, "is missing"))
    }

    pub(crate) fn json<T: DeserializeOwned>(&self, name: &str) -> Result<T, StoreError> {
        serde_json::from_str(self.s(name)?).map_err(|e| self.bad(name, e))
    }

    pub(crate) fn opt_json<T: DeserializeOwned>(
        &self,
        name: &str,
    ) -> Result<Option<T>, StoreError> {
        self.opt_s(name)?
            .map(|text| serde_json::from_str(text).map_err(|e| self.bad(name, e)))
            .transpose()
    }

    pub(crate) fn order_id(&self, name: &str) -> Result<store::domain::OrderId, StoreError> {
        store::domain::OrderId::parse(self.s(name)?).map_err(|e| self.bad(name, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn names_cover_each_placeholder_once() {
        let found = names(&["#status IN (:a, :b) AND #a_1 <> :x", "SET #status = :s"]);
        assert_eq!(
            found,
            HashMap::from([
                ("#status".to_owned(), "status".to_owned()),
                ("#a_1".to_owned(), "a_1".to_owned()),
            ])
        );
    }

    #[test]
    fn timestamps_round_trip_exactly_and_sort_as_text() {
        let early = Utc.timestamp_opt(1_700_000_000, 5).unwrap();
        let late = Utc.timestamp_opt(1_700_000_000, 100_000_000).unwrap();
        let item = HashMap::from([("a".to_owned(), ts(early)), ("b".to_owned(), ts(late))]);
        let fields = Fields::of(&item);
        assert_eq!(fields.ts("a").unwrap(), early);
        assert!(fields.s("a").unwrap() < fields.s("b").unwrap());
    }

    #[test]
    fn a_foreign_attribute_is_an_internal_error_naming_it() {
        let item = HashMap::from([
            (PARTITION_KEY.to_owned(), s("ORDER#o1")),
            ("amount_cents".to_owned(), s("12")),
        ]);
        let err = Fields::of(&item).n("amount_cents").unwrap_err();
        assert!(
            matches!(err, StoreError::Internal(ref m) if m.contains("ORDER#o1") && m.contains("amount_cents")),
            "{err:?}"
        );
    }
}
