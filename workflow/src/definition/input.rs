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
}

/// The execution input of one order's saga.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SagaInput {
    pub order_id: OrderId,
    pub amount_cents: u64,
    pub currency: String,
    pub requires_approval: bool,
    /// The approval window (`AwaitApproval`'s `TimeoutSecondsPath`), at least 1.
    pub approval_timeout_seconds: u64,
    /// `AwaitApproval`'s `HeartbeatSecondsPath`, at least 1.
    pub approval_heartbeat_seconds: u64,
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
            approval_timeout_seconds: settings.approval_timeout.as_secs().max(1),
            approval_heartbeat_seconds: settings.approval_heartbeat.as_secs().max(1),
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
            approval_timeout_seconds: 60,
            approval_heartbeat_seconds: 5,
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
                "approvalTimeoutSeconds": 60,
                "approvalHeartbeatSeconds": 5,
            })
        );
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
