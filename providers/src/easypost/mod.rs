//! A real carrier aggregator: the `ShippingGateway` port on EasyPost's Shipments API
//! (`POST /v2/shipments` with the order id as `reference`, `POST /v2/shipments/{id}/buy` with a
//! rate, `POST /v2/shipments/{id}/refund`, `GET /v2/shipments/{id}`). `shipping.rs` holds the
//! gateway, `book.rs` the record in our store that makes "one label per order" hold without
//! provider idempotency keys; this module holds the settings and the HTTP side: authentication
//! (the API key as HTTP Basic user name, as EasyPost documents), timeouts, error classification.
//!
//! Plain `http://` works out of the box (test servers, a local proxy); the real
//! `https://api.easypost.com` needs the crate's `rustls` feature.

mod shipping;

pub use shipping::EasyPostShipping;
pub use store::labels::{LabelBook, LabelRecord, LabelStep};

use crate::http::{self, BaseUrlProblem, ProviderHealth};
use crate::stripe::SecretKey;
use reqwest::StatusCode;
use serde::Deserialize;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use store::error::GatewayError;

/// EasyPost's API, for [`EasyPostConfig::base_url`].
pub const EASYPOST_API: &str = "https://api.easypost.com";

/// Who EasyPost buys from, from where, and how heavy a unit is.
#[derive(Debug, Clone, PartialEq)]
pub struct EasyPostConfig {
    /// Scheme, host and port, without the trailing `/v2` (e.g. [`EASYPOST_API`]).
    pub base_url: String,
    pub api_key: SecretKey,
    /// For a whole call (connect, send, answer); a call that takes longer is `Unavailable`.
    pub timeout: Duration,
    /// The carrier whose rate is bought, as EasyPost names it on rates (`USPS`, `UPS`, …).
    pub carrier: String,
    /// The carrier's service (`GroundAdvantage`, …); `None`: the carrier's cheapest.
    pub service: Option<String>,
    /// The `from_address` of every shipment: `{"id": "adr_…"}` or the address's fields
    /// (see [`parse_from_address`]).
    pub from_address: Value,
    /// Ounces one unit weighs: a parcel weighs the order's units times this.
    pub unit_weight_oz: u32,
}

/// Reads the warehouse's address as the settings give it: an EasyPost address id (`adr_…`,
/// an address saved once at EasyPost), or a JSON object of EasyPost's address fields, which
/// needs at least `street1`, `city`, `zip` and `country`.
pub fn parse_from_address(raw: &str) -> Result<Value, String> {
    let raw = raw.trim();
    if raw.starts_with("adr_") {
        return Ok(serde_json::json!({ "id": raw }));
    }
    let value: Value = serde_json::from_str(raw)
        .map_err(|e| format!("neither an address id (adr_…) nor a JSON object: {e}"))?;
    let Some(fields) = value.as_object() else {
        return Err("the address must be a JSON object or an address id (adr_…)".to_owned());
    };
    for required in ["street1", "city", "zip", "country"] {
        if !fields
            .get(required)
            .and_then(Value::as_str)
            .is_some_and(|v| !v.trim().is_empty())
        {
            return Err(format!("the address needs a {required:?}"));
        }
    }
    Ok(value)
}

/// One cheap authenticated call (`GET /v2/shipments?page_size=1`), for start-up:
/// `Misconfigured` when EasyPost refuses the key (401, 403), `Unavailable` when it cannot say.
pub async fn check_key(config: &EasyPostConfig) -> Result<(), GatewayError> {
    let client = Client::new(config).map_err(|e| GatewayError::Misconfigured(e.to_string()))?;
    client.check().await
}

impl Client {
    /// [`check_key`] with this client (its answer noted in its health).
    pub(crate) async fn check(&self) -> Result<(), GatewayError> {
        let client = self;
        let request = client
            .request(reqwest::Method::GET, "/shipments")
            .query(&[("page_size", "1")]);
        match client.send::<Value>(request).await {
            Ok(_) => Ok(()),
            Err(refused @ CallError::Refused { status, .. })
                if matches!(status.as_u16(), 401 | 403) =>
            {
                Err(client.classify(refused))
            }
            Err(e) => Err(GatewayError::Unavailable(client.classify(e).to_string())),
        }
    }
}

/// The gateway could not be built from its settings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EasyPostConfigError {
    #[error("carrier base URL {0:?} must start with http:// or https://")]
    BaseUrl(String),
    #[error("carrier base URL {0:?} needs HTTPS: build with the `rustls` feature")]
    NoTls(String),
    #[error("carrier HTTP client: {0}")]
    Client(String),
    #[error("--shipping easypost needs {0}")]
    Missing(&'static str),
}

/// EasyPost's error body: `{"error": {"code": …, "message": …, "errors": [...]}}`, where each
/// of `errors` is a field error object or a plain string.
#[derive(Debug, Deserialize)]
struct ErrorBody {
    error: ApiError,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub(crate) struct ApiError {
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    message: Option<Value>,
    #[serde(default)]
    errors: Vec<Value>,
}

impl ApiError {
    /// `code: message (field: message; …)`, whatever shapes EasyPost sent them in.
    fn describe(&self) -> String {
        let text = |v: &Value| match v {
            Value::String(s) => s.clone(),
            Value::Object(o) => match (o.get("field"), o.get("message")) {
                (Some(Value::String(f)), Some(Value::String(m))) => format!("{f}: {m}"),
                (_, Some(Value::String(m))) => m.clone(),
                _ => v.to_string(),
            },
            other => other.to_string(),
        };
        let mut out = self.code.clone().unwrap_or_else(|| "no code".to_owned());
        out.push_str(": ");
        out.push_str(
            &self
                .message
                .as_ref()
                .map_or_else(|| "no message".to_owned(), text),
        );
        if !self.errors.is_empty() {
            let details: Vec<String> = self.errors.iter().map(text).collect();
            out.push_str(&format!(" ({})", details.join("; ")));
        }
        out
    }
}

/// A call that did not give a 2xx answer.
#[derive(Debug, Clone)]
pub(crate) enum CallError {
    /// No answer (timeout, connection), or one that could not be read: the outcome is unknown.
    NoAnswer(GatewayError),
    /// EasyPost answered with an error status.
    Refused { status: StatusCode, error: ApiError },
}

impl CallError {
    /// Whether EasyPost answered with a refusal a retry cannot change (validation, an address,
    /// a state: 400, 422 and the like), rather than an outage or an operator's fault.
    pub(crate) fn is_final_refusal(&self) -> bool {
        match self {
            CallError::Refused { status, .. } => {
                status.is_client_error()
                    && !matches!(
                        status.as_u16(),
                        401 | 402 | 403 | 404 | 408 | 409 | 425 | 429
                    )
            }
            CallError::NoAnswer(_) => false,
        }
    }
}

/// The HTTP side shared by the gateway's calls (`Debug` shows the key redacted, as
/// [`SecretKey`] prints it).
#[derive(Clone, Debug)]
pub(crate) struct Client {
    http: reqwest::Client,
    base_url: String,
    api_key: SecretKey,
    pub(crate) health: Arc<ProviderHealth>,
}

impl Client {
    pub(crate) fn new(config: &EasyPostConfig) -> Result<Client, EasyPostConfigError> {
        if config.api_key.expose().is_empty() {
            return Err(EasyPostConfigError::Missing(
                "--easypost-key (FULFILLMENT_EASYPOST_KEY)",
            ));
        }
        if config.carrier.trim().is_empty() {
            return Err(EasyPostConfigError::Missing(
                "--easypost-carrier (FULFILLMENT_EASYPOST_CARRIER)",
            ));
        }
        let (http, base_url) =
            http::client_for(&config.base_url, config.timeout).map_err(|p| match p {
                BaseUrlProblem::Scheme(url) => EasyPostConfigError::BaseUrl(url),
                BaseUrlProblem::NoTls(url) => EasyPostConfigError::NoTls(url),
                BaseUrlProblem::Client(e) => EasyPostConfigError::Client(e),
            })?;
        Ok(Client {
            http,
            base_url,
            api_key: config.api_key.clone(),
            health: Arc::new(ProviderHealth::new("carrier")),
        })
    }

    /// A request to `/v2{path}`, authenticated as EasyPost documents: the key as the Basic
    /// user name, no password.
    pub(crate) fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}/v2{path}", self.base_url))
            .basic_auth(self.api_key.expose(), None::<&str>)
    }

    /// Sends the request and decodes a 2xx answer's body.
    pub(crate) async fn send<T: serde::de::DeserializeOwned>(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<T, CallError> {
        let response = request.send().await.map_err(|e| self.no_answer(&e))?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(|e| self.no_answer(&e))?;
        if status.is_success() {
            self.health.note::<()>(&Ok(()));
            return serde_json::from_slice(&bytes).map_err(|e| {
                CallError::NoAnswer(GatewayError::Unavailable(format!(
                    "carrier answered {status} with an unreadable body: {e}"
                )))
            });
        }
        let error = serde_json::from_slice::<ErrorBody>(&bytes)
            .map(|b| b.error)
            .unwrap_or_default();
        let refused = CallError::Refused { status, error };
        self.health.note::<()>(&Err(self.classify(refused.clone())));
        Err(refused)
    }

    fn no_answer(&self, e: &reqwest::Error) -> CallError {
        let said = http::no_answer("carrier (EasyPost)", e, &self.api_key);
        CallError::NoAnswer(GatewayError::Unavailable(said))
    }

    fn redact(&self, message: &str) -> String {
        http::redact(message, &self.api_key)
    }

    /// A failed call as the port's error. Address and validation refusals are final
    /// (`Rejected`, with EasyPost's reasons); a key EasyPost refuses (401, 403) or an account
    /// it cannot bill (402) is the operator's to fix, so `Misconfigured` (retried, `/readyz`
    /// says so, and the message says what to fix); 404 on a shipment this gateway made means
    /// another key (test and production keys see different objects), likewise; the rest (408,
    /// 409, 429, 5xx) is an outage, `Unavailable`.
    pub(crate) fn classify(&self, failure: CallError) -> GatewayError {
        let (status, error) = match failure {
            CallError::NoAnswer(e) => return e,
            CallError::Refused { status, error } => (status, error),
        };
        let said = self.redact(&error.describe());
        if (CallError::Refused { status, error }).is_final_refusal() {
            return GatewayError::Rejected(format!("carrier refused ({status}): {said}"));
        }
        let message = match status.as_u16() {
            401 | 403 => format!(
                "EasyPost refused the API key ({status}: {said}): check --easypost-key \
                 (FULFILLMENT_EASYPOST_KEY)"
            ),
            402 => format!(
                "EasyPost cannot bill the account for postage ({status}: {said}): add funds or a \
                 payment method"
            ),
            404 => format!(
                "EasyPost does not know this gateway's shipment ({status}: {said}): was \
                 --easypost-key changed between a test and a production key?"
            ),
            _ => {
                return GatewayError::Unavailable(format!(
                    "carrier unavailable ({status}): {said}"
                ));
            }
        };
        GatewayError::Misconfigured(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(base_url: &str) -> EasyPostConfig {
        EasyPostConfig {
            base_url: base_url.to_owned(),
            api_key: SecretKey::new("EZTK_hush"),
            timeout: Duration::from_secs(1),
            carrier: "USPS".to_owned(),
            service: None,
            from_address: serde_json::json!({"id": "adr_1"}),
            unit_weight_oz: 16,
        }
    }

    #[test]
    fn debug_never_shows_the_key() {
        let config = config("http://127.0.0.1:1");
        assert!(!format!("{config:?}").contains("hush"));
        let client = Client::new(&config).expect("client");
        assert!(!format!("{client:?}").contains("hush"));
    }

    #[test]
    fn settings_need_a_key_a_carrier_and_a_url_scheme() {
        let mut c = config("http://127.0.0.1:1");
        c.api_key = SecretKey::new("");
        assert!(
            matches!(Client::new(&c), Err(EasyPostConfigError::Missing(m)) if m.contains("--easypost-key"))
        );
        let mut c = config("http://127.0.0.1:1");
        c.carrier = " ".to_owned();
        assert!(
            matches!(Client::new(&c), Err(EasyPostConfigError::Missing(m)) if m.contains("--easypost-carrier"))
        );
        assert!(matches!(
            Client::new(&config("127.0.0.1:1")),
            Err(EasyPostConfigError::BaseUrl(_))
        ));
        let built = Client::new(&config(EASYPOST_API));
        assert_eq!(built.is_ok(), cfg!(feature = "rustls"));
    }

    #[test]
    fn the_from_address_is_an_id_or_an_object_with_the_fields_rates_need() {
        assert_eq!(
            parse_from_address(" adr_123 ").unwrap(),
            serde_json::json!({"id": "adr_123"})
        );
        let full = r#"{"name":"Shop","street1":"1 Main St","city":"Boston","state":"MA","zip":"02110","country":"US"}"#;
        assert_eq!(parse_from_address(full).unwrap()["zip"], "02110");
        let e = parse_from_address(r#"{"street1":"1 Main St","city":"Boston","country":"US"}"#);
        assert!(e.unwrap_err().contains("zip"));
        assert!(parse_from_address("warehouse").is_err());
        assert!(parse_from_address("[1]").is_err());
    }

    #[test]
    fn statuses_classify_as_the_port_expects() {
        let client = Client::new(&config("http://127.0.0.1:1")).expect("client");
        let at = |status: u16| {
            let error = ApiError {
                code: Some("SOME.CODE".to_owned()),
                message: Some(Value::String("key EZTK_hush".to_owned())),
                errors: vec![
                    serde_json::json!({"field": "street1", "message": "House number is missing"}),
                    Value::String("plain".to_owned()),
                ],
            };
            let status = StatusCode::from_u16(status).unwrap();
            client.classify(CallError::Refused { status, error })
        };
        for status in [400, 422] {
            let e = at(status);
            assert!(
                matches!(&e, GatewayError::Rejected(m) if m.contains("street1: House number is missing; plain")),
                "{e:?}"
            );
        }
        for status in [401, 403] {
            let e = at(status);
            assert!(matches!(e, GatewayError::Misconfigured(_)), "{status}");
            assert!(e.is_transient(), "{status}");
            assert!(e.to_string().contains("API key"), "{e}");
        }
        for status in [402, 404] {
            assert!(
                matches!(at(status), GatewayError::Misconfigured(_)),
                "{status}"
            );
        }
        for status in [408, 409, 429, 500, 502, 503, 504] {
            assert!(
                matches!(at(status), GatewayError::Unavailable(_)),
                "{status}"
            );
        }
        assert!(!at(401).to_string().contains("hush"));
        assert!(!at(422).to_string().contains("hush"));
    }
}
