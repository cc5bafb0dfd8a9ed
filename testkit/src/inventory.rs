//! The contract of `InventoryRepository`: all-or-nothing reservations, one per order, releases
//! that are idempotent and recorded, and stock that is conserved and never negative, also under
//! concurrent orders.

use super::{all_pages, covered_once, covered_since, line, moment_apart, order_id, unique};
use std::sync::Arc;
use store::domain::*;
use store::error::StoreError;
use store::ports::*;

/// A fresh SKU stocked with `available` units.
async fn stocked(inv: &dyn InventoryRepository, available: u64) -> String {
    let sku = unique("sku");
    inv.set_available(&sku, available)
        .await
        .expect("set available");
    sku
}

async fn level(inv: &dyn InventoryRepository, sku: &str) -> (u64, u64, u64) {
    let s = inv.stock(sku).await.expect("stock").expect("stocked sku");
    (s.available, s.reserved, s.shipped)
}

async fn reserved_new(
    inv: &dyn InventoryRepository,
    id: &OrderId,
    lines: &[ReservedLine],
) -> Reservation {
    match inv.reserve(id, lines).await.expect("reserve") {
        Reserved::New(r) => r,
        other => panic!("expected a new reservation, got {other:?}"),
    }
}

pub async fn set_available_reports_the_level(inv: &dyn InventoryRepository) {
    let sku = unique("sku");
    assert_eq!(inv.stock(&sku).await.expect("stock"), None);
    let set = inv.set_available(&sku, 7).await.expect("set");
    let expected = StockLevel {
        sku: sku.clone(),
        available: 7,
        reserved: 0,
        shipped: 0,
        stocked: 7,
        price: None,
    };
    assert_eq!(set, expected);
    assert_eq!(inv.stock(&sku).await.expect("stock"), Some(expected));
    // A recount sets what is available; what is held stays held.
    reserved_new(inv, &order_id("recount"), &[line(&sku, 2)]).await;
    let set = inv.set_available(&sku, 10).await.expect("recount");
    assert_eq!((set.available, set.reserved, set.shipped), (10, 2, 0));
    assert_eq!(set.stocked, 12, "the held units count too");
}

/// A price is set beside the count, and each stays when only the other is set; the prices of
/// several SKUs read at once leave out those never priced or never stocked.
pub async fn prices_are_kept_beside_the_count(inv: &dyn InventoryRepository) {
    let eur = |cents| Price {
        cents,
        currency: "EUR".to_owned(),
    };
    let (priced, counted, fresh) = (unique("sku"), unique("sku"), unique("sku"));
    inv.set_stock(&priced, Some(4), Some(&eur(2500)))
        .await
        .expect("count and price");
    inv.set_available(&counted, 3).await.expect("count");
    // A price alone for a SKU never stocked stocks it with nothing available.
    let level = inv
        .set_stock(&fresh, None, Some(&eur(99)))
        .await
        .expect("price only");
    assert_eq!(
        (level.available, level.stocked, level.price),
        (0, 0, Some(eur(99)))
    );
    // A recount keeps the price; a new price keeps the count.
    let level = inv.set_available(&priced, 6).await.expect("recount");
    assert_eq!((level.available, level.price), (6, Some(eur(2500))));
    let level = inv
        .set_stock(&priced, None, Some(&eur(2600)))
        .await
        .expect("reprice");
    assert_eq!((level.available, level.price), (6, Some(eur(2600))));
    let read = inv.stock(&priced).await.expect("stock").expect("stocked");
    assert_eq!(read.price, Some(eur(2600)));
    let never = unique("sku");
    let prices = inv
        .prices(&[&priced, &counted, &fresh, &never, &priced])
        .await
        .expect("prices");
    assert_eq!(
        prices,
        std::collections::HashMap::from([(priced.clone(), eur(2600)), (fresh.clone(), eur(99))])
    );
}

/// What a SKU holds in all changes only with a count: reservations, releases and shipments
/// move units between available, reserved and shipped, and the sum stays `stocked`.
pub async fn stocked_changes_only_with_a_count(inv: &dyn InventoryRepository) {
    let sku = stocked(inv, 5).await;
    let conserved = |s: &StockLevel| {
        assert_eq!(s.available + s.reserved + s.shipped, s.stocked, "{s:?}");
    };
    let (shipped, released) = (order_id("stocked-ship"), order_id("stocked-release"));
    reserved_new(inv, &shipped, &[line(&sku, 2)]).await;
    reserved_new(inv, &released, &[line(&sku, 1)]).await;
    inv.mark_shipped(&shipped).await.expect("ship");
    inv.release(&released).await.expect("release");
    let level = inv.stock(&sku).await.expect("stock").expect("stocked");
    assert_eq!((level.available, level.shipped, level.stocked), (3, 2, 5));
    conserved(&level);
    // A recount of 4 on the shelf: 2 more went out the door than were stocked, so 6 in all.
    let recounted = inv.set_available(&sku, 4).await.expect("recount");
    assert_eq!(recounted.stocked, 6);
    conserved(&recounted);
    assert_eq!(inv.stock(&sku).await.expect("stock"), Some(recounted));
}

/// Listing pages through every SKU and every reservation once, each as it is stored (the
/// marker of a release before any reservation included).
pub async fn listing_pages_cover_every_sku_and_reservation_once(inv: &dyn InventoryRepository) {
    let mut skus = Vec::new();
    for n in 0..5 {
        skus.push(stocked(inv, 10 + n).await);
    }
    let mut orders = Vec::new();
    for sku in &skus[..4] {
        let id = order_id("listed");
        reserved_new(inv, &id, &[line(sku, 1)]).await;
        orders.push(id);
    }
    inv.mark_shipped(&orders[0]).await.expect("ship");
    let marker = order_id("listed-marker");
    inv.release(&marker).await.expect("release");
    orders.push(marker);

    let levels = all_pages(2, |after| async move {
        inv.list_stock(after.as_deref(), 2).await
    })
    .await;
    let keys: Vec<String> = levels.iter().map(|s| s.sku.clone()).collect();
    covered_once(&keys, &skus);
    for sku in &skus {
        let listed = levels.iter().find(|s| &s.sku == sku);
        assert_eq!(listed, inv.stock(sku).await.expect("stock").as_ref());
    }

    let reservations = all_pages(2, |after| async move {
        inv.list_reservations(None, after.as_deref(), 2).await
    })
    .await;
    let keys: Vec<String> = reservations
        .iter()
        .map(|r| r.order_id.to_string())
        .collect();
    let ours: Vec<String> = orders.iter().map(ToString::to_string).collect();
    covered_once(&keys, &ours);
    for id in &orders {
        let listed = reservations.iter().find(|r| &r.order_id == id);
        assert_eq!(
            listed,
            inv.reservation(id).await.expect("reservation").as_ref()
        );
    }

    // With `since`: the reservations (and release markers) made from then on only.
    let since = moment_apart().await;
    let mut later = Vec::new();
    for sku in &skus[..2] {
        let id = order_id("listed-later");
        reserved_new(inv, &id, &[line(sku, 1)]).await;
        later.push(id.to_string());
    }
    let marker = order_id("listed-later-marker");
    inv.release(&marker).await.expect("release");
    later.push(marker.to_string());
    inv.release(&orders[1]).await.expect("release");
    let listed = all_pages(2, |after| async move {
        inv.list_reservations(Some(since), after.as_deref(), 2)
            .await
    })
    .await;
    let keys: Vec<String> = listed.iter().map(|r| r.order_id.to_string()).collect();
    covered_since(&keys, &later, &ours);
}

pub async fn unknown_sku_is_out_of_stock(inv: &dyn InventoryRepository) {
    let sku = unique("never-stocked");
    let id = order_id("unknown-sku");
    let got = inv.reserve(&id, &[line(&sku, 1)]).await.expect("reserve");
    assert_eq!(
        got,
        Reserved::OutOfStock {
            sku,
            requested: 1,
            available: 0
        }
    );
    assert_eq!(inv.reservation(&id).await.expect("reservation"), None);
}

pub async fn reserve_is_all_or_nothing(inv: &dyn InventoryRepository) {
    let plenty = stocked(inv, 10).await;
    let scarce = stocked(inv, 2).await;
    let id = order_id("all-or-nothing");
    let got = inv
        .reserve(&id, &[line(&plenty, 4), line(&scarce, 3)])
        .await
        .expect("reserve");
    assert_eq!(
        got,
        Reserved::OutOfStock {
            sku: scarce.clone(),
            requested: 3,
            available: 2
        }
    );
    assert_eq!(level(inv, &plenty).await, (10, 0, 0), "nothing was taken");
    assert_eq!(level(inv, &scarce).await, (2, 0, 0));
    assert_eq!(inv.reservation(&id).await.expect("reservation"), None);

    // One SKU on two lines is checked against the sum.
    let got = inv
        .reserve(&id, &[line(&scarce, 1), line(&scarce, 2)])
        .await
        .expect("reserve");
    assert!(
        matches!(
            got,
            Reserved::OutOfStock {
                requested: 3,
                available: 2,
                ..
            }
        ),
        "{got:?}"
    );

    // After an out-of-stock answer the same order may still reserve what fits.
    let lines = [line(&plenty, 4), line(&scarce, 1), line(&scarce, 1)];
    let r = reserved_new(inv, &id, &lines).await;
    assert_eq!(
        (r.lines.as_slice(), r.status),
        (&lines[..], ReservationStatus::Held)
    );
    assert_eq!(level(inv, &plenty).await, (6, 4, 0));
    assert_eq!(level(inv, &scarce).await, (0, 2, 0));
    assert_eq!(inv.reservation(&id).await.expect("reservation"), Some(r));
}

pub async fn one_reservation_per_order(inv: &dyn InventoryRepository) {
    let sku = stocked(inv, 5).await;
    let id = order_id("one-reservation");
    let first = reserved_new(inv, &id, &[line(&sku, 2)]).await;
    // A retried step, even with other lines, gets the first reservation and takes nothing.
    assert_eq!(
        inv.reserve(&id, &[line(&sku, 2)]).await.expect("again"),
        Reserved::Existing(first.clone())
    );
    assert_eq!(
        inv.reserve(&id, &[line(&sku, 1)]).await.expect("other"),
        Reserved::Existing(first)
    );
    assert_eq!(level(inv, &sku).await, (3, 2, 0));
}

pub async fn release_is_idempotent_and_noop_without_reservation(inv: &dyn InventoryRepository) {
    let sku = stocked(inv, 5).await;
    let id = order_id("release");
    let held = reserved_new(inv, &id, &[line(&sku, 3)]).await;
    let released = Reservation {
        status: ReservationStatus::Released,
        ..held
    };
    assert_eq!(
        inv.release(&id).await.expect("release"),
        Released::Now(released.clone())
    );
    assert_eq!(level(inv, &sku).await, (5, 0, 0));
    assert_eq!(
        inv.release(&id).await.expect("again"),
        Released::Already(released.clone())
    );
    assert_eq!(level(inv, &sku).await, (5, 0, 0), "released once");
    assert_eq!(
        inv.reserve(&id, &[line(&sku, 1)]).await.expect("late"),
        Reserved::Existing(released)
    );

    // Compensation before the forward step: a recorded no-op that blocks a late reserve.
    let never = order_id("never-reserved");
    assert_eq!(
        inv.release(&never).await.expect("release"),
        Released::NothingReserved
    );
    assert_eq!(
        inv.release(&never).await.expect("again"),
        Released::NothingReserved
    );
    match inv
        .reserve(&never, &[line(&sku, 1)])
        .await
        .expect("late reserve")
    {
        Reserved::Existing(r) => {
            assert_eq!((r.status, r.lines.len()), (ReservationStatus::Released, 0));
        }
        other => panic!("a reserve after the release must not take stock, got {other:?}"),
    }
    assert_eq!(level(inv, &sku).await, (5, 0, 0));
}

pub async fn release_after_ship_keeps_stock_shipped(inv: &dyn InventoryRepository) {
    let sku = stocked(inv, 4).await;
    let id = order_id("shipped");
    reserved_new(inv, &id, &[line(&sku, 3)]).await;
    let shipped = inv.mark_shipped(&id).await.expect("ship");
    assert_eq!(shipped.status, ReservationStatus::Shipped);
    assert_eq!(level(inv, &sku).await, (1, 0, 3));
    assert_eq!(
        inv.release(&id).await.expect("release"),
        Released::Shipped(shipped)
    );
    assert_eq!(level(inv, &sku).await, (1, 0, 3));
}

pub async fn ship_is_idempotent_and_needs_a_held_reservation(inv: &dyn InventoryRepository) {
    let sku = stocked(inv, 4).await;
    let id = order_id("ship");
    reserved_new(inv, &id, &[line(&sku, 2)]).await;
    let first = inv.mark_shipped(&id).await.expect("ship");
    assert_eq!(inv.mark_shipped(&id).await.expect("again"), first);
    assert_eq!(level(inv, &sku).await, (2, 0, 2));

    let missing = order_id("ship-missing");
    assert!(matches!(
        inv.mark_shipped(&missing).await,
        Err(StoreError::NotFound(_))
    ));
    let released = order_id("ship-released");
    reserved_new(inv, &released, &[line(&sku, 1)]).await;
    inv.release(&released).await.expect("release");
    assert!(matches!(
        inv.mark_shipped(&released).await,
        Err(StoreError::NotFound(_))
    ));
    assert_eq!(level(inv, &sku).await, (2, 0, 2));
}

/// 20 orders race for 5 units of one SKU (and 1 unit each of a shared second SKU with plenty):
/// exactly 5 get their units, and the counts add up.
pub async fn concurrent_orders_never_oversell_the_last_unit(inv: Arc<dyn InventoryRepository>) {
    let last = stocked(&*inv, 5).await;
    let plenty = stocked(&*inv, 100).await;
    let barrier = Arc::new(tokio::sync::Barrier::new(20));
    let tasks: Vec<_> = (0..20)
        .map(|_| {
            let (inv, barrier) = (inv.clone(), barrier.clone());
            let lines = vec![line(&plenty, 1), line(&last, 1)];
            tokio::spawn(async move {
                barrier.wait().await;
                inv.reserve(&order_id("race"), &lines).await
            })
        })
        .collect();
    let mut won = 0;
    for task in tasks {
        match task.await.expect("task").expect("reserve") {
            Reserved::New(_) => won += 1,
            Reserved::OutOfStock { sku, available, .. } => {
                assert_eq!((sku, available), (last.clone(), 0));
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(won, 5, "exactly the units in stock were sold");
    assert_eq!(level(&*inv, &last).await, (0, 5, 0));
    assert_eq!(
        level(&*inv, &plenty).await,
        (95, 5, 0),
        "losers took nothing of the other SKU"
    );
}
