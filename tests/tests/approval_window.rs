//! An operator's decision racing the end of the approval window, against the real binary: every
//! order ends as the answer to its decision said. A decision answered 200 took effect (an
//! approval ships, a rejection cancels with `Order.Rejected`); one answered 409
//! `approval-expired` did not, and the order is cancelled with `Order.ApprovalExpired` (the
//! keeper closed the window at the deadline fixed when it opened). Never a 200 on an order the
//! window then cancels.

use blackbox::{Db, Server, TOKEN, order, serve_command};
use chrono::{DateTime, Utc};
use reqwest::StatusCode;
use std::sync::Arc;
use std::time::Duration;

/// The approval window the service runs with.
const WINDOW: Duration = Duration::from_secs(2);
/// Decisions are sent from this long before each order's deadline to about as long after it,
/// in steps of `STEP`: the outer ones land clearly on either side, the inner ones race it.
const EARLIEST: Duration = Duration::from_millis(150);
const STEP: Duration = Duration::from_millis(15);
const ORDERS: u32 = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_racing_the_approval_window_is_answered_as_it_ends() {
    let db = Db::new();
    let mut cmd = serve_command(&db);
    cmd.args([
        "--operator-token",
        TOKEN,
        "--approval-timeout",
        "2s",
        "--approval-heartbeat",
        "1s",
    ]);
    let server = Arc::new(Server::spawn(cmd));
    server.stock("piano", u64::from(ORDERS), 450_000).await;

    let ids: Vec<String> = (0..ORDERS).map(|i| format!("window-{i}")).collect();
    for id in &ids {
        let placed = server
            .place(&order(id, "piano", 1, 450_000, "pm_card_visa"))
            .await;
        assert_eq!(placed.status, StatusCode::ACCEPTED, "{}", placed.text);
    }

    // Each order's deadline is fixed on it when its approval is first requested: the request
    // plus the window. Decisions go out around it.
    let mut decisions = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        let waiting = server.reaches(id, "AWAITING_APPROVAL").await;
        let time = |field: &str| -> DateTime<Utc> {
            waiting["approval"][field]
                .as_str()
                .and_then(|t| t.parse().ok())
                .unwrap_or_else(|| panic!("an approval {field}: {waiting}"))
        };
        let deadline = time("deadline");
        assert_eq!(
            (deadline - time("requestedAt")).to_std().ok(),
            Some(WINDOW),
            "{waiting}"
        );
        let at = deadline - EARLIEST + STEP * i as u32;
        let decision = if i % 2 == 0 { "approve" } else { "reject" };
        let (server, id) = (server.clone(), id.clone());
        decisions.push(tokio::spawn(async move {
            if let Ok(wait) = (at - Utc::now()).to_std() {
                tokio::time::sleep(wait).await;
            }
            let reply = server.decide(&id, decision).await;
            (id, decision, reply)
        }));
    }

    let (mut took_effect, mut expired, mut wrong) = (0, 0, Vec::new());
    for decision in decisions {
        let (id, decision, reply) = decision.await.unwrap();
        let end = server.settles(&id).await;
        let failure = end["failure"]["error"].as_str().unwrap_or_default();
        let consistent = match (reply.status, reply.problem().as_deref()) {
            (StatusCode::OK, _) if decision == "approve" => {
                took_effect += 1;
                end["status"] == "COMPLETED" && end["approval"]["decision"] == "approve"
            }
            (StatusCode::OK, _) => {
                took_effect += 1;
                end["status"] == "CANCELLED" && failure == "Order.Rejected"
            }
            (StatusCode::CONFLICT, Some("approval-expired")) => {
                expired += 1;
                end["status"] == "CANCELLED"
                    && failure == "Order.ApprovalExpired"
                    && end["failure"]["cause"]
                        .as_str()
                        .is_some_and(|c| c.starts_with("the approval window closed at "))
                    && end["approval"]["decision"].is_null()
            }
            _ => false,
        };
        if !consistent {
            wrong.push(format!(
                "{id}: {decision} answered {} {}, yet the order ended {end}",
                reply.status, reply.text
            ));
        }
    }
    eprintln!("{took_effect} decisions took effect, {expired} came too late");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));

    Arc::into_inner(server).unwrap().stop();
}
