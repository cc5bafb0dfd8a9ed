//! The details of the AWS-shaped history events the interpreter records (each a
//! [`HistoryEvent`](crate::sfn::HistoryEvent), already numbered): their payload fields and the
//! naming rules of their details objects (`TaskStateEntered` → `stateEnteredEventDetails`,
//! `ActivityScheduled` → `activityScheduledEventDetails`, …).

use serde_json::{Map, Value, json};

/// The JSON key of an event type's details object.
pub fn details_key(event_type: &str) -> String {
    if event_type.ends_with("StateEntered") {
        return "stateEnteredEventDetails".to_owned();
    }
    if event_type.ends_with("StateExited") {
        return "stateExitedEventDetails".to_owned();
    }
    let mut key = String::with_capacity(event_type.len() + 12);
    let mut chars = event_type.chars();
    if let Some(first) = chars.next() {
        key.extend(first.to_lowercase());
    }
    key.extend(chars);
    key.push_str("EventDetails");
    key
}

/// Serializes a payload the way history events carry it: as JSON text.
pub fn json_text(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned())
}

/// `{"input": "...", "inputDetails": {"truncated": false}}`-style payload fields.
pub fn payload(field: &str, value: &Value) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert(field.to_owned(), Value::String(json_text(value)));
    map.insert(format!("{field}Details"), untruncated());
    map
}

/// The `…Details` of a payload the engine writes whole: `{"truncated": false}`.
pub fn untruncated() -> Value {
    json!({ "truncated": false })
}

/// Details `{error?, cause?}`, omitting absent fields as AWS does.
pub fn error_details(error: Option<&str>, cause: Option<&str>) -> Value {
    let mut map = Map::new();
    if let Some(e) = error {
        map.insert("error".to_owned(), Value::String(e.to_owned()));
    }
    if let Some(c) = cause {
        map.insert("cause".to_owned(), Value::String(c.to_owned()));
    }
    Value::Object(map)
}

/// Removes the execution data (inputs, outputs, parameters) from a details object, for
/// `GetExecutionHistory` with `includeExecutionData=false`.
pub fn strip_execution_data(details: &mut Value) {
    if let Value::Object(map) = details {
        for key in [
            "input",
            "inputDetails",
            "output",
            "outputDetails",
            "parameters",
        ] {
            map.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_events_share_one_details_key() {
        assert_eq!(details_key("TaskStateEntered"), "stateEnteredEventDetails");
        assert_eq!(details_key("PassStateExited"), "stateExitedEventDetails");
    }

    #[test]
    fn other_events_use_their_lower_camel_name() {
        assert_eq!(
            details_key("ActivityScheduled"),
            "activityScheduledEventDetails"
        );
        assert_eq!(
            details_key("ExecutionStarted"),
            "executionStartedEventDetails"
        );
        assert_eq!(
            details_key("MapIterationStarted"),
            "mapIterationStartedEventDetails"
        );
    }

    #[test]
    fn stripping_execution_data_keeps_names_and_errors() {
        let mut d =
            json!({"name": "A", "input": "{}", "inputDetails": {"truncated": false}, "error": "E"});
        strip_execution_data(&mut d);
        assert_eq!(d, json!({"name": "A", "error": "E"}));
    }
}
