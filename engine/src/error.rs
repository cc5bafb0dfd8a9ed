//! The engine's API errors. Each variant is one of AWS Step Functions' error names, so an
//! adapter (or the JSON protocol front end) can map them one to one.

/// An error returned by an [`crate::Engine`] verb.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    #[error("ExecutionAlreadyExists: {0}")]
    ExecutionAlreadyExists(String),
    #[error("ExecutionDoesNotExist: {0}")]
    ExecutionDoesNotExist(String),
    #[error("ExecutionLimitExceeded: {0}")]
    ExecutionLimitExceeded(String),
    /// `RedriveExecution` refused: the message is AWS's reason (`redriveStatusReason`).
    #[error("ExecutionNotRedrivable: {0}")]
    ExecutionNotRedrivable(String),
    #[error("StateMachineDoesNotExist: {0}")]
    StateMachineDoesNotExist(String),
    #[error("StateMachineAlreadyExists: {0}")]
    StateMachineAlreadyExists(String),
    #[error("StateMachineTypeNotSupported: {0}")]
    StateMachineTypeNotSupported(String),
    #[error("ActivityDoesNotExist: {0}")]
    ActivityDoesNotExist(String),
    #[error("ActivityAlreadyExists: {0}")]
    ActivityAlreadyExists(String),
    #[error("InvalidArn: {0}")]
    InvalidArn(String),
    #[error("InvalidName: {0}")]
    InvalidName(String),
    #[error("InvalidDefinition: {0}")]
    InvalidDefinition(String),
    #[error("InvalidExecutionInput: {0}")]
    InvalidExecutionInput(String),
    #[error("InvalidOutput: {0}")]
    InvalidOutput(String),
    #[error("InvalidToken: {0}")]
    InvalidToken(String),
    #[error("TaskDoesNotExist: {0}")]
    TaskDoesNotExist(String),
    #[error("TaskTimedOut: {0}")]
    TaskTimedOut(String),
    #[error("ValidationException: {0}")]
    Validation(String),
    /// A version or alias call that contradicts what is stored: a `revisionId` that is not the
    /// current one, an alias of the same name with another routing, deleting a version an
    /// alias routes to.
    #[error("ConflictException: {0}")]
    Conflict(String),
    /// `UpdateStateMachine` with neither a definition nor a role.
    #[error("MissingRequiredParameter: {0}")]
    MissingRequiredParameter(String),
    /// A version or alias that does not exist (AWS answers `ResourceNotFound`).
    #[error("ResourceNotFound: {0}")]
    ResourceNotFound(String),
    /// More versions (1,000) or aliases (100) of one machine than AWS allows.
    #[error("ServiceQuotaExceededException: {0}")]
    ServiceQuotaExceeded(String),
    /// The engine is shutting down or its storage failed; the call may be retried later.
    #[error("ServiceUnavailable: {0}")]
    Unavailable(String),
    /// Storage failure that is not expected to go away by itself (corruption, full disk, …).
    #[error("InternalError: {0}")]
    Internal(String),
}

impl EngineError {
    /// The AWS error code, as it appears in the `__type` of a Step Functions JSON error.
    pub fn aws_name(&self) -> &'static str {
        match self {
            EngineError::ExecutionAlreadyExists(_) => "ExecutionAlreadyExists",
            EngineError::ExecutionDoesNotExist(_) => "ExecutionDoesNotExist",
            EngineError::ExecutionLimitExceeded(_) => "ExecutionLimitExceeded",
            EngineError::ExecutionNotRedrivable(_) => "ExecutionNotRedrivable",
            EngineError::StateMachineDoesNotExist(_) => "StateMachineDoesNotExist",
            EngineError::StateMachineAlreadyExists(_) => "StateMachineAlreadyExists",
            EngineError::StateMachineTypeNotSupported(_) => "StateMachineTypeNotSupported",
            EngineError::ActivityDoesNotExist(_) => "ActivityDoesNotExist",
            EngineError::ActivityAlreadyExists(_) => "ActivityAlreadyExists",
            EngineError::InvalidArn(_) => "InvalidArn",
            EngineError::InvalidName(_) => "InvalidName",
            EngineError::InvalidDefinition(_) => "InvalidDefinition",
            EngineError::InvalidExecutionInput(_) => "InvalidExecutionInput",
            EngineError::InvalidOutput(_) => "InvalidOutput",
            EngineError::InvalidToken(_) => "InvalidToken",
            EngineError::TaskDoesNotExist(_) => "TaskDoesNotExist",
            EngineError::TaskTimedOut(_) => "TaskTimedOut",
            EngineError::Validation(_) => "ValidationException",
            EngineError::Conflict(_) => "ConflictException",
            EngineError::MissingRequiredParameter(_) => "MissingRequiredParameter",
            EngineError::ResourceNotFound(_) => "ResourceNotFound",
            EngineError::ServiceQuotaExceeded(_) => "ServiceQuotaExceededException",
            EngineError::Unavailable(_) => "ServiceUnavailable",
            EngineError::Internal(_) => "InternalError",
        }
    }

    /// The text alone, without the AWS error name: what a person reads (the name is for the
    /// Step Functions protocol and for logs).
    pub fn message(&self) -> &str {
        match self {
            EngineError::ExecutionAlreadyExists(m)
            | EngineError::ExecutionDoesNotExist(m)
            | EngineError::ExecutionLimitExceeded(m)
            | EngineError::ExecutionNotRedrivable(m)
            | EngineError::StateMachineDoesNotExist(m)
            | EngineError::StateMachineAlreadyExists(m)
            | EngineError::StateMachineTypeNotSupported(m)
            | EngineError::ActivityDoesNotExist(m)
            | EngineError::ActivityAlreadyExists(m)
            | EngineError::InvalidArn(m)
            | EngineError::InvalidName(m)
            | EngineError::InvalidDefinition(m)
            | EngineError::InvalidExecutionInput(m)
            | EngineError::InvalidOutput(m)
            | EngineError::InvalidToken(m)
            | EngineError::TaskDoesNotExist(m)
            | EngineError::TaskTimedOut(m)
            | EngineError::Validation(m)
            | EngineError::Conflict(m)
            | EngineError::MissingRequiredParameter(m)
            | EngineError::ResourceNotFound(m)
            | EngineError::ServiceQuotaExceeded(m)
            | EngineError::Unavailable(m)
            | EngineError::Internal(m) => m,
        }
    }

    /// Whether the same call may succeed if simply tried again.
    pub fn is_transient(&self) -> bool {
        matches!(self, EngineError::Unavailable(_))
    }

    pub(crate) fn storage(e: rusqlite::Error) -> Self {
        match &e {
            rusqlite::Error::SqliteFailure(f, _)
                if matches!(
                    f.code,
                    rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                ) =>
            {
                EngineError::Unavailable(e.to_string())
            }
            _ => EngineError::Internal(e.to_string()),
        }
    }
}
