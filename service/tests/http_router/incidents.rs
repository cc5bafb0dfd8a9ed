//! Incidents: the orders whose compensation gave up, listed for operators, redriven or resolved
//! by hand, each action recorded with the operator's name.

use super::*;
use crate::app::DEADLINE;
use std::time::Instant;
use store::{GatewayError, Incident};

/// The service with refunds refused for good while `refusing` (a disputed charge).
pub(crate) async fn with_refusable_refunds() -> (App, Arc<CountingPayments>) {
    let mut counting = None;
    let app = App::build(SagaSettings::default(), HttpLimits::default(), |inner| {
        let payments = Arc::new(CountingPayments::new(inner));
        counting = Some(payments.clone());
        payments
    })
    .await;
    (app, counting.unwrap())
}

fn disputed() -> GatewayError {
    GatewayError::Invalid("charge has been disputed; it cannot be refunded".to_owned())
}

/// An order whose shipment is rejected, so that it is compensated, and whose refund is refused:
/// it ends `COMPENSATION_FAILED`.
pub(crate) async fn failed_refund(app: &App, payments: &CountingPayments, id: &str) -> Value {
    payments.refuse_refunds(Some(disputed()));
    app.stock("book", 5, 2_500).await;
    let placed = app
        .post("/orders", &order_to(id, &[("book", 2, 2_500)], "00000"))
        .await;
    assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text());
    app.reaches(id, "COMPENSATION_FAILED").await
}

fn order_to(id: &str, items: &[(&str, u64, u64)], postal_code: &str) -> Value {
    let mut body = order(id, items);
    body["shippingAddress"]["postalCode"] = json!(postal_code);
    body
}

async fn listed(app: &App) -> Vec<Value> {
    let r = app.operator_get("/incidents").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    r.json()["items"].as_array().unwrap().clone()
}

/// Waits until the order's execution has ended (a redrive runs in the background).
async fn execution_ended(app: &App, id: &str) -> Value {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let status = app
            .operator_get(&format!("/orders/{id}/status"))
            .await
            .json();
        if status["executionStatus"] != "RUNNING" {
            return status;
        }
        assert!(Instant::now() < deadline, "{id} still running: {status}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn incidents_and_their_actions_are_for_operators() {
    let app = App::start().await;
    app.get("/incidents").await.problem(403, "forbidden");
    for path in ["/orders/o-1/redrive", "/orders/o-1/resolve"] {
        app.post(path, &json!({"note": "mine"}))
            .await
            .problem(403, "forbidden");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refund_refused_for_good_is_listed_and_a_redrive_finishes_it() {
    let (app, payments) = with_refusable_refunds().await;
    let status = failed_refund(&app, &payments, "o-inc-1").await;
    let incident = &status["incident"];
    assert_eq!(incident["step"], "RefundPayment");
    assert_eq!(incident["error"], "Payment.Invalid");
    assert_eq!(incident["attempts"], 1);
    assert!(incident["cause"].as_str().unwrap().contains("disputed"));
    assert_eq!(status["failure"]["error"], "Shipment.Rejected");
    assert_eq!(
        status["reservation"]["status"], "RELEASED",
        "the stock went back"
    );
    assert_eq!(status["actions"], json!([]));
    let since = incident["since"].clone();

    let items = listed(&app).await;
    let item = items
        .iter()
        .find(|i| i["orderId"] == "o-inc-1")
        .expect("listed");
    assert_eq!(item["status"], "COMPENSATION_FAILED");
    assert_eq!(item["incident"], *incident);
    assert_eq!(item["failure"]["error"], "Shipment.Rejected");

    // Redriven while the provider still refuses: it gives up again, the incident stays open
    // with its first time, and the redrive is on the record.
    let r = app
        .operator(
            Method::POST,
            "/orders/o-inc-1/redrive",
            &json!({"note": "try again"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    assert_eq!(r.json()["orderId"], "o-inc-1");
    let again = execution_ended(&app, "o-inc-1").await;
    assert_eq!(again["status"], "COMPENSATION_FAILED");
    assert_eq!(again["incident"]["since"], since);
    let actions = again["actions"].as_array().unwrap();
    assert_eq!(actions.len(), 1);
    assert_eq!(actions[0]["action"], "redrive");
    assert_eq!(actions[0]["by"], "operator");
    assert_eq!(actions[0]["note"], "try again");
    // The order's client sees the incident, not who acted on it.
    assert_eq!(
        app.get("/orders/o-inc-1/status").await.json()["actions"],
        json!([])
    );

    // The cause is gone: the next redrive refunds and the order ends cancelled.
    payments.refuse_refunds(None);
    let r = app
        .operator(Method::POST, "/orders/o-inc-1/redrive", &json!({}))
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    let done = app.reaches("o-inc-1", "CANCELLED").await;
    assert_eq!(done["incident"], Value::Null);
    assert!(done["refund"]["refundId"].is_string(), "{done}");
    assert!(listed(&app).await.iter().all(|i| i["orderId"] != "o-inc-1"));
    app.operator(Method::POST, "/orders/o-inc-1/redrive", &json!({}))
        .await
        .problem(409, "no-open-incident");
}

#[tokio::test(flavor = "multi_thread")]
async fn resolving_by_hand_needs_a_note_and_cancels_the_order_once() {
    let (app, payments) = with_refusable_refunds().await;
    failed_refund(&app, &payments, "o-inc-2").await;
    let missing = app
        .operator(Method::POST, "/orders/o-inc-2/resolve", &json!({}))
        .await;
    assert_eq!(
        missing.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        missing.text()
    );
    assert_eq!(missing.invalid_fields(), ["/note"]);
    let unknown = app
        .operator(
            Method::POST,
            "/orders/o-inc-2/resolve",
            &json!({"note": "x", "by": "me"}),
        )
        .await;
    assert_eq!(unknown.status, StatusCode::UNPROCESSABLE_ENTITY);
    // Refused requests change nothing.
    let stored = app.stored("o-inc-2").await.unwrap();
    assert!(stored.incident.is_some() && stored.actions.is_empty());

    let note = "refunded by hand in the Stripe dashboard (re_manual_1)";
    let r = app
        .operator(
            Method::POST,
            "/orders/o-inc-2/resolve",
            &json!({"note": note}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let body = r.json();
    assert_eq!(body["status"], "CANCELLED");
    assert_eq!(body["actions"][0]["action"], "resolve");
    assert_eq!(body["actions"][0]["by"], "operator");
    assert_eq!(body["actions"][0]["note"], note);
    let status = app.operator_get("/orders/o-inc-2/status").await.json();
    assert_eq!(
        (&status["status"], &status["incident"]),
        (&json!("CANCELLED"), &Value::Null)
    );
    assert!(listed(&app).await.iter().all(|i| i["orderId"] != "o-inc-2"));
    app.operator(
        Method::POST,
        "/orders/o-inc-2/resolve",
        &json!({"note": note}),
    )
    .await
    .problem(409, "no-open-incident");
    assert_eq!(app.stored("o-inc-2").await.unwrap().actions.len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_running_execution_is_neither_redriven_nor_resolved() {
    let app = App::start().await;
    app.stock("piano", 1, 250_000).await;
    app.post("/orders", &large("o-inc-3", "piano")).await;
    app.reaches("o-inc-3", "AWAITING_APPROVAL").await;
    // An incident recorded while the execution still runs (a compensation's last attempt
    // recorded it, and the worker's answer is not in yet).
    let id = store::OrderId::parse("o-inc-3").unwrap();
    let incident = Incident {
        step: "RefundPayment".to_owned(),
        error: "Payment.Unavailable".to_owned(),
        cause: "503".to_owned(),
        attempts: 31,
        since: chrono::Utc::now(),
    };
    app.state
        .ports
        .orders
        .record_incident(&id, &incident, None)
        .await
        .unwrap();
    let r = app
        .operator(Method::POST, "/orders/o-inc-3/redrive", &json!({}))
        .await;
    let problem = r.problem(409, "not-redrivable");
    assert!(
        problem["detail"].as_str().unwrap().contains("RUNNING"),
        "{problem}"
    );
    app.operator(
        Method::POST,
        "/orders/o-inc-3/resolve",
        &json!({"note": "by hand"}),
    )
    .await
    .problem(409, "execution-running");
    assert!(app.stored("o-inc-3").await.unwrap().actions.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn only_an_open_incident_is_acted_on_and_bad_cursors_are_refused() {
    let app = App::start().await;
    app.stock("book", 5, 2_500).await;
    app.post("/orders", &small("o-inc-4", "book")).await;
    app.reaches("o-inc-4", "COMPLETED").await;
    for action in ["redrive", "resolve"] {
        let path = format!("/orders/o-inc-4/{action}");
        app.operator(Method::POST, &path, &json!({"note": "n"}))
            .await
            .problem(409, "no-open-incident");
        app.operator(
            Method::POST,
            &format!("/orders/o-missing/{action}"),
            &json!({"note": "n"}),
        )
        .await
        .problem(404, "order-not-found");
    }
    for bad in ["after=nope", "after=2026-01-01T00:00:00Z", "limit=0"] {
        let r = app.operator_get(&format!("/incidents?{bad}")).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{bad}: {}", r.text());
    }
    assert!(listed(&app).await.is_empty());
}
