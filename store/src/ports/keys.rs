//! Principals, their API keys and the console's sessions.

use crate::domain::*;
use crate::error::StoreError;
use async_trait::async_trait;
use chrono::{DateTime, Utc};

/// What `KeyRepository::issue` did.
#[derive(Debug, Clone, PartialEq)]
pub enum Issued {
    /// The key is stored (and its principal, if it was new).
    Issued(ApiKey),
    /// The principal exists with the other role: nothing was stored. A principal keeps its
    /// role for life (a client's orders stay a client's).
    RoleMismatch { existing: Role },
}

/// Principals and their API keys.
#[async_trait]
pub trait KeyRepository: Send + Sync {
    /// Stores `key` (its id and hash unique), creating its principal with its role when new.
    async fn issue(&self, key: &ApiKey) -> Result<Issued, StoreError>;

    /// The key whose hash is `key_hash`, revoked or not.
    async fn key_by_hash(&self, key_hash: &str) -> Result<Option<ApiKey>, StoreError>;

    /// Every key, oldest first (principals hold a few each; there are few principals).
    async fn list_keys(&self) -> Result<Vec<ApiKey>, StoreError>;

    /// Revokes the key (idempotent: the first revocation time is kept). `None` for an unknown id.
    async fn revoke(&self, key_id: &str, at: DateTime<Utc>) -> Result<Option<ApiKey>, StoreError>;

    /// Records that the key was used at `at` (only ever moves forward).
    async fn touch(&self, key_id: &str, at: DateTime<Utc>) -> Result<(), StoreError>;

    /// Stores `session`, replacing one stored with the same hash. The hash is of a random
    /// secret, so the only session with the same hash is this one again (a retry of a write
    /// whose answer was lost): opening is idempotent. Adapters purge sessions past their
    /// `expires_at` on their own (see each).
    async fn open_session(&self, session: &ConsoleSession) -> Result<(), StoreError>;

    /// The session whose secret hashes to `session_hash` (a strongly consistent read), expired
    /// or not: the caller checks `expires_at`, and that its key is still valid.
    async fn session(&self, session_hash: &str) -> Result<Option<ConsoleSession>, StoreError>;

    /// Ends the session (sign-out). Idempotent: closing one that is gone, or never was, is `Ok`.
    async fn close_session(&self, session_hash: &str) -> Result<(), StoreError>;
}
