//! History events from the SDK's types back into AWS's JSON shape, the one the embedded adapter
//! gives too: `{timestamp, type, id, previousEventId, <type>EventDetails}` with AWS's camelCase
//! member names, the timestamp in RFC 3339 with milliseconds.

use aws_sdk_sfn::primitives::DateTime as SdkDateTime;
use aws_sdk_sfn::types::{HistoryEvent, HistoryEventExecutionDataDetails};
use chrono::{DateTime, Utc};
use engine::Timestamps;
use serde_json::{Map, Value};

/// An SDK timestamp as a `chrono` one, to the nearest millisecond: Step Functions keeps
/// milliseconds, and the JSON protocol's epoch seconds (a float) do not always parse back to
/// exactly them.
pub(crate) fn to_chrono(t: &SdkDateTime) -> Option<DateTime<Utc>> {
    let millis = (t.as_nanos() + 500_000).div_euclid(1_000_000);
    DateTime::from_timestamp_millis(i64::try_from(millis).ok()?)
}

/// The event as AWS's JSON shapes it, written by the engine's one writer of that shape.
pub(crate) fn event_json(event: &HistoryEvent) -> Value {
    let timestamp = to_chrono(event.timestamp())
        .map(|t| Timestamps::Rfc3339.write(&t))
        .unwrap_or_else(|| Value::String(String::new()));
    engine::aws_event_json(
        timestamp,
        event.r#type().as_str(),
        u64::try_from(event.id()).unwrap_or_default(),
        u64::try_from(event.previous_event_id()).unwrap_or_default(),
        details(event).map(|(key, details)| (key.to_owned(), details.0.into())),
    )
}

/// A details object, members added only when present (as AWS omits absent ones).
#[derive(Default)]
struct Details(Map<String, Value>);

impl Details {
    fn text(mut self, key: &str, value: Option<&str>) -> Self {
        if let Some(v) = value {
            self.0.insert(key.to_owned(), v.into());
        }
        self
    }

    fn int(mut self, key: &str, value: Option<i64>) -> Self {
        if let Some(v) = value {
            self.0.insert(key.to_owned(), v.into());
        }
        self
    }

    /// A payload (`input`, `output`) and its `…Details` (`{"truncated": bool}`).
    fn data(
        self,
        key: &str,
        value: Option<&str>,
        details: Option<&HistoryEventExecutionDataDetails>,
    ) -> Self {
        let mut this = self.text(key, value);
        if let Some(d) = details {
            let truncated = serde_json::json!({ "truncated": d.truncated() });
            this.0.insert(format!("{key}Details"), truncated);
        }
        this
    }

    fn error(error: Option<&str>, cause: Option<&str>) -> Self {
        Details::default().text("error", error).text("cause", cause)
    }
}

/// The event's details under their JSON key. An event has at most one details member.
fn details(e: &HistoryEvent) -> Option<(&'static str, Details)> {
    // Executions.
    if let Some(d) = e.execution_started_event_details() {
        let details = Details::default()
            .data("input", d.input(), d.input_details())
            .text("roleArn", d.role_arn())
            .text("stateMachineAliasArn", d.state_machine_alias_arn())
            .text("stateMachineVersionArn", d.state_machine_version_arn());
        return Some(("executionStartedEventDetails", details));
    }
    if let Some(d) = e.execution_succeeded_event_details() {
        let details = Details::default().data("output", d.output(), d.output_details());
        return Some(("executionSucceededEventDetails", details));
    }
    if let Some(d) = e.execution_failed_event_details() {
        return Some((
            "executionFailedEventDetails",
            Details::error(d.error(), d.cause()),
        ));
    }
    if let Some(d) = e.execution_aborted_event_details() {
        return Some((
            "executionAbortedEventDetails",
            Details::error(d.error(), d.cause()),
        ));
    }
    if let Some(d) = e.execution_timed_out_event_details() {
        return Some((
            "executionTimedOutEventDetails",
            Details::error(d.error(), d.cause()),
        ));
    }
    if let Some(d) = e.execution_redriven_event_details() {
        let details = Details::default().int("redriveCount", d.redrive_count().map(i64::from));
        return Some(("executionRedrivenEventDetails", details));
    }
    // States: every type's Entered/Exited shares these two.
    if let Some(d) = e.state_entered_event_details() {
        let details = Details::default().text("name", Some(d.name())).data(
            "input",
            d.input(),
            d.input_details(),
        );
        return Some(("stateEnteredEventDetails", details));
    }
    if let Some(d) = e.state_exited_event_details() {
        let mut details = Details::default().text("name", Some(d.name())).data(
            "output",
            d.output(),
            d.output_details(),
        );
        if let Some(vars) = d.assigned_variables() {
            let vars: Map<String, Value> = vars
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect();
            details
                .0
                .insert("assignedVariables".to_owned(), vars.into());
        }
        if let Some(v) = d.assigned_variables_details() {
            let truncated = serde_json::json!({ "truncated": v.truncated() });
            details
                .0
                .insert("assignedVariablesDetails".to_owned(), truncated);
        }
        return Some(("stateExitedEventDetails", details));
    }
    // Activities: every Task state of the saga is one.
    if let Some(d) = e.activity_scheduled_event_details() {
        let details = Details::default()
            .text("resource", Some(d.resource()))
            .data("input", d.input(), d.input_details())
            .int("timeoutInSeconds", d.timeout_in_seconds())
            .int("heartbeatInSeconds", d.heartbeat_in_seconds());
        return Some(("activityScheduledEventDetails", details));
    }
    if let Some(d) = e.activity_started_event_details() {
        let details = Details::default().text("workerName", d.worker_name());
        return Some(("activityStartedEventDetails", details));
    }
    if let Some(d) = e.activity_succeeded_event_details() {
        let details = Details::default().data("output", d.output(), d.output_details());
        return Some(("activitySucceededEventDetails", details));
    }
    if let Some(d) = e.activity_failed_event_details() {
        return Some((
            "activityFailedEventDetails",
            Details::error(d.error(), d.cause()),
        ));
    }
    if let Some(d) = e.activity_timed_out_event_details() {
        return Some((
            "activityTimedOutEventDetails",
            Details::error(d.error(), d.cause()),
        ));
    }
    if let Some(d) = e.activity_schedule_failed_event_details() {
        return Some((
            "activityScheduleFailedEventDetails",
            Details::error(d.error(), d.cause()),
        ));
    }
    // Service integrations, Map and Parallel: not in the saga; their common members are kept
    // so a history read for diagnosis is not silently emptied.
    if let Some(d) = e.task_scheduled_event_details() {
        let details = Details::default()
            .text("resourceType", Some(d.resource_type()))
            .text("resource", Some(d.resource()))
            .text("region", Some(d.region()))
            .text("parameters", Some(d.parameters()))
            .int("timeoutInSeconds", d.timeout_in_seconds())
            .int("heartbeatInSeconds", d.heartbeat_in_seconds());
        return Some(("taskScheduledEventDetails", details));
    }
    if let Some(d) = e.task_started_event_details() {
        return Some((
            "taskStartedEventDetails",
            resource(d.resource_type(), d.resource()),
        ));
    }
    if let Some(d) = e.task_succeeded_event_details() {
        let details = resource(d.resource_type(), d.resource()).data(
            "output",
            d.output(),
            d.output_details(),
        );
        return Some(("taskSucceededEventDetails", details));
    }
    if let Some(d) = e.task_failed_event_details() {
        let details = resource(d.resource_type(), d.resource())
            .text("error", d.error())
            .text("cause", d.cause());
        return Some(("taskFailedEventDetails", details));
    }
    if let Some(d) = e.task_timed_out_event_details() {
        let details = resource(d.resource_type(), d.resource())
            .text("error", d.error())
            .text("cause", d.cause());
        return Some(("taskTimedOutEventDetails", details));
    }
    if let Some(d) = e.map_state_started_event_details() {
        let details = Details::default().int("length", Some(d.length().into()));
        return Some(("mapStateStartedEventDetails", details));
    }
    let iteration = |d: &aws_sdk_sfn::types::MapIterationEventDetails| {
        Details::default()
            .text("name", d.name())
            .int("index", Some(d.index().into()))
    };
    if let Some(d) = e.map_iteration_started_event_details() {
        return Some(("mapIterationStartedEventDetails", iteration(d)));
    }
    if let Some(d) = e.map_iteration_succeeded_event_details() {
        return Some(("mapIterationSucceededEventDetails", iteration(d)));
    }
    if let Some(d) = e.map_iteration_failed_event_details() {
        return Some(("mapIterationFailedEventDetails", iteration(d)));
    }
    if let Some(d) = e.map_iteration_aborted_event_details() {
        return Some(("mapIterationAbortedEventDetails", iteration(d)));
    }
    None
}

fn resource(resource_type: &str, resource: &str) -> Details {
    Details::default()
        .text("resourceType", Some(resource_type))
        .text("resource", Some(resource))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_sfn::types::{
        ActivityScheduledEventDetails, ActivityStartedEventDetails, ActivityTimedOutEventDetails,
        ExecutionStartedEventDetails, HistoryEventType, StateEnteredEventDetails,
        StateExitedEventDetails,
    };
    use serde_json::json;

    fn event(id: i64, kind: HistoryEventType) -> aws_sdk_sfn::types::builders::HistoryEventBuilder {
        HistoryEvent::builder()
            .timestamp(SdkDateTime::from_secs_f64(1_767_225_600.123))
            .r#type(kind)
            .id(id)
            .previous_event_id(id - 1)
    }

    fn no_truncation() -> HistoryEventExecutionDataDetails {
        HistoryEventExecutionDataDetails::builder()
            .truncated(false)
            .build()
    }

    #[test]
    fn timestamps_keep_their_milliseconds() {
        // 1767225600.123 parses to …122.99990654 s; the event was stamped at …123 ms.
        let e = event(1, HistoryEventType::ExecutionStarted)
            .build()
            .unwrap();
        assert_eq!(event_json(&e)["timestamp"], "2026-01-01T00:00:00.123Z");
    }

    #[test]
    fn execution_and_state_events_have_the_aws_shape() {
        let started = event(1, HistoryEventType::ExecutionStarted)
            .execution_started_event_details(
                ExecutionStartedEventDetails::builder()
                    .input(r#"{"orderId":"o-1"}"#)
                    .input_details(no_truncation())
                    .role_arn("arn:aws:iam::123456789012:role/saga")
                    .build(),
            )
            .build()
            .unwrap();
        assert_eq!(
            event_json(&started),
            json!({
                "timestamp": "2026-01-01T00:00:00.123Z",
                "type": "ExecutionStarted",
                "id": 1,
                "previousEventId": 0,
                "executionStartedEventDetails": {
                    "input": "{\"orderId\":\"o-1\"}",
                    "inputDetails": {"truncated": false},
                    "roleArn": "arn:aws:iam::123456789012:role/saga"
                }
            })
        );
        let entered = event(2, HistoryEventType::ChoiceStateEntered)
            .state_entered_event_details(
                StateEnteredEventDetails::builder()
                    .name("NeedsApproval")
                    .input("{}")
                    .input_details(no_truncation())
                    .build()
                    .unwrap(),
            )
            .build()
            .unwrap();
        assert_eq!(
            event_json(&entered)["stateEnteredEventDetails"],
            json!({"name": "NeedsApproval", "input": "{}", "inputDetails": {"truncated": false}})
        );
        let exited = event(3, HistoryEventType::SucceedStateExited)
            .state_exited_event_details(
                StateExitedEventDetails::builder()
                    .name("OrderCompleted")
                    .output("{}")
                    .build()
                    .unwrap(),
            )
            .build()
            .unwrap();
        assert_eq!(
            event_json(&exited)["stateExitedEventDetails"],
            json!({"name": "OrderCompleted", "output": "{}"})
        );
    }

    #[test]
    fn activity_events_have_the_aws_shape() {
        let scheduled = event(3, HistoryEventType::ActivityScheduled)
            .activity_scheduled_event_details(
                ActivityScheduledEventDetails::builder()
                    .resource("arn:aws:states:us-east-1:123456789012:activity:a")
                    .input("{}")
                    .input_details(no_truncation())
                    .timeout_in_seconds(120)
                    .heartbeat_in_seconds(20)
                    .build()
                    .unwrap(),
            )
            .build()
            .unwrap();
        assert_eq!(
            event_json(&scheduled)["activityScheduledEventDetails"],
            json!({
                "resource": "arn:aws:states:us-east-1:123456789012:activity:a",
                "input": "{}",
                "inputDetails": {"truncated": false},
                "timeoutInSeconds": 120,
                "heartbeatInSeconds": 20
            })
        );
        let started = event(4, HistoryEventType::ActivityStarted)
            .activity_started_event_details(
                ActivityStartedEventDetails::builder()
                    .worker_name("host-1")
                    .build(),
            )
            .build()
            .unwrap();
        assert_eq!(
            event_json(&started)["activityStartedEventDetails"],
            json!({"workerName": "host-1"})
        );
        let timed_out = event(5, HistoryEventType::ActivityTimedOut)
            .activity_timed_out_event_details(
                ActivityTimedOutEventDetails::builder()
                    .error("States.Timeout")
                    .build(),
            )
            .build()
            .unwrap();
        assert_eq!(
            event_json(&timed_out)["activityTimedOutEventDetails"],
            json!({"error": "States.Timeout"})
        );
    }

    #[test]
    fn an_event_without_details_has_none() {
        let e = event(7, HistoryEventType::ParallelStateStarted)
            .build()
            .unwrap();
        let json = event_json(&e);
        assert_eq!(json.as_object().unwrap().len(), 4, "{json}");
        assert_eq!(json["type"], "ParallelStateStarted");
    }
}
