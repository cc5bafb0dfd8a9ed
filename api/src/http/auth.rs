//! Authentication: `Authorization: Bearer <API key>`, looked up by the key's hash (through a
//! cache of a few seconds, so a revoked key is refused by every replica within
//! [`KEY_CACHE_TTL`]) and answered as the key's principal: a client (a system that places
//! orders) or an operator (a person). `--operator-token` is one more operator key, named
//! [`BOOTSTRAP_OPERATOR`]. Nothing else a request carries (a query parameter, another scheme or
//! header, an order id or execution ARN) authorises it.
//!
//! Every authenticated request then takes one token from its key's bucket, and failed
//! authentications count against the caller's address ([`super::rate_limit`]).

use super::AppState;
use super::problem::{Problem, ProblemKind};
use super::rate_limit::{RateLimitSettings, RateLimits, too_many};
use crate::keys::key_hash;
use axum::extract::FromRequestParts;
use axum::http::{header, request::Parts};
use chrono::Utc;
use std::sync::Arc;
use std::time::Duration;
use store::{ApiKey, KeyRepository, Role, StoreError};
use subtle::ConstantTimeEq;

/// How long a key's lookup is reused: the longest a revoked key still works on a replica.
pub const KEY_CACHE_TTL: Duration = Duration::from_secs(5);
/// How often at most a key's last use is written.
const TOUCH_EVERY: Duration = Duration::from_secs(60);
/// The principal `--operator-token` authenticates as.
pub const BOOTSTRAP_OPERATOR: &str = "operator";

/// The key id `--operator-token` counts as (in its rate limit).
const BOOTSTRAP_KEY_ID: &str = "operator-token";

/// Who is calling: the principal of the key presented, and which of its keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub principal: String,
    pub role: Role,
    pub key_id: String,
}

impl Caller {
    pub fn is_operator(&self) -> bool {
        self.role == Role::Operator
    }
}

/// Checks presented keys against the store, through a short-lived cache.
pub struct Authenticator {
    keys: Arc<dyn KeyRepository>,
    /// The hash of `--operator-token`, if one is configured.
    bootstrap: Option<String>,
    /// Key hash → the key as last read (`None`: no such key).
    cache: moka::future::Cache<String, Option<ApiKey>>,
    /// Keys whose last use was written lately.
    touched: moka::future::Cache<String, ()>,
    limits: RateLimits,
}

impl Authenticator {
    /// An authenticator with the default rate limits.
    pub fn new(keys: Arc<dyn KeyRepository>, bootstrap: Option<&str>) -> Authenticator {
        Authenticator::with_limits(keys, bootstrap, &RateLimitSettings::default())
    }

    pub fn with_limits(
        keys: Arc<dyn KeyRepository>,
        bootstrap: Option<&str>,
        limits: &RateLimitSettings,
    ) -> Authenticator {
        Authenticator {
            keys,
            bootstrap: bootstrap.map(|t| key_hash(t.as_bytes())),
            cache: moka::future::Cache::builder()
                .max_capacity(100_000)
                .time_to_live(KEY_CACHE_TTL)
                .build(),
            touched: moka::future::Cache::builder()
                .max_capacity(100_000)
                .time_to_live(TOUCH_EVERY)
                .build(),
            limits: RateLimits::new(limits),
        }
    }

    /// The bootstrap operator, if `hash` is `--operator-token`'s.
    fn bootstrap(&self, hash: &str) -> Option<Caller> {
        let bootstrap = self.bootstrap.as_ref()?;
        // Hashes of equal length, compared in constant time.
        bool::from(hash.as_bytes().ct_eq(bootstrap.as_bytes())).then(|| Caller {
            principal: BOOTSTRAP_OPERATOR.to_owned(),
            role: Role::Operator,
            key_id: BOOTSTRAP_KEY_ID.to_owned(),
        })
    }

    /// The caller `presented` authenticates as from what this replica has checked lately,
    /// without asking the store; `None` when it has not (or the key is unknown or revoked).
    pub async fn cached(&self, presented: &[u8]) -> Option<Caller> {
        let hash = key_hash(presented);
        if let Some(caller) = self.bootstrap(&hash) {
            return Some(caller);
        }
        let key = self.cache.get(&hash).await.flatten()?;
        key.revoked_at.is_none().then(|| Caller {
            principal: key.principal,
            role: key.role,
            key_id: key.key_id,
        })
    }

    /// The store of keys (and of the console's sessions).
    pub fn keys(&self) -> &Arc<dyn KeyRepository> {
        &self.keys
    }

    /// The caller `presented` authenticates, or `None` (unknown or revoked key).
    pub async fn authenticate(&self, presented: &[u8]) -> Result<Option<Caller>, StoreError> {
        self.by_hash(&key_hash(presented)).await
    }

    /// The caller of the key whose hash is `hash`, or `None` (unknown or revoked key): how a
    /// console session, which keeps its key's hash, is checked on every request.
    pub async fn by_hash(&self, hash: &str) -> Result<Option<Caller>, StoreError> {
        let hash = hash.to_owned();
        if let Some(caller) = self.bootstrap(&hash) {
            return Ok(Some(caller));
        }
        let keys = self.keys.clone();
        let found = self
            .cache
            .try_get_with(hash.clone(), async move { keys.key_by_hash(&hash).await })
            .await
            .map_err(|e| (*e).clone())?;
        let Some(key) = found.filter(|k| k.revoked_at.is_none()) else {
            return Ok(None);
        };
        if !self.touched.contains_key(&key.key_id) {
            self.touched.insert(key.key_id.clone(), ()).await;
            let (keys, id) = (self.keys.clone(), key.key_id.clone());
            // Off the request's path: a lost last-use time is no loss.
            tokio::spawn(async move {
                if let Err(e) = keys.touch(&id, Utc::now()).await {
                    tracing::debug!(error = %e, key_id = %id, "last use not recorded");
                }
            });
        }
        Ok(Some(Caller {
            principal: key.principal,
            role: key.role,
            key_id: key.key_id,
        }))
    }

    /// The caller of a request presenting `presented`, within the rate limits: an address over
    /// its failed authentications is served only from the cache (`429` otherwise, before any
    /// lookup), a failure counts against the address, and a key over its rate is `429`.
    pub async fn admit(&self, parts: &Parts, presented: &[u8]) -> Result<Caller, Problem> {
        let address = self.limits.address(parts);
        let caller = match self.limits.blocked(address).await {
            Some(wait) => self.cached(presented).await.ok_or_else(|| {
                too_many(
                    wait,
                    "too many failed authentications from this address; retry later",
                )
            })?,
            None => match self.authenticate(presented).await {
                Ok(Some(caller)) => caller,
                Ok(None) => {
                    return Err(match self.limits.failed(address).await {
                        Some(wait) => too_many(
                            wait,
                            "too many failed authentications from this address; retry later",
                        ),
                        None => unauthorized(),
                    });
                }
                Err(e) => return Err(Problem::backend(&e, e.is_transient())),
            },
        };
        self.limits.check_key(&caller.key_id).map_err(|wait| {
            too_many(
                wait,
                "this key sends requests faster than its rate limit; retry later",
            )
        })?;
        Ok(caller)
    }
}

/// The bearer credential of the request's one `Authorization` header. Two of them are no
/// credential: which one counts would depend on the proxy in front (RFC 9110 allows only one).
fn bearer(parts: &Parts) -> Option<&[u8]> {
    let mut values = parts.headers.get_all(header::AUTHORIZATION).iter();
    let value = values.next()?.as_bytes();
    if values.next().is_some() {
        return None;
    }
    let (scheme, rest) = value.split_at_checked(7)?;
    scheme
        .eq_ignore_ascii_case(b"bearer ")
        .then(|| rest.trim_ascii())
        .filter(|k| !k.is_empty())
}

fn unauthorized() -> Problem {
    Problem::new(
        ProblemKind::Unauthorized,
        "this endpoint needs `Authorization: Bearer <API key>`",
    )
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Problem> {
        let Some(presented) = bearer(parts) else {
            return Err(unauthorized());
        };
        state.auth.admit(parts, presented).await
    }
}

/// An authenticated operator; `name` is its principal's name.
#[derive(Debug, Clone)]
pub struct Operator {
    pub name: String,
}

impl FromRequestParts<AppState> for Operator {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Problem> {
        let caller = Caller::from_request_parts(parts, state).await?;
        if !caller.is_operator() {
            return Err(Problem::new(
                ProblemKind::Forbidden,
                "this endpoint is for operators; a client key cannot use it",
            ));
        }
        Ok(Operator {
            name: caller.principal,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use store_sqlite::SqliteStore;

    #[tokio::test]
    async fn keys_authenticate_as_their_principal_until_revoked() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open(dir.path().join("s.db")).unwrap());
        let auth = Authenticator::new(store.clone(), Some("bootstrap-token-0123456789"));
        let (text, key) = crate::keys::create(store.as_ref(), "shop", Role::Client)
            .await
            .unwrap();
        let caller = auth.authenticate(text.expose().as_bytes()).await.unwrap();
        assert_eq!(
            caller,
            Some(Caller {
                principal: "shop".to_owned(),
                role: Role::Client,
                key_id: key.key_id.clone(),
            })
        );
        let boot = auth
            .authenticate(b"bootstrap-token-0123456789")
            .await
            .unwrap();
        assert_eq!(boot.map(|c| c.role), Some(Role::Operator));
        assert_eq!(auth.authenticate(b"fk_0_guess").await.unwrap(), None);
        store.revoke(&key.key_id, Utc::now()).await.unwrap();
        // A fresh authenticator (another replica, or this one after the cache's TTL).
        let other = Authenticator::new(store.clone(), None);
        assert_eq!(
            other.authenticate(text.expose().as_bytes()).await.unwrap(),
            None
        );
    }
}
