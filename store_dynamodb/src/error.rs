//! SDK errors into [`StoreError`], so nothing of the SDK leaves the adapter. What may pass on a
//! retry is `Unavailable` (transient): throttling, a 5xx, a transaction that ran into another,
//! a timeout, a connection that failed or dropped. The rest is `Internal`: a request the service
//! refuses (validation), a missing table, a misconfigured client.
//!
//! The expected refusals (`ConditionalCheckFailedException`, `TransactionCanceledException`)
//! are matched by the calls that expect them and never reach this mapping. The SDK has already
//! retried the transient errors its retry policy covers when they arrive here.

use aws_sdk_dynamodb::config::http::HttpResponse;
use aws_sdk_dynamodb::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::{
    batch_get_item::BatchGetItemError, create_table::CreateTableError,
    delete_item::DeleteItemError, describe_table::DescribeTableError,
    describe_time_to_live::DescribeTimeToLiveError, get_item::GetItemError, put_item::PutItemError,
    query::QueryError, scan::ScanError, transact_write_items::TransactWriteItemsError,
    update_item::UpdateItemError, update_table::UpdateTableError,
    update_time_to_live::UpdateTimeToLiveError,
};
use store::error::StoreError;

/// What a service error means to the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// The same request may succeed later.
    Transient,
    /// The table (or index) is not there.
    MissingTable,
    /// The service refuses the request as it is.
    Refused,
}

/// The class of an operation's error. The SDK's enums are matched variant by variant (see
/// [`classify!`]); an error the SDK does not model, or a variant a later SDK adds, goes by its
/// error code, the service's documented name for it.
pub(crate) trait Classify {
    fn class(&self) -> Class;
}

/// Unmodeled error codes after which the same request may succeed.
const TRANSIENT_CODES: &[&str] = &[
    "ThrottlingException",
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "InternalServerError",
    "ServiceUnavailable",
    "TransactionConflictException",
];

fn by_code(code: Option<&str>) -> Class {
    match code {
        Some(code) if TRANSIENT_CODES.contains(&code) => Class::Transient,
        Some("ResourceNotFoundException") => Class::MissingTable,
        _ => Class::Refused,
    }
}

/// Implements [`Classify`] for operation errors from the lists of their variants per class
/// (errors with the same variants share one list); any variant not listed falls to [`by_code`].
macro_rules! classify {
    ($([$($error:ident),+] $lists:tt)*) => {$($(classify!(@one $error $lists);)+)*};
    (@one $error:ident {
        transient: [$($transient:ident),*],
        missing_table: [$($missing:ident),*],
        refused: [$($refused:ident),*] $(,)?
    }) => {
        impl Classify for $error {
            fn class(&self) -> Class {
                match self {
                    $($error::$transient(_))|* => Class::Transient,
                    $($error::$missing(_) => Class::MissingTable,)*
                    $($error::$refused(_))|* => Class::Refused,
                    _ => by_code(self.code()),
                }
            }
        }
    };
}

classify! {
    [GetItemError, BatchGetItemError, QueryError, ScanError] {
        transient: [InternalServerError, ProvisionedThroughputExceededException,
            RequestLimitExceeded, ThrottlingException],
        missing_table: [ResourceNotFoundException],
        refused: [InvalidEndpointException],
    }
    [PutItemError, UpdateItemError, DeleteItemError] {
        transient: [InternalServerError, ProvisionedThroughputExceededException,
            RequestLimitExceeded, ThrottlingException, TransactionConflictException,
            ReplicatedWriteConflictException],
        missing_table: [ResourceNotFoundException],
        refused: [InvalidEndpointException, ConditionalCheckFailedException,
            ItemCollectionSizeLimitExceededException],
    }
    [TransactWriteItemsError] {
        transient: [InternalServerError, ProvisionedThroughputExceededException,
            RequestLimitExceeded, ThrottlingException, TransactionInProgressException],
        missing_table: [ResourceNotFoundException],
        refused: [InvalidEndpointException, TransactionCanceledException,
            IdempotentParameterMismatchException],
    }
    [CreateTableError] {
        // Too many tables being created or changed at once.
        transient: [InternalServerError, LimitExceededException],
        missing_table: [],
        refused: [InvalidEndpointException, ResourceInUseException],
    }
    [UpdateTableError, UpdateTimeToLiveError] {
        transient: [InternalServerError, LimitExceededException],
        missing_table: [ResourceNotFoundException],
        refused: [InvalidEndpointException, ResourceInUseException],
    }
    [DescribeTableError, DescribeTimeToLiveError] {
        transient: [InternalServerError],
        missing_table: [ResourceNotFoundException],
        refused: [InvalidEndpointException],
    }
}

/// Maps a failed call of operation `op` (for the message) to the store's error.
pub(crate) fn store_error<E>(op: &str, err: SdkError<E, HttpResponse>) -> StoreError
where
    E: Classify + ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    let class = match &err {
        // A 5xx is the service's trouble, whatever its body says.
        SdkError::ServiceError(ctx) if ctx.raw().status().is_server_error() => Class::Transient,
        SdkError::ServiceError(ctx) => ctx.err().class(),
        SdkError::TimeoutError(_) | SdkError::ResponseError(_) => Class::Transient,
        // A request that could not be sent through the client's own fault is not fixed by
        // waiting; a connection refused, reset or dropped may be.
        SdkError::DispatchFailure(failure) if failure.is_user() => Class::Refused,
        SdkError::DispatchFailure(_) => Class::Transient,
        SdkError::ConstructionFailure(_) => Class::Refused,
        _ => Class::Refused,
    };
    let message = format!("DynamoDB {op}: {}", DisplayErrorContext(&err));
    match class {
        Class::Transient => StoreError::Unavailable(message),
        Class::MissingTable => StoreError::Internal(format!(
            "{message} (is the table created? `fulfillment provision` creates it)"
        )),
        Class::Refused => StoreError::Internal(message),
    }
}

/// `.map_err(sdk("GetItem"))`.
pub(crate) fn sdk<E>(op: &'static str) -> impl FnOnce(SdkError<E, HttpResponse>) -> StoreError
where
    E: Classify + ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    move |err| store_error(op, err)
}

#[cfg(test)]
mod tests {
    use crate::DynamoStore;
    use aws_sdk_dynamodb::Client;
    use aws_sdk_dynamodb::config::retry::RetryConfig;
    use aws_sdk_dynamodb::operation::get_item::{GetItemError, GetItemOutput};
    use aws_sdk_dynamodb::types::error::{ResourceNotFoundException, ThrottlingException};
    use aws_smithy_mocks::{Rule, mock};
    use store::domain::OrderId;
    use store::error::StoreError;
    use store::ports::OrderRecords;

    fn store_answering(rule: &Rule) -> DynamoStore {
        crate::tests::mock_store(&[rule])
    }

    async fn get_fails(store: &DynamoStore) -> StoreError {
        let id = OrderId::parse("o1").unwrap();
        store.get(&id).await.expect_err("the call fails")
    }

    #[tokio::test]
    async fn throttling_is_transient() {
        let rule = mock!(Client::get_item).then_error(|| {
            GetItemError::ThrottlingException(ThrottlingException::builder().build())
        });
        let err = get_fails(&store_answering(&rule)).await;
        assert!(err.is_transient(), "{err:?}");
    }

    /// A `GetItem` answered with this HTTP status and body.
    async fn get_answered(status: u16, body: &str) -> StoreError {
        let rule = mock!(Client::get_item)
            .sequence()
            .http_status(status, Some(body.to_owned()))
            .build();
        get_fails(&store_answering(&rule)).await
    }

    #[tokio::test]
    async fn a_server_error_is_transient() {
        let err = get_answered(500, "{}").await;
        assert!(err.is_transient(), "{err:?}");
    }

    #[tokio::test]
    async fn a_validation_error_is_not_transient() {
        let body = r#"{"__type":"com.amazon.coral.validate#ValidationException","message":"bad"}"#;
        let err = get_answered(400, body).await;
        assert!(
            matches!(err, StoreError::Internal(ref m) if m.contains("GetItem")),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn a_missing_table_is_not_transient_and_says_what_to_do() {
        let rule = mock!(Client::get_item).then_error(|| {
            GetItemError::ResourceNotFoundException(ResourceNotFoundException::builder().build())
        });
        let err = get_fails(&store_answering(&rule)).await;
        assert!(
            matches!(err, StoreError::Internal(ref m) if m.contains("provision")),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn a_decoded_answer_is_not_an_error() {
        let rule = mock!(Client::get_item).then_output(|| GetItemOutput::builder().build());
        let id = OrderId::parse("o1").unwrap();
        assert_eq!(store_answering(&rule).get(&id).await, Ok(None));
    }

    /// A server that accepts each connection and closes it before answering.
    #[tokio::test]
    async fn a_dropped_connection_is_transient() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                drop(socket);
            }
        });
        let client = testkit::moto::client_for(&endpoint);
        let config = client
            .config()
            .to_builder()
            .retry_config(RetryConfig::disabled())
            .build();
        let store = DynamoStore::new(Client::from_conf(config), "fulfillment");
        let err = get_fails(&store).await;
        assert!(
            matches!(err, StoreError::Unavailable(ref m) if m.contains("GetItem")),
            "{err:?}"
        );
        server.abort();
    }
}
