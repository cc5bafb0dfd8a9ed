//! Health, readiness, metrics, the OpenAPI document and Swagger UI.

use super::*;

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

/// Load balancers probe every few seconds on every replica: `/readyz` asks the workflow
/// service at most once per `WORKFLOW_PROBE_TTL` (the store every time).
#[tokio::test(flavor = "multi_thread")]
async fn readyz_asks_the_workflow_service_at_most_once_in_a_while() {
    let app = App::start().await;
    let workflow = Arc::new(CountingWorkflow::new(app.state.workflow.clone()));
    let router = app.with_workflow(workflow.clone());
    for _ in 0..10 {
        let request = Request::get("/readyz").body(Body::empty()).unwrap();
        let r = send(&router, request).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    }
    assert_eq!(workflow.describes(), 1);
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

/// The steps that end a saga count it (`ship`, the last compensation), through the service's
/// own composition: a completed order and a declined one, each counted once by its status.
#[tokio::test(flavor = "multi_thread")]
async fn metrics_count_each_saga_where_it_ends_by_its_final_status() {
    let app = App::start().await;
    app.stock("book", 5, 2_500).await;
    app.post("/orders", &small("o-22", "book")).await;
    let mut declined = small("o-23", "book");
    declined["paymentMethod"] = json!("pm_card_chargeDeclined");
    app.post("/orders", &declined).await;
    assert_eq!(app.settled("o-22").await["status"], "COMPLETED");
    assert_eq!(app.settled("o-23").await["status"], "CANCELLED");
    let text = app.get("/metrics").await.text();
    for needle in [
        "fulfillment_sagas_finished_total{status=\"COMPLETED\"} 1\n",
        "fulfillment_sagas_finished_total{status=\"CANCELLED\"} 1\n",
    ] {
        assert!(text.contains(needle), "no {needle} in\n{text}");
    }
    assert!(
        !text.contains("fulfillment_sagas_finished_total{status=\"COMPENSATION_FAILED\"} 1"),
        "{text}"
    );
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
