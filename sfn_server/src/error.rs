//! Step Functions' JSON error shape: HTTP 400 (500 for the service's own failures) with
//! `{"__type": name, "message": text}` and the name in `x-amzn-ErrorType`, as AWS SDKs parse it.

use super::CONTENT_TYPE;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use engine::EngineError;

/// An error answered in the AWS JSON protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SfnError {
    /// The AWS error code (`__type`), e.g. `ExecutionDoesNotExist`.
    pub name: &'static str,
    pub message: String,
    pub status: StatusCode,
}

impl SfnError {
    fn client(name: &'static str, message: impl Into<String>) -> Self {
        SfnError {
            name,
            message: message.into(),
            status: StatusCode::BAD_REQUEST,
        }
    }

    /// The body is not a JSON object, or a member has the wrong type.
    pub fn serialization(message: impl Into<String>) -> Self {
        Self::client("SerializationException", message)
    }

    /// A required member is missing, or a value is out of range.
    pub fn validation(message: impl Into<String>) -> Self {
        Self::client("ValidationException", message)
    }

    /// `X-Amz-Target` names no operation this endpoint implements.
    pub fn unknown_operation(target: &str) -> Self {
        Self::client(
            "UnknownOperationException",
            format!("unknown operation: '{target}'"),
        )
    }

    pub fn express_not_supported() -> Self {
        Self::client(
            "StateMachineTypeNotSupported",
            "only STANDARD state machines are supported",
        )
    }

    /// A failure of the service itself; the details are logged, never answered.
    pub fn internal(name: &'static str, detail: &dyn std::fmt::Display) -> Self {
        tracing::error!(error = %detail, "internal error");
        SfnError {
            name,
            message: "the service could not complete the request; it may be retried".to_owned(),
            status: StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl From<EngineError> for SfnError {
    fn from(e: EngineError) -> Self {
        let name = e.aws_name();
        match &e {
            EngineError::Unavailable(_) | EngineError::Internal(_) => SfnError::internal(name, &e),
            // AWS answers ConflictException with 409.
            EngineError::Conflict(_) => SfnError {
                status: StatusCode::CONFLICT,
                ..SfnError::client(name, e.message())
            },
            _ => SfnError::client(name, e.message()),
        }
    }
}

impl IntoResponse for SfnError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "__type": self.name, "message": self.message });
        let mut response = (self.status, body.to_string()).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
        headers.insert("x-amzn-errortype", HeaderValue::from_static(self.name));
        response
    }
}
