//! The HTTP plumbing of the provider gateways: a client with one timeout for a whole call,
//! on a base URL whose scheme this build can speak, the texts that describe a call that got
//! no answer, with the secret it carried taken out, and what the provider's answers say about
//! our settings ([`ProviderHealth`]).

use crate::stripe::SecretKey;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use store::error::GatewayError;

/// Why a base URL cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BaseUrlProblem {
    /// Neither `http://` nor `https://`.
    Scheme(String),
    /// `https://` in a build without the `rustls` feature.
    NoTls(String),
    /// The HTTP client could not be built.
    Client(String),
}

/// A client whose every call (connect, send, answer) ends within `timeout`, and `base_url`
/// without its trailing `/`.
pub(crate) fn client_for(
    base_url: &str,
    timeout: Duration,
) -> Result<(reqwest::Client, String), BaseUrlProblem> {
    let base_url = base_url.trim_end_matches('/').to_owned();
    match base_url.split_once("://").map(|(scheme, _)| scheme) {
        Some("https") if !cfg!(feature = "rustls") => return Err(BaseUrlProblem::NoTls(base_url)),
        Some("http" | "https") => {}
        _ => return Err(BaseUrlProblem::Scheme(base_url)),
    }
    let http = reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout)
        .build()
        .map_err(|e| BaseUrlProblem::Client(e.to_string()))?;
    Ok((http, base_url))
}

/// What went wrong with a call that got no (readable) answer, for `who`, with `secret` taken
/// out of the text.
pub(crate) fn no_answer(who: &str, e: &reqwest::Error, secret: &SecretKey) -> String {
    let what = if e.is_timeout() {
        "no answer in time"
    } else if e.is_connect() {
        "cannot connect"
    } else {
        "request failed"
    };
    redact(&format!("{who}: {what}: {e}"), secret)
}

/// `message` without `secret` in it (a provider may quote the key it was sent).
pub(crate) fn redact(message: &str, secret: &SecretKey) -> String {
    match secret.expose() {
        "" => message.to_owned(),
        key => message.replace(key, "<redacted>"),
    }
}

/// What a provider's answers say about our settings: whether the last one refused our key or
/// URL (`/readyz` fails while it does) and how many have, for `/metrics`. Shared by every clone
/// of a gateway.
#[derive(Debug)]
pub struct ProviderHealth {
    /// Who, in the log lines (`payment provider`, `carrier`).
    who: &'static str,
    fault: Mutex<Option<String>>,
    misconfigured: AtomicU64,
}

impl ProviderHealth {
    pub fn new(who: &'static str) -> ProviderHealth {
        ProviderHealth {
            who,
            fault: Mutex::new(None),
            misconfigured: AtomicU64::new(0),
        }
    }

    /// Why the provider's last answer was the operator's fault, while it is.
    pub fn fault(&self) -> Option<String> {
        self.fault.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// `Err(Misconfigured)` while the provider refuses our settings. Healthy without asking
    /// while its last answer was fine; otherwise `check` (a call that changes nothing) asks
    /// again, so a fixed setting shows at once. A provider that does not answer is no ill health.
    pub(crate) async fn probe<F>(&self, check: F) -> Result<(), GatewayError>
    where
        F: std::future::Future<Output = Result<(), GatewayError>>,
    {
        if self.fault().is_none() {
            return Ok(());
        }
        match check.await {
            Err(e @ GatewayError::Misconfigured(_)) => Err(e),
            _ => Ok(()),
        }
    }

    /// Answers that refused our key or URL, since start.
    pub fn misconfigured_answers(&self) -> u64 {
        self.misconfigured.load(Ordering::Relaxed)
    }

    /// Notes an answer: any answer but `Misconfigured` and `Unavailable` (which may never have
    /// reached the provider) shows the key and the URL work. Logs each change once.
    pub(crate) fn note<T>(&self, result: &Result<T, GatewayError>) {
        let mut fault = self.fault.lock().unwrap_or_else(|e| e.into_inner());
        match result {
            Err(GatewayError::Misconfigured(why)) => {
                self.misconfigured.fetch_add(1, Ordering::Relaxed);
                if fault.is_none() {
                    tracing::error!(
                        reason = %why,
                        "the {} refuses this service's settings: its calls are retried (no \
                         order is cancelled for it) until an operator fixes them",
                        self.who
                    );
                }
                *fault = Some(why.clone());
            }
            Err(GatewayError::Unavailable(_)) => {}
            _ => {
                if fault.take().is_some() {
                    tracing::info!("the {} accepts this service's settings again", self.who);
                }
            }
        }
    }
}
