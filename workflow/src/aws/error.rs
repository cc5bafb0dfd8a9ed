//! The one place `aws-sdk-sfn` errors become [`WorkflowError`]s; no `SdkError` leaves the
//! adapter. Named Step Functions errors keep their meaning, anything that may work when tried
//! again later (throttling, 429, 5xx, timeouts, connections that fail or drop) is `Unavailable`,
//! the rest is `Other`.

use crate::port::WorkflowError;
use aws_sdk_sfn::config::http::HttpResponse;
use aws_sdk_sfn::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};

/// Error codes that say "too many requests, slow down" without a modelled error type: Step
/// Functions answers its API throttling with `ThrottlingException` (HTTP 400), which its model
/// does not declare; the others are AWS-wide spellings of the same thing.
const THROTTLING_CODES: [&str; 6] = [
    "ThrottlingException",
    "Throttling",
    "TooManyRequestsException",
    "RequestLimitExceeded",
    "RequestThrottled",
    "RequestThrottledException",
];

/// Maps the error of any Step Functions operation.
pub(crate) fn map_error<E>(err: SdkError<E, HttpResponse>) -> WorkflowError
where
    E: std::error::Error + Send + Sync + 'static,
    aws_sdk_sfn::Error: From<E>,
{
    match err {
        SdkError::ServiceError(context) => {
            let status = context.raw().status().as_u16();
            service_error(context.into_err().into(), status)
        }
        // No answer in time, no connection, or a connection dropped before a whole answer came:
        // the request may or may not have been acted on, and the same call may work later.
        SdkError::TimeoutError(_) | SdkError::ResponseError(_) => {
            WorkflowError::Unavailable(DisplayErrorContext(&err).to_string())
        }
        SdkError::DispatchFailure(ref failure) if !failure.is_user() => {
            WorkflowError::Unavailable(DisplayErrorContext(&err).to_string())
        }
        // A request that could not be built or sent as configured; `SdkError` is non-exhaustive.
        _ => WorkflowError::Other(DisplayErrorContext(&err).to_string()),
    }
}

/// Maps an error Step Functions answered with, `status` being the HTTP status of the answer.
fn service_error(e: aws_sdk_sfn::Error, status: u16) -> WorkflowError {
    use aws_sdk_sfn::Error as E;
    let message = match e.code() {
        Some(code) => format!("{code}: {}", e.message().unwrap_or("(no message)")),
        // A modelled error made without metadata (not one read from an answer).
        None => e.to_string(),
    };
    match e {
        // AWS answers `TaskDoesNotExist` for a token of a task it no longer has: dead, like a
        // closed or timed-out task's token.
        E::TaskTimedOut(_) | E::TaskDoesNotExist(_) => WorkflowError::TaskTimedOut(message),
        E::InvalidToken(_) => WorkflowError::InvalidToken(message),
        E::ExecutionDoesNotExist(_) => WorkflowError::ExecutionDoesNotExist(message),
        E::ExecutionAlreadyExists(_) => WorkflowError::ExecutionAlreadyExists(message),
        E::ExecutionNotRedrivable(_) => WorkflowError::NotRedrivable(message),
        // Too many pollers for now, or KMS throttling Step Functions on our behalf.
        E::ActivityWorkerLimitExceeded(_) | E::KmsThrottlingException(_) => {
            WorkflowError::Unavailable(message)
        }
        _ if status == 429 || status >= 500 => WorkflowError::Unavailable(message),
        // Throttling codes are not modelled (nor is ActivityWorkerLimitExceeded, for any
        // operation but GetActivityTask), so they come as unhandled errors.
        e if e.code().is_some_and(|c| {
            THROTTLING_CODES.contains(&c) || c == "ActivityWorkerLimitExceeded"
        }) =>
        {
            WorkflowError::Unavailable(message)
        }
        // Bad requests (invalid ARN, name, input or output; missing resources; limits): the same
        // call fails again. `aws_sdk_sfn::Error` is non-exhaustive.
        _ => WorkflowError::Other(message),
    }
}

/// The endpoint does not implement the operation (`UnknownOperationException`): an AWS
/// Step Functions look-alike, such as the embedded engine's endpoint, offers only some verbs.
pub(crate) fn is_unknown_operation<E: ProvideErrorMetadata>(
    err: &SdkError<E, HttpResponse>,
) -> bool {
    err.code() == Some("UnknownOperationException")
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_sfn::Client;
    use aws_sdk_sfn::config::retry::RetryConfig;
    use aws_sdk_sfn::operation::send_task_heartbeat::SendTaskHeartbeatError;
    use aws_sdk_sfn::operation::start_execution::StartExecutionError;
    use aws_sdk_sfn::types::error::{
        ExecutionAlreadyExists, InvalidToken, TaskDoesNotExist, TaskTimedOut,
    };
    use aws_smithy_mocks::{Rule, RuleMode, mock, mock_client};

    /// A client answering from `rules`, without retries: each test sees one answer's mapping.
    fn client(rules: &[&Rule]) -> Client {
        mock_client!(aws_sdk_sfn, RuleMode::MatchAny, rules, |c| c
            .retry_config(RetryConfig::disabled()))
    }

    /// The mapped error of one `operation` call (`call` on the client `c`) whose answer is
    /// HTTP `status` with `body`.
    macro_rules! answered {
        ($operation:ident, $status:expr, $body:expr, |$c:ident| $call:expr) => {{
            let rule = mock!(Client::$operation)
                .sequence()
                .http_status($status, Some($body.to_string()))
                .build();
            let $c = client(&[&rule]);
            map_error($call.send().await.expect_err("an error answer"))
        }};
    }

    async fn heartbeat_answered(status: u16, body: &str) -> WorkflowError {
        answered!(send_task_heartbeat, status, body, |c| c
            .send_task_heartbeat()
            .task_token("t"))
    }

    #[tokio::test]
    async fn throttling_is_transient() {
        for code in [
            "ThrottlingException",
            "Throttling",
            "TooManyRequestsException",
        ] {
            let body = format!(r#"{{"__type":"{code}","message":"Rate exceeded"}}"#);
            let e = heartbeat_answered(400, &body).await;
            assert!(
                matches!(&e, WorkflowError::Unavailable(m) if m.contains(code)),
                "{e:?}"
            );
        }
        let e = heartbeat_answered(429, "{}").await;
        assert!(e.is_transient(), "{e:?}");
        let body = r#"{"__type":"ActivityWorkerLimitExceeded","message":"too many pollers"}"#;
        let e = answered!(get_activity_task, 400, body, |c| c
            .get_activity_task()
            .activity_arn("arn:aws:states:us-east-1:123456789012:activity:a"));
        assert!(e.is_transient(), "{e:?}");
    }

    #[tokio::test]
    async fn server_errors_are_transient_whatever_they_are_called() {
        for (status, body) in [
            (500, r#"{"__type":"InternalFailure","message":"oops"}"#),
            (503, r#"{"__type":"ServiceUnavailable"}"#),
            (502, "<html>Bad Gateway</html>"),
            (500, ""),
        ] {
            let e = heartbeat_answered(status, body).await;
            assert!(
                matches!(e, WorkflowError::Unavailable(_)),
                "{status} {body}: {e:?}"
            );
        }
    }

    #[tokio::test]
    async fn named_errors_keep_their_meaning() {
        use std::mem::discriminant;
        /// The port error a code must become.
        type Kind = fn(String) -> WorkflowError;
        let cases: [(&str, Kind); 5] = [
            ("TaskTimedOut", WorkflowError::TaskTimedOut),
            ("TaskDoesNotExist", WorkflowError::TaskTimedOut),
            ("InvalidToken", WorkflowError::InvalidToken),
            ("ValidationException", WorkflowError::Other),
            ("AccessDeniedException", WorkflowError::Other),
        ];
        for (code, expected) in cases {
            let body = format!(r#"{{"__type":"{code}","message":"from the wire"}}"#);
            let e = heartbeat_answered(400, &body).await;
            let kind = discriminant(&expected(String::new()));
            assert_eq!(discriminant(&e), kind, "{code}: {e:?}");
            assert!(e.to_string().contains("from the wire"), "{e}");
        }
        let arn = "arn:aws:states:us-east-1:123456789012:execution:s:n";
        let body = r#"{"__type":"ExecutionDoesNotExist","message":"Execution Does Not Exist"}"#;
        let e = answered!(describe_execution, 400, body, |c| c
            .describe_execution()
            .execution_arn(arn));
        assert!(
            matches!(e, WorkflowError::ExecutionDoesNotExist(_)),
            "{e:?}"
        );
        let body =
            r#"{"__type":"com.amazonaws.swf.base.model#ExecutionAlreadyExists","message":"taken"}"#;
        let e = answered!(start_execution, 400, body, |c| c
            .start_execution()
            .state_machine_arn("arn:aws:states:us-east-1:123456789012:stateMachine:s")
            .name("n"));
        assert!(
            matches!(e, WorkflowError::ExecutionAlreadyExists(_)),
            "{e:?}"
        );
    }

    #[tokio::test]
    async fn modelled_errors_map_by_type() {
        let timed_out = mock!(Client::send_task_heartbeat)
            .match_requests(|r| r.task_token() == Some("closed"))
            .then_error(|| SendTaskHeartbeatError::TaskTimedOut(TaskTimedOut::builder().build()));
        let gone = mock!(Client::send_task_heartbeat)
            .match_requests(|r| r.task_token() == Some("gone"))
            .then_error(|| {
                SendTaskHeartbeatError::TaskDoesNotExist(TaskDoesNotExist::builder().build())
            });
        let invalid = mock!(Client::send_task_heartbeat)
            .match_requests(|r| r.task_token() == Some("junk"))
            .then_error(|| SendTaskHeartbeatError::InvalidToken(InvalidToken::builder().build()));
        let exists = mock!(Client::start_execution).then_error(|| {
            StartExecutionError::ExecutionAlreadyExists(
                ExecutionAlreadyExists::builder().message("taken").build(),
            )
        });
        let client = client(&[&timed_out, &gone, &invalid, &exists]);
        let heartbeat = |token: &'static str| {
            let client = client.clone();
            async move {
                map_error(
                    client
                        .send_task_heartbeat()
                        .task_token(token)
                        .send()
                        .await
                        .unwrap_err(),
                )
            }
        };
        assert!(matches!(
            heartbeat("closed").await,
            WorkflowError::TaskTimedOut(_)
        ));
        assert!(matches!(
            heartbeat("gone").await,
            WorkflowError::TaskTimedOut(_)
        ));
        assert!(matches!(
            heartbeat("junk").await,
            WorkflowError::InvalidToken(_)
        ));
        let e = map_error(
            client
                .start_execution()
                .state_machine_arn("arn:aws:states:us-east-1:123456789012:stateMachine:s")
                .name("n")
                .send()
                .await
                .unwrap_err(),
        );
        assert_eq!(
            e,
            WorkflowError::ExecutionAlreadyExists("ExecutionAlreadyExists: taken".to_owned()),
        );
    }

    #[tokio::test]
    async fn a_refused_redrive_is_not_redrivable_and_not_transient() {
        use aws_sdk_sfn::operation::redrive_execution::RedriveExecutionError;
        use aws_sdk_sfn::types::error::ExecutionNotRedrivable;
        let refused = mock!(Client::redrive_execution).then_error(|| {
            RedriveExecutionError::ExecutionNotRedrivable(
                ExecutionNotRedrivable::builder()
                    .message("Execution is SUCCEEDED and cannot be redriven.")
                    .build(),
            )
        });
        let client = client(&[&refused]);
        let e = map_error(
            client
                .redrive_execution()
                .execution_arn("arn:aws:states:us-east-1:123456789012:execution:s:e")
                .send()
                .await
                .unwrap_err(),
        );
        assert_eq!(
            e,
            WorkflowError::NotRedrivable(
                "ExecutionNotRedrivable: Execution is SUCCEEDED and cannot be redriven.".to_owned()
            )
        );
        assert!(!e.is_transient());
    }

    /// A real client (the default HTTP stack) against `endpoint`, without retries.
    fn real_client(endpoint: &str, timeout: std::time::Duration) -> Client {
        use aws_sdk_sfn::config::timeout::TimeoutConfig;
        use aws_sdk_sfn::config::{BehaviorVersion, Credentials, Region};
        let config = aws_sdk_sfn::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .credentials_provider(Credentials::new("test", "test", None, None, "test"))
            .endpoint_url(endpoint)
            .retry_config(RetryConfig::disabled())
            .timeout_config(TimeoutConfig::builder().operation_timeout(timeout).build())
            .build();
        Client::from_conf(config)
    }

    /// A loopback listener whose connections get `treat`; its address as an endpoint URL.
    fn listener(treat: fn(std::net::TcpStream)) -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                treat(stream);
            }
        });
        format!("http://{addr}")
    }

    #[tokio::test]
    async fn a_dropped_connection_is_transient() {
        // Reads the request, then closes the connection without a word.
        let endpoint = listener(|mut s| {
            use std::io::Read;
            let _ = s.read(&mut [0; 4096]);
        });
        let client = real_client(&endpoint, std::time::Duration::from_secs(10));
        let err = client
            .send_task_heartbeat()
            .task_token("t")
            .send()
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                SdkError::DispatchFailure(_) | SdkError::ResponseError(_)
            ),
            "{err:?}"
        );
        let e = map_error(err);
        assert!(matches!(e, WorkflowError::Unavailable(_)), "{e:?}");
    }

    #[tokio::test]
    async fn a_refused_connection_is_transient() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let client = real_client(
            &format!("http://127.0.0.1:{port}"),
            std::time::Duration::from_secs(10),
        );
        let err = client
            .send_task_heartbeat()
            .task_token("t")
            .send()
            .await
            .unwrap_err();
        assert!(matches!(err, SdkError::DispatchFailure(_)), "{err:?}");
        assert!(map_error(err).is_transient());
    }

    #[tokio::test]
    async fn no_answer_in_time_is_transient() {
        // Keeps the connection open and never answers.
        let endpoint = listener(|s| {
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_secs(30));
                drop(s);
            });
        });
        let client = real_client(&endpoint, std::time::Duration::from_millis(300));
        let err = client
            .send_task_heartbeat()
            .task_token("t")
            .send()
            .await
            .unwrap_err();
        assert!(matches!(err, SdkError::TimeoutError(_)), "{err:?}");
        assert!(map_error(err).is_transient());
    }

    #[tokio::test]
    async fn an_unknown_operation_is_told_apart() {
        let rule = mock!(Client::update_state_machine)
            .sequence()
            .http_status(
                400,
                Some(r#"{"__type":"UnknownOperationException","message":"no"}"#.to_owned()),
            )
            .build();
        let client = client(&[&rule]);
        let err = client
            .update_state_machine()
            .state_machine_arn("arn:aws:states:us-east-1:123456789012:stateMachine:s")
            .send()
            .await
            .unwrap_err();
        assert!(is_unknown_operation(&err));
        assert!(matches!(map_error(err), WorkflowError::Other(_)));
    }
}
