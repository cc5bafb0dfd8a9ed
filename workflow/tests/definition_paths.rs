//! Every route of the order saga's definition (`order_saga.asl.json`), driven in virtual time by
//! the engine's pure interpreter: no SQLite, no workers, no real clock. The harness plays the
//! driver and the workers: it answers each scheduled task with a success, a failure or a
//! timeout, fires retry timers at their due time, and reads the outcome and the states entered.

#[path = "definition_paths/harness.rs"]
mod harness;

use harness::{
    APPROVAL_HEARTBEAT, APPROVAL_TIMEOUT, Execution, cause_of, compensations, forward, input,
    is_timeout, recorded, retrier,
};
use serde_json::json;
use workflow::ErrorName;
use workflow::definition::{APPROVAL_STATE, Activity};

/// The states a cancelled saga ends with: every compensation, then the Fail state.
fn cancellation() -> Vec<&'static str> {
    let mut path = compensations().to_vec();
    path.push("OrderCancelled");
    path
}

/// The cause the definition gives the approval window's timeout (Step Functions gives none).
const WINDOW_CLOSED: &str = "the approval window closed before an operator's decision took effect";

/// Forward states entered up to and including `state`, for a small or large order.
/// The forward steps run in the registry's order; the approval is behind the `NeedsApproval`
/// Choice, which only large orders pass.
fn forward_until(state: &str, large: bool) -> Vec<&'static str> {
    let mut path = Vec::new();
    for step in forward() {
        if step == APPROVAL_STATE {
            path.push("NeedsApproval");
            if !large {
                continue;
            }
        }
        path.push(step);
    }
    let end = path
        .iter()
        .position(|s| *s == state)
        .unwrap_or_else(|| panic!("{state} is not on the forward path"));
    path.truncate(end + 1);
    path
}

fn cancelled_after(state: &str, large: bool) -> Vec<&'static str> {
    let mut path = forward_until(state, large);
    path.extend(cancellation());
    path
}

// ---- the happy paths ---------------------------------------------------------------------------

#[test]
fn small_order_reserves_charges_ships_and_completes() {
    let mut x = Execution::start(input(false));
    x.run_to_end();
    // The registry's order, which the definition runs.
    let mut path = forward_until("CreateShipment", false);
    path.push("OrderCompleted");
    assert_eq!(x.entered(), path);
    let output = x.output();
    assert_eq!(output["orderId"], "o-1");
    assert_eq!(output["reservation"], json!({"reserved": true}));
    assert_eq!(output["payment"]["chargeId"], "ch_1");
    assert_eq!(output["shipment"]["trackingNumber"], "1ZTEST");
    assert!(output.get("approval").is_none());
    assert!(output.get("failure").is_none());
    assert!(x.pending_timers().is_empty());
    assert!(x.open_tasks().is_empty());
}

#[test]
fn every_forward_task_gets_the_order_id_and_its_own_timeouts() {
    let mut x = Execution::start(input(false));
    x.run_to_end();
    let tasks = x.scheduled();
    // Every forward step but the approval, which a small order skips.
    assert_eq!(tasks.len(), forward().len() - 1);
    for t in tasks {
        assert_eq!(t.input, json!({"orderId": "o-1"}), "{}", t.state_name);
        assert!(t.resource.ends_with(&format!(
            ":activity:{}",
            harness::activity_of(&t.state_name)
        )));
        assert_eq!(
            (t.timeout_seconds, t.heartbeat_seconds),
            (Some(120), Some(20)),
            "{}",
            t.state_name
        );
    }
}

#[test]
fn large_order_waits_for_approval_with_the_input_timeouts_then_completes() {
    let mut x = Execution::start(input(true));
    x.forward_to("AwaitApproval");
    let task = x.task("AwaitApproval");
    assert_eq!(
        task.input,
        json!({"orderId": "o-1", "windowSeconds": APPROVAL_TIMEOUT - 2 * APPROVAL_HEARTBEAT})
    );
    assert_eq!(task.timeout_seconds, Some(APPROVAL_TIMEOUT));
    assert_eq!(task.heartbeat_seconds, Some(APPROVAL_HEARTBEAT));
    // The heartbeat clock starts when the approval worker takes the task.
    let started = x.take("AwaitApproval");
    assert!(
        started.contains(&engine::core::Action::StartHeartbeat {
            token: task.token.clone(),
            heartbeat_seconds: APPROVAL_HEARTBEAT,
        }),
        "{started:?}"
    );
    x.run_to_end();
    let mut path = forward_until("CreateShipment", true);
    path.push("OrderCompleted");
    assert_eq!(x.entered(), path);
    assert_eq!(x.output()["approval"], json!({"decision": "approve"}));
}

// ---- forward failures and their compensations --------------------------------------------------

/// Fails `state` with `error` once, lets the compensations succeed, and checks the route and
/// the outcome: the execution fails with the error and cause that started the compensation.
fn compensated(state: &str, error: &str, large: bool) -> Execution {
    let mut x = Execution::start(input(large));
    x.forward_to(state);
    x.fault(state, error);
    assert!(
        x.pending_timers().is_empty(),
        "{state}: {error} must not be retried"
    );
    let failure = harness::catch_output(error);
    let release = x.task("ReleaseInventory");
    assert_eq!(
        release.input,
        json!({"orderId": "o-1", "failure": failure, "attempt": 0, "finishesOrder": false})
    );
    x.complete("ReleaseInventory");
    let refund = x.task("RefundPayment");
    assert_eq!(
        refund.input,
        json!({"orderId": "o-1", "failure": failure, "attempt": 0, "finishesOrder": true})
    );
    x.complete("RefundPayment");
    assert_eq!(
        x.entered(),
        cancelled_after(state, large),
        "{state}: {error}"
    );
    assert_eq!(
        x.failure(),
        (error.to_owned(), cause_of(error)),
        "{state}: {error}"
    );
    assert!(x.open_tasks().is_empty() && x.pending_timers().is_empty());
    x
}

#[test]
fn out_of_stock_at_reserve_is_compensated_and_fails_with_it() {
    compensated("ReserveInventory", "Inventory.OutOfStock", false);
}

#[test]
fn declined_charge_is_compensated_and_fails_with_it() {
    compensated("ChargePayment", "Payment.Declined", false);
}

#[test]
fn rejected_approval_is_compensated_and_fails_with_it() {
    compensated("AwaitApproval", "Order.Rejected", true);
}

#[test]
fn rejected_shipment_is_compensated_and_fails_with_it() {
    compensated("CreateShipment", "Shipment.Rejected", false);
    compensated("CreateShipment", "Shipment.Rejected", true);
}

#[test]
fn expired_approval_window_is_compensated_and_fails_saying_the_window_closed() {
    let mut x = Execution::start(input(true));
    x.forward_to("AwaitApproval");
    x.fault("AwaitApproval", "States.Timeout");
    assert!(x.pending_timers().is_empty(), "the window is never retried");
    // Step Functions gives a state timeout no cause; the definition names the one it was.
    let failure = json!({"Error": "States.Timeout", "Cause": WINDOW_CLOSED});
    assert_eq!(x.task("ReleaseInventory").input["failure"], failure);
    x.complete("ReleaseInventory");
    assert_eq!(x.task("RefundPayment").input["failure"], failure);
    x.complete("RefundPayment");
    let mut path = forward_until("AwaitApproval", true);
    path.push("ApprovalWindowClosed");
    path.extend(cancellation());
    assert_eq!(x.entered(), path);
    assert_eq!(
        x.failure(),
        ("States.Timeout".to_owned(), WINDOW_CLOSED.to_owned())
    );
    assert!(x.open_tasks().is_empty() && x.pending_timers().is_empty());
}

#[test]
fn every_non_transient_error_of_a_forward_step_is_caught_at_once() {
    for name in ErrorName::ALL.into_iter().filter(|e| !e.is_transient()) {
        for state in forward() {
            compensated(state, name.as_str(), state == "AwaitApproval");
        }
    }
}

#[test]
fn the_fail_state_reads_the_refund_output_not_the_catch() {
    // The Fail state's ErrorPath/CausePath read `$.cancellation`: what the last compensation
    // (the refund) answers is what the execution fails with.
    let mut x = Execution::start(input(false));
    x.forward_to("ChargePayment");
    x.fault("ChargePayment", "Payment.Declined");
    x.complete("ReleaseInventory");
    x.succeed(
        "RefundPayment",
        json!({"refunded": true, "error": "Payment.Declined", "cause": "handed on"}),
    );
    assert_eq!(
        x.failure(),
        ("Payment.Declined".to_owned(), "handed on".to_owned())
    );
}

// ---- retries of transient errors ---------------------------------------------------------------

/// Every transient error a forward step can report, by state.
const RETRIED: &[(&str, &str)] = &[
    ("ReserveInventory", "Store.Unavailable"),
    ("ReserveInventory", "States.Timeout"),
    ("ReserveInventory", "States.HeartbeatTimeout"),
    ("ChargePayment", "Payment.Unavailable"),
    ("ChargePayment", "Store.Unavailable"),
    ("ChargePayment", "States.Timeout"),
    ("ChargePayment", "States.HeartbeatTimeout"),
    ("AwaitApproval", "Store.Unavailable"),
    ("AwaitApproval", "States.HeartbeatTimeout"),
    ("CreateShipment", "Shipment.Unavailable"),
    ("CreateShipment", "Store.Unavailable"),
    ("CreateShipment", "States.Timeout"),
    ("CreateShipment", "States.HeartbeatTimeout"),
];

/// Retried for days, not minutes (an operator must fix it): too many attempts to walk through
/// `RETRIED`'s tests one by one.
const RETRIED_PATIENTLY: &[(&str, &str)] = &[
    ("ChargePayment", "Provider.Misconfigured"),
    ("CreateShipment", "Provider.Misconfigured"),
    ("ReleaseInventory", "Provider.Misconfigured"),
    ("RefundPayment", "Provider.Misconfigured"),
];

#[test]
fn every_transient_error_name_is_retried_where_a_step_reports_it() {
    for name in ErrorName::ALL.into_iter().filter(|e| e.is_transient()) {
        assert!(
            RETRIED
                .iter()
                .chain(RETRIED_PATIENTLY)
                .any(|(_, e)| *e == name.as_str()),
            "{name} is retried nowhere"
        );
    }
    for (state, error) in RETRIED.iter().chain(RETRIED_PATIENTLY) {
        assert!(retrier(state, error).is_some(), "{state} retries {error}");
    }
}

/// The tables above are what the registry declares: every transient error a forward step may
/// raise is walked in `RETRIED`, and every step that calls a provider survives its
/// misconfiguration in `RETRIED_PATIENTLY`.
#[test]
fn the_retry_tables_cover_every_declared_transient_error() {
    let misconfigured = ErrorName::ProviderMisconfigured;
    let mut missing = Vec::new();
    for a in Activity::ALL {
        let state = a.state();
        let raises = a.declaration().raised();
        for e in raises.filter(|e| e.is_transient() && *e != misconfigured) {
            if a.is_compensation() {
                if !COMPENSATION_TRANSIENT.contains(&e.as_str()) {
                    missing.push(format!("COMPENSATION_TRANSIENT: {e} ({state})"));
                }
            } else if !RETRIED.contains(&(state, e.as_str())) {
                missing.push(format!("RETRIED: ({state}, {e})"));
            }
        }
        let patient = RETRIED_PATIENTLY.contains(&(state, misconfigured.as_str()));
        if a.declaration().calls_a_provider() != patient {
            missing.push(format!("RETRIED_PATIENTLY: ({state}, {misconfigured})"));
        }
    }
    assert!(missing.is_empty(), "{missing:?}");
}

#[test]
fn a_misconfigured_provider_waits_through_many_attempts_and_then_the_order_goes_on() {
    for (state, error) in RETRIED_PATIENTLY {
        let r = retrier(state, error).unwrap();
        assert!(r.max_attempts >= 1_000, "{state}: {r:?}");
        let mut x = Execution::start(input(false));
        let compensation = compensations().contains(state);
        if compensation {
            x.forward_to("ChargePayment");
            x.fault("ChargePayment", "Payment.Declined");
            for before in compensations().into_iter().take_while(|c| c != state) {
                x.complete(before);
            }
        } else {
            x.forward_to(state);
        }
        for attempt in 0..50 {
            x.fault(state, error);
            x.fire_retry(state, error, attempt);
        }
        x.run_to_end();
        if compensation {
            assert_eq!(
                x.entered(),
                cancelled_after("ChargePayment", false),
                "{state}"
            );
            assert_eq!(
                x.failure().0,
                "Payment.Declined",
                "{state}: never given up meanwhile"
            );
        } else {
            let mut path = forward_until("CreateShipment", false);
            path.push("OrderCompleted");
            assert_eq!(x.entered(), path, "{state}: never compensated meanwhile");
            x.output();
        }
    }
}

#[test]
fn transient_errors_are_retried_with_backoff_then_compensated() {
    // The approval re-issues a lapsed heartbeat thousands of times (as often as the window
    // allows, see `SagaSettings::check`): too many to walk here. Its retrier's attempts are
    // checked by the definition's own tests; past them the Catch on States.Timeout closes the
    // window (`expired_approval_window_is_compensated_and_fails_saying_the_window_closed`).
    let walked = RETRIED
        .iter()
        .filter(|(s, e)| !(*s == "AwaitApproval" && *e == "States.HeartbeatTimeout"));
    for (state, error) in walked {
        let large = *state == "AwaitApproval";
        let mut x = Execution::start(input(large));
        x.forward_to(state);
        let r = retrier(state, error).unwrap();
        assert!(r.max_attempts >= 5, "{state}: {error}: {r:?}");
        let mut tokens = vec![x.task(state).token];
        for attempt in 0..r.max_attempts {
            x.fault(state, error);
            assert!(x.open_tasks().is_empty(), "{state}: waits out the back-off");
            x.fire_retry(state, error, attempt);
            let token = x.task(state).token;
            assert!(!tokens.contains(&token), "each attempt has a fresh token");
            tokens.push(token);
        }
        // The last attempt's failure is caught.
        x.fault(state, error);
        assert!(x.pending_timers().is_empty(), "{state}: {error}");
        x.run_to_end();
        assert_eq!(
            x.entered(),
            cancelled_after(state, large),
            "{state}: {error}"
        );
        assert_eq!(x.failure(), (recorded(error).to_string(), cause_of(error)));
        assert_eq!(
            x.scheduled_of(state).len() as u32,
            r.max_attempts + 1,
            "{state}: {error}"
        );
    }
}

#[test]
fn a_transient_error_that_clears_lets_the_saga_complete() {
    for (state, error) in RETRIED {
        let large = *state == "AwaitApproval";
        let mut x = Execution::start(input(large));
        x.forward_to(state);
        x.fault(state, error);
        x.fire_retry(state, error, 0);
        x.fault(state, error);
        x.fire_retry(state, error, 1);
        x.run_to_end();
        let mut path = forward_until("CreateShipment", large);
        path.push("OrderCompleted");
        assert_eq!(
            x.entered(),
            path,
            "{state}: {error}: retried without re-entering"
        );
        x.output();
    }
}

#[test]
fn a_transient_error_of_one_kind_does_not_use_up_the_retries_of_another() {
    // ChargePayment: Payment.Unavailable and States.Timeout share one retrier, so they share its
    // MaxAttempts: the attempts are counted per retrier, not per error name.
    let r = retrier("ChargePayment", "Payment.Unavailable").unwrap();
    let mut x = Execution::start(input(false));
    x.forward_to("ChargePayment");
    for attempt in 0..r.max_attempts {
        let error = if attempt % 2 == 0 {
            "Payment.Unavailable"
        } else {
            "States.Timeout"
        };
        x.fault("ChargePayment", error);
        x.fire_retry("ChargePayment", error, attempt);
    }
    x.fault("ChargePayment", "Payment.Unavailable");
    x.run_to_end();
    assert_eq!(x.failure().0, "Payment.Unavailable");
    assert_eq!(x.entered(), cancelled_after("ChargePayment", false));
}

#[test]
fn non_transient_errors_are_never_retried() {
    for (state, error) in [
        ("ChargePayment", "Payment.Declined"),
        ("ChargePayment", "Payment.IdempotencyKeyReused"),
        ("ReserveInventory", "Order.Invalid"),
        ("ChargePayment", "Order.Invalid"),
        ("AwaitApproval", "Order.Invalid"),
        ("CreateShipment", "Order.Invalid"),
        ("AwaitApproval", "States.Timeout"),
        ("ReserveInventory", "Payment.Unavailable"),
        ("ReserveInventory", "Shipment.Unavailable"),
        ("CreateShipment", "Payment.Unavailable"),
        ("ChargePayment", "Step.Failed"),
    ] {
        assert!(retrier(state, error).is_none(), "{state} retries {error}");
        let mut x = Execution::start(input(state == "AwaitApproval"));
        x.forward_to(state);
        x.fault(state, error);
        assert!(x.pending_timers().is_empty(), "{state}: {error}");
        x.task("ReleaseInventory");
        assert_eq!(x.scheduled_of(state).len(), 1);
    }
}

// ---- the approval token ------------------------------------------------------------------------

#[test]
fn a_lost_approval_token_is_reissued_fresh_and_the_stale_one_is_ignored() {
    let mut x = Execution::start(input(true));
    x.forward_to("AwaitApproval");
    let lost = x.task("AwaitApproval");
    x.take("AwaitApproval");
    // The worker parked nothing (a crash): no heartbeat comes, the task times out.
    x.fault("AwaitApproval", "States.HeartbeatTimeout");
    x.fire_retry("AwaitApproval", "States.HeartbeatTimeout", 0);
    let fresh = x.task("AwaitApproval");
    assert_ne!(fresh.token, lost.token);
    assert_eq!(fresh.timeout_seconds, Some(APPROVAL_TIMEOUT));
    assert_eq!(fresh.heartbeat_seconds, Some(APPROVAL_HEARTBEAT));
    assert_eq!(fresh.input, lost.input);
    // An answer on the lost token changes nothing.
    let stale = x.succeed_token(&lost.token, json!({"decision": "approve"}));
    assert!(stale.events.is_empty() && stale.actions.is_empty());
    let stale = x.fail_token(&lost.token, "Order.Rejected");
    assert!(stale.events.is_empty() && stale.actions.is_empty());
    assert_eq!(x.task("AwaitApproval").token, fresh.token);
    x.run_to_end();
    assert_eq!(
        x.entered().iter().filter(|s| *s == "AwaitApproval").count(),
        1,
        "retried inside the state"
    );
    assert_eq!(x.output()["approval"], json!({"decision": "approve"}));
}

#[test]
fn an_operator_may_reject_on_a_reissued_token() {
    let mut x = Execution::start(input(true));
    x.forward_to("AwaitApproval");
    x.fault("AwaitApproval", "States.HeartbeatTimeout");
    x.fire_retry("AwaitApproval", "States.HeartbeatTimeout", 0);
    x.fault("AwaitApproval", "Order.Rejected");
    x.run_to_end();
    assert_eq!(x.entered(), cancelled_after("AwaitApproval", true));
    assert_eq!(x.failure().0, "Order.Rejected");
}

// ---- compensations -----------------------------------------------------------------------------

/// The errors a compensation may meet that pass by themselves.
const COMPENSATION_TRANSIENT: [&str; 5] = [
    "Store.Unavailable",
    "Payment.Unavailable",
    "Shipment.Unavailable",
    "States.Timeout",
    "States.HeartbeatTimeout",
];

/// An execution whose charge was declined, at `compensation` (the compensations before it
/// done).
fn compensating_at(compensation: &str) -> Execution {
    let mut x = Execution::start(input(false));
    x.forward_to("ChargePayment");
    x.fault("ChargePayment", "Payment.Declined");
    for before in compensations()
        .into_iter()
        .take_while(|c| *c != compensation)
    {
        x.complete(before);
    }
    x
}

/// The states entered by an execution that gave up at `compensation`.
fn gave_up_at(compensation: &str) -> Vec<&'static str> {
    let mut path = forward_until("ChargePayment", false);
    let at = compensations()
        .iter()
        .position(|s| *s == compensation)
        .unwrap();
    path.extend(&compensations()[..=at]);
    path
}

#[test]
fn compensations_retry_transient_errors_telling_each_attempt_and_still_cancel() {
    for compensation in compensations() {
        let mut x = compensating_at(compensation);
        for (attempt, error) in COMPENSATION_TRANSIENT.into_iter().enumerate() {
            assert_eq!(
                x.task(compensation).input["attempt"],
                attempt,
                "{compensation}"
            );
            x.fault(compensation, error);
            x.fire_retry(compensation, error, attempt as u32);
        }
        assert_eq!(
            x.task(compensation).input["attempt"],
            COMPENSATION_TRANSIENT.len()
        );
        x.run_to_end();
        assert_eq!(x.entered(), cancelled_after("ChargePayment", false));
        assert_eq!(
            x.failure(),
            ("Payment.Declined".to_owned(), cause_of("Payment.Declined")),
            "{compensation}"
        );
        assert_eq!(
            x.scheduled_of(compensation).len(),
            COMPENSATION_TRANSIENT.len() + 1
        );
    }
}

/// A permanent error is not retried: the execution fails at the compensation's own state with
/// it, so a redrive resumes there (the step has recorded the incident on the order first).
#[test]
fn a_permanent_compensation_error_fails_the_execution_at_its_own_state_at_once() {
    for compensation in compensations() {
        for error in [
            "Step.Failed",
            "Order.Invalid",
            "Payment.Declined",
            "Payment.Invalid",
            "Payment.IdempotencyKeyReused",
            "Anything.Else",
        ] {
            assert!(
                retrier(compensation, error).is_none(),
                "{compensation} retries {error}"
            );
            let mut x = compensating_at(compensation);
            x.fault(compensation, error);
            assert_eq!(
                x.entered(),
                gave_up_at(compensation),
                "{compensation}: {error}"
            );
            assert_eq!(x.failure(), (error.to_owned(), cause_of(error)));
            assert_eq!(x.scheduled_of(compensation).len(), 1);
            assert!(x.open_tasks().is_empty() && x.pending_timers().is_empty());
        }
    }
}

/// A refund that fails for good comes after the release: the stock is back either way.
#[test]
fn a_failed_refund_still_releases_the_stock() {
    let mut x = compensating_at("RefundPayment");
    x.fault("RefundPayment", "Payment.Invalid");
    let entered = x.entered();
    assert!(
        entered.iter().any(|s| s == "ReleaseInventory"),
        "{entered:?}"
    );
    assert_eq!(x.failure().0, "Payment.Invalid");
}

#[test]
fn transient_errors_past_a_compensations_retries_fail_it_at_its_own_state() {
    for compensation in compensations() {
        let mut x = compensating_at(compensation);
        let r = retrier(compensation, "Store.Unavailable").expect("compensations retry");
        assert_eq!(
            r.max_attempts,
            workflow::definition::transient_retries(compensation),
            "what the step reads as its last attempt"
        );
        for attempt in 0..r.max_attempts {
            x.fault(compensation, "Store.Unavailable");
            x.fire_retry(compensation, "Store.Unavailable", attempt);
        }
        // The step is told this is its last attempt.
        assert_eq!(x.task(compensation).input["attempt"], r.max_attempts);
        x.fault(compensation, "Store.Unavailable");
        assert_eq!(x.entered(), gave_up_at(compensation));
        assert_eq!(x.failure().0, "Store.Unavailable");
        assert!(x.pending_timers().is_empty());
    }
}

/// What an operator's redrive does: the compensation that gave up runs again, from its own
/// state with its own input, told it is a first attempt again, and the saga ends as it would
/// have: cancelled with the failure that started the compensation.
#[test]
fn a_redrive_resumes_at_the_compensation_that_gave_up_and_cancels() {
    for compensation in compensations() {
        let mut x = compensating_at(compensation);
        x.fault(compensation, "Payment.Invalid");
        let gave_up = x.scheduled_of(compensation).pop().unwrap();
        x.redrive();
        let again = x.task(compensation);
        assert_ne!(again.token, gave_up.token);
        assert_eq!(
            again.input, gave_up.input,
            "{compensation}: the same input, attempt 0"
        );
        x.run_to_end();
        let mut path = gave_up_at(compensation);
        // The resumed state is entered again; the states before it are not.
        path.extend(
            cancelled_after("ChargePayment", false)
                .into_iter()
                .skip(path.len() - 1),
        );
        assert_eq!(x.entered(), path, "{compensation}");
        assert_eq!(x.failure().0, "Payment.Declined", "{compensation}");
        let releases = if compensation == "ReleaseInventory" {
            2
        } else {
            1
        };
        assert_eq!(x.scheduled_of("ReleaseInventory").len(), releases);
    }
}

// ---- random walks -----------------------------------------------------------------------------

/// A tiny deterministic generator (xorshift64*), so a failing walk is reproducible by its seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n
    }
}

#[test]
fn random_walks_end_completed_cancelled_or_failed_at_a_compensation_with_the_right_outcome() {
    let mut errors: Vec<&str> = ErrorName::ALL.iter().map(|e| e.as_str()).collect();
    errors.extend(["States.Timeout", "States.HeartbeatTimeout", "Anything.Else"]);
    let mut ends: std::collections::BTreeMap<String, usize> = Default::default();
    for seed in 1..=3_000u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let large = rng.below(2) == 1;
        let broken = rng.below(5) == 0;
        let mut x = Execution::start(input(large));
        // The error that started the compensation, and the cause it ends with, if any.
        let mut first_failure: Option<(String, String)> = None;
        let mut last_error = "";
        let mut steps = 0;
        while x.outcome().is_none() {
            steps += 1;
            assert!(steps < 5_000, "seed {seed}: never ends; {:?}", x.entered());
            if x.open_tasks().is_empty() {
                let timer = x.pending_timers()[0];
                x.fire(timer);
                continue;
            }
            let state = x.open_tasks()[0].state_name.clone();
            // Forward steps fail now and then, compensations more often; in some walks a
            // compensation is broken for good.
            let fails = match state.as_str() {
                "RefundPayment" | "ReleaseInventory" => broken || rng.below(3) == 0,
                _ => rng.below(4) == 0,
            };
            if !fails {
                x.complete(&state);
                continue;
            }
            let error = errors[rng.below(errors.len())];
            let retried = retrier(&state, error).is_some();
            let before = x.entered().len();
            last_error = error;
            x.fault(&state, error);
            if forward().contains(&state.as_str()) && x.pending_timers().is_empty() {
                first_failure.get_or_insert_with(|| {
                    // The approval window's timeout is named by the definition.
                    let cause = if state == "AwaitApproval" && is_timeout(error) {
                        WINDOW_CLOSED.to_owned()
                    } else {
                        cause_of(error)
                    };
                    (recorded(error).to_owned(), cause)
                });
            }
            if !retried {
                assert!(
                    x.pending_timers().is_empty(),
                    "seed {seed}: {state} retried {error}"
                );
                assert!(
                    x.entered().len() > before || x.outcome().is_some(),
                    "seed {seed}: {state} caught {error}, or gave up"
                );
            }
        }
        let entered = x.entered();
        let last = entered.last().unwrap().as_str();
        let compensating = entered
            .iter()
            .position(|s| s == compensations()[0])
            .unwrap_or(entered.len());
        assert!(
            entered[compensating..]
                .iter()
                .all(|s| !forward().contains(&s.as_str())),
            "seed {seed}: a forward step after the compensation began: {entered:?}"
        );
        assert_eq!(
            entered.iter().any(|s| s == "AwaitApproval"),
            large
                && entered
                    .iter()
                    .any(|s| s == "CreateShipment" || s == "AwaitApproval"),
            "seed {seed}: {entered:?}"
        );
        match last {
            "OrderCompleted" => {
                assert!(first_failure.is_none(), "seed {seed}");
                x.output();
            }
            "OrderCancelled" => {
                let failure = first_failure.clone().expect("a failure started it");
                assert_eq!(x.failure(), failure, "seed {seed}: {entered:?}");
                let tail = if failure.1 == WINDOW_CLOSED {
                    &entered[compensating - 1..]
                } else {
                    &entered[compensating..]
                };
                let expected: Vec<&str> = (failure.1 == WINDOW_CLOSED)
                    .then_some("ApprovalWindowClosed")
                    .into_iter()
                    .chain(cancellation())
                    .collect();
                assert_eq!(tail, expected, "seed {seed}");
            }
            compensation if compensations().contains(&compensation) => {
                // A compensation gave up: the execution fails at its state with its error.
                assert!(first_failure.is_some(), "seed {seed}");
                assert_eq!(x.failure().0, last_error, "seed {seed}: {entered:?}");
                assert_ne!(
                    last_error, "Provider.Misconfigured",
                    "seed {seed}: a misconfigured provider is retried for days"
                );
            }
            other => panic!("seed {seed}: ended in {other}: {entered:?}"),
        }
        assert!(x.open_tasks().is_empty() && x.pending_timers().is_empty());
        *ends.entry(last.to_owned()).or_default() += 1;
    }
    // The walks reach every end, often.
    for end in ["OrderCompleted", "OrderCancelled", "RefundPayment"] {
        assert!(ends.get(end).copied().unwrap_or(0) >= 100, "{ends:?}");
    }
}
