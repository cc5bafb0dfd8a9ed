//! Requests an attacker or a broken client sends, through the router on the real stack: numbers
//! of every wrong kind, totals at the limits, item lists too short and too long, the same SKU
//! twice, unknown fields, order ids that are no ids, and credentials that are not the operator
//! token. Each is refused as problem+json naming what is wrong, and leaves nothing stored.

#[path = "http_router/app.rs"]
#[allow(dead_code)]
mod app;

use api::http::validate::{MAX_ITEMS, MAX_QUANTITY, MAX_UNIT_PRICE_CENTS};
use app::{App, TOKEN, large, order, small};
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use serde_json::{Value, json};

const ITEM: &str = r#"{"sku": "book", "quantity": QUANTITY, "unitPriceCents": PRICE}"#;

/// A `POST /orders` whose one line's quantity and price are the JSON texts given (so numbers
/// no `serde_json::Value` holds can be sent as written).
fn raw_order(id: &str, quantity: &str, price: &str) -> String {
    let mut body = small(id, "book");
    body["items"] = json!(["LINE"]);
    let line = ITEM.replace("QUANTITY", quantity).replace("PRICE", price);
    body.to_string().replace("\"LINE\"", &line)
}

async fn post_text(app: &App, body: String) -> app::Reply {
    app.send(
        Request::post("/orders")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body))
            .unwrap(),
    )
    .await
}

// ---------------------------------------------------------------- numbers

#[tokio::test(flavor = "multi_thread")]
async fn quantities_and_prices_of_every_wrong_kind_are_422_naming_the_field() {
    let app = App::start().await;
    let wrong = [
        // zero (a quantity; a price may be 0), negative, out of range, beyond u64 and i64
        "-1",
        "-9223372036854775809",
        "18446744073709551615",
        "18446744073709551616",
        "1e19",
        "1e300",
        "-0.5",
        // not integers
        "2.5",
        "0.1",
        "1e-3",
        // not numbers
        "\"2\"",
        "\"2500\"",
        "null",
        "true",
        "[2]",
        "{\"value\": 2}",
    ];
    for text in wrong.iter().chain(&["0", "10001", "0.0"]) {
        let r = post_text(&app, raw_order("o-n", text, "2500")).await;
        assert_eq!(r.invalid_fields(), ["/items/0/quantity"], "quantity {text}");
    }
    for text in wrong.iter().chain(&["100000001"]) {
        let r = post_text(&app, raw_order("o-n", "1", text)).await;
        assert_eq!(
            r.invalid_fields(),
            ["/items/0/unitPriceCents"],
            "price {text}"
        );
    }
    // Both at once: both named.
    let r = post_text(
        &app,
        raw_order("o-n", "18446744073709551615", "18446744073709551615"),
    )
    .await;
    let mut fields = r.invalid_fields();
    fields.sort();
    assert_eq!(fields, ["/items/0/quantity", "/items/0/unitPriceCents"]);
    assert_eq!(app.footprint(), (0, 0));
}

/// JSON parsers represent numbers as doubles; one beyond their range (±1.8e308) makes the body
/// unreadable, so it is the malformed-body answer, not a field's.
#[tokio::test(flavor = "multi_thread")]
async fn a_number_beyond_what_json_parsers_represent_is_400() {
    let app = App::start().await;
    let four_hundred_nines = "9".repeat(400);
    for (quantity, price) in [("1e400", "1"), ("1", four_hundred_nines.as_str())] {
        let r = post_text(&app, raw_order("o-inf", quantity, price)).await;
        r.problem(400, "malformed-json");
    }
    assert_eq!(app.footprint(), (0, 0));
}

/// Every line at the largest quantity and price: the total (5·10^13) is exact, far below u64
/// (and below 2^53, so it survives JSON); no combination of valid lines can wrap it.
#[tokio::test(flavor = "multi_thread")]
async fn the_largest_possible_order_totals_exactly() {
    let app = App::start().await;
    let skus: Vec<String> = (0..MAX_ITEMS).map(|i| format!("sku-{i}")).collect();
    for sku in &skus {
        app.stock(sku, 0, MAX_UNIT_PRICE_CENTS).await;
    }
    let lines: Vec<(&str, u64, u64)> = skus
        .iter()
        .map(|s| (s.as_str(), MAX_QUANTITY, MAX_UNIT_PRICE_CENTS))
        .collect();
    let r = app.post("/orders", &order("o-max", &lines)).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    let stored = app.stored("o-max").await.unwrap();
    let total = MAX_ITEMS as u64 * MAX_QUANTITY * MAX_UNIT_PRICE_CENTS;
    assert_eq!(total, 50_000_000_000_000);
    assert_eq!(stored.new.amount_cents, total);
    assert!(stored.new.requires_approval);
    let status = app.get("/orders/o-max/status").await.json();
    assert_eq!(status["amountCents"], total);
}

// ---------------------------------------------------------------- item lists

#[tokio::test(flavor = "multi_thread")]
async fn fifty_lines_are_accepted_and_more_are_refused() {
    let app = App::start().await;
    app.stock("book", 0, 1).await;
    let lines = |n: usize| -> Value {
        let lines: Vec<(&str, u64, u64)> = vec![("book", 1, 1); n];
        order("o-lines", &lines)
    };
    for n in [MAX_ITEMS + 1, 1_000] {
        let r = app.post("/orders", &lines(n)).await;
        assert_eq!(r.invalid_fields(), ["/items"], "{n} lines");
    }
    // A list too long for the body limit is refused before it is parsed.
    app.post("/orders", &lines(10_000))
        .await
        .problem(413, "payload-too-large");
    assert_eq!(app.footprint(), (0, 0));
    let r = app.post("/orders", &lines(MAX_ITEMS)).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    assert_eq!(app.stored("o-lines").await.unwrap().new.items.len(), 50);
}

/// Decided: one SKU may be on several lines; the reservation takes their sum, and stock is
/// checked against the sum.
#[tokio::test(flavor = "multi_thread")]
async fn one_sku_on_several_lines_is_reserved_as_their_sum() {
    let app = App::start().await;
    app.stock("book", 5, 1_000).await;
    let r = app
        .post(
            "/orders",
            &order("o-twice", &[("book", 2, 1_000), ("book", 3, 1_000)]),
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    let done = app.reaches("o-twice", "COMPLETED").await;
    assert_eq!(done["amountCents"], 5 * 1_000);
    let stock = app.get("/inventory/book").await.json();
    assert_eq!(
        (&stock["available"], &stock["reserved"]),
        (&json!(0), &json!(0))
    );

    // Two lines that fit alone but not together: nothing is reserved.
    app.stock("pen", 4, 100).await;
    app.post(
        "/orders",
        &order("o-over", &[("pen", 2, 100), ("pen", 3, 100)]),
    )
    .await;
    let cancelled = app.reaches("o-over", "CANCELLED").await;
    assert_eq!(cancelled["failure"]["error"], "Inventory.OutOfStock");
    let stock = app.get("/inventory/pen").await.json();
    assert_eq!(
        (&stock["available"], &stock["reserved"]),
        (&json!(4), &json!(0))
    );
}

// ---------------------------------------------------------------- unknown fields

/// The schema of every request body, its `$ref`s followed, and each object in it.
fn objects<'d>(doc: &'d Value, schema: &'d Value, found: &mut Vec<(String, &'d Value)>) {
    if let Some(name) = schema["$ref"].as_str() {
        let name = name.trim_start_matches("#/components/schemas/");
        let resolved = &doc["components"]["schemas"][name];
        if resolved["type"] == "object" && !found.iter().any(|(n, _)| n == name) {
            found.push((name.to_owned(), resolved));
        }
        return objects(doc, resolved, found);
    }
    if let Some(properties) = schema["properties"].as_object() {
        properties.values().for_each(|s| objects(doc, s, found));
    }
    if schema["items"].is_object() {
        objects(doc, &schema["items"], found);
    }
    for combined in ["oneOf", "anyOf", "allOf"] {
        if let Some(schemas) = schema[combined].as_array() {
            schemas.iter().for_each(|s| objects(doc, s, found));
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_fields_are_refused_as_the_document_says() {
    let app = App::start().await;
    // The document: every object of every request body is closed.
    let doc = serde_json::to_value(api::http::openapi::document()).unwrap();
    let mut found = Vec::new();
    for ops in doc["paths"].as_object().unwrap().values() {
        for op in ops.as_object().unwrap().values() {
            let body = &op["requestBody"]["content"]["application/json"]["schema"];
            objects(&doc, body, &mut found);
        }
    }
    let mut names: Vec<&str> = found.iter().map(|(n, _)| n.as_str()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "ApprovalRequest",
            "CancelRequest",
            "CatalogPrice",
            "EndpointRequest",
            "IncidentActionRequest",
            "OrderLine",
            "PlaceOrder",
            "ReplayRequest",
            "ShippingAddress",
            "StockCount"
        ]
    );
    for (name, schema) in &found {
        assert_eq!(schema["additionalProperties"], false, "{name}");
    }
    // The behaviour: an unknown field anywhere is a 422 naming it.
    let mut body = order("o-extra", &[("book", 1, 100), ("pen", 1, 100)]);
    body["shippingAddress"]["line2"] = json!("Flat 2");
    body["items"][1]["discountCents"] = json!(50);
    body["total"] = json!(0);
    let mut fields = app.post("/orders", &body).await.invalid_fields();
    fields.sort();
    assert_eq!(
        fields,
        ["/items/1/discountCents", "/shippingAddress/line2", "/total"]
    );
    assert_eq!(app.footprint(), (0, 0));
}

// ---------------------------------------------------------------- order ids

#[tokio::test(flavor = "multi_thread")]
async fn an_order_id_that_is_no_id_is_422_and_nothing_is_stored() {
    let app = App::start().await;
    let long = "x".repeat(81);
    let huge = "x".repeat(10_000);
    for id in [
        "",
        &long,
        &huge,
        "o/1",
        "../x",
        "..",
        ".",
        "o 1",
        " o-1",
        "o-1 ",
        "o%2F1",
        "o\u{0}1",
        "o-1\n",
        "o.1",
        "o:1",
        "o?1",
        "o#1",
        "o\\1",
        "ordér",
        "订单",
        "\u{663}",
        "ｏ１",
        "o\u{202e}1",
        "🙂",
    ] {
        let mut body = small("x", "book");
        body["orderId"] = json!(id);
        let r = app.post("/orders", &body).await;
        assert_eq!(r.invalid_fields(), ["/orderId"], "{id:?}");
    }
    assert_eq!(app.footprint(), (0, 0));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_order_id_in_a_path_that_is_no_id_is_404() {
    let app = App::start().await;
    app.stock("book", 5, 2_500).await;
    app.post("/orders", &small("o-1", "book")).await;
    // Its execution started (by the start queue, a moment after the 202) and ended: the
    // footprint below is one order and one execution, whatever the requests after it do.
    app.settled("o-1").await;
    let (long, huge) = ("x".repeat(81), "x".repeat(5_000));
    for id in [
        "%2E%2E%2Fo-1",
        "..%2Fo-1",
        "o-1%2F",
        "o-1%2F..%2Fo-1",
        "%2F",
        "%C3%A9",
        "%FF",
        "%00",
        "o-1%00",
        "o-1%0A",
        "%E2%80%AE1-o",
        "o%201",
        long.as_str(),
        huge.as_str(),
    ] {
        for (method, path) in [
            (Method::GET, format!("/orders/{id}/status")),
            (Method::GET, format!("/orders/{id}/history")),
            (Method::POST, format!("/orders/{id}/approval")),
        ] {
            let r = app
                .json(
                    method.clone(),
                    &path,
                    &json!({"decision": "approve"}),
                    &[("authorization", &format!("Bearer {TOKEN}"))],
                )
                .await;
            // `order-not-found`, or `not-found` for a segment that is not even UTF-8.
            let slug = match r.json()["type"].as_str() {
                Some(t) if t.ends_with("/not-found") => "not-found",
                _ => "order-not-found",
            };
            r.problem(404, slug);
        }
    }
    // A path that steps out of its segment is no route at all.
    app.get("/orders/../orders/o-1/status")
        .await
        .problem(404, "not-found");
    assert_eq!(app.footprint(), (1, 1));
    assert!(app.stored("o-1").await.unwrap().approval.is_none());
}

// ---------------------------------------------------------------- credentials

/// Every `Authorization` header (and other header) that must not work.
fn not_the_token(client_values: &[String]) -> Vec<Vec<(String, String)>> {
    let auth = |v: String| vec![("authorization".to_owned(), v)];
    // base64("operator:" + TOKEN), as a browser sends Basic credentials.
    let basic = "b3BlcmF0b3I6b3AtdG9rZW4tN2YzYTljMWU1Yg==";
    assert_eq!(
        TOKEN, "op-token-7f3a9c1e5b",
        "the Basic case encodes this token"
    );
    let mut cases = vec![
        vec![],
        auth("Bearer".into()),
        auth("Bearer ".into()),
        auth("Bearer wrong-token-0000000000".into()),
        auth(TOKEN.into()),
        auth(format!("Basic {TOKEN}")),
        auth(format!("Basic {basic}")),
        auth(format!("Token {TOKEN}")),
        auth(format!("Digest {TOKEN}")),
        auth(format!("Bearer:{TOKEN}")),
        auth(format!("Bearer {}", &TOKEN[..TOKEN.len() - 1])),
        auth(format!("Bearer {}", &TOKEN[..1])),
        auth(format!("Bearer {TOKEN}x")),
        auth(format!("Bearer {TOKEN} x")),
        auth(format!("Bearer {TOKEN},Bearer {TOKEN}")),
        auth(format!("Bearer {}", TOKEN.to_uppercase())),
        vec![("x-api-key".into(), TOKEN.into())],
        vec![("x-operator-token".into(), TOKEN.into())],
        vec![("cookie".into(), format!("token={TOKEN}"))],
        vec![("proxy-authorization".into(), format!("Bearer {TOKEN}"))],
        vec![("x-operator".into(), "ops@example.com".into())],
        // Two credentials, one right: which one counts is ambiguous, so none does.
        vec![
            ("authorization".into(), format!("Bearer {TOKEN}")),
            (
                "authorization".into(),
                "Bearer wrong-token-0000000000".into(),
            ),
        ],
        vec![
            (
                "authorization".into(),
                "Bearer wrong-token-0000000000".into(),
            ),
            ("authorization".into(), format!("Bearer {TOKEN}")),
        ],
    ];
    cases.extend(client_values.iter().map(|v| auth(format!("Bearer {v}"))));
    cases
}

/// There is no client credential: the order endpoints are open, and nothing a client holds of
/// its order (id, execution ARN, status URL, request id) is an operator's token.
#[tokio::test(flavor = "multi_thread")]
async fn operator_endpoints_refuse_everything_but_the_operator_token() {
    let app = App::start().await;
    app.stock("piano", 1, 250_000).await;
    let placed = app.post("/orders", &large("o-op", "piano")).await;
    app.reaches("o-op", "AWAITING_APPROVAL").await;
    let body = placed.json();
    let client_values: Vec<String> = [
        body["orderId"].as_str(),
        body["executionArn"].as_str(),
        body["statusUrl"].as_str(),
        placed.header("x-request-id"),
    ]
    .into_iter()
    .map(|v| v.unwrap().to_owned())
    .collect();
    let stored = app.stored("o-op").await.unwrap();
    let hash = stored.new.body_hash.clone();

    let mut cases = not_the_token(&client_values);
    cases.push(vec![("authorization".into(), format!("Bearer {hash}"))]);
    for headers in &cases {
        for (method, path, body) in [
            (Method::GET, "/approvals".to_owned(), json!(null)),
            (
                Method::PUT,
                "/inventory/piano".to_owned(),
                json!({"available": 100}),
            ),
            (
                Method::POST,
                "/orders/o-op/approval".to_owned(),
                json!({"decision": "approve"}),
            ),
            (
                Method::GET,
                format!("/approvals?token={TOKEN}&access_token={TOKEN}"),
                json!(null),
            ),
        ] {
            let headers: Vec<(&str, &str)> = headers
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_str()))
                .collect();
            let r = app.json(method.clone(), &path, &body, &headers).await;
            let what = format!("{method} {path} with {headers:?}");
            assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{what}: {}", r.text());
            r.problem(401, "unauthorized");
            assert_eq!(
                r.header("www-authenticate"),
                Some("Bearer realm=\"fulfillment\""),
                "{what}"
            );
            assert!(!r.text().contains(TOKEN), "{what}");
        }
    }
    // Nothing changed.
    assert_eq!(app.get("/inventory/piano").await.json()["available"], 0);
    let order = app.stored("o-op").await.unwrap();
    assert!(order.approval.unwrap().decision.is_none());

    // The token works, whatever the case of the scheme (RFC 9110 §11.1).
    let r = app
        .json(
            Method::POST,
            "/orders/o-op/approval",
            &json!({"decision": "approve"}),
            &[("authorization", &format!("bEARER {TOKEN}"))],
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
}

/// Authentication comes first: without the token, a caller cannot tell an order that exists
/// from one that does not, nor learn how its body would have been judged.
#[tokio::test(flavor = "multi_thread")]
async fn an_unauthenticated_caller_learns_nothing_from_the_answer() {
    let app = App::start().await;
    app.stock("book", 5, 2_500).await;
    app.post("/orders", &small("o-known", "book")).await;
    for (path, content_type, body) in [
        (
            "/orders/o-known/approval",
            "application/json",
            "{\"decision\": \"approve\"}",
        ),
        (
            "/orders/o-unknown/approval",
            "application/json",
            "{\"decision\": \"approve\"}",
        ),
        ("/orders/bad%20id/approval", "application/json", "{}"),
        ("/orders/o-known/approval", "application/json", "{not json"),
        ("/orders/o-known/approval", "text/plain", "approve"),
        (
            "/orders/o-known/approval",
            "application/json",
            "{\"decision\": \"maybe\"}",
        ),
    ] {
        let r = app
            .send_anonymous(
                Request::post(path)
                    .header(header::CONTENT_TYPE, content_type)
                    .body(Body::from(body))
                    .unwrap(),
            )
            .await;
        let problem = r.problem(401, "unauthorized");
        assert_eq!(
            problem["detail"], "this endpoint needs `Authorization: Bearer <API key>`",
            "{path} {body}"
        );
    }
}

// ---------------------------------------------------------------- approvals

#[tokio::test(flavor = "multi_thread")]
async fn only_an_order_awaiting_approval_can_be_decided() {
    let app = App::start().await;
    // A large order that never got to wait: out of stock, cancelled before the approval step.
    app.stock("piano", 0, 250_000).await;
    app.post("/orders", &large("o-never", "piano")).await;
    let cancelled = app.reaches("o-never", "CANCELLED").await;
    assert_eq!(cancelled["failure"]["error"], "Inventory.OutOfStock");
    // A small order that needed none and completed.
    app.stock("book", 1, 2_500).await;
    app.post("/orders", &small("o-small", "book")).await;
    app.reaches("o-small", "COMPLETED").await;
    for (id, status) in [("o-never", "CANCELLED"), ("o-small", "COMPLETED")] {
        for decision in ["approve", "reject"] {
            app.decide(id, decision)
                .await
                .problem(409, "not-awaiting-approval");
        }
        let order = app.stored(id).await.unwrap();
        assert!(order.approval.is_none(), "{id}: no decision recorded");
        assert_eq!(
            app.get(&format!("/orders/{id}/status")).await.json()["status"],
            status
        );
    }
}

// ---------------------------------------------------------------- prices

/// The caller never sets a price: a line without one is charged the catalog's, a line whose
/// price is not the catalog's is refused naming the line, and so is a SKU without a price or
/// priced in another currency. A refused order leaves nothing stored, whatever else it held.
#[tokio::test(flavor = "multi_thread")]
async fn prices_come_from_the_catalog_and_a_wrong_one_leaves_no_trace() {
    let app = App::start().await;
    app.stock("book", 10, 2_500).await;
    app.stock("mug", 10, 900).await;
    app.operator(
        Method::PUT,
        "/inventory/mug",
        &json!({"price": {"cents": 900, "currency": "USD"}}),
    )
    .await;
    app.operator(Method::PUT, "/inventory/bare", &json!({"available": 5}))
        .await;

    // Buying a book for nothing, or under the approval threshold by pricing it low.
    let r = app
        .post(
            "/orders",
            &order("o-cheap", &[("book", 1, 2_500), ("book", 40, 0)]),
        )
        .await;
    let body = r.problem(422, "price-mismatch");
    assert_eq!(
        body["errors"][0]["field"], "/items/1/unitPriceCents",
        "{body}"
    );
    assert_eq!(body["errors"].as_array().unwrap().len(), 1, "{body}");
    // A SKU never priced, one never stocked, one in dollars in a euro order.
    let mut unpriced = order(
        "o-bare",
        &[("bare", 1, 0), ("ghost", 1, 0), ("mug", 1, 900)],
    );
    for line in unpriced["items"].as_array_mut().unwrap() {
        line.as_object_mut().unwrap().remove("unitPriceCents");
    }
    let body = app
        .post("/orders", &unpriced)
        .await
        .problem(422, "sku-not-priced");
    let fields: Vec<_> = body["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        ["/items/0/sku", "/items/1/sku", "/items/2/sku"],
        "{body}"
    );
    assert!(
        body["errors"][2]["message"]
            .as_str()
            .unwrap()
            .contains("USD"),
        "{body}"
    );
    let mut dollars = order("o-usd", &[("mug", 1, 900)]);
    dollars["currency"] = json!("USD");
    let mut euros = dollars.clone();
    euros["currency"] = json!("EUR");
    app.post("/orders", &euros)
        .await
        .problem(422, "currency-mismatch");
    assert_eq!(app.footprint(), (0, 0), "refused orders leave nothing");
    let book = app.get("/inventory/book").await.json();
    assert_eq!(
        (&book["available"], &book["reserved"]),
        (&json!(10), &json!(0))
    );

    // Without a price the line is charged the catalog's; in its currency a mug sells.
    let mut unstated = order("o-book", &[("book", 2, 0)]);
    unstated["items"][0]
        .as_object_mut()
        .unwrap()
        .remove("unitPriceCents");
    let r = app.post("/orders", &unstated).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    let r = app.post("/orders", &dollars).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    let done = app.reaches("o-book", "COMPLETED").await;
    assert_eq!(done["amountCents"], 5_000);
    assert_eq!(done["payment"]["amountCents"], 5_000);

    // A price change touches no order placed before, and a retry of one placed at the old
    // price is still a replay, not a refusal.
    app.stock("book", 10, 3_000).await;
    let placed = app.get("/orders/o-book").await.json();
    assert_eq!(placed["items"][0]["unitPriceCents"], 2_500, "{placed}");
    assert_eq!(placed["amountCents"], 5_000);
    let again = app.post("/orders", &unstated).await;
    assert_eq!(again.status, StatusCode::ACCEPTED, "{}", again.text());
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    let stale = app
        .post("/orders", &order("o-book", &[("book", 2, 2_500)]))
        .await;
    stale.problem(409, "order-conflict");
}
