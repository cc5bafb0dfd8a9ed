//! The engine's Step Functions endpoint: the AWS JSON 1.0 protocol (`POST /` with
//! `X-Amz-Target: AWSStepFunctions.<Operation>`) over the embedded [`Engine`], so the AWS CLI
//! and any AWS SDK can drive it. Requests are not authenticated (SigV4 headers are ignored).

mod aliases;
mod error;
mod ops;
mod versions;

pub use error::SfnError;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use engine::Engine;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::any::Any;
use std::time::Duration;
use tower::ServiceBuilder;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::sensitive_headers::SetSensitiveRequestHeadersLayer;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::{DefaultOnResponse, TraceLayer};
use tracing::{Instrument, Level};

/// The protocol's content type, for requests and answers.
pub const CONTENT_TYPE: &str = "application/x-amz-json-1.0";

/// The `X-Amz-Target` prefix of every Step Functions operation.
const TARGET_PREFIX: &str = "AWSStepFunctions.";

/// How the endpoint serves.
#[derive(Debug, Clone)]
pub struct SfnSettings {
    /// How long GetActivityTask waits for work before answering `{}` (AWS: 60 s).
    pub poll_wait: Duration,
    /// How long any other request may take; GetActivityTask always gets `poll_wait` plus 5 s.
    pub request_timeout: Duration,
    /// The largest request body (payloads are up to 256 KiB, JSON-escaped inside the body).
    pub max_body_bytes: usize,
}

impl Default for SfnSettings {
    fn default() -> Self {
        SfnSettings {
            poll_wait: Duration::from_secs(60),
            request_timeout: Duration::from_secs(30),
            max_body_bytes: 1024 * 1024,
        }
    }
}

#[derive(Clone)]
struct Endpoint {
    engine: Engine,
    poll_wait: Duration,
}

/// `POST /` dispatching on `X-Amz-Target`, with tracing, body limit, timeout and panic recovery;
/// every error is an AWS JSON error.
pub fn router(engine: Engine, settings: SfnSettings) -> Router {
    let timeout = settings
        .request_timeout
        .max(settings.poll_wait + Duration::from_secs(5));
    Router::new()
        .route("/", post(dispatch))
        .fallback(unknown_route)
        .with_state(Endpoint {
            engine,
            poll_wait: settings.poll_wait,
        })
        .layer(DefaultBodyLimit::max(settings.max_body_bytes))
        .layer(
            ServiceBuilder::new()
                .layer(SetSensitiveRequestHeadersLayer::new([
                    header::AUTHORIZATION,
                ]))
                .layer(
                    TraceLayer::new_for_http()
                        .on_response(DefaultOnResponse::new().level(Level::INFO)),
                )
                .layer(CatchPanicLayer::custom(panicked))
                .layer(TimeoutLayer::with_status_code(
                    StatusCode::SERVICE_UNAVAILABLE,
                    timeout,
                )),
        )
}

async fn dispatch(State(endpoint): State<Endpoint>, headers: HeaderMap, body: Bytes) -> Response {
    let target = headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let operation = target.strip_prefix(TARGET_PREFIX).unwrap_or("");
    let span = tracing::info_span!("sfn", operation);
    let (engine, wait) = (&endpoint.engine, endpoint.poll_wait);
    let answer = async {
        match operation {
            "CreateActivity" => answer(ops::create_activity(engine, parse(&body)?).await),
            "CreateStateMachine" => answer(ops::create_state_machine(engine, parse(&body)?).await),
            "DescribeStateMachine" => {
                answer(ops::describe_state_machine(engine, parse(&body)?).await)
            }
            "StartExecution" => answer(ops::start_execution(engine, parse(&body)?).await),
            "DescribeExecution" => answer(ops::describe_execution(engine, parse(&body)?).await),
            "ListExecutions" => answer(ops::list_executions(engine, parse(&body)?).await),
            "StopExecution" => answer(ops::stop_execution(engine, parse(&body)?).await),
            "RedriveExecution" => answer(ops::redrive_execution(engine, parse(&body)?).await),
            "GetExecutionHistory" => {
                answer(ops::get_execution_history(engine, parse(&body)?).await)
            }
            "GetActivityTask" => answer(ops::get_activity_task(engine, parse(&body)?, wait).await),
            "SendTaskSuccess" => answer(ops::send_task_success(engine, parse(&body)?).await),
            "SendTaskFailure" => answer(ops::send_task_failure(engine, parse(&body)?).await),
            "SendTaskHeartbeat" => answer(ops::send_task_heartbeat(engine, parse(&body)?).await),
            "UpdateStateMachine" => {
                answer(versions::update_state_machine(engine, parse(&body)?).await)
            }
            "PublishStateMachineVersion" => {
                answer(versions::publish_state_machine_version(engine, parse(&body)?).await)
            }
            "ListStateMachineVersions" => {
                answer(versions::list_state_machine_versions(engine, parse(&body)?).await)
            }
            "DeleteStateMachineVersion" => {
                answer(versions::delete_state_machine_version(engine, parse(&body)?).await)
            }
            "DescribeStateMachineForExecution" => {
                answer(versions::describe_state_machine_for_execution(engine, parse(&body)?).await)
            }
            "CreateStateMachineAlias" => {
                answer(aliases::create_state_machine_alias(engine, parse(&body)?).await)
            }
            "UpdateStateMachineAlias" => {
                answer(aliases::update_state_machine_alias(engine, parse(&body)?).await)
            }
            "DescribeStateMachineAlias" => {
                answer(aliases::describe_state_machine_alias(engine, parse(&body)?).await)
            }
            "ListStateMachineAliases" => {
                answer(aliases::list_state_machine_aliases(engine, parse(&body)?).await)
            }
            "DeleteStateMachineAlias" => {
                answer(aliases::delete_state_machine_alias(engine, parse(&body)?).await)
            }
            _ => Err(SfnError::unknown_operation(target)),
        }
    }
    .instrument(span)
    .await;
    answer.unwrap_or_else(IntoResponse::into_response)
}

/// A request body: a JSON object (an empty body counts as `{}`) whose members have the
/// modelled types; required members are checked by each operation.
fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, SfnError> {
    let body = if body.iter().all(u8::is_ascii_whitespace) {
        &b"{}"[..]
    } else {
        body
    };
    let value: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| SfnError::serialization(format!("the body is not JSON: {e}")))?;
    if !value.is_object() {
        return Err(SfnError::serialization("the body must be a JSON object"));
    }
    serde_json::from_value(value).map_err(|e| SfnError::serialization(e.to_string()))
}

fn answer<T: Serialize>(result: Result<T, SfnError>) -> Result<Response, SfnError> {
    let body =
        serde_json::to_string(&result?).map_err(|e| SfnError::internal("InternalError", &e))?;
    Ok((
        [(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE))],
        body,
    )
        .into_response())
}

async fn unknown_route() -> SfnError {
    SfnError::unknown_operation("")
}

fn panicked(panic: Box<dyn Any + Send + 'static>) -> Response {
    let message = telemetry::panic::message(panic.as_ref());
    SfnError::internal(
        "InternalError",
        &format_args!("handler panicked: {message}"),
    )
    .into_response()
}
