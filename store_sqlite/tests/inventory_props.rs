//! Property: any sequence of reserve / release / ship over a few SKUs and orders conserves stock
//! (available + reserved + shipped == stocked, for every SKU, after every step), never goes
//! negative, and answers as a simple model of the contract says.

use proptest::prelude::*;
use std::collections::BTreeMap;
use store::{InventoryRepository, OrderId, Released, Reserved, ReservedLine, StoreError};
use store_sqlite::Durability;
use store_sqlite::SqliteStore;
use testkit::line;

const SKUS: usize = 3;
const ORDERS: usize = 5;

#[derive(Debug, Clone)]
enum Op {
    Reserve(usize, Vec<(usize, u32)>),
    Release(usize),
    Ship(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..ORDERS, prop::collection::vec((0..SKUS, 1..4u32), 1..4))
            .prop_map(|(o, lines)| Op::Reserve(o, lines)),
        1 => (0..ORDERS).prop_map(Op::Release),
        1 => (0..ORDERS).prop_map(Op::Ship),
    ]
}

/// What the contract says an order's reservation is.
#[derive(Debug, Clone, PartialEq)]
enum Model {
    Held(BTreeMap<usize, u64>),
    Released,
    Shipped,
    /// Released before anything was reserved.
    Tombstone,
}

fn sku(i: usize) -> String {
    format!("sku-{i}")
}

fn order(i: usize) -> OrderId {
    OrderId::parse(&format!("order-{i}")).unwrap()
}

async fn run(stocked: Vec<u64>, ops: Vec<Op>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open_with(dir.path().join("store.db"), Durability::Normal).unwrap();
    for (i, &n) in stocked.iter().enumerate() {
        store.set_available(&sku(i), n).await.unwrap();
    }
    let mut available = stocked.clone();
    let (mut reserved, mut shipped) = (vec![0u64; SKUS], vec![0u64; SKUS]);
    let mut orders: BTreeMap<usize, Model> = BTreeMap::new();

    for op in ops {
        match op {
            Op::Reserve(o, lines) => {
                let lines: Vec<ReservedLine> =
                    lines.iter().map(|&(s, q)| line(&sku(s), q)).collect();
                let mut want: BTreeMap<usize, u64> = BTreeMap::new();
                for l in &lines {
                    let i: usize = l.sku[4..].parse().unwrap();
                    *want.entry(i).or_default() += u64::from(l.quantity);
                }
                let got = store.reserve(&order(o), &lines).await.unwrap();
                match (orders.get(&o), got) {
                    (Some(_), Reserved::Existing(_)) => {}
                    (None, Reserved::New(_)) => {
                        prop_assert!(want.iter().all(|(&i, &q)| available[i] >= q));
                        for (&i, &q) in &want {
                            available[i] -= q;
                            reserved[i] += q;
                        }
                        orders.insert(o, Model::Held(want));
                    }
                    (
                        None,
                        Reserved::OutOfStock {
                            sku: short,
                            requested,
                            available: seen,
                        },
                    ) => {
                        let i: usize = short[4..].parse().unwrap();
                        prop_assert_eq!(seen, available[i]);
                        prop_assert!(u64::from(requested) > seen);
                    }
                    (model, got) => prop_assert!(false, "{model:?} but {got:?}"),
                }
            }
            Op::Release(o) => {
                let got = store.release(&order(o)).await.unwrap();
                let next = match (orders.get(&o), got) {
                    (None | Some(Model::Tombstone), Released::NothingReserved) => Model::Tombstone,
                    (Some(Model::Held(want)), Released::Now(_)) => {
                        for (&i, &q) in want {
                            available[i] += q;
                            reserved[i] -= q;
                        }
                        Model::Released
                    }
                    (Some(Model::Released), Released::Already(_)) => Model::Released,
                    (Some(Model::Shipped), Released::Shipped(_)) => Model::Shipped,
                    (model, got) => {
                        return Err(TestCaseError::fail(format!("{model:?} but {got:?}")));
                    }
                };
                orders.insert(o, next);
            }
            Op::Ship(o) => {
                let got = store.mark_shipped(&order(o)).await;
                match (orders.get(&o).cloned(), got) {
                    (Some(Model::Held(want)), Ok(_)) => {
                        for (&i, &q) in &want {
                            reserved[i] -= q;
                            shipped[i] += q;
                        }
                        orders.insert(o, Model::Shipped);
                    }
                    (Some(Model::Shipped), Ok(_)) => {}
                    (
                        None | Some(Model::Released | Model::Tombstone),
                        Err(StoreError::NotFound(_)),
                    ) => {}
                    (model, got) => prop_assert!(false, "{model:?} but {got:?}"),
                }
            }
        }
        for i in 0..SKUS {
            let level = store.stock(&sku(i)).await.unwrap().unwrap();
            prop_assert_eq!(level.available + level.reserved + level.shipped, stocked[i]);
            prop_assert_eq!(
                (level.available, level.reserved, level.shipped),
                (available[i], reserved[i], shipped[i])
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        // tests/ has no lib.rs for the default to find; keep failures beside this file.
        failure_persistence: Some(Box::new(
            proptest::test_runner::FileFailurePersistence::WithSource("regressions"),
        )),
        ..ProptestConfig::default()
    })]

    #[test]
    fn stock_is_conserved_and_never_negative(
        stocked in prop::collection::vec(0..8u64, SKUS),
        ops in prop::collection::vec(op(), 1..40),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(run(stocked, ops))?;
    }
}
