//! The leases on DynamoDB (moto): the repair loop's (one holder at a time, renewed while held,
//! taken over once its holder stops renewing it, given up at once on release) and the approval
//! keeper's shards (shared out among the holders alive).

use std::time::{Duration, Instant};
use store::Lease;
use store_dynamodb::DynamoStore;
use store_dynamodb::{DynamoLease, create_table};
use testkit::{moto, unique};

async fn table() -> DynamoStore {
    let client = moto::shared().client();
    let table = unique("lease");
    create_table(&client, &table).await.expect("create table");
    DynamoStore::new(client, table)
}

#[tokio::test]
async fn one_replica_holds_the_lease_and_another_takes_it_over_once_it_expires() {
    let store = table().await;
    let ttl = Duration::from_secs(2);
    let a = DynamoLease::new(store.clone(), "reconciler", "replica-a", ttl);
    let b = DynamoLease::new(store.clone(), "reconciler", "replica-b", ttl);
    assert!(a.hold().await.unwrap(), "the first taker gets it");
    assert!(
        !b.hold().await.unwrap(),
        "the other is refused while it is held"
    );
    assert!(a.hold().await.unwrap(), "its holder renews it");
    // Another lease of the same table is another item.
    let other = DynamoLease::new(store.clone(), "another-job", "replica-b", ttl);
    assert!(other.hold().await.unwrap());

    // A stops renewing (it died): B takes over once the lease expired, not before.
    let stopped = Instant::now();
    loop {
        if b.hold().await.unwrap() {
            break;
        }
        assert!(
            stopped.elapsed() < Duration::from_secs(20),
            "never taken over"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        stopped.elapsed() >= ttl - Duration::from_millis(500),
        "taken over early"
    );
    assert!(!a.hold().await.unwrap(), "the old holder is refused now");
}

#[tokio::test]
async fn a_released_lease_is_taken_at_once_and_a_release_by_another_changes_nothing() {
    let store = table().await;
    let long = Duration::from_secs(300);
    let a = DynamoLease::new(store.clone(), "reconciler", "replica-a", long);
    let b = DynamoLease::new(store.clone(), "reconciler", "replica-b", long);
    assert!(a.hold().await.unwrap());
    b.release().await.unwrap();
    assert!(
        !b.hold().await.unwrap(),
        "B's release did not free A's lease"
    );
    a.release().await.unwrap();
    assert!(
        b.hold().await.unwrap(),
        "free as soon as its holder gave it up"
    );
    assert!(!a.hold().await.unwrap());
}

/// The approval keeper's shards: shared out evenly among the holders alive, each shard held by
/// one of them, and all of them taken over by the one left when the other stops (dies).
#[tokio::test]
async fn shards_are_shared_evenly_held_once_and_taken_over_from_a_holder_that_died() {
    use store::ShardLeases;
    use store_dynamodb::DynamoShardLeases;
    let store = table().await;
    let ttl = Duration::from_secs(2);
    let holder = |name: &str| DynamoShardLeases::new(store.clone(), "keeper", name, ttl).unwrap();
    let (a, b) = (holder("replica_a"), holder("replica_b"));
    assert!(DynamoShardLeases::new(store.clone(), "keeper", "not-valid", ttl).is_err());
    const SHARDS: u32 = 17;

    assert_eq!(
        a.balance(SHARDS).await.unwrap().len(),
        17,
        "alone, A holds all"
    );
    assert!(b.balance(SHARDS).await.unwrap().is_empty(), "none free yet");
    // A sees B alive and gives up what is above its share; B takes it.
    assert_eq!(a.balance(SHARDS).await.unwrap().len(), 9);
    let (mut held_a, held_b) = (
        a.balance(SHARDS).await.unwrap(),
        b.balance(SHARDS).await.unwrap(),
    );
    assert_eq!(held_b.len(), 8, "{held_b:?}");
    held_a.extend(&held_b);
    held_a.sort_unstable();
    assert_eq!(
        held_a,
        (0..SHARDS).collect::<Vec<_>>(),
        "each shard held once"
    );
    // Balanced: another round changes nothing.
    assert_eq!(b.balance(SHARDS).await.unwrap(), held_b);

    // A stops balancing: once its leases and its mark of life expire, B takes every shard.
    let stopped = Instant::now();
    loop {
        let held = b.balance(SHARDS).await.unwrap();
        if held.len() == SHARDS as usize {
            break;
        }
        assert!(
            stopped.elapsed() < Duration::from_secs(20),
            "never taken over: {held:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Another comes and gets its share; a holder leaving gives its shards up at once.
    let c = holder("replica_c");
    c.balance(SHARDS).await.unwrap();
    b.balance(SHARDS).await.unwrap();
    assert_eq!(c.balance(SHARDS).await.unwrap().len(), 8);
    c.release_all(SHARDS).await.unwrap();
    assert_eq!(b.balance(SHARDS).await.unwrap().len(), SHARDS as usize);
}
