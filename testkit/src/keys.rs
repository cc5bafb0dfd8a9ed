//! The contract of `KeyRepository`: keys found by their hash with their principal's name and
//! role, a principal's role kept for life, revocation and last use recorded once and forward;
//! console sessions stored, read back and closed.

use super::{now, unique};
use chrono::Duration;
use store::domain::*;
use store::ports::*;

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

/// A session of `principal`'s key `key_hash`, opened now, for a working day.
pub fn session(principal: &str, key_hash: &str) -> ConsoleSession {
    let opened = now();
    ConsoleSession {
        session_hash: unique("session-hash"),
        key_hash: key_hash.to_owned(),
        principal: principal.to_owned(),
        created_at: opened,
        expires_at: opened + Duration::hours(8),
    }
}

pub async fn a_session_is_read_back_until_closed_and_closing_is_idempotent(
    repo: &dyn KeyRepository,
) {
    let operator = issued(repo, &key(&unique("ops"), Role::Operator)).await;
    let opened = session(&operator.principal, &operator.key_hash);
    repo.open_session(&opened).await.expect("open");
    assert_eq!(
        repo.session(&opened.session_hash).await.expect("read"),
        Some(opened.clone()),
        "stored as given"
    );
    // A retry of the same opening (its answer lost) is no error, and changes nothing.
    repo.open_session(&opened).await.expect("open again");
    assert_eq!(
        repo.session(&opened.session_hash).await.expect("read"),
        Some(opened.clone())
    );
    // Another session of the same key is another session.
    let other = session(&operator.principal, &operator.key_hash);
    repo.open_session(&other).await.expect("open another");

    repo.close_session(&opened.session_hash)
        .await
        .expect("close");
    assert_eq!(
        repo.session(&opened.session_hash).await.expect("read"),
        None
    );
    repo.close_session(&opened.session_hash)
        .await
        .expect("closing again is no error");
    repo.close_session(&unique("no-such-session"))
        .await
        .expect("closing an unknown session is no error");
    assert_eq!(
        repo.session(&other.session_hash).await.expect("read"),
        Some(other),
        "only the closed session ended"
    );
    assert_eq!(
        repo.session(&unique("no-such-session"))
            .await
            .expect("read"),
        None
    );
}

/// The store returns an expired session as stored (until it purges it): the caller checks.
pub async fn an_expired_session_is_read_as_stored(repo: &dyn KeyRepository) {
    let mut expired = session(&unique("ops"), &unique("hash"));
    expired.created_at -= Duration::hours(9);
    expired.expires_at -= Duration::hours(9);
    repo.open_session(&expired).await.expect("open");
    let read = repo.session(&expired.session_hash).await.expect("read");
    assert!(
        read.is_none_or(|s| s == expired),
        "either purged already or as stored"
    );
}
