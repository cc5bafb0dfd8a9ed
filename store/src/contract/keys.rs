//! The contract of `KeyRepository`: keys found by their hash with their principal's name and
//! role, a principal's role kept for life, revocation and last use recorded once and forward.

use super::{now, unique};
use crate::domain::*;
use crate::ports::*;
use chrono::Duration;

fn key(principal: &str, role: Role) -> ApiKey {
    ApiKey {
        key_id: unique("key"),
        principal: principal.to_owned(),
        role,
        key_hash: unique("hash"),
        created_at: now(),
        last_used_at: None,
        revoked_at: None,
    }
}

async fn issued(repo: &dyn KeyRepository, key: &ApiKey) -> ApiKey {
    match repo.issue(key).await.expect("issue") {
        Issued::Issued(stored) => stored,
        other => panic!("{other:?}"),
    }
}

pub async fn a_key_is_found_by_its_hash_with_its_principal_and_role(repo: &dyn KeyRepository) {
    let shop = unique("shop");
    let k = key(&shop, Role::Client);
    let stored = issued(repo, &k).await;
    assert_eq!(stored, k, "stored as given");
    assert_eq!(
        repo.key_by_hash(&k.key_hash).await.expect("find"),
        Some(k.clone())
    );
    assert_eq!(
        repo.key_by_hash(&unique("no-such-hash"))
            .await
            .expect("find"),
        None
    );
    let listed = repo.list_keys().await.expect("list");
    assert!(listed.contains(&k), "listed: {listed:?}");
}

pub async fn a_principal_keeps_its_role_and_holds_several_keys(repo: &dyn KeyRepository) {
    let grace = unique("grace");
    let first = issued(repo, &key(&grace, Role::Operator)).await;
    let second = issued(repo, &key(&grace, Role::Operator)).await;
    assert_ne!(first.key_id, second.key_id);
    for k in [&first, &second] {
        let found = repo.key_by_hash(&k.key_hash).await.expect("find");
        assert_eq!(
            found.map(|f| (f.principal, f.role)),
            Some((grace.clone(), Role::Operator))
        );
    }
    // The same name as a client: refused, and nothing is stored.
    let as_client = key(&grace, Role::Client);
    assert_eq!(
        repo.issue(&as_client).await.expect("issue"),
        Issued::RoleMismatch {
            existing: Role::Operator
        }
    );
    assert_eq!(
        repo.key_by_hash(&as_client.key_hash).await.expect("find"),
        None
    );
    let listed = repo.list_keys().await.expect("list");
    assert!(!listed.iter().any(|k| k.key_id == as_client.key_id));
}

pub async fn revocation_is_kept_and_idempotent(repo: &dyn KeyRepository) {
    let k = issued(repo, &key(&unique("shop"), Role::Client)).await;
    let at = now();
    let revoked = repo.revoke(&k.key_id, at).await.expect("revoke");
    assert_eq!(revoked.as_ref().and_then(|r| r.revoked_at), Some(at));
    let again = repo
        .revoke(&k.key_id, at + Duration::seconds(5))
        .await
        .expect("revoke again");
    assert_eq!(
        again.and_then(|r| r.revoked_at),
        Some(at),
        "the first time is kept"
    );
    let found = repo.key_by_hash(&k.key_hash).await.expect("find");
    assert_eq!(
        found.and_then(|f| f.revoked_at),
        Some(at),
        "found, and revoked"
    );
    assert_eq!(
        repo.revoke(&unique("no-such-key"), at)
            .await
            .expect("revoke"),
        None
    );
}

pub async fn last_use_only_moves_forward(repo: &dyn KeyRepository) {
    let k = issued(repo, &key(&unique("shop"), Role::Client)).await;
    let later = now() + Duration::seconds(10);
    repo.touch(&k.key_id, later).await.expect("touch");
    repo.touch(&k.key_id, later - Duration::seconds(5))
        .await
        .expect("touch earlier");
    let found = repo.key_by_hash(&k.key_hash).await.expect("find");
    assert_eq!(found.and_then(|f| f.last_used_at), Some(later));
    // An unknown key's use is no error: it may have been deleted with its store.
    repo.touch(&unique("no-such-key"), later)
        .await
        .expect("touch unknown");
}
