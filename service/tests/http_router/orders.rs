//! `POST /orders`: accepted, replayed, conflicting, and every way a body can be refused.

use super::*;

#[tokio::test(flavor = "multi_thread")]
async fn accepts_an_order_with_202_location_and_execution_arn() {
    let app = App::start().await;
    app.stock("book", 5, 2_500).await;
    let r = app.post("/orders", &small("o-1", "book")).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    assert_eq!(r.header("location"), Some("/orders/o-1/status"));
    assert_eq!(r.header("idempotent-replayed"), None);
    let body = r.json();
    assert_eq!(body["orderId"], "o-1");
    assert_eq!(body["statusUrl"], "/orders/o-1/status");
    assert!(body["status"].is_string());
    let arn = body["executionArn"].as_str().unwrap();
    assert!(arn.starts_with("arn:") && arn.ends_with(":o-1"), "{arn}");
    let stored = app.stored("o-1").await.unwrap();
    assert_eq!(stored.execution_arn.as_deref(), Some(arn));
    assert!(!stored.new.requires_approval);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_order_at_the_threshold_needs_approval() {
    let app = App::start().await;
    app.stock("piano", 1, 100_000).await;
    let r = app
        .post("/orders", &order("o-big", &[("piano", 1, 100_000)]))
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    assert!(app.stored("o-big").await.unwrap().new.requires_approval);
}

#[tokio::test(flavor = "multi_thread")]
async fn replaying_an_order_returns_202_and_the_same_execution_arn() {
    let app = App::start().await;
    app.stock("book", 5, 2_500).await;
    let first = app.post("/orders", &small("o-2", "book")).await.json();
    let again = app.post("/orders", &small("o-2", "book")).await;
    assert_eq!(again.status, StatusCode::ACCEPTED);
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(again.header("location"), Some("/orders/o-2/status"));
    assert_eq!(again.json()["executionArn"], first["executionArn"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn another_body_for_the_same_order_is_409_and_changes_nothing() {
    let app = App::start().await;
    app.stock("book", 5, 2_500).await;
    app.post("/orders", &small("o-3", "book")).await;
    let before = app.stored("o-3").await.unwrap();
    let r = app
        .post("/orders", &order("o-3", &[("book", 2, 2_500)]))
        .await;
    let problem = r.problem(409, "order-conflict");
    assert_eq!(problem["instance"], "/orders");
    let after = app.stored("o-3").await.unwrap();
    assert_eq!(after.new, before.new);
    assert_eq!(after.execution_arn, before.execution_arn);
}

/// Sets `pointer` in a valid body to `value` (or removes it when `value` is None).
fn with(pointer: &str, value: Option<Value>) -> Value {
    let mut body = small("o-bad", "book");
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let target = body.pointer_mut(parent).unwrap().as_object_mut().unwrap();
    match value {
        Some(v) => target.insert(key.to_owned(), v),
        None => target.remove(key),
    };
    body
}

#[tokio::test(flavor = "multi_thread")]
async fn each_invalid_field_is_422_naming_it_and_nothing_is_stored() {
    let app = App::start().await;
    let long = |n: usize| json!("x".repeat(n));
    let cases: Vec<(&str, Option<Value>)> = vec![
        ("/orderId", Some(json!(""))),
        ("/orderId", Some(long(81))),
        ("/orderId", Some(json!("o/1"))),
        ("/orderId", Some(json!(17))),
        ("/orderId", None),
        ("/customerId", Some(json!(""))),
        ("/customerId", Some(long(81))),
        ("/customerId", Some(json!("cus\n1"))),
        ("/items", Some(json!([]))),
        ("/items", Some(json!({"sku": "book"}))),
        (
            "/items",
            Some(json!(vec![
                json!({"sku": "b", "quantity": 1, "unitPriceCents": 1});
                api::http::validate::MAX_ITEMS + 1
            ])),
        ),
        ("/items/0/sku", Some(json!(""))),
        ("/items/0/sku", Some(long(65))),
        ("/items/0/sku", Some(json!("bo ok"))),
        ("/items/0/quantity", Some(json!(0))),
        ("/items/0/quantity", Some(json!(10_001))),
        ("/items/0/quantity", Some(json!("1"))),
        ("/items/0/quantity", Some(json!(-1))),
        ("/items/0/quantity", Some(json!(1.5))),
        ("/items/0/quantity", Some(json!(0.0))),
        ("/items/0/quantity", Some(json!(-1.0))),
        ("/items/0/quantity", Some(json!(10_001.0))),
        ("/items/0/quantity", Some(json!(1e300))),
        ("/items/0/quantity", None),
        ("/items/0/unitPriceCents", Some(json!(-1))),
        ("/items/0/unitPriceCents", Some(json!(2500.5))),
        ("/items/0/unitPriceCents", Some(json!(100_000_001.0))),
        ("/items/0/unitPriceCents", Some(json!(100_000_001))),
        ("/items/0/unitPriceCents", Some(json!(null))),
        ("/items/0/colour", Some(json!("red"))),
        ("/currency", Some(json!("eur"))),
        ("/currency", Some(json!("EURO"))),
        ("/paymentMethod", Some(json!(""))),
        ("/paymentMethod", Some(long(101))),
        ("/shippingAddress", Some(json!("London"))),
        ("/shippingAddress/name", Some(json!(""))),
        ("/shippingAddress/line1", Some(long(201))),
        ("/shippingAddress/city", None),
        ("/shippingAddress/postalCode", Some(json!(10115))),
        ("/shippingAddress/country", Some(json!("gb"))),
        ("/shippingAddress/country", Some(json!("GBR"))),
        ("/giftWrap", Some(json!(true))),
    ];
    for (pointer, value) in cases {
        let body = with(pointer, value.clone());
        let r = app.post("/orders", &body).await;
        let fields = r.invalid_fields();
        assert_eq!(fields, [pointer], "{pointer} = {value:?}: {}", r.text());
    }
    // The one valid id among the bodies above was never stored, nor any other.
    assert!(app.stored("o-bad").await.is_none());
    assert_eq!(app.footprint(), (0, 0));
}

#[tokio::test(flavor = "multi_thread")]
async fn whole_numbers_written_with_a_fraction_are_integers() {
    let app = App::start().await;
    app.stock("book", 5, 1_250).await;
    app.stock("pen", 5, 0).await;
    let mut body = order("o-whole", &[("book", 2, 1_250), ("pen", 1, 0)]);
    body["items"][0]["quantity"] = json!(2.0);
    body["items"][0]["unitPriceCents"] = json!(1250.0);
    body["items"][1]["unitPriceCents"] = json!(0.0);
    assert!(body.to_string().contains("\"quantity\":2.0"), "{body}");
    let r = app.post("/orders", &body).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    let stored = app.stored("o-whole").await.unwrap();
    assert_eq!(stored.new.amount_cents, 2_500);
    // The same order written with plain integers is the same order: a replay.
    let again = app
        .post(
            "/orders",
            &order("o-whole", &[("book", 2, 1_250), ("pen", 1, 0)]),
        )
        .await;
    assert_eq!(again.status, StatusCode::ACCEPTED, "{}", again.text());
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    app.stock("gold", 0, 100_000_000).await;
    let mut limits = order("o-whole-max", &[("gold", 10_000, 100_000_000)]);
    limits["items"][0]["quantity"] = json!(10_000.0);
    limits["items"][0]["unitPriceCents"] = json!(100_000_000.0);
    let r = app.post("/orders", &limits).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
}

#[tokio::test(flavor = "multi_thread")]
async fn several_bad_fields_are_all_listed() {
    let app = App::start().await;
    let mut body = small("o-4", "book");
    body["customerId"] = json!("");
    body["items"][0]["quantity"] = json!("two");
    body["items"][0]["unitPriceCents"] = json!(-5);
    body["currency"] = json!("eu");
    body["shippingAddress"]["country"] = json!(1);
    body["coupon"] = json!("FREE");
    let r = app.post("/orders", &body).await;
    let mut fields = r.invalid_fields();
    fields.sort();
    assert_eq!(
        fields,
        [
            "/coupon",
            "/currency",
            "/customerId",
            "/items/0/quantity",
            "/items/0/unitPriceCents",
            "/shippingAddress/country"
        ]
    );
    assert!(app.stored("o-4").await.is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_body_that_is_not_an_object_is_422() {
    let app = App::start().await;
    for body in [json!([]), json!("order"), json!(null)] {
        assert_eq!(app.post("/orders", &body).await.invalid_fields(), [""]);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn malformed_json_is_400() {
    let app = App::start().await;
    for text in ["{\"orderId\": \"o-5\",", "", "not json"] {
        let r = app
            .send(
                Request::post("/orders")
                    .header(header::CONTENT_TYPE, "application/json")
                    .body(Body::from(text))
                    .unwrap(),
            )
            .await;
        r.problem(400, "malformed-json");
    }
    assert!(app.stored("o-5").await.is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn an_oversized_body_is_413() {
    let limits = HttpLimits {
        max_body_bytes: 1024,
        ..HttpLimits::default()
    };
    let app = App::with(SagaSettings::default(), limits).await;
    let mut body = small("o-6", "book");
    body["customerId"] = json!("c".repeat(2000));
    // The request has no Content-Length: the limit holds on the bytes that arrive.
    app.post("/orders", &body)
        .await
        .problem(413, "payload-too-large");
    let r = app
        .send(
            Request::post("/orders")
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::CONTENT_LENGTH, body.to_string().len())
                .body(Body::from(body.to_string()))
                .unwrap(),
        )
        .await;
    r.problem(413, "payload-too-large");
    assert!(app.stored("o-6").await.is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_body_that_is_not_json_is_415() {
    let app = App::start().await;
    let body = small("o-7", "book").to_string();
    for content_type in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        None,
    ] {
        let mut request = Request::post("/orders");
        if let Some(ct) = content_type {
            request = request.header(header::CONTENT_TYPE, ct);
        }
        let r = app
            .send(request.body(Body::from(body.clone())).unwrap())
            .await;
        r.problem(415, "unsupported-media-type");
    }
    assert!(app.stored("o-7").await.is_none());
}
