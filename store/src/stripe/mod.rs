//! A Stripe-compatible payment provider over HTTP: the `PaymentGateway` port on Stripe's
//! PaymentIntents and Refunds APIs, every write under an `Idempotency-Key` so a step that runs
//! twice charges (or refunds) once. `payments.rs` holds the gateway, this module its settings
//! and the HTTP plumbing shared by its calls: authentication, timeouts, error classification.
//!
//! Plain `http://` works out of the box (test servers, a local proxy); the real
//! `https://api.stripe.com` needs the crate's `rustls` feature.

mod payments;

pub use payments::StripePayments;

use crate::error::GatewayError;
use reqwest::StatusCode;
use serde::Deserialize;
use std::fmt;
use std::time::Duration;

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
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("base_url", &self.base_url)
            .field("secret_key", &self.secret_key)
            .finish()
    }
}

impl Client {
    fn new(config: StripeConfig) -> Result<Client, StripeConfigError> {
        let base_url = config.base_url.trim_end_matches('/').to_owned();
        if base_url.starts_with("https://") {
            if !cfg!(feature = "rustls") {
                return Err(StripeConfigError::NoTls(base_url));
            }
        } else if !base_url.starts_with("http://") {
            return Err(StripeConfigError::BaseUrl(base_url));
        }
        let http = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(config.timeout)
            .build()
            .map_err(|e| StripeConfigError::Client(e.to_string()))?;
        Ok(Client {
            http,
            base_url,
            secret_key: config.secret_key,
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
            .header("Idempotency-Key", idempotency_key)
    }

    /// Sends the request and reads the answer. No answer in time, a broken connection or an
    /// unreadable 2xx is `Unavailable`: the outcome is unknown, a retry with the same key is safe.
    async fn send<T: serde::de::DeserializeOwned>(
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
        let error = serde_json::from_slice::<ErrorBody>(&bytes)
            .map(|b| b.error)
            .unwrap_or_default();
        Ok(Answer::Failed { status, error })
    }

    fn unavailable(&self, e: &reqwest::Error) -> GatewayError {
        let what = if e.is_timeout() {
            "no answer in time"
        } else if e.is_connect() {
            "cannot connect"
        } else {
            "request failed"
        };
        GatewayError::Unavailable(self.redact(&format!("payment provider: {what}: {e}")))
    }

    /// A provider's message may quote the key it was sent (Stripe quotes part of a wrong one).
    fn redact(&self, message: &str) -> String {
        let key = self.secret_key.expose();
        if key.is_empty() {
            message.to_owned()
        } else {
            message.replace(key, "<redacted>")
        }
    }

    /// Stripe's error as the port's: declines and other refusals are final, a key used with
    /// other parameters is `KeyReused`, overload and server errors are transient.
    fn classify(&self, status: StatusCode, error: &ApiError) -> GatewayError {
        let message = self.redact(&format!(
            "{status}: {}",
            error.message.as_deref().unwrap_or("no message")
        ));
        match status.as_u16() {
            // 409: another request with this key is still running; its outcome is unknown.
            409 | 429 | 500..=599 => GatewayError::Unavailable(message),
            400 if error.kind == "idempotency_error" => GatewayError::KeyReused(message),
            // 402 is a decline (`card_error`); the rest are refusals a retry cannot change.
            _ => GatewayError::Rejected(message),
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
    fn statuses_classify_as_the_port_expects() {
        let client = Client::new(config("http://127.0.0.1:1")).expect("client");
        let error = |kind: &str| ApiError {
            kind: kind.to_owned(),
            code: None,
            message: Some("the key sk_test_hush".to_owned()),
        };
        let at = |status: u16, kind: &str| {
            client.classify(StatusCode::from_u16(status).unwrap(), &error(kind))
        };
        assert!(matches!(at(402, "card_error"), GatewayError::Rejected(_)));
        assert!(matches!(
            at(400, "idempotency_error"),
            GatewayError::KeyReused(_)
        ));
        assert!(matches!(
            at(400, "invalid_request_error"),
            GatewayError::Rejected(_)
        ));
        for status in [409, 429, 500, 502, 503] {
            assert!(at(status, "api_error").is_transient(), "{status}");
        }
        assert!(
            !at(401, "invalid_request_error")
                .to_string()
                .contains("hush")
        );
    }
}
