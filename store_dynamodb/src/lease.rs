//! [`Lease`] on DynamoDB: one item per lease (`LEASE#{name}`: `owner`, `expires_at` N in
//! milliseconds since the epoch), taken, renewed and given up by conditional `UpdateItem`s, so
//! that of replicas racing for it exactly one write succeeds. The expiry is each replica's own
//! clock: the lease's duration must be well above the clock skew between replicas (seconds at
//! most, on NTP-kept hosts).

use super::codec::{Fields, n, s};
use super::table::prefix;
use super::{DynamoStore, Written};
use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;
use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use store::error::StoreError;
use store::lease::{Lease, ShardLeases};

/// The lease `name` in a store's table, held as `owner` for `duration` at a time.
#[derive(Debug, Clone)]
pub struct DynamoLease {
    store: DynamoStore,
    pk: String,
    owner: String,
    duration: Duration,
}

impl DynamoLease {
    /// `owner` names this holder (unique per process: a replica that restarts is a new holder,
    /// which waits for its old lease to expire).
    pub fn new(
        store: DynamoStore,
        name: &str,
        owner: impl Into<String>,
        duration: Duration,
    ) -> DynamoLease {
        DynamoLease {
            store,
            pk: format!("{}{name}", prefix::LEASE),
            owner: owner.into(),
            duration,
        }
    }

    pub fn owner(&self) -> &str {
        &self.owner
    }
}

fn millis_since_epoch(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[async_trait]
impl Lease for DynamoLease {
    async fn hold(&self) -> Result<bool, StoreError> {
        let now = SystemTime::now();
        let written = self
            .store
            .update(
                self.pk.clone(),
                "SET #owner = :me, #expires_at = :until",
                Some("attribute_not_exists(#pk) OR #owner = :me OR #expires_at < :now"),
                HashMap::from([
                    (":me".to_owned(), s(&self.owner)),
                    (
                        ":until".to_owned(),
                        n(millis_since_epoch(now + self.duration)),
                    ),
                    (":now".to_owned(), n(millis_since_epoch(now))),
                ]),
            )
            .await?;
        Ok(matches!(written, Written::Done(_)))
    }

    async fn release(&self) -> Result<(), StoreError> {
        // Expired now rather than deleted: a holder whose renewal is still on its way cannot
        // bring back an item that a takeover has meanwhile written.
        self.store
            .update(
                self.pk.clone(),
                "SET #expires_at = :gone",
                Some("#owner = :me"),
                HashMap::from([
                    (":me".to_owned(), s(&self.owner)),
                    (":gone".to_owned(), n(0)),
                ]),
            )
            .await?;
        Ok(())
    }
}

/// [`ShardLeases`] on DynamoDB: a [`DynamoLease`] per shard (`LEASE#{name}-{shard}`), and one
/// item, `LEASE#{name}-members`, whose map `members` holds each holder and until when it is
/// alive (in milliseconds since the epoch), renewed at each balance. A holder's fair share is
/// the shards divided by the holders alive, rounded up; a holder above it gives shards up, one
/// below it takes free or expired ones. Each shard's lease is written conditionally, so a shard
/// has one holder at a time; one whose holder died is free once its lease expires.
#[derive(Debug, Clone)]
pub struct DynamoShardLeases {
    store: DynamoStore,
    name: String,
    owner: String,
    duration: Duration,
}

impl DynamoShardLeases {
    /// `owner` names this holder: ASCII letters, digits and `_`, starting with a letter (it is
    /// a key of the members' map), unique per process.
    pub fn new(
        store: DynamoStore,
        name: &str,
        owner: impl Into<String>,
        duration: Duration,
    ) -> Result<DynamoShardLeases, StoreError> {
        let owner = owner.into();
        let valid = owner.starts_with(|c: char| c.is_ascii_alphabetic())
            && owner.len() <= 64
            && owner.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(StoreError::Internal(format!(
                "a shard lease holder's name must be letters, digits and _: {owner:?}"
            )));
        }
        Ok(DynamoShardLeases {
            store,
            name: name.to_owned(),
            owner,
            duration,
        })
    }

    pub fn owner(&self) -> &str {
        &self.owner
    }

    fn lease(&self, shard: u32) -> DynamoLease {
        DynamoLease::new(
            self.store.clone(),
            &format!("{}-{shard}", self.name),
            self.owner.clone(),
            self.duration,
        )
    }

    /// Marks this holder alive for the lease's duration; returns how many holders are alive
    /// (this one included), and forgets those long gone.
    async fn alive(&self) -> Result<u32, StoreError> {
        let now = millis_since_epoch(SystemTime::now());
        let until = millis_since_epoch(SystemTime::now() + self.duration);
        let pk = format!("{}{}-members", prefix::LEASE, self.name);
        let me = format!("#members.#{}", self.owner);
        let mut item = None;
        for _ in 0..3 {
            let written = self
                .store
                .update(
                    pk.clone(),
                    &format!("SET {me} = :until"),
                    Some("attribute_exists(#members)"),
                    HashMap::from([(":until".to_owned(), n(until))]),
                )
                .await?;
            if let Written::Done(done) = written {
                item = Some(done);
                break;
            }
            // The first holder ever: the map is made with it.
            let members = AttributeValue::M(HashMap::from([(self.owner.clone(), n(until))]));
            let created = self
                .store
                .update(
                    pk.clone(),
                    "SET #members = :members",
                    Some("attribute_not_exists(#members)"),
                    HashMap::from([(":members".to_owned(), members)]),
                )
                .await?;
            if let Written::Done(done) = created {
                item = Some(done);
                break;
            }
        }
        let item = item.ok_or_else(|| {
            StoreError::Unavailable(format!("{pk}: the members' map kept changing"))
        })?;
        let members = match item.get("members") {
            Some(AttributeValue::M(m)) => m.clone(),
            _ => HashMap::new(),
        };
        let until_of = |v: &AttributeValue| match v {
            AttributeValue::N(n) => n.parse::<u64>().unwrap_or(0),
            _ => 0,
        };
        let alive = members.values().filter(|v| until_of(v) >= now).count();
        // Holders gone for ten leases are forgotten (best effort: the next balance tries again).
        let forgotten = u64::try_from(self.duration.as_millis())
            .unwrap_or(u64::MAX)
            .saturating_mul(10);
        let gone: Vec<String> = members
            .iter()
            .filter(|(_, v)| until_of(v).saturating_add(forgotten) < now)
            .map(|(k, _)| format!("#members.#{k}"))
            .take(50)
            .collect();
        if !gone.is_empty() {
            let update = format!("REMOVE {}", gone.join(", "));
            if let Err(e) = self.store.update(pk, &update, None, HashMap::new()).await {
                tracing::debug!(error = %e, "forgetting gone shard holders failed");
            }
        }
        Ok(u32::try_from(alive.max(1)).unwrap_or(u32::MAX))
    }
}

#[async_trait]
impl ShardLeases for DynamoShardLeases {
    async fn balance(&self, shards: u32) -> Result<Vec<u32>, StoreError> {
        let share = shards.div_ceil(self.alive().await?);
        let now = millis_since_epoch(SystemTime::now());
        let pks: Vec<String> = (0..shards).map(|k| self.lease(k).pk).collect();
        let found = self.store.get_items(&pks).await?;
        let (mut mine, mut free) = (Vec::new(), Vec::new());
        for (shard, pk) in (0..shards).zip(&pks) {
            let (owner, expires) = match found.get(pk) {
                Some(item) => {
                    let f = Fields::of(item);
                    (f.opt_string("owner")?, f.opt_n("expires_at")?.unwrap_or(0))
                }
                None => (None, 0),
            };
            if owner.as_deref() == Some(self.owner.as_str()) && expires >= now {
                mine.push(shard);
            } else if expires < now {
                free.push(shard);
            }
        }
        // Above the share: give the last ones up, for the holders below it to take.
        while mine.len() > share as usize {
            let shard = mine.pop().expect("above the share");
            self.lease(shard).release().await?;
        }
        let mut held = Vec::new();
        for shard in mine {
            if self.lease(shard).hold().await? {
                held.push(shard);
            }
        }
        // Below it: free shards, from a place of this holder's own, so that holders starting
        // together do not all race for the same ones.
        let offset = self.owner.bytes().map(u32::from).sum::<u32>() % shards.max(1);
        free.sort_by_key(|k| (k + shards - offset) % shards.max(1));
        for shard in free {
            if held.len() >= share as usize {
                break;
            }
            if self.lease(shard).hold().await? {
                held.push(shard);
            }
        }
        held.sort_unstable();
        Ok(held)
    }

    async fn release_all(&self, shards: u32) -> Result<(), StoreError> {
        let pk = format!("{}{}-members", prefix::LEASE, self.name);
        let shards: Vec<u32> = (0..shards).collect();
        let pks: Vec<String> = shards.iter().map(|k| self.lease(*k).pk).collect();
        let found = self.store.get_items(&pks).await?;
        for (shard, pk) in shards.iter().zip(&pks) {
            let mine = found
                .get(pk)
                .and_then(|item| Fields::of(item).opt_string("owner").ok().flatten())
                .is_some_and(|o| o == self.owner);
            if mine {
                self.lease(*shard).release().await?;
            }
        }
        // No longer counted among the holders alive.
        self.store
            .update(
                pk,
                &format!("REMOVE #members.#{}", self.owner),
                Some("attribute_exists(#members)"),
                HashMap::new(),
            )
            .await?;
        Ok(())
    }
}
