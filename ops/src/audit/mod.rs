//! `fulfillment audit`: checks a store (embedded or DynamoDB), its payment provider and its
//! workflow for broken invariants, read-only and beside a running service. `books.rs` collects
//! the books through the ports, `rules.rs` checks them (pure functions), and this module runs
//! the two, re-checks what looks wrong, and prints the result.
//!
//! The books are read in several listings, not one snapshot (the ports page through each kind;
//! no port reads them all in one transaction, on SQLite either), so an order in flight can be
//! seen half-way between two reads: its charge listed before it was made and the order after it
//! recorded it, say. A suspected violation is therefore reported only if a second collection, a
//! moment later, finds it again (the same subject; for a SKU's counts against its reservations,
//! the same counts on a stock record that stood still, see [`Recheck`]). On DynamoDB each
//! listing is a consistent scan, but a scan is not a snapshot either, and the same holds. What
//! stays approximate on both: a violation that does not last until the second look is missed,
//! and a SKU that keeps selling has its counts checked for conservation but not against its
//! reservations (the log says so) until a quieter moment.

mod books;
mod executions;
mod rules;

pub use books::{Books, OrderView, Scope, Sources};
pub use executions::{EmbeddedExecutions, Executions, WorkflowExecutions};
pub use rules::{Findings, Recheck, Remedy, Violation, check};

use std::collections::HashSet;
use std::io::Write;
use std::time::Duration;
use store::{GatewayError, StockLevel, StoreError};

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

/// The violations of a second look (`second`, with the stock it read, `stock_now`) that the
/// first (`first`, `stock_then`) suspected too, as each one's [`Recheck`] asks: what lasted.
/// Also the SKUs whose counts could not be judged because they moved between the looks.
pub fn confirmed(
    first: &[Violation],
    stock_then: &[StockLevel],
    second: Vec<Violation>,
    stock_now: &[StockLevel],
) -> (Vec<Violation>, Vec<String>) {
    let subjects: HashSet<&str> = first.iter().map(|v| v.subject.as_str()).collect();
    let level = |stock: &[StockLevel], sku: &str| stock.iter().find(|s| s.sku == sku).cloned();
    let mut moving = Vec::new();
    let kept = second
        .into_iter()
        .filter(|v| match &v.recheck {
            Recheck::Subject => subjects.contains(v.subject.as_str()),
            Recheck::QuietSku(sku) => {
                let quiet = level(stock_then, sku) == level(stock_now, sku);
                if !quiet && !moving.contains(sku) {
                    moving.push(sku.clone());
                }
                quiet && first.contains(v)
            }
        })
        .collect();
    (kept, moving)
}

pub fn report(books: &Books, violations: Vec<Violation>) -> Report {
    Report {
        orders: books.orders.len(),
        skus: books.stock.len(),
        charges: books.charges.len(),
        violations,
    }
}

/// Collects the books and checks them; when something looks wrong, waits `recheck_after`, does
/// both again, and reports what was found both times.
pub async fn run(sources: &Sources, recheck_after: Duration) -> Result<Report, AuditError> {
    let (books, violations) = confirm(sources, recheck_after, Scope::Whole).await?;
    Ok(report(&books, violations))
}

/// What [`run`] reports of the `scope` of the books, with the books of the last look (the
/// repair loop reads them).
pub async fn confirm(
    sources: &Sources,
    recheck_after: Duration,
    scope: Scope,
) -> Result<(Books, Vec<Violation>), AuditError> {
    let books = Books::collect(sources, scope).await?;
    let first = check(&books);
    if first.violations.is_empty() {
        return Ok((books, Vec::new()));
    }
    for v in &first.violations {
        tracing::debug!(subject = %v.subject, what = %v.what, "suspected");
    }
    tracing::info!(
        suspected = first.violations.len(),
        "checking the suspected violations again in {recheck_after:?} (orders in flight move \
         between reads)"
    );
    let first_stock = books.stock;
    tokio::time::sleep(recheck_after).await;
    let books = Books::collect(sources, scope).await?;
    let second = check(&books);
    let (violations, moving) = confirmed(
        &first.violations,
        &first_stock,
        second.violations,
        &books.stock,
    );
    for sku in moving {
        tracing::info!(
            sku,
            "the SKU's counts moved between the two looks, so they were not compared with its \
             reservations; audit again at a quieter moment to check them"
        );
    }
    let passed = first.violations.len().saturating_sub(violations.len());
    if passed > 0 {
        tracing::info!(
            "{passed} of {} suspected violations were not found again (moving, not broken)",
            first.violations.len()
        );
    }
    Ok((books, violations))
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
            recheck: Recheck::Subject,
            remedy: None,
        }
    }

    fn quiet(sku: &str, what: &str) -> Violation {
        Violation {
            recheck: Recheck::QuietSku(sku.to_owned()),
            ..v(&format!("sku {sku}"), what)
        }
    }

    fn level(sku: &str, reserved: u64) -> StockLevel {
        StockLevel {
            sku: sku.to_owned(),
            available: 10,
            reserved,
            shipped: 0,
            stocked: 10 + reserved,
            price: None,
        }
    }

    #[test]
    fn only_what_is_found_twice_is_reported() {
        let first = [v("order o-1", "a"), v("order o-2", "b")];
        let second = vec![v("order o-1", "a, still"), v("order o-3", "new")];
        assert_eq!(
            confirmed(&first, &[], second, &[]),
            (vec![v("order o-1", "a, still")], vec![])
        );
        assert_eq!(confirmed(&first, &[], Vec::new(), &[]), (vec![], vec![]));
    }

    #[test]
    fn counts_compared_with_reservations_are_reported_only_when_they_stood_still() {
        let book = "reserved 3 but held reservations hold 2";
        let first = [
            quiet("book", book),
            quiet("pen", "reserved 1 but held reservations hold 0"),
        ];
        let then = [level("book", 3), level("pen", 1), level("ink", 0)];
        // The pen sold on: its record moved, and what the second look saw is not judged.
        let now = [level("book", 3), level("pen", 2), level("ink", 0)];
        let second = vec![
            quiet("book", book),
            quiet("pen", "reserved 2 but held reservations hold 1"),
        ];
        assert_eq!(
            confirmed(&first, &then, second.clone(), &now),
            (vec![quiet("book", book)], vec!["pen".to_owned()])
        );
        // Quiet but not the same difference: not what the first look saw, not reported.
        let second = vec![quiet("book", "reserved 3 but held reservations hold 1")];
        assert_eq!(confirmed(&first, &then, second, &now), (vec![], vec![]));
        // The same difference on a record that moved in between: not judged.
        let moved = [level("book", 4), level("pen", 1)];
        let second = vec![quiet("book", book)];
        assert_eq!(
            confirmed(&first, &then, second, &moved),
            (vec![], vec!["book".to_owned()])
        );
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
