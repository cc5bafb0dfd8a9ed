//! The saga's state machine definition, `order_saga.asl.json`: the one definition deployed to
//! AWS Step Functions and run by the embedded engine. Its Task resources are `${…}`
//! placeholders (CloudFormation `DefinitionSubstitutions` syntax) for the activity ARNs. Beside
//! it, what the definition's paths and matchers name: its input ([`SagaInput`]) and the error
//! names its steps report ([`ErrorName`], declared in `step`). Its Task states are the steps of
//! the registry ([`Activity`], `crate::steps`), each named for its step.

mod input;

pub use crate::steps::Activity;
pub use input::{SagaInput, SagaSettings};
pub use step::ErrorName;

use std::collections::HashMap;
use std::sync::OnceLock;

/// The definition as checked in, placeholders and all.
pub const TEMPLATE: &str = include_str!("../../order_saga.asl.json");

/// The name the saga's state machine is registered under.
pub const STATE_MACHINE_NAME: &str = "fulfillment-order-saga";

/// The Task state that waits for an operator's decision; its `TimeoutSecondsPath` is the
/// approval window, and only a heartbeat timeout is retried there.
pub const APPROVAL_STATE: &str = "AwaitApproval";

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

/// The alias orders start through: at every start the service publishes its rendered
/// definition as a version and routes `live` to it, by the rules of [`crate::upgrade`].
/// Executions keep the version they started on.
pub const LIVE_ALIAS: &str = "live";

/// The description `live` gets when created (an operator's rollback replaces it with one that
/// starts with [`crate::upgrade::PINNED`]).
pub const LIVE_DESCRIPTION: &str = "where the service starts new orders";

/// What a version this build publishes says of itself: the build's version and the rendered
/// definition's SHA-256 (its first 16 hex digits), e.g. `fulfillment 0.2.0 definition
/// sha256:3f9a…`.
pub fn version_description(rendered: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(rendered.as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "fulfillment {} definition sha256:{hex}",
        env!("CARGO_PKG_VERSION")
    )
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
            assert!(named, "no state runs {a:?}");
        }
    }

    #[test]
    fn every_activity_is_run_by_the_task_state_of_its_name() {
        let def: serde_json::Value = serde_json::from_str(&rendered()).unwrap();
        for a in Activity::ALL {
            let state = &def["States"][a.state()];
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
    fn compensations() -> Vec<&'static str> {
        Activity::COMPENSATIONS.iter().map(|a| a.state()).collect()
    }

    /// Every Task state runs a step of the registry: a state without one could not be served.
    #[test]
    fn every_task_state_is_a_registered_step() {
        let def: serde_json::Value = serde_json::from_str(&rendered()).unwrap();
        let unregistered: Vec<_> = def["States"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(_, s)| s["Type"] == "Task")
            .map(|(name, _)| name.as_str())
            .filter(|name| Activity::of_state(name).is_none())
            .collect();
        assert!(unregistered.is_empty(), "no step for {unregistered:?}");
    }

    /// Each error a step declares is met at its state: a forward step's is retried or caught
    /// (a compensation then runs), a compensation's transient ones are retried and the rest
    /// fail the execution there, which is the one way a compensation gives up.
    #[test]
    fn every_declared_error_is_retried_or_caught_at_its_state() {
        let def: serde_json::Value = serde_json::from_str(&rendered()).unwrap();
        let matched = |list: &serde_json::Value, e: ErrorName| {
            list.as_array().into_iter().flatten().any(|r| {
                r["ErrorEquals"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|x| x == e.as_str() || x == "States.ALL")
            })
        };
        let mut unmet = Vec::new();
        for a in Activity::ALL {
            let state = &def["States"][a.state()];
            for e in a.declaration().raised() {
                let retried = matched(&state["Retry"], e);
                let met = if a.is_compensation() {
                    retried || !e.is_transient()
                } else {
                    retried || matched(&state["Catch"], e)
                };
                if !met {
                    unmet.push(format!("{}: {e}", a.state()));
                }
            }
        }
        assert!(unmet.is_empty(), "neither retried nor caught: {unmet:?}");
    }

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
                !compensations().contains(&name.as_str()),
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
                assert_eq!(next, compensations()[0], "{name}");
            }
        }
        let order = compensations();
        for pair in order.windows(2) {
            assert_eq!(states[pair[0]]["Next"], pair[1]);
        }
        assert_eq!(states[order[order.len() - 1]]["Next"], "OrderCancelled");
    }

    /// A compensation retries what passes (an outage, a timeout) and gives up on the rest at
    /// once; each knows its last attempt from the retry count the definition hands it.
    #[test]
    fn compensations_retry_only_transient_errors_and_are_told_their_attempt() {
        let def: serde_json::Value = serde_json::from_str(&rendered()).unwrap();
        for name in compensations() {
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
        // The last one ends the order, the others do not.
        let order = compensations();
        for (i, name) in order.iter().enumerate() {
            assert_eq!(
                def["States"][name]["Parameters"]["finishesOrder"],
                i + 1 == order.len(),
                "{name}"
            );
        }
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
        for name in Activity::FORWARD.map(Activity::state) {
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
        let callers = Activity::ALL
            .into_iter()
            .filter(|a| a.declaration().calls_a_provider());
        for state in callers.map(Activity::state) {
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
