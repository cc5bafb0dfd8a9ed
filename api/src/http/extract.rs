//! Extractors whose every rejection is problem+json: a JSON body read as a `serde_json::Value`
//! (typed validation happens by hand, so a wrong type names its field), path parameters and
//! query strings.

use super::problem::{FieldError, Problem, ProblemKind};
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::{StatusCode, header, request::Parts};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// A JSON request body, parsed but not yet validated.
///
/// 415 unless the content type is `application/json` (or `application/*+json`), 413 above the
/// body limit, 400 when it is not JSON.
pub struct JsonBody(pub Value);

fn is_json(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = Problem;

    async fn from_request(req: Request, state: &S) -> Result<Self, Problem> {
        let content_type = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if !is_json(content_type) {
            return Err(Problem::new(
                ProblemKind::UnsupportedMediaType,
                "the body must be JSON: send `Content-Type: application/json`",
            ));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            match rejection.status() {
                StatusCode::PAYLOAD_TOO_LARGE => Problem::new(
                    ProblemKind::PayloadTooLarge,
                    "the request body is larger than allowed",
                ),
                _ => Problem::new(
                    ProblemKind::InvalidRequest,
                    "the request body could not be read",
                ),
            }
        })?;
        serde_json::from_slice(&bytes).map(JsonBody).map_err(|e| {
            Problem::new(
                ProblemKind::MalformedJson,
                format!("the body is not valid JSON: {e}"),
            )
        })
    }
}

/// The one path parameter of a route, as text (validated by the handler).
pub struct PathParam(pub String);

impl<S: Send + Sync> FromRequestParts<S> for PathParam {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Problem> {
        Path::<String>::from_request_parts(parts, state)
            .await
            .map(|Path(p)| PathParam(p))
            .map_err(|_| Problem::new(ProblemKind::NotFound, "no such resource"))
    }
}

/// A query string deserialized into `T`; 400 naming the problem when it does not fit.
pub struct QueryParams<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for QueryParams<T> {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Problem> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(q)| QueryParams(q))
            .map_err(|e| {
                let mut problem =
                    Problem::new(ProblemKind::InvalidRequest, "the query string is not valid");
                problem.errors = Some(vec![FieldError::new("query", e.body_text())]);
                problem
            })
    }
}

#[cfg(test)]
mod tests {
    use super::is_json;

    #[test]
    fn json_media_types_are_recognised() {
        assert!(is_json("application/json"));
        assert!(is_json("Application/JSON; charset=utf-8"));
        assert!(is_json("application/merge-patch+json"));
        assert!(!is_json("text/plain"));
        assert!(!is_json(""));
        assert!(!is_json("application/jsonx"));
    }
}
