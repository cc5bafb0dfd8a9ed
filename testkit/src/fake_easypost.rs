//! A fake EasyPost on `127.0.0.1:0`: the Shipments endpoints the gateway uses, in EasyPost's
//! shapes (`{"shipment": {…}}` in, the Shipment object out; errors as `{"error": {"code",
//! "message", "errors"}}`; the key as HTTP Basic user name, or a bearer token as the official
//! Python client sends it). As EasyPost: no idempotency keys (each create makes a shipment),
//! one label per shipment (a second buy is refused), a refund sets `refund_status`, a shipment
//! is found by its id or its `reference`.
//!
//! Where EasyPost's exact error codes are not documented (a second buy, a refund of a shipment
//! without a label, a wrong key) the codes here are this fake's own; the gateway decides by the
//! status and by retrieving the shipment, never by those codes.
//!
//! Switches: answers with an error status before doing anything ([`FakeEasyPost::fail_next`]),
//! slow answers sent after the work is done ([`FakeEasyPost::delay`]), work done and its answer
//! lost ([`FakeEasyPost::lose_next`]: the change is applied, the answer is a 500), postal codes
//! whose labels the carrier refuses ([`FakeEasyPost::undeliverable`]), and how refunds end.
//! Every request is recorded.

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The key the fake accepts (EasyPost's test keys start `EZTK`).
pub const API_KEY: &str = "EZTK_fake_0123456789abcdef";

/// The rates every shipment gets: (carrier, service, rate).
pub const RATES: [(&str, &str, &str); 4] = [
    ("USPS", "Express", "34.15"),
    ("USPS", "Priority", "7.42"),
    ("USPS", "GroundAdvantage", "6.07"),
    ("UPS", "Ground", "9.10"),
];

/// One request as the server received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: Method,
    pub path: String,
    pub headers: HeaderMap,
    /// The JSON body (`Null` without one).
    pub body: Value,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

struct Books {
    requests: Vec<Recorded>,
    /// Every shipment, oldest first.
    shipments: Vec<Value>,
    next_id: u64,
    fail_next: Vec<StatusCode>,
    /// POSTs to a path ending so still to be answered 500 after their work: (suffix, count).
    lose_next: (String, usize),
    /// Answers to paths ending so are sent this much later: (suffix, delay).
    delay: Option<(String, Duration)>,
    undeliverable: HashSet<String>,
    refunds_end_as: String,
}

type Shared = Arc<Mutex<Books>>;

/// A running fake; it stops with the test's runtime.
#[derive(Clone)]
pub struct FakeEasyPost {
    /// Scheme, host and port (the gateway adds `/v2`).
    pub base_url: String,
    books: Shared,
}

impl FakeEasyPost {
    pub async fn start() -> FakeEasyPost {
        let books = Arc::new(Mutex::new(Books {
            requests: Vec::new(),
            shipments: Vec::new(),
            next_id: 0,
            fail_next: Vec::new(),
            lose_next: (String::new(), 0),
            delay: None,
            undeliverable: HashSet::new(),
            refunds_end_as: "submitted".to_owned(),
        }));
        let app = Router::new()
            .route("/v2/shipments", post(create).get(list))
            .route("/v2/shipments/{id}", get(retrieve))
            .route("/v2/shipments/{id}/buy", post(buy))
            .route("/v2/shipments/{id}/refund", post(refund))
            .fallback(not_found)
            .with_state(books.clone());
        let base_url = super::serve_on_loopback(app).await;
        FakeEasyPost { base_url, books }
    }

    fn books(&self) -> std::sync::MutexGuard<'_, Books> {
        self.books.lock().expect("books")
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.books().requests.clone()
    }

    /// The requests whose path ends with `suffix` (e.g. `/buy`).
    pub fn requests_to(&self, method: Method, suffix: &str) -> usize {
        let books = self.books();
        let to = |r: &&Recorded| r.method == method && r.path.ends_with(suffix);
        books.requests.iter().filter(to).count()
    }

    /// The next `n` requests are answered `status` before anything is done (503, 429, …).
    pub fn fail_next(&self, n: usize, status: StatusCode) {
        self.books().fail_next = vec![status; n];
    }

    /// Answers are sent this much later, after the work is done (a slow network, a timeout).
    pub fn delay(&self, by: Option<Duration>) {
        self.delay_to("", by);
    }

    /// As [`delay`](Self::delay), only for the requests whose path ends with `suffix`.
    pub fn delay_to(&self, suffix: &str, by: Option<Duration>) {
        self.books().delay = by.map(|d| (suffix.to_owned(), d));
    }

    /// The next `n` POSTs to a path ending with `suffix` (`/shipments`, `/buy`, `/refund`) are
    /// carried out, then answered 500: the work is done, the answer lost.
    pub fn lose_next(&self, n: usize, suffix: &str) {
        self.books().lose_next = (suffix.to_owned(), n);
    }

    /// The carrier refuses to sell a label to this postal code (the buy is answered 422).
    pub fn undeliverable(&self, postal_code: &str) {
        self.books().undeliverable.insert(postal_code.to_owned());
    }

    /// The `refund_status` a refund request ends with (`submitted` by default, as most
    /// carriers; `not_applicable` for carriers that bill on scan; `rejected`).
    pub fn refunds_end_as(&self, status: &str) {
        self.books().refunds_end_as = status.to_owned();
    }

    fn of_reference(&self, reference: &str, pred: impl Fn(&Value) -> bool) -> usize {
        let books = self.books();
        let of = |s: &&Value| s["reference"] == reference && pred(s);
        books.shipments.iter().filter(of).count()
    }

    /// Shipments created with this reference (an order id).
    pub fn shipments_of(&self, reference: &str) -> usize {
        self.of_reference(reference, |_| true)
    }

    /// Labels bought for this reference, refunded or not: the money spent on postage.
    pub fn labels_bought(&self, reference: &str) -> usize {
        self.of_reference(reference, |s| !s["postage_label"].is_null())
    }

    /// The tracking codes of the labels bought for this reference.
    pub fn tracking_codes(&self, reference: &str) -> Vec<String> {
        let books = self.books();
        let of = |s: &&Value| s["reference"] == reference;
        let codes = books.shipments.iter().filter(of);
        codes
            .filter_map(|s| s["tracking_code"].as_str().map(str::to_owned))
            .collect()
    }

    /// Labels of this reference whose refund was asked (and not rejected).
    pub fn labels_refunded(&self, reference: &str) -> usize {
        self.of_reference(reference, |s| {
            !s["refund_status"].is_null() && s["refund_status"] != "rejected"
        })
    }
}

fn error(status: StatusCode, code: &str, message: &str, errors: Value) -> (StatusCode, Value) {
    (
        status,
        json!({"error": {"code": code, "message": message, "errors": errors}}),
    )
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// `prefix_` and 32 hex digits, as EasyPost's ids.
fn next_id(books: &mut Books, prefix: &str) -> String {
    books.next_id += 1;
    format!("{prefix}_{:032x}", books.next_id)
}

/// What every request goes through: recorded, maybe failed, authenticated. `Ok` is the delay
/// to apply once the work is done.
fn admit(
    books: &Shared,
    method: Method,
    path: &str,
    headers: &HeaderMap,
    body: &Value,
) -> Result<Option<Duration>, (StatusCode, Value)> {
    let mut b = books.lock().expect("books");
    b.requests.push(Recorded {
        method,
        path: path.to_owned(),
        headers: headers.clone(),
        body: body.clone(),
    });
    if let Some(status) = b.fail_next.pop() {
        return Err(error(status, "FAKE.OUTAGE", "fake outage", json!([])));
    }
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("none");
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{API_KEY}:"));
    if auth != format!("Basic {basic}") && auth != format!("Bearer {API_KEY}") {
        let sent = auth
            .strip_prefix("Basic ")
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
            .map_or_else(
                || auth.to_owned(),
                |b| String::from_utf8_lossy(&b).into_owned(),
            );
        // Worse than EasyPost: quotes the key it got, so a gateway that repeats it is caught.
        return Err(error(
            StatusCode::UNAUTHORIZED,
            "APIKEY.INACTIVE",
            &format!("The API key provided is not valid: {sent}"),
            json!([]),
        ));
    }
    Ok(b.delay
        .as_ref()
        .filter(|(suffix, _)| path.ends_with(suffix.as_str()))
        .map(|(_, by)| *by))
}

/// Answers after `delay`, or, for a POST whose answer is to be lost, with a 500 whatever the
/// work did.
async fn answer(
    books: &Shared,
    method: &Method,
    path: &str,
    delay: Option<Duration>,
    (status, body): (StatusCode, Value),
) -> Response {
    let lost = {
        let mut b = books.lock().expect("books");
        let (suffix, left) = &mut b.lose_next;
        let lose = *method == Method::POST && *left > 0 && path.ends_with(suffix.as_str());
        if lose {
            *left -= 1;
        }
        lose
    };
    if let Some(delay) = delay {
        tokio::time::sleep(delay).await;
    }
    if lost {
        let (s, b) = error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "INTERNAL_SERVER_ERROR",
            "fake: the work was done, the answer is lost",
            json!([]),
        );
        return (s, Json(b)).into_response();
    }
    (status, Json(body)).into_response()
}

/// Runs `work` on the books once the request is admitted, and answers.
async fn handle(
    books: Shared,
    method: Method,
    path: String,
    headers: HeaderMap,
    body: Value,
    work: impl FnOnce(&mut Books) -> (StatusCode, Value),
) -> Response {
    let delay = match admit(&books, method.clone(), &path, &headers, &body) {
        Ok(delay) => delay,
        Err(refused) => return (refused.0, Json(refused.1)).into_response(),
    };
    let result = work(&mut books.lock().expect("books"));
    answer(&books, &method, &path, delay, result).await
}

fn find<'a>(books: &'a mut Books, id: &str) -> Option<&'a mut Value> {
    // By id, or else by reference (the latest made with it).
    let at = books
        .shipments
        .iter()
        .position(|s| s["id"] == id)
        .or_else(|| books.shipments.iter().rposition(|s| s["reference"] == id))?;
    books.shipments.get_mut(at)
}

fn missing(id: &str) -> (StatusCode, Value) {
    error(
        StatusCode::NOT_FOUND,
        "NOT_FOUND",
        &format!("The requested resource could not be found: {id}"),
        json!([]),
    )
}

async fn create(State(books): State<Shared>, headers: HeaderMap, body: Json<Value>) -> Response {
    let body = body.0;
    let path = "/v2/shipments".to_owned();
    handle(books, Method::POST, path, headers, body.clone(), move |b| {
        let shipment = &body["shipment"];
        let blank: Vec<Value> = ["to_address", "from_address", "parcel"]
            .into_iter()
            .filter(|f| !shipment[f].is_object())
            .map(|f| json!({"field": f, "message": "cannot be blank"}))
            .collect();
        if !blank.is_empty() {
            return error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "PARAMETER.REQUIRED",
                "Missing required parameter.",
                Value::Array(blank),
            );
        }
        let id = next_id(b, "shp");
        let at = now();
        let mut address = |a: &Value| {
            let mut a = a.clone();
            if a.get("id").is_none() {
                a["id"] = json!(next_id(b, "adr"));
            }
            a["object"] = json!("Address");
            a
        };
        let (to, from) = (
            address(&shipment["to_address"]),
            address(&shipment["from_address"]),
        );
        let mut rates = Vec::new();
        for (carrier, service, rate) in RATES {
            rates.push(json!({
                "id": next_id(b, "rate"), "object": "Rate", "mode": "test",
                "carrier": carrier, "service": service, "rate": rate, "currency": "USD",
                "shipment_id": id, "carrier_account_id": "ca_fake",
                "created_at": at, "updated_at": at,
            }));
        }
        let made = json!({
            "id": id, "object": "Shipment", "mode": "test", "status": "unknown",
            "reference": shipment["reference"], "to_address": to, "from_address": from,
            "parcel": shipment["parcel"], "rates": rates, "selected_rate": null,
            "postage_label": null, "tracking_code": null, "refund_status": null,
            "messages": [], "created_at": at, "updated_at": at,
        });
        b.shipments.push(made.clone());
        (StatusCode::CREATED, made)
    })
    .await
}

async fn buy(
    State(books): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Json<Value>,
) -> Response {
    let body = body.0;
    let path = format!("/v2/shipments/{id}/buy");
    handle(books, Method::POST, path, headers, body.clone(), move |b| {
        let undeliverable = b.undeliverable.clone();
        let tracking = format!("94001{:017}", b.next_id + 1);
        let label_id = next_id(b, "pl");
        let Some(shipment) = find(b, &id) else {
            return missing(&id);
        };
        if !shipment["postage_label"].is_null() {
            return error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "SHIPMENT.POSTAGE.EXISTS",
                "This shipment already has a label.",
                json!([]),
            );
        }
        let wanted = body["rate"]["id"].as_str().unwrap_or_default();
        let rates = shipment["rates"].as_array().cloned().unwrap_or_default();
        let Some(rate) = rates.into_iter().find(|r| r["id"] == wanted) else {
            return error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "PARAMETER.INVALID",
                "Invalid parameter: rate.",
                json!([{"field": "rate", "message": "is not one of this shipment's rates"}]),
            );
        };
        let zip = shipment["to_address"]["zip"].as_str().unwrap_or_default();
        if undeliverable.contains(zip) {
            return error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "SHIPMENT.POSTAGE.FAILURE",
                "The carrier refused the destination address.",
                json!([{"field": "to_address.zip", "message": format!("{zip} is not deliverable")}]),
            );
        }
        let at = now();
        shipment["selected_rate"] = rate;
        shipment["tracking_code"] = json!(tracking);
        shipment["updated_at"] = json!(at);
        shipment["postage_label"] = json!({
            "id": label_id, "object": "PostageLabel", "created_at": at, "updated_at": at,
            "label_date": at, "label_file_type": "image/png", "label_size": "4x6",
            "label_url": format!("https://labels.invalid/{label_id}.png"),
        });
        (StatusCode::OK, shipment.clone())
    })
    .await
}

async fn refund(
    State(books): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let path = format!("/v2/shipments/{id}/refund");
    handle(books, Method::POST, path, headers, Value::Null, move |b| {
        let ends_as = b.refunds_end_as.clone();
        let Some(shipment) = find(b, &id) else {
            return missing(&id);
        };
        if shipment["postage_label"].is_null() {
            return error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "SHIPMENT.REFUND.UNAVAILABLE",
                "The shipment has no label to refund.",
                json!([]),
            );
        }
        if !shipment["refund_status"].is_null() && shipment["refund_status"] != "rejected" {
            return error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "SHIPMENT.REFUND.EXISTS",
                "A refund was already requested for this shipment.",
                json!([]),
            );
        }
        shipment["refund_status"] = json!(ends_as);
        shipment["updated_at"] = json!(now());
        (StatusCode::OK, shipment.clone())
    })
    .await
}

async fn retrieve(
    State(books): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let path = format!("/v2/shipments/{id}");
    handle(
        books,
        Method::GET,
        path,
        headers,
        Value::Null,
        move |b| match find(b, &id) {
            Some(shipment) => (StatusCode::OK, shipment.clone()),
            None => missing(&id),
        },
    )
    .await
}

/// Newest first, `page_size` of them (default 20, at most 100), and whether more follow.
async fn list(
    State(books): State<Shared>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let path = "/v2/shipments".to_owned();
    handle(books, Method::GET, path, headers, Value::Null, move |b| {
        let size = match query.get("page_size").map(|s| s.parse::<usize>()) {
            None => 20,
            Some(Ok(n @ 1..=100)) => n,
            Some(_) => {
                return error(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "PARAMETER.INVALID",
                    "page_size must be from 1 to 100",
                    json!([]),
                );
            }
        };
        let page: Vec<Value> = b.shipments.iter().rev().take(size).cloned().collect();
        let has_more = b.shipments.len() > size;
        (
            StatusCode::OK,
            json!({"shipments": page, "has_more": has_more}),
        )
    })
    .await
}

async fn not_found(method: Method, uri: axum::http::Uri) -> impl IntoResponse {
    let (s, b) = error(
        StatusCode::NOT_FOUND,
        "NOT_FOUND",
        &format!("No route for {method} {}", uri.path()),
        json!([]),
    );
    (s, Json(b))
}
