//! `WebhookRepository` on SQLite. The outbox is `order_events`, filled by the triggers of
//! the schema (`schema.rs`) in the very transaction that changes an order's status; `dispatched` marks the
//! events fanned out into `webhook_deliveries` (in one transaction with them).

use super::{SqliteStore, get_json, get_opt_ts, get_ts, parse_ts, savepoint, to_json, ts};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, Row, params};
use store::domain::{OrderId, OrderStatus};
use store::error::StoreError;
use store::ports::{Page, WebhookRepository};
use store::webhook::*;

const SELECT_ENDPOINT: &str = "SELECT endpoint_id, owner, url, event_types, secrets, created_at, \
    disabled, failing_since FROM webhook_endpoints";

const SELECT_DELIVERY: &str = "SELECT message_id, endpoint_id, order_id, event_type, payload, \
    created_at, state, next_attempt_at, attempts FROM webhook_deliveries";

const SELECT_EVENT: &str = "SELECT seq, order_id, owner, status, at FROM order_events";

fn endpoint_from_row(r: &Row) -> rusqlite::Result<WebhookEndpoint> {
    Ok(WebhookEndpoint {
        id: r.get(0)?,
        owner: r.get(1)?,
        url: r.get(2)?,
        event_types: get_json(r, 3)?,
        secrets: get_json(r, 4)?,
        created_at: get_ts(r, 5)?,
        disabled: r
            .get::<_, Option<String>>(6)?
            .map(|d| serde_json::from_str(&d).map_err(|e| super::bad_column(6, e)))
            .transpose()?,
        failing_since: get_opt_ts(r, 7)?,
    })
}

fn delivery_from_row(r: &Row) -> rusqlite::Result<Delivery> {
    let event_type: String = r.get(3)?;
    let state: String = r.get(6)?;
    Ok(Delivery {
        message_id: r.get(0)?,
        endpoint_id: r.get(1)?,
        order_id: OrderId::parse(&r.get::<_, String>(2)?).map_err(|e| super::bad_column(2, e))?,
        event_type: EventType::parse(&event_type)
            .ok_or_else(|| super::bad_column(3, format!("unknown event {event_type}")))?,
        payload: r.get(4)?,
        created_at: get_ts(r, 5)?,
        state: DeliveryState::parse(&state)
            .ok_or_else(|| super::bad_column(6, format!("unknown state {state}")))?,
        next_attempt_at: get_opt_ts(r, 7)?,
        attempts: get_json(r, 8)?,
    })
}

fn event_from_row(r: &Row) -> rusqlite::Result<OrderEvent> {
    let status: String = r.get(3)?;
    Ok(OrderEvent {
        key: r.get::<_, i64>(0)?.to_string(),
        order_id: OrderId::parse(&r.get::<_, String>(1)?).map_err(|e| super::bad_column(1, e))?,
        owner: r.get(2)?,
        status: OrderStatus::parse(&status)
            .ok_or_else(|| super::bad_column(3, format!("unknown status {status}")))?,
        at: get_ts(r, 4)?,
    })
}

/// A delivery's columns, in `SELECT_DELIVERY`'s order.
fn delivery_values(d: &Delivery) -> Result<[rusqlite::types::Value; 9], StoreError> {
    use rusqlite::types::Value::{Null, Text};
    Ok([
        Text(d.message_id.clone()),
        Text(d.endpoint_id.clone()),
        Text(d.order_id.to_string()),
        Text(d.event_type.as_str().to_owned()),
        Text(d.payload.clone()),
        Text(ts(d.created_at)),
        Text(d.state.as_str().to_owned()),
        d.next_attempt_at.map_or(Null, |t| Text(ts(t))),
        Text(to_json(&d.attempts)?),
    ])
}

/// An outbox event's sequence number and the rows of its deliveries, ready to write.
type DispatchedRow = (i64, Vec<[rusqlite::types::Value; 9]>);

fn outbox_row(event: &OrderEvent, deliveries: &[Delivery]) -> Result<DispatchedRow, StoreError> {
    let seq: i64 = event
        .key
        .parse()
        .map_err(|_| StoreError::Internal(format!("not an outbox key: {}", event.key)))?;
    let rows = deliveries
        .iter()
        .map(delivery_values)
        .collect::<Result<Vec<_>, _>>()?;
    Ok((seq, rows))
}

/// Stores each event's deliveries (one already stored is kept) and takes the events out of the
/// outbox, in one savepoint.
fn write_dispatched(
    tx: &mut rusqlite::Transaction<'_>,
    events: Vec<DispatchedRow>,
) -> Result<(), StoreError> {
    let sp = savepoint(tx)?;
    {
        let mut insert = sp.prepare_cached(
            "INSERT OR IGNORE INTO webhook_deliveries (message_id, endpoint_id, \
             order_id, event_type, payload, created_at, state, next_attempt_at, \
             attempts) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )?;
        let mut taken =
            sp.prepare_cached("UPDATE order_events SET dispatched = 1 WHERE seq = ?1")?;
        for (seq, rows) in events {
            for row in rows {
                insert.execute(rusqlite::params_from_iter(row))?;
            }
            taken.execute([seq])?;
        }
    }
    sp.commit()?;
    Ok(())
}

#[async_trait]
impl WebhookRepository for SqliteStore {
    async fn put_endpoint(&self, endpoint: &WebhookEndpoint) -> Result<(), StoreError> {
        let e = endpoint.clone();
        self.write(move |tx| {
            let sp = savepoint(tx)?;
            let disabled = e.disabled.as_ref().map(to_json).transpose()?;
            sp.execute(
                "INSERT OR REPLACE INTO webhook_endpoints (endpoint_id, owner, url, event_types, \
                 secrets, created_at, disabled, failing_since) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    e.id,
                    e.owner,
                    e.url,
                    to_json(&e.event_types)?,
                    to_json(&e.secrets)?,
                    ts(e.created_at),
                    disabled,
                    e.failing_since.map(ts),
                ],
            )?;
            sp.commit()?;
            Ok(())
        })
        .await
    }

    async fn endpoint(&self, id: &str) -> Result<Option<WebhookEndpoint>, StoreError> {
        let id = id.to_owned();
        self.read(move |conn| {
            Ok(conn
                .prepare_cached(&format!("{SELECT_ENDPOINT} WHERE endpoint_id = ?1"))?
                .query_row([id], endpoint_from_row)
                .optional()?)
        })
        .await
    }

    async fn endpoints_of(&self, owner: &str) -> Result<Vec<WebhookEndpoint>, StoreError> {
        let owner = owner.to_owned();
        self.read(move |conn| {
            Ok(conn
                .prepare_cached(&format!(
                    "{SELECT_ENDPOINT} WHERE owner = ?1 ORDER BY created_at, endpoint_id"
                ))?
                .query_map([owner], endpoint_from_row)?
                .collect::<rusqlite::Result<_>>()?)
        })
        .await
    }

    async fn delete_endpoint(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_owned();
        self.write(move |tx| {
            let sp = savepoint(tx)?;
            let n = sp.execute("DELETE FROM webhook_endpoints WHERE endpoint_id = ?1", [id])?;
            sp.commit()?;
            Ok(n > 0)
        })
        .await
    }

    async fn undispatched(&self, limit: u32) -> Result<Vec<OrderEvent>, StoreError> {
        self.scan(move |conn| {
            Ok(conn
                .prepare_cached(&format!(
                    "{SELECT_EVENT} WHERE dispatched = 0 ORDER BY seq LIMIT ?1"
                ))?
                .query_map([limit], event_from_row)?
                .collect::<rusqlite::Result<_>>()?)
        })
        .await
    }

    async fn dispatch(
        &self,
        event: &OrderEvent,
        deliveries: &[Delivery],
    ) -> Result<(), StoreError> {
        let one = vec![outbox_row(event, deliveries)?];
        self.write(move |tx| write_dispatched(tx, one)).await
    }

    async fn dispatch_all(&self, batch: &[(OrderEvent, Vec<Delivery>)]) -> Result<(), StoreError> {
        if batch.is_empty() {
            return Ok(());
        }
        let rows = batch
            .iter()
            .map(|(event, deliveries)| outbox_row(event, deliveries))
            .collect::<Result<Vec<_>, _>>()?;
        self.write(move |tx| write_dispatched(tx, rows)).await
    }

    async fn order_events(&self, order_id: &OrderId) -> Result<Vec<OrderEvent>, StoreError> {
        let id = order_id.to_string();
        self.read(move |conn| {
            Ok(conn
                .prepare_cached(&format!("{SELECT_EVENT} WHERE order_id = ?1 ORDER BY seq"))?
                .query_map([id], event_from_row)?
                .collect::<rusqlite::Result<_>>()?)
        })
        .await
    }

    async fn due_deliveries(
        &self,
        now: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<Delivery>, StoreError> {
        self.scan(move |conn| {
            Ok(conn
                .prepare_cached(&format!(
                    "{SELECT_DELIVERY} WHERE state = 'PENDING' AND next_attempt_at <= ?1 \
                     ORDER BY next_attempt_at LIMIT ?2"
                ))?
                .query_map(params![ts(now), limit], delivery_from_row)?
                .collect::<rusqlite::Result<_>>()?)
        })
        .await
    }

    async fn save_delivery(&self, delivery: &Delivery) -> Result<(), StoreError> {
        let row = delivery_values(delivery)?;
        self.write(move |tx| {
            let sp = savepoint(tx)?;
            sp.execute(
                "INSERT OR REPLACE INTO webhook_deliveries (message_id, endpoint_id, order_id, \
                 event_type, payload, created_at, state, next_attempt_at, attempts) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                rusqlite::params_from_iter(row),
            )?;
            sp.commit()?;
            Ok(())
        })
        .await
    }

    async fn deliveries(
        &self,
        endpoint_id: &str,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<Delivery>, StoreError> {
        let endpoint = endpoint_id.to_owned();
        // The cursor: the last delivery's `created_at` and message id.
        let after = match after {
            None => None,
            Some(a) => {
                let bad = || StoreError::Internal(format!("not a cursor of this listing: {a}"));
                let (at, id) = a.split_once('|').ok_or_else(bad)?;
                parse_ts(0, at).map_err(|_| bad())?;
                Some((at.to_owned(), id.to_owned()))
            }
        };
        let limit = limit.max(1);
        self.scan(move |conn| {
            let items = match after {
                None => conn
                    .prepare_cached(&format!(
                        "{SELECT_DELIVERY} WHERE endpoint_id = ?1 \
                         ORDER BY created_at DESC, message_id DESC LIMIT ?2"
                    ))?
                    .query_map(params![endpoint, limit], delivery_from_row)?
                    .collect::<rusqlite::Result<Vec<_>>>()?,
                Some((at, id)) => conn
                    .prepare_cached(&format!(
                        "{SELECT_DELIVERY} WHERE endpoint_id = ?1 \
                         AND (created_at, message_id) < (?2, ?3) \
                         ORDER BY created_at DESC, message_id DESC LIMIT ?4"
                    ))?
                    .query_map(params![endpoint, at, id, limit], delivery_from_row)?
                    .collect::<rusqlite::Result<Vec<_>>>()?,
            };
            Ok(Page::keyed(items, limit, |d| {
                format!("{}|{}", ts(d.created_at), d.message_id)
            }))
        })
        .await
    }

    async fn replay(
        &self,
        endpoint_id: &str,
        since: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<u32, StoreError> {
        let endpoint = endpoint_id.to_owned();
        self.write(move |tx| {
            let sp = savepoint(tx)?;
            let n = sp.execute(
                "UPDATE webhook_deliveries SET state = 'PENDING', next_attempt_at = ?3 \
                 WHERE endpoint_id = ?1 AND created_at >= ?2 AND state = 'FAILED'",
                params![endpoint, ts(since), ts(now)],
            )?;
            sp.commit()?;
            Ok(u32::try_from(n).unwrap_or(u32::MAX))
        })
        .await
    }

    async fn prune(&self, before: DateTime<Utc>, limit: u32) -> Result<u32, StoreError> {
        self.write(move |tx| {
            let sp = savepoint(tx)?;
            // The oldest rows (by the order they were written), those of them done and old
            // enough: a bounded read whatever the table's size.
            let events = sp.execute(
                "DELETE FROM order_events WHERE seq IN (SELECT seq FROM order_events \
                 ORDER BY seq LIMIT ?2) AND dispatched = 1 AND at < ?1",
                params![ts(before), limit],
            )?;
            let deliveries = sp.execute(
                "DELETE FROM webhook_deliveries WHERE rowid IN (SELECT rowid FROM \
                 webhook_deliveries ORDER BY rowid LIMIT ?2) AND state <> 'PENDING' \
                 AND created_at < ?1",
                params![ts(before), limit],
            )?;
            sp.commit()?;
            Ok(u32::try_from(events + deliveries).unwrap_or(u32::MAX))
        })
        .await
    }
}
