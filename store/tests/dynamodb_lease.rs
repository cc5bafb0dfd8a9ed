//! The repair loop's lease on DynamoDB (moto): one holder at a time, renewed while held, taken
//! over once its holder stops renewing it, given up at once on release.

use std::time::{Duration, Instant};
use store::DynamoStore;
use store::Lease;
use store::contract::{moto, unique};
use store::dynamodb::{DynamoLease, create_table};

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
