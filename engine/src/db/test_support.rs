//! What the history and payload tests share: events to append, and the rows they leave.

use super::{Result, Store};
use crate::sfn::HistoryEvent;
use serde_json::Value;

pub(super) fn event(id: u64, kind: &str, details: Value) -> HistoryEvent {
    HistoryEvent {
        id,
        previous_event_id: id.saturating_sub(1),
        timestamp: chrono::Utc::now(),
        event_type: kind.to_owned(),
        details: Some(details),
    }
}

pub(super) fn stored_details(store: &Store) -> Vec<String> {
    let mut stmt = store
        .conn
        .prepare("SELECT details FROM history WHERE details IS NOT NULL ORDER BY exec_id, id")
        .unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_>>()
        .unwrap()
}

pub(super) fn payload_rows(store: &Store) -> i64 {
    store
        .conn
        .query_row("SELECT count(*) FROM payloads", [], |r| r.get(0))
        .unwrap()
}
