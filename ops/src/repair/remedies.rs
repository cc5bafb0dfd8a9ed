//! Each remedy of [`Remedy`], performed on the order as it is now (read again: the audit's
//! books are seconds old), through the same code the saga runs: the start is order intake's,
//! the refund and the release are the compensations' own (`compensations::{refund, release}`),
//! the shipment's stock is moved as the shipment step moves it. Every remedy first checks that
//! the order is where its rule found it (ended, or `ACCEPTED` past the grace period) and does
//! nothing otherwise, so a pass never acts on an order the saga is still working on.

use super::{Reconciler, RemedyError, RepairKind};
use crate::audit::{Books, Remedy};
use chrono::Utc;
use compensations::Compensated;
use intake::Start;
use store::{Failure, Incident, Order, OrderId, OrderStatus, Refunded, Released};

/// The order a remedy is for.
pub(super) fn order_id(remedy: &Remedy) -> &OrderId {
    match remedy {
        Remedy::Start(id)
        | Remedy::Release(id)
        | Remedy::MarkShipped(id)
        | Remedy::RecordIncident(id) => id,
        Remedy::Refund { order, .. } => order,
    }
}

/// Performs `remedy`: the kind of repair made and what was done, or `None` when nothing was
/// (the order moved on, is not due yet, or was found repaired), with the reason logged.
pub(super) async fn apply(
    r: &Reconciler,
    books: &Books,
    remedy: &Remedy,
) -> Result<Option<(RepairKind, String)>, RemedyError> {
    let id = order_id(remedy);
    let Some(order) = r.sources.ports.orders.get(id).await? else {
        return Ok(None);
    };
    let wanted = match remedy {
        Remedy::Start(_) => Some(OrderStatus::Accepted),
        Remedy::Refund { .. } | Remedy::Release(_) => Some(OrderStatus::Cancelled),
        Remedy::MarkShipped(_) => Some(OrderStatus::Completed),
        // Any status the saga has not finished.
        Remedy::RecordIncident(_) => (!order.status.is_terminal()).then_some(order.status),
    };
    if wanted != Some(order.status) {
        tracing::debug!(order_id = %id, status = order.status.as_str(), "moved on since the audit; not repaired");
        return Ok(None);
    }
    match remedy {
        Remedy::Start(_) => start(r, order).await,
        Remedy::Refund { charge_id, .. } => refund(r, books, order, charge_id).await,
        Remedy::Release(_) => release(r, order).await,
        Remedy::MarkShipped(_) => mark_shipped(r, order).await,
        Remedy::RecordIncident(_) => record_incident(r, order).await,
    }
}

/// The incident of an order its ended execution left unfinished: the execution's own error and
/// cause, as `DescribeExecution` tells them (which state failed is in its history, not there).
async fn record_incident(
    r: &Reconciler,
    order: Order,
) -> Result<Option<(RepairKind, String)>, RemedyError> {
    let id = order.id().clone();
    let Some(arn) = order.execution_arn.as_deref() else {
        return Ok(None);
    };
    let info = r.intake.workflow.describe_execution(arn).await?;
    if info.status == "RUNNING" {
        tracing::debug!(order_id = %id, "its execution runs again (a redrive); nothing to do");
        return Ok(None);
    }
    let incident = Incident {
        step: format!("execution {}", info.status),
        error: info
            .error
            .unwrap_or_else(|| format!("States.{}", info.status)),
        cause: info.cause.unwrap_or_else(|| {
            format!(
                "the execution ended {} with the order {}; see its history for the state",
                info.status,
                order.status.as_str()
            )
        }),
        attempts: 0,
        since: info.stop_date.unwrap_or_else(Utc::now),
    };
    let after = r
        .sources
        .ports
        .orders
        .record_incident(&id, &incident, None)
        .await?;
    if after.status != OrderStatus::CompensationFailed {
        return Ok(None);
    }
    tracing::error!(
        order_id = %id,
        execution_arn = %arn,
        error = %incident.error,
        "repair: the order's execution ended with the order unfinished; incident recorded for an operator"
    );
    Ok(Some((
        RepairKind::IncidentRecorded,
        format!(
            "its execution ended {} ({}); incident recorded",
            info.status, incident.error
        ),
    )))
}

async fn start(r: &Reconciler, order: Order) -> Result<Option<(RepairKind, String)>, RemedyError> {
    let id = order.id().clone();
    let age = Utc::now() - order.new.created_at;
    let before_us = r
        .settings
        .sole_owner_since
        .is_some_and(|since| order.new.created_at < since);
    if !before_us && age.to_std().unwrap_or_default() < r.settings.grace {
        tracing::debug!(order_id = %id, "ACCEPTED within the grace period (its POST may still start it); not started yet");
        return Ok(None);
    }
    let (order, start) = r.intake.start_execution(order).await?;
    let arn = order.execution_arn.unwrap_or_default();
    match start {
        Start::Now => {
            tracing::info!(order_id = %id, execution_arn = %arn, "repair: started the execution of an order left ACCEPTED");
            Ok(Some((
                RepairKind::Started,
                format!("started its execution {arn}"),
            )))
        }
        Start::AlreadyStarted => {
            tracing::debug!(order_id = %id, execution_arn = %arn, "started meanwhile; nothing to do");
            Ok(None)
        }
    }
}

/// The failure a compensation records on an order that has none (an order cancelled before
/// failures were recorded): the compensations record one only when none is.
fn failure_of(order: &Order) -> Failure {
    order.failure.clone().unwrap_or_else(|| Failure {
        error: "Repair".to_owned(),
        cause: "repaired by the repair loop".to_owned(),
    })
}

async fn refund(
    r: &Reconciler,
    books: &Books,
    order: Order,
    charge_id: &str,
) -> Result<Option<(RepairKind, String)>, RemedyError> {
    let id = order.id().clone();
    let Some(charge) = books.charges.iter().find(|c| c.charge_id == charge_id) else {
        return Ok(None);
    };
    let ports = &r.sources.ports;
    match order.charge_id.as_deref() {
        // Recorded first, so that the refund goes by this charge and not by a lookup of the
        // order's charge, which a provider may answer only after a delay (a late charge is
        // exactly one the compensation's lookup did not see).
        None => {
            ports.orders.record_charge(&id, charge).await?;
        }
        Some(recorded) if recorded == charge_id => {}
        Some(recorded) => {
            tracing::warn!(order_id = %id, recorded, charge_id, "the order records another charge; not refunded");
            return Ok(None);
        }
    }
    match compensations::refund(ports, &id, failure_of(&order)).await? {
        Compensated::Undone(Refunded::Now(refund)) => {
            tracing::info!(
                order_id = %id,
                charge_id,
                refund_id = %refund.refund_id,
                amount_cents = refund.amount_cents,
                "repair: refunded a charge its CANCELLED order ended without"
            );
            Ok(Some((
                RepairKind::RefundedLateCharge,
                format!(
                    "refunded charge {charge_id} ({} cents, refund {})",
                    refund.amount_cents, refund.refund_id
                ),
            )))
        }
        Compensated::Undone(Refunded::Already(_) | Refunded::NothingCharged) => {
            tracing::debug!(order_id = %id, charge_id, "refunded meanwhile; nothing to do");
            Ok(None)
        }
        Compensated::Shipped(shipment) => {
            tracing::error!(order_id = %id, shipment_id = %shipment.shipment_id, "a CANCELLED order has shipped; not refunded, a person must decide");
            Ok(None)
        }
    }
}

async fn release(
    r: &Reconciler,
    order: Order,
) -> Result<Option<(RepairKind, String)>, RemedyError> {
    let id = order.id().clone();
    match compensations::release(&r.sources.ports, &id, failure_of(&order)).await? {
        Compensated::Undone(Released::Now(reservation)) => {
            let units: u64 = reservation
                .lines
                .iter()
                .map(|l| u64::from(l.quantity))
                .sum();
            tracing::info!(order_id = %id, units, "repair: released the stock a CANCELLED order still held");
            Ok(Some((
                RepairKind::ReleasedStock,
                format!("released the {units} units it held"),
            )))
        }
        Compensated::Undone(_) => {
            tracing::debug!(order_id = %id, "released (or shipped) meanwhile; nothing to do");
            Ok(None)
        }
        Compensated::Shipped(shipment) => {
            tracing::error!(order_id = %id, shipment_id = %shipment.shipment_id, "a CANCELLED order has shipped; its stock not released, a person must decide");
            Ok(None)
        }
    }
}

async fn mark_shipped(
    r: &Reconciler,
    order: Order,
) -> Result<Option<(RepairKind, String)>, RemedyError> {
    let id = order.id().clone();
    let ports = &r.sources.ports;
    // What the shipment step does once the carrier has the shipment, and only then.
    let Some(shipment) = ports.shipping.shipment(&id).await? else {
        tracing::error!(order_id = %id, "a COMPLETED order holds stock but the carrier has no shipment of it; not marked shipped, a person must decide");
        return Ok(None);
    };
    let reservation = ports.inventory.mark_shipped(&id).await?;
    let units: u64 = reservation
        .lines
        .iter()
        .map(|l| u64::from(l.quantity))
        .sum();
    tracing::info!(order_id = %id, shipment_id = %shipment.shipment_id, units, "repair: marked shipped the stock a COMPLETED order still held");
    Ok(Some((
        RepairKind::ReleasedStock,
        format!(
            "marked the {units} units it held shipped (shipment {})",
            shipment.shipment_id
        ),
    )))
}
