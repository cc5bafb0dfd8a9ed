//! The `payloads` table: the large payloads of a history (an event's `input` or `output`), each
//! stored once per execution and referenced from its events by key, since a state's output is
//! the next state's input and a task's input is often its state's. An event's details hold
//! `{"$payload": key}` in the payload's place; reading puts the payload back.

use super::{Result, Store};
use crate::core::history::untruncated;
use rusqlite::{OptionalExtension, params};
use serde_json::Value;

/// The fields of an event's details that hold payloads, and the size from which one is stored
/// apart.
const SHARED_FIELDS: [&str; 2] = ["input", "output"];
const SHARED_PAYLOAD_MIN: usize = 64;
/// The key of a payload's reference in an event's stored details: `{"$payload": key}`, with
/// `"$bare": true` when the event had no `…Details` beside the payload.
const PAYLOAD_REF: &str = "$payload";
const BARE: &str = "$bare";

/// A payload's key: the first 8 bytes of its SHA-256 (stable across builds, so a payload stored
/// by one is found again by the next).
fn payload_key(text: &str) -> i64 {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(text.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_le_bytes(first)
}

impl Store {
    /// The details' text with each large payload stored apart and referenced. A referenced
    /// payload's `…Details` (`{"truncated": false}`, on every payload the engine writes) is
    /// left out too and put back on reading; a payload without one says so (`$bare`).
    /// `stored`: the payloads stored so far by the same append, with their keys.
    pub(super) fn share_payloads<'a>(
        &self,
        exec_id: i64,
        details: &'a Value,
        stored: &mut Vec<(&'a str, i64)>,
    ) -> Result<String> {
        let Value::Object(map) = details else {
            return Ok(details.to_string());
        };
        let mut shared: Option<serde_json::Map<String, Value>> = None;
        for field in SHARED_FIELDS {
            let Some(Value::String(text)) = map.get(field) else {
                continue;
            };
            if text.len() < SHARED_PAYLOAD_MIN {
                continue;
            }
            let key = match stored.iter().find(|(t, _)| *t == text.as_str()) {
                Some((_, key)) => *key,
                None => {
                    let Some(key) = self.put_payload(exec_id, text)? else {
                        continue;
                    };
                    stored.push((text.as_str(), key));
                    key
                }
            };
            let out = shared.get_or_insert_with(|| map.clone());
            let mut reference = serde_json::Map::new();
            reference.insert(PAYLOAD_REF.to_owned(), key.into());
            let details_key = format!("{field}Details");
            match map.get(&details_key) {
                Some(d) if *d == untruncated() => {
                    out.shift_remove(&details_key);
                }
                Some(_) => {}
                None => {
                    reference.insert(BARE.to_owned(), Value::Bool(true));
                }
            }
            out.insert(field.to_owned(), Value::Object(reference));
        }
        Ok(match shared {
            Some(m) => Value::Object(m).to_string(),
            None => details.to_string(),
        })
    }

    /// Stores `text` once for the execution: its key, or `None` in the (vanishingly rare)
    /// case that another payload of the execution has the same key (it then stays inline).
    fn put_payload(&self, exec_id: i64, text: &str) -> Result<Option<i64>> {
        let key = payload_key(text);
        let inserted = self
            .conn
            .prepare_cached(
                "INSERT INTO payloads (exec_id, key, body) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            )?
            .execute(params![exec_id, key, self.pack(text.as_bytes())?])?;
        if inserted == 1 {
            return Ok(Some(key));
        }
        let stored = self
            .conn
            .prepare_cached("SELECT body FROM payloads WHERE exec_id = ? AND key = ?")?
            .query_row(params![exec_id, key], |r| self.text(r, 0))?;
        Ok((stored.as_deref() == Some(text)).then_some(key))
    }

    /// The details' text with every referenced payload (and its `…Details`) put back where
    /// it was.
    pub(super) fn resolve_payloads(&self, exec_id: i64, details: String) -> Result<String> {
        if !details.contains(PAYLOAD_REF) {
            return Ok(details);
        }
        let Ok(Value::Object(map)) = serde_json::from_str::<Value>(&details) else {
            return Ok(details);
        };
        let mut out = serde_json::Map::with_capacity(map.len() + 2);
        for (name, value) in map {
            let reference = SHARED_FIELDS
                .contains(&name.as_str())
                .then(|| value.get(PAYLOAD_REF).and_then(Value::as_i64))
                .flatten();
            let Some(key) = reference else {
                out.insert(name, value);
                continue;
            };
            let body: Option<String> = self
                .conn
                .prepare_cached("SELECT body FROM payloads WHERE exec_id = ? AND key = ?")?
                .query_row(params![exec_id, key], |r| self.text(r, 0))
                .optional()?
                .flatten();
            let bare = value.get(BARE).is_some();
            out.insert(name.clone(), body.map_or(value, Value::String));
            if !bare {
                out.entry(format!("{name}Details"))
                    .or_insert_with(untruncated);
            }
        }
        Ok(Value::Object(out).to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::test_support::{event, payload_rows, stored_details};
    use crate::driver::SyncPolicy;

    #[test]
    fn a_payload_repeated_in_a_history_is_stored_once_and_read_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("e.db"), SyncPolicy::Normal, 0).unwrap();
        let state = serde_json::json!({ "order": "o-1", "lines": "x".repeat(200) }).to_string();
        let events = [
            event(
                1,
                "TaskStateEntered",
                serde_json::json!({ "name": "A", "input": state, "inputDetails": untruncated() }),
            ),
            event(
                2,
                "TaskStateExited",
                serde_json::json!({ "name": "A", "output": state, "outputDetails": untruncated() }),
            ),
            event(
                3,
                "PassStateEntered",
                serde_json::json!({ "name": "B", "input": state }),
            ),
            // Small payloads stay where they are.
            event(
                4,
                "PassStateExited",
                serde_json::json!({ "name": "B", "output": "{}" }),
            ),
        ];
        // One transition each: a row each.
        for e in &events {
            store.append_events(7, std::slice::from_ref(e)).unwrap();
        }
        assert_eq!(payload_rows(&store), 1, "one copy of the repeated payload");
        let stored = stored_details(&store);
        assert!(
            stored[..3].iter().all(|d| !d.contains("xxxx")),
            "{stored:?}"
        );
        assert!(stored[3].contains("\"output\":\"{}\""), "{}", stored[3]);
        let read = store.events(7, None, false, 100).unwrap();
        for (row, event) in read.iter().zip(&events) {
            // Exactly as written, keys in their order.
            assert_eq!(
                row.4.as_deref(),
                event.details.as_ref().map(|d| d.to_string()).as_deref()
            );
        }
        // Another execution's identical payload is its own (pruned with it).
        store.append_events(8, &events[..1]).unwrap();
        assert_eq!(payload_rows(&store), 2);
    }

    #[test]
    fn a_payload_whose_key_another_payload_holds_stays_inline() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("e.db"), SyncPolicy::Normal, 0).unwrap();
        let text = "y".repeat(100);
        // A different body under the key `text` will have: as a collision would leave it.
        store
            .conn
            .execute(
                "INSERT INTO payloads (exec_id, key, body) VALUES (3, ?, 'other')",
                [payload_key(&text)],
            )
            .unwrap();
        let events = [event(
            1,
            "PassStateEntered",
            serde_json::json!({ "name": "A", "input": text }),
        )];
        store.append_events(3, &events).unwrap();
        let stored = stored_details(&store);
        assert!(stored[0].contains(&text), "kept inline: {}", stored[0]);
        let read = store.events(3, None, false, 10).unwrap();
        let details: Value = serde_json::from_str(read[0].4.as_deref().unwrap()).unwrap();
        assert_eq!(Some(&details), events[0].details.as_ref());
    }
}
