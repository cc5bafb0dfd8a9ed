//! Conditional GETs (RFC 9110 §13): a JSON answer carries a strong `ETag` (a hash of its bytes),
//! and a request whose `If-None-Match` names it is answered `304 Not Modified` with no body, so a
//! client polling a status that has not moved pays for neither the body nor its parsing.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use sha2::{Digest, Sha256};

/// The strong entity tag of `body`: the first 128 bits of its SHA-256, quoted.
pub fn etag_of(body: &[u8]) -> String {
    let digest = Sha256::digest(body);
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("\"{hex}\"")
}

/// Whether an `If-None-Match` value names `etag` (`*`, or a list of tags compared weakly: a
/// `W/` prefix is ignored, as §13.1.2 says for this header).
pub fn none_match(if_none_match: &str, etag: &str) -> bool {
    let etag = etag.trim_start_matches("W/");
    if_none_match
        .split(',')
        .map(str::trim)
        .any(|tag| tag == "*" || tag.trim_start_matches("W/") == etag)
}

/// `value` as JSON with its `ETag`, or `304` when the request's `If-None-Match` names it; with
/// `Retry-After` (seconds) when given: how long a poller should wait before asking again.
pub fn json(request: &HeaderMap, value: &impl Serialize, retry_after: Option<u64>) -> Response {
    let body = match serde_json::to_vec(value) {
        Ok(body) => body,
        Err(_) => return StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    };
    let etag = etag_of(&body);
    let not_modified = request
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| none_match(v, &etag));
    let mut response = if not_modified {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            body,
        )
            .into_response()
    };
    let headers = response.headers_mut();
    if let Ok(etag) = HeaderValue::from_str(&etag) {
        headers.insert(header::ETAG, etag);
    }
    // Cached copies must be revalidated: the status moves on by itself.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Some(seconds) = retry_after {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tag_is_stable_for_the_same_bytes_and_differs_for_others() {
        assert_eq!(etag_of(b"{}"), etag_of(b"{}"));
        assert_ne!(etag_of(b"{}"), etag_of(b"{ }"));
        assert_eq!(etag_of(b"{}").len(), 34);
    }

    #[test]
    fn if_none_match_names_the_tag_in_a_list_weakly_or_as_a_star() {
        let tag = etag_of(b"x");
        assert!(none_match(&tag, &tag));
        assert!(none_match(&format!("\"a\", W/{tag}"), &tag));
        assert!(none_match("*", &tag));
        assert!(!none_match("\"a\", \"b\"", &tag));
        assert!(!none_match("", &tag));
    }

    #[test]
    fn a_matching_request_is_answered_304_with_the_tag_and_no_body() {
        let value = json!({"status": "CHARGED"});
        let first = json(&HeaderMap::new(), &value, Some(1));
        assert_eq!(first.status(), StatusCode::OK);
        let etag = first.headers()[header::ETAG].clone();
        assert_eq!(first.headers()[header::RETRY_AFTER], "1");
        let mut request = HeaderMap::new();
        request.insert(header::IF_NONE_MATCH, etag.clone());
        let again = json(&request, &value, None);
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
        assert_eq!(again.headers()[header::ETAG], etag);
        assert!(again.headers().get(header::RETRY_AFTER).is_none());
        let moved = json(&request, &json!({"status": "COMPLETED"}), None);
        assert_eq!(moved.status(), StatusCode::OK);
    }
}
