//! The `history` table: an execution's events, appended a transition at a time (one row for
//! the events of one transition) and read back one event at a time, in pages either way.

use super::event_types::{event_type_named, event_type_of, stored_event_type};
use super::{Result, Store};
use crate::sfn::HistoryEvent;
use rusqlite::{OptionalExtension, params};
use std::fmt::Write as _;

/// A history row: id, previous event id, timestamp (ms), type, details (JSON).
pub type EventRow = (i64, i64, i64, String, Option<String>);

/// One event of a row of several (`Store::append_events`): `id`, previous id, time, type and
/// details (empty: none), tab-separated.
fn event_line(line: &str) -> Result<EventRow> {
    let bad = || {
        rusqlite::Error::FromSqlConversionFailure(
            4,
            rusqlite::types::Type::Text,
            format!("a history line that does not read: {line:.80}").into(),
        )
    };
    let mut fields = line.splitn(5, '\t');
    let mut number =
        || -> Result<i64> { fields.next().and_then(|f| f.parse().ok()).ok_or_else(bad) };
    let (id, prev, ts) = (number()?, number()?, number()?);
    let kind = event_type_named(fields.next().ok_or_else(bad)?.to_owned(), 3)?;
    let details = fields.next().ok_or_else(bad)?;
    Ok((
        id,
        prev,
        ts,
        kind,
        (!details.is_empty()).then(|| details.to_owned()),
    ))
}

impl Store {
    /// Appends events to the execution's history. An event's large `input` or `output` is
    /// stored once per execution and the event holds a reference in its place (`payloads.rs`):
    /// a state's output is the next state's input, and a task's input is often its state's, so
    /// each would otherwise be stored two or three times. [`Store::events`] puts them back.
    ///
    /// The events of one call (one transition: a task's result, its state's exit, the next
    /// state's entry and its task, ~4 events) are stored as one row: one insert and one packed
    /// value instead of one each, which was a quarter of the engine writer's time. The row's
    /// `details` holds a line per event (`id`, previous id, time, type and details, tab-separated:
    /// JSON text holds no raw tab or newline), read back by [`Store::events`].
    pub fn append_events(&self, exec_id: i64, events: &[HistoryEvent]) -> Result<()> {
        let (Some(first), Some(last)) = (events.first(), events.last()) else {
            return Ok(());
        };
        // The payloads this call has stored: the next state's input is the last one's output,
        // stored a line before, and needs no second trip to the database.
        let mut stored = Vec::new();
        let details = if events.len() == 1 {
            match &first.details {
                Some(d) => Some(self.share_payloads(exec_id, d, &mut stored)?),
                None => None,
            }
        } else {
            let mut lines = String::new();
            for e in events {
                let details = match &e.details {
                    Some(d) => self.share_payloads(exec_id, d, &mut stored)?,
                    None => String::new(),
                };
                // Writing to a String cannot fail.
                let _ = writeln!(
                    lines,
                    "{}\t{}\t{}\t{}\t{details}",
                    e.id,
                    e.previous_event_id,
                    e.timestamp.timestamp_millis(),
                    stored_event_type(&e.event_type),
                );
            }
            Some(lines)
        };
        self.conn
            .prepare_cached(
                "INSERT INTO history (exec_id, id, prev, ts_ms, type, details, last) \
                 VALUES (?, ?, ?, ?, ?, ?, ?)",
            )?
            .execute(params![
                exec_id,
                first.id as i64,
                first.previous_event_id as i64,
                first.timestamp.timestamp_millis(),
                stored_event_type(&first.event_type).as_ref(),
                details
                    .as_deref()
                    .map(|d| self.pack(d.as_bytes()))
                    .transpose()?,
                (events.len() > 1).then_some(last.id as i64),
            ])?;
        Ok(())
    }

    /// The id of the execution's last history event (0 before the first).
    pub fn last_event_id(&self, exec_id: i64) -> Result<u64> {
        let id: i64 = self
            .conn
            .prepare_cached(
                "SELECT COALESCE(last, id) FROM history WHERE exec_id = ? ORDER BY id DESC LIMIT 1",
            )?
            .query_row([exec_id], |r| r.get(0))
            .optional()?
            .unwrap_or(0);
        Ok(id as u64)
    }

    /// Events after (or, in reverse, before) `cursor`, at most `limit`.
    pub fn events(
        &self,
        exec_id: i64,
        cursor: Option<i64>,
        reverse: bool,
        limit: u32,
    ) -> Result<Vec<EventRow>> {
        const COLUMNS: &str = "id, prev, ts_ms, type, details, last";
        let mut events = Vec::new();
        if reverse {
            // Every row that starts before the cursor holds at least one event before it.
            let before = cursor.unwrap_or(i64::MAX);
            let rows = self.history_rows(
                &format!(
                    "SELECT {COLUMNS} FROM history WHERE exec_id = ? AND id < ? ORDER BY id DESC LIMIT ?"
                ),
                params![exec_id, before, limit],
            )?;
            for row in rows {
                events.extend(row.into_iter().rev().filter(|e| e.0 < before));
            }
        } else {
            let after = cursor.unwrap_or(0);
            // The row holding the event after the cursor may start at or before it.
            if after > 0 {
                let rows = self.history_rows(
                    &format!(
                        "SELECT {COLUMNS} FROM history WHERE exec_id = ? AND id <= ? ORDER BY id DESC LIMIT 1"
                    ),
                    params![exec_id, after],
                )?;
                events.extend(rows.into_iter().flatten().filter(|e| e.0 > after));
            }
            let rows = self.history_rows(
                &format!(
                    "SELECT {COLUMNS} FROM history WHERE exec_id = ? AND id > ? ORDER BY id LIMIT ?"
                ),
                params![exec_id, after, limit],
            )?;
            events.extend(rows.into_iter().flatten());
        }
        events.truncate(limit as usize);
        events
            .into_iter()
            .map(|(id, prev, ts, kind, details)| {
                let details = details
                    .map(|d| self.resolve_payloads(exec_id, d))
                    .transpose()?;
                Ok((id, prev, ts, kind, details))
            })
            .collect()
    }

    /// The events of the history rows a query selects (`events`' columns), each row's in order.
    fn history_rows(
        &self,
        sql: &str,
        params: &[&dyn rusqlite::ToSql],
    ) -> Result<Vec<Vec<EventRow>>> {
        let mut stmt = self.conn.prepare_cached(sql)?;
        let rows = stmt.query_map(params, |r| {
            let details = self.text(r, 4)?;
            match r.get::<_, Option<i64>>(5)? {
                None => Ok(vec![(
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    event_type_of(r, 3)?,
                    details,
                )]),
                Some(_) => details
                    .unwrap_or_default()
                    .lines()
                    .map(event_line)
                    .collect(),
            }
        })?;
        rows.collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::test_support::{event, payload_rows, stored_details};
    use crate::driver::SyncPolicy;
    use serde_json::Value;

    #[test]
    fn the_events_of_one_transition_share_a_row_and_page_as_single_events() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("e.db"), SyncPolicy::Normal, 0).unwrap();
        let big = "z".repeat(200);
        let all: Vec<HistoryEvent> = (1..=9)
            .map(|id| match id {
                4 => HistoryEvent {
                    details: None,
                    ..event(id, "ActivityStarted", Value::Null)
                },
                _ => event(
                    id,
                    if id % 2 == 0 { "TaskStateExited" } else { "NotAnAwsEventType" },
                    serde_json::json!({ "name": format!("S{id}"), "output": big, "tab": "a\tb\nc" }),
                ),
            })
            .collect();
        // Rows of 3, 1 and 5 events, as three transitions would append them.
        store.append_events(5, &all[..3]).unwrap();
        store.append_events(5, &all[3..4]).unwrap();
        store.append_events(5, &all[4..]).unwrap();
        let rows: i64 = store
            .conn
            .query_row("SELECT count(*) FROM history WHERE exec_id = 5", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(rows, 3);
        assert_eq!(
            payload_rows(&store),
            1,
            "the repeated payload is stored once"
        );
        let stored = stored_details(&store);
        assert!(stored.iter().all(|d| !d.contains("zzzz")), "{stored:?}");
        assert_eq!(store.last_event_id(5).unwrap(), 9);
        assert_eq!(store.last_event_id(6).unwrap(), 0);

        let whole = store.events(5, None, false, 100).unwrap();
        assert_eq!(whole.len(), 9);
        for (row, event) in whole.iter().zip(&all) {
            assert_eq!(row.0, event.id as i64);
            assert_eq!(row.1, event.previous_event_id as i64);
            assert_eq!(row.2, event.timestamp.timestamp_millis());
            assert_eq!(row.3, event.event_type);
            assert_eq!(
                row.4.as_deref(),
                event.details.as_ref().map(|d| d.to_string()).as_deref(),
                "exactly as written"
            );
        }
        let ids = |rows: Vec<EventRow>| rows.iter().map(|r| r.0).collect::<Vec<_>>();
        for cursor in 0..=10 {
            for limit in 1..=10u32 {
                let after: Vec<i64> = (cursor + 1..=9).take(limit as usize).collect();
                let forward = store.events(5, (cursor > 0).then_some(cursor), false, limit);
                assert_eq!(
                    ids(forward.unwrap()),
                    after,
                    "after {cursor}, {limit} a page"
                );
                let before: Vec<i64> = (1..cursor.min(10)).rev().take(limit as usize).collect();
                let backward = store.events(5, Some(cursor), true, limit);
                assert_eq!(
                    ids(backward.unwrap()),
                    before,
                    "before {cursor}, {limit} a page"
                );
            }
        }
        let newest = store.events(5, None, true, 2).unwrap();
        assert_eq!(ids(newest), [9, 8]);
    }
}
