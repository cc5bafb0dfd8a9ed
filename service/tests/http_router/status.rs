//! `GET /orders/{id}/status` and `/history`: what a client sees of its order's saga.

use super::*;

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
    let arn = app.state.workflow.execution_arn("o-31");
    app.state.ports.orders.create(new, &arn).await.unwrap();

    let payments = Arc::new(CountingPayments::new(app.state.ports.payments.clone()));
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

    // From 0.1.0 the charge step records the charge before the order moves to CHARGED, so an
    // order at CHARGED without one has none to show, and the provider is still not asked.
    app.state
        .ports
        .orders
        .advance(&OrderId::parse("o-31").unwrap(), OrderStatus::Charged, None)
        .await
        .unwrap();
    assert_eq!(status("o-31").await["payment"], Value::Null);
    assert_eq!(payments.finds(), 0, "no provider lookup");
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

    let payments = Arc::new(CountingPayments::new(app.state.ports.payments.clone()));
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

/// Status polls are answered from the order's record: polls of an order on its way, of a
/// completed one and of a cancelled one ask Step Functions nothing (AWS refills
/// `DescribeExecution` at about 15 a second for a whole account). Only an order whose
/// compensation failed asks it (a redrive may be running it), and the history reads it.
#[tokio::test(flavor = "multi_thread")]
async fn status_polls_ask_step_functions_nothing() {
    let app = App::start().await;
    app.stock("book", 5, 2_500).await;
    app.stock("piano", 1, 250_000).await;
    app.post("/orders", &small("o-40", "book")).await;
    app.post("/orders", &large("o-41", "piano")).await;
    app.settled("o-40").await;
    app.reaches("o-41", "AWAITING_APPROVAL").await;
    let workflow = Arc::new(CountingWorkflow::new(app.state.workflow.clone()));
    let router = app.with_workflow(workflow.clone());
    let get = |path: String| {
        let request = app.as_client(Request::get(path).body(Body::empty()).unwrap());
        let router = router.clone();
        async move { send(&router, request).await }
    };
    for _ in 0..10 {
        let done = get("/orders/o-40/status".to_owned()).await;
        assert_eq!(done.status, StatusCode::OK, "{}", done.text());
        assert_eq!(
            (
                done.json()["status"].clone(),
                done.json()["executionStatus"].clone()
            ),
            (json!("COMPLETED"), json!("SUCCEEDED"))
        );
        let waiting = get("/orders/o-41/status".to_owned()).await.json();
        assert_eq!(
            (
                waiting["status"].clone(),
                waiting["executionStatus"].clone()
            ),
            (json!("AWAITING_APPROVAL"), json!("RUNNING"))
        );
    }
    assert_eq!(
        workflow.describes(),
        0,
        "a status poll asked Step Functions"
    );

    // Rejected: cancelled, and its status still from the record.
    let rejected = app.decide("o-41", "reject").await;
    assert_eq!(rejected.status, StatusCode::OK, "{}", rejected.text());
    app.settled("o-41").await;
    let cancelled = get("/orders/o-41/status".to_owned()).await.json();
    assert_eq!(
        (
            cancelled["status"].clone(),
            cancelled["executionStatus"].clone()
        ),
        (json!("CANCELLED"), json!("FAILED"))
    );
    assert_eq!(
        workflow.describes(),
        0,
        "a status poll asked Step Functions"
    );
    // The history is the execution's own record: it is read there.
    let history = get("/orders/o-40/history".to_owned()).await;
    assert_eq!(history.status, StatusCode::OK, "{}", history.text());
    assert!(workflow.histories() > 0);
}
