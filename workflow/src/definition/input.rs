//! The saga's input: what `StartExecution` hands the definition, typed. The definition reads
//! these fields by path (`$.orderId`, `$.requiresApproval`, `$.approvalTimeoutSeconds`, …), so
//! a field renamed here must be renamed there; a test checks every path the definition reads.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;
use store::{NewOrder, OrderId};

/// Business settings of the saga.
#[derive(Debug, Clone)]
pub struct SagaSettings {
    /// Orders whose total is at or above this need an operator's approval.
    pub approval_threshold_cents: u64,
    /// How long an operator has to decide before the order is compensated.
    pub approval_timeout: Duration,
    /// How long a parked approval token may go without a heartbeat before the engine re-issues
    /// the task (recovery time after a crash that lost a token).
    pub approval_heartbeat: Duration,
}

impl Default for SagaSettings {
    fn default() -> Self {
        SagaSettings {
            approval_threshold_cents: 100_000,
            approval_timeout: Duration::from_secs(3 * 24 * 3600),
            approval_heartbeat: Duration::from_secs(300),
        }
    }
}

impl SagaSettings {
    /// Whether an order of `amount_cents` waits for an operator.
    pub fn requires_approval(&self, amount_cents: u64) -> bool {
        amount_cents >= self.approval_threshold_cents
    }

    /// The AwaitApproval task's own `TimeoutSeconds`: the window plus two heartbeats. The
    /// keeper closes the window at its deadline (stored on the order); this backstop fires only
    /// when nothing did, and late enough that a decision recorded just before the deadline,
    /// whose answer was lost, is applied by the task re-issued after its heartbeat lapsed.
    pub fn approval_task_timeout(&self) -> Duration {
        let window = self.approval_timeout.as_secs().max(1);
        let heartbeat = self.approval_heartbeat.as_secs().max(1);
        Duration::from_secs(window + 2 * heartbeat)
    }

    /// Refuses settings AWS would refuse or under which the window would not hold: a heartbeat
    /// not shorter than the window (Step Functions requires `HeartbeatSeconds` below
    /// `TimeoutSeconds`), or so short that the task re-issued each time a heartbeat lapses
    /// could use up the definition's `heartbeat_retries` before the window closes.
    pub fn check(&self, heartbeat_retries: u32) -> Result<(), String> {
        let window = self.approval_timeout.as_secs().max(1);
        let heartbeat = self.approval_heartbeat.as_secs().max(1);
        if heartbeat >= window {
            return Err(format!(
                "the approval heartbeat ({heartbeat} s) must be shorter than the approval \
                 window ({window} s)"
            ));
        }
        // Each lapse takes at least a heartbeat; the backstop adds two more.
        let lapses = window / heartbeat + 3;
        if lapses > u64::from(heartbeat_retries) {
            return Err(format!(
                "an approval window of {window} s with a heartbeat of {heartbeat} s could see \
                 {lapses} lapsed heartbeats, more than AwaitApproval retries \
                 ({heartbeat_retries}): raise --approval-heartbeat to at least {} s",
                window.div_ceil(u64::from(heartbeat_retries).saturating_sub(3).max(1))
            ));
        }
        Ok(())
    }
}

/// The execution input of one order's saga.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SagaInput {
    pub order_id: OrderId,
    pub amount_cents: u64,
    pub currency: String,
    pub requires_approval: bool,
    /// `AwaitApproval`'s `TimeoutSecondsPath`: a backstop past the approval window (the window
    /// plus two heartbeats), for when nothing closes the window in time. Executions started
    /// before windows were fixed on the order have the window itself here.
    pub approval_timeout_seconds: u64,
    /// `AwaitApproval`'s `HeartbeatSecondsPath`, at least 1.
    pub approval_heartbeat_seconds: u64,
    /// The approval window, handed to the AwaitApproval step, which fixes its deadline on the
    /// order when it first parks the token. Absent in executions started before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_window_seconds: Option<u64>,
}

impl SagaInput {
    /// The input of `order`'s saga under `settings` (the order decided `requires_approval`
    /// when it was placed; a settings change later does not move it).
    pub fn new(order: &NewOrder, settings: &SagaSettings) -> SagaInput {
        SagaInput {
            order_id: order.order_id.clone(),
            amount_cents: order.amount_cents,
            currency: order.currency.clone(),
            requires_approval: order.requires_approval,
            approval_timeout_seconds: settings.approval_task_timeout().as_secs(),
            approval_heartbeat_seconds: settings.approval_heartbeat.as_secs().max(1),
            approval_window_seconds: Some(settings.approval_timeout.as_secs().max(1)),
        }
    }

    /// As the JSON `StartExecution` takes.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("the saga input serializes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::definition::{activity_substitutions, render};
    use serde_json::json;

    fn input() -> SagaInput {
        SagaInput {
            order_id: OrderId::parse("ord-1").unwrap(),
            amount_cents: 2_500,
            currency: "EUR".into(),
            requires_approval: false,
            approval_timeout_seconds: 70,
            approval_heartbeat_seconds: 5,
            approval_window_seconds: Some(60),
        }
    }

    #[test]
    fn the_input_keeps_the_field_names_executions_were_started_with() {
        assert_eq!(
            input().to_json(),
            json!({
                "orderId": "ord-1",
                "amountCents": 2500,
                "currency": "EUR",
                "requiresApproval": false,
                "approvalTimeoutSeconds": 70,
                "approvalHeartbeatSeconds": 5,
                "approvalWindowSeconds": 60,
            })
        );
    }

    #[test]
    fn the_approval_task_outlives_the_window_by_two_heartbeats() {
        let settings = SagaSettings {
            approval_threshold_cents: 1,
            approval_timeout: Duration::from_secs(600),
            approval_heartbeat: Duration::from_secs(30),
        };
        assert_eq!(settings.approval_task_timeout(), Duration::from_secs(660));
    }

    #[test]
    fn a_heartbeat_must_be_shorter_than_the_window_and_fit_the_retries() {
        let settings = |window: u64, heartbeat: u64| SagaSettings {
            approval_threshold_cents: 1,
            approval_timeout: Duration::from_secs(window),
            approval_heartbeat: Duration::from_secs(heartbeat),
        };
        assert!(settings(600, 30).check(5000).is_ok());
        assert!(SagaSettings::default().check(5000).is_ok());
        let e = settings(60, 60).check(5000).unwrap_err();
        assert!(e.contains("shorter than the approval window"), "{e}");
        assert!(settings(60, 90).check(5000).is_err());
        // 30 days at 5 s: 518,400 lapses would not fit 5,000 retries.
        let e = settings(30 * 86_400, 5).check(5000).unwrap_err();
        assert!(
            e.contains("raise --approval-heartbeat to at least 519 s"),
            "{e}"
        );
        assert!(settings(30 * 86_400, 519).check(5000).is_ok());
    }

    /// Every top-level `$.field` the definition reads is a field of [`SagaInput`] or one that a
    /// state or a Catch writes with its `ResultPath`.
    #[test]
    fn every_input_path_the_definition_reads_is_a_field_of_the_input() {
        let text = render(&activity_substitutions(|n| {
            format!("arn:aws:states:us-east-1:123456789012:activity:{n}")
        }))
        .unwrap();
        let def: Value = serde_json::from_str(&text).unwrap();
        let fields: Vec<String> = input()
            .to_json()
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        let (mut read, mut written) = (Vec::new(), Vec::new());
        collect_paths(&def["States"], &mut read, &mut written);
        assert!(
            read.iter().any(|p| p == "approvalTimeoutSeconds"),
            "{read:?}"
        );
        for field in read {
            assert!(
                fields.contains(&field) || written.contains(&field),
                "the definition reads $.{field}, which the saga input does not have"
            );
        }
    }

    /// The first field of every `$.…` path in `value`: into `written` when it is a
    /// `ResultPath` (the state writes it), else into `read`.
    fn collect_paths(value: &Value, read: &mut Vec<String>, written: &mut Vec<String>) {
        let field = |s: &str| {
            s.strip_prefix("$.")
                .and_then(|rest| rest.split(['.', '[']).next())
                .filter(|f| !f.is_empty())
                .map(str::to_owned)
        };
        match value {
            Value::String(s) => read.extend(field(s)),
            Value::Array(items) => items.iter().for_each(|v| collect_paths(v, read, written)),
            Value::Object(map) => {
                for (key, v) in map {
                    match (key.as_str(), v.as_str()) {
                        ("ResultPath", Some(path)) => written.extend(field(path)),
                        _ => collect_paths(v, read, written),
                    }
                }
            }
            _ => {}
        }
    }
}
