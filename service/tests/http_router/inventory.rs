//! `PUT`/`GET /inventory`: stock counts and catalog prices.

use super::*;

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
