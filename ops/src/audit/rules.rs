//! The audit's invariants, as pure functions over the books (see `books.rs`): each rule looks at
//! plain data and returns the violations it finds, so each is tested alone, with a violating
//! and a clean case. `check` runs them all.

use super::books::{Books, OrderView, Scope};
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use store::{Charge, OrderId, OrderStatus, Refund, Reservation, ReservationStatus, StockLevel};

/// One broken invariant: what it is about (`order o-1`, `sku book`, `charge ch_x`,
/// `refund re_x`), what is wrong with it, and what would repair it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Violation {
    pub subject: String,
    pub what: String,
    pub recheck: Recheck,
    /// The repair the rule that found it knows to be safe (`None`: a person must look). The
    /// audit only prints it; the repair loop (`crate::repair`) performs it.
    pub remedy: Option<Remedy>,
}

/// What repairs a violation without a person: each is the undo or the start the saga itself
/// would have done, for an order the saga is done with (or never started).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Remedy {
    /// An order stored but never started: start its execution.
    Start(OrderId),
    /// A CANCELLED order's charge, not refunded at all (a charge that landed after the
    /// compensation looked for it): refund it, as the saga's refund does.
    Refund { order: OrderId, charge_id: String },
    /// A CANCELLED order's reservation still holds stock: release it.
    Release(OrderId),
    /// A COMPLETED order's reservation still holds the stock it shipped: mark it shipped.
    MarkShipped(OrderId),
    /// An order the saga left unfinished, its execution ended (a compensation whose retries
    /// of a misconfigured provider ran out, a step timed out on its last attempt, an execution
    /// stopped by hand): record an incident, so that operators see it in `GET /incidents` and
    /// redrive or resolve it. Nothing is undone by the loop itself.
    RecordIncident(OrderId),
}

/// What a second look must find to confirm a suspected violation (see `super::confirmed`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Recheck {
    /// A violation of the same subject. Right for what a busy service only passes through for
    /// a moment on its way: an order in flight is done, or its charge recorded, a moment later.
    Subject,
    /// The same violation, to the same counts, and the SKU's stock record unchanged from the
    /// first look to the second. For a SKU's counts compared with its reservations, records
    /// read moments apart: each look at a SKU that keeps selling can catch a reservation made
    /// in between, but a reservation, release or shipment changes the stock record too, so a
    /// record that stood still across both looks (and the reservations read between them) was
    /// read with reservations of the same moment.
    QuietSku(String),
}

impl Violation {
    fn new(subject: String, what: String) -> Violation {
        Violation {
            subject,
            what,
            recheck: Recheck::Subject,
            remedy: None,
        }
    }

    fn quiet(sku: &str, what: String) -> Violation {
        Violation {
            subject: format!("sku {sku}"),
            what,
            recheck: Recheck::QuietSku(sku.to_owned()),
            remedy: None,
        }
    }

    fn repaired_by(self, remedy: Remedy) -> Violation {
        Violation {
            remedy: Some(remedy),
            ..self
        }
    }
}

/// The line the audit prints.
impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "violation: {}: {}", self.subject, self.what)
    }
}

/// What the rules found: the violations, sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Findings {
    pub violations: Vec<Violation>,
}

/// Every rule over `books`.
pub fn check(books: &Books) -> Findings {
    let mut violations = Vec::new();
    violations.extend(charged_twice(&books.charges));
    violations.extend(charges_match_orders(
        &books.orders,
        &books.charges,
        &books.refunds,
    ));
    violations.extend(refunds_have_charges(&books.charges, &books.refunds));
    violations.extend(stock_is_conserved(&books.stock));
    if books.scope == Scope::Whole {
        violations.extend(stock_matches_reservations(
            &books.stock,
            &books.reservations,
        ));
    }
    violations.extend(reservations_match_orders(
        &books.orders,
        &books.reservations,
    ));
    violations.extend(orders_have_running_executions(
        &books.orders,
        &books.executions,
    ));
    violations.extend(parked_tokens_are_open(&books.orders, &books.open_tokens));
    violations.sort();
    violations.dedup();
    Findings { violations }
}

fn order(id: impl fmt::Display) -> String {
    format!("order {id}")
}

fn charge(id: &str) -> String {
    format!("charge {id}")
}

/// Refunded cents per charge id.
fn refunded(refunds: &[Refund]) -> HashMap<&str, u64> {
    let mut total = HashMap::new();
    for r in refunds {
        *total.entry(r.charge_id.as_str()).or_insert(0u64) += r.amount_cents;
    }
    total
}

/// An order is charged once, under `charge:{order}`: more than one charge at the provider is a
/// double charge, whatever keys they were made under.
pub fn charged_twice(charges: &[Charge]) -> Vec<Violation> {
    let mut by_order: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for c in charges {
        by_order
            .entry(c.order_id.as_str())
            .or_default()
            .push(&c.charge_id);
    }
    by_order
        .into_iter()
        .filter(|(_, ids)| ids.len() > 1)
        .map(|(id, mut ids)| {
            ids.sort();
            Violation::new(
                order(id),
                format!(
                    "charged {} times at the provider ({})",
                    ids.len(),
                    ids.join(", ")
                ),
            )
        })
        .collect()
}

/// Every charge is an order's, and an order's end says what became of its charge: a COMPLETED
/// order keeps a charge of its amount, unrefunded; a CANCELLED or COMPENSATION_FAILED one has
/// every charge refunded in full. The charge the order records is one the provider has, of that
/// order. (Orders still running may be anywhere between.)
pub fn charges_match_orders(
    orders: &[OrderView],
    charges: &[Charge],
    refunds: &[Refund],
) -> Vec<Violation> {
    let known: HashMap<&str, &OrderView> = orders.iter().map(|o| (o.id.as_str(), o)).collect();
    let by_id: HashMap<&str, &Charge> = charges.iter().map(|c| (c.charge_id.as_str(), c)).collect();
    let refunded = refunded(refunds);
    // Grouped once: an audit of a large store must not scan every charge for every order.
    let mut by_order: HashMap<&str, Vec<&Charge>> = HashMap::new();
    for c in charges {
        by_order.entry(c.order_id.as_str()).or_default().push(c);
    }
    let mut out = Vec::new();
    for c in charges {
        if !known.contains_key(c.order_id.as_str()) {
            out.push(Violation::new(
                charge(&c.charge_id),
                format!(
                    "{} {} for order {}, which is not in the store",
                    c.amount_cents, c.currency, c.order_id
                ),
            ));
        }
    }
    for o in orders {
        if let Some(recorded) = &o.charge_id {
            match by_id.get(recorded.as_str()) {
                None => out.push(Violation::new(
                    order(&o.id),
                    format!("records charge {recorded}, which the provider does not have"),
                )),
                Some(c) if c.order_id != o.id => out.push(Violation::new(
                    order(&o.id),
                    format!("records charge {recorded}, which is order {}'s", c.order_id),
                )),
                Some(_) => {}
            }
        }
        let mine = by_order.remove(o.id.as_str()).unwrap_or_default();
        match o.status {
            OrderStatus::Completed => {
                if mine.is_empty() {
                    out.push(Violation::new(
                        order(&o.id),
                        "COMPLETED without a charge at the provider".to_owned(),
                    ));
                }
                for c in mine {
                    if c.amount_cents != o.amount_cents || c.currency != o.currency {
                        out.push(Violation::new(
                            order(&o.id),
                            format!(
                                "COMPLETED for {} {} but its charge {} is {} {}",
                                o.amount_cents, o.currency, c.charge_id, c.amount_cents, c.currency
                            ),
                        ));
                    }
                    if let Some(cents) = refunded.get(c.charge_id.as_str()) {
                        out.push(Violation::new(
                            order(&o.id),
                            format!(
                                "COMPLETED but its charge {} was refunded ({cents} cents)",
                                c.charge_id
                            ),
                        ));
                    }
                }
            }
            OrderStatus::Cancelled | OrderStatus::CompensationFailed => {
                for c in mine {
                    let back = refunded.get(c.charge_id.as_str()).copied().unwrap_or(0);
                    if back < c.amount_cents {
                        let how = if back == 0 {
                            "not refunded".to_owned()
                        } else {
                            format!("refunded only {back} of {} cents", c.amount_cents)
                        };
                        let found = Violation::new(
                            order(&o.id),
                            format!(
                                "{} but its charge {} is {how}",
                                o.status.as_str(),
                                c.charge_id
                            ),
                        );
                        // Only a charge nothing was given back of, of an order that ended
                        // CANCELLED, and the one it records if it records one: the refund's key
                        // (`refund:{order}`) makes one refund per order, so a part refund or a
                        // second charge is a person's to sort out, and COMPENSATION_FAILED is
                        // the incident's (its compensation is redriven, not redone here).
                        let sole = o.charge_id.as_deref().is_none_or(|id| id == c.charge_id);
                        out.push(if back == 0 && sole && o.status == OrderStatus::Cancelled {
                            found.repaired_by(Remedy::Refund {
                                order: o.id.clone(),
                                charge_id: c.charge_id.clone(),
                            })
                        } else {
                            found
                        });
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// No refund without its charge, and never more back than was charged.
pub fn refunds_have_charges(charges: &[Charge], refunds: &[Refund]) -> Vec<Violation> {
    let by_id: HashMap<&str, &Charge> = charges.iter().map(|c| (c.charge_id.as_str(), c)).collect();
    let mut out = Vec::new();
    for r in refunds {
        if !by_id.contains_key(r.charge_id.as_str()) {
            out.push(Violation::new(
                format!("refund {}", r.refund_id),
                format!(
                    "{} cents back for charge {} (order {}), which the provider does not have",
                    r.amount_cents, r.charge_id, r.order_id
                ),
            ));
        }
    }
    let mut totals: Vec<(&str, u64)> = refunded(refunds).into_iter().collect();
    totals.sort();
    for (id, back) in totals {
        if let Some(c) = by_id.get(id)
            && back > c.amount_cents
        {
            out.push(Violation::new(
                charge(id),
                format!("refunded {back} cents of {} charged", c.amount_cents),
            ));
        }
    }
    out
}

/// Units per SKU in reservations of `status`.
fn held_in(reservations: &[Reservation], status: ReservationStatus) -> BTreeMap<&str, u64> {
    let mut total = BTreeMap::new();
    for r in reservations.iter().filter(|r| r.status == status) {
        for line in &r.lines {
            *total.entry(line.sku.as_str()).or_insert(0u64) += u64::from(line.quantity);
        }
    }
    total
}

/// Each SKU's stock is conserved: available + reserved + shipped = stocked (one record: no
/// race).
pub fn stock_is_conserved(stock: &[StockLevel]) -> Vec<Violation> {
    stock
        .iter()
        .filter_map(|s| {
            let total = u128::from(s.available) + u128::from(s.reserved) + u128::from(s.shipped);
            (total != u128::from(s.stocked)).then(|| {
                Violation::new(
                    format!("sku {}", s.sku),
                    format!(
                        "available {} + reserved {} + shipped {} = {total}, but {} were stocked",
                        s.available, s.reserved, s.shipped, s.stocked
                    ),
                )
            })
        })
        .collect()
}

/// Each SKU's counts are what all its reservations say (`reserved` = the units of HELD ones,
/// `shipped` = of SHIPPED ones; confirmed only when they stood still, see
/// [`Recheck::QuietSku`]), and every SKU a reservation names has a stock record. Needs every
/// reservation: the whole books only.
pub fn stock_matches_reservations(
    stock: &[StockLevel],
    reservations: &[Reservation],
) -> Vec<Violation> {
    let held = held_in(reservations, ReservationStatus::Held);
    let shipped = held_in(reservations, ReservationStatus::Shipped);
    let mut out = Vec::new();
    for s in stock {
        let (h, sh) = (
            held.get(s.sku.as_str()).copied().unwrap_or(0),
            shipped.get(s.sku.as_str()).copied().unwrap_or(0),
        );
        if s.reserved != h {
            out.push(Violation::quiet(
                &s.sku,
                format!("reserved {} but held reservations hold {h}", s.reserved),
            ));
        }
        if s.shipped != sh {
            out.push(Violation::quiet(
                &s.sku,
                format!("shipped {} but shipped reservations took {sh}", s.shipped),
            ));
        }
    }
    let stocked: Vec<&str> = stock.iter().map(|s| s.sku.as_str()).collect();
    let mut unknown: Vec<&str> = held
        .keys()
        .chain(shipped.keys())
        .copied()
        .filter(|sku| !stocked.contains(sku))
        .collect();
    unknown.sort();
    unknown.dedup();
    for sku in unknown {
        out.push(Violation::new(
            format!("sku {sku}"),
            "reservations hold or shipped it, but it has no stock record".to_owned(),
        ));
    }
    out
}

/// An order's end says what became of its reservation: a COMPLETED order's shipped, a
/// CANCELLED one's holds nothing.
pub fn reservations_match_orders(
    orders: &[OrderView],
    reservations: &[Reservation],
) -> Vec<Violation> {
    let by_order: HashMap<&str, &Reservation> = reservations
        .iter()
        .map(|r| (r.order_id.as_str(), r))
        .collect();
    let mut out = Vec::new();
    for o in orders {
        let reservation = by_order.get(o.id.as_str());
        let status = reservation.map(|r| r.status);
        match o.status {
            OrderStatus::Completed if status != Some(ReservationStatus::Shipped) => {
                let what = match status {
                    None => "COMPLETED but it has no reservation".to_owned(),
                    Some(s) => format!("COMPLETED but its reservation is {}", name(s)),
                };
                let found = Violation::new(order(&o.id), what);
                // A COMPLETED order shipped: stock still held for it left with the parcel. One
                // without a reservation, or with its stock released, is a person's to look at.
                out.push(if status == Some(ReservationStatus::Held) {
                    found.repaired_by(Remedy::MarkShipped(o.id.clone()))
                } else {
                    found
                });
            }
            OrderStatus::Cancelled if status == Some(ReservationStatus::Held) => {
                out.push(
                    Violation::new(
                        order(&o.id),
                        "CANCELLED but its reservation still holds stock".to_owned(),
                    )
                    .repaired_by(Remedy::Release(o.id.clone())),
                );
            }
            _ => {}
        }
    }
    out
}

fn name(s: ReservationStatus) -> &'static str {
    match s {
        ReservationStatus::Held => "HELD",
        ReservationStatus::Released => "RELEASED",
        ReservationStatus::Shipped => "SHIPPED",
    }
}

/// What an order stored but never started is told: the service's repair loop starts it (see
/// `crate::repair`), as `fulfillment audit --repair` or a retry of its POST does.
pub const NEVER_STARTED: &str = "stored but never started; the service's repair loop starts it, as `fulfillment audit --repair` or a retry of its POST does";

/// Every order is finished or has a running execution: one stored but never started waits for
/// a start (see [`NEVER_STARTED`]); one whose execution is gone or ended will never move again.
/// `executions` holds each looked-up execution's status (`None`: there is no such execution).
pub fn orders_have_running_executions(
    orders: &[OrderView],
    executions: &HashMap<String, Option<String>>,
) -> Vec<Violation> {
    let mut out = Vec::new();
    for o in orders.iter().filter(|o| !o.status.is_terminal()) {
        let never_started = || {
            Violation::new(order(&o.id), NEVER_STARTED.to_owned())
                .repaired_by(Remedy::Start(o.id.clone()))
        };
        let Some(arn) = &o.execution_arn else {
            out.push(never_started());
            continue;
        };
        let status = o.status.as_str();
        match executions.get(arn) {
            Some(Some(s)) if s == "RUNNING" => {}
            Some(Some(s)) => out.push(
                Violation::new(
                    order(&o.id),
                    format!("{status} but its execution {arn} is {s}"),
                )
                .repaired_by(Remedy::RecordIncident(o.id.clone())),
            ),
            // The ARN is stored with the order, before its execution starts.
            Some(None) if o.status == OrderStatus::Accepted => out.push(never_started()),
            Some(None) => out.push(Violation::new(
                order(&o.id),
                format!("{status} but its execution {arn} does not exist"),
            )),
            // Not looked up: nothing to say (the books always look up every one).
            None => {}
        }
    }
    out
}

/// Every approval token parked on an order awaiting a decision is an open task of a running
/// execution: otherwise an operator's decision cannot reach the workflow. `open_tokens` holds
/// the answer for each looked-up token.
pub fn parked_tokens_are_open(
    orders: &[OrderView],
    open_tokens: &HashMap<String, bool>,
) -> Vec<Violation> {
    orders
        .iter()
        .filter(|o| o.status == OrderStatus::AwaitingApproval)
        .filter_map(|o| {
            let token = o.parked_token.as_ref()?;
            (open_tokens.get(token) == Some(&false)).then(|| {
                Violation::new(
                    order(&o.id),
                    "its parked approval token is not an open task of a running execution, \
                     so a decision cannot reach the workflow"
                        .to_owned(),
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};
    use store::{OrderId, ReservedLine};

    fn id(s: &str) -> OrderId {
        OrderId::parse(s).unwrap()
    }

    fn view(order_id: &str, status: OrderStatus) -> OrderView {
        OrderView {
            id: id(order_id),
            status,
            amount_cents: 1500,
            currency: "EUR".to_owned(),
            execution_arn: Some(format!("arn:exec:{order_id}")),
            charge_id: None,
            parked_token: None,
        }
    }

    fn charged(charge_id: &str, order_id: &str, amount_cents: u64) -> Charge {
        Charge {
            charge_id: charge_id.to_owned(),
            idempotency_key: format!("charge:{order_id}"),
            order_id: id(order_id),
            amount_cents,
            currency: "EUR".to_owned(),
            created_at: Utc.timestamp_opt(1_700_000_000, 0).unwrap(),
        }
    }

    fn refund(refund_id: &str, c: &Charge, amount_cents: u64) -> Refund {
        Refund {
            refund_id: refund_id.to_owned(),
            idempotency_key: format!("refund:{}", c.order_id),
            charge_id: c.charge_id.clone(),
            order_id: c.order_id.clone(),
            amount_cents,
            created_at: c.created_at,
        }
    }

    fn reservation(
        order_id: &str,
        sku: &str,
        quantity: u32,
        status: ReservationStatus,
    ) -> Reservation {
        Reservation {
            order_id: id(order_id),
            lines: vec![ReservedLine {
                sku: sku.to_owned(),
                quantity,
            }],
            status,
            created_at: Utc.timestamp_opt(1_700_000_000, 0).unwrap(),
        }
    }

    fn level(
        sku: &str,
        (available, reserved, shipped): (u64, u64, u64),
        stocked: u64,
    ) -> StockLevel {
        StockLevel {
            sku: sku.to_owned(),
            available,
            reserved,
            shipped,
            stocked,
            price: None,
        }
    }

    fn subjects(violations: &[Violation]) -> Vec<&str> {
        violations.iter().map(|v| v.subject.as_str()).collect()
    }

    #[test]
    fn a_second_charge_for_an_order_is_a_double_charge() {
        let once = [charged("ch_a", "o-1", 1500), charged("ch_b", "o-2", 900)];
        assert_eq!(charged_twice(&once), []);
        let twice = [charged("ch_b", "o-1", 1500), charged("ch_a", "o-1", 1500)];
        assert_eq!(
            charged_twice(&twice),
            [Violation::new(
                "order o-1".to_owned(),
                "charged 2 times at the provider (ch_a, ch_b)".to_owned()
            )]
        );
    }

    #[test]
    fn a_charge_for_an_order_the_store_does_not_know_is_found() {
        let orders = [view("o-1", OrderStatus::Charged)];
        let clean = [charged("ch_a", "o-1", 1500)];
        assert_eq!(charges_match_orders(&orders, &clean, &[]), []);
        let stray = [charged("ch_a", "o-1", 1500), charged("ch_x", "o-9", 700)];
        let found = charges_match_orders(&orders, &stray, &[]);
        assert_eq!(subjects(&found), ["charge ch_x"]);
        assert!(found[0].what.contains("o-9"), "{found:?}");
    }

    #[test]
    fn a_completed_order_keeps_a_whole_unrefunded_charge() {
        let orders = [view("o-1", OrderStatus::Completed)];
        let c = charged("ch_a", "o-1", 1500);
        assert_eq!(
            charges_match_orders(&orders, std::slice::from_ref(&c), &[]),
            []
        );
        assert_eq!(
            subjects(&charges_match_orders(&orders, &[], &[])),
            ["order o-1"],
            "no charge"
        );
        let short = charged("ch_a", "o-1", 1400);
        let found = charges_match_orders(&orders, &[short], &[]);
        assert!(found[0].what.contains("1400"), "{found:?}");
        let found = charges_match_orders(
            &orders,
            std::slice::from_ref(&c),
            &[refund("re_1", &c, 1500)],
        );
        assert_eq!(subjects(&found), ["order o-1"]);
        assert!(found[0].what.contains("refunded"), "{found:?}");
    }

    #[test]
    fn a_cancelled_order_has_every_charge_refunded_in_full() {
        for status in [OrderStatus::Cancelled, OrderStatus::CompensationFailed] {
            let orders = [view("o-1", status)];
            let c = charged("ch_a", "o-1", 1500);
            assert_eq!(
                charges_match_orders(
                    &orders,
                    std::slice::from_ref(&c),
                    &[refund("re_1", &c, 1500)]
                ),
                []
            );
            assert_eq!(charges_match_orders(&orders, &[], &[]), [], "never charged");
            let found = charges_match_orders(&orders, std::slice::from_ref(&c), &[]);
            assert_eq!(subjects(&found), ["order o-1"]);
            assert!(found[0].what.contains("not refunded"), "{found:?}");
            let found = charges_match_orders(
                &orders,
                std::slice::from_ref(&c),
                &[refund("re_1", &c, 500)],
            );
            assert!(found[0].what.contains("500 of 1500"), "{found:?}");
        }
    }

    #[test]
    fn the_charge_an_order_records_is_one_the_provider_has_for_it() {
        let mut o = view("o-1", OrderStatus::Charged);
        o.charge_id = Some("ch_a".to_owned());
        let mine = charged("ch_a", "o-1", 1500);
        assert_eq!(charges_match_orders(&[o.clone()], &[mine], &[]), []);
        let found = charges_match_orders(&[o.clone()], &[], &[]);
        assert!(found[0].what.contains("does not have"), "{found:?}");
        let orders = [o, view("o-2", OrderStatus::Charged)];
        let theirs = charged("ch_a", "o-2", 1500);
        let found = charges_match_orders(&orders, &[theirs], &[]);
        assert_eq!(subjects(&found), ["order o-1"]);
        assert!(found[0].what.contains("o-2's"), "{found:?}");
    }

    #[test]
    fn a_refund_needs_its_charge_and_gives_back_no_more_than_it() {
        let c = charged("ch_a", "o-1", 1500);
        assert_eq!(
            refunds_have_charges(std::slice::from_ref(&c), &[refund("re_1", &c, 1500)]),
            []
        );
        let found = refunds_have_charges(&[], &[refund("re_1", &c, 1500)]);
        assert_eq!(subjects(&found), ["refund re_1"]);
        let found = refunds_have_charges(
            std::slice::from_ref(&c),
            &[refund("re_1", &c, 1500), refund("re_2", &c, 100)],
        );
        assert_eq!(subjects(&found), ["charge ch_a"]);
        assert!(found[0].what.contains("1600"), "{found:?}");
    }

    #[test]
    fn stock_counts_agree_with_reservations() {
        let reservations = [
            reservation("o-1", "book", 2, ReservationStatus::Held),
            reservation("o-2", "book", 3, ReservationStatus::Shipped),
            reservation("o-3", "book", 4, ReservationStatus::Released),
        ];
        let clean = [level("book", (5, 2, 3), 10)];
        assert_eq!(stock_matches_reservations(&clean, &reservations), vec![]);
        let off = [level("book", (5, 1, 4), 10)];
        let found = stock_matches_reservations(&off, &reservations);
        assert_eq!(subjects(&found), ["sku book", "sku book"]);
        assert!(
            found
                .iter()
                .all(|v| v.recheck == Recheck::QuietSku("book".to_owned()))
        );
        assert!(found[0].what.starts_with("reserved 1"), "{found:?}");
        assert!(found[1].what.starts_with("shipped 4"), "{found:?}");
    }

    #[test]
    fn stock_that_does_not_add_up_to_its_total_is_a_violation() {
        let tampered = [level("book", (7, 0, 0), 5)];
        let found = stock_is_conserved(&tampered);
        assert_eq!(subjects(&found), ["sku book"]);
        assert!(found[0].what.contains("5 were stocked"), "{found:?}");
        assert_eq!(stock_is_conserved(&[level("book", (2, 3, 0), 5)]), []);
    }

    #[test]
    fn reservations_of_a_sku_never_stocked_are_found() {
        let held = [reservation("o-1", "ghost", 1, ReservationStatus::Held)];
        let found = stock_matches_reservations(&[], &held);
        assert_eq!(subjects(&found), ["sku ghost"]);
        let released = [reservation("o-1", "ghost", 1, ReservationStatus::Released)];
        assert_eq!(stock_matches_reservations(&[], &released), []);
    }

    #[test]
    fn a_completed_order_shipped_its_reservation_and_a_cancelled_one_holds_none() {
        let orders = [
            view("o-1", OrderStatus::Completed),
            view("o-2", OrderStatus::Cancelled),
        ];
        let clean = [
            reservation("o-1", "book", 1, ReservationStatus::Shipped),
            reservation("o-2", "book", 1, ReservationStatus::Released),
        ];
        assert_eq!(reservations_match_orders(&orders, &clean), []);
        let wrong = [
            reservation("o-1", "book", 1, ReservationStatus::Held),
            reservation("o-2", "book", 1, ReservationStatus::Held),
        ];
        let found = reservations_match_orders(&orders, &wrong);
        assert_eq!(subjects(&found), ["order o-1", "order o-2"]);
        assert!(found[0].what.contains("HELD"), "{found:?}");
        let found = reservations_match_orders(&orders[..1], &[]);
        assert!(found[0].what.contains("no reservation"), "{found:?}");
    }

    #[test]
    fn every_order_is_finished_or_has_a_running_execution() {
        let running = view("o-1", OrderStatus::Charged);
        let arn = running.execution_arn.clone().unwrap();
        let mut executions = HashMap::from([(arn.clone(), Some("RUNNING".to_owned()))]);
        let done = view("o-2", OrderStatus::Completed);
        assert_eq!(
            orders_have_running_executions(&[running.clone(), done], &executions),
            []
        );
        executions.insert(arn.clone(), Some("FAILED".to_owned()));
        let found = orders_have_running_executions(std::slice::from_ref(&running), &executions);
        assert!(found[0].what.contains("is FAILED"), "{found:?}");
        executions.insert(arn, None);
        let found = orders_have_running_executions(&[running], &executions);
        assert!(found[0].what.contains("does not exist"), "{found:?}");
    }

    #[test]
    fn an_order_stored_but_never_started_is_found_and_started() {
        let mut stored = view("o-1", OrderStatus::Accepted);
        stored.execution_arn = None;
        let found = [
            Violation::new("order o-1".to_owned(), NEVER_STARTED.to_owned())
                .repaired_by(Remedy::Start(id("o-1"))),
        ];
        assert_eq!(
            orders_have_running_executions(std::slice::from_ref(&stored), &HashMap::new()),
            found
        );
        // Its ARN stored with it, but no execution of that name: the same, and the same remedy.
        stored.execution_arn = Some("arn:exec:o-1".to_owned());
        let none = HashMap::from([("arn:exec:o-1".to_owned(), None)]);
        assert_eq!(orders_have_running_executions(&[stored], &none), found);
    }

    #[test]
    fn only_an_unrefunded_charge_of_a_cancelled_order_is_refunded_without_a_person() {
        let c = charged("ch_a", "o-1", 1500);
        let remedy = |orders: &[OrderView], refunds: &[Refund]| {
            charges_match_orders(orders, std::slice::from_ref(&c), refunds)
                .into_iter()
                .map(|v| v.remedy)
                .collect::<Vec<_>>()
        };
        let cancelled = view("o-1", OrderStatus::Cancelled);
        let refund_it = Remedy::Refund {
            order: id("o-1"),
            charge_id: "ch_a".to_owned(),
        };
        assert_eq!(
            remedy(std::slice::from_ref(&cancelled), &[]),
            [Some(refund_it.clone())]
        );
        let mut recorded = cancelled.clone();
        recorded.charge_id = Some("ch_a".to_owned());
        assert_eq!(remedy(&[recorded], &[]), [Some(refund_it)]);
        // The order records another charge: which one its one refund is for is not ours to say.
        let mut other = cancelled.clone();
        other.charge_id = Some("ch_b".to_owned());
        assert!(remedy(&[other], &[]).iter().all(Option::is_none));
        // Refunded in part: the refund under its key was made, and cannot be made again.
        assert_eq!(remedy(&[cancelled], &[refund("re_1", &c, 500)]), [None]);
        // Its compensation failed: an incident, redriven, not redone here.
        assert_eq!(
            remedy(&[view("o-1", OrderStatus::CompensationFailed)], &[]),
            [None]
        );
        // A charge kept by a COMPLETED order is its price, not a violation to repair.
        let done = [view("o-1", OrderStatus::Completed)];
        assert_eq!(remedy(&done, &[refund("re_1", &c, 1500)]), [None]);
    }

    #[test]
    fn stock_held_by_a_finished_order_is_released_or_marked_shipped() {
        let orders = [
            view("o-1", OrderStatus::Completed),
            view("o-2", OrderStatus::Cancelled),
            view("o-3", OrderStatus::Completed),
        ];
        let held = [
            reservation("o-1", "book", 1, ReservationStatus::Held),
            reservation("o-2", "book", 1, ReservationStatus::Held),
            reservation("o-3", "book", 1, ReservationStatus::Released),
        ];
        let remedies: Vec<_> = reservations_match_orders(&orders, &held)
            .into_iter()
            .map(|v| (v.subject, v.remedy))
            .collect();
        assert_eq!(
            remedies,
            [
                ("order o-1".to_owned(), Some(Remedy::MarkShipped(id("o-1")))),
                ("order o-2".to_owned(), Some(Remedy::Release(id("o-2")))),
                // Its stock went back on the shelf although it completed: a person's to see.
                ("order o-3".to_owned(), None),
            ]
        );
    }

    #[test]
    fn what_a_person_must_look_at_has_no_remedy() {
        let twice = [charged("ch_b", "o-1", 1500), charged("ch_a", "o-1", 1500)];
        assert_eq!(charged_twice(&twice)[0].remedy, None);
        let running = view("o-1", OrderStatus::Charged);
        let gone = HashMap::from([("arn:exec:o-1".to_owned(), None)]);
        assert_eq!(
            orders_have_running_executions(std::slice::from_ref(&running), &gone)[0].remedy,
            None
        );
        // An ended execution under an unfinished order becomes an incident, for a person.
        let failed = HashMap::from([("arn:exec:o-1".to_owned(), Some("FAILED".to_owned()))]);
        assert_eq!(
            orders_have_running_executions(&[running], &failed)[0].remedy,
            Some(Remedy::RecordIncident(id("o-1")))
        );
        let completed = [view("o-1", OrderStatus::Completed)];
        assert_eq!(charges_match_orders(&completed, &[], &[])[0].remedy, None);
    }

    #[test]
    fn a_parked_approval_token_is_an_open_task() {
        let mut awaiting = view("o-1", OrderStatus::AwaitingApproval);
        awaiting.parked_token = Some("tok".to_owned());
        let open = HashMap::from([("tok".to_owned(), true)]);
        assert_eq!(parked_tokens_are_open(&[awaiting.clone()], &open), []);
        let dead = HashMap::from([("tok".to_owned(), false)]);
        assert_eq!(
            subjects(&parked_tokens_are_open(&[awaiting], &dead)),
            ["order o-1"]
        );
    }

    #[test]
    fn a_clean_book_has_no_violation_and_every_line_has_the_contract_shape() {
        let c = charged("ch_a", "o-1", 1500);
        let mut done = view("o-1", OrderStatus::Completed);
        done.charge_id = Some("ch_a".to_owned());
        let books = Books {
            scope: Scope::Whole,
            orders: vec![done],
            stock: vec![level("book", (4, 0, 1), 5)],
            reservations: vec![reservation("o-1", "book", 1, ReservationStatus::Shipped)],
            charges: vec![c.clone()],
            refunds: vec![],
            executions: HashMap::new(),
            open_tokens: HashMap::new(),
        };
        assert_eq!(check(&books), Findings::default());
        let books = Books {
            refunds: vec![refund("re_1", &c, 1500)],
            ..books
        };
        let found = check(&books);
        assert_eq!(found.violations.len(), 1);
        assert!(
            found.violations[0]
                .to_string()
                .starts_with("violation: order o-1: COMPLETED but its charge ch_a was refunded"),
            "{found:?}"
        );
    }

    #[test]
    fn books_of_recent_orders_judge_conservation_but_not_the_counts_their_reservations_cannot_add_up_to()
     {
        // Since a moment, the book's reservations are the recent orders' only: one held unit
        // of the ten older orders' shipped ones is all they show.
        let books = Books {
            scope: Scope::Since(chrono::Utc::now()),
            stock: vec![level("book", (4, 1, 10), 15)],
            reservations: vec![reservation("o-1", "book", 1, ReservationStatus::Held)],
            ..Books::default()
        };
        assert_eq!(check(&books), Findings::default());
        // The whole books hold every reservation: the ten shipped units must be there.
        let whole = Books {
            scope: Scope::Whole,
            ..books.clone()
        };
        assert_eq!(subjects(&check(&whole).violations), ["sku book"]);
        // Conservation needs only the record: judged either way.
        let broken = Books {
            stock: vec![level("book", (5, 1, 10), 15)],
            ..books
        };
        assert_eq!(subjects(&check(&broken).violations), ["sku book"]);
    }
}
