//! The Stripe gateway against a fake Stripe (`testkit::fake_stripe`) that records the headers
//! it receives: idempotency keys, authentication, declines, outages, timeouts, refunds (by the
//! charge id while search lags behind, and by search), charges that land late, and the payment
//! part of the adapter contract suite.

use providers::SecretKey;
use providers::StripeConfig;
use providers::StripePayments;
use std::sync::Arc;
use std::time::Duration;
use store::{ChargeRequest, GatewayError, OrderId, PaymentGateway, Refunded};
use testkit::fake_stripe::{FakeStripe, PM_AUTHENTICATION, PM_DECLINED, SECRET_KEY};
use testkit::{gateways, order_id};

const TIMEOUT: Duration = Duration::from_millis(500);

/// The error class of each kind of refusal Stripe makes: the customer's bank (a decline, a
/// payment that needs 3-D Secure), a request no retry fixes (under the minimum amount), and
/// the operator's (a revoked key, a wrong URL), which is retried and shows in `health`.
#[tokio::test]
async fn refusals_are_classed_by_whose_they_are() {
    let (fake, payments) = gateway().await;
    let declined = payments
        .charge(&charge_of(&order_id("declined"), 700, PM_DECLINED))
        .await
        .expect_err("declined");
    assert!(
        matches!(declined, GatewayError::Rejected(ref m) if m.starts_with("generic_decline")),
        "{declined:?}"
    );
    let three_ds = payments
        .charge(&charge_of(&order_id("three-ds"), 700, PM_AUTHENTICATION))
        .await
        .expect_err("needs authentication");
    assert!(
        matches!(three_ds, GatewayError::Rejected(ref m) if m.starts_with("authentication_required")),
        "{three_ds:?}"
    );
    let tiny = payments
        .charge(&charge_of(&order_id("tiny"), 10, "pm_card_visa"))
        .await
        .expect_err("under the minimum");
    assert!(
        matches!(tiny, GatewayError::Invalid(ref m) if m.starts_with("amount_too_small")),
        "{tiny:?}"
    );
    assert!(!tiny.is_transient());
    payments
        .health()
        .await
        .expect("healthy after refusals of orders");

    fake.revoke_key(true);
    let id = order_id("revoked");
    let revoked = payments
        .charge(&charge_of(&id, 700, "pm_card_visa"))
        .await
        .expect_err("revoked key");
    assert!(
        matches!(revoked, GatewayError::Misconfigured(_)),
        "{revoked:?}"
    );
    assert!(revoked.is_transient());
    assert!(matches!(
        payments.health().await,
        Err(GatewayError::Misconfigured(_))
    ));
    assert!(matches!(
        payments.check().await,
        Err(GatewayError::Misconfigured(_))
    ));
    assert_eq!(payments.health_counts().misconfigured_answers(), 3);
    fake.revoke_key(false);
    // Health asks again while it is ill: a restored key shows at once.
    payments.health().await.expect("restored");
    payments
        .charge(&charge_of(&id, 700, "pm_card_visa"))
        .await
        .expect("charged once the key is back");
    assert_eq!(fake.charges_of(id.as_str()), 1);
}

#[tokio::test]
async fn a_url_that_is_not_stripes_api_is_misconfigured_not_a_decline() {
    let fake = FakeStripe::start().await;
    let wrong = StripePayments::new(StripeConfig {
        base_url: format!("{}/v1", fake.base_url),
        ..config(&fake, SECRET_KEY)
    })
    .expect("gateway");
    let err = wrong
        .charge(&charge_of(&order_id("wrong-url"), 700, "pm_card_visa"))
        .await
        .expect_err("no such endpoint");
    assert!(matches!(err, GatewayError::Misconfigured(_)), "{err:?}");
    assert!(matches!(
        wrong.check().await,
        Err(GatewayError::Misconfigured(_))
    ));
}

/// Two services on one Stripe account, each with its own prefix, charge the same order id:
/// each under its own key, and each finds, refunds and lists only its own payment.
#[tokio::test]
async fn services_with_their_own_key_prefix_never_touch_each_others_payments() {
    let fake = FakeStripe::start().await;
    let service = |prefix: &str| {
        StripePayments::new(StripeConfig {
            key_prefix: prefix.to_owned(),
            ..config(&fake, SECRET_KEY)
        })
        .expect("gateway")
    };
    let (a, b) = (service("shop-a:"), service("shop-b:"));
    let id = order_id("shared");
    let charge_a = a
        .charge(&charge_of(&id, 700, "pm_card_visa"))
        .await
        .expect("a");
    let charge_b = b
        .charge(&charge_of(&id, 900, "pm_card_visa"))
        .await
        .expect("b");
    assert_ne!(charge_a.charge_id, charge_b.charge_id);
    assert_eq!(fake.charges_of(id.as_str()), 2);
    let keys: Vec<_> = fake
        .requests()
        .iter()
        .filter_map(|r| r.header("idempotency-key").map(str::to_owned))
        .collect();
    assert_eq!(
        keys,
        [format!("shop-a:charge:{id}"), format!("shop-b:charge:{id}")]
    );
    assert_eq!(
        a.find_charge(&id)
            .await
            .expect("find")
            .expect("a's")
            .charge_id,
        charge_a.charge_id
    );
    let Refunded::Now(refund) = b.refund(&id, None, &id.refund_key()).await.expect("refund") else {
        panic!("b refunds its own charge");
    };
    assert_eq!(refund.charge_id, charge_b.charge_id);
    // A's charge id handed to B is not B's to refund.
    let err = b
        .refund(&id, Some(&charge_a.charge_id), &id.refund_key())
        .await
        .expect_err("a's payment");
    assert!(matches!(err, GatewayError::Rejected(_)), "{err:?}");
    let listed: Vec<_> = a.list_charges(None, None, 100).await.expect("list").items;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].charge_id, charge_a.charge_id);
    assert!(
        b.list_refunds(None, None, 100)
            .await
            .expect("list")
            .items
            .len()
            == 1
    );
    assert!(
        a.list_refunds(None, None, 100)
            .await
            .expect("list")
            .items
            .is_empty()
    );
    // Only letters, digits and a few separators make a prefix.
    assert!(
        StripePayments::new(StripeConfig {
            key_prefix: "a b".to_owned(),
            ..config(&fake, SECRET_KEY)
        })
        .is_err()
    );
}

fn config(fake: &FakeStripe, key: &str) -> StripeConfig {
    StripeConfig {
        base_url: fake.base_url.clone(),
        secret_key: SecretKey::new(key),
        timeout: TIMEOUT,
        key_prefix: String::new(),
    }
}

async fn gateway() -> (FakeStripe, StripePayments) {
    let fake = FakeStripe::start().await;
    let payments = StripePayments::new(config(&fake, SECRET_KEY)).expect("gateway");
    (fake, payments)
}

fn charge_of(id: &OrderId, amount_cents: u64, payment_method: &str) -> ChargeRequest {
    ChargeRequest {
        idempotency_key: id.charge_key(),
        order_id: id.clone(),
        amount_cents,
        currency: "EUR".to_owned(),
        payment_method: payment_method.to_owned(),
    }
}

#[tokio::test]
async fn charge_sends_its_idempotency_key_and_the_bearer_key() {
    let (fake, payments) = gateway().await;
    let id = order_id("headers");
    let charge = payments
        .charge(&charge_of(&id, 3499, "pm_card_visa"))
        .await
        .expect("charge");
    assert_eq!(
        (charge.amount_cents, charge.currency.as_str()),
        (3499, "EUR")
    );
    assert_eq!(charge.idempotency_key, format!("charge:{id}"));
    let requests = fake.requests();
    let [post] = requests.as_slice() else {
        panic!("one request: {requests:?}");
    };
    assert_eq!(
        (post.method.as_str(), post.path.as_str()),
        ("POST", "/v1/payment_intents")
    );
    assert_eq!(
        post.header("idempotency-key"),
        Some(format!("charge:{id}").as_str())
    );
    assert_eq!(
        post.header("authorization"),
        Some(format!("Bearer {SECRET_KEY}").as_str())
    );
    assert_eq!(
        post.header("content-type"),
        Some("application/x-www-form-urlencoded")
    );
    assert!(post.header("stripe-version").is_some());
    let sent = |name| post.param(name);
    assert_eq!(
        (sent("amount"), sent("currency"), sent("payment_method")),
        (Some("3499"), Some("eur"), Some("pm_card_visa")),
        "Stripe's currencies are lower-case"
    );
    assert_eq!(sent("confirm"), Some("true"));
    assert_eq!(sent("metadata[order_id]"), Some(id.as_str()));
    assert_eq!(
        sent("metadata[idempotency_key]"),
        Some(id.charge_key().as_str())
    );
}

#[tokio::test]
async fn the_same_charge_twice_charges_once() {
    let (fake, payments) = gateway().await;
    let id = order_id("twice");
    let request = charge_of(&id, 1200, "pm_card_visa");
    let first = payments.charge(&request).await.expect("charge");
    let second = payments.charge(&request).await.expect("replay");
    assert_eq!(first, second);
    assert_eq!(fake.charges_of(id.as_str()), 1);
}

#[tokio::test]
async fn another_amount_under_the_same_key_is_key_reused() {
    let (fake, payments) = gateway().await;
    let id = order_id("reuse");
    payments
        .charge(&charge_of(&id, 1200, "pm_card_visa"))
        .await
        .expect("charge");
    let err = payments
        .charge(&charge_of(&id, 1300, "pm_card_visa"))
        .await
        .expect_err("other amount");
    assert!(matches!(err, GatewayError::KeyReused(_)), "{err:?}");
    assert!(!err.is_transient());
    assert_eq!(fake.charges_of(id.as_str()), 1);
}

#[tokio::test]
async fn a_declined_card_is_rejected_and_not_found_as_a_charge() {
    let (fake, payments) = gateway().await;
    let id = order_id("declined");
    let err = payments
        .charge(&charge_of(&id, 1200, PM_DECLINED))
        .await
        .expect_err("declined");
    assert!(matches!(err, GatewayError::Rejected(_)), "{err:?}");
    assert!(!err.is_transient());
    assert!(err.to_string().contains("declined"), "{err}");
    assert_eq!(payments.find_charge(&id).await.expect("find"), None);
    assert_eq!(fake.charges_of(id.as_str()), 0);
}

#[tokio::test]
async fn an_outage_is_transient_and_the_retry_charges_once() {
    let (fake, payments) = gateway().await;
    let id = order_id("outage");
    let request = charge_of(&id, 900, "pm_card_visa");
    fake.fail_next(1);
    let err = payments.charge(&request).await.expect_err("503");
    assert!(matches!(err, GatewayError::Unavailable(_)), "{err:?}");
    assert!(err.is_transient());
    let charge = payments.charge(&request).await.expect("retry");
    assert_eq!(payments.find_charge(&id).await.expect("find"), Some(charge));
    assert_eq!(fake.charges_of(id.as_str()), 1);
    let keys: Vec<_> = fake
        .requests()
        .iter()
        .filter(|r| r.method == "POST")
        .map(|r| r.header("idempotency-key").map(str::to_owned))
        .collect();
    assert_eq!(keys, [Some(id.charge_key()), Some(id.charge_key())]);
}

#[tokio::test]
async fn a_timed_out_charge_is_transient_and_made_once_when_retried() {
    let (fake, payments) = gateway().await;
    let id = order_id("slow");
    let request = charge_of(&id, 800, "pm_card_visa");
    fake.delay(Some(TIMEOUT * 4));
    let err = payments.charge(&request).await.expect_err("timeout");
    assert!(matches!(err, GatewayError::Unavailable(_)), "{err:?}");
    assert!(err.is_transient());
    fake.delay(None);
    // The slow answer's charge was made: the retry under the same key replays it.
    payments.charge(&request).await.expect("retry");
    assert_eq!(fake.charges_of(id.as_str()), 1);
}

/// A provider that lags: the charge lands long after its request, whose answer the gateway
/// gave up on; meanwhile the same key is Stripe's `409 idempotency_key_in_use` (retried, never a
/// decline), the order's lookup finds nothing, and once it landed, the key replays it and the
/// lookup finds it when search has caught up. What the saga cannot wait for, the repair loop's
/// listing finds (`the_books_are_the_succeeded_intents_listed_page_after_page`).
#[tokio::test]
async fn a_charge_landing_late_is_in_use_until_it_lands_then_replayed_and_found() {
    let (fake, payments) = gateway().await;
    let id = order_id("late");
    let request = charge_of(&id, 900, "pm_card_visa");
    let lands_in = TIMEOUT * 4;
    fake.search_lag(TIMEOUT * 4);
    fake.hold_charges([id.as_str().to_owned()], lands_in);
    let asked = std::time::Instant::now();
    let gave_up = payments
        .charge(&request)
        .await
        .expect_err("no answer in time");
    assert!(
        matches!(gave_up, GatewayError::Unavailable(_)),
        "{gave_up:?}"
    );
    assert_eq!(fake.charges_in_flight(), 1);
    let in_use = payments.charge(&request).await.expect_err("still running");
    assert!(
        matches!(in_use, GatewayError::Unavailable(ref m) if m.contains("409")),
        "{in_use:?}"
    );
    assert!(in_use.is_transient());
    assert_eq!(payments.find_charge(&id).await.expect("search"), None);

    while fake.charges_in_flight() > 0 {
        assert!(
            asked.elapsed() < lands_in * 10,
            "the held charge never landed"
        );
        tokio::time::sleep(TIMEOUT / 10).await;
    }
    assert_eq!(fake.charges_of(id.as_str()), 1);
    assert_eq!(
        payments.find_charge(&id).await.expect("search"),
        None,
        "search lags behind the charge"
    );
    let charge = payments
        .charge(&request)
        .await
        .expect("the key replays the charge");
    tokio::time::sleep(TIMEOUT * 4).await;
    assert_eq!(
        payments.find_charge(&id).await.expect("search"),
        Some(charge)
    );
    assert_eq!(fake.charges_of(id.as_str()), 1);
}

#[tokio::test]
async fn an_unreachable_provider_is_transient() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let base_url = format!("http://{}", listener.local_addr().expect("address"));
    drop(listener);
    let payments = StripePayments::new(StripeConfig {
        base_url,
        secret_key: SecretKey::new(SECRET_KEY),
        timeout: TIMEOUT,
        key_prefix: String::new(),
    })
    .expect("gateway");
    let id = order_id("unreachable");
    let err = payments
        .charge(&charge_of(&id, 100, "pm_card_visa"))
        .await
        .expect_err("no server");
    assert!(matches!(err, GatewayError::Unavailable(_)), "{err:?}");
    let err = payments.find_charge(&id).await.expect_err("no server");
    assert!(err.is_transient(), "{err:?}");
}

#[tokio::test]
async fn refund_sends_its_key_and_twice_is_already() {
    let (fake, payments) = gateway().await;
    let id = order_id("refund");
    let charge = payments
        .charge(&charge_of(&id, 2500, "pm_card_visa"))
        .await
        .expect("charge");
    let Refunded::Now(refund) = payments
        .refund(&id, None, &id.refund_key())
        .await
        .expect("refund")
    else {
        panic!("the first refund refunds");
    };
    assert_eq!(
        (&refund.charge_id, refund.amount_cents, &refund.order_id),
        (&charge.charge_id, 2500, &id)
    );
    assert_eq!(refund.idempotency_key, format!("refund:{id}"));
    assert_eq!(
        payments
            .refund(&id, None, &id.refund_key())
            .await
            .expect("again"),
        Refunded::Already(refund.clone())
    );
    let posts: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path == "/v1/refunds")
        .collect();
    assert_eq!(posts.len(), 2);
    for post in &posts {
        assert_eq!(
            post.header("idempotency-key"),
            Some(format!("refund:{id}").as_str())
        );
        assert_eq!(
            post.header("authorization"),
            Some(format!("Bearer {SECRET_KEY}").as_str())
        );
    }
    // Under another key Stripe says "already refunded": the refund made is looked up.
    assert_eq!(
        payments
            .refund(&id, None, "refund:other")
            .await
            .expect("other key"),
        Refunded::Already(refund)
    );
    assert_eq!(fake.refunds_of(id.as_str()), 1);
}

#[tokio::test]
async fn a_refund_right_after_a_charge_goes_by_its_id_while_search_lags() {
    let (fake, payments) = gateway().await;
    let id = order_id("refund-lag");
    fake.search_lags(true);
    let charge = payments
        .charge(&charge_of(&id, 3100, "pm_card_visa"))
        .await
        .expect("charge");
    // The shipment is rejected a second later: search does not see the intent yet.
    assert_eq!(payments.find_charge(&id).await.expect("find"), None);
    let before = fake.requests().len();
    let Refunded::Now(refund) = payments
        .refund(&id, Some(&charge.charge_id), &id.refund_key())
        .await
        .expect("refund")
    else {
        panic!("the charge is refunded");
    };
    assert_eq!(
        (&refund.charge_id, refund.amount_cents, &refund.order_id),
        (&charge.charge_id, 3100, &id)
    );
    assert_eq!(fake.refunds_of(id.as_str()), 1);
    let calls: Vec<_> = fake.requests()[before..]
        .iter()
        .map(|r| (r.method.to_string(), r.path.clone()))
        .collect();
    assert_eq!(
        calls,
        [
            (
                "GET".to_owned(),
                format!("/v1/payment_intents/{}", charge.charge_id)
            ),
            ("POST".to_owned(), "/v1/refunds".to_owned()),
        ],
        "the intent is retrieved by id, never searched"
    );
    let post = fake.requests().pop().expect("the refund");
    assert_eq!(
        post.param("payment_intent"),
        Some(charge.charge_id.as_str())
    );
    assert_eq!(
        post.header("idempotency-key"),
        Some(id.refund_key().as_str())
    );
    // Once search catches up, a refund that had to search finds the same refund.
    fake.search_lags(false);
    assert_eq!(
        payments
            .refund(&id, None, &id.refund_key())
            .await
            .expect("again"),
        Refunded::Already(refund)
    );
    assert_eq!(fake.refunds_of(id.as_str()), 1);
}

#[tokio::test]
async fn a_refund_by_another_orders_intent_sends_no_refund() {
    let (fake, payments) = gateway().await;
    let (id, other) = (order_id("mine"), order_id("theirs"));
    let theirs = payments
        .charge(&charge_of(&other, 700, "pm_card_visa"))
        .await
        .expect("charge");
    let err = payments
        .refund(&id, Some(&theirs.charge_id), &id.refund_key())
        .await
        .expect_err("another order's intent");
    assert!(matches!(err, GatewayError::Rejected(_)), "{err:?}");
    assert!(err.to_string().contains(other.as_str()), "{err}");
    // An id that cannot be Stripe's never reaches the URL.
    let err = payments
        .refund(&id, Some("pi_1/../../v1/refunds"), &id.refund_key())
        .await
        .expect_err("not an id");
    assert!(matches!(err, GatewayError::Rejected(_)), "{err:?}");
    assert!(
        fake.requests()
            .iter()
            .all(|r| r.path != "/v1/refunds" && !r.path.contains(".."))
    );
    assert_eq!(fake.refunds_of(other.as_str()), 0);
}

#[tokio::test]
async fn refund_without_a_charge_is_nothing_charged() {
    let (fake, payments) = gateway().await;
    let id = order_id("refund-none");
    assert_eq!(
        payments
            .refund(&id, None, &id.refund_key())
            .await
            .expect("refund"),
        Refunded::NothingCharged
    );
    assert!(fake.requests().iter().all(|r| r.method == "GET"));
}

#[tokio::test]
async fn find_charge_finds_the_orders_charge_only() {
    let (fake, payments) = gateway().await;
    let (id, other) = (order_id("find"), order_id("find-other"));
    assert_eq!(payments.find_charge(&id).await.expect("find"), None);
    let charge = payments
        .charge(&charge_of(&id, 4200, "pm_card_visa"))
        .await
        .expect("charge");
    payments
        .charge(&charge_of(&other, 100, "pm_card_visa"))
        .await
        .expect("other charge");
    assert_eq!(payments.find_charge(&id).await.expect("find"), Some(charge));
    let search = fake.requests().pop().expect("the search");
    assert_eq!(
        (search.path.as_str(), search.param("query")),
        (
            "/v1/payment_intents/search",
            Some(format!("metadata['order_id']:'{id}'").as_str())
        )
    );
}

#[tokio::test]
async fn the_secret_key_never_shows_in_debug_or_errors() {
    let fake = FakeStripe::start().await;
    let wrong = "sk_test_wrong_key_that_must_not_leak";
    let config = config(&fake, wrong);
    assert!(!format!("{config:?}").contains(wrong));
    let payments = StripePayments::new(config).expect("gateway");
    assert!(!format!("{payments:?}").contains(wrong));
    let id = order_id("leak");
    // The fake quotes the key it got in its 401 message.
    let err = payments
        .charge(&charge_of(&id, 100, "pm_card_visa"))
        .await
        .expect_err("unauthorised");
    assert!(matches!(err, GatewayError::Misconfigured(_)), "{err:?}");
    assert!(err.to_string().contains("Invalid API Key"), "{err}");
    assert!(!err.to_string().contains(wrong), "{err}");
    assert!(!format!("{err:?}").contains(wrong), "{err:?}");
}

#[tokio::test]
async fn the_books_are_the_succeeded_intents_listed_page_after_page() {
    let (fake, payments) = gateway().await;
    let (paid, declined) = (order_id("books-paid"), order_id("books-declined"));
    let charge = payments
        .charge(&charge_of(&paid, 1200, "pm_card_visa"))
        .await
        .expect("charge");
    payments
        .charge(&charge_of(&declined, 1200, PM_DECLINED))
        .await
        .expect_err("declined");
    // Newest first: the declined intent fills the first page of two, the paid one the second.
    let first = payments.list_charges(None, None, 1).await.expect("list");
    assert_eq!(first.items, [], "a declined intent took nothing");
    let next = first.next.expect("more");
    let second = payments
        .list_charges(None, Some(&next), 1)
        .await
        .expect("list");
    assert_eq!(second.items, [charge]);
    assert_eq!(second.next, None);
    let lists: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| r.method.as_str() == "GET" && r.path == "/v1/payment_intents")
        .collect();
    assert_eq!(lists.len(), 2);
    assert_eq!(lists[0].param("starting_after"), None);
    assert_eq!(lists[1].param("starting_after"), Some(next.as_str()));
    assert_eq!(lists[1].param("limit"), Some("1"));
}

mod contract {
    //! The payment part of the adapter contract suite (`testkit::gateways`).

    use super::*;

    #[tokio::test]
    async fn charge_is_once_per_key() {
        let (_fake, payments) = gateway().await;
        gateways::charge_is_once_per_key(&payments).await;
    }

    #[tokio::test]
    async fn charge_key_reuse_with_other_amount_is_refused() {
        let (_fake, payments) = gateway().await;
        gateways::charge_key_reuse_with_other_amount_is_refused(&payments).await;
    }

    #[tokio::test]
    async fn refund_is_once_and_noop_without_charge() {
        let (_fake, payments) = gateway().await;
        gateways::refund_is_once_and_noop_without_charge(&payments).await;
    }

    #[tokio::test]
    async fn refund_by_charge_id_refunds_that_charge() {
        let (_fake, payments) = gateway().await;
        gateways::refund_by_charge_id_refunds_that_charge(&payments).await;
    }

    #[tokio::test]
    async fn refund_by_a_charge_id_not_the_orders_is_refused() {
        let (_fake, payments) = gateway().await;
        gateways::refund_by_a_charge_id_not_the_orders_is_refused(&payments).await;
    }

    #[tokio::test]
    async fn listing_pages_cover_every_charge_and_refund_once() {
        let (_fake, payments) = gateway().await;
        gateways::listing_pages_cover_every_charge_and_refund_once(&payments).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_charges_with_one_key_charge_once() {
        let (fake, payments) = gateway().await;
        gateways::concurrent_charges_with_one_key_charge_once(Arc::new(payments)).await;
        assert_eq!(fake.requests().len(), 8);
    }
}
