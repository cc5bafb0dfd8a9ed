//! Errors of the store and the gateways.

/// A repository failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The store could not be reached or was busy; trying again may work.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// A record is not what the request assumes (e.g. an unknown order id).
    #[error("not found: {0}")]
    NotFound(String),
    /// Anything else: corruption, a bug, a full disk.
    #[error("store failure: {0}")]
    Internal(String),
}

impl StoreError {
    pub fn is_transient(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
    }
}

/// SQLite's busy and locked are transient; every other error of the file is not. Here, beside
/// the error, because the orphan rule keeps the impl out of `store_sqlite`, which turns the
/// feature on.
#[cfg(feature = "sqlite")]
impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        match &e {
            rusqlite::Error::SqliteFailure(f, _)
                if matches!(
                    f.code,
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                ) =>
            {
                StoreError::Unavailable(e.to_string())
            }
            _ => StoreError::Internal(e.to_string()),
        }
    }
}

/// A payment or shipping gateway refused or could not be reached.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GatewayError {
    /// A final "no" (card declined, address rejected).
    #[error("rejected: {0}")]
    Rejected(String),
    /// The gateway did not answer or answered 5xx: the outcome is unknown, trying again with
    /// the same idempotency key is safe.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// The idempotency key was used before with different parameters.
    #[error("idempotency key reused with different parameters: {0}")]
    KeyReused(String),
    /// The provider refused the request as malformed or impossible (an amount under its
    /// minimum, an unknown object): final, and not the customer's "no" either.
    #[error("invalid request: {0}")]
    Invalid(String),
    /// The operator's fault, not the order's: the provider refused our credentials (401, 403)
    /// or the configured URL is not the provider's API. Retried until someone fixes it; no
    /// order may be cancelled for it.
    #[error("provider misconfigured: {0}")]
    Misconfigured(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl GatewayError {
    pub fn is_transient(&self) -> bool {
        match self {
            GatewayError::Unavailable(_) | GatewayError::Misconfigured(_) => true,
            GatewayError::Store(e) => e.is_transient(),
            GatewayError::Rejected(_) | GatewayError::KeyReused(_) | GatewayError::Invalid(_) => {
                false
            }
        }
    }
}
