//! The execution snapshot, a stored format: the [`ExecState`] of every RUNNING execution (and
//! the redrive point of every unsuccessful one), kept in the `executions.snapshot` column and
//! read back by later builds after a restart or an upgrade. Its encoding and decoding live here
//! and nowhere else.
//!
//! # The format
//!
//! UTF-8 JSON, serde's encoding of [`ExecState`] and what it holds ([`super::Frame`],
//! [`super::FrameWait`], `Children`, `ChildKind`, `Tolerance`, `ExecutionStatus`): fields by
//! their Rust names, enums externally tagged by variant name, frame ids as object keys. There is
//! no version marker: every snapshot written so far is version 1, which
//! `engine/tests/fixtures/snapshot-v1.json` pins (a test decodes it and runs it to its end). An
//! execution that ended FAILED, ABORTED or TIMED_OUT keeps its snapshot as its redrive point: the
//! same format, `frames` empty and `resume` holding where it stopped;
//! `engine/tests/fixtures/snapshot-v1-redrive-point.json` pins that (a test redrives it to its
//! end). The fields redrive added (`resume`, `redrive_count`, `redrive_time`) default to what
//! older snapshots meant and are not written while they hold that default. A snapshot also
//! points outside itself: timer ids and task tokens name rows of the `timers` and `tasks`
//! tables, and state names and machine paths name states of the stored definition.
//!
//! # Compatibility
//!
//! A change is compatible when every snapshot already stored still decodes to the same meaning:
//! adding a field with `#[serde(default)]` whose default is what older snapshots meant, adding
//! an enum variant (older snapshots never hold it), renaming a Rust type (serde writes field and
//! variant names, never type names). Unknown fields are ignored, so an older build drops the
//! fields a newer one added: going back a version is safe only when losing them changes nothing.
//!
//! Anything else is incompatible: renaming or removing a field or variant (unless
//! `#[serde(alias)]` keeps the old name readable), changing a field's type or unit, changing what
//! an id, a name or a path means, changing the encoding. Such a change needs a version marker
//! (its absence then meaning version 1), a decoder kept for version 1, and a new fixture; a
//! snapshot that still cannot be read fails its execution (`States.Runtime`) when the driver
//! next loads it, rather than leaving it RUNNING with nothing able to move it.

use super::ExecState;

/// A stored snapshot that does not decode as an [`ExecState`].
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SnapshotError(#[from] serde_json::Error);

/// The bytes to store for `state`.
pub fn encode(state: &ExecState) -> Vec<u8> {
    // Cannot fail: every map key is a string or an integer, and `Value` holds no NaN. Were it
    // to, the empty snapshot would fail its execution when next loaded, not the writer thread.
    serde_json::to_vec(state).unwrap_or_default()
}

/// The state stored as `bytes`.
pub fn decode(bytes: &[u8]) -> Result<ExecState, SnapshotError> {
    Ok(serde_json::from_slice(bytes)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_decodes_to_what_was_encoded() {
        let state = ExecState {
            last_event_id: 7,
            next_timer_id: 3,
            ..ExecState::default()
        };
        let decoded = decode(&encode(&state)).expect("decodes");
        assert_eq!(encode(&decoded), encode(&state));
        assert_eq!(decoded.last_event_id, 7);
    }

    #[test]
    fn torn_or_foreign_bytes_are_an_error_not_a_default_state() {
        let bytes = encode(&ExecState::default());
        assert!(decode(&bytes[..bytes.len() / 2]).is_err());
        assert!(decode(b"").is_err());
        assert!(decode(b"{\"frames\": 1}").is_err());
    }
}
