//! The EasyPost gateway's label records (`easypost::book`) as `LABEL#{order}` items. A step is
//! a consistent read, the shared rule, and a write conditional on the version read (or on the
//! item's absence); a write refused because another step came first is tried again on the new
//! record, so racing steps of one order apply one after the other, as in SQLite.

use super::codec::{Fields, Item, json, n};
use super::table::{PARTITION_KEY, prefix};
use super::{DynamoStore, Written};
use async_trait::async_trait;
use std::collections::HashMap;
use store::domain::OrderId;
use store::error::StoreError;
use store::labels::{LabelBook, LabelRecord, LabelStep};

fn label_pk(id: &OrderId) -> String {
    format!("{}{id}", prefix::LABEL)
}

/// How often a step is tried on a record that other steps keep changing.
const ATTEMPTS: u32 = 16;

/// The record and its version (`None`: no item yet).
fn decode(item: Option<&Item>) -> Result<(LabelRecord, Option<u64>), StoreError> {
    let Some(item) = item else {
        return Ok((LabelRecord::default(), None));
    };
    let f = Fields::of(item);
    let record = serde_json::from_str(f.s("record")?).map_err(|e| {
        StoreError::Internal(format!(
            "DynamoDB item {}: bad record: {e}",
            label_pk_of(item)
        ))
    })?;
    Ok((record, Some(f.n("version")?)))
}

fn label_pk_of(item: &Item) -> String {
    Fields::of(item)
        .string(PARTITION_KEY)
        .unwrap_or_else(|_| "?".to_owned())
}

#[async_trait]
impl LabelBook for DynamoStore {
    async fn label_record(&self, order_id: &OrderId) -> Result<LabelRecord, StoreError> {
        let item = self.get_item(label_pk(order_id)).await?;
        Ok(decode(item.as_ref())?.0)
    }

    async fn record_label_step(
        &self,
        order_id: &OrderId,
        step: &LabelStep,
    ) -> Result<LabelRecord, StoreError> {
        let pk = label_pk(order_id);
        for _ in 0..ATTEMPTS {
            let item = self.get_item(pk.clone()).await?;
            let (before, version) = decode(item.as_ref())?;
            let after = before.after(step);
            if after == before {
                return Ok(before);
            }
            let mut values = HashMap::from([
                (":record".to_owned(), json(&after)?),
                (":next".to_owned(), n(version.map_or(1, |v| v + 1))),
            ]);
            let condition = match version {
                Some(v) => {
                    values.insert(":version".to_owned(), n(v));
                    "#version = :version".to_owned()
                }
                None => format!("attribute_not_exists(#{PARTITION_KEY})"),
            };
            let update = "SET #record = :record, #version = :next";
            match self
                .update(pk.clone(), update, Some(&condition), values)
                .await?
            {
                Written::Done(_) => return Ok(after),
                // Another step came first: apply this one to what it left.
                Written::Refused(_) => continue,
            }
        }
        Err(StoreError::Unavailable(format!(
            "the label record of order {order_id} kept changing under {ATTEMPTS} attempts"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::super::codec::s;
    use super::*;

    #[test]
    fn an_absent_item_is_the_default_record() {
        assert_eq!(decode(None).unwrap(), (LabelRecord::default(), None));
        let item = HashMap::from([
            (PARTITION_KEY.to_owned(), s("LABEL#o1")),
            (
                "record".to_owned(),
                s(r#"{"shipmentId":"shp_1","label":null,"voidedAt":null,"labelRefund":null}"#),
            ),
            ("version".to_owned(), n(3)),
        ]);
        let (record, version) = decode(Some(&item)).unwrap();
        assert_eq!(record.shipment_id.as_deref(), Some("shp_1"));
        assert_eq!(version, Some(3));
    }
}
