//! The contract of `PaymentGateway` and `ShippingGateway`: one charge per idempotency key and
//! never a second one for other parameters, refunds once and only of what was charged (by the
//! charge id when the caller has it, and never of another order's charge), one shipment per
//! order. Uses only `pm_card_visa`, which succeeds on every provider's test mode.

use super::{address, all_pages, covered_once, covered_since, line, order_id, unique};
use std::sync::Arc;
use store::domain::*;
use store::error::GatewayError;
use store::ports::*;

fn request(id: &OrderId, amount_cents: u64) -> ChargeRequest {
    ChargeRequest {
        idempotency_key: id.charge_key(),
        order_id: id.clone(),
        amount_cents,
        currency: "EUR".to_owned(),
        payment_method: "pm_card_visa".to_owned(),
    }
}

pub async fn charge_is_once_per_key(payments: &dyn PaymentGateway) {
    let id = order_id("charge");
    assert_eq!(payments.find_charge(&id).await.expect("find"), None);
    let first = payments.charge(&request(&id, 3499)).await.expect("charge");
    assert_eq!((first.amount_cents, first.currency.as_str()), (3499, "EUR"));
    assert_eq!(
        (&first.order_id, first.idempotency_key.as_str()),
        (&id, id.charge_key().as_str())
    );
    assert_eq!(
        payments.charge(&request(&id, 3499)).await.expect("replay"),
        first
    );
    assert_eq!(payments.find_charge(&id).await.expect("find"), Some(first));
}

pub async fn charge_key_reuse_with_other_amount_is_refused(payments: &dyn PaymentGateway) {
    let id = order_id("key-reuse");
    let first = payments.charge(&request(&id, 3499)).await.expect("charge");
    let err = payments
        .charge(&request(&id, 3500))
        .await
        .expect_err("other amount");
    assert!(matches!(err, GatewayError::KeyReused(_)), "{err:?}");
    assert!(
        !err.is_transient(),
        "a retry must not turn it into a second charge"
    );
    let mut other_currency = request(&id, 3499);
    other_currency.currency = "USD".to_owned();
    let err = payments
        .charge(&other_currency)
        .await
        .expect_err("other currency");
    assert!(matches!(err, GatewayError::KeyReused(_)), "{err:?}");
    assert_eq!(payments.find_charge(&id).await.expect("find"), Some(first));
}

/// Many calls with one key at once (at-least-once steps running twice) make one charge.
pub async fn concurrent_charges_with_one_key_charge_once(payments: Arc<dyn PaymentGateway>) {
    let id = order_id("charge-race");
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (payments, req) = (payments.clone(), request(&id, 1000));
            tokio::spawn(async move { payments.charge(&req).await })
        })
        .collect();
    let mut charge_ids = Vec::new();
    for task in tasks {
        charge_ids.push(task.await.expect("task").expect("charge").charge_id);
    }
    charge_ids.dedup();
    assert_eq!(charge_ids.len(), 1, "one charge: {charge_ids:?}");
}

pub async fn refund_is_once_and_noop_without_charge(payments: &dyn PaymentGateway) {
    let never = order_id("refund-none");
    assert_eq!(
        payments
            .refund(&never, None, &never.refund_key())
            .await
            .expect("refund"),
        Refunded::NothingCharged
    );

    let id = order_id("refund");
    let charge = payments.charge(&request(&id, 2500)).await.expect("charge");
    let Refunded::Now(refund) = payments
        .refund(&id, None, &id.refund_key())
        .await
        .expect("refund")
    else {
        panic!("the first refund must refund");
    };
    assert_eq!(
        (&refund.charge_id, refund.amount_cents),
        (&charge.charge_id, 2500),
        "in full"
    );
    assert_eq!(
        (&refund.order_id, refund.idempotency_key.as_str()),
        (&id, id.refund_key().as_str())
    );
    assert_eq!(
        payments
            .refund(&id, None, &id.refund_key())
            .await
            .expect("again"),
        Refunded::Already(refund)
    );
    // A charge that comes late (the compensation ran first) is refused where the provider can
    // void an order (the sandbox), or else refunded by a later refund: never kept.
    let late = order_id("refund-late");
    assert_eq!(
        payments
            .refund(&late, None, &late.refund_key())
            .await
            .expect("early"),
        Refunded::NothingCharged
    );
    match payments.charge(&request(&late, 700)).await {
        Err(GatewayError::Rejected(_)) => {
            assert_eq!(payments.find_charge(&late).await.expect("find"), None);
        }
        Ok(_) => assert!(matches!(
            payments.refund(&late, None, &late.refund_key()).await.expect("refund"),
            Refunded::Now(r) if r.amount_cents == 700
        )),
        Err(e) => panic!("late charge: {e:?}"),
    }
}

/// A refund given the charge id (the one the charge step recorded) refunds that charge, once.
pub async fn refund_by_charge_id_refunds_that_charge(payments: &dyn PaymentGateway) {
    let id = order_id("refund-by-id");
    let charge = payments.charge(&request(&id, 1800)).await.expect("charge");
    let by_id = Some(charge.charge_id.as_str());
    let Refunded::Now(refund) = payments
        .refund(&id, by_id, &id.refund_key())
        .await
        .expect("refund")
    else {
        panic!("the first refund must refund");
    };
    assert_eq!(
        (&refund.charge_id, refund.amount_cents, &refund.order_id),
        (&charge.charge_id, 1800, &id),
        "that charge, in full"
    );
    assert_eq!(refund.idempotency_key, id.refund_key());
    // A replay, with the id or without, and a refund under another key find the refund made.
    for (charge_id, key) in [
        (by_id, id.refund_key()),
        (None, id.refund_key()),
        (by_id, format!("manual:{id}")),
    ] {
        assert_eq!(
            payments.refund(&id, charge_id, &key).await.expect("again"),
            Refunded::Already(refund.clone()),
            "{charge_id:?} under {key}"
        );
    }
}

/// A charge id that is not the order's, another order's or one the provider never made, is
/// refused: a refund never gives back someone else's payment.
pub async fn refund_by_a_charge_id_not_the_orders_is_refused(payments: &dyn PaymentGateway) {
    let (id, other) = (order_id("refund-mine"), order_id("refund-theirs"));
    let theirs = payments
        .charge(&request(&other, 900))
        .await
        .expect("charge");
    let unknown = unique("ch_unknown").replace('-', "_");
    for charge_id in [theirs.charge_id.as_str(), unknown.as_str()] {
        let err = payments
            .refund(&id, Some(charge_id), &id.refund_key())
            .await
            .expect_err("not the order's charge");
        // Refused, finally (a provider may call an id it never made an invalid request).
        assert!(
            matches!(err, GatewayError::Rejected(_) | GatewayError::Invalid(_)),
            "{charge_id}: {err:?}"
        );
        assert!(!err.is_transient(), "a retry cannot make it the order's");
    }
    // The other order's charge was not touched: its own refund is the first.
    assert!(matches!(
        payments
            .refund(&other, Some(&theirs.charge_id), &other.refund_key())
            .await
            .expect("refund"),
        Refunded::Now(r) if r.charge_id == theirs.charge_id && r.amount_cents == 900
    ));
}

/// The provider's books list every charge and every refund once, as they were made.
pub async fn listing_pages_cover_every_charge_and_refund_once(payments: &dyn PaymentGateway) {
    let mut charges = Vec::new();
    for n in 0..5 {
        let id = order_id("listed");
        charges.push(
            payments
                .charge(&request(&id, 100 + n))
                .await
                .expect("charge"),
        );
    }
    let mut refunds = Vec::new();
    for charge in &charges[..2] {
        let id = &charge.order_id;
        match payments
            .refund(id, Some(&charge.charge_id), &id.refund_key())
            .await
            .expect("refund")
        {
            Refunded::Now(r) => refunds.push(r),
            other => panic!("a first refund refunds, got {other:?}"),
        }
    }

    let listed = all_pages(2, |after| async move {
        payments.list_charges(None, after.as_deref(), 2).await
    })
    .await;
    let keys: Vec<String> = listed.iter().map(|c| c.charge_id.clone()).collect();
    let ours: Vec<String> = charges.iter().map(|c| c.charge_id.clone()).collect();
    covered_once(&keys, &ours);
    for charge in &charges {
        let found = listed.iter().find(|c| c.charge_id == charge.charge_id);
        assert_eq!(found, Some(charge));
    }

    let listed = all_pages(2, |after| async move {
        payments.list_refunds(None, after.as_deref(), 2).await
    })
    .await;
    let keys: Vec<String> = listed.iter().map(|r| r.refund_id.clone()).collect();
    let ours: Vec<String> = refunds.iter().map(|r| r.refund_id.clone()).collect();
    covered_once(&keys, &ours);
    for refund in &refunds {
        let found = listed.iter().find(|r| r.refund_id == refund.refund_id);
        assert_eq!(found, Some(refund));
    }

    // With `since`: what was made from then on only. A provider may keep times in whole
    // seconds (Stripe does), so `since` is a second past the last of the earlier ones.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let since = chrono::Utc::now();
    let mut later = Vec::new();
    for n in 0..3 {
        let id = order_id("listed-later");
        later.push(
            payments
                .charge(&request(&id, 200 + n))
                .await
                .expect("charge"),
        );
    }
    // The earlier charges' refunds are made now: listed by when the refund was made.
    let mut later_refunds = Vec::new();
    for charge in [&charges[2], &later[0]] {
        let id = &charge.order_id;
        match payments
            .refund(id, Some(&charge.charge_id), &id.refund_key())
            .await
            .expect("refund")
        {
            Refunded::Now(r) => later_refunds.push(r.refund_id),
            other => panic!("a first refund refunds, got {other:?}"),
        }
    }
    let listed = all_pages(2, |after| async move {
        payments
            .list_charges(Some(since), after.as_deref(), 2)
            .await
    })
    .await;
    let keys: Vec<String> = listed.iter().map(|c| c.charge_id.clone()).collect();
    let later: Vec<String> = later.iter().map(|c| c.charge_id.clone()).collect();
    covered_since(&keys, &later, &ours);
    let listed = all_pages(2, |after| async move {
        payments
            .list_refunds(Some(since), after.as_deref(), 2)
            .await
    })
    .await;
    let keys: Vec<String> = listed.iter().map(|r| r.refund_id.clone()).collect();
    let earlier: Vec<String> = refunds.iter().map(|r| r.refund_id.clone()).collect();
    covered_since(&keys, &later_refunds, &earlier);
}

pub async fn one_shipment_per_order(shipping: &dyn ShippingGateway) {
    let id = order_id("ship");
    assert_eq!(shipping.shipment(&id).await.expect("shipment"), None);
    let request = ShipmentRequest {
        order_id: id.clone(),
        address: address("75001"),
        lines: vec![line("SKU-A", 2)],
    };
    let first = shipping.create_shipment(&request).await.expect("ship");
    assert_eq!(first.order_id, id);
    assert!(!first.tracking_number.is_empty());
    assert_eq!(
        shipping.create_shipment(&request).await.expect("again"),
        first
    );
    assert_eq!(shipping.shipment(&id).await.expect("shipment"), Some(first));
}

pub async fn voided_shipping_refuses_a_late_shipment(shipping: &dyn ShippingGateway) {
    let id = order_id("void-ship");
    assert_eq!(shipping.void(&id).await.expect("void"), Voided::Now);
    assert_eq!(shipping.void(&id).await.expect("again"), Voided::Now);
    let request = ShipmentRequest {
        order_id: id.clone(),
        address: address("75001"),
        lines: vec![line("SKU-A", 1)],
    };
    let late = shipping.create_shipment(&request).await;
    assert!(matches!(late, Err(GatewayError::Rejected(_))), "{late:?}");
    assert_eq!(shipping.shipment(&id).await.expect("shipment"), None);
}

pub async fn voiding_after_a_shipment_reports_it(shipping: &dyn ShippingGateway) {
    let id = order_id("void-shipped");
    let request = ShipmentRequest {
        order_id: id.clone(),
        address: address("75001"),
        lines: vec![line("SKU-A", 1)],
    };
    let shipment = shipping.create_shipment(&request).await.expect("ship");
    assert_eq!(
        shipping.void(&id).await.expect("void"),
        Voided::Shipped(shipment)
    );
}
