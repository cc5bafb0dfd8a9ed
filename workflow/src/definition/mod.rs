//! The saga's state machine definition, `order_saga.asl.json`: the one definition deployed to
//! AWS Step Functions and run by the embedded engine. Its Task resources are `${…}`
//! placeholders (CloudFormation `DefinitionSubstitutions` syntax) for the activity ARNs. Beside
//! it, what the definition's paths and matchers name: its input ([`SagaInput`]) and the error
//! names its steps report ([`ErrorName`]).

mod errors;
mod input;

pub use errors::ErrorName;
pub use input::{SagaInput, SagaSettings};

use std::collections::HashMap;
use std::sync::OnceLock;

/// The definition as checked in, placeholders and all.
pub const TEMPLATE: &str = include_str!("../../order_saga.asl.json");

/// The name the saga's state machine is registered under.
pub const STATE_MACHINE_NAME: &str = "fulfillment-order-saga";

/// The Task state that waits for an operator's decision; its `TimeoutSecondsPath` is the
/// approval window, and only a heartbeat timeout is retried there.
pub const APPROVAL_STATE: &str = "AwaitApproval";

/// Declares the saga's activities, one line each: the variant (which is also the Task state's
/// name and, with `ActivityArn` appended, its placeholder in the definition) and the activity's
/// name (the last part of its ARN).
macro_rules! activities {
    ($($variant:ident => $name:literal,)+) => {
        /// The saga's activities: each with its placeholder in the definition and its name.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Activity {
            $($variant,)+
        }

        impl Activity {
            pub const ALL: [Activity; [$(stringify!($variant)),+].len()] =
                [$(Activity::$variant),+];

            /// The placeholder in the definition (without `${` `}`).
            pub fn placeholder(self) -> &'static str {
                match self {
                    $(Activity::$variant => concat!(stringify!($variant), "ActivityArn"),)+
                }
            }

            /// The Task state that runs it: the variant's name.
            pub fn state(self) -> &'static str {
                match self {
                    $(Activity::$variant => stringify!($variant),)+
                }
            }

            /// The activity's name (the last part of its ARN).
            pub fn name(self) -> &'static str {
                match self {
                    $(Activity::$variant => $name,)+
                }
            }
        }
    };
}

activities! {
    ReserveInventory => "fulfillment-reserve-inventory",
    ChargePayment => "fulfillment-charge-payment",
    AwaitApproval => "fulfillment-await-approval",
    CreateShipment => "fulfillment-create-shipment",
    RefundPayment => "fulfillment-refund-payment",
    ReleaseInventory => "fulfillment-release-inventory",
    RecordCompensationFailure => "fulfillment-record-compensation-failure",
}

impl Activity {
    /// Activities no state of the current definition runs, still served for executions started
    /// under an older one (a definition update leaves running executions on their own version,
    /// on AWS as in the engine). `RecordCompensationFailure` was the state compensations went to
    /// when they gave up; now each fails at its own state, so a redrive resumes there.
    pub const RETIRED: [Activity; 1] = [Activity::RecordCompensationFailure];

    /// Run by a state of the current definition.
    pub fn is_current(self) -> bool {
        !Activity::RETIRED.contains(&self)
    }
}

/// How many retries `state` makes of a transient error (`Store.Unavailable` and its kin): the
/// `MaxAttempts` of its retrier that matches `Store.Unavailable`, read from the definition, so a
/// step can tell its last attempt (`$$.State.RetryCount` equal to it). 0 for a state with none.
pub fn transient_retries(state: &str) -> u32 {
    static DEFINITION: OnceLock<serde_json::Value> = OnceLock::new();
    let def =
        DEFINITION.get_or_init(|| serde_json::from_str(TEMPLATE).expect("the definition is JSON"));
    let transient = ErrorName::StoreUnavailable.as_str();
    def["States"][state]["Retry"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| {
            r["ErrorEquals"]
                .as_array()
                .is_some_and(|e| e.iter().any(|e| e == transient))
        })
        // Step Functions' default when a retrier names none.
        .map_or(0, |r| r["MaxAttempts"].as_u64().unwrap_or(3))
        .try_into()
        .unwrap_or(u32::MAX)
}

/// How many times AwaitApproval re-issues its task when a heartbeat lapses: the `MaxAttempts`
/// of its retrier on `States.HeartbeatTimeout`, read from the definition. The approval window
/// must fit (see `SagaSettings::check`).
pub fn heartbeat_retries() -> u32 {
    let def: serde_json::Value = serde_json::from_str(TEMPLATE).expect("the definition is JSON");
    def["States"][APPROVAL_STATE]["Retry"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["ErrorEquals"] == serde_json::json!(["States.HeartbeatTimeout"]))
        .map_or(0, |r| r["MaxAttempts"].as_u64().unwrap_or(3))
        .try_into()
        .unwrap_or(u32::MAX)
}

/// Fills in every `${Name}` placeholder. A placeholder without a value is an error, so a
/// definition never reaches a workflow service half rendered.
pub fn render(substitutions: &HashMap<&str, String>) -> Result<String, String> {
    let mut out = String::with_capacity(TEMPLATE.len() + 512);
    let mut rest = TEMPLATE;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after.find('}').ok_or("unterminated ${ in the definition")?;
        let name = &after[..end];
        let value = substitutions
            .get(name)
            .ok_or_else(|| format!("no value for ${{{name}}}"))?;
        out.push_str(value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The substitutions for activity ARNs made by `arn_of(activity name)`.
pub fn activity_substitutions(arn_of: impl Fn(&str) -> String) -> HashMap<&'static str, String> {
    Activity::ALL
        .iter()
        .map(|a| (a.placeholder(), arn_of(a.name())))
        .collect()
}

/// The definition with every activity placeholder replaced by that activity's ARN.
pub fn render_with(activity_arns: &HashMap<Activity, String>) -> Result<String, String> {
    let by_name: HashMap<&str, &str> = activity_arns
        .iter()
        .map(|(a, arn)| (a.name(), arn.as_str()))
        .collect();
    let missing = Activity::ALL
        .iter()
        .find(|a| !by_name.contains_key(a.name()));
    if let Some(a) = missing {
        return Err(format!("no ARN for the activity {}", a.name()));
    }
    render(&activity_substitutions(|name| by_name[name].to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered() -> String {
        render(&activity_substitutions(|n| {
            format!("arn:aws:states:us-east-1:123456789012:activity:{n}")
        }))
        .unwrap()
    }

    #[test]
    fn every_placeholder_is_an_activity() {
        let text = rendered();
        assert!(!text.contains("${"));
        for a in Activity::ALL {
            let named = text.contains(&format!(":activity:{}\"", a.name()));
            assert_eq!(named, a.is_current(), "{a:?}");
        }
    }

    #[test]
    fn every_activity_is_run_by_the_task_state_of_its_name() {
        let def: serde_json::Value = serde_json::from_str(&rendered()).unwrap();
        for a in Activity::ALL.into_iter().filter(|a| a.is_current()) {
            let state = &def["States"][format!("{a:?}")];
            assert_eq!(state["Type"], "Task", "{a:?}");
            assert!(
                state["Resource"]
                    .as_str()
                    .is_some_and(|r| r.ends_with(&format!(":activity:{}", a.name()))),
                "{a:?}"
            );
        }
    }

    #[test]
    fn a_missing_substitution_is_an_error() {
        let mut subs = activity_substitutions(|n| n.to_owned());
        subs.remove("ChargePaymentActivityArn");
        assert!(
            render(&subs)
                .unwrap_err()
                .contains("ChargePaymentActivityArn")
        );
    }

    #[test]
    fn the_rendered_definition_is_valid_asl() {
        engine::asl::parse(&rendered()).expect("the saga definition validates");
    }

    /// Compensations (the states a Catch leads to, and on from them) have no Catch: one that
    /// gives up fails the execution at its own state, where a redrive resumes.
    const COMPENSATIONS: [&str; 2] = ["ReleaseInventory", "RefundPayment"];

    #[test]
    fn every_task_has_timeouts_and_retries_and_only_forward_ones_catch() {
        let def: serde_json::Value = serde_json::from_str(&rendered()).unwrap();
        for (name, state) in def["States"].as_object().unwrap() {
            if state["Type"] != "Task" {
                continue;
            }
            let timeout = state
                .get("TimeoutSeconds")
                .or(state.get("TimeoutSecondsPath"));
            let heartbeat = state
                .get("HeartbeatSeconds")
                .or(state.get("HeartbeatSecondsPath"));
            assert!(
                timeout.is_some() && heartbeat.is_some(),
                "{name} needs timeouts"
            );
            let catches = state["Catch"].as_array().is_some_and(|c| !c.is_empty());
            assert_eq!(
                catches,
                !COMPENSATIONS.contains(&name.as_str()),
                "{name}: Catch {}",
                state["Catch"]
            );
            assert!(
                state["Retry"].as_array().is_some_and(|r| !r.is_empty()),
                "{name} needs a Retry"
            );
        }
    }

    /// Every forward Catch starts the compensations at their first state, which runs them all.
    #[test]
    fn every_catch_leads_to_the_first_compensation() {
        let def: serde_json::Value = serde_json::from_str(&rendered()).unwrap();
        let states = &def["States"];
        for (name, state) in states.as_object().unwrap() {
            for c in state["Catch"].as_array().into_iter().flatten() {
                let mut next = c["Next"].as_str().unwrap();
                // A Pass state may name the failure first (the approval window's).
                while states[next]["Type"] == "Pass" {
                    next = states[next]["Next"].as_str().unwrap();
                }
                assert_eq!(next, COMPENSATIONS[0], "{name}");
            }
        }
        assert_eq!(states[COMPENSATIONS[0]]["Next"], COMPENSATIONS[1]);
        assert_eq!(states[COMPENSATIONS[1]]["Next"], "OrderCancelled");
    }

    /// A compensation retries what passes (an outage, a timeout) and gives up on the rest at
    /// once; each knows its last attempt from the retry count the definition hands it.
    #[test]
    fn compensations_retry_only_transient_errors_and_are_told_their_attempt() {
        let def: serde_json::Value = serde_json::from_str(&rendered()).unwrap();
        for name in COMPENSATIONS {
            let state = &def["States"][name];
            for retrier in state["Retry"].as_array().unwrap() {
                for e in retrier["ErrorEquals"].as_array().unwrap() {
                    let e = e.as_str().unwrap();
                    let transient = e == "States.Timeout"
                        || e == "States.HeartbeatTimeout"
                        || ErrorName::ALL
                            .iter()
                            .any(|n| n.as_str() == e && n.is_transient());
                    assert!(transient, "{name} retries {e}");
                }
            }
            assert_eq!(state["Parameters"]["attempt.$"], "$$.State.RetryCount");
            assert!(transient_retries(name) >= 10, "{name}");
        }
        // The refund is the last: it ends the order, the release does not.
        assert_eq!(
            def["States"]["ReleaseInventory"]["Parameters"]["finishesOrder"],
            false
        );
        assert_eq!(
            def["States"]["RefundPayment"]["Parameters"]["finishesOrder"],
            true
        );
        assert_eq!(transient_retries("OrderCancelled"), 0);
    }

    #[test]
    fn the_approval_state_waits_for_the_window_and_never_retries_its_timeout() {
        let def: serde_json::Value = serde_json::from_str(&rendered()).unwrap();
        let state = &def["States"][APPROVAL_STATE];
        assert_eq!(state["Type"], "Task");
        assert!(
            state["Resource"]
                .as_str()
                .unwrap()
                .ends_with(Activity::AwaitApproval.name())
        );
        assert_eq!(state["TimeoutSecondsPath"], "$.approvalTimeoutSeconds");
        // A decision that finds the state timed out with States.Timeout relies on this: the
        // window's end is final.
        for retrier in state["Retry"].as_array().unwrap() {
            let errors = retrier["ErrorEquals"].as_array().unwrap();
            assert!(
                !errors
                    .iter()
                    .any(|e| e == "States.Timeout" || e == "States.ALL"),
                "{retrier}"
            );
        }
    }

    /// A lapsed heartbeat (a crash lost the token) has a retrier of its own, which store outages
    /// do not share, with attempts enough for long windows and few enough events that the
    /// history stays under AWS's 25,000.
    #[test]
    fn the_approval_retries_lapsed_heartbeats_on_a_retrier_of_their_own() {
        let def: serde_json::Value = serde_json::from_str(&rendered()).unwrap();
        let retriers = def["States"][APPROVAL_STATE]["Retry"].as_array().unwrap();
        assert_eq!(
            retriers[0]["ErrorEquals"],
            serde_json::json!(["States.HeartbeatTimeout"])
        );
        let retries = heartbeat_retries();
        assert!(retries >= 1000, "{retries}");
        // Each lapse: ActivityTimedOut, ActivityScheduled, ActivityStarted.
        let others: u64 = retriers[1..]
            .iter()
            .map(|r| r["MaxAttempts"].as_u64().unwrap())
            .sum();
        assert!(3 * (u64::from(retries) + others) + 100 < 25_000);
        assert_eq!(
            def["States"][APPROVAL_STATE]["Parameters"]["windowSeconds.$"],
            "$.approvalWindowSeconds"
        );
    }

    #[test]
    fn forward_steps_retry_only_transient_errors() {
        let def: serde_json::Value = serde_json::from_str(&rendered()).unwrap();
        for name in [
            "ReserveInventory",
            "ChargePayment",
            "CreateShipment",
            "AwaitApproval",
        ] {
            for retrier in def["States"][name]["Retry"].as_array().unwrap() {
                for e in retrier["ErrorEquals"].as_array().unwrap() {
                    let e = e.as_str().unwrap();
                    let transient = e.starts_with("States.")
                        || ErrorName::ALL
                            .iter()
                            .any(|n| n.as_str() == e && n.is_transient());
                    assert!(transient && e != "States.ALL", "{name} retries {e}");
                }
            }
        }
    }

    /// A revoked key or a wrong URL must not cancel orders: every step that calls a provider
    /// retries `Provider.Misconfigured` with its own retrier, patiently enough for an operator
    /// to notice (`/readyz`, the metric) and fix it: days, not minutes.
    #[test]
    fn a_misconfigured_provider_is_retried_for_days_where_a_provider_is_called() {
        let def: serde_json::Value = serde_json::from_str(&rendered()).unwrap();
        let name = ErrorName::ProviderMisconfigured.as_str();
        for state in [
            "ChargePayment",
            "CreateShipment",
            "RefundPayment",
            "ReleaseInventory",
        ] {
            let retriers = def["States"][state]["Retry"].as_array().unwrap();
            let first_match = retriers
                .iter()
                .find(|r| {
                    r["ErrorEquals"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|e| e == name || e == "States.ALL")
                })
                .unwrap_or_else(|| panic!("{state} does not retry {name}"));
            assert_eq!(
                first_match["ErrorEquals"],
                serde_json::json!([name]),
                "{state}"
            );
            // With full jitter a wait averages half its cap: count that.
            let attempts = first_match["MaxAttempts"].as_f64().unwrap();
            let cap = first_match["MaxDelaySeconds"].as_f64().unwrap();
            let days = attempts * cap / 2.0 / 86_400.0;
            assert!(
                days >= 3.0,
                "{state} gives up on {name} after {days:.1} days"
            );
            // Each attempt adds a few history events; AWS ends an execution at 25,000.
            assert!(attempts * 4.0 < 25_000.0, "{state}: {attempts} attempts");
        }
    }
}
