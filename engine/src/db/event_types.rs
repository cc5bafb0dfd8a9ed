//! How the history stores an event's type: as its index in a list of AWS's event types (one
//! byte instead of about 16), or as its name when it is not listed.

use super::Result;

/// The history's event types, each stored as its index here (one byte) instead of its name
/// (about 16): append only, never reorder, as stored rows hold these numbers. A type not
/// listed is stored as its name, which reads back the same.
const EVENT_TYPES: &[&str] = &[
    "ActivityFailed",
    "ActivityScheduleFailed",
    "ActivityScheduled",
    "ActivityStarted",
    "ActivitySucceeded",
    "ActivityTimedOut",
    "ChoiceStateEntered",
    "ChoiceStateExited",
    "ExecutionAborted",
    "ExecutionFailed",
    "ExecutionStarted",
    "ExecutionSucceeded",
    "ExecutionTimedOut",
    "ExecutionRedriven",
    "FailStateEntered",
    "LambdaFunctionFailed",
    "LambdaFunctionScheduleFailed",
    "LambdaFunctionScheduled",
    "LambdaFunctionStartFailed",
    "LambdaFunctionStarted",
    "LambdaFunctionSucceeded",
    "LambdaFunctionTimedOut",
    "MapIterationAborted",
    "MapIterationFailed",
    "MapIterationStarted",
    "MapIterationSucceeded",
    "MapStateAborted",
    "MapStateEntered",
    "MapStateExited",
    "MapStateFailed",
    "MapStateStarted",
    "MapStateSucceeded",
    "ParallelStateAborted",
    "ParallelStateEntered",
    "ParallelStateExited",
    "ParallelStateFailed",
    "ParallelStateStarted",
    "ParallelStateSucceeded",
    "PassStateEntered",
    "PassStateExited",
    "SucceedStateEntered",
    "SucceedStateExited",
    "TaskFailed",
    "TaskScheduled",
    "TaskStartFailed",
    "TaskStarted",
    "TaskStateAborted",
    "TaskStateEntered",
    "TaskStateExited",
    "TaskSubmitFailed",
    "TaskSubmitted",
    "TaskSucceeded",
    "TaskTimedOut",
    "WaitStateAborted",
    "WaitStateEntered",
    "WaitStateExited",
];

/// An event type as stored: its index in [`EVENT_TYPES`] (the column's TEXT affinity keeps
/// it as one or two digits), else its name.
pub(super) fn stored_event_type(name: &str) -> std::borrow::Cow<'_, str> {
    match EVENT_TYPES.iter().position(|t| *t == name) {
        Some(i) => i.to_string().into(),
        None => name.into(),
    }
}

/// An event type as read: a stored index, or a name as it was stored (no name is digits).
pub(super) fn event_type_of(r: &rusqlite::Row, i: usize) -> Result<String> {
    event_type_named(r.get(i)?, i)
}

pub(super) fn event_type_named(stored: String, i: usize) -> Result<String> {
    match stored.parse::<usize>() {
        Ok(n) => EVENT_TYPES.get(n).map(|t| (*t).to_owned()).ok_or_else(|| {
            rusqlite::Error::FromSqlConversionFailure(
                i,
                rusqlite::types::Type::Text,
                format!("unknown event type {n}").into(),
            )
        }),
        Err(_) => Ok(stored),
    }
}
