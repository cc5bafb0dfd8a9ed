//! The HTTP plumbing of the provider gateways: a client with one timeout for a whole call,
//! on a base URL whose scheme this build can speak, and the texts that describe a call that got
//! no answer, with the secret it carried taken out.

use crate::stripe::SecretKey;
use std::time::Duration;

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
