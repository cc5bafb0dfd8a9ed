//! The client-side oracle: what the clients saw must agree with what each order was planned to
//! be, with every answer it got, and with the stock. Each disagreement is one violation line.

use super::driver::{Record, settled};
use super::service::Answer;
use super::workload::{Payment, Plan, Shipping, Workload};
use reqwest::StatusCode;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// How an order must end.
#[derive(Debug, PartialEq, Eq)]
enum End {
    Completed,
    Cancelled(&'static str),
}

/// The violations of one order.
pub fn check_order(plan: &Plan, record: Option<&Record>, workload: &Workload) -> Vec<String> {
    let id = &plan.id;
    let mut wrong = Vec::new();
    let Some(record) = record else {
        return vec![format!("{id}: never placed")];
    };
    placements(plan, record, &mut wrong);
    let Some(view) = record.last.as_ref().filter(|v| settled(v)) else {
        let last = record
            .last
            .as_ref()
            .map_or("never read".into(), Value::to_string);
        wrong.push(format!("{id}: not ended: {last}"));
        return wrong;
    };
    let mut say = |what: String| wrong.push(format!("{id}: {what}; it ended {view}"));

    if record.charge_ids.len() > 1 {
        say(format!("charged more than once: {:?}", record.charge_ids));
    }
    if view["amountCents"] != plan.amount_cents() {
        say(format!(
            "amount is not the first body's {}",
            plan.amount_cents()
        ));
    }
    if let Some(other) = &record.conflicting
        && !(other.status == StatusCode::CONFLICT
            && other.problem().as_deref() == Some("order-conflict"))
    {
        say(format!(
            "another body under its id answered {} {}",
            other.status, other.text
        ));
    }
    let failure = view["failure"]["error"].as_str();
    let end = match failure {
        Some("Inventory.OutOfStock") => {
            let short = plan
                .lines
                .iter()
                .any(|l| workload.demand[&l.sku] > workload.stock[&l.sku]);
            if !short {
                say("out of stock, though its SKUs had stock for every order".into());
            }
            End::Cancelled("Inventory.OutOfStock")
        }
        _ if plan.payment == Payment::Declined => End::Cancelled("Payment.Declined"),
        // The saga gave up on a charge the provider kept answering "still running"; it may
        // also have landed in time for a retry to see it.
        Some("Payment.Unavailable") if plan.charge_lands_late => {
            End::Cancelled("Payment.Unavailable")
        }
        _ if plan.is_large() => match approval(record) {
            Ok(end) => end,
            Err(what) => {
                say(what);
                return wrong;
            }
        },
        _ if plan.shipping == Shipping::Rejected => End::Cancelled("Shipment.Rejected"),
        _ => End::Completed,
    };
    match end {
        End::Completed => {
            if view["status"] != "COMPLETED" || view["executionStatus"] != "SUCCEEDED" {
                say("should have completed".into());
            } else if view["payment"]["amountCents"] != plan.amount_cents()
                || view["shipment"].is_null()
                || view["reservation"]["status"] != "SHIPPED"
                || reserved(&view["reservation"]) != ordered(plan)
            {
                say("completed without its one charge, its shipment or its stock".into());
            }
        }
        End::Cancelled(error) => {
            if view["status"] != "CANCELLED"
                || view["executionStatus"] != "FAILED"
                || failure != Some(error)
            {
                say(format!("should have been cancelled with {error}"));
            } else if !view["shipment"].is_null()
                || !(view["reservation"].is_null() || view["reservation"]["status"] == "RELEASED")
            {
                say("cancelled, yet it holds stock or a shipment".into());
            } else if matches!(error, "Inventory.OutOfStock" | "Payment.Declined")
                && !record.charge_ids.is_empty()
            {
                say(format!("cancelled with {error}, yet charged"));
            }
        }
    }
    wrong
}

/// Every placement answered 202 with the one execution, and at most one was not a replay (none,
/// when the first answer was lost to a kill and its retry replayed it).
fn placements(plan: &Plan, record: &Record, wrong: &mut Vec<String>) {
    let id = &plan.id;
    let arns: BTreeSet<Option<String>> = record
        .placements
        .iter()
        .map(|a| a.json()["executionArn"].as_str().map(str::to_owned))
        .collect();
    for answer in &record.placements {
        if answer.status != StatusCode::ACCEPTED {
            wrong.push(format!(
                "{id}: its own body answered {} {}",
                answer.status, answer.text
            ));
        }
    }
    let fresh = record
        .placements
        .iter()
        .filter(|a| a.status == StatusCode::ACCEPTED && !a.replayed)
        .count();
    if fresh > 1 {
        wrong.push(format!("{id}: {fresh} placements were not replays"));
    }
    let named = format!(":execution:fulfillment-order-saga:{id}");
    let one = arns.len() == 1
        && arns
            .iter()
            .all(|a| a.as_deref().is_some_and(|a| a.ends_with(&named)));
    if !one {
        wrong.push(format!("{id}: placements named executions {arns:?}"));
    }
}

/// The end the decisions' answers call for: the one decision answered 200 applies (approve
/// ships, reject cancels); none answered 200 means the window closed (the keeper failed the
/// approval with `Order.ApprovalExpired` at its deadline).
fn approval(record: &Record) -> Result<End, String> {
    let mut took_effect = BTreeSet::new();
    let mut expired = false;
    for (decision, answer) in &record.decisions {
        match (answer.status, answer.problem().as_deref()) {
            (StatusCode::OK, _) => {
                took_effect.insert(*decision);
            }
            (StatusCode::CONFLICT, Some("approval-conflict")) => {}
            (StatusCode::CONFLICT, Some("approval-expired")) => expired = true,
            _ => {
                return Err(format!(
                    "{decision} answered {} {}",
                    answer.status, answer.text
                ));
            }
        }
    }
    let answers = || answers(&record.decisions);
    match (took_effect.len(), expired) {
        (0, _) => Ok(End::Cancelled("Order.ApprovalExpired")),
        (1, false) if took_effect.contains("approve") => Ok(End::Completed),
        (1, false) => Ok(End::Cancelled("Order.Rejected")),
        (1, true) => Err(format!(
            "a decision took effect and another expired: {}",
            answers()
        )),
        _ => Err(format!("both decisions took effect: {}", answers())),
    }
}

fn answers(decisions: &[(&'static str, Answer)]) -> String {
    decisions
        .iter()
        .map(|(d, a)| format!("{d} → {} {}", a.status, a.text))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Units per SKU a status view's reservation holds.
fn reserved(reservation: &Value) -> BTreeMap<String, u64> {
    let mut units = BTreeMap::new();
    for line in reservation["lines"].as_array().into_iter().flatten() {
        if let (Some(sku), Some(q)) = (line["sku"].as_str(), line["quantity"].as_u64()) {
            *units.entry(sku.to_owned()).or_default() += q;
        }
    }
    units
}

/// Units per SKU the order asks for.
pub fn ordered(plan: &Plan) -> BTreeMap<String, u64> {
    let mut units = BTreeMap::new();
    for line in &plan.lines {
        *units.entry(line.sku.clone()).or_default() += u64::from(line.quantity);
    }
    units
}

/// Stock is conserved: what is available, reserved and shipped adds up to what was stocked,
/// and nothing stays reserved once every order has ended. `shipped` counts the units of the
/// orders that completed; `levels` holds each SKU's `GET /inventory/{sku}` body.
pub fn check_stock(
    workload: &Workload,
    shipped: &BTreeMap<String, u64>,
    levels: &BTreeMap<String, Value>,
) -> Vec<String> {
    let mut wrong = Vec::new();
    for (sku, &stocked) in &workload.stock {
        let level = &levels[sku];
        let (Some(available), Some(reserved)) =
            (level["available"].as_u64(), level["reserved"].as_u64())
        else {
            wrong.push(format!("{sku}: no stock level: {level}"));
            continue;
        };
        let shipped = shipped.get(sku).copied().unwrap_or(0);
        if available + reserved + shipped != stocked || reserved != 0 {
            wrong.push(format!(
                "{sku}: stocked {stocked}, now {available} available + {reserved} reserved + \
                 {shipped} shipped"
            ));
        }
    }
    wrong
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{Decisions, Line};
    use serde_json::json;

    fn plan(payment: Payment, decisions: Option<Decisions>) -> Plan {
        let price = if decisions.is_some() { 200_000 } else { 1_000 };
        Plan {
            id: "t0001".into(),
            lines: vec![Line {
                sku: "sku-00".into(),
                quantity: 2,
                unit_price_cents: price,
            }],
            payment,
            shipping: Shipping::Normal,
            decisions,
            duplicates: 0,
            replay_later: false,
            conflicting: false,
            states_prices: true,
            charge_lands_late: false,
        }
    }

    fn workload(plan: &Plan) -> Workload {
        Workload {
            plans: vec![plan.clone()],
            stock: [("sku-00".to_owned(), 5)].into(),
            prices: [("sku-00".to_owned(), plan.lines[0].unit_price_cents)].into(),
            demand: [("sku-00".to_owned(), 2)].into(),
        }
    }

    fn answer(status: u16, text: Value) -> Answer {
        Answer {
            status: StatusCode::from_u16(status).unwrap(),
            replayed: false,
            text: text.to_string(),
        }
    }

    fn placed() -> Answer {
        answer(
            202,
            json!({"executionArn": "arn:aws:states:us-east-1:1:execution:fulfillment-order-saga:t0001"}),
        )
    }

    fn completed(amount: u64) -> Value {
        json!({
            "status": "COMPLETED", "executionStatus": "SUCCEEDED", "amountCents": amount,
            "payment": {"chargeId": "ch_1", "amountCents": amount},
            "shipment": {"shipmentId": "shp_1"},
            "reservation": {"status": "SHIPPED", "lines": [{"sku": "sku-00", "quantity": 2}]},
            "failure": null,
        })
    }

    fn record(view: Value, charges: &[&str]) -> Record {
        Record {
            placements: vec![placed()],
            charge_ids: charges.iter().map(|c| (*c).to_owned()).collect(),
            last: Some(view),
            ..Record::default()
        }
    }

    #[test]
    fn a_small_visa_order_that_completed_once_is_fine() {
        let p = plan(Payment::Visa, None);
        let r = record(completed(2_000), &["ch_1"]);
        assert_eq!(
            check_order(&p, Some(&r), &workload(&p)),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_second_charge_id_is_a_violation() {
        let p = plan(Payment::Visa, None);
        let r = record(completed(2_000), &["ch_1", "ch_2"]);
        let wrong = check_order(&p, Some(&r), &workload(&p));
        assert!(wrong[0].contains("charged more than once"), "{wrong:?}");
    }

    #[test]
    fn out_of_stock_on_a_sku_that_was_never_short_is_a_violation() {
        let p = plan(Payment::Visa, None);
        let view = json!({
            "status": "CANCELLED", "executionStatus": "FAILED", "amountCents": 2_000,
            "failure": {"error": "Inventory.OutOfStock"}, "payment": null, "shipment": null,
            "reservation": null,
        });
        let wrong = check_order(&p, Some(&record(view, &[])), &workload(&p));
        assert!(wrong[0].contains("out of stock"), "{wrong:?}");
    }

    #[test]
    fn an_approval_answered_200_on_an_order_the_window_cancelled_is_a_violation() {
        let decisions = Decisions {
            sequence: vec!["approve"],
            concurrent: false,
        };
        let p = plan(Payment::Visa, Some(decisions));
        let view = json!({
            "status": "CANCELLED", "executionStatus": "FAILED", "amountCents": 400_000,
            "failure": {"error": "Order.ApprovalExpired"}, "payment": {"chargeId": "ch_1"},
            "shipment": null, "reservation": {"status": "RELEASED", "lines": []},
        });
        let mut r = record(view, &["ch_1"]);
        r.decisions = vec![("approve", answer(200, json!({"decision": "approve"})))];
        let wrong = check_order(&p, Some(&r), &workload(&p));
        assert!(wrong[0].contains("should have completed"), "{wrong:?}");
        // Answered approval-expired, the same end is right.
        r.decisions = vec![(
            "approve",
            answer(
                409,
                json!({"type": "https://fulfillment.dev/problems/approval-expired"}),
            ),
        )];
        assert_eq!(
            check_order(&p, Some(&r), &workload(&p)),
            Vec::<String>::new()
        );
    }

    #[test]
    fn stock_must_add_up_with_nothing_left_reserved() {
        let p = plan(Payment::Visa, None);
        let w = workload(&p);
        let shipped = [("sku-00".to_owned(), 2)].into();
        let fine = [("sku-00".to_owned(), json!({"available": 3, "reserved": 0}))].into();
        assert!(check_stock(&w, &shipped, &fine).is_empty());
        let oversold = [("sku-00".to_owned(), json!({"available": 4, "reserved": 0}))].into();
        assert_eq!(check_stock(&w, &shipped, &oversold).len(), 1);
        let held = [("sku-00".to_owned(), json!({"available": 2, "reserved": 1}))].into();
        assert_eq!(check_stock(&w, &shipped, &held).len(), 1);
    }
}
