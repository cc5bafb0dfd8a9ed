//! The repository and gateway contract as a test suite any adapter runs: each `pub async fn`
//! states one promise of a port (see `ports.rs`) and panics when the adapter breaks it.
//! [`contract_suite!`](crate::contract_suite) turns them into one `#[tokio::test]` each for an
//! adapter. Compiled with the `contract` feature, which the crate's own tests enable.
//!
//! Tests use fresh order ids and SKUs, so they also hold on a shared, non-empty store (a
//! DynamoDB table that outlives the run), and fixed-millisecond timestamps, which any backend
//! stores exactly.

pub mod fake_easypost;
pub mod fake_stripe;
pub mod gateways;
pub mod inventory;
pub mod keys;
pub mod moto;
pub mod orders;
pub mod webhooks;

use chrono::{DateTime, SubsecRound, Utc};
use std::any::Any;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use store::domain::*;
use store::ports::*;

/// The adapters under test, fresh for each test, with whatever must live as long as they do
/// (a temporary directory, a container handle).
pub struct Adapters {
    pub orders: Arc<dyn OrderRepository>,
    pub inventory: Arc<dyn InventoryRepository>,
    pub payments: Arc<dyn PaymentGateway>,
    pub shipping: Arc<dyn ShippingGateway>,
    pub keys: Arc<dyn KeyRepository>,
    pub webhooks: Arc<dyn WebhookRepository>,
    pub guard: Box<dyn Any + Send + Sync>,
}

/// Serves `app` on a free loopback port for as long as the test's runtime runs; its base URL
/// (`http://127.0.0.1:PORT`). The fakes of the providers, and the tests' proxies, run so.
pub async fn serve_on_loopback(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let base_url = format!("http://{}", listener.local_addr().expect("address"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    base_url
}

/// An id no other test (or earlier run against a shared store) has used.
pub fn unique(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let run = Utc::now().timestamp_nanos_opt().unwrap_or_default();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}-{:x}{run:x}-{n}", std::process::id())
}

pub fn order_id(prefix: &str) -> OrderId {
    OrderId::parse(&unique(prefix)).expect("unique ids are valid order ids")
}

/// Now, to the millisecond.
pub fn now() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(3)
}

pub fn address(postal_code: &str) -> Address {
    Address {
        name: "Ada Lovelace".to_owned(),
        line1: "12 St James's Square".to_owned(),
        city: "London".to_owned(),
        postal_code: postal_code.to_owned(),
        country: "GB".to_owned(),
    }
}

/// The ARN an order's execution would have (stored with the order by `create`).
pub fn execution_arn(id: &OrderId) -> String {
    format!("arn:aws:states:local:0:execution:order-saga:{id}")
}

/// A new order of two lines, 2 × 1250 + 1 × 999 = 3499 cents.
pub fn new_order(id: &OrderId) -> NewOrder {
    NewOrder {
        order_id: id.clone(),
        customer_id: "cus_1".to_owned(),
        items: vec![
            LineItem {
                sku: "SKU-A".to_owned(),
                quantity: 2,
                unit_price_cents: 1250,
            },
            LineItem {
                sku: "SKU-B".to_owned(),
                quantity: 1,
                unit_price_cents: 999,
            },
        ],
        currency: "EUR".to_owned(),
        payment_method: "pm_card_visa".to_owned(),
        shipping_address: address("75001"),
        amount_cents: 3499,
        requires_approval: false,
        body_hash: "sha256:body-1".to_owned(),
        owner: Some("shop-1".to_owned()),
        created_at: now(),
    }
}

pub fn line(sku: &str, quantity: u32) -> ReservedLine {
    ReservedLine {
        sku: sku.to_owned(),
        quantity,
    }
}

pub fn failure(error: &str) -> Failure {
    Failure {
        error: error.to_owned(),
        cause: format!("{error} happened"),
    }
}

/// Every item of a paginated listing: `list(after)` is called with each page's cursor until a
/// page has none. Panics when a page holds more than `limit` items or the listing never ends.
pub async fn all_pages<T, E, F, Fut>(limit: u32, mut list: F) -> Vec<T>
where
    E: std::fmt::Debug,
    F: FnMut(Option<String>) -> Fut,
    Fut: std::future::Future<Output = Result<Page<T>, E>>,
{
    let mut items = Vec::new();
    let mut after = None;
    for _ in 0..100_000 {
        let page = list(after).await.expect("list a page");
        assert!(
            page.items.len() <= limit as usize,
            "a page of {} items, asked for {limit}",
            page.items.len()
        );
        items.extend(page.items);
        match page.next {
            Some(next) => after = Some(next),
            None => return items,
        }
    }
    panic!("the listing never ends");
}

/// Asserts that `keys` (of a whole listing) holds no key twice and each of `ours` once.
/// A moment with a few milliseconds on either side of it, so that what is made before it
/// and after it stays on its side where times are kept to the millisecond.
pub async fn moment_apart() -> DateTime<Utc> {
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let at = Utc::now();
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    at
}

/// A listing `since` a moment: `later` (made after it) covered once, none of `earlier`.
pub fn covered_since(keys: &[String], later: &[String], earlier: &[String]) {
    covered_once(keys, later);
    for key in earlier {
        assert!(
            !keys.contains(key),
            "{key} was made before `since`, yet listed"
        );
    }
}

pub fn covered_once(keys: &[String], ours: &[String]) {
    let mut sorted = keys.to_vec();
    sorted.sort();
    let before = sorted.len();
    sorted.dedup();
    assert_eq!(
        sorted.len(),
        before,
        "a listing showed an item twice: {keys:?}"
    );
    for key in ours {
        assert!(sorted.binary_search(key).is_ok(), "{key} was not listed");
    }
}

/// Generates one `#[tokio::test]` per contract test. `$fresh` is an async fn returning
/// [`Adapters`], called once per test.
///
/// ```text
/// async fn fresh() -> testkit::Adapters { … }
/// testkit::contract_suite!(fresh);
/// ```
#[macro_export]
macro_rules! contract_suite {
    ($fresh:path) => {
        $crate::contract_suite!(@each $fresh, orders, orders:
            create_is_conditional,
            get_of_an_unknown_order_is_none,
            execution_is_recorded_once,
            charge_is_recorded_once,
            charge_is_recorded_whatever_the_status,
            refund_is_recorded_once,
            status_moves_forward_only,
            failure_is_recorded_once_and_only_with_compensation,
            writes_to_an_unknown_order_are_not_found,
            park_keeps_first_request_time_and_latest_token,
            decision_is_recorded_once,
            decision_needs_a_parked_token,
            park_after_a_decision_changes_nothing,
            pending_approvals_oldest_first,
            a_decision_after_the_deadline_is_expired,
            an_expiry_closes_only_an_undecided_window_past_its_deadline,
            listing_pages_cover_every_order_once,
            finding_orders_lists_newest_first_by_owner_status_and_window,
            finding_orders_by_customer_prefix_lists_only_theirs,
            counts_by_status_are_exact_where_counted,
            an_incident_keeps_its_first_time_and_closes_with_the_end,
            resolving_closes_an_open_incident_once,
            actions_are_appended_in_order,
            open_incidents_page_oldest_first,
            a_cancellation_is_recorded_once_and_stops_the_shipment,
            a_shipment_begun_refuses_a_cancellation,
            a_cancellation_takes_the_parked_token_and_refuses_later_decisions,
            an_order_being_undone_is_not_cancelled_again
        );
        $crate::contract_suite!(@each $fresh, inventory, inventory:
            set_available_reports_the_level,
            unknown_sku_is_out_of_stock,
            reserve_is_all_or_nothing,
            one_reservation_per_order,
            release_is_idempotent_and_noop_without_reservation,
            release_after_ship_keeps_stock_shipped,
            ship_is_idempotent_and_needs_a_held_reservation,
            stocked_changes_only_with_a_count,
            prices_are_kept_beside_the_count,
            listing_pages_cover_every_sku_and_reservation_once
        );
        $crate::contract_suite!(@each $fresh, gateways, payments:
            charge_is_once_per_key,
            charge_key_reuse_with_other_amount_is_refused,
            refund_is_once_and_noop_without_charge,
            refund_by_charge_id_refunds_that_charge,
            refund_by_a_charge_id_not_the_orders_is_refused,
            listing_pages_cover_every_charge_and_refund_once
        );
        $crate::contract_suite!(@each $fresh, keys, keys:
            a_key_is_found_by_its_hash_with_its_principal_and_role,
            a_principal_keeps_its_role_and_holds_several_keys,
            revocation_is_kept_and_idempotent,
            last_use_only_moves_forward,
            a_session_is_read_back_until_closed_and_closing_is_idempotent,
            an_expired_session_is_read_as_stored
        );
        $crate::contract_suite!(@each $fresh, gateways, shipping:
            one_shipment_per_order,
            voided_shipping_refuses_a_late_shipment,
            voiding_after_a_shipment_reports_it
        );
        $crate::contract_suite!(@adapters $fresh, webhooks:
            the_outbox_holds_each_status_change_until_dispatched,
            endpoints_are_stored_listed_replaced_and_deleted,
            deliveries_come_due_are_listed_and_replayed
        );
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn concurrent_orders_never_oversell_the_last_unit() {
            let adapters = $fresh().await;
            $crate::inventory::concurrent_orders_never_oversell_the_last_unit(
                adapters.inventory.clone(),
            )
            .await;
        }
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn concurrent_charges_with_one_key_charge_once() {
            let adapters = $fresh().await;
            $crate::gateways::concurrent_charges_with_one_key_charge_once(
                adapters.payments.clone(),
            )
            .await;
        }
    };
    (@adapters $fresh:path, $module:ident: $($name:ident),+) => {
        $(
            #[tokio::test]
            async fn $name() {
                let adapters = $fresh().await;
                $crate::$module::$name(&adapters).await;
            }
        )+
    };
    (@each $fresh:path, $module:ident, $port:ident: $($name:ident),+) => {
        $(
            #[tokio::test]
            async fn $name() {
                let adapters = $fresh().await;
                $crate::$module::$name(&*adapters.$port).await;
            }
        )+
    };
}
