//! A fake Stripe on `127.0.0.1:0`: the PaymentIntents and Refunds endpoints the gateway uses
//! (lists in Stripe's shape: newest first, `limit` and `starting_after`, `has_more`), with
//! Stripe's idempotency (the same key and parameters replay the first answer with
//! `Idempotent-Replayed: true`, other parameters are a 400 `idempotency_error`), its decline test
//! card, switches for an outage (503), a slow answer, a search that lags behind (always, or by
//! some seconds after each charge) and charges that land late (a provider that lags: the charge
//! is applied a while after its request, the request's own answer is long given up on, and the
//! same key meanwhile is Stripe's `409 idempotency_key_in_use`), and a record of every request's
//! headers.

use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Stripe's test card that is always declined.
pub const PM_DECLINED: &str = "pm_card_chargeDeclined";
/// Stripe's test card that always asks for 3-D Secure: the intent ends `requires_action`.
pub const PM_AUTHENTICATION: &str = "pm_card_authenticationRequired";
/// Stripe's smallest charge in USD, in cents: less is a 400 `amount_too_small`.
pub const MIN_AMOUNT_CENTS: u64 = 50;
pub const SECRET_KEY: &str = "sk_test_fake_0123456789abcdef";

/// One request as the server received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: Method,
    pub path: String,
    pub headers: HeaderMap,
    /// The form body's or query's parameters, as sent.
    pub params: Vec<(String, String)>,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The first answer under a key, and what it was asked.
struct Saved {
    path: String,
    params: Vec<(String, String)>,
    status: StatusCode,
    body: Value,
}

#[derive(Default)]
struct Ledger {
    requests: Vec<Recorded>,
    intents: Vec<Value>,
    refunds: Vec<Value>,
    keys: HashMap<String, Saved>,
    next_id: u64,
    fail_next: usize,
    delay: Option<Duration>,
    /// How long after its creation an intent shows in search results (`Duration::MAX`: never).
    search_lag: Duration,
    /// When each intent (by id) was created.
    created: HashMap<String, Instant>,
    /// Orders whose next charge lands this much after its request.
    held: HashMap<String, Duration>,
    /// Idempotency keys of held charges not landed yet.
    in_flight: HashSet<String>,
    key_revoked: bool,
}

type Shared = Arc<Mutex<Ledger>>;

/// A running fake; it stops with the test's runtime.
#[derive(Clone)]
pub struct FakeStripe {
    pub base_url: String,
    ledger: Shared,
}

impl FakeStripe {
    pub async fn start() -> FakeStripe {
        let ledger = Shared::default();
        let app = Router::new()
            .route("/v1/payment_intents", post(create_intent).get(list_intents))
            .route("/v1/payment_intents/search", get(search_intents))
            .route("/v1/payment_intents/{id}", get(retrieve_intent))
            .route("/v1/refunds", post(create_refund).get(list_refunds))
            .route("/v1/balance", get(balance))
            .route("/v1/{*rest}", get(not_found).post(not_found))
            .with_state(ledger.clone());
        let base_url = super::serve_on_loopback(app).await;
        FakeStripe { base_url, ledger }
    }

    fn ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.ledger.lock().expect("ledger")
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.ledger().requests.clone()
    }

    /// The next `n` requests are answered 503 before anything is done.
    pub fn fail_next(&self, n: usize) {
        self.ledger().fail_next = n;
    }

    /// Answers are sent this much later (after the work is done, as a slow network would).
    pub fn delay(&self, by: Option<Duration>) {
        self.ledger().delay = by;
    }

    /// While on, search sees no intent, as Stripe's (eventually consistent, up to a minute
    /// behind) does right after a charge; retrieving an intent by id still finds it.
    pub fn search_lags(&self, lagging: bool) {
        self.ledger().search_lag = if lagging {
            Duration::MAX
        } else {
            Duration::ZERO
        };
    }

    /// Intents show in search results only this long after their creation, as in Stripe's
    /// search, which "may be up to a minute" behind; retrieving or listing them is not.
    pub fn search_lag(&self, by: Duration) {
        self.ledger().search_lag = by;
    }

    /// The next charge of each of these orders lands `by` after its request arrives: its
    /// request is answered only then (long after any client gave up on it), and a request
    /// with its idempotency key meanwhile is answered `409 idempotency_key_in_use`, as Stripe
    /// answers a key whose first request is still running. The charge lands even when its
    /// client has hung up.
    pub fn hold_charges<I: IntoIterator<Item = String>>(&self, orders: I, by: Duration) {
        let mut l = self.ledger();
        for order in orders {
            l.held.insert(order, by);
        }
    }

    /// Held charges not landed yet (their requests arrived; see [`FakeStripe::hold_charges`]).
    pub fn charges_in_flight(&self) -> usize {
        self.ledger().in_flight.len()
    }

    /// How many distinct payment intents of the order were refunded.
    pub fn refunded_intents_of(&self, order_id: &str) -> usize {
        let l = self.ledger();
        let intents: HashSet<String> = l
            .refunds
            .iter()
            .filter(|r| r["metadata"]["order_id"] == order_id)
            .filter_map(|r| r["payment_intent"].as_str().map(str::to_owned))
            .collect();
        intents.len()
    }

    /// While on, the service's key is refused as Stripe refuses a rolled or deleted one (401).
    pub fn revoke_key(&self, revoked: bool) {
        self.ledger().key_revoked = revoked;
    }

    /// Succeeded payment intents of the order: the money actually taken.
    pub fn charges_of(&self, order_id: &str) -> usize {
        self.ledger()
            .intents
            .iter()
            .filter(|i| i["metadata"]["order_id"] == order_id && i["status"] == "succeeded")
            .count()
    }

    pub fn refunds_of(&self, order_id: &str) -> usize {
        self.ledger()
            .refunds
            .iter()
            .filter(|r| r["metadata"]["order_id"] == order_id)
            .count()
    }
}

fn error(status: StatusCode, kind: &str, code: Option<&str>, message: &str) -> (StatusCode, Value) {
    let mut body = json!({"error": {"type": kind, "message": message}});
    if let Some(code) = code {
        body["error"]["code"] = json!(code);
    }
    (status, body)
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// What every request goes through: recorded, authenticated, maybe failed. `Ok` means "go on",
/// with the delay to apply once the work is done.
fn admit(
    ledger: &Shared,
    method: Method,
    path: &str,
    headers: &HeaderMap,
    params: &[(String, String)],
) -> Result<Option<Duration>, (StatusCode, Value)> {
    let mut l = ledger.lock().expect("ledger");
    l.requests.push(Recorded {
        method,
        path: path.to_owned(),
        headers: headers.clone(),
        params: params.to_vec(),
    });
    if l.fail_next > 0 {
        l.fail_next -= 1;
        let (s, b) = error(
            StatusCode::SERVICE_UNAVAILABLE,
            "api_error",
            None,
            "fake outage",
        );
        return Err((s, b));
    }
    let auth = headers.get("authorization").and_then(|v| v.to_str().ok());
    if l.key_revoked || auth != Some(&format!("Bearer {SECRET_KEY}")) {
        // Worse than Stripe, which masks most of it: quotes the key it got in full.
        let (s, b) = error(
            StatusCode::UNAUTHORIZED,
            "invalid_request_error",
            None,
            &format!("Invalid API Key provided: {}", auth.unwrap_or("none")),
        );
        return Err((s, b));
    }
    Ok(l.delay)
}

async fn answer(
    delay: Option<Duration>,
    status: StatusCode,
    body: Value,
    replayed: bool,
) -> Response {
    if let Some(delay) = delay {
        tokio::time::sleep(delay).await;
    }
    let mut response = (status, Json(body)).into_response();
    if replayed {
        response
            .headers_mut()
            .insert("Idempotent-Replayed", "true".parse().expect("header"));
    }
    response
}

/// Runs a POST under Stripe's idempotency rules: `work` runs once per key.
async fn idempotent(
    ledger: Shared,
    path: &str,
    headers: HeaderMap,
    mut params: Vec<(String, String)>,
    work: fn(&mut Ledger, &HashMap<String, String>) -> (StatusCode, Value),
) -> Response {
    let delay = match admit(&ledger, Method::POST, path, &headers, &params) {
        Ok(delay) => delay,
        Err((status, body)) => return (status, Json(body)).into_response(),
    };
    params.sort();
    let key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if let Some(key) = &key
        && let Some(by) = hold(&ledger, path, key, &params)
    {
        // Applied later by a task of its own, so that the charge lands even if the client hangs
        // up first; this request is answered when it does.
        let (ledger, path, key) = (ledger.clone(), path.to_owned(), key.clone());
        let landed = tokio::spawn(async move {
            tokio::time::sleep(by).await;
            let mut l = ledger.lock().expect("ledger");
            let map = params.iter().cloned().collect();
            let (status, body) = work(&mut l, &map);
            l.in_flight.remove(&key);
            l.keys.insert(
                key,
                Saved {
                    path,
                    params,
                    status,
                    body: body.clone(),
                },
            );
            (status, body)
        });
        let (status, body) = landed.await.expect("the held charge lands");
        return answer(delay, status, body, false).await;
    }
    let (status, body, replayed) = {
        let mut l = ledger.lock().expect("ledger");
        match key.as_ref().and_then(|k| l.keys.get(k)) {
            _ if key.as_ref().is_some_and(|k| l.in_flight.contains(k)) => {
                let (s, b) = error(
                    StatusCode::CONFLICT,
                    "idempotency_error",
                    Some("idempotency_key_in_use"),
                    "There is currently another in-progress request using this idempotency \
                     key. Try again later.",
                );
                (s, b, false)
            }
            Some(saved) if saved.path == path && saved.params == params => {
                (saved.status, saved.body.clone(), true)
            }
            Some(_) => {
                let (s, b) = error(
                    StatusCode::BAD_REQUEST,
                    "idempotency_error",
                    None,
                    "Keys for idempotent requests can only be used with the same parameters \
                     they were first used with.",
                );
                (s, b, false)
            }
            None => {
                let map = params.iter().cloned().collect();
                let (status, body) = work(&mut l, &map);
                if let Some(key) = key {
                    l.keys.insert(
                        key,
                        Saved {
                            path: path.to_owned(),
                            params,
                            status,
                            body: body.clone(),
                        },
                    );
                }
                (status, body, false)
            }
        }
    };
    answer(delay, status, body, replayed).await
}

/// Whether this request is the held charge of its order (see [`FakeStripe::hold_charges`]):
/// how long until it lands. A held charge is held once; its key is in flight until it lands.
fn hold(ledger: &Shared, path: &str, key: &str, params: &[(String, String)]) -> Option<Duration> {
    if path != "/v1/payment_intents" {
        return None;
    }
    let order = params
        .iter()
        .find(|(k, _)| k == "metadata[order_id]")
        .map(|(_, v)| v.as_str())?;
    let mut l = ledger.lock().expect("ledger");
    if l.keys.contains_key(key) || l.in_flight.contains(key) {
        return None;
    }
    let by = l.held.remove(order)?;
    l.in_flight.insert(key.to_owned());
    Some(by)
}

async fn create_intent(
    State(ledger): State<Shared>,
    headers: HeaderMap,
    Form(params): Form<Vec<(String, String)>>,
) -> Response {
    idempotent(ledger, "/v1/payment_intents", headers, params, |l, p| {
        let (Some(amount), Some(currency), Some(method)) = (
            p.get("amount").and_then(|a| a.parse::<u64>().ok()),
            p.get("currency"),
            p.get("payment_method"),
        ) else {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                Some("parameter_missing"),
                "amount, currency and payment_method are required",
            );
        };
        if amount < MIN_AMOUNT_CENTS {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                Some("amount_too_small"),
                "Amount must be at least $0.50 usd",
            );
        }
        if p.get("confirm").map(String::as_str) != Some("true") {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                None,
                "this fake only creates and confirms at once",
            );
        }
        l.next_id += 1;
        let declined = method == PM_DECLINED;
        let id = format!("pi_fake{}", l.next_id);
        let metadata: serde_json::Map<String, Value> = p
            .iter()
            .filter_map(|(k, v)| {
                let name = k.strip_prefix("metadata[")?.strip_suffix(']')?;
                Some((name.to_owned(), json!(v)))
            })
            .collect();
        let intent = json!({
            "id": id,
            "object": "payment_intent",
            "amount": amount,
            "currency": currency,
            "payment_method": method,
            "status": if declined {
                "requires_payment_method"
            } else if method == PM_AUTHENTICATION {
                "requires_action"
            } else {
                "succeeded"
            },
            "created": now(),
            "latest_charge": format!("ch_fake{}", l.next_id),
            "metadata": metadata,
        });
        l.created.insert(id.clone(), Instant::now());
        l.intents.push(intent.clone());
        if declined {
            let (s, mut b) = error(
                StatusCode::PAYMENT_REQUIRED,
                "card_error",
                Some("card_declined"),
                "Your card was declined.",
            );
            b["error"]["decline_code"] = json!("generic_decline");
            b["error"]["payment_intent"] = intent;
            return (s, b);
        }
        (StatusCode::OK, intent)
    })
    .await
}

async fn create_refund(
    State(ledger): State<Shared>,
    headers: HeaderMap,
    Form(params): Form<Vec<(String, String)>>,
) -> Response {
    idempotent(ledger, "/v1/refunds", headers, params, |l, p| {
        let intent = p
            .get("payment_intent")
            .and_then(|id| l.intents.iter().find(|i| i["id"] == id.as_str()))
            .cloned();
        let Some(intent) = intent.filter(|i| i["status"] == "succeeded") else {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                Some("resource_missing"),
                "No such payment_intent",
            );
        };
        if l.refunds
            .iter()
            .any(|r| r["payment_intent"] == intent["id"])
        {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                Some("charge_already_refunded"),
                &format!(
                    "Charge {} has already been refunded.",
                    intent["latest_charge"]
                ),
            );
        }
        l.next_id += 1;
        let metadata: serde_json::Map<String, Value> = p
            .iter()
            .filter_map(|(k, v)| {
                let name = k.strip_prefix("metadata[")?.strip_suffix(']')?;
                Some((name.to_owned(), json!(v)))
            })
            .collect();
        let refund = json!({
            "id": format!("re_fake{}", l.next_id),
            "object": "refund",
            "amount": intent["amount"],
            "currency": intent["currency"],
            "charge": intent["latest_charge"],
            "payment_intent": intent["id"],
            "status": "succeeded",
            "created": now(),
            "metadata": metadata,
        });
        l.refunds.push(refund.clone());
        (StatusCode::OK, refund)
    })
    .await
}

async fn search_intents(
    State(ledger): State<Shared>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let path = "/v1/payment_intents/search";
    let params: Vec<_> = query.clone().into_iter().collect();
    let delay = match admit(&ledger, Method::GET, path, &headers, &params) {
        Ok(delay) => delay,
        Err((status, body)) => return (status, Json(body)).into_response(),
    };
    // The queries the gateway makes: metadata['order_id']:'<id>', and with a key prefix
    // `… AND metadata['key_prefix']:'<prefix>'`.
    let clauses: Option<Vec<(String, String)>> = query.get("query").map(|q| {
        q.split(" AND ")
            .filter_map(|clause| {
                let (field, value) = clause.split_once(":'")?;
                let field = field.strip_prefix("metadata['")?.strip_suffix("']")?;
                Some((field.to_owned(), value.strip_suffix('\'')?.to_owned()))
            })
            .collect()
    });
    let Some(clauses) = clauses.filter(|c| c.iter().any(|(f, _)| f == "order_id")) else {
        let (s, b) = error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            None,
            "unsupported search query",
        );
        return answer(delay, s, b, false).await;
    };
    let data: Vec<Value> = {
        let l = ledger.lock().expect("ledger");
        // Stripe lists newest first.
        l.intents
            .iter()
            .rev()
            .filter(|i| {
                let created = i["id"].as_str().and_then(|id| l.created.get(id));
                created.is_none_or(|at| at.elapsed() >= l.search_lag)
            })
            .filter(|i| {
                clauses
                    .iter()
                    .all(|(field, value)| i["metadata"][field.as_str()] == value.as_str())
            })
            .cloned()
            .collect()
    };
    let body = json!({"object": "search_result", "data": data, "has_more": false});
    answer(delay, StatusCode::OK, body, false).await
}

async fn retrieve_intent(
    State(ledger): State<Shared>,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> Response {
    let path = format!("/v1/payment_intents/{id}");
    let delay = match admit(&ledger, Method::GET, &path, &headers, &[]) {
        Ok(delay) => delay,
        Err((status, body)) => return (status, Json(body)).into_response(),
    };
    let intent = {
        let l = ledger.lock().expect("ledger");
        l.intents.iter().find(|i| i["id"] == id.as_str()).cloned()
    };
    let (status, body) = match intent {
        Some(intent) => (StatusCode::OK, intent),
        None => error(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            Some("resource_missing"),
            &format!("No such payment_intent: '{id}'"),
        ),
    };
    answer(delay, status, body, false).await
}

/// Stripe's list answer over `all` (newest first): `limit` objects (default 10, at most 100)
/// after the object `starting_after`, those created at or after `created[gte]` (unix seconds)
/// only, and whether more follow.
fn list_of(all: Vec<Value>, query: &HashMap<String, String>) -> Result<Value, (StatusCode, Value)> {
    let all: Vec<Value> = match query.get("created[gte]").map(|t| t.parse::<i64>()) {
        None => all,
        Some(Ok(from)) => all
            .into_iter()
            .filter(|o| o["created"].as_i64().is_some_and(|t| t >= from))
            .collect(),
        Some(Err(_)) => {
            return Err(error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                None,
                "Invalid integer: created[gte]",
            ));
        }
    };
    let limit = match query.get("limit").map(|l| l.parse::<usize>()) {
        None => 10,
        Some(Ok(n @ 1..=100)) => n,
        Some(_) => {
            return Err(error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                None,
                "limit must be an integer from 1 to 100",
            ));
        }
    };
    let start = match query.get("starting_after") {
        None => 0,
        Some(id) => match all.iter().position(|o| o["id"] == id.as_str()) {
            Some(at) => at + 1,
            None => {
                return Err(error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    Some("resource_missing"),
                    &format!("No such object: '{id}'"),
                ));
            }
        },
    };
    let rest = all.len().saturating_sub(start);
    let data: Vec<Value> = all.into_iter().skip(start).take(limit).collect();
    Ok(json!({"object": "list", "data": data, "has_more": rest > limit}))
}

async fn list_intents(
    State(ledger): State<Shared>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let params: Vec<_> = query.clone().into_iter().collect();
    let path = "/v1/payment_intents";
    let delay = match admit(&ledger, Method::GET, path, &headers, &params) {
        Ok(delay) => delay,
        Err((status, body)) => return (status, Json(body)).into_response(),
    };
    let all: Vec<Value> = {
        let l = ledger.lock().expect("ledger");
        l.intents.iter().rev().cloned().collect()
    };
    match list_of(all, &query) {
        Ok(body) => answer(delay, StatusCode::OK, body, false).await,
        Err((status, body)) => answer(delay, status, body, false).await,
    }
}

async fn list_refunds(
    State(ledger): State<Shared>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let params: Vec<_> = query.clone().into_iter().collect();
    let delay = match admit(&ledger, Method::GET, "/v1/refunds", &headers, &params) {
        Ok(delay) => delay,
        Err((status, body)) => return (status, Json(body)).into_response(),
    };
    let all: Vec<Value> = {
        let l = ledger.lock().expect("ledger");
        l.refunds
            .iter()
            .rev()
            .filter(|r| {
                query
                    .get("payment_intent")
                    .is_none_or(|id| r["payment_intent"] == id.as_str())
            })
            .cloned()
            .collect()
    };
    match list_of(all, &query) {
        Ok(body) => answer(delay, StatusCode::OK, body, false).await,
        Err((status, body)) => answer(delay, status, body, false).await,
    }
}

async fn balance(State(ledger): State<Shared>, headers: HeaderMap) -> Response {
    let delay = match admit(&ledger, Method::GET, "/v1/balance", &headers, &[]) {
        Ok(delay) => delay,
        Err((status, body)) => return (status, Json(body)).into_response(),
    };
    let body = json!({"object": "balance", "available": [], "pending": [], "livemode": false});
    answer(delay, StatusCode::OK, body, false).await
}

async fn not_found(Path(rest): Path<String>) -> impl IntoResponse {
    let (s, b) = error(
        StatusCode::NOT_FOUND,
        "invalid_request_error",
        None,
        &format!("Unrecognized request URL /v1/{rest}"),
    );
    (s, Json(b))
}
