//! The repository and gateway contract, run against `SqliteStore` and the sandbox gateways on a
//! fresh temporary file per test.

use std::sync::Arc;
use store::contract::Adapters;
use store::{Durability, SqliteStore};

async fn fresh() -> Adapters {
    let dir = tempfile::tempdir().expect("temp dir");
    // Durability does not change what a commit means to other connections, only to a power cut.
    let store = SqliteStore::open_with(dir.path().join("store.db"), Durability::Normal)
        .expect("open store");
    Adapters {
        orders: Arc::new(store.clone()),
        inventory: Arc::new(store.clone()),
        payments: Arc::new(store.payments()),
        shipping: Arc::new(store.shipping()),
        keys: Arc::new(store.clone()),
        webhooks: Arc::new(store.clone()),
        guard: Box::new(dir),
    }
}

store::contract_suite!(fresh);
