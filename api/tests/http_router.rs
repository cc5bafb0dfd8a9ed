//! The HTTP API through its router, without a socket, on the real stack (embedded engine, SQLite
//! store, saga workers): one test per endpoint and per error, every error as problem+json.

#[path = "http_router/app.rs"]
mod app;
#[path = "http_router/broken.rs"]
mod broken;
#[path = "http_router/counting.rs"]
mod counting;

use api::http::HttpLimits;
use app::{App, PROBLEM_JSON, TOKEN, large, order, send, small};
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use broken::{Broken, SECRET};
use counting::CountingLookups;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use store::{OrderId, OrderStatus};
use workflow::SagaSettings;

// ---------------------------------------------------------------- POST /orders

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

// ---------------------------------------------------------------- status and history

#[tokio::test(flavor = "multi_thread")]
async fn the_status_of_a_completed_small_order_shows_every_step() {
    let app = App::start().await;
    app.stock("book", 5, 2_500).await;
    let arn = app.post("/orders", &small("o-8", "book")).await.json()["executionArn"].clone();
    let body = app.reaches("o-8", "COMPLETED").await;
    let body = if body["executionStatus"] == "SUCCEEDED" {
        body
    } else {
        app.settled("o-8").await
    };
    assert_eq!(body["orderId"], "o-8");
    assert_eq!(body["executionArn"], arn);
    assert_eq!(body["executionStatus"], "SUCCEEDED");
    assert_eq!(body["requiresApproval"], false);
    assert_eq!(body["amountCents"], 2_500);
    assert_eq!(body["currency"], "EUR");
    assert_eq!(body["reservation"]["status"], "SHIPPED");
    assert_eq!(
        body["reservation"]["lines"],
        json!([{"sku": "book", "quantity": 1}])
    );
    assert_eq!(body["payment"]["amountCents"], 2_500);
    assert!(body["payment"]["chargeId"].is_string());
    assert!(
        body["shipment"]["trackingNumber"]
            .as_str()
            .unwrap()
            .starts_with("1Z")
    );
    assert_eq!(body["approval"], Value::Null);
    assert_eq!(body["failure"], Value::Null);
    assert!(body["updatedAt"].is_string());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancelled_order_shows_its_failure() {
    let app = App::start().await;
    app.stock("book", 5, 2_500).await;
    let mut body = small("o-9", "book");
    body["paymentMethod"] = json!("pm_card_chargeDeclined");
    app.post("/orders", &body).await;
    let status = app.reaches("o-9", "CANCELLED").await;
    assert_eq!(status["failure"]["error"], "Payment.Declined");
    assert!(status["failure"]["cause"].is_string());
    assert_eq!(status["payment"], Value::Null);
    assert_eq!(status["shipment"], Value::Null);
}

/// Clients poll the status for days while an order awaits approval; the provider's lookup is
/// rate-limited and lags, so the payment comes from the order.
#[tokio::test(flavor = "multi_thread")]
async fn the_status_shows_the_payment_without_asking_the_provider() {
    let app = App::start().await;
    app.stock("piano", 1, 250_000).await;
    app.post("/orders", &large("o-30", "piano")).await;
    app.reaches("o-30", "AWAITING_APPROVAL").await;
    let charged = app.stored("o-30").await.unwrap();
    let charge = app
        .state
        .ports
        .payments
        .find_charge(charged.id())
        .await
        .unwrap()
        .expect("the order is charged");
    // An order stored but not yet charged (its saga not started).
    let mut new = charged.new.clone();
    new.order_id = OrderId::parse("o-31").unwrap();
    app.state.ports.orders.create(new).await.unwrap();

    let payments = Arc::new(CountingLookups::new(app.state.ports.payments.clone()));
    let router = app.with_payments(payments.clone());
    let status = |id: &str| {
        let request = app.as_client(
            Request::get(format!("/orders/{id}/status"))
                .body(Body::empty())
                .unwrap(),
        );
        let router = router.clone();
        async move {
            let r = send(&router, request).await;
            assert_eq!(r.status, StatusCode::OK, "{}", r.text());
            r.json()
        }
    };
    let body = status("o-30").await;
    assert_eq!(body["status"], "AWAITING_APPROVAL");
    assert_eq!(
        body["payment"],
        json!({
            "chargeId": charge.charge_id,
            "amountCents": 250_000,
            "currency": "EUR",
            "createdAt": charge.created_at,
        })
    );
    let body = status("o-31").await;
    assert_eq!(body["status"], "ACCEPTED");
    assert_eq!(body["payment"], Value::Null);
    assert_eq!(payments.finds(), 0, "no provider lookup");

    // An order charged before the charge time was recorded has none: only it is looked up.
    app.state
        .ports
        .orders
        .advance(&OrderId::parse("o-31").unwrap(), OrderStatus::Charged, None)
        .await
        .unwrap();
    assert_eq!(status("o-31").await["payment"], Value::Null);
    assert_eq!(payments.finds(), 1);
}

/// A declined card or missing stock cancels an order before anything is charged: its status has
/// no payment to look up, however often it is polled (and a provider refusing the lookup cannot
/// fail it).
#[tokio::test(flavor = "multi_thread")]
async fn the_status_of_an_order_cancelled_before_any_charge_asks_no_provider() {
    let app = App::start().await;
    app.stock("book", 5, 2_500).await;
    let mut declined = small("o-32", "book");
    declined["paymentMethod"] = json!("pm_card_chargeDeclined");
    app.post("/orders", &declined).await;
    app.stock("sold-out", 0, 2_500).await;
    app.post("/orders", &small("o-33", "sold-out")).await;
    app.reaches("o-32", "CANCELLED").await;
    app.reaches("o-33", "CANCELLED").await;

    let payments = Arc::new(CountingLookups::new(app.state.ports.payments.clone()));
    let router = app.with_payments(payments.clone());
    for id in ["o-32", "o-33", "o-32", "o-33"] {
        let request = app.as_client(
            Request::get(format!("/orders/{id}/status"))
                .body(Body::empty())
                .unwrap(),
        );
        let r = send(&router, request).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
        assert_eq!(r.json()["payment"], Value::Null);
    }
    assert_eq!(payments.finds(), 0, "no provider lookup");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_status_of_an_unknown_order_is_404() {
    let app = App::start().await;
    app.get("/orders/nope/status")
        .await
        .problem(404, "order-not-found");
    app.get("/orders/not%20an%20id/status")
        .await
        .problem(404, "order-not-found");
    app.get("/orders/nope/history")
        .await
        .problem(404, "order-not-found");
}

#[tokio::test(flavor = "multi_thread")]
async fn history_is_paged_with_next_token() {
    let app = App::start().await;
    app.stock("book", 5, 2_500).await;
    app.post("/orders", &small("o-10", "book")).await;
    app.settled("o-10").await;
    let all = app.get("/orders/o-10/history?maxResults=1000").await.json();
    let all = all["events"].as_array().unwrap().clone();
    assert!(all.len() > 4, "{all:?}");
    assert_eq!(all[0]["type"], "ExecutionStarted");
    let mut paged = Vec::new();
    let mut path = "/orders/o-10/history?maxResults=3".to_owned();
    loop {
        let r = app.get(&path).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
        let page = r.json();
        let events = page["events"].as_array().unwrap();
        assert!(events.len() <= 3);
        paged.extend(events.iter().cloned());
        match page["nextToken"].as_str() {
            Some(token) => path = format!("/orders/o-10/history?maxResults=3&nextToken={token}"),
            None => break,
        }
    }
    assert_eq!(paged, all);
}

#[tokio::test(flavor = "multi_thread")]
async fn invalid_history_paging_is_400() {
    let app = App::start().await;
    app.stock("book", 5, 2_500).await;
    app.post("/orders", &small("o-11", "book")).await;
    app.settled("o-11").await;
    for (query, field) in [
        ("maxResults=0", "maxResults"),
        ("maxResults=1001", "maxResults"),
        ("maxResults=1001.0", "maxResults"),
        ("maxResults=ten", "maxResults"),
        ("maxResults=2.5", "maxResults"),
        ("maxResults=-1", "maxResults"),
        ("maxResults=", "maxResults"),
        ("nextToken=", "nextToken"),
        ("nextToken=bogus", "nextToken"),
        ("maxResults=2&nextToken=not-a-token", "nextToken"),
    ] {
        let r = app.get(&format!("/orders/o-11/history?{query}")).await;
        let body = r.problem(400, "invalid-request");
        assert_eq!(body["errors"][0]["field"], field, "{query}: {body}");
    }
    // 1024 characters is the longest token, counted in characters, not bytes.
    let long = "%C3%A9".repeat(1024);
    let r = app
        .get(&format!("/orders/o-11/history?nextToken={long}"))
        .await;
    let body = r.problem(400, "invalid-request");
    assert_eq!(
        body["errors"][0]["message"],
        "is not a token of this history"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn integer_query_parameters_may_have_a_zero_fraction() {
    let app = App::start().await;
    app.stock("book", 5, 2_500).await;
    app.post("/orders", &small("o-11f", "book")).await;
    app.settled("o-11f").await;
    let r = app.get("/orders/o-11f/history?maxResults=2.0").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.json()["events"].as_array().unwrap().len(), 2);
    let r = app.operator_get("/approvals?limit=1.00").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let body = app
        .operator_get("/approvals?limit=0.5")
        .await
        .problem(400, "invalid-request");
    assert_eq!(body["errors"][0]["field"], "limit");
}

// ---------------------------------------------------------------- approvals

#[tokio::test(flavor = "multi_thread")]
async fn operator_endpoints_need_the_bearer_token() {
    let app = App::start().await;
    let body = json!({"decision": "approve"});
    let wrong = format!("Bearer {TOKEN}x");
    let cases: [&[(&str, &str)]; 4] = [
        &[],
        &[("authorization", &wrong)],
        &[("authorization", "Bearer ")],
        &[("authorization", TOKEN)],
    ];
    for headers in cases {
        for (method, path) in [
            (Method::POST, "/orders/o-12/approval"),
            (Method::PUT, "/inventory/book"),
            (Method::GET, "/approvals"),
        ] {
            let r = app.json(method, path, &body, headers).await;
            r.problem(401, "unauthorized");
            assert!(r.header("www-authenticate").unwrap().starts_with("Bearer"));
            assert!(!r.text().contains(TOKEN));
        }
    }
    assert!(
        app.state
            .ports
            .inventory
            .stock("book")
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn approving_a_waiting_order_is_200_and_it_completes() {
    let app = App::start().await;
    app.stock("piano", 1, 250_000).await;
    app.post("/orders", &large("o-13", "piano")).await;
    app.reaches("o-13", "AWAITING_APPROVAL").await;
    let bearer = format!("Bearer {TOKEN}");
    let r = app
        .json(
            Method::POST,
            "/orders/o-13/approval",
            &json!({"decision": "approve", "reason": "known customer"}),
            &[("authorization", &bearer)],
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.header("idempotent-replayed"), None);
    let body = r.json();
    assert_eq!(body["orderId"], "o-13");
    assert_eq!(body["decision"], "approve");
    assert!(body["status"].is_string());
    let done = app.reaches("o-13", "COMPLETED").await;
    assert_eq!(done["approval"]["decision"], "approve");
    assert_eq!(done["approval"]["reason"], "known customer");
    // Who decided is the operator's principal (`--operator-token` is `operator`), shown to
    // operators; the order's client sees that it was decided, not by whom.
    assert_eq!(done["approval"]["decidedBy"], Value::Null);
    let seen = app.operator_get("/orders/o-13/status").await.json();
    assert_eq!(seen["approval"]["decidedBy"], "operator");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_same_decision_again_replays_with_200() {
    let app = App::start().await;
    app.stock("piano", 1, 250_000).await;
    app.post("/orders", &large("o-14", "piano")).await;
    app.reaches("o-14", "AWAITING_APPROVAL").await;
    assert_eq!(app.decide("o-14", "reject").await.status, StatusCode::OK);
    let again = app.decide("o-14", "reject").await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.text());
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(again.json()["decision"], "reject");
    let cancelled = app.reaches("o-14", "CANCELLED").await;
    assert_eq!(cancelled["failure"]["error"], "Order.Rejected");
    let seen = app.operator_get("/orders/o-14/status").await.json();
    assert_eq!(seen["approval"]["decidedBy"], "operator");
    assert_eq!(seen["failure"]["cause"], "rejected by an operator");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_different_decision_is_409_approval_conflict() {
    let app = App::start().await;
    app.stock("piano", 1, 250_000).await;
    app.post("/orders", &large("o-15", "piano")).await;
    app.reaches("o-15", "AWAITING_APPROVAL").await;
    assert_eq!(app.decide("o-15", "approve").await.status, StatusCode::OK);
    app.decide("o-15", "reject")
        .await
        .problem(409, "approval-conflict");
}

#[tokio::test(flavor = "multi_thread")]
async fn deciding_an_order_not_awaiting_approval_is_409() {
    let app = App::start().await;
    app.stock("book", 5, 2_500).await;
    app.post("/orders", &small("o-16", "book")).await;
    app.decide("o-16", "approve")
        .await
        .problem(409, "not-awaiting-approval");
}

#[tokio::test(flavor = "multi_thread")]
async fn deciding_after_the_window_ran_out_is_409_approval_expired() {
    let settings = SagaSettings {
        approval_timeout: Duration::from_secs(2),
        ..SagaSettings::default()
    };
    let app = App::with(settings, HttpLimits::default()).await;
    app.stock("piano", 1, 250_000).await;
    app.post("/orders", &large("o-17", "piano")).await;
    let cancelled = app.reaches("o-17", "CANCELLED").await;
    assert_eq!(cancelled["failure"]["error"], "States.Timeout");
    assert_eq!(
        cancelled["failure"]["cause"],
        "the approval window closed before an operator's decision took effect"
    );
    app.decide("o-17", "approve")
        .await
        .problem(409, "approval-expired");
}

#[tokio::test(flavor = "multi_thread")]
async fn deciding_an_unknown_order_is_404() {
    let app = App::start().await;
    app.decide("o-none", "approve")
        .await
        .problem(404, "order-not-found");
    app.decide("bad%20id", "approve")
        .await
        .problem(404, "order-not-found");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_invalid_decision_is_rejected() {
    let app = App::start().await;
    app.stock("piano", 1, 250_000).await;
    app.post("/orders", &large("o-18", "piano")).await;
    app.reaches("o-18", "AWAITING_APPROVAL").await;
    let r = app
        .operator(
            Method::POST,
            "/orders/o-18/approval",
            &json!({"decision": "maybe", "reason": 3, "note": "x"}),
        )
        .await;
    let mut fields = r.invalid_fields();
    fields.sort();
    assert_eq!(fields, ["/decision", "/note", "/reason"]);
    assert!(
        app.stored("o-18")
            .await
            .unwrap()
            .approval
            .unwrap()
            .decision
            .is_none()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn pending_approvals_are_listed_oldest_first() {
    let app = App::start().await;
    app.stock("piano", 5, 250_000).await;
    app.stock("book", 5, 2_500).await;
    for id in ["o-19a", "o-19b", "o-19c"] {
        app.post("/orders", &large(id, "piano")).await;
        app.reaches(id, "AWAITING_APPROVAL").await;
    }
    app.post("/orders", &small("o-19s", "book")).await;
    let r = app.operator_get("/approvals").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let items = r.json()["items"].as_array().unwrap().clone();
    let ids: Vec<_> = items
        .iter()
        .map(|i| i["orderId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["o-19a", "o-19b", "o-19c"]);
    assert_eq!(items[0]["amountCents"], 250_000);
    assert_eq!(items[0]["currency"], "EUR");
    let times: Vec<_> = items
        .iter()
        .map(|i| i["requestedAt"].as_str().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    app.decide("o-19a", "approve").await;
    let r = app.operator_get("/approvals?limit=1").await.json();
    assert_eq!(r["items"][0]["orderId"], "o-19b");
    assert_eq!(r["items"].as_array().unwrap().len(), 1);
    app.operator_get("/approvals?limit=0")
        .await
        .problem(400, "invalid-request");
}

// ---------------------------------------------------------------- inventory

#[tokio::test(flavor = "multi_thread")]
async fn stock_is_set_and_read() {
    let app = App::start().await;
    let r = app
        .operator(
            Method::PUT,
            "/inventory/book-1.a_b",
            &json!({"available": 7}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(
        r.json(),
        json!({"sku": "book-1.a_b", "available": 7, "reserved": 0, "shipped": 0, "stocked": 7,
            "price": null})
    );
    // A price alone keeps the count; a count alone keeps the price.
    let priced = json!({"sku": "book-1.a_b", "available": 7, "reserved": 0, "shipped": 0,
        "stocked": 7, "price": {"cents": 2500, "currency": "EUR"}});
    let r = app
        .operator(
            Method::PUT,
            "/inventory/book-1.a_b",
            &json!({"price": {"cents": 2500, "currency": "EUR"}}),
        )
        .await;
    assert_eq!(r.json(), priced, "{}", r.text());
    let r = app.get("/inventory/book-1.a_b").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json(), priced);
    let r = app
        .operator(
            Method::PUT,
            "/inventory/book-1.a_b",
            &json!({"available": 3}),
        )
        .await;
    assert_eq!(r.json()["price"], priced["price"], "{}", r.text());
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_stock_is_404() {
    let app = App::start().await;
    app.get("/inventory/nothing")
        .await
        .problem(404, "sku-not-found");
    app.get("/inventory/no%20such")
        .await
        .problem(404, "sku-not-found");
    app.get(&format!("/inventory/{}", "s".repeat(65)))
        .await
        .problem(404, "sku-not-found");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_invalid_stock_count_is_422() {
    let app = App::start().await;
    for (body, field) in [
        (json!({"available": -1}), "/available"),
        (json!({"available": -1.0}), "/available"),
        (json!({"available": 1.5}), "/available"),
        (json!({"available": 1_000_000_001.0}), "/available"),
        (json!({"available": 1e300}), "/available"),
        (json!({"available": "7"}), "/available"),
        (json!({}), ""),
        (json!({"available": 1, "reserved": 2}), "/reserved"),
        (
            json!({"price": {"cents": -1, "currency": "EUR"}}),
            "/price/cents",
        ),
        (
            json!({"price": {"cents": 100_000_001, "currency": "EUR"}}),
            "/price/cents",
        ),
        (json!({"price": {"cents": 1}}), "/price/currency"),
        (json!({"available": 1, "price": null}), "/price"),
        (
            json!({"available": 1, "price": {"cents": 1, "currency": "eur"}}),
            "/price/currency",
        ),
        (json!({"priceCents": 1}), "/priceCents"),
    ] {
        let r = app.operator(Method::PUT, "/inventory/book", &body).await;
        assert_eq!(r.invalid_fields(), [field], "{body}");
    }
    for sku in ["b%20k".to_owned(), "s".repeat(65)] {
        let r = app
            .operator(
                Method::PUT,
                &format!("/inventory/{sku}"),
                &json!({"available": 1}),
            )
            .await;
        assert_eq!(r.invalid_fields(), ["sku"], "{sku}");
    }
    assert!(
        app.state
            .ports
            .inventory
            .stock("book")
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stock_count_may_be_written_with_a_zero_fraction() {
    let app = App::start().await;
    let sku = "s".repeat(64);
    let r = app
        .operator(
            Method::PUT,
            &format!("/inventory/{sku}"),
            &json!({"available": 30785.0}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.json()["available"], 30785);
    assert_eq!(
        app.get(&format!("/inventory/{sku}")).await.json()["available"],
        30785
    );
}

// ---------------------------------------------------------------- service endpoints

#[tokio::test(flavor = "multi_thread")]
async fn healthz_is_always_ok() {
    let app = App::start().await;
    let r = app.get("/healthz").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json(), json!({"status": "ok"}));
}

#[tokio::test(flavor = "multi_thread")]
async fn readyz_is_200_when_store_and_workflow_answer() {
    let app = App::start().await;
    let r = app.get("/readyz").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.json()["status"], "ready");
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_count_requests_and_outcomes_and_never_show_the_token() {
    let app = App::start().await;
    app.stock("book", 5, 2_500).await;
    app.post("/orders", &small("o-20", "book")).await;
    app.post("/orders", &small("o-20", "book")).await;
    app.post("/orders", &order("o-20", &[("book", 3, 2_500)]))
        .await;
    app.post("/orders", &order("o-21", &[("book", 1, 1)])).await;
    app.decide("o-20", "approve").await;
    app.get("/nowhere/at/all").await;
    let r = app.get("/metrics").await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.header("content-type").unwrap().contains("text"));
    let text = r.text();
    for needle in [
        "fulfillment_orders_total{outcome=\"accepted\"} 1",
        "fulfillment_orders_total{outcome=\"replayed\"} 1",
        "fulfillment_orders_total{outcome=\"conflict\"} 1",
        "fulfillment_orders_total{outcome=\"mispriced\"} 1",
        "fulfillment_approval_decisions_total{decision=\"approve\",outcome=\"not_awaiting\"} 1",
        "fulfillment_http_requests_total{method=\"POST\",route=\"/orders\",status=\"202\"} 2",
        "fulfillment_http_requests_total{method=\"POST\",route=\"/orders\",status=\"409\"} 1",
        "fulfillment_http_requests_total{method=\"PUT\",route=\"/inventory/{sku}\",status=\"200\"} 1",
        "fulfillment_http_requests_total{method=\"GET\",route=\"unmatched\",status=\"404\"} 1",
        "fulfillment_http_request_duration_seconds_bucket{",
    ] {
        assert!(text.contains(needle), "no {needle} in\n{text}");
    }
    assert!(!text.contains(TOKEN));
    assert!(!text.contains("nowhere"));
}

#[tokio::test(flavor = "multi_thread")]
async fn openapi_json_parses_and_lists_every_path() {
    let app = App::start().await;
    let r = app.get("/openapi.json").await;
    assert_eq!(r.status, StatusCode::OK);
    let doc = r.json();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
    let paths = doc["paths"].as_object().unwrap();
    for (path, methods) in [
        ("/orders", &["post"][..]),
        ("/orders/{orderId}/status", &["get"]),
        ("/orders/{orderId}/history", &["get"]),
        ("/orders/{orderId}/approval", &["post"]),
        ("/approvals", &["get"]),
        ("/inventory/{sku}", &["get", "put"]),
        ("/healthz", &["get"]),
        ("/readyz", &["get"]),
        ("/metrics", &["get"]),
        ("/openapi.json", &["get"]),
    ] {
        for method in methods {
            assert!(paths[path][method].is_object(), "{method} {path} missing");
        }
    }
    assert_eq!(
        doc["components"]["securitySchemes"]["apiKey"]["scheme"],
        "bearer"
    );
    // Every operation but the service's own (health, metrics, this document, the index)
    // takes an API key.
    for (path, method) in [
        ("/orders", "post"),
        ("/orders/{orderId}", "get"),
        ("/orders/{orderId}/status", "get"),
        ("/orders/{orderId}/history", "get"),
        ("/orders/{orderId}/approval", "post"),
        ("/approvals", "get"),
        ("/inventory", "get"),
        ("/inventory/{sku}", "get"),
        ("/inventory/{sku}", "put"),
    ] {
        assert_eq!(
            paths[path][method]["security"],
            json!([{"apiKey": []}]),
            "{method} {path}"
        );
        assert!(
            paths[path][method]["responses"]["401"].is_object(),
            "{method} {path}"
        );
    }
    assert!(doc["components"]["schemas"]["Problem"].is_object());
    let param = |path: &str, method: &str, name: &str| {
        paths[path][method]["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{method} {path}: no parameter {name}"))
            .clone()
    };
    // Who decides is the key's principal: there is no header for it.
    let decide_params = paths["/orders/{orderId}/approval"]["post"]["parameters"].to_string();
    assert!(!decide_params.contains("X-Operator"), "{decide_params}");
    for method in ["get", "put"] {
        let sku = param("/inventory/{sku}", method, "sku");
        assert_eq!(
            sku["schema"],
            json!({"type": "string", "minLength": 1, "maxLength": 64, "pattern": "^[A-Za-z0-9_.-]+$"}),
            "{method}"
        );
    }
    assert!(paths["/orders/{orderId}/history"]["get"]["responses"]["400"].is_object());
    assert_eq!(
        param("/orders/{orderId}/history", "get", "maxResults")["schema"]["type"],
        "integer"
    );
    assert_eq!(
        param("/approvals", "get", "limit")["schema"]["type"],
        "integer"
    );
    assert_eq!(
        doc,
        serde_json::to_value(api::http::openapi::document()).unwrap()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn docs_serve_swagger_ui() {
    let app = App::start().await;
    let r = app.get("/docs").await;
    assert!(
        r.status.is_redirection() || r.status == StatusCode::OK,
        "{:?}",
        r.status
    );
    let r = app.get("/docs/").await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.header("content-type").unwrap().starts_with("text/html"));
    assert!(r.text().to_lowercase().contains("swagger"));
    let config = app.get("/docs/swagger-initializer.js").await;
    assert_eq!(config.status, StatusCode::OK);
    assert!(config.text().contains("/openapi.json"));
}

// ---------------------------------------------------------------- cross-cutting

#[tokio::test(flavor = "multi_thread")]
async fn an_unknown_route_is_404_problem_json() {
    let app = App::start().await;
    let body = app.get("/no/such/thing").await.problem(404, "not-found");
    assert_eq!(body["instance"], "/no/such/thing");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_method_is_405_problem_json_with_allow() {
    let app = App::start().await;
    let r = app
        .send(Request::delete("/orders").body(Body::empty()).unwrap())
        .await;
    r.problem(405, "method-not-allowed");
    assert!(r.header("allow").unwrap().contains("POST"));
}

#[tokio::test(flavor = "multi_thread")]
async fn request_ids_are_set_and_propagated() {
    let app = App::start().await;
    let r = app.get("/healthz").await;
    assert!(!r.header("x-request-id").unwrap().is_empty());
    let r = app
        .send(
            Request::get("/orders/nope/status")
                .header("x-request-id", "req-42")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(r.header("x-request-id"), Some("req-42"));
    assert_eq!(r.header("content-type"), Some(PROBLEM_JSON));
}

#[tokio::test(flavor = "multi_thread")]
async fn every_error_response_is_problem_json() {
    let app = App::start().await;
    let requests = vec![
        Request::get("/missing").body(Body::empty()).unwrap(),
        Request::patch("/healthz").body(Body::empty()).unwrap(),
        Request::post("/orders").body(Body::from("{}")).unwrap(),
        Request::post("/orders")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from("{"))
            .unwrap(),
        Request::post("/orders")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from("{}"))
            .unwrap(),
        Request::get("/orders/x/status")
            .body(Body::empty())
            .unwrap(),
        Request::get("/approvals").body(Body::empty()).unwrap(),
        Request::get("/inventory/x").body(Body::empty()).unwrap(),
    ];
    for request in requests {
        let what = format!("{} {}", request.method(), request.uri());
        let r = app.send(request).await;
        assert!(r.status.is_client_error(), "{what}: {:?}", r.status);
        assert_eq!(r.header("content-type"), Some(PROBLEM_JSON), "{what}");
        let body = r.json();
        assert!(
            body["type"]
                .as_str()
                .unwrap()
                .starts_with("https://fulfillment.dev/problems/")
        );
        assert_eq!(body["status"], r.status.as_u16(), "{what}");
    }
}

// ---------------------------------------------------------------- broken backends

#[tokio::test(flavor = "multi_thread")]
async fn an_unavailable_backend_is_503_with_retry_after_and_no_details() {
    let app = App::start().await;
    let router = app.with_orders(Arc::new(Broken::Unavailable));
    let requests = [
        Request::get("/orders/o-21/status")
            .body(Body::empty())
            .unwrap(),
        Request::post("/orders")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(small("o-21", "book").to_string()))
            .unwrap(),
    ];
    for request in requests {
        let r = send(&router, app.as_client(request)).await;
        r.problem(503, "service-unavailable");
        assert_eq!(r.header("retry-after"), Some("1"));
        assert!(!r.text().contains(SECRET), "{}", r.text());
    }
    let r = send(
        &router,
        Request::get("/readyz").body(Body::empty()).unwrap(),
    )
    .await;
    r.problem(503, "not-ready");
    assert!(!r.text().contains(SECRET));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_internal_error_is_500_without_its_text() {
    let app = App::start().await;
    let router = app.with_orders(Arc::new(Broken::Internal));
    let r = send(
        &router,
        app.as_client(
            Request::get("/orders/o-22/status")
                .body(Body::empty())
                .unwrap(),
        ),
    )
    .await;
    r.problem(500, "internal");
    assert!(!r.text().contains(SECRET), "{}", r.text());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_panic_is_500_problem_json() {
    let app = App::start().await;
    let router = app.with_orders(Arc::new(Broken::Panics));
    let r = send(
        &router,
        app.as_client(
            Request::get("/orders/o-23/status")
                .body(Body::empty())
                .unwrap(),
        ),
    )
    .await;
    r.problem(500, "internal");
    assert!(!r.text().contains(SECRET), "{}", r.text());
    // The service goes on answering.
    let r = send(
        &router,
        Request::get("/healthz").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_over_the_timeout_is_503() {
    let limits = HttpLimits {
        request_timeout: Duration::from_millis(300),
        ..HttpLimits::default()
    };
    let app = App::with(SagaSettings::default(), limits).await;
    let router = app.with_orders(Arc::new(Broken::Hangs));
    let r = send(
        &router,
        app.as_client(
            Request::get("/orders/o-24/status")
                .body(Body::empty())
                .unwrap(),
        ),
    )
    .await;
    r.problem(503, "timeout");
    assert!(r.header("retry-after").is_some());
}
