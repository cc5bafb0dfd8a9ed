//! The console's actions on one order (approve, reject, cancel, redrive, resolve) and on the
//! stock. Each asks for a confirmation first (a page naming the order and what will happen,
//! with an optional note), then goes through the JSON API's own handler as the signed-in
//! operator: the same validation, the same record of who did it, the same answer. The result
//! comes back as a notice on the order's page.

use super::layout::{self, csrf, money, page, status_badge};
use super::session::{CSRF_FIELD, ConsoleOperator, same_origin};
use api::http::AppState;
use api::http::auth::Operator;
use api::http::extract::{JsonBody, PathParam};
use api::http::problem::Problem;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use maud::html;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::collections::HashMap;

/// An action on one order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Approve,
    Reject,
    Cancel,
    Redrive,
    Resolve,
}

impl Action {
    pub fn parse(raw: &str) -> Option<Action> {
        Some(match raw {
            "approve" => Action::Approve,
            "reject" => Action::Reject,
            "cancel" => Action::Cancel,
            "redrive" => Action::Redrive,
            "resolve" => Action::Resolve,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Action::Approve => "approve",
            Action::Reject => "reject",
            Action::Cancel => "cancel",
            Action::Redrive => "redrive",
            Action::Resolve => "resolve",
        }
    }

    /// What the confirmation page says will happen.
    fn consequence(self) -> &'static str {
        match self {
            Action::Approve => "The saga goes on to ship the order.",
            Action::Reject => {
                "The order is cancelled: its payment is refunded and its stock released."
            }
            Action::Cancel => {
                "The order is cancelled before it ships: its payment is refunded and its stock \
                 released. Refused once the shipment has begun."
            }
            Action::Redrive => "The saga runs the failed compensation step again.",
            Action::Resolve => {
                "The incident is closed by hand and the order ends CANCELLED. Do this only after \
                 fixing by hand what the failed step could not (a refund, a release)."
            }
        }
    }

    /// The words of a done notice.
    fn done(self, id: &str) -> String {
        match self {
            Action::Approve => format!("Order {id} approved"),
            Action::Reject => format!("Order {id} rejected"),
            Action::Cancel => format!("Cancellation of order {id} requested"),
            Action::Redrive => format!("The failed step of order {id} redriven"),
            Action::Resolve => format!("Order {id} resolved by hand"),
        }
    }
}

/// What an action's handler answered: done, or why not (the problem's words).
pub type Outcome = Result<(), String>;

/// Runs `action` on the order `order_id` as `operator`, through the JSON API's handler.
pub async fn perform(
    state: &AppState,
    operator: &ConsoleOperator,
    order_id: &str,
    action: Action,
    note: Option<&str>,
) -> Outcome {
    let state = state.clone();
    let path = PathParam(order_id.to_owned());
    let as_operator = Operator {
        name: operator.name.clone(),
    };
    let response = match action {
        Action::Approve | Action::Reject => {
            let mut body = json!({ "decision": action.name() });
            if let Some(n) = note {
                body["reason"] = Value::from(n);
            }
            api::http::approvals::decide_approval(State(state), as_operator, path, JsonBody(body))
                .await
        }
        Action::Cancel => {
            let body = note.map_or_else(|| json!({}), |n| json!({ "reason": n }));
            api::http::cancel::cancel(State(state), operator.caller(), path, JsonBody(body)).await
        }
        Action::Redrive => {
            let body = note.map_or_else(|| json!({}), |n| json!({ "note": n }));
            api::http::incidents::redrive(State(state), as_operator, path, JsonBody(body))
                .await
                .into_response()
        }
        Action::Resolve => {
            let body = note.map_or_else(|| json!({}), |n| json!({ "note": n }));
            api::http::incidents::resolve(State(state), as_operator, path, JsonBody(body))
                .await
                .into_response()
        }
    };
    outcome(response)
}

/// A handler's answer as done or the problem's words (its detail and each field's message).
fn outcome(response: Response) -> Outcome {
    if response.status().is_success() {
        return Ok(());
    }
    match response.extensions().get::<Problem>() {
        Some(p) => {
            let mut text = p.detail.clone();
            for e in p.errors.iter().flatten() {
                text.push_str(&format!("; {} {}", e.field, e.message));
            }
            Err(text)
        }
        None => Err(format!("refused ({})", response.status())),
    }
}

/// The signature of a notice, so that only this session's own redirects show one (a link
/// from elsewhere cannot put words on the console's pages).
pub fn notice_sig(operator: &ConsoleOperator, text: &str) -> String {
    let digest = Sha256::digest(format!("notice:{}:{text}", operator.csrf).as_bytes());
    URL_SAFE_NO_PAD.encode(&digest[..16])
}

/// A redirect to `path` carrying the outcome as a signed notice.
pub fn with_notice(
    operator: &ConsoleOperator,
    path: &str,
    outcome: Result<String, String>,
) -> Response {
    let (key, text) = match outcome {
        Ok(t) => ("done", t),
        Err(t) => ("failed", t),
    };
    let sig = notice_sig(operator, &text);
    let query = serde_urlencoded::to_string([(key, text.as_str()), ("sig", sig.as_str())])
        .unwrap_or_default();
    let separator = if path.contains('?') { '&' } else { '?' };
    Redirect::to(&format!("{path}{separator}{query}")).into_response()
}

/// `GET /console/orders/{id}/{action}`: the confirmation page.
pub async fn confirm(
    State(state): State<AppState>,
    operator: ConsoleOperator,
    Path((raw, action)): Path<(String, String)>,
) -> Response {
    let Some(action) = Action::parse(&action) else {
        return layout::not_found("no such action");
    };
    let order = match api::http::orders::find_order(&state, &raw).await {
        Ok(o) => o,
        Err(p) if p.status == 404 => return layout::not_found(&p.detail),
        Err(p) => return layout::unavailable_text(&p.detail),
    };
    let id = order.id().to_string();
    let verb = match action {
        Action::Approve => "Approve",
        Action::Reject => "Reject",
        Action::Cancel => "Cancel",
        Action::Redrive => "Redrive",
        Action::Resolve => "Resolve",
    };
    let title = format!("{verb} order {id}?");
    let body = html! {
        p { (status_badge(order.status)) " " (money(order.new.amount_cents, &order.new.currency)) " for customer " strong { (order.new.customer_id) } }
        p { (action.consequence()) }
        form method="post" action={ "/console/orders/" (id) "/" (action.name()) } {
            (csrf(&operator))
            label for="note" { "Note (optional, recorded with your name)" }
            textarea id="note" name="note" rows="3" maxlength="500" {}
            div class="buttons" {
                button type="submit" class=(if action == Action::Approve || action == Action::Redrive { "primary" } else { "danger" }) { (verb) " order " (id) }
                a class="button" href={ "/console/orders/" (id) } { "Back" }
            }
        }
    };
    page(&operator, "/console/orders", &title, None, body)
}

/// The note of a form: trimmed, `None` when empty.
fn note(form: &HashMap<String, String>) -> Option<&str> {
    form.get("note").map(|n| n.trim()).filter(|n| !n.is_empty())
}

/// `POST /console/orders/{id}/{action}`: does it, and shows the order with the outcome.
pub async fn act(
    State(state): State<AppState>,
    operator: ConsoleOperator,
    headers: HeaderMap,
    Path((raw, action)): Path<(String, String)>,
    axum::Form(form): axum::Form<HashMap<String, String>>,
) -> Response {
    if !same_origin(&headers) || !operator.csrf_ok(form.get(CSRF_FIELD).map(String::as_str)) {
        return layout::forbidden(
            "this form's token is not this session's; reload the page and try again",
        );
    }
    let Some(action) = Action::parse(&action) else {
        return layout::not_found("no such action");
    };
    let result = perform(&state, &operator, &raw, action, note(&form)).await;
    tracing::info!(operator = %operator.name, order_id = %raw, action = action.name(), ok = result.is_ok(), "console action");
    let outcome = result.map(|()| action.done(&raw));
    // The order's id came from the path: link back only to an id the store accepts.
    let path = match store::OrderId::parse(&raw) {
        Ok(id) => format!("/console/orders/{id}"),
        Err(_) => "/console/orders".to_owned(),
    };
    with_notice(&operator, &path, outcome)
}

/// `POST /console/stock/{sku}` (`new`: the SKU is in the form): sets the count and the price,
/// through `PUT /inventory/{sku}`'s handler.
pub async fn set_stock(
    State(state): State<AppState>,
    operator: ConsoleOperator,
    headers: HeaderMap,
    Path(sku): Path<String>,
    axum::Form(form): axum::Form<HashMap<String, String>>,
) -> Response {
    if !same_origin(&headers) || !operator.csrf_ok(form.get(CSRF_FIELD).map(String::as_str)) {
        return layout::forbidden(
            "this form's token is not this session's; reload the page and try again",
        );
    }
    let sku = if sku == "new" {
        form.get("sku")
            .map(|s| s.trim().to_owned())
            .unwrap_or_default()
    } else {
        sku
    };
    let field = |name: &str| form.get(name).map(|v| v.trim()).filter(|v| !v.is_empty());
    let mut body = serde_json::Map::new();
    let mut errors = Vec::new();
    if let Some(a) = field("available") {
        match a.parse::<u64>() {
            Ok(n) => {
                body.insert("available".into(), n.into());
            }
            Err(_) => errors.push("available must be a whole number"),
        }
    }
    match (field("cents"), field("currency")) {
        (Some(c), Some(cur)) => match c.parse::<u64>() {
            Ok(cents) => {
                body.insert("price".into(), json!({ "cents": cents, "currency": cur }));
            }
            Err(_) => errors.push("the price must be a whole number of cents"),
        },
        (None, None) => {}
        _ => errors.push("a price needs both cents and a currency"),
    }
    let outcome = if let Some(e) = errors.first() {
        Err((*e).to_owned())
    } else {
        let response = api::http::inventory::put_stock(
            State(state),
            Operator {
                name: operator.name.clone(),
            },
            PathParam(sku.clone()),
            JsonBody(Value::Object(body)),
        )
        .await
        .into_response();
        outcome(response).map(|()| format!("{sku} saved"))
    };
    tracing::info!(operator = %operator.name, sku = %sku, ok = outcome.is_ok(), "console stock change");
    with_notice(&operator, "/console/stock", outcome)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notices_are_signed_per_session() {
        let a = ConsoleOperator::for_tests("ops");
        let sig = notice_sig(&a, "Order o-1 approved");
        assert_eq!(sig, notice_sig(&a, "Order o-1 approved"));
        assert_ne!(sig, notice_sig(&a, "Order o-1 rejected"));
    }

    #[test]
    fn every_action_has_a_name_that_parses_back() {
        for a in [
            Action::Approve,
            Action::Reject,
            Action::Cancel,
            Action::Redrive,
            Action::Resolve,
        ] {
            assert_eq!(Action::parse(a.name()), Some(a));
        }
        assert_eq!(Action::parse("terminate"), None);
    }
}
