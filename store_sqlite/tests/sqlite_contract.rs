//! The repository and gateway contract, run against `SqliteStore` and the sandbox gateways on a
//! fresh temporary file per test.

use std::sync::Arc;
use store_sqlite::Durability;
use store_sqlite::SqliteStore;
use testkit::Adapters;

async fn fresh() -> Adapters {
    let dir = tempfile::tempdir().expect("temp dir");
    // Durability does not change what a commit means to other connections, only to a power cut.
    let store = SqliteStore::open_with(dir.path().join("store.db"), Durability::Normal)
        .expect("open store");
    Adapters {
        orders: Arc::new(store.clone()),
        inventory: Arc::new(store.clone()),
        payments: Arc::new(providers::SandboxPayments::new(store.clone())),
        shipping: Arc::new(providers::SandboxShipping::new(store.clone())),
        keys: Arc::new(store.clone()),
        webhooks: Arc::new(store.clone()),
        guard: Box::new(dir),
    }
}

testkit::contract_suite!(fresh);
