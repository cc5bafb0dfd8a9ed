//! A lease: the right, for a while, to be the one replica doing a job that must not run twice at
//! once (the repair loop). The holder renews it while it works; when it stops renewing (it
//! stopped or died), another holder takes it over once it has expired. Adapters: DynamoDB
//! (`dynamodb::DynamoLease`, an item of the table, written conditionally) and [`Unshared`],
//! for a backend one process owns alone.

use crate::error::StoreError;
use async_trait::async_trait;

#[async_trait]
pub trait Lease: Send + Sync {
    /// Takes the lease, or renews it when this holder has it, for the adapter's duration from
    /// now. `false`: another holder has it and it has not expired; nothing changed.
    async fn hold(&self) -> Result<bool, StoreError>;

    /// Gives the lease up if this holder has it, so another may take it at once rather than
    /// after it expires. Nothing happens when another holder has it.
    async fn release(&self) -> Result<(), StoreError>;
}

/// The shards of a job split among replicas (the approval keeper's queue shards): each shard
/// held by one replica at a time under a lease of its own, the shards shared out evenly among
/// the replicas alive, and taken over from one that died once its leases expire.
#[async_trait]
pub trait ShardLeases: Send + Sync {
    /// Renews the shards of `0..shards` this holder has, gives up those beyond its fair share
    /// and takes free or expired ones up to it. Returns the shards it holds now, in order.
    /// Call it more often than the leases' duration.
    async fn balance(&self, shards: u32) -> Result<Vec<u32>, StoreError>;

    /// Gives up every shard of `0..shards` this holder has, so others take them at once.
    async fn release_all(&self, shards: u32) -> Result<(), StoreError>;
}

/// The lease of a backend that only one process can open (the embedded one: the engine's file
/// is locked by its process), always held by that process.
#[derive(Debug, Clone, Copy, Default)]
pub struct Unshared;

#[async_trait]
impl Lease for Unshared {
    async fn hold(&self) -> Result<bool, StoreError> {
        Ok(true)
    }

    async fn release(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

/// The one process holds every shard.
#[async_trait]
impl ShardLeases for Unshared {
    async fn balance(&self, shards: u32) -> Result<Vec<u32>, StoreError> {
        Ok((0..shards).collect())
    }

    async fn release_all(&self, _shards: u32) -> Result<(), StoreError> {
        Ok(())
    }
}
