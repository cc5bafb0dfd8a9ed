//! API keys: their text (`fk_<key id>_<secret>`: a 64-bit public id, 256 random bits), the hash
//! the store keeps instead (SHA-256 of the whole key; the key is random, so a fast hash is as
//! strong as a slow one), principal names, and `fulfillment keys create|list|revoke`.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use store::{ApiKey, Issued, KeyRepository, Role, StoreError};

/// A key's text, shown once when created. Never printed by `Debug`.
#[derive(Clone)]
pub struct KeyText(String);

impl KeyText {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for KeyText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyText(***)")
    }
}

/// The hash the store keeps of a presented key.
pub fn key_hash(presented: &[u8]) -> String {
    Sha256::digest(presented)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A new key for `principal`: its text and the record the store keeps.
pub fn generate(principal: &str, role: Role, at: DateTime<Utc>) -> (KeyText, ApiKey) {
    let id: [u8; 8] = rand::random();
    let secret: [u8; 32] = rand::random();
    let key_id: String = id.iter().map(|b| format!("{b:02x}")).collect();
    let text = format!("fk_{key_id}_{}", URL_SAFE_NO_PAD.encode(secret));
    let record = ApiKey {
        key_id,
        principal: principal.to_owned(),
        role,
        key_hash: key_hash(text.as_bytes()),
        created_at: at,
        last_used_at: None,
        revoked_at: None,
    };
    (KeyText(text), record)
}

/// Why a principal name is not one: 1–64 characters of `A-Z a-z 0-9 . _ @ -`.
pub fn principal_error(name: &str) -> Option<&'static str> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-_@".contains(&b));
    (!ok).then_some("a principal name is 1 to 64 characters of A-Z a-z 0-9 . _ @ -")
}

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("{0}")]
    InvalidName(&'static str),
    #[error("{name} is a {existing} already; a principal keeps its role (choose another name)")]
    RoleMismatch {
        name: String,
        existing: &'static str,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Issues a new key for `name` (creating the principal with `role` when new).
pub async fn create(
    keys: &dyn KeyRepository,
    name: &str,
    role: Role,
) -> Result<(KeyText, ApiKey), KeyError> {
    if let Some(e) = principal_error(name) {
        return Err(KeyError::InvalidName(e));
    }
    let (text, record) = generate(name, role, Utc::now());
    match keys.issue(&record).await? {
        Issued::Issued(stored) => Ok((text, stored)),
        Issued::RoleMismatch { existing } => Err(KeyError::RoleMismatch {
            name: name.to_owned(),
            existing: existing.as_str(),
        }),
    }
}

/// One line of `keys list`: id, principal, role, created, last used, revoked (`-` for none).
pub fn list_line(k: &ApiKey) -> String {
    let at = |t: Option<DateTime<Utc>>| {
        t.map_or("-".to_owned(), |t| {
            t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        })
    };
    format!(
        "{}\t{}\t{}\t{}\t{}\t{}",
        k.key_id,
        k.principal,
        k.role.as_str(),
        at(Some(k.created_at)),
        at(k.last_used_at),
        at(k.revoked_at)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_long_random_and_stored_only_as_its_hash() {
        let (text, record) = generate("shop", Role::Client, Utc::now());
        let t = text.expose();
        assert!(t.starts_with(&format!("fk_{}_", record.key_id)), "{t}");
        assert_eq!(t.len(), 3 + 16 + 1 + 43);
        assert_eq!(record.key_hash, key_hash(t.as_bytes()));
        assert!(!record.key_hash.contains(&t[20..]));
        let (other, _) = generate("shop", Role::Client, Utc::now());
        assert_ne!(other.expose(), t);
        assert_eq!(format!("{text:?}"), "KeyText(***)");
    }

    #[test]
    fn principal_names_are_plain() {
        assert_eq!(principal_error("grace@example.com"), None);
        assert_eq!(principal_error("shop-1.eu_west"), None);
        for bad in ["", "a b", "x/y", "ünï", &"n".repeat(65)] {
            assert!(principal_error(bad).is_some(), "{bad:?}");
        }
    }
}
