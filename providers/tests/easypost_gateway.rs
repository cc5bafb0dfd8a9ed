//! The EasyPost gateway against the fake EasyPost (`testkit::fake_easypost`): what it
//! sends, every class of error, and at most one label per order under retries, lost answers,
//! concurrent callers (replicas, a stale worker and its retry) and a void racing a buy. Each
//! scenario runs with its label records on SQLite and on DynamoDB (moto), as does the shipping
//! part of the adapter contract suite.

use providers::EasyPostConfig;
use providers::EasyPostShipping;
use providers::SecretKey;
use providers::easypost::{LabelBook, check_key};
use reqwest::{Method, StatusCode};
use std::any::Any;
use std::sync::Arc;
use std::time::{Duration, Instant};
use store::{GatewayError, OrderId, ShipmentRequest, ShippingGateway, Voided};
use store_dynamodb::DynamoStore;
use store_sqlite::SqliteStore;
use testkit::fake_easypost::{API_KEY, FakeEasyPost};
use testkit::{address, gateways, line, moto, order_id, unique};

const TIMEOUT: Duration = Duration::from_millis(500);
const DEADLINE: Duration = Duration::from_secs(20);

/// Label records on one backend, with what must live as long as they do.
struct Book {
    book: Arc<dyn LabelBook>,
    _guard: Box<dyn Any + Send>,
}

async fn sqlite() -> Book {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = SqliteStore::open_with(dir.path().join("s.db"), store_sqlite::Durability::Normal)
        .expect("open store");
    Book {
        book: Arc::new(store),
        _guard: Box::new(dir),
    }
}

async fn dynamodb() -> Book {
    let client = moto::shared().client();
    let table = unique("labels");
    store_dynamodb::create_table(&client, &table)
        .await
        .expect("create table");
    Book {
        book: Arc::new(DynamoStore::new(client, table)),
        _guard: Box::new(()),
    }
}

fn config(fake: &FakeEasyPost, key: &str) -> EasyPostConfig {
    EasyPostConfig {
        base_url: fake.base_url.clone(),
        api_key: SecretKey::new(key),
        timeout: TIMEOUT,
        carrier: "USPS".to_owned(),
        service: None,
        from_address: serde_json::json!({"id": "adr_warehouse"}),
        unit_weight_oz: 16,
    }
}

/// A gateway (one replica) over `book`, talking to `fake`.
fn gateway(fake: &FakeEasyPost, book: &Book) -> EasyPostShipping {
    gateway_with(fake, book, |_| {})
}

/// [`gateway`] with the settings `change` makes.
fn gateway_with(
    fake: &FakeEasyPost,
    book: &Book,
    change: impl FnOnce(&mut EasyPostConfig),
) -> EasyPostShipping {
    let mut config = config(fake, API_KEY);
    change(&mut config);
    EasyPostShipping::new(config, book.book.clone()).expect("gateway")
}

/// Asserts that shipping `id` to `postal_code` is refused for good, saying `why`, and that no
/// label was bought.
async fn assert_rejected(
    shipping: &EasyPostShipping,
    fake: &FakeEasyPost,
    id: &OrderId,
    postal_code: &str,
    why: &str,
) {
    let err = shipping
        .create_shipment(&request(id, postal_code))
        .await
        .expect_err("refused");
    assert!(
        matches!(&err, GatewayError::Rejected(m) if m.contains(why)),
        "{why}: {err:?}"
    );
    assert!(!err.is_transient());
    assert_eq!(fake.labels_bought(id.as_str()), 0);
}

fn request(id: &OrderId, postal_code: &str) -> ShipmentRequest {
    ShipmentRequest {
        order_id: id.clone(),
        address: address(postal_code),
        lines: vec![line("SKU-A", 2), line("SKU-B", 1)],
    }
}

/// Polls `f` until it answers `Some`, or panics after [`DEADLINE`] naming `what`.
async fn until<T>(what: &str, mut f: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + DEADLINE;
    loop {
        if let Some(done) = f().await {
            return done;
        }
        assert!(Instant::now() < deadline, "never {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

mod scenarios {
    use super::*;

    pub async fn ships_once_with_the_order_as_reference(book: Book) {
        let fake = FakeEasyPost::start().await;
        let shipping = gateway(&fake, &book);
        let id = order_id("ep-ship");
        let shipment = shipping
            .create_shipment(&request(&id, "75001"))
            .await
            .expect("ship");
        assert_eq!(shipment.order_id, id);
        assert!(shipment.shipment_id.starts_with("shp_"));
        assert!(shipment.tracking_number.starts_with("9400"));
        let requests = fake.requests();
        let [create, buy] = requests.as_slice() else {
            panic!("a create and a buy: {requests:?}");
        };
        assert_eq!(
            (create.method.as_str(), create.path.as_str()),
            ("POST", "/v2/shipments")
        );
        let sent = &create.body["shipment"];
        assert_eq!(sent["reference"], id.as_str());
        assert_eq!(sent["to_address"]["zip"], "75001");
        assert_eq!(sent["to_address"]["street1"], "12 St James's Square");
        assert_eq!(sent["from_address"]["id"], "adr_warehouse");
        assert_eq!(sent["parcel"]["weight"], 3 * 16, "three units of 16 oz");
        assert!(
            create
                .header("authorization")
                .is_some_and(|a| a.starts_with("Basic ")),
            "the key as the Basic user name"
        );
        assert_eq!(
            buy.path,
            format!("/v2/shipments/{}/buy", shipment.shipment_id)
        );
        // The same order again is answered from the record, without asking EasyPost.
        let again = shipping
            .create_shipment(&request(&id, "75001"))
            .await
            .expect("again");
        assert_eq!(again, shipment);
        assert_eq!(
            shipping.shipment(&id).await.expect("read"),
            Some(shipment.clone())
        );
        assert_eq!(fake.requests().len(), 2);
        // The cheapest USPS rate of the fake's: GroundAdvantage, 6.07.
        let bought = shipping_rate(&fake, &shipment.shipment_id).await;
        assert_eq!(bought, ("USPS".to_owned(), "GroundAdvantage".to_owned()));
        assert_eq!(fake.labels_bought(id.as_str()), 1);
    }

    /// The (carrier, service) of the rate bought for `shipment_id`.
    async fn shipping_rate(fake: &FakeEasyPost, shipment_id: &str) -> (String, String) {
        let bought = reqwest::Client::new()
            .get(format!("{}/v2/shipments/{shipment_id}", fake.base_url))
            .bearer_auth(API_KEY)
            .send()
            .await
            .expect("retrieve")
            .json::<serde_json::Value>()
            .await
            .expect("json");
        let rate = &bought["selected_rate"];
        (
            rate["carrier"].as_str().unwrap_or_default().to_owned(),
            rate["service"].as_str().unwrap_or_default().to_owned(),
        )
    }

    pub async fn a_configured_service_is_the_one_bought(book: Book) {
        let fake = FakeEasyPost::start().await;
        let shipping = gateway_with(&fake, &book, |c| c.service = Some("priority".to_owned()));
        let id = order_id("ep-service");
        let shipment = shipping
            .create_shipment(&request(&id, "75001"))
            .await
            .expect("ship");
        let bought = shipping_rate(&fake, &shipment.shipment_id).await;
        assert_eq!(bought, ("USPS".to_owned(), "Priority".to_owned()));

        let fedex = gateway_with(&fake, &book, |c| c.carrier = "FedEx".to_owned());
        let other = order_id("ep-no-rate");
        assert_rejected(&fedex, &fake, &other, "75001", "no FedEx").await;
    }

    pub async fn the_shipping_contract_holds(book: Book) {
        let fake = FakeEasyPost::start().await;
        let shipping = gateway(&fake, &book);
        gateways::one_shipment_per_order(&shipping).await;
        gateways::voided_shipping_refuses_a_late_shipment(&shipping).await;
        gateways::voiding_after_a_shipment_reports_it(&shipping).await;
    }

    pub async fn an_undeliverable_address_is_rejected_with_the_carriers_reason(book: Book) {
        let fake = FakeEasyPost::start().await;
        fake.undeliverable("00501");
        let shipping = gateway(&fake, &book);
        let id = order_id("ep-undeliverable");
        let why = "00501 is not deliverable";
        assert_rejected(&shipping, &fake, &id, "00501", why).await;
        // The refusal ended the buy: the compensation's void need not wait for it.
        assert_eq!(shipping.void(&id).await.expect("void"), Voided::Now);
        assert_eq!(shipping.shipment(&id).await.expect("read"), None);
    }

    pub async fn a_shipment_easypost_cannot_validate_is_rejected(book: Book) {
        let fake = FakeEasyPost::start().await;
        let no_origin = gateway_with(&fake, &book, |c| c.from_address = serde_json::Value::Null);
        let id = order_id("ep-invalid");
        let why = "from_address: cannot be blank";
        assert_rejected(&no_origin, &fake, &id, "75001", why).await;
        assert_eq!(fake.shipments_of(id.as_str()), 0);
    }

    pub async fn a_wrong_key_is_unavailable_says_so_and_never_shows_it(book: Book) {
        let fake = FakeEasyPost::start().await;
        let wrong = "EZTK_wrong_key_5f4e3d2c1b0a";
        let shipping = gateway_with(&fake, &book, |c| c.api_key = SecretKey::new(wrong));
        assert!(!format!("{shipping:?}").contains(wrong));
        let id = order_id("ep-wrong-key");
        let err = shipping
            .create_shipment(&request(&id, "75001"))
            .await
            .expect_err("refused key");
        assert!(
            matches!(err, GatewayError::Misconfigured(_)) && err.is_transient(),
            "an operator's fault is retried: {err:?}"
        );
        let text = err.to_string();
        assert!(text.contains("API key") && text.contains("401"), "{text}");
        assert!(
            !text.contains(wrong),
            "the key it quoted is redacted: {text}"
        );
        let check = check_key(&config(&fake, wrong))
            .await
            .expect_err("wrong key");
        assert!(matches!(&check, GatewayError::Misconfigured(m) if m.contains("API key")));
        assert!(!check.to_string().contains(wrong));
        check_key(&config(&fake, API_KEY))
            .await
            .expect("the right key");
        fake.fail_next(1, StatusCode::SERVICE_UNAVAILABLE);
        let unsure = check_key(&config(&fake, API_KEY)).await;
        assert!(
            matches!(unsure, Err(GatewayError::Unavailable(_))),
            "{unsure:?}"
        );
    }

    /// `/readyz` asks the carrier's health: unhealthy while EasyPost's last answer refused the
    /// key (asked again on each probe, so a fixed key shows at once), each refusal counted.
    pub async fn a_refused_key_makes_the_carrier_unhealthy_until_it_is_accepted(book: Book) {
        let fake = FakeEasyPost::start().await;
        let shipping = gateway(&fake, &book);
        assert!(shipping.health().await.is_ok(), "healthy before any answer");
        fake.fail_next(2, StatusCode::UNAUTHORIZED);
        let id = order_id("ep-revoked");
        let err = shipping
            .create_shipment(&request(&id, "75001"))
            .await
            .expect_err("revoked");
        assert!(matches!(err, GatewayError::Misconfigured(_)), "{err:?}");
        let unhealthy = shipping.health().await.expect_err("still refused");
        assert!(unhealthy.to_string().contains("API key"), "{unhealthy}");
        assert_eq!(shipping.health_counts().misconfigured_answers(), 2);
        // Accepted again (the key was fixed): healthy, and the shipment goes through.
        shipping.health().await.expect("accepted");
        assert_eq!(shipping.health_counts().fault(), None);
        shipping
            .create_shipment(&request(&id, "75001"))
            .await
            .expect("ships");
        // An outage is no ill health.
        fake.fail_next(1, StatusCode::SERVICE_UNAVAILABLE);
        let _ = shipping.shipment(&id).await;
        assert!(shipping.health().await.is_ok());
    }

    pub async fn outages_and_rate_limits_are_unavailable_and_the_retry_buys_once(book: Book) {
        let fake = FakeEasyPost::start().await;
        let shipping = gateway(&fake, &book);
        let id = order_id("ep-outage");
        for status in [
            StatusCode::SERVICE_UNAVAILABLE,
            StatusCode::TOO_MANY_REQUESTS,
            StatusCode::INTERNAL_SERVER_ERROR,
        ] {
            fake.fail_next(1, status);
            let err = shipping
                .create_shipment(&request(&id, "75001"))
                .await
                .expect_err("outage");
            assert!(
                matches!(err, GatewayError::Unavailable(_)),
                "{status}: {err:?}"
            );
        }
        shipping
            .create_shipment(&request(&id, "75001"))
            .await
            .expect("retry");
        assert_eq!(fake.labels_bought(id.as_str()), 1);
        assert_eq!(fake.shipments_of(id.as_str()), 1);
    }

    pub async fn a_slow_answer_is_unavailable_and_the_retry_buys_once(book: Book) {
        let fake = FakeEasyPost::start().await;
        let shipping = gateway(&fake, &book);
        let id = order_id("ep-slow");
        fake.delay(Some(TIMEOUT * 3));
        let err = shipping
            .create_shipment(&request(&id, "75001"))
            .await
            .expect_err("timeout");
        assert!(err.is_transient(), "{err:?}");
        fake.delay(None);
        let shipment = shipping
            .create_shipment(&request(&id, "75001"))
            .await
            .expect("retry");
        // The slow create made a shipment nobody claimed: it is never bought.
        assert_eq!(fake.shipments_of(id.as_str()), 2);
        assert_eq!(fake.labels_bought(id.as_str()), 1);
        assert_eq!(shipping.shipment(&id).await.expect("read"), Some(shipment));
    }

    pub async fn a_lost_buy_answer_is_found_by_the_retry_not_bought_again(book: Book) {
        let fake = FakeEasyPost::start().await;
        let shipping = gateway(&fake, &book);
        let id = order_id("ep-lost");
        fake.lose_next(1, "/buy");
        let err = shipping
            .create_shipment(&request(&id, "75001"))
            .await
            .expect_err("lost answer");
        assert!(err.is_transient(), "{err:?}");
        assert_eq!(fake.labels_bought(id.as_str()), 1, "bought, answer lost");
        let shipment = shipping
            .create_shipment(&request(&id, "75001"))
            .await
            .expect("retry finds it");
        assert_eq!(fake.labels_bought(id.as_str()), 1);
        assert_eq!(
            fake.requests_to(Method::POST, "/buy"),
            1,
            "never bought again"
        );
        assert_eq!(shipping.shipment(&id).await.expect("read"), Some(shipment));
        // A lost create answer too: the retry makes another shipment and buys only that one.
        let other = order_id("ep-lost-create");
        fake.lose_next(1, "/shipments");
        assert!(
            shipping
                .create_shipment(&request(&other, "75001"))
                .await
                .is_err()
        );
        shipping
            .create_shipment(&request(&other, "75001"))
            .await
            .expect("retry");
        assert_eq!(fake.shipments_of(other.as_str()), 2);
        assert_eq!(fake.labels_bought(other.as_str()), 1);
    }

    pub async fn concurrent_callers_buy_one_label(book: Book) {
        let fake = FakeEasyPost::start().await;
        // Slow enough that the callers overlap, fast enough for the timeout.
        fake.delay(Some(Duration::from_millis(50)));
        let id = order_id("ep-race");
        let callers: Vec<_> = (0..8)
            .map(|_| {
                let (shipping, req) = (gateway(&fake, &book), request(&id, "75001"));
                tokio::spawn(async move { shipping.create_shipment(&req).await })
            })
            .collect();
        let mut shipped = Vec::new();
        for caller in callers {
            shipped.push(caller.await.expect("task").expect("ship"));
        }
        shipped.dedup();
        assert_eq!(shipped.len(), 1, "one shipment: {shipped:?}");
        assert_eq!(fake.labels_bought(id.as_str()), 1);
    }

    pub async fn a_stale_worker_and_its_retry_buy_one_label(book: Book) {
        let fake = FakeEasyPost::start().await;
        let (stale, retry) = (gateway(&fake, &book), gateway(&fake, &book));
        let id = order_id("ep-stale");
        // The stale worker's buy is made but answered after its timeout.
        fake.delay_to("/buy", Some(TIMEOUT * 3));
        let req = request(&id, "75001");
        let slow = tokio::spawn(async move { stale.create_shipment(&req).await });
        let _ = until("the stale buy was made", async || {
            (fake.labels_bought(id.as_str()) == 1).then_some(())
        })
        .await;
        fake.delay(None);
        let shipment = retry
            .create_shipment(&request(&id, "75001"))
            .await
            .expect("the retry finds the label");
        let stale = slow.await.expect("task");
        assert!(
            stale.is_err_and(|e| e.is_transient()),
            "the stale worker timed out"
        );
        assert_eq!(fake.labels_bought(id.as_str()), 1);
        assert_eq!(fake.requests_to(Method::POST, "/buy"), 1);
        assert_eq!(
            gateway(&fake, &book)
                .create_shipment(&request(&id, "75001"))
                .await,
            Ok(shipment)
        );
    }

    pub async fn a_void_racing_a_buy_refunds_the_late_label(book: Book) {
        let fake = FakeEasyPost::start().await;
        let (worker, compensation) = (gateway(&fake, &book), gateway(&fake, &book));
        let id = order_id("ep-void-race");
        // The buy is made at once and answered within the timeout, a little later.
        fake.delay(Some(TIMEOUT / 2));
        let req = request(&id, "75001");
        let buying = tokio::spawn(async move { worker.create_shipment(&req).await });
        let _ = until("the buy was made", async || {
            (fake.labels_bought(id.as_str()) == 1).then_some(())
        })
        .await;
        let err = compensation
            .void(&id)
            .await
            .expect_err("a buy is in flight");
        assert!(err.is_transient(), "{err:?}");
        let late = buying.await.expect("task").expect_err("voided first");
        assert!(
            matches!(&late, GatewayError::Rejected(m) if m.contains("refunded")),
            "{late:?}"
        );
        assert_eq!(fake.labels_refunded(id.as_str()), 1);
        fake.delay(None);
        assert_eq!(compensation.void(&id).await, Ok(Voided::Now));
        assert!(matches!(
            compensation.create_shipment(&request(&id, "75001")).await,
            Err(GatewayError::Rejected(_))
        ));
        assert_eq!(compensation.shipment(&id).await.expect("read"), None);
        assert_eq!(fake.labels_bought(id.as_str()), 1);
        assert_eq!(fake.requests_to(Method::POST, "/refund"), 1);
    }

    pub async fn a_label_whose_buyer_was_lost_is_refunded_by_the_void(book: Book) {
        let fake = FakeEasyPost::start().await;
        fake.refunds_end_as("not_applicable");
        let shipping = gateway(&fake, &book);
        let id = order_id("ep-void-lost");
        fake.lose_next(1, "/buy");
        let err = shipping
            .create_shipment(&request(&id, "75001"))
            .await
            .expect_err("answer lost");
        assert!(err.is_transient());
        // The buyer is gone (the workflow gave up on it); the compensation voids. Until the
        // buy can no longer land the void is retried, then it refunds what it finds.
        let voided = until("the void finished", async || shipping.void(&id).await.ok()).await;
        assert_eq!(voided, Voided::Now);
        assert_eq!(fake.labels_bought(id.as_str()), 1);
        assert_eq!(fake.labels_refunded(id.as_str()), 1);
        assert_eq!(shipping.void(&id).await, Ok(Voided::Now));
        assert_eq!(
            fake.requests_to(Method::POST, "/refund"),
            1,
            "refunded once"
        );
        assert!(matches!(
            shipping.create_shipment(&request(&id, "75001")).await,
            Err(GatewayError::Rejected(_))
        ));
    }
}

macro_rules! on_each_backend {
    ($($name:ident),+ $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    super::scenarios::$name(super::sqlite().await).await;
                }
            )+
        }
        mod dynamodb {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    super::scenarios::$name(super::dynamodb().await).await;
                }
            )+
        }
    };
}

on_each_backend!(
    ships_once_with_the_order_as_reference,
    a_configured_service_is_the_one_bought,
    the_shipping_contract_holds,
    an_undeliverable_address_is_rejected_with_the_carriers_reason,
    a_shipment_easypost_cannot_validate_is_rejected,
    a_wrong_key_is_unavailable_says_so_and_never_shows_it,
    a_refused_key_makes_the_carrier_unhealthy_until_it_is_accepted,
    outages_and_rate_limits_are_unavailable_and_the_retry_buys_once,
    a_slow_answer_is_unavailable_and_the_retry_buys_once,
    a_lost_buy_answer_is_found_by_the_retry_not_bought_again,
    concurrent_callers_buy_one_label,
    a_stale_worker_and_its_retry_buy_one_label,
    a_void_racing_a_buy_refunds_the_late_label,
    a_label_whose_buyer_was_lost_is_refunded_by_the_void,
);
