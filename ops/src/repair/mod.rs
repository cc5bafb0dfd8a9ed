//! The repair loop: what the audit finds ([`crate::audit`]: the same books, rules and second
//! look), repaired where the rule that found it names a safe remedy, and reported where it does
//! not. A pass ([`Reconciler::pass`]) acts only on orders the saga is done with (CANCELLED,
//! COMPLETED) or never started (ACCEPTED for longer than a grace period), each remedy the start
//! or undo the saga itself does, idempotent by the order id; `schedule.rs` runs passes in
//! `serve`, one replica at a time (a [`store::Lease`]), and `fulfillment audit --repair` runs one.

mod remedies;
mod schedule;

pub use schedule::{Plan, RepairLoop, lease_duration};

use crate::audit::{self, AuditError, Books, Report, Scope, Sources, Violation};
use chrono::{DateTime, Utc};
use compensations::CompensationError;
use intake::{IntakeError, OrderIntake};
use std::collections::HashSet;
use std::fmt;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use store::{GatewayError, OrderId, StoreError};
use telemetry::Metrics;

pub use telemetry::RepairKind;

/// One thing a pass did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repair {
    pub kind: RepairKind,
    /// The violation's subject (`order o-1`, `sku book`, …).
    pub subject: String,
    /// What was done, or for a report, what was found.
    pub what: String,
}

/// The line `fulfillment audit --repair` prints.
impl fmt::Display for Repair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "repair: {}: {}: {}",
            self.kind.as_str(),
            self.subject,
            self.what
        )
    }
}

/// What one pass found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pass {
    /// The audit of the pass (its violations: what was found twice, before any repair).
    pub audit: Report,
    /// The repairs made and the findings reported, in the audit's order.
    pub repairs: Vec<Repair>,
    /// Violations neither repaired nor reported by this pass: a repair that failed (logged,
    /// tried again next pass), an order still within its grace period or moved on since.
    pub left: usize,
}

impl Pass {
    /// Whether every violation found was repaired.
    pub fn all_repaired(&self) -> bool {
        self.left == 0 && self.repairs.iter().all(|r| r.kind != RepairKind::Reported)
    }
}

/// Why a pass could not finish reading (a repair that fails only skips its finding).
#[derive(Debug, thiserror::Error)]
pub enum RepairError {
    #[error(transparent)]
    Audit(#[from] AuditError),
    #[error("the repair lease: {0}")]
    Lease(StoreError),
}

impl RepairError {
    pub fn is_transient(&self) -> bool {
        match self {
            RepairError::Audit(AuditError::Store(e)) | RepairError::Lease(e) => e.is_transient(),
            RepairError::Audit(AuditError::Payments(e)) => e.is_transient(),
            // The workflow's answers are kept as text by the audit; the next pass tries again.
            RepairError::Audit(AuditError::Executions(_)) => true,
        }
    }
}

/// Why one repair failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RemedyError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Gateway(#[from] GatewayError),
    #[error(transparent)]
    Compensation(#[from] CompensationError),
    #[error(transparent)]
    Intake(#[from] IntakeError),
    #[error(transparent)]
    Workflow(#[from] workflow::WorkflowError),
}

impl RemedyError {
    pub(crate) fn is_transient(&self) -> bool {
        match self {
            RemedyError::Store(e) => e.is_transient(),
            RemedyError::Gateway(e) => e.is_transient(),
            RemedyError::Compensation(e) => e.is_transient(),
            RemedyError::Intake(e) => e.is_transient(),
            RemedyError::Workflow(e) => e.is_transient(),
        }
    }
}

/// How a pass behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RepairSettings {
    /// How long an order may stay `ACCEPTED` without an execution before it is started: longer
    /// than a POST takes from storing the order to starting it, so none in flight is raced.
    pub grace: Duration,
    /// How long after suspecting something the books are read again (as the audit does).
    pub recheck_after: Duration,
    /// When this process took a backend only it writes (embedded: the engine's lock): an
    /// order stored before then has no POST in flight, so it is started without waiting out
    /// the grace (after a restart, the orders the last process's start queue held). `None`
    /// where replicas share the backend (AWS).
    pub sole_owner_since: Option<DateTime<Utc>>,
}

impl Default for RepairSettings {
    fn default() -> Self {
        RepairSettings {
            grace: Duration::from_secs(60),
            recheck_after: audit::RECHECK_AFTER,
            sole_owner_since: None,
        }
    }
}

/// Runs passes over one backend.
pub struct Reconciler {
    sources: Sources,
    intake: Arc<OrderIntake>,
    settings: RepairSettings,
    metrics: Metrics,
    /// The findings reported by the last pass (as printed), so that one that lasts is logged
    /// and counted once, not at every pass; one found again after it went is reported again.
    reported: Mutex<HashSet<String>>,
}

impl Reconciler {
    /// `sources` are where the books are read and repairs made (read-write ports); `intake`
    /// starts executions.
    pub fn new(
        sources: Sources,
        intake: Arc<OrderIntake>,
        settings: RepairSettings,
        metrics: Metrics,
    ) -> Reconciler {
        Reconciler {
            sources,
            intake,
            settings,
            metrics,
            reported: Mutex::new(HashSet::new()),
        }
    }

    /// The same reconciler reading its books from `sources` instead.
    pub fn reading(self, sources: Sources) -> Reconciler {
        Reconciler { sources, ..self }
    }

    /// One pass over the `scope` of the books: the audit (two looks), then each violation
    /// found both times repaired or reported. Repairs that fail are logged and left to the
    /// next pass.
    pub async fn pass(&self, scope: Scope) -> Result<Pass, RepairError> {
        let (books, violations) =
            audit::confirm(&self.sources, self.settings.recheck_after, scope).await?;
        self.metrics.repair_pass();
        let mut repairs = Vec::new();
        let mut left = 0;
        let mut reported = HashSet::new();
        let before = self
            .reported
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for v in &violations {
            let done = match &v.remedy {
                None => {
                    let line = v.to_string();
                    // Reported by an earlier pass (and counted then) when it was there before.
                    let new = !before.contains(&line) && reported.insert(line);
                    new.then(|| report(v))
                }
                Some(remedy) => {
                    let done = self.repair(&books, v, remedy).await;
                    left += usize::from(done.is_none());
                    done
                }
            };
            if let Some(repair) = done {
                self.metrics.repaired(repair.kind);
                repairs.push(repair);
            }
        }
        *self.reported.lock().unwrap_or_else(|e| e.into_inner()) = reported;
        Ok(Pass {
            audit: audit::report(&books, violations),
            repairs,
            left,
        })
    }

    /// Performs `remedy`; `None` when nothing was repaired (failed, not due, moved on), with
    /// the reason logged.
    async fn repair(&self, books: &Books, v: &Violation, remedy: &audit::Remedy) -> Option<Repair> {
        match remedies::apply(self, books, remedy).await {
            Ok(done) => done.map(|(kind, what)| Repair {
                kind,
                subject: v.subject.clone(),
                what,
            }),
            Err(e) => {
                let order_id = remedies::order_id(remedy);
                if e.is_transient() {
                    tracing::warn!(order_id = %order_id, error = %e, "repair failed; the next pass tries again");
                } else {
                    tracing::error!(order_id = %order_id, error = %e, "repair failed; the next pass tries again");
                }
                None
            }
        }
    }
}

/// A finding for a person, logged with the order it is about.
fn report(v: &Violation) -> Repair {
    let order_id = order_of(&v.subject);
    tracing::warn!(
        order_id = order_id.as_ref().map(OrderId::as_str).unwrap_or_default(),
        subject = %v.subject,
        what = %v.what,
        "the repair loop may not fix this alone: reported for a person"
    );
    Repair {
        kind: RepairKind::Reported,
        subject: v.subject.clone(),
        what: v.what.clone(),
    }
}

/// The order a violation's subject names (`order o-1`), if it names one.
fn order_of(subject: &str) -> Option<OrderId> {
    OrderId::parse(subject.strip_prefix("order ")?).ok()
}

/// Writes what `fulfillment audit --repair` prints: the audit's lines, a line per repair and
/// report, the audit's summary and the repairs' summary.
pub fn print(pass: &Pass, out: &mut impl Write) -> std::io::Result<()> {
    audit::print(&pass.audit, out)?;
    for r in &pass.repairs {
        writeln!(out, "{r}")?;
    }
    let count = |kind| pass.repairs.iter().filter(|r| r.kind == kind).count();
    writeln!(
        out,
        "repair: {} started, {} late charges refunded, {} stock released, {} incidents \
         recorded, {} reported, {} left for the next pass",
        count(RepairKind::Started),
        count(RepairKind::RefundedLateCharge),
        count(RepairKind::ReleasedStock),
        count(RepairKind::IncidentRecorded),
        count(RepairKind::Reported),
        pass.left
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_violation_about_an_order_names_it_and_others_name_none() {
        assert_eq!(order_of("order o-1"), Some(OrderId::parse("o-1").unwrap()));
        assert_eq!(order_of("sku book"), None);
        assert_eq!(order_of("charge ch_1"), None);
    }

    #[test]
    fn the_pass_prints_the_audit_then_a_line_per_repair_then_the_counts() {
        let pass = Pass {
            audit: Report {
                orders: 3,
                skus: 1,
                charges: 2,
                violations: vec![],
            },
            repairs: vec![Repair {
                kind: RepairKind::RefundedLateCharge,
                subject: "order o-1".to_owned(),
                what: "refunded charge ch_1 (re_1)".to_owned(),
            }],
            left: 0,
        };
        let mut out = Vec::new();
        print(&pass, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "audit: 3 orders, 1 SKUs, 2 charges, 0 violations\n\
             repair: refunded_late_charge: order o-1: refunded charge ch_1 (re_1)\n\
             repair: 0 started, 1 late charges refunded, 0 stock released, 0 incidents recorded, 0 reported, 0 left \
             for the next pass\n"
        );
        assert!(pass.all_repaired());
    }
}
