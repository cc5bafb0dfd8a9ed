//! `KeyRepository` on SQLite: a principal row per name (its role for life) and a row per key,
//! holding the key's hash, never the key; and the operators' console sessions, a row each, by
//! the hash of the session's secret.

use super::{SqliteStore, get_opt_ts, get_ts, savepoint, ts};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, params};
use store::domain::*;
use store::error::StoreError;
use store::ports::{Issued, KeyRepository};

const SELECT_KEY: &str = "SELECT k.key_id, k.principal, p.role, k.key_hash, k.created_at, \
    k.last_used_at, k.revoked_at FROM api_keys k JOIN principals p ON p.name = k.principal";

fn key_from(r: &rusqlite::Row) -> rusqlite::Result<ApiKey> {
    let role: String = r.get(2)?;
    Ok(ApiKey {
        key_id: r.get(0)?,
        principal: r.get(1)?,
        role: Role::parse(&role)
            .ok_or_else(|| super::bad_column(2, format!("unknown role {role}")))?,
        key_hash: r.get(3)?,
        created_at: get_ts(r, 4)?,
        last_used_at: get_opt_ts(r, 5)?,
        revoked_at: get_opt_ts(r, 6)?,
    })
}

const SELECT_SESSION: &str = "SELECT session_hash, key_hash, principal, created_at, expires_at \
    FROM console_sessions";

fn session_from(r: &rusqlite::Row) -> rusqlite::Result<ConsoleSession> {
    Ok(ConsoleSession {
        session_hash: r.get(0)?,
        key_hash: r.get(1)?,
        principal: r.get(2)?,
        created_at: get_ts(r, 3)?,
        expires_at: get_ts(r, 4)?,
    })
}

/// How many expired sessions one opening deletes at most: each opening purges far more than it
/// adds, so a backlog goes quickly, and no opening holds the writer long.
const PURGE_BATCH: u32 = 100;

fn load(conn: &rusqlite::Connection, key_id: &str) -> Result<Option<ApiKey>, StoreError> {
    Ok(conn
        .prepare_cached(&format!("{SELECT_KEY} WHERE k.key_id = ?1"))?
        .query_row([key_id], key_from)
        .optional()?)
}

#[async_trait]
impl KeyRepository for SqliteStore {
    async fn issue(&self, key: &ApiKey) -> Result<Issued, StoreError> {
        let key = key.clone();
        self.write(move |conn| {
            let tx = savepoint(conn)?;
            tx.prepare_cached(
                "INSERT INTO principals (name, role, created_at) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (name) DO NOTHING",
            )?
            .execute(params![
                key.principal,
                key.role.as_str(),
                ts(key.created_at)
            ])?;
            let role: String = tx
                .prepare_cached("SELECT role FROM principals WHERE name = ?1")?
                .query_row([&key.principal], |r| r.get(0))?;
            if role != key.role.as_str() {
                let existing = Role::parse(&role)
                    .ok_or_else(|| StoreError::Internal(format!("unknown role {role}")))?;
                return Ok(Issued::RoleMismatch { existing });
            }
            tx.prepare_cached(
                "INSERT INTO api_keys (key_id, principal, key_hash, created_at) \
                 VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![
                key.key_id,
                key.principal,
                key.key_hash,
                ts(key.created_at)
            ])?;
            let stored = load(&tx, &key.key_id)?
                .ok_or_else(|| StoreError::Internal("the key just stored is missing".into()))?;
            tx.commit()?;
            Ok(Issued::Issued(stored))
        })
        .await
    }

    async fn key_by_hash(&self, key_hash: &str) -> Result<Option<ApiKey>, StoreError> {
        let key_hash = key_hash.to_owned();
        self.read(move |conn| {
            Ok(conn
                .prepare_cached(&format!("{SELECT_KEY} WHERE k.key_hash = ?1"))?
                .query_row([key_hash], key_from)
                .optional()?)
        })
        .await
    }

    async fn list_keys(&self) -> Result<Vec<ApiKey>, StoreError> {
        self.scan(|conn| {
            let mut stmt =
                conn.prepare_cached(&format!("{SELECT_KEY} ORDER BY k.created_at, k.key_id"))?;
            let keys = stmt.query_map([], key_from)?;
            Ok(keys.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    async fn revoke(&self, key_id: &str, at: DateTime<Utc>) -> Result<Option<ApiKey>, StoreError> {
        let key_id = key_id.to_owned();
        self.write(move |conn| {
            let tx = savepoint(conn)?;
            tx.prepare_cached(
                "UPDATE api_keys SET revoked_at = ?2 WHERE key_id = ?1 AND revoked_at IS NULL",
            )?
            .execute(params![key_id, ts(at)])?;
            let key = load(&tx, &key_id)?;
            tx.commit()?;
            Ok(key)
        })
        .await
    }

    async fn touch(&self, key_id: &str, at: DateTime<Utc>) -> Result<(), StoreError> {
        let key_id = key_id.to_owned();
        self.write(move |conn| {
            let tx = savepoint(conn)?;
            tx.prepare_cached(
                "UPDATE api_keys SET last_used_at = ?2 WHERE key_id = ?1 \
                 AND (last_used_at IS NULL OR last_used_at < ?2)",
            )?
            .execute(params![key_id, ts(at)])?;
            tx.commit()?;
            Ok(())
        })
        .await
    }

    /// Also deletes up to [`PURGE_BATCH`] sessions whose `expires_at` has passed, in the same
    /// write (through `console_sessions_by_expiry`): sessions are few, and this keeps them so
    /// without a housekeeping job.
    async fn open_session(&self, session: &ConsoleSession) -> Result<(), StoreError> {
        let session = session.clone();
        self.write(move |conn| {
            let tx = savepoint(conn)?;
            tx.prepare_cached(
                "DELETE FROM console_sessions WHERE session_hash IN \
                 (SELECT session_hash FROM console_sessions WHERE expires_at < ?1 LIMIT ?2)",
            )?
            .execute(params![ts(Utc::now()), PURGE_BATCH])?;
            tx.prepare_cached(
                "INSERT INTO console_sessions \
                 (session_hash, key_hash, principal, created_at, expires_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5) \
                 ON CONFLICT (session_hash) DO UPDATE SET key_hash = excluded.key_hash, \
                 principal = excluded.principal, created_at = excluded.created_at, \
                 expires_at = excluded.expires_at",
            )?
            .execute(params![
                session.session_hash,
                session.key_hash,
                session.principal,
                ts(session.created_at),
                ts(session.expires_at)
            ])?;
            tx.commit()?;
            Ok(())
        })
        .await
    }

    async fn session(&self, session_hash: &str) -> Result<Option<ConsoleSession>, StoreError> {
        let session_hash = session_hash.to_owned();
        self.read(move |conn| {
            Ok(conn
                .prepare_cached(&format!("{SELECT_SESSION} WHERE session_hash = ?1"))?
                .query_row([session_hash], session_from)
                .optional()?)
        })
        .await
    }

    async fn close_session(&self, session_hash: &str) -> Result<(), StoreError> {
        let session_hash = session_hash.to_owned();
        self.write(move |conn| {
            let tx = savepoint(conn)?;
            tx.prepare_cached("DELETE FROM console_sessions WHERE session_hash = ?1")?
                .execute([session_hash])?;
            tx.commit()?;
            Ok(())
        })
        .await
    }
}
