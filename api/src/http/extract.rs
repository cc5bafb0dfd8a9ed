//! Extractors whose every rejection is problem+json: a JSON body read as a `serde_json::Value`
//! (typed validation happens by hand, so a wrong type names its field), path parameters and
//! query strings.

use super::problem::{FieldError, Problem, ProblemKind};
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, Request};
use axum::http::{StatusCode, header, request::Parts};
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::time::Duration;

/// A JSON request body, parsed but not yet validated.
///
/// 415 unless the content type is `application/json` (or `application/*+json`), 413 above the
/// body limit (at once when `Content-Length` says so), 408 when it does not arrive within the
/// [`BodyLimits`]' read timeout, 400 when it is not JSON.
pub struct JsonBody(pub Value);

/// What a request body is held to, as the router hands it to [`JsonBody`] (a request
/// extension). The size is enforced while the body is read too (axum's `DefaultBodyLimit`); here
/// it refuses a body announced too large before any of it is waited for. The read timeout is the
/// body's own: the request timeout would cut a slow upload off too, but as the server's failure
/// (503, retry), while a client that does not send what it announced is told 408.
#[derive(Debug, Clone, Copy)]
pub struct BodyLimits {
    pub max_bytes: usize,
    pub read_timeout: Duration,
}

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
        let limits = req.extensions().get::<BodyLimits>().copied();
        let announced = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
        if let (Some(limits), Some(announced)) = (limits, announced)
            && announced > limits.max_bytes as u64
        {
            return Err(too_large());
        }
        let deadline = limits.map(|l| l.read_timeout);
        let read = Bytes::from_request(req, state);
        let read = match deadline {
            Some(deadline) => tokio::time::timeout(deadline, read).await.map_err(|_| {
                Problem::new(
                    ProblemKind::BodyTimeout,
                    format!(
                        "the request body did not arrive within {} s",
                        deadline.as_secs_f64()
                    ),
                )
            })?,
            None => read.await,
        };
        let bytes = read.map_err(|rejection| match rejection.status() {
            StatusCode::PAYLOAD_TOO_LARGE => too_large(),
            _ => Problem::new(
                ProblemKind::InvalidRequest,
                "the request body could not be read",
            ),
        })?;
        serde_json::from_slice(&bytes).map(JsonBody).map_err(|e| {
            Problem::new(
                ProblemKind::MalformedJson,
                format!("the body is not valid JSON: {e}"),
            )
        })
    }
}

fn too_large() -> Problem {
    Problem::new(
        ProblemKind::PayloadTooLarge,
        "the request body is larger than allowed",
    )
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
