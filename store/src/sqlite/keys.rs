//! `KeyRepository` on SQLite: a principal row per name (its role for life) and a row per key,
//! holding the key's hash, never the key.

use super::{SqliteStore, get_opt_ts, get_ts, savepoint, ts};
use crate::domain::*;
use crate::error::StoreError;
use crate::ports::{Issued, KeyRepository};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use rusqlite::{OptionalExtension, params};

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
}
