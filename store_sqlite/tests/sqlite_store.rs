//! `SqliteStore` as a file: migrations on reopen, data surviving a restart, and two stores
//! (two processes) sharing one file without overselling.

use std::sync::Arc;
use store::{Created, InventoryRepository, KeyRepository, OrderStatus, PaymentGateway, Reserved};
use store::{OrderListing, OrderRecords};
use store_sqlite::SCHEMA_VERSION;
use store_sqlite::SqliteStore;
use testkit::{execution_arn, keys, line, new_order, order_id, unique};

#[tokio::test]
async fn reopening_applies_no_migration_twice_and_keeps_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let id = order_id("durable");
    let sku = unique("sku");
    let (order, charge) = {
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.schema_version().await.unwrap(), SCHEMA_VERSION);
        let Created::New(_) = store
            .create(new_order(&id), &execution_arn(&id))
            .await
            .unwrap()
        else {
            panic!("new order expected");
        };
        let order = store
            .advance(&id, OrderStatus::Reserved, None)
            .await
            .unwrap();
        store.set_available(&sku, 3).await.unwrap();
        store.reserve(&id, &[line(&sku, 2)]).await.unwrap();
        let charge = providers::SandboxPayments::new(store.clone())
            .charge(&store::ChargeRequest {
                idempotency_key: id.charge_key(),
                order_id: id.clone(),
                amount_cents: order.new.amount_cents,
                currency: order.new.currency.clone(),
                payment_method: order.new.payment_method.clone(),
            })
            .await
            .unwrap();
        let order = store.record_charge(&id, &charge).await.unwrap();
        (order, charge)
    };
    // The steps create their tables without IF NOT EXISTS: applying one again would fail here.
    for _ in 0..2 {
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.schema_version().await.unwrap(), SCHEMA_VERSION);
        assert_eq!(store.get(&id).await.unwrap(), Some(order.clone()));
        let level = store.stock(&sku).await.unwrap().unwrap();
        assert_eq!((level.available, level.reserved), (1, 2));
        assert!(matches!(
            store.reserve(&id, &[line(&sku, 1)]).await.unwrap(),
            Reserved::Existing(_)
        ));
        assert_eq!(
            providers::SandboxPayments::new(store.clone())
                .find_charge(&id)
                .await
                .unwrap(),
            Some(charge.clone())
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_stores_on_one_file_never_oversell() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    // Two handles with their own connections, as two processes would have.
    let stores: Vec<Arc<dyn InventoryRepository>> = vec![
        Arc::new(SqliteStore::open(&path).unwrap()),
        Arc::new(SqliteStore::open(&path).unwrap()),
    ];
    let sku = unique("sku");
    stores[0].set_available(&sku, 3).await.unwrap();
    let tasks: Vec<_> = (0..12)
        .map(|i| {
            let (inv, sku) = (stores[i % 2].clone(), sku.clone());
            tokio::spawn(async move { inv.reserve(&order_id("two"), &[line(&sku, 1)]).await })
        })
        .collect();
    let mut won = 0;
    for task in tasks {
        if let Reserved::New(_) = task.await.unwrap().unwrap() {
            won += 1;
        }
    }
    assert_eq!(won, 3);
    let level = stores[1].stock(&sku).await.unwrap().unwrap();
    assert_eq!((level.available, level.reserved), (0, 3));
}

/// Opening a session deletes those that expired (not the one it opens, whatever its expiry),
/// and leaves the live ones.
#[tokio::test]
async fn opening_a_session_purges_the_expired_ones() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("store.db")).unwrap();
    let mut expired = keys::session("ops-ada", "key-hash-1");
    expired.created_at -= chrono::Duration::hours(9);
    expired.expires_at -= chrono::Duration::hours(9);
    store.open_session(&expired).await.unwrap();
    assert_eq!(
        store.session(&expired.session_hash).await.unwrap(),
        Some(expired.clone()),
        "kept until the next opening"
    );
    let live = keys::session("ops-ada", "key-hash-1");
    store.open_session(&live).await.unwrap();
    let next = keys::session("ops-grace", "key-hash-2");
    store.open_session(&next).await.unwrap();
    assert_eq!(store.session(&expired.session_hash).await.unwrap(), None);
    assert_eq!(
        store.session(&live.session_hash).await.unwrap(),
        Some(live),
        "a live session stays"
    );
    assert_eq!(store.session(&next.session_hash).await.unwrap(), Some(next));
}

#[test]
fn a_missing_directory_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let err = SqliteStore::open(dir.path().join("no/such/dir/store.db")).unwrap_err();
    assert!(!err.is_transient(), "{err:?}");
}

#[tokio::test]
async fn a_read_only_store_reads_beside_the_writer_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let writer = SqliteStore::open(&path).unwrap();
    let reader = SqliteStore::open_read_only(&path).unwrap();
    let id = order_id("read-only");
    writer
        .create(new_order(&id), &execution_arn(&id))
        .await
        .unwrap();
    // It sees what the writer commits, as it commits it.
    assert_eq!(
        reader.get(&id).await.unwrap(),
        writer.get(&id).await.unwrap()
    );
    let moved = writer
        .advance(&id, OrderStatus::Reserved, None)
        .await
        .unwrap();
    assert_eq!(reader.get(&id).await.unwrap(), Some(moved.clone()));
    let listed = reader.list_orders(None, None, 10).await.unwrap();
    assert_eq!(listed.items, std::slice::from_ref(&moved));
    // A write through it is refused by SQLite, and changes nothing.
    let refused = reader.advance(&id, OrderStatus::Charged, None).await;
    assert!(refused.is_err(), "{refused:?}");
    assert_eq!(writer.get(&id).await.unwrap(), Some(moved));
}

#[test]
fn a_read_only_store_needs_an_existing_file_of_this_schema_version() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.db");
    assert!(SqliteStore::open_read_only(&missing).is_err());
    assert!(!missing.exists(), "nothing was created");

    let old = dir.path().join("old.db");
    // A file no build has migrated yet (version 0: no step applied).
    let conn = rusqlite::Connection::open(&old).unwrap();
    conn.execute_batch("CREATE TABLE unrelated (x INTEGER)")
        .unwrap();
    drop(conn);
    let err = SqliteStore::open_read_only(&old).unwrap_err().to_string();
    assert!(err.contains("schema version 0"), "{err}");
    assert!(err.contains("migrate"), "{err}");
}

/// The service stopped: its last connection closed and checkpointed the WAL away. The audit
/// still reads the file, read-only.
#[tokio::test]
async fn a_read_only_store_reads_a_file_no_one_has_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.db");
    let id = order_id("closed");
    {
        let store = SqliteStore::open(&path).unwrap();
        store
            .create(new_order(&id), &execution_arn(&id))
            .await
            .unwrap();
    }
    let reader = SqliteStore::open_read_only(&path).unwrap();
    assert_eq!(
        reader.get(&id).await.unwrap().map(|o| o.status),
        Some(OrderStatus::Accepted)
    );
}

#[tokio::test]
async fn accepted_orders_page_through_the_unstarted_orders_alone_in_the_order_they_were_stored() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("store.db")).unwrap();
    let ids: Vec<_> = (0..7).map(|i| order_id(&format!("queued-{i}"))).collect();
    for id in &ids {
        store
            .create(new_order(id), &execution_arn(id))
            .await
            .unwrap();
    }
    // Started, and on: no longer what a start queue held.
    for moved in [&ids[1], &ids[4]] {
        store
            .advance(moved, OrderStatus::Reserved, None)
            .await
            .unwrap();
    }
    let mut seen = Vec::new();
    let mut after = None;
    let mut pages = 0;
    loop {
        let page = store.accepted_orders(after.as_deref(), 2).await.unwrap();
        pages += 1;
        assert!(page.items.len() <= 2);
        seen.extend(page.items.iter().map(|o| o.id().clone()));
        assert!(page.items.iter().all(|o| o.status == OrderStatus::Accepted));
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    let expected: Vec<_> = [0, 2, 3, 5, 6].iter().map(|&i| ids[i].clone()).collect();
    assert_eq!(seen, expected);
    assert_eq!(pages, 3, "two full pages and a last one");
    // The plan reads the status index, not the whole table.
    let conn = rusqlite::Connection::open(dir.path().join("store.db")).unwrap();
    let plan: Vec<String> = conn
        .prepare(
            "EXPLAIN QUERY PLAN SELECT order_id FROM orders WHERE status = 'ACCEPTED' \
             AND approval_requested_at IS NULL AND rowid > 0 ORDER BY rowid LIMIT 2",
        )
        .unwrap()
        .query_map([], |r| r.get::<_, String>(3))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(
        plan.iter()
            .any(|p| p.contains("orders_by_status_requested"))
            && !plan.iter().any(|p| p.contains("TEMP B-TREE")),
        "{plan:?}"
    );
}

/// Listings wait for one of the store's few read connections as tasks, not as blocking threads
/// parked on a connection's lock: a burst of them does not make the runtime start a thread for
/// each (it would, up to 512, each keeping its stack and allocator heap).
#[cfg(target_os = "linux")]
#[test]
fn a_burst_of_listings_waits_for_a_read_connection_without_a_thread_each() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("store-burst")
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("store.db")).unwrap();
        store
            .create(new_order(&order_id("burst")), "arn:burst")
            .await
            .unwrap();
        let mut reads = tokio::task::JoinSet::new();
        for _ in 0..400 {
            let store = store.clone();
            reads.spawn(async move { store.accepted_orders(None, 10).await });
        }
        while let Some(read) = reads.join_next().await {
            assert_eq!(read.unwrap().unwrap().items.len(), 1);
        }
        // Two workers and the blocking threads the listings used: a few for each of the four
        // read connections (a thread finishing one listing may not be idle yet when the next
        // starts), never one a listing.
        let threads = std::fs::read_dir("/proc/self/task")
            .unwrap()
            .flatten()
            .filter(|t| {
                std::fs::read_to_string(t.path().join("comm"))
                    .is_ok_and(|n| n.starts_with("store-burst"))
            })
            .count();
        assert!(threads <= 40, "{threads} threads served 400 listings");
    });
}
