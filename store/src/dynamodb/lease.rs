//! [`Lease`] on DynamoDB: one item per lease (`LEASE#{name}`: `owner`, `expires_at` N in
//! milliseconds since the epoch), taken, renewed and given up by conditional `UpdateItem`s, so
//! that of replicas racing for it exactly one write succeeds. The expiry is each replica's own
//! clock: the lease's duration must be well above the clock skew between replicas (seconds at
//! most, on NTP-kept hosts).

use super::codec::{n, s};
use super::table::prefix;
use super::{DynamoStore, Written};
use crate::error::StoreError;
use crate::lease::Lease;
use async_trait::async_trait;
use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
