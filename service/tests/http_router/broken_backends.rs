//! A backend that fails, errs, panics or hangs: what the caller is told.

use super::*;

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
