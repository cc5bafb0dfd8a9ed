//! What the sandbox provider's ledger holds, read straight from the store's SQLite file (the
//! ports only show an order's first charge; the ledger shows every one).

use rusqlite::{Connection, OpenFlags};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Per order: the charges and the refunds in the ledger, with their amounts.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Money {
    pub charges: Vec<u64>,
    pub refunds: Vec<u64>,
}

/// The store's file: the harness keeps it next to the engine's.
pub fn store_path(engine_db: &Path) -> PathBuf {
    engine_db
        .parent()
        .expect("the engine file is in a directory")
        .join("store.db")
}

pub fn read(store_db: &Path) -> BTreeMap<String, Money> {
    let conn = Connection::open_with_flags(
        store_db,
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .expect("the store file opens read-only");
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .unwrap();
    let mut ledger: BTreeMap<String, Money> = BTreeMap::new();
    for (table, refunds) in [("sandbox_charges", false), ("sandbox_refunds", true)] {
        let mut stmt = conn
            .prepare(&format!("SELECT order_id, amount_cents FROM {table}"))
            .unwrap();
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
            .unwrap();
        for row in rows {
            let (order, amount) = row.unwrap();
            let money = ledger.entry(order).or_default();
            let amount = u64::try_from(amount).expect("amounts are positive");
            if refunds {
                money.refunds.push(amount);
            } else {
                money.charges.push(amount);
            }
        }
    }
    ledger
}
