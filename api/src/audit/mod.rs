//! `fulfillment audit`: checks a store (embedded or DynamoDB), its payment provider and its
//! workflow for broken invariants, read-only and beside a running service. `books.rs` collects
//! the books through the ports, `rules.rs` checks them (pure functions), and this module runs
//! the two, re-checks what looks wrong, and prints the result.
//!
//! The books are read in several listings, not one snapshot (the ports page through each kind;
//! no port reads them all in one transaction), so an order in flight can be seen half-way
//! between two reads: its charge listed before it was made and the order after it recorded it,
//! say. A suspected violation is therefore reported only if a second collection, a moment
//! later, finds it again (the same subject). On DynamoDB each listing is a consistent scan, but
//! a scan is not a snapshot either; what stays approximate there is the same: a violation that
//! appears and disappears within the two collections is missed, one that lasts is reported.

mod books;
mod executions;
mod rules;

pub use books::{Books, OrderView, Sources};
pub use executions::{EmbeddedExecutions, Executions, WorkflowExecutions};
pub use rules::{Findings, Violation, check};

use std::collections::HashSet;
use std::io::Write;
use std::time::Duration;
use store::{GatewayError, StoreError};

/// How long after finding suspects the books are read again: longer than a step takes to move
/// an order on, short enough for an operator to wait.
pub const RECHECK_AFTER: Duration = Duration::from_secs(2);

/// Why the audit could not finish.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("reading the store: {0}")]
    Store(#[from] StoreError),
    #[error("reading the payment provider's books: {0}")]
    Payments(#[from] GatewayError),
    #[error("asking the workflow about executions: {0}")]
    Executions(String),
}

/// What an audit found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    pub orders: usize,
    pub skus: usize,
    pub charges: usize,
    /// Sorted; empty when every invariant holds.
    pub violations: Vec<Violation>,
}

/// The violations of `second` whose subject `first` suspected too: what lasted across two
/// collections.
pub fn confirmed(first: &[Violation], second: Vec<Violation>) -> Vec<Violation> {
    let suspects: HashSet<&str> = first.iter().map(|v| v.subject.as_str()).collect();
    second
        .into_iter()
        .filter(|v| suspects.contains(v.subject.as_str()))
        .collect()
}

fn report(books: &Books, violations: Vec<Violation>) -> Report {
    Report {
        orders: books.orders.len(),
        skus: books.stock.len(),
        charges: books.charges.len(),
        violations,
    }
}

fn log_notes(findings: &Findings) {
    for note in &findings.notes {
        tracing::warn!("not checked: {note}");
    }
}

/// Collects the books and checks them; when something looks wrong, waits `recheck_after`, does
/// both again, and reports what was found both times.
pub async fn run(sources: &Sources, recheck_after: Duration) -> Result<Report, AuditError> {
    let books = Books::collect(sources).await?;
    let first = check(&books);
    if first.violations.is_empty() {
        log_notes(&first);
        return Ok(report(&books, Vec::new()));
    }
    tracing::info!(
        suspected = first.violations.len(),
        "checking the suspected violations again in {recheck_after:?} (orders in flight move \
         between reads)"
    );
    tokio::time::sleep(recheck_after).await;
    let books = Books::collect(sources).await?;
    let second = check(&books);
    log_notes(&second);
    let violations = confirmed(&first.violations, second.violations);
    Ok(report(&books, violations))
}

/// Writes the report as the command prints it: a line per violation, then the summary.
pub fn print(report: &Report, out: &mut impl Write) -> std::io::Result<()> {
    for v in &report.violations {
        writeln!(out, "{v}")?;
    }
    writeln!(
        out,
        "audit: {} orders, {} SKUs, {} charges, {} violations",
        report.orders,
        report.skus,
        report.charges,
        report.violations.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(subject: &str, what: &str) -> Violation {
        Violation {
            subject: subject.to_owned(),
            what: what.to_owned(),
        }
    }

    #[test]
    fn only_what_is_found_twice_is_reported() {
        let first = [v("order o-1", "a"), v("order o-2", "b")];
        let second = vec![v("order o-1", "a, still"), v("order o-3", "new")];
        assert_eq!(confirmed(&first, second), [v("order o-1", "a, still")]);
        assert_eq!(confirmed(&first, Vec::new()), []);
    }

    #[test]
    fn the_report_is_a_line_per_violation_then_the_summary() {
        let report = Report {
            orders: 4,
            skus: 2,
            charges: 3,
            violations: vec![v("sku book", "off by one")],
        };
        let mut out = Vec::new();
        print(&report, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "violation: sku book: off by one\naudit: 4 orders, 2 SKUs, 3 charges, 1 violations\n"
        );
    }
}
