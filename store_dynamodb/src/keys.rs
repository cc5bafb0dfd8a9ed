//! `KeyRepository` on DynamoDB: a principal item per name (its role for life), an item per key
//! (`APIKEY#{id}`: hash, principal, role, times) and a pointer per key hash
//! (`APIKEYHASH#{hash}` → id), written in one transaction, so a key is found by its hash with
//! two consistent reads and never exists half-written. A console session is an item of its
//! own (`SESSION#{hash}`), carrying the table's time to live (`retain_until`) at its expiry, so
//! DynamoDB deletes it some time after it ended (within days: until then it is read as it is, and
//! callers check `expires_at`).

use super::codec::{Fields, Item, key, s, ts};
use super::error::sdk;
use super::table::{PARTITION_KEY, RETAIN_UNTIL, prefix};
use super::{DynamoStore, Transacted, Written, failed};
use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use store::domain::*;
use store::error::StoreError;
use store::ports::{Issued, KeyRepository};

fn key_pk(key_id: &str) -> String {
    format!("{}{key_id}", prefix::API_KEY)
}

fn hash_pk(key_hash: &str) -> String {
    format!("{}{key_hash}", prefix::API_KEY_HASH)
}

fn principal_pk(name: &str) -> String {
    format!("{}{name}", prefix::PRINCIPAL)
}

fn session_pk(session_hash: &str) -> String {
    format!("{}{session_hash}", prefix::SESSION)
}

/// When the time to live may delete a session that expires at `at`: seconds since the epoch,
/// rounded up, so never before it expired.
fn retain_until(at: DateTime<Utc>) -> AttributeValue {
    let secs = at.timestamp() + i64::from(at.timestamp_subsec_nanos() > 0);
    AttributeValue::N(secs.to_string())
}

fn session_item(session: &ConsoleSession) -> Item {
    HashMap::from([
        (
            PARTITION_KEY.to_owned(),
            s(session_pk(&session.session_hash)),
        ),
        ("session_hash".to_owned(), s(&session.session_hash)),
        ("key_hash".to_owned(), s(&session.key_hash)),
        ("principal".to_owned(), s(&session.principal)),
        ("created_at".to_owned(), ts(session.created_at)),
        ("expires_at".to_owned(), ts(session.expires_at)),
        (RETAIN_UNTIL.to_owned(), retain_until(session.expires_at)),
    ])
}

fn session_from(item: &Item) -> Result<ConsoleSession, StoreError> {
    let f = Fields::of(item);
    Ok(ConsoleSession {
        session_hash: f.string("session_hash")?,
        key_hash: f.string("key_hash")?,
        principal: f.string("principal")?,
        created_at: f.ts("created_at")?,
        expires_at: f.ts("expires_at")?,
    })
}

fn role_of(f: &Fields) -> Result<Role, StoreError> {
    let role = f.string("role")?;
    Role::parse(&role).ok_or_else(|| StoreError::Internal(format!("unknown role {role}")))
}

fn key_from(item: &Item) -> Result<ApiKey, StoreError> {
    let f = Fields::of(item);
    Ok(ApiKey {
        key_id: f.string("key_id")?,
        principal: f.string("principal")?,
        role: role_of(&f)?,
        key_hash: f.string("key_hash")?,
        created_at: f.ts("created_at")?,
        last_used_at: f.opt_ts("last_used_at")?,
        revoked_at: f.opt_ts("revoked_at")?,
    })
}

impl DynamoStore {
    async fn key_by_id(&self, key_id: &str) -> Result<Option<ApiKey>, StoreError> {
        self.get_item(key_pk(key_id))
            .await?
            .map(|item| key_from(&item))
            .transpose()
    }
}

#[async_trait]
impl KeyRepository for DynamoStore {
    async fn issue(&self, key: &ApiKey) -> Result<Issued, StoreError> {
        let role = key.role.as_str();
        let principal = self.tx_update(
            principal_pk(&key.principal),
            "SET #name = :name, #role = if_not_exists(#role, :role), \
             #created_at = if_not_exists(#created_at, :at)",
            &format!("attribute_not_exists(#{PARTITION_KEY}) OR #role = :role"),
            HashMap::from([
                (":name".to_owned(), s(&key.principal)),
                (":role".to_owned(), s(role)),
                (":at".to_owned(), ts(key.created_at)),
            ]),
        )?;
        let key_item: Item = HashMap::from([
            (PARTITION_KEY.to_owned(), s(key_pk(&key.key_id))),
            ("key_id".to_owned(), s(&key.key_id)),
            ("principal".to_owned(), s(&key.principal)),
            ("role".to_owned(), s(role)),
            ("key_hash".to_owned(), s(&key.key_hash)),
            ("created_at".to_owned(), ts(key.created_at)),
        ]);
        let pointer: Item = HashMap::from([
            (PARTITION_KEY.to_owned(), s(hash_pk(&key.key_hash))),
            ("key_id".to_owned(), s(&key.key_id)),
        ]);
        let items = vec![
            principal,
            self.tx_put_new(key_item)?,
            self.tx_put_new(pointer)?,
        ];
        match self.transact(items).await? {
            Transacted::Done => {}
            Transacted::Refused(reasons) if failed(&reasons, 0) => {
                let existing = match self
                    .refused_item(&reasons[0], principal_pk(&key.principal))
                    .await?
                {
                    Some(item) => role_of(&Fields::of(&item))?,
                    None => {
                        return Err(StoreError::Internal(format!(
                            "principal {} refused for no reason given",
                            key.principal
                        )));
                    }
                };
                return Ok(Issued::RoleMismatch { existing });
            }
            Transacted::Refused(_) => {
                return Err(StoreError::Internal(format!(
                    "key {} or its hash exists already",
                    key.key_id
                )));
            }
        }
        let stored = self.key_by_id(&key.key_id).await?.ok_or_else(|| {
            StoreError::Internal(format!("the key {} just stored is missing", key.key_id))
        })?;
        Ok(Issued::Issued(stored))
    }

    async fn key_by_hash(&self, key_hash: &str) -> Result<Option<ApiKey>, StoreError> {
        let Some(pointer) = self.get_item(hash_pk(key_hash)).await? else {
            return Ok(None);
        };
        let key_id = Fields::of(&pointer).string("key_id")?;
        self.key_by_id(&key_id).await
    }

    async fn list_keys(&self) -> Result<Vec<ApiKey>, StoreError> {
        let mut keys = Vec::new();
        let mut after = None;
        loop {
            let (items, next) = self
                .scan_prefix(prefix::API_KEY, after.as_deref(), 100)
                .await?;
            for item in &items {
                keys.push(key_from(item)?);
            }
            match next {
                Some(n) => after = Some(n),
                None => break,
            }
        }
        keys.sort_by(|a, b| (a.created_at, &a.key_id).cmp(&(b.created_at, &b.key_id)));
        Ok(keys)
    }

    async fn revoke(&self, key_id: &str, at: DateTime<Utc>) -> Result<Option<ApiKey>, StoreError> {
        let written = self
            .update(
                key_pk(key_id),
                "SET #revoked_at = :at",
                Some(&format!(
                    "attribute_exists(#{PARTITION_KEY}) AND attribute_not_exists(#revoked_at)"
                )),
                HashMap::from([(":at".to_owned(), ts(at))]),
            )
            .await?;
        match written {
            Written::Done(item) | Written::Refused(Some(item)) => key_from(&item).map(Some),
            Written::Refused(None) => Ok(None),
        }
    }

    async fn touch(&self, key_id: &str, at: DateTime<Utc>) -> Result<(), StoreError> {
        self.update(
            key_pk(key_id),
            "SET #last_used_at = :at",
            Some(&format!(
                "attribute_exists(#{PARTITION_KEY}) AND \
                 (attribute_not_exists(#last_used_at) OR #last_used_at < :at)"
            )),
            HashMap::from([(":at".to_owned(), ts(at))]),
        )
        .await
        .map(drop)
    }

    /// An unconditional `PutItem` (a retry puts the same item again); the item's time to live
    /// purges it after it expired.
    async fn open_session(&self, session: &ConsoleSession) -> Result<(), StoreError> {
        self.client
            .put_item()
            .table_name(self.table())
            .set_item(Some(session_item(session)))
            .send()
            .await
            .map_err(sdk("PutItem"))
            .map(drop)
    }

    async fn session(&self, session_hash: &str) -> Result<Option<ConsoleSession>, StoreError> {
        self.get_item(session_pk(session_hash))
            .await?
            .as_ref()
            .map(session_from)
            .transpose()
    }

    async fn close_session(&self, session_hash: &str) -> Result<(), StoreError> {
        self.client
            .delete_item()
            .table_name(self.table())
            .set_key(Some(key(session_pk(session_hash))))
            .send()
            .await
            .map_err(sdk("DeleteItem"))
            .map(drop)
    }
}
