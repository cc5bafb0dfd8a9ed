//! Console sessions: an operator signs in with an API key and gets a session cookie
//! (`HttpOnly`, `SameSite=Strict`, `Path=/console`, with an expiry; `Secure` with
//! `--console-secure-cookie`). The cookie holds a random secret; the store keeps its hash with the
//! hash of the key it was opened with ([`store::ConsoleSession`]), so every replica knows it,
//! signing out ends it everywhere, and a revoked key ends its sessions within the key cache's
//! few seconds (each request re-checks the key through the [`Authenticator`]).
//!
//! Every form carries a CSRF token derived from the session's secret (which the page's scripts
//! cannot read: the cookie is `HttpOnly`), checked on every POST, and a POST whose `Origin` is
//! another site's is refused before anything else.
//!
//! [`Authenticator`]: api::http::auth::Authenticator

use super::ConsoleState;
use api::http::AppState;
use api::keys::key_hash;
use axum::Extension;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::Utc;
use cookie::{Cookie, SameSite};
use sha2::{Digest, Sha256};
use std::time::Duration;
use store::{ConsoleSession, Role};
use subtle::ConstantTimeEq;

/// The session cookie's name.
pub const COOKIE: &str = "fulfillment_console";
/// How long a session lasts from sign-in (a working day); then the operator signs in again.
pub const SESSION_TTL: Duration = Duration::from_secs(8 * 3600);
/// The form field every console POST carries its CSRF token in.
pub const CSRF_FIELD: &str = "csrf";

/// A signed-in operator: who, and the session's CSRF token (put in every form).
#[derive(Debug, Clone)]
pub struct ConsoleOperator {
    pub name: String,
    pub csrf: String,
    session_hash: String,
}

impl ConsoleOperator {
    /// Whether `presented` is this session's CSRF token (compared in constant time).
    pub fn csrf_ok(&self, presented: Option<&str>) -> bool {
        presented.is_some_and(|p| bool::from(p.as_bytes().ct_eq(self.csrf.as_bytes())))
    }

    /// An operator for the pages' tests.
    #[cfg(test)]
    pub fn for_tests(name: &str) -> ConsoleOperator {
        ConsoleOperator {
            name: name.to_owned(),
            csrf: "token".to_owned(),
            session_hash: String::new(),
        }
    }

    /// The caller the JSON API's handlers see for this operator's actions.
    pub fn caller(&self) -> api::http::auth::Caller {
        api::http::auth::Caller {
            principal: self.name.clone(),
            role: Role::Operator,
            key_id: "console".to_owned(),
        }
    }
}

/// The CSRF token of the session whose secret is `secret`: one-way, so the token (which pages
/// show) does not give the cookie away.
fn csrf_of(secret: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(format!("csrf:{secret}").as_bytes()))
}

/// The session cookie's value in the request, if any.
fn presented(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(Cookie::split_parse)
        .filter_map(Result::ok)
        .find(|c| c.name() == COOKIE)
        .map(|c| c.value().to_owned())
}

/// Why a request has no session: where the operator is sent instead.
#[derive(Debug)]
pub struct SignInFirst;

impl IntoResponse for SignInFirst {
    fn into_response(self) -> Response {
        // The cookie (if any) is over: drop it, and go to the sign-in page.
        let mut response = Redirect::to("/console/sign-in").into_response();
        response
            .headers_mut()
            .append(header::SET_COOKIE, cleared().to_string().parse().unwrap());
        response
    }
}

impl FromRequestParts<AppState> for ConsoleOperator {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        let Some(secret) = presented(&parts.headers) else {
            return Err(SignInFirst.into_response());
        };
        let hash = key_hash(secret.as_bytes());
        let session = match state.auth.keys().session(&hash).await {
            Ok(Some(s)) if s.expires_at > Utc::now() => s,
            Ok(_) => return Err(SignInFirst.into_response()),
            Err(e) => return Err(super::layout::unavailable(&e)),
        };
        // The key it was opened with must still be an operator's, unrevoked.
        match state.auth.by_hash(&session.key_hash).await {
            Ok(Some(caller)) if caller.role == Role::Operator => Ok(ConsoleOperator {
                name: caller.principal,
                csrf: csrf_of(&secret),
                session_hash: hash,
            }),
            Ok(_) => Err(SignInFirst.into_response()),
            Err(e) => Err(super::layout::unavailable(&e)),
        }
    }
}

/// Refuses a POST another site's page sent (its `Origin` names another host than the request
/// went to). Browsers send `Origin` with every cross-site POST; a request without one is not a
/// browser's cross-site form, and still needs the CSRF token.
pub fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    let origin_host = origin
        .split_once("://")
        .map(|(_, rest)| rest.trim_end_matches('/'));
    matches!((origin_host, host), (Some(o), Some(h)) if o.eq_ignore_ascii_case(h))
}

/// The session cookie carrying `secret`.
fn session_cookie(secret: String, secure: bool) -> Cookie<'static> {
    Cookie::build((COOKIE, secret))
        .http_only(true)
        .same_site(SameSite::Strict)
        .path("/console")
        .secure(secure)
        .max_age(cookie::time::Duration::seconds(SESSION_TTL.as_secs() as i64))
        .build()
}

/// The header that removes the session cookie.
fn cleared() -> Cookie<'static> {
    let mut c = Cookie::build((COOKIE, "")).path("/console").build();
    c.make_removal();
    c
}

/// `POST /console/sign-in`'s form.
#[derive(Debug, serde::Deserialize)]
pub struct SignInForm {
    #[serde(default)]
    pub key: String,
}

/// `GET /console/sign-in`.
pub async fn sign_in_page() -> Response {
    super::layout::sign_in(None, StatusCode::OK)
}

/// `POST /console/sign-in`: an operator's key opens a session. A client's key, an unknown or a
/// revoked one is refused with the same words (and counts against the address's failed
/// authentications, like a bad bearer key).
pub async fn sign_in(
    State(state): State<AppState>,
    Extension(console): Extension<ConsoleState>,
    request: axum::extract::Request,
) -> Response {
    let (parts, body) = request.into_parts();
    if !same_origin(&parts.headers) {
        return super::layout::forbidden("this form was sent from another site");
    }
    let body = match axum::body::to_bytes(body, 4096).await {
        Ok(b) => b,
        Err(_) => {
            return super::layout::sign_in(Some("the form is too large"), StatusCode::BAD_REQUEST);
        }
    };
    let form: SignInForm = match serde_urlencoded::from_bytes(&body) {
        Ok(f) => f,
        Err(_) => {
            return super::layout::sign_in(
                Some("the form could not be read"),
                StatusCode::BAD_REQUEST,
            );
        }
    };
    let key = form.key.trim();
    if key.is_empty() {
        return super::layout::sign_in(
            Some("enter an operator API key"),
            StatusCode::UNPROCESSABLE_ENTITY,
        );
    }
    let caller = match state.auth.admit(&parts, key.as_bytes()).await {
        Ok(c) => c,
        Err(problem) if problem.status == 401 => {
            return super::layout::sign_in(
                Some("that key is not an operator's valid key"),
                StatusCode::UNAUTHORIZED,
            );
        }
        Err(problem) => {
            return super::layout::sign_in(
                Some(&problem.detail),
                StatusCode::from_u16(problem.status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE),
            );
        }
    };
    if caller.role != Role::Operator {
        return super::layout::sign_in(
            Some("that key is not an operator's valid key"),
            StatusCode::UNAUTHORIZED,
        );
    }
    let secret = URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>());
    let now = Utc::now();
    let session = ConsoleSession {
        session_hash: key_hash(secret.as_bytes()),
        key_hash: key_hash(key.as_bytes()),
        principal: caller.principal.clone(),
        created_at: now,
        expires_at: now + SESSION_TTL,
    };
    if let Err(e) = state.auth.keys().open_session(&session).await {
        return super::layout::unavailable(&e);
    }
    tracing::info!(operator = %caller.principal, "console session opened");
    let mut response = Redirect::to("/console").into_response();
    let cookie = session_cookie(secret, console.settings().secure_cookie);
    response
        .headers_mut()
        .append(header::SET_COOKIE, cookie.to_string().parse().unwrap());
    response
}

/// `POST /console/sign-out`: ends the session in the store (on every replica) and drops the
/// cookie.
pub async fn sign_out(
    State(state): State<AppState>,
    operator: ConsoleOperator,
    headers: HeaderMap,
    axum::Form(form): axum::Form<std::collections::HashMap<String, String>>,
) -> Response {
    if !same_origin(&headers) || !operator.csrf_ok(form.get(CSRF_FIELD).map(String::as_str)) {
        return super::layout::forbidden("this form's token is not this session's");
    }
    if let Err(e) = state
        .auth
        .keys()
        .close_session(&operator.session_hash)
        .await
    {
        return super::layout::unavailable(&e);
    }
    tracing::info!(operator = %operator.name, "console session closed");
    let mut response = Redirect::to("/console/sign-in").into_response();
    response
        .headers_mut()
        .append(header::SET_COOKIE, cleared().to_string().parse().unwrap());
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_cookie_is_http_only_same_site_strict_and_expires() {
        let text = session_cookie("s3cret".to_owned(), false).to_string();
        assert!(text.starts_with("fulfillment_console=s3cret"), "{text}");
        assert!(text.contains("HttpOnly"), "{text}");
        assert!(text.contains("SameSite=Strict"), "{text}");
        assert!(text.contains("Path=/console"), "{text}");
        assert!(text.contains("Max-Age=28800"), "{text}");
        assert!(!text.contains("Secure"), "{text}");
        assert!(
            session_cookie("s".to_owned(), true)
                .to_string()
                .contains("Secure")
        );
    }

    #[test]
    fn the_csrf_token_does_not_reveal_the_secret_and_differs_per_session() {
        let a = csrf_of("secret-a");
        assert_ne!(a, csrf_of("secret-b"));
        assert!(!a.contains("secret-a"));
        let op = ConsoleOperator {
            name: "ops".into(),
            csrf: a.clone(),
            session_hash: String::new(),
        };
        assert!(op.csrf_ok(Some(&a)));
        assert!(!op.csrf_ok(Some("x")));
        assert!(!op.csrf_ok(None));
    }

    #[test]
    fn a_post_from_another_origin_is_refused() {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, "localhost:8080".parse().unwrap());
        assert!(same_origin(&h));
        h.insert(header::ORIGIN, "http://localhost:8080".parse().unwrap());
        assert!(same_origin(&h));
        h.insert(header::ORIGIN, "https://evil.example".parse().unwrap());
        assert!(!same_origin(&h));
        h.insert(header::ORIGIN, "null".parse().unwrap());
        assert!(!same_origin(&h));
    }
}
