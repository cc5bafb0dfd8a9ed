//! What every peer's saga leaves behind, in one shape (stock per SKU, and per order its
//! status, reservations, charge and shipment), and the invariants the bench checks on each
//! peer's results alike: stock conserved, no order charged twice, none charged without
//! shipping, none left half-way. Our own service is checked by its own `fulfillment audit`,
//! which checks these and more.

use std::collections::BTreeMap;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Records {
    pub skus: BTreeMap<String, Sku>,
    pub orders: BTreeMap<String, Order>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sku {
    pub available: i64,
    /// Every unit the SKU was ever stocked with.
    pub given: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Order {
    pub status: String,
    pub reason: Option<String>,
    pub reserved: BTreeMap<String, Reservation>,
    /// Every charge the payment records hold for the order (the idempotency key).
    pub charges: Vec<Charge>,
    pub shipped: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reservation {
    pub quantity: i64,
    pub released: bool,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Charge {
    pub amount_cents: i64,
    pub refunded: bool,
}

/// What the orders of a run should look like.
pub struct Expect<'a> {
    /// Every order the run placed.
    pub ids: &'a [String],
    /// The catalog total of each order (every bench order is one unit at one price).
    pub total_cents: i64,
    /// Whether `AWAITING_APPROVAL` is an allowed place to be (the parked orders).
    pub parked_ok: bool,
}

impl Records {
    /// Every broken invariant, one line each (empty: clean).
    pub fn violations(&self, expect: &Expect) -> Vec<String> {
        let mut v = Vec::new();
        for (name, sku) in &self.skus {
            let held: i64 = self
                .orders
                .values()
                .filter_map(|o| o.reserved.get(name))
                .filter(|r| !r.released)
                .map(|r| r.quantity)
                .sum();
            if sku.given != sku.available + held {
                v.push(format!(
                    "{name}: stocked {} ≠ {} available + {held} held by orders",
                    sku.given, sku.available
                ));
            }
        }
        for id in expect.ids {
            if !self.orders.contains_key(id) {
                v.push(format!("{id}: no record of the order"));
            }
        }
        for (id, o) in &self.orders {
            for sku in o.reserved.keys() {
                if !self.skus.contains_key(sku) {
                    v.push(format!("{id}: reserved {sku}, which has no stock record"));
                }
            }
            if o.charges.len() > 1 {
                v.push(format!("{id}: charged {} times", o.charges.len()));
            }
            let standing: Vec<&Charge> = o.charges.iter().filter(|c| !c.refunded).collect();
            let held = !o.reserved.is_empty() && o.reserved.values().all(|r| !r.released);
            let released = o.reserved.values().all(|r| r.released);
            match o.status.as_str() {
                "COMPLETED" => {
                    if standing.len() != 1 || standing[0].amount_cents != expect.total_cents {
                        v.push(format!(
                            "{id}: COMPLETED with charges {:?}, not one of {} standing",
                            o.charges, expect.total_cents
                        ));
                    }
                    if !o.shipped {
                        v.push(format!("{id}: COMPLETED but not shipped"));
                    }
                    if !held {
                        v.push(format!("{id}: COMPLETED without its stock held"));
                    }
                }
                "CANCELLED" => {
                    if !standing.is_empty() {
                        v.push(format!("{id}: CANCELLED with a charge standing"));
                    }
                    if !released {
                        v.push(format!("{id}: CANCELLED with stock still held"));
                    }
                    if o.shipped {
                        v.push(format!("{id}: CANCELLED but shipped"));
                    }
                }
                "AWAITING_APPROVAL" if expect.parked_ok => {
                    if standing.len() != 1 || !held || o.shipped {
                        v.push(format!(
                            "{id}: AWAITING_APPROVAL without exactly its charge and stock"
                        ));
                    }
                }
                other => v.push(format!("{id}: left {other}")),
            }
        }
        v
    }

    /// The audit of a peer: its summary, or an error with the first violations.
    pub fn check(&self, expect: &Expect) -> anyhow::Result<String> {
        let violations = self.violations(expect);
        anyhow::ensure!(
            violations.is_empty(),
            "{} violations: {}",
            violations.len(),
            violations[..violations.len().min(10)].join("; ")
        );
        Ok(format!(
            "audit: {} orders ({}), 0 violations",
            self.orders.len(),
            self.tally()
        ))
    }

    /// `COMPLETED×98, CANCELLED×2`.
    pub fn tally(&self) -> String {
        let statuses: Vec<String> = self.orders.values().map(|o| o.status.clone()).collect();
        crate::service::tally(&statuses)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(status: &str, released: bool, charge: Option<bool>, shipped: bool) -> Order {
        Order {
            status: status.to_owned(),
            reason: None,
            reserved: BTreeMap::from([(
                "a".to_owned(),
                Reservation {
                    quantity: 1,
                    released,
                },
            )]),
            charges: charge
                .map(|refunded| Charge {
                    amount_cents: 1500,
                    refunded,
                })
                .into_iter()
                .collect(),
            shipped,
        }
    }

    fn books(orders: &[(&str, Order)], available: i64) -> Records {
        Records {
            skus: BTreeMap::from([(
                "a".to_owned(),
                Sku {
                    available,
                    given: 10,
                },
            )]),
            orders: orders
                .iter()
                .map(|(id, o)| ((*id).to_owned(), o.clone()))
                .collect(),
        }
    }

    fn expect(ids: &[String]) -> Expect<'_> {
        Expect {
            ids,
            total_cents: 1500,
            parked_ok: false,
        }
    }

    #[test]
    fn completed_and_compensated_orders_whose_stock_adds_up_are_clean() {
        let ids = vec!["o1".to_owned(), "o2".to_owned(), "o3".to_owned()];
        let r = books(
            &[
                ("o1", order("COMPLETED", false, Some(false), true)),
                ("o2", order("CANCELLED", true, Some(true), false)),
                ("o3", order("CANCELLED", true, None, false)),
            ],
            9,
        );
        assert_eq!(r.violations(&expect(&ids)), Vec::<String>::new());
        assert_eq!(r.tally(), "CANCELLED×2, COMPLETED×1");
    }

    #[test]
    fn stock_that_does_not_add_up_is_reported() {
        let ids = vec!["o1".to_owned()];
        let r = books(&[("o1", order("COMPLETED", false, Some(false), true))], 10);
        assert_eq!(
            r.violations(&expect(&ids)),
            vec!["a: stocked 10 ≠ 10 available + 1 held by orders"]
        );
    }

    #[test]
    fn a_second_charge_a_standing_charge_on_a_cancel_and_a_missing_order_are_reported() {
        let ids = vec!["o1".to_owned(), "o2".to_owned(), "o9".to_owned()];
        let mut twice = order("COMPLETED", false, Some(false), true);
        twice.charges.push(twice.charges[0]);
        let r = books(
            &[
                ("o1", twice),
                ("o2", order("CANCELLED", true, Some(false), false)),
            ],
            9,
        );
        let v = r.violations(&expect(&ids));
        assert!(
            v.contains(&"o9: no record of the order".to_owned()),
            "{v:?}"
        );
        assert!(v.contains(&"o1: charged 2 times".to_owned()), "{v:?}");
        assert!(
            v.contains(&"o2: CANCELLED with a charge standing".to_owned()),
            "{v:?}"
        );
    }

    #[test]
    fn an_order_left_half_way_is_reported_and_a_parked_one_only_when_parking_is_not_expected() {
        let ids = vec!["o1".to_owned()];
        let r = books(
            &[("o1", order("AWAITING_APPROVAL", false, Some(false), false))],
            9,
        );
        assert_eq!(
            r.violations(&expect(&ids)),
            vec!["o1: left AWAITING_APPROVAL"]
        );
        let parked = Expect {
            parked_ok: true,
            ..expect(&ids)
        };
        assert_eq!(r.violations(&parked), Vec::<String>::new());
        let r = books(&[("o1", order("CHARGED", false, Some(false), false))], 9);
        assert_eq!(r.violations(&parked), vec!["o1: left CHARGED"]);
    }
}
