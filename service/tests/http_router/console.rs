//! The operator console through the router: an incident redriven and resolved from its pages,
//! the stock set from its form, and bad input answered with a page that changes nothing.

use super::*;
use crate::incidents::{failed_refund, with_refusable_refunds};

/// A console session: its cookie and the CSRF token of its forms.
struct Session {
    cookie: String,
    csrf: String,
}

impl Session {
    /// Signs in with the operator token and reads a page for the token.
    async fn open(app: &App) -> Session {
        let r = app
            .send_anonymous(
                Request::post("/console/sign-in")
                    .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                    .body(Body::from(format!("key={TOKEN}")))
                    .unwrap(),
            )
            .await;
        assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.text());
        let cookie = r
            .headers
            .get_all(header::SET_COOKIE)
            .iter()
            .map(|v| v.to_str().unwrap())
            .find(|c| c.starts_with("fulfillment_console="))
            .expect("a session cookie")
            .split(';')
            .next()
            .unwrap()
            .to_owned();
        let mut session = Session {
            cookie,
            csrf: String::new(),
        };
        let page = session.get(app, "/console").await;
        let at = page.text().find("name=\"csrf\" value=\"").unwrap() + 19;
        session.csrf = page.text()[at..].split('"').next().unwrap().to_owned();
        session
    }

    async fn get(&self, app: &App, path: &str) -> app::Reply {
        app.send_anonymous(
            Request::get(path)
                .header(header::COOKIE, &self.cookie)
                .body(Body::empty())
                .unwrap(),
        )
        .await
    }

    /// A form POST with the session's token; the redirect's target.
    async fn post(&self, app: &App, path: &str, fields: &[(&str, &str)]) -> String {
        let mut form = vec![("csrf", self.csrf.as_str())];
        form.extend_from_slice(fields);
        let body = form
            .iter()
            .map(|(k, v)| format!("{k}={}", v.replace(' ', "+")))
            .collect::<Vec<_>>()
            .join("&");
        let r = app
            .send_anonymous(
                Request::post(path)
                    .header(header::COOKIE, &self.cookie)
                    .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                    .body(Body::from(body))
                    .unwrap(),
            )
            .await;
        assert_eq!(r.status, StatusCode::SEE_OTHER, "{path}: {}", r.text());
        r.header("location").unwrap().to_owned()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_incident_is_redriven_and_resolved_from_the_console_with_the_operators_name() {
    let (app, payments) = with_refusable_refunds().await;
    failed_refund(&app, &payments, "o-con-1").await;
    let session = Session::open(&app).await;

    let incidents = session.get(&app, "/console/incidents").await.text();
    assert!(incidents.contains("/console/orders/o-con-1"), "{incidents}");
    assert!(incidents.contains("RefundPayment"), "{incidents}");
    let page = session.get(&app, "/console/orders/o-con-1").await.text();
    assert!(page.contains("Redrive the failed step"), "{page}");
    assert!(page.contains("COMPENSATION_FAILED"), "{page}");

    // Redriven while the provider still refuses: the incident stays, the redrive is recorded.
    let to = session
        .post(
            &app,
            "/console/orders/o-con-1/redrive",
            &[("note", "try again")],
        )
        .await;
    assert!(to.starts_with("/console/orders/o-con-1?done="), "{to}");
    let deadline = std::time::Instant::now() + app::DEADLINE;
    let status = loop {
        let s = app.operator_get("/orders/o-con-1/status").await.json();
        if s["executionStatus"] != "RUNNING" && !s["actions"].as_array().unwrap().is_empty() {
            break s;
        }
        assert!(std::time::Instant::now() < deadline, "{s}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(status["status"], "COMPENSATION_FAILED");
    assert_eq!(status["actions"][0]["action"], "redrive");
    assert_eq!(status["actions"][0]["by"], "operator");
    assert_eq!(status["actions"][0]["note"], "try again");

    // Resolved by hand: the order ends CANCELLED, and the page shows who did what.
    let to = session
        .post(
            &app,
            "/console/orders/o-con-1/resolve",
            &[("note", "refunded by hand")],
        )
        .await;
    assert!(to.contains("done="), "{to}");
    app.reaches("o-con-1", "CANCELLED").await;
    let done = app.operator_get("/orders/o-con-1/status").await.json();
    assert_eq!(done["actions"][1]["action"], "resolve", "{done}");
    assert_eq!(done["actions"][1]["note"], "refunded by hand", "{done}");
    let page = session.get(&app, "/console/orders/o-con-1").await.text();
    assert!(
        page.contains("Redriven by <strong>operator</strong>"),
        "{page}"
    );
    assert!(
        page.contains("Resolved by hand by <strong>operator</strong>"),
        "{page}"
    );
    assert!(!page.contains("Redrive the failed step"), "{page}");

    // Once resolved, another redrive is refused with the API's words, and changes nothing.
    let to = session
        .post(&app, "/console/orders/o-con-1/redrive", &[])
        .await;
    assert!(to.contains("failed="), "{to}");
    let after = app.operator_get("/orders/o-con-1/status").await.json();
    assert_eq!(after["actions"].as_array().unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_stock_form_sets_counts_and_prices_and_refuses_half_a_price() {
    let app = App::start().await;
    let session = Session::open(&app).await;
    let to = session
        .post(
            &app,
            "/console/stock/new",
            &[
                ("sku", "lamp"),
                ("available", "7"),
                ("cents", "1999"),
                ("currency", "EUR"),
            ],
        )
        .await;
    assert!(to.starts_with("/console/stock?done="), "{to}");
    let stock = app.operator_get("/inventory/lamp").await.json();
    assert_eq!(stock["available"], 7);
    assert_eq!(stock["price"]["cents"], 1999);
    let page = session.get(&app, "/console/stock").await.text();
    assert!(page.contains("19.99 EUR"), "{page}");

    // Bad input: a price without its currency, a negative count, an invalid SKU. Each is
    // refused with a notice, and nothing changes.
    for fields in [
        vec![("available", "3"), ("cents", "5")],
        vec![("available", "-1")],
    ] {
        let to = session.post(&app, "/console/stock/lamp", &fields).await;
        assert!(to.starts_with("/console/stock?failed="), "{fields:?}: {to}");
    }
    let to = session
        .post(
            &app,
            "/console/stock/new",
            &[("sku", "bad sku!"), ("available", "1")],
        )
        .await;
    assert!(to.starts_with("/console/stock?failed="), "{to}");
    let stock = app.operator_get("/inventory/lamp").await.json();
    assert_eq!(stock["available"], 7, "{stock}");
    assert_eq!(stock["price"]["cents"], 1999, "{stock}");
    assert_eq!(
        app.operator_get("/inventory/bad%20sku!").await.status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_filter_or_cursor_is_a_page_that_says_so() {
    let app = App::start().await;
    let session = Session::open(&app).await;
    for path in [
        "/console/orders?status=NOPE",
        "/console/orders?since=yesterday",
        "/console/orders?after=not-a-cursor",
        "/console/approvals?after=not-a-cursor",
    ] {
        let r = session.get(&app, path).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{path}");
        assert!(
            r.header("content-type").unwrap().starts_with("text/html"),
            "{path}: the console answers people with a page"
        );
    }
    assert_eq!(
        session.get(&app, "/console/orders/nope").await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        session
            .get(&app, "/console/orders/nope/terminate")
            .await
            .status,
        StatusCode::NOT_FOUND
    );
}
