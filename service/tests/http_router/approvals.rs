//! The operator's approval endpoints: who may decide, what each decision answers.

use super::*;

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
        approval_heartbeat: Duration::from_secs(1),
        ..SagaSettings::default()
    };
    let app = App::with(settings, HttpLimits::default()).await;
    app.stock("piano", 1, 250_000).await;
    app.post("/orders", &large("o-17", "piano")).await;
    let parked = app.reaches("o-17", "AWAITING_APPROVAL").await;
    let deadline = parked["approval"]["deadline"].as_str().unwrap().to_owned();
    let cancelled = app.reaches("o-17", "CANCELLED").await;
    // The keeper closed the window at the deadline fixed when it opened.
    assert_eq!(cancelled["failure"]["error"], "Order.ApprovalExpired");
    let cause = cancelled["failure"]["cause"].as_str().unwrap();
    assert!(
        cause.starts_with("the approval window closed at ")
            && cause.ends_with(" before an operator decided"),
        "{cause}"
    );
    assert_eq!(cancelled["approval"]["deadline"], deadline.as_str());
    let problem = app
        .decide("o-17", "approve")
        .await
        .problem(409, "approval-expired");
    let detail = problem["detail"].as_str().unwrap();
    assert!(detail.contains("closed at "), "{detail}");
    let status = app.get("/orders/o-17/status").await.json();
    assert_eq!(
        status["approval"]["decision"],
        serde_json::Value::Null,
        "nothing recorded"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_decision_after_the_deadline_closes_the_window_before_one_made_earlier_can_land() {
    // The keeper stopped once the order is parked (its replica died, or it is behind), so the
    // late decision below meets a window whose deadline has passed but which nobody has
    // closed yet.
    let settings = SagaSettings {
        approval_timeout: Duration::from_secs(3),
        approval_heartbeat: Duration::from_secs(2),
        ..SagaSettings::default()
    };
    let mut app = App::with(settings, HttpLimits::default()).await;
    app.stock("piano", 1, 250_000).await;
    app.post("/orders", &large("o-18", "piano")).await;
    let parked = app.reaches("o-18", "AWAITING_APPROVAL").await;
    app.stop_workers().await;
    let deadline: chrono::DateTime<chrono::Utc> = parked["approval"]["deadline"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    while chrono::Utc::now() <= deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    app.decide("o-18", "reject")
        .await
        .problem(409, "approval-expired");
    // An approval made before the deadline whose write reaches the store only now (a slow or
    // retried request): the window it was made in is closed, so it takes no effect.
    let id = OrderId::parse("o-18").unwrap();
    let late = app
        .state
        .ports
        .orders
        .decide(
            &id,
            store::Decision::Approve,
            "operator",
            None,
            deadline - chrono::TimeDelta::seconds(1),
        )
        .await
        .unwrap();
    assert!(
        !matches!(late, store::Decided::Applied { .. }),
        "a decision landed after the window was reported closed: {late:?}"
    );
    app.start_workers();
    let cancelled = app.reaches("o-18", "CANCELLED").await;
    assert_eq!(cancelled["failure"]["error"], "Order.ApprovalExpired");
    assert_eq!(cancelled["approval"]["decision"], Value::Null);
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
    assert_eq!(r.json()["next"], serde_json::Value::Null, "one page");
    // Each waits for a decision before its deadline: the window as it opened.
    let window = SagaSettings::default().approval_timeout.as_secs() as i64;
    for item in &items {
        let at = |f: &str| {
            chrono::DateTime::parse_from_rfc3339(item[f].as_str().unwrap())
                .unwrap()
                .timestamp()
        };
        let open = at("deadline") - at("requestedAt");
        assert!((window - 1..=window + 1).contains(&open), "{item}");
    }
    app.decide("o-19a", "approve").await;
    // A page at a time, with a cursor: every waiting order once, in order.
    let mut seen = Vec::new();
    let mut path = "/approvals?limit=1".to_owned();
    loop {
        let r = app.operator_get(&path).await.json();
        assert!(r["items"].as_array().unwrap().len() <= 1, "{r}");
        seen.extend(
            r["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["orderId"].as_str().unwrap().to_owned()),
        );
        match r["next"].as_str() {
            Some(next) => path = format!("/approvals?limit=1&after={}", urlencoding(next)),
            None => break,
        }
    }
    assert_eq!(seen, ["o-19b", "o-19c"]);
    app.operator_get("/approvals?limit=0")
        .await
        .problem(400, "invalid-request");
    app.operator_get("/approvals?after=nonsense")
        .await
        .problem(400, "invalid-request");
}

/// A cursor as a query value (its `|` and `:` escaped).
fn urlencoding(text: &str) -> String {
    text.replace('%', "%25")
        .replace('|', "%7C")
        .replace(':', "%3A")
        .replace('+', "%2B")
}
