//! The sandbox gateways' magic values, and their "once" behaviours across restarts, on each
//! backend's ledger: the behaviour is written once, so both must show exactly the same.

use aws_sdk_dynamodb::Client;
use providers::sandbox::*;
use store::{
    ChargeRequest, GatewayError, OrderId, PaymentGateway, Refunded, ShipmentRequest,
    ShippingGateway,
};
use store_dynamodb::DynamoStore;
use store_sqlite::SqliteStore;
use tempfile::TempDir;
use testkit::{address, moto, order_id, unique};

/// Where a sandbox keeps its ledger. Each call opens the store anew, as a restarted service
/// would.
trait Backend {
    fn payments(&self) -> Box<dyn PaymentGateway>;
    fn shipping(&self) -> Box<dyn ShippingGateway>;
}

struct Sqlite(TempDir);

impl Sqlite {
    fn open(&self) -> SqliteStore {
        SqliteStore::open(self.0.path().join("store.db")).expect("open store")
    }
}

impl Backend for Sqlite {
    fn payments(&self) -> Box<dyn PaymentGateway> {
        Box::new(SandboxPayments::new(self.open()))
    }
    fn shipping(&self) -> Box<dyn ShippingGateway> {
        Box::new(SandboxShipping::new(self.open()))
    }
}

struct Dynamo {
    client: Client,
    table: String,
}

impl Dynamo {
    fn open(&self) -> DynamoStore {
        DynamoStore::new(self.client.clone(), self.table.clone())
    }
}

impl Backend for Dynamo {
    fn payments(&self) -> Box<dyn PaymentGateway> {
        Box::new(SandboxPayments::new(self.open()))
    }
    fn shipping(&self) -> Box<dyn ShippingGateway> {
        Box::new(SandboxShipping::new(self.open()))
    }
}

async fn sqlite() -> Sqlite {
    Sqlite(tempfile::tempdir().expect("temp dir"))
}

async fn dynamodb() -> Dynamo {
    let client = moto::shared().client();
    let table = unique("sandbox");
    store_dynamodb::create_table(&client, &table)
        .await
        .expect("create table");
    Dynamo { client, table }
}

/// One `#[tokio::test]` per backend for each test below.
macro_rules! on_each_backend {
    ($($name:ident),* $(,)?) => {
        mod on_sqlite {
            $(#[tokio::test]
            async fn $name() {
                super::$name(&super::sqlite().await).await;
            })*
        }
        mod on_dynamodb {
            $(#[tokio::test]
            async fn $name() {
                super::$name(&super::dynamodb().await).await;
            })*
        }
    };
}

on_each_backend!(
    visa_charges_with_stable_prefixed_ids,
    declined_card_is_rejected_and_charges_nothing,
    unknown_payment_methods_are_rejected,
    unavailable_once_fails_the_first_attempt_of_each_order_across_a_restart,
    lost_response_charges_once_and_the_retry_finds_the_charge,
    a_charge_refunded_under_another_key_is_not_refunded_again,
    postal_code_00000_is_rejected_and_ships_nothing,
    postal_code_99999_is_unavailable_once_per_order_across_a_restart,
    a_charge_arriving_after_a_refund_of_nothing_is_refused,
);

fn charge_with(id: &OrderId, payment_method: &str) -> ChargeRequest {
    ChargeRequest {
        idempotency_key: id.charge_key(),
        order_id: id.clone(),
        amount_cents: 4200,
        currency: "EUR".to_owned(),
        payment_method: payment_method.to_owned(),
    }
}

fn shipment_to(id: &OrderId, postal_code: &str) -> ShipmentRequest {
    ShipmentRequest {
        order_id: id.clone(),
        address: address(postal_code),
        lines: vec![testkit::line("SKU-A", 1)],
    }
}

async fn visa_charges_with_stable_prefixed_ids(backend: &dyn Backend) {
    let payments = backend.payments();
    let id = order_id("visa");
    let charge = payments
        .charge(&charge_with(&id, PM_SUCCEEDS))
        .await
        .unwrap();
    assert!(charge.charge_id.starts_with("ch_"), "{}", charge.charge_id);
    let Refunded::Now(refund) = payments.refund(&id, None, &id.refund_key()).await.unwrap() else {
        panic!("refund expected");
    };
    assert!(refund.refund_id.starts_with("re_"), "{}", refund.refund_id);
}

async fn declined_card_is_rejected_and_charges_nothing(backend: &dyn Backend) {
    let payments = backend.payments();
    let id = order_id("declined");
    for _ in 0..2 {
        let err = payments
            .charge(&charge_with(&id, PM_DECLINED))
            .await
            .unwrap_err();
        assert!(
            matches!(err, GatewayError::Rejected(ref m) if m.contains("declined")),
            "{err:?}"
        );
        assert!(!err.is_transient());
    }
    assert_eq!(payments.find_charge(&id).await.unwrap(), None);
}

async fn unknown_payment_methods_are_rejected(backend: &dyn Backend) {
    let payments = backend.payments();
    for method in ["pm_card_mastercard", "tok_visa", "", "PM_CARD_VISA"] {
        let id = order_id("unknown-pm");
        let err = payments
            .charge(&charge_with(&id, method))
            .await
            .unwrap_err();
        assert!(
            matches!(err, GatewayError::Rejected(ref m) if m.contains("unknown test payment method")),
            "{method}: {err:?}"
        );
        assert_eq!(payments.find_charge(&id).await.unwrap(), None);
    }
}

async fn unavailable_once_fails_the_first_attempt_of_each_order_across_a_restart(
    backend: &dyn Backend,
) {
    let (a, b) = (order_id("flaky-a"), order_id("flaky-b"));
    {
        let payments = backend.payments();
        let err = payments
            .charge(&charge_with(&a, PM_UNAVAILABLE_ONCE))
            .await
            .unwrap_err();
        assert!(err.is_transient(), "{err:?}");
        assert_eq!(
            payments.find_charge(&a).await.unwrap(),
            None,
            "nothing charged"
        );
    }
    // After a restart the first attempt is still remembered.
    let payments = backend.payments();
    let charge = payments
        .charge(&charge_with(&a, PM_UNAVAILABLE_ONCE))
        .await
        .unwrap();
    assert_eq!(
        payments
            .charge(&charge_with(&a, PM_UNAVAILABLE_ONCE))
            .await
            .unwrap(),
        charge
    );
    // Another order fails once too.
    assert!(
        payments
            .charge(&charge_with(&b, PM_UNAVAILABLE_ONCE))
            .await
            .unwrap_err()
            .is_transient()
    );
    payments
        .charge(&charge_with(&b, PM_UNAVAILABLE_ONCE))
        .await
        .unwrap();
}

async fn lost_response_charges_once_and_the_retry_finds_the_charge(backend: &dyn Backend) {
    let id = order_id("lost");
    let request = charge_with(&id, PM_LOST_RESPONSE);
    let found = {
        let payments = backend.payments();
        let err = payments.charge(&request).await.unwrap_err();
        assert!(matches!(err, GatewayError::Unavailable(_)), "{err:?}");
        // The caller does not know, but the money moved.
        payments
            .find_charge(&id)
            .await
            .unwrap()
            .expect("the charge was made")
    };
    let payments = backend.payments();
    assert_eq!(
        payments.charge(&request).await.unwrap(),
        found,
        "the retry returns that charge"
    );
    assert_eq!(payments.charge(&request).await.unwrap(), found);
    let Refunded::Now(refund) = payments.refund(&id, None, &id.refund_key()).await.unwrap() else {
        panic!("refund expected");
    };
    assert_eq!(
        (refund.charge_id, refund.amount_cents),
        (found.charge_id, 4200)
    );
}

async fn a_charge_refunded_under_another_key_is_not_refunded_again(backend: &dyn Backend) {
    let payments = backend.payments();
    let id = order_id("two-keys");
    payments
        .charge(&charge_with(&id, PM_SUCCEEDS))
        .await
        .unwrap();
    let Refunded::Now(first) = payments.refund(&id, None, "manual-refund").await.unwrap() else {
        panic!("refund expected");
    };
    assert_eq!(
        payments.refund(&id, None, &id.refund_key()).await.unwrap(),
        Refunded::Already(first)
    );
    // A refund key names one order's refund.
    let other = order_id("two-keys-other");
    payments
        .charge(&charge_with(&other, PM_SUCCEEDS))
        .await
        .unwrap();
    let err = payments
        .refund(&other, None, "manual-refund")
        .await
        .unwrap_err();
    assert!(matches!(err, GatewayError::KeyReused(_)), "{err:?}");
}

async fn postal_code_00000_is_rejected_and_ships_nothing(backend: &dyn Backend) {
    let shipping = backend.shipping();
    let id = order_id("undeliverable");
    for _ in 0..2 {
        let err = shipping
            .create_shipment(&shipment_to(&id, POSTAL_REJECTED))
            .await
            .unwrap_err();
        assert!(matches!(err, GatewayError::Rejected(_)), "{err:?}");
    }
    assert_eq!(shipping.shipment(&id).await.unwrap(), None);
}

async fn postal_code_99999_is_unavailable_once_per_order_across_a_restart(backend: &dyn Backend) {
    let id = order_id("carrier-down");
    {
        let shipping = backend.shipping();
        let err = shipping
            .create_shipment(&shipment_to(&id, POSTAL_UNAVAILABLE_ONCE))
            .await
            .unwrap_err();
        assert!(err.is_transient(), "{err:?}");
        assert_eq!(shipping.shipment(&id).await.unwrap(), None);
    }
    let shipping = backend.shipping();
    let shipment = shipping
        .create_shipment(&shipment_to(&id, POSTAL_UNAVAILABLE_ONCE))
        .await
        .unwrap();
    assert!(
        shipment.shipment_id.starts_with("shp_"),
        "{}",
        shipment.shipment_id
    );
    assert_eq!(shipping.shipment(&id).await.unwrap(), Some(shipment));
}

/// On two stores, of either backend, that share nothing.
#[tokio::test]
async fn the_same_order_gets_the_same_tracking_number_everywhere() {
    let id = order_id("tracking");
    let backends: [Box<dyn Backend>; 3] = [
        Box::new(sqlite().await),
        Box::new(sqlite().await),
        Box::new(dynamodb().await),
    ];
    let mut numbers = Vec::new();
    for backend in &backends {
        let shipment = backend
            .shipping()
            .create_shipment(&shipment_to(&id, "75001"))
            .await
            .unwrap();
        numbers.push(shipment.tracking_number);
    }
    assert!(numbers.iter().all(|n| *n == numbers[0]), "{numbers:?}");
    let n = &numbers[0];
    assert!(n.len() == 18 && n.starts_with("1Z"), "{n}");
    assert!(
        n[2..]
            .chars()
            .all(|c| c.is_ascii_digit() || c.is_ascii_uppercase()),
        "{n}"
    );
}

async fn a_charge_arriving_after_a_refund_of_nothing_is_refused(backend: &dyn Backend) {
    let payments = backend.payments();
    let id = order_id("zombie");
    // The saga gave up on a charge step (timeout) and compensated: nothing was charged yet.
    let refund = payments.refund(&id, None, &id.refund_key()).await.unwrap();
    assert_eq!(refund, Refunded::NothingCharged);
    // The abandoned step finally reaches the provider: no money may move any more.
    let late = payments
        .charge(&charge_with(&id, PM_SUCCEEDS))
        .await
        .unwrap_err();
    assert!(
        matches!(late, GatewayError::Rejected(ref m) if m.contains("voided")),
        "{late:?}"
    );
    assert_eq!(payments.find_charge(&id).await.unwrap(), None);
}
