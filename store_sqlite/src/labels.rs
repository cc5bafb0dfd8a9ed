//! The EasyPost gateway's label records (`easypost::book`) in the `carrier_labels` table: a
//! step is read, applied and written in one savepoint of the single writer, so racing steps of
//! one order apply one after the other.

use super::{SqliteStore, get_json, now, savepoint, to_json};
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};
use store::domain::OrderId;
use store::error::StoreError;
use store::labels::{LabelBook, LabelRecord, LabelStep};

fn record(conn: &Connection, id: &OrderId) -> Result<LabelRecord, StoreError> {
    Ok(conn
        .prepare_cached("SELECT record FROM carrier_labels WHERE order_id = ?1")?
        .query_row([id.as_str()], |r| get_json(r, 0))
        .optional()?
        .unwrap_or_default())
}

#[async_trait]
impl LabelBook for SqliteStore {
    async fn label_record(&self, order_id: &OrderId) -> Result<LabelRecord, StoreError> {
        let id = order_id.clone();
        self.read(move |conn| record(conn, &id)).await
    }

    async fn record_label_step(
        &self,
        order_id: &OrderId,
        step: &LabelStep,
    ) -> Result<LabelRecord, StoreError> {
        let (id, step) = (order_id.clone(), step.clone());
        self.write(move |conn| {
            let tx = savepoint(conn)?;
            let before = record(&tx, &id)?;
            let after = before.after(&step);
            if after != before {
                tx.prepare_cached(
                    "INSERT INTO carrier_labels (order_id, record, updated_at) \
                     VALUES (?1, ?2, ?3) ON CONFLICT (order_id) \
                     DO UPDATE SET record = excluded.record, updated_at = excluded.updated_at",
                )?
                .execute(params![id.as_str(), to_json(&after)?, now()])?;
                tx.commit()?;
            }
            Ok(after)
        })
        .await
    }
}
