//! The context object (`$$`) a state sees.

use super::{ExecInfo, ExecState, Frame};
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value, json};

/// AWS's timestamp format in the context object: ISO 8601 with milliseconds, `Z`.
pub fn timestamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// `retryable`: the state is a Task, Parallel or Map, whose context shows `RetryCount`.
pub fn build(
    info: &ExecInfo,
    st: &ExecState,
    frame: &Frame,
    retryable: bool,
    token: Option<&str>,
    item: Option<(usize, &Value)>,
) -> Value {
    let retry_count: u32 = frame.retry_counts.iter().sum();
    let mut ctx = Map::new();
    let mut execution = json!({
        "Id": info.execution_arn,
        "Input": info.input,
        "StartTime": timestamp(info.start_time),
        "Name": info.name,
        "RoleArn": info.role_arn,
        "RedriveCount": st.redrive_count,
    });
    // AWS documents RedriveTime as present only once the execution has been redriven.
    if let Some(t) = st.redrive_time {
        execution["RedriveTime"] = json!(timestamp(t));
    }
    ctx.insert("Execution".to_owned(), execution);
    ctx.insert(
        "StateMachine".to_owned(),
        json!({ "Id": info.state_machine_arn, "Name": info.state_machine_name }),
    );
    let mut state = json!({ "Name": frame.state, "EnteredTime": timestamp(frame.entered_time) });
    // AWS shows RetryCount only on states that can retry (recorded: a Pass state has none).
    if retryable {
        state["RetryCount"] = json!(retry_count);
    }
    ctx.insert("State".to_owned(), state);
    if let Some(token) = token {
        ctx.insert("Task".to_owned(), json!({ "Token": token }));
    }
    if let Some((index, value)) = item {
        ctx.insert(
            "Map".to_owned(),
            json!({ "Item": { "Index": index, "Value": value } }),
        );
    }
    Value::Object(ctx)
}
