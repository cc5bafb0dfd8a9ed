//! The engine's stored JSON — history details, shared payloads, snapshots, execution inputs
//! and outputs — compressed with a zstd dictionary trained on this database's own values.
//!
//! These values are small (a history event's details are ~100 bytes) and alike from one
//! execution to the next (the same keys, state names, resource ARNs), which plain compression
//! cannot use and a dictionary can: about a quarter of the bytes stay. The writer samples the
//! first values it stores, trains a dictionary from them on a thread of its own (the writer
//! never waits for it), stores it in `dictionaries` in the same transaction as the first value
//! it packs, and packs from then on. A value stored before, or one that would not shrink,
//! stays plain text, so every row is read the same way: [`unpack`] takes either.
//!
//! A packed value is a BLOB: [`MARK`] (no JSON text begins with it), the dictionary's id
//! (`u16`, little-endian), then one zstd frame that records its size. A dictionary is never
//! deleted: every value it packed needs it.

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, OptionalExtension, params};
use std::collections::HashMap;
use std::io;
use std::sync::mpsc;

const MARK: u8 = 0;
/// zstd's level: 1. On the saga's history values (~84 bytes each) with the trained dictionary it
/// packs as well as its default, 3 (36 % of the bytes stay with either), and costs the writer less.
const LEVEL: i32 = 1;
/// The dictionary's size at most (a larger one gained nothing on the saga's values).
const DICTIONARY_BYTES: usize = 16 * 1024;
/// A value larger than this is not a sample (it would crowd out the typical small ones).
const SAMPLE_MAX: usize = 16 * 1024;
/// The largest value [`unpack`] inflates (the engine's own limit on a payload is 256 KiB).
const UNPACKED_MAX: usize = 64 * 1024 * 1024;

/// What a write stores: the text as it was (as TEXT, or as a BLOB in a BLOB column), or its
/// packed bytes.
pub(super) enum Packed<'a> {
    Plain(&'a [u8]),
    PlainBlob(&'a [u8]),
    Blob(Vec<u8>),
}

impl Packed<'_> {
    /// For a BLOB column (the snapshot): a plain value is stored as a BLOB, as it always was.
    pub fn into_blob(self) -> Self {
        match self {
            Packed::Plain(b) => Packed::PlainBlob(b),
            other => other,
        }
    }
}

impl rusqlite::ToSql for Packed<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Packed::Plain(b) => ToSqlOutput::Borrowed(ValueRef::Text(b)),
            Packed::PlainBlob(b) => ToSqlOutput::Borrowed(ValueRef::Blob(b)),
            Packed::Blob(b) => ToSqlOutput::Borrowed(ValueRef::Blob(b)),
        })
    }
}

/// Where the writer is with its dictionary.
enum Learning {
    /// Packing is off (a reader's codec, or the configuration says never).
    Off,
    /// Sampling the values stored, until `want` bytes.
    Sampling {
        want: usize,
        data: Vec<u8>,
        sizes: Vec<usize>,
    },
    /// A thread trains the dictionary; its answer comes here.
    Training(mpsc::Receiver<io::Result<Vec<u8>>>),
    /// Packing with dictionary `id`.
    Packing {
        id: u16,
        compressor: zstd::bulk::Compressor<'static>,
    },
}

pub(super) struct Codec {
    learning: Learning,
    decoders: HashMap<u16, zstd::bulk::Decompressor<'static>>,
    /// A dictionary stored by the open transaction: were it rolled back, nothing may be
    /// packed with it (its row is gone); it is stored again with the next value.
    uncommitted: Option<Vec<u8>>,
}

fn sql_error(e: impl std::error::Error + Send + Sync + 'static) -> rusqlite::Error {
    rusqlite::Error::ToSqlConversionFailure(Box::new(e))
}

fn compressor(dictionary: &[u8]) -> io::Result<zstd::bulk::Compressor<'static>> {
    let mut c = zstd::bulk::Compressor::with_dictionary(LEVEL, dictionary)?;
    // The dictionary's id is ours (after MARK); the frame's 4 bytes for it would be waste,
    // as would a checksum over values SQLite already keeps intact.
    c.include_dictid(false)?;
    c.include_checksum(false)?;
    c.include_contentsize(true)?;
    Ok(c)
}

impl Codec {
    /// A codec that only reads.
    pub fn reader() -> Codec {
        Codec {
            learning: Learning::Off,
            decoders: HashMap::new(),
            uncommitted: None,
        }
    }

    /// The writer's codec: packing with the newest stored dictionary, else sampling
    /// `sample_bytes` of values to train one (`0`: never packing).
    pub fn writer(conn: &Connection, sample_bytes: usize) -> rusqlite::Result<Codec> {
        let newest: Option<(u16, Vec<u8>)> = conn
            .query_row(
                "SELECT id, body FROM dictionaries ORDER BY id DESC LIMIT 1",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        let learning = match newest {
            Some((id, body)) => Learning::Packing {
                id,
                compressor: compressor(&body).map_err(sql_error)?,
            },
            None if sample_bytes == 0 => Learning::Off,
            None => Learning::Sampling {
                want: sample_bytes,
                data: Vec::with_capacity(sample_bytes + SAMPLE_MAX),
                sizes: Vec::new(),
            },
        };
        Ok(Codec {
            learning,
            decoders: HashMap::new(),
            uncommitted: None,
        })
    }

    /// The writer's transaction committed: a dictionary it stored is there for good.
    pub fn committed(&mut self) {
        self.uncommitted = None;
    }

    /// The writer's transaction rolled back: a dictionary it stored is gone, and so is every
    /// value packed with it; it is offered again as if just trained.
    pub fn rolled_back(&mut self) {
        if let Some(dictionary) = self.uncommitted.take() {
            let (tx, rx) = mpsc::channel();
            let _ = tx.send(Ok(dictionary));
            self.learning = Learning::Training(rx);
        }
    }

    /// `text` as it is to be stored. Called inside the writer's transactions: a dictionary
    /// that has just been trained is stored here, in the transaction of the first value it
    /// packs.
    pub fn pack<'a>(&mut self, conn: &Connection, text: &'a [u8]) -> rusqlite::Result<Packed<'a>> {
        match &mut self.learning {
            Learning::Off => {}
            Learning::Sampling { want, data, sizes } => {
                if text.len() <= SAMPLE_MAX {
                    data.extend_from_slice(text);
                    sizes.push(text.len());
                }
                if data.len() >= *want {
                    let (data, sizes) = (std::mem::take(data), std::mem::take(sizes));
                    let (tx, rx) = mpsc::channel();
                    std::thread::Builder::new()
                        .name("engine-dictionary".to_owned())
                        .spawn(move || {
                            let _ = tx.send(zstd::dict::from_continuous(
                                &data,
                                &sizes,
                                DICTIONARY_BYTES,
                            ));
                        })
                        .map_err(sql_error)?;
                    self.learning = Learning::Training(rx);
                }
            }
            Learning::Training(rx) => match rx.try_recv() {
                Err(mpsc::TryRecvError::Empty) => {}
                Ok(Ok(dictionary)) => {
                    conn.prepare_cached(
                        "INSERT INTO dictionaries (body, created_ms) VALUES (?, ?)",
                    )?
                    .execute(params![dictionary, chrono::Utc::now().timestamp_millis()])?;
                    let id = u16::try_from(conn.last_insert_rowid()).map_err(sql_error)?;
                    self.uncommitted = Some(dictionary.clone());
                    tracing::info!(
                        id,
                        bytes = dictionary.len(),
                        "engine: compression dictionary trained"
                    );
                    self.learning = Learning::Packing {
                        id,
                        compressor: compressor(&dictionary).map_err(sql_error)?,
                    };
                    return self.pack(conn, text);
                }
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "engine: no compression dictionary; values stay plain");
                    self.learning = Learning::Off;
                }
                Err(mpsc::TryRecvError::Disconnected) => self.learning = Learning::Off,
            },
            Learning::Packing { id, compressor } => {
                let frame = compressor.compress(text).map_err(sql_error)?;
                if frame.len() + 3 < text.len() {
                    let mut out = Vec::with_capacity(frame.len() + 3);
                    out.push(MARK);
                    out.extend_from_slice(&id.to_le_bytes());
                    out.extend_from_slice(&frame);
                    return Ok(Packed::Blob(out));
                }
            }
        }
        Ok(Packed::Plain(text))
    }

    /// The text of a stored value, packed or not (`NULL` is `None`). A packed value that cannot
    /// be unpacked (a torn write, its dictionary's row gone) is logged and given back as
    /// stored: not JSON, so it fails where a corrupt text value would (a snapshot's decoding
    /// fails its execution visibly, an input reads as `null`), and no other execution is held
    /// up by it. Errors are the database's own (a busy file), to retry.
    pub fn unpack(
        &mut self,
        conn: &Connection,
        value: ValueRef<'_>,
    ) -> rusqlite::Result<Option<Vec<u8>>> {
        let bytes = match value {
            ValueRef::Null => return Ok(None),
            ValueRef::Text(b) => return Ok(Some(b.to_vec())),
            ValueRef::Blob(b) => b,
            other => {
                return Err(rusqlite::Error::FromSqlConversionFailure(
                    0,
                    other.data_type(),
                    "an engine value is text or packed text".into(),
                ));
            }
        };
        if bytes.first() != Some(&MARK) {
            return Ok(Some(bytes.to_vec()));
        }
        match self.inflate(conn, bytes)? {
            Ok(text) => Ok(Some(text)),
            Err(why) => {
                tracing::error!(
                    why,
                    bytes = bytes.len(),
                    "engine: a packed value cannot be unpacked"
                );
                Ok(Some(bytes.to_vec()))
            }
        }
    }

    /// A packed value's text, or why it cannot be had from what is stored.
    fn inflate(
        &mut self,
        conn: &Connection,
        bytes: &[u8],
    ) -> rusqlite::Result<Result<Vec<u8>, String>> {
        let Some(id) = bytes.get(1..3) else {
            return Ok(Err("shorter than its header".to_owned()));
        };
        let id = u16::from_le_bytes([id[0], id[1]]);
        let decoder = match self.decoders.entry(id) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                let body: Option<Vec<u8>> = conn
                    .prepare_cached("SELECT body FROM dictionaries WHERE id = ?")?
                    .query_row([id], |r| r.get(0))
                    .optional()?;
                let Some(body) = body else {
                    return Ok(Err(format!("dictionary {id} is not in the file")));
                };
                match zstd::bulk::Decompressor::with_dictionary(&body) {
                    Ok(d) => e.insert(d),
                    Err(err) => return Ok(Err(format!("dictionary {id}: {err}"))),
                }
            }
        };
        Ok(decoder
            .decompress(&bytes[3..], UNPACKED_MAX)
            .map_err(|e| e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connection() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE dictionaries (id INTEGER PRIMARY KEY, body BLOB NOT NULL, created_ms INTEGER NOT NULL);",
        )
        .unwrap();
        conn
    }

    fn value(i: usize) -> String {
        format!(
            r#"{{"name":"ChargePayment","input":{{"orderId":"order-{i:06}","amountCents":{},"currency":"EUR"}}}}"#,
            1500 + i * 7
        )
    }

    /// Packs values in a transaction until one comes out packed (the dictionary trains on a
    /// thread): that value's index.
    fn pack_until_packed(codec: &mut Codec, conn: &Connection, from: usize) -> usize {
        for i in from..from + 100_000 {
            let text = value(i);
            if let Packed::Blob(_) = codec.pack(conn, text.as_bytes()).unwrap() {
                return i;
            }
            if i % 64 == 0 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        panic!("no dictionary was trained");
    }

    #[test]
    fn a_dictionary_stored_by_a_rolled_back_transaction_is_stored_again_before_it_packs() {
        let conn = connection();
        let mut codec = Codec::writer(&conn, 8 * 1024).unwrap();

        conn.execute_batch("BEGIN").unwrap();
        let first = pack_until_packed(&mut codec, &conn, 0);
        conn.execute_batch("ROLLBACK").unwrap();
        codec.rolled_back();
        let count = |conn: &Connection| -> i64 {
            conn.query_row("SELECT count(*) FROM dictionaries", [], |r| r.get(0))
                .unwrap()
        };
        assert_eq!(count(&conn), 0, "the rollback took the dictionary's row");

        conn.execute_batch("BEGIN").unwrap();
        let text = value(first + 1);
        let Packed::Blob(bytes) = codec.pack(&conn, text.as_bytes()).unwrap() else {
            panic!("the dictionary is offered again at once");
        };
        conn.execute_batch("COMMIT").unwrap();
        codec.committed();
        assert_eq!(count(&conn), 1);

        // Any connection reads it back, through the stored dictionary.
        let mut reader = Codec::reader();
        let back = reader
            .unpack(&conn, ValueRef::Blob(&bytes))
            .unwrap()
            .unwrap();
        assert_eq!(back, text.as_bytes());
        assert!(
            bytes.len() * 2 < text.len(),
            "{} of {}",
            bytes.len(),
            text.len()
        );
    }

    #[test]
    fn plain_text_and_plain_blobs_read_back_as_they_were() {
        let conn = connection();
        let mut reader = Codec::reader();
        let plain = br#"{"a":1}"#;
        assert_eq!(
            reader
                .unpack(&conn, ValueRef::Text(plain))
                .unwrap()
                .unwrap(),
            plain
        );
        assert_eq!(
            reader
                .unpack(&conn, ValueRef::Blob(plain))
                .unwrap()
                .unwrap(),
            plain
        );
        assert_eq!(reader.unpack(&conn, ValueRef::Null).unwrap(), None);
        for broken in [&[MARK, 9][..], &[MARK, 1, 0, 0x28, 0xb5][..]] {
            assert_eq!(
                reader
                    .unpack(&conn, ValueRef::Blob(broken))
                    .unwrap()
                    .unwrap(),
                broken,
                "a packed value that cannot be unpacked reads as stored: not JSON, so it fails \
                 where corrupt text would"
            );
        }
    }
}
