//! A Stripe-compatible payment provider over HTTP: the `PaymentGateway` port on Stripe's
//! PaymentIntents and Refunds APIs, every write under an `Idempotency-Key` so a step that runs
//! twice charges (or refunds) once. `payments.rs` holds the gateway, this module its settings
//! and the HTTP plumbing shared by its calls: authentication, timeouts, error classification.
//!
//! Plain `http://` works out of the box (test servers, a local proxy); the real
//! `https://api.stripe.com` needs the crate's `rustls` feature.

mod payments;

pub use payments::StripePayments;

pub use crate::http::ProviderHealth;
use crate::http::{self, BaseUrlProblem};
use reqwest::StatusCode;
use serde::Deserialize;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use store::error::GatewayError;

/// Stripe's API, for [`StripeConfig::base_url`].
pub const STRIPE_API: &str = "https://api.stripe.com";

/// The API version the gateway is written against, sent with every call so that a change of
/// the account's default version cannot change what a charge does.
pub const STRIPE_VERSION: &str = "2024-06-20";

/// An API secret key. Never printed: `Debug` shows only that one is set.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretKey(String);

impl SecretKey {
    pub fn new(key: impl Into<String>) -> SecretKey {
        SecretKey(key.into())
    }

    /// The key itself, for the `Authorization` header only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretKey(<redacted>)")
    }
}

/// Where the provider is and how long to wait for it.
#[derive(Debug, Clone)]
pub struct StripeConfig {
    /// Scheme, host and port, without a trailing `/v1` (e.g. [`STRIPE_API`]).
    pub base_url: String,
    pub secret_key: SecretKey,
    /// For a whole call (connect, send, answer); a call that takes longer is `Unavailable`.
    pub timeout: Duration,
    /// Put before every idempotency key sent and written on every object made (as
    /// `metadata[key_prefix]`), and required of every object found or listed, so that two
    /// services on one Stripe account never share a key nor refund each other's payments.
    /// Empty: the keys are the saga's own (`charge:{order}`), as before the setting existed;
    /// changing it while orders run would let a retried charge go under a new key.
    pub key_prefix: String,
}

/// The gateway could not be built from its settings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StripeConfigError {
    #[error("payment provider base URL {0:?} must start with http:// or https://")]
    BaseUrl(String),
    #[error("payment provider base URL {0:?} needs HTTPS: build with the `rustls` feature")]
    NoTls(String),
    #[error("payment provider HTTP client: {0}")]
    Client(String),
    #[error("idempotency key prefix {0:?}: at most 64 letters, digits and '-', '_', ':', '.'")]
    KeyPrefix(String),
}

/// Stripe's error body: `{"error": {"type": …, "code": …, "message": …}}`.
#[derive(Debug, Deserialize)]
struct ErrorBody {
    error: ApiError,
}

#[derive(Debug, Default, Deserialize)]
struct ApiError {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    code: Option<String>,
    /// A card decline's reason (`insufficient_funds`, `do_not_honor`, …).
    #[serde(default)]
    decline_code: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

/// A call's answer: the decoded body of a 2xx, or Stripe's error with its status.
enum Answer<T> {
    Ok { body: T, replayed: bool },
    Failed { status: StatusCode, error: ApiError },
}

/// The HTTP side shared by the gateway's calls.
#[derive(Clone)]
struct Client {
    http: reqwest::Client,
    base_url: String,
    secret_key: SecretKey,
    key_prefix: String,
    health: Arc<ProviderHealth>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("base_url", &self.base_url)
            .field("secret_key", &self.secret_key)
            .field("key_prefix", &self.key_prefix)
            .finish()
    }
}

impl Client {
    fn new(config: StripeConfig) -> Result<Client, StripeConfigError> {
        let (http, base_url) =
            http::client_for(&config.base_url, config.timeout).map_err(|p| match p {
                BaseUrlProblem::Scheme(url) => StripeConfigError::BaseUrl(url),
                BaseUrlProblem::NoTls(url) => StripeConfigError::NoTls(url),
                BaseUrlProblem::Client(e) => StripeConfigError::Client(e),
            })?;
        if !config
            .key_prefix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_:.".contains(&b))
            || config.key_prefix.len() > 64
        {
            return Err(StripeConfigError::KeyPrefix(config.key_prefix));
        }
        Ok(Client {
            http,
            base_url,
            secret_key: config.secret_key,
            key_prefix: config.key_prefix,
            health: Arc::new(ProviderHealth::new("payment provider")),
        })
    }

    fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.http
            .get(format!("{}{path}", self.base_url))
            .bearer_auth(self.secret_key.expose())
            .header("Stripe-Version", STRIPE_VERSION)
    }

    fn post(&self, path: &str, idempotency_key: &str) -> reqwest::RequestBuilder {
        self.http
            .post(format!("{}{path}", self.base_url))
            .bearer_auth(self.secret_key.expose())
            .header("Stripe-Version", STRIPE_VERSION)
            .header(
                "Idempotency-Key",
                format!("{}{idempotency_key}", self.key_prefix),
            )
    }

    /// Whether an object's metadata says this service made it: its `key_prefix` is ours
    /// (absent for the empty prefix).
    fn is_ours(&self, metadata: &std::collections::HashMap<String, String>) -> bool {
        metadata.get("key_prefix").map(String::as_str).unwrap_or("") == self.key_prefix
    }

    /// `metadata[key_prefix]` for the objects this service makes, when it has a prefix.
    fn prefix_metadata(&self) -> Option<(&'static str, &str)> {
        (!self.key_prefix.is_empty()).then_some(("metadata[key_prefix]", self.key_prefix.as_str()))
    }

    /// A call that checks the key and the URL and changes nothing (`GET /v1/balance`): the
    /// start-up check and readiness's probe.
    async fn check(&self) -> Result<(), GatewayError> {
        match self
            .send::<serde_json::Value>(self.get("/v1/balance"))
            .await?
        {
            Answer::Ok { .. } => Ok(()),
            Answer::Failed { status, error } => Err(self.classify(status, &error)),
        }
    }

    /// Sends the request and reads the answer. No answer in time, a broken connection or an
    /// unreadable 2xx is `Unavailable`: the outcome is unknown, a retry with the same key is safe.
    async fn send<T: serde::de::DeserializeOwned>(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<Answer<T>, GatewayError> {
        let answer = self.exchange(request).await;
        match &answer {
            Ok(Answer::Failed { status, error }) => {
                self.health.note::<()>(&Err(self.classify(*status, error)))
            }
            other => self.health.note(other),
        }
        answer
    }

    async fn exchange<T: serde::de::DeserializeOwned>(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<Answer<T>, GatewayError> {
        let response = request.send().await.map_err(|e| self.unavailable(&e))?;
        let status = response.status();
        let replayed = response
            .headers()
            .get("Idempotent-Replayed")
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"true"));
        let bytes = response.bytes().await.map_err(|e| self.unavailable(&e))?;
        if status.is_success() {
            let body = serde_json::from_slice(&bytes).map_err(|e| {
                GatewayError::Unavailable(format!("payment provider answered {status}: {e}"))
            })?;
            return Ok(Answer::Ok { body, replayed });
        }
        // No Stripe error body: whatever answered is not Stripe's API (a wrong URL, a proxy's
        // page); `classify` tells that from Stripe's own refusals by the empty `type`.
        let error = serde_json::from_slice::<ErrorBody>(&bytes)
            .map(|b| b.error)
            .unwrap_or_default();
        Ok(Answer::Failed { status, error })
    }

    fn unavailable(&self, e: &reqwest::Error) -> GatewayError {
        GatewayError::Unavailable(http::no_answer("payment provider", e, &self.secret_key))
    }

    /// A provider's message may quote the key it was sent (Stripe quotes part of a wrong one).
    fn redact(&self, message: &str) -> String {
        http::redact(message, &self.secret_key)
    }

    /// Stripe's error as the port's, by its error `type` (Stripe's API reference, "Errors"):
    /// - `card_error` (402) is the customer's bank saying no: `Rejected`, with the decline code;
    /// - 401 and 403 (a revoked or restricted key), and any error answer that is not Stripe's
    ///   (no Stripe error body: a wrong URL, a proxy's page) are the operator's:
    ///   `Misconfigured`, retried until fixed, never a decline;
    /// - 409 (another request with this key still runs), 429 and 5xx are `Unavailable`;
    /// - `idempotency_error` is `KeyReused`;
    /// - any other `invalid_request_error` (an amount under the minimum, an unknown object) is
    ///   `Invalid`: final, and not a decline.
    fn classify(&self, status: StatusCode, error: &ApiError) -> GatewayError {
        let message = self.redact(&format!(
            "{status}: {}",
            error.message.as_deref().unwrap_or("no message")
        ));
        match status.as_u16() {
            409 | 429 | 500..=599 => GatewayError::Unavailable(message),
            401 | 403 => GatewayError::Misconfigured(format!(
                "the payment provider refused the API key ({message}); check --stripe-key"
            )),
            404 if error
                .message
                .as_deref()
                .is_some_and(|m| m.starts_with("Unrecognized request URL")) =>
            {
                GatewayError::Misconfigured(format!(
                    "{} has no such Stripe endpoint ({message}); check --stripe-url",
                    self.base_url
                ))
            }
            _ if error.kind.is_empty() => GatewayError::Misconfigured(format!(
                "{} does not answer as Stripe's API does ({status}, no Stripe error); check \
                 --stripe-url",
                self.base_url
            )),
            _ if error.kind == "card_error" => {
                let reason = error
                    .decline_code
                    .as_deref()
                    .or(error.code.as_deref())
                    .unwrap_or("declined");
                GatewayError::Rejected(format!("{reason}: {message}"))
            }
            _ if error.kind == "idempotency_error" => GatewayError::KeyReused(message),
            _ => GatewayError::Invalid(match &error.code {
                Some(code) => format!("{code}: {message}"),
                None => message,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(base_url: &str) -> StripeConfig {
        StripeConfig {
            base_url: base_url.to_owned(),
            secret_key: SecretKey::new("sk_test_hush"),
            timeout: Duration::from_secs(1),
            key_prefix: String::new(),
        }
    }

    #[test]
    fn debug_never_shows_the_key() {
        let config = config("http://127.0.0.1:1");
        assert!(!format!("{config:?}").contains("hush"));
        let client = Client::new(config).expect("client");
        assert!(!format!("{client:?}").contains("hush"));
    }

    #[test]
    fn base_url_needs_a_scheme_and_loses_its_trailing_slash() {
        assert!(matches!(
            Client::new(config("127.0.0.1:1")),
            Err(StripeConfigError::BaseUrl(_))
        ));
        let client = Client::new(config("http://127.0.0.1:1/")).expect("client");
        assert_eq!(client.base_url, "http://127.0.0.1:1");
    }

    #[test]
    fn https_needs_the_rustls_feature() {
        let built = Client::new(config(STRIPE_API));
        if cfg!(feature = "rustls") {
            assert!(built.is_ok());
        } else {
            assert!(matches!(built, Err(StripeConfigError::NoTls(_))));
        }
    }

    #[test]
    fn answers_classify_by_stripe_error_type() {
        let client = Client::new(config("http://127.0.0.1:1")).expect("client");
        let error = |kind: &str, code: Option<&str>| ApiError {
            kind: kind.to_owned(),
            code: code.map(str::to_owned),
            decline_code: None,
            message: Some("the key sk_test_hush".to_owned()),
        };
        let at = |status: u16, kind: &str, code: Option<&str>| {
            client.classify(StatusCode::from_u16(status).unwrap(), &error(kind, code))
        };
        assert!(matches!(
            at(402, "card_error", Some("card_declined")),
            GatewayError::Rejected(ref m) if m.starts_with("card_declined")
        ));
        assert!(matches!(
            at(400, "idempotency_error", None),
            GatewayError::KeyReused(_)
        ));
        // An amount under Stripe's minimum: final, but no decline.
        assert!(matches!(
            at(400, "invalid_request_error", Some("amount_too_small")),
            GatewayError::Invalid(ref m) if m.starts_with("amount_too_small")
        ));
        assert!(matches!(
            at(404, "invalid_request_error", Some("resource_missing")),
            GatewayError::Invalid(_)
        ));
        for status in [401, 403] {
            let e = at(status, "invalid_request_error", None);
            assert!(matches!(e, GatewayError::Misconfigured(_)), "{status}");
            assert!(e.is_transient(), "{status}");
            assert!(!e.to_string().contains("hush"), "{e}");
        }
        // A wrong URL: whatever answers is no Stripe, or Stripe knows no such endpoint.
        assert!(matches!(at(404, "", None), GatewayError::Misconfigured(_)));
        let unrecognized = ApiError {
            kind: "invalid_request_error".to_owned(),
            message: Some("Unrecognized request URL (POST: /v2/payment_intents)".to_owned()),
            ..ApiError::default()
        };
        assert!(matches!(
            client.classify(StatusCode::NOT_FOUND, &unrecognized),
            GatewayError::Misconfigured(_)
        ));
        for status in [409, 429, 500, 502, 503] {
            assert!(
                matches!(at(status, "api_error", None), GatewayError::Unavailable(_)),
                "{status}"
            );
        }
    }
}
