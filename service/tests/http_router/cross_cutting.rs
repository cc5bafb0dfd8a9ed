//! What every route shares: 404/405, request ids, problem+json for every error.

use super::*;

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
