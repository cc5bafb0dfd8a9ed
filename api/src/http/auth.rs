//! Operator authentication: `Authorization: Bearer <token>` compared in constant time with the
//! configured operator token, and the operator's name from `X-Operator`. Nothing else a request
//! carries (a query parameter, another scheme or header, anything a client holds such as its
//! order id or execution ARN) authorises it: the order endpoints need no credential at all.

use super::AppState;
use super::problem::{FieldError, Problem, ProblemKind};
use super::validate::operator_error;
use axum::extract::FromRequestParts;
use axum::http::{header, request::Parts};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The header naming who decided (kept on the approval record).
pub const OPERATOR_HEADER: &str = "x-operator";
pub const DEFAULT_OPERATOR: &str = "operator";

/// An authenticated operator request; `name` is from `X-Operator` (default `operator`).
#[derive(Debug, Clone)]
pub struct Operator {
    pub name: String,
}

/// Whether `presented` is the token. Both are hashed first, so the comparison takes the same
/// time whatever the presented token's length and content.
fn token_matches(presented: &[u8], token: &str) -> bool {
    let a = Sha256::digest(presented);
    let b = Sha256::digest(token.as_bytes());
    !token.is_empty() && bool::from(a.ct_eq(&b))
}

/// The bearer credential of the request's one `Authorization` header. Two of them are no
/// credential: which one counts would depend on the proxy in front (RFC 9110 allows only one).
fn bearer(parts: &Parts) -> Option<&[u8]> {
    let mut values = parts.headers.get_all(header::AUTHORIZATION).iter();
    let value = values.next()?.as_bytes();
    if values.next().is_some() {
        return None;
    }
    let (scheme, rest) = value.split_at_checked(7)?;
    scheme
        .eq_ignore_ascii_case(b"bearer ")
        .then(|| rest.trim_ascii())
}

impl FromRequestParts<AppState> for Operator {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Problem> {
        let authorized = match bearer(parts) {
            Some(presented) => token_matches(presented, state.operator_token.expose()),
            None => false,
        };
        if !authorized {
            return Err(Problem::new(
                ProblemKind::Unauthorized,
                "this endpoint needs `Authorization: Bearer <operator token>`",
            ));
        }
        let name = match parts.headers.get(OPERATOR_HEADER) {
            None => DEFAULT_OPERATOR.to_owned(),
            Some(v) => {
                let name = v.to_str().map_err(|_| "must be printable ASCII");
                match name.and_then(|s| operator_error(s).map_or(Ok(s), Err)) {
                    Ok(name) => name.to_owned(),
                    Err(message) => {
                        let mut p = Problem::new(
                            ProblemKind::InvalidRequest,
                            "the X-Operator header is not valid",
                        );
                        p.errors = Some(vec![FieldError::new("X-Operator", message)]);
                        return Err(p);
                    }
                }
            }
        };
        Ok(Operator { name })
    }
}

#[cfg(test)]
mod tests {
    use super::token_matches;

    #[test]
    fn only_the_exact_token_matches() {
        assert!(token_matches(b"s3cret", "s3cret"));
        assert!(!token_matches(b"s3cre", "s3cret"));
        assert!(!token_matches(b"s3cret ", "s3cret"));
        assert!(!token_matches(b"", ""));
    }
}
