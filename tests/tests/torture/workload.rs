//! The seeded workload: which orders are placed, with which sandbox values, how often and how
//! they are resubmitted, what the operator decides on the large ones, and how much stock each
//! SKU gets. One seed, one workload: a failing run is replayed with `TORTURE_SEED`.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Orders at or above this total wait for an operator (the service's default threshold).
pub const APPROVAL_THRESHOLD_CENTS: u64 = 100_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payment {
    Visa,
    Declined,
    UnavailableOnce,
    LostResponse,
}

impl Payment {
    pub fn method(self) -> &'static str {
        match self {
            Payment::Visa => "pm_card_visa",
            Payment::Declined => "pm_card_chargeDeclined",
            Payment::UnavailableOnce => "pm_card_unavailable_once",
            Payment::LostResponse => "pm_card_lost_response",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shipping {
    Normal,
    /// `00000`: the carrier rejects the shipment.
    Rejected,
    /// `99999`: the carrier is unavailable once.
    UnavailableOnce,
}

impl Shipping {
    pub fn postal_code(self) -> &'static str {
        match self {
            Shipping::Normal => "22201",
            Shipping::Rejected => "00000",
            Shipping::UnavailableOnce => "99999",
        }
    }
}

/// What the operator sends once a large order waits: decisions one after the other, or
/// (`concurrent`) all at once. None at all lets the approval window close.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decisions {
    pub sequence: Vec<&'static str>,
    pub concurrent: bool,
}

#[derive(Debug, Clone)]
pub struct Line {
    pub sku: String,
    pub quantity: u32,
    /// The SKU's catalog price (what the order is charged at).
    pub unit_price_cents: u64,
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub id: String,
    pub lines: Vec<Line>,
    pub payment: Payment,
    pub shipping: Shipping,
    /// Set on orders at or above the approval threshold.
    pub decisions: Option<Decisions>,
    /// Identical submissions sent together with the first.
    pub duplicates: u32,
    /// The same body once more, a while after the first answer.
    pub replay_later: bool,
    /// Another body under the same id, once the first was accepted.
    pub conflicting: bool,
    /// Whether the body says each line's unit price (it must be the catalog's), or leaves it
    /// to the catalog.
    pub states_prices: bool,
    /// Whether the payment provider lands this order's charge late, after the saga gave up
    /// waiting for it (set by a variant that makes it so).
    pub charge_lands_late: bool,
}

impl Plan {
    pub fn amount_cents(&self) -> u64 {
        self.lines
            .iter()
            .map(|l| u64::from(l.quantity) * l.unit_price_cents)
            .sum()
    }

    pub fn is_large(&self) -> bool {
        self.amount_cents() >= APPROVAL_THRESHOLD_CENTS
    }

    pub fn body(&self) -> Value {
        self.body_with(&self.lines)
    }

    /// The same order id with one more unit of its first line.
    pub fn conflicting_body(&self) -> Value {
        let mut lines = self.lines.clone();
        lines[0].quantity += 1;
        self.body_with(&lines)
    }

    fn body_with(&self, lines: &[Line]) -> Value {
        json!({
            "orderId": self.id,
            "customerId": "cus_torture",
            "items": lines.iter().map(|l| {
                let mut line = json!({ "sku": l.sku, "quantity": l.quantity });
                if self.states_prices {
                    line["unitPriceCents"] = json!(l.unit_price_cents);
                }
                line
            }).collect::<Vec<_>>(),
            "currency": "EUR",
            "paymentMethod": self.payment.method(),
            "shippingAddress": {
                "name": "Grace Hopper",
                "line1": "1 Compiler Street",
                "city": "Arlington",
                "postalCode": self.shipping.postal_code(),
                "country": "US"
            }
        })
    }
}

pub struct Workload {
    pub plans: Vec<Plan>,
    /// The units each SKU is stocked with, once, before the first order.
    pub stock: BTreeMap<String, u64>,
    /// Each SKU's catalog price, set with its stock.
    pub prices: BTreeMap<String, u64>,
    /// The units all orders together ask for, per SKU.
    pub demand: BTreeMap<String, u64>,
}

impl Workload {
    pub fn generate(seed: u64, orders: usize, skus: usize) -> Workload {
        let mut rng = StdRng::seed_from_u64(seed);
        // Everyday SKUs cost under 90.00 (three lines of three stay under the threshold); a
        // quarter as many grand ones cost the threshold or more (one alone needs an approval).
        let catalog = Catalog {
            everyday: (0..skus).map(|i| format!("sku-{i:02}")).collect(),
            grand: (0..(skus / 4).max(1))
                .map(|i| format!("grand-{i:02}"))
                .collect(),
        };
        let mut prices = BTreeMap::new();
        for sku in &catalog.everyday {
            prices.insert(sku.clone(), rng.random_range(500..9_000));
        }
        for sku in &catalog.grand {
            let cents = rng.random_range(APPROVAL_THRESHOLD_CENTS..=400_000);
            prices.insert(sku.clone(), cents);
        }
        let plans: Vec<Plan> = (0..orders)
            .map(|n| plan(&mut rng, format!("t{n:04}"), &catalog, &prices))
            .collect();
        let mut demand: BTreeMap<String, u64> = prices.keys().map(|s| (s.clone(), 0)).collect();
        for line in plans.iter().flat_map(|p| &p.lines) {
            *demand.get_mut(&line.sku).unwrap() += u64::from(line.quantity);
        }
        // Most SKUs cover their demand; about a third get half of it, so orders race for the
        // last units and some go out of stock.
        let stock = demand
            .iter()
            .map(|(sku, &wanted)| {
                let units = if rng.random_bool(0.35) {
                    wanted / 2
                } else {
                    wanted + rng.random_range(0..=3)
                };
                (sku.clone(), units)
            })
            .collect();
        Workload {
            plans,
            stock,
            prices,
            demand,
        }
    }
}

impl Workload {
    /// The workload for real providers behind a fault-injecting proxy: the sandbox's magic
    /// faults (`pm_card_unavailable_once`, `pm_card_lost_response`, postal code `99999`) become
    /// plain orders, as the faults now come from the proxy and hit any order. Declines and the
    /// carrier's refusal (`00000`, which the fake carrier is told to refuse) stay.
    pub fn without_sandbox_faults(mut self) -> Workload {
        for plan in &mut self.plans {
            if matches!(
                plan.payment,
                Payment::UnavailableOnce | Payment::LostResponse
            ) {
                plan.payment = Payment::Visa;
            }
            if plan.shipping == Shipping::UnavailableOnce {
                plan.shipping = Shipping::Normal;
            }
        }
        self
    }

    /// Up to `n` orders, among the first half, whose charge the provider lands late: small
    /// ones, paid by a card that works, shipped normally, of SKUs stocked for every order (so
    /// each reaches its charge). Their ids.
    pub fn land_charges_late(&mut self, n: usize, seed: u64) -> Vec<String> {
        let mut rng = StdRng::seed_from_u64(seed.wrapping_add(3));
        let half = self.plans.len() / 2;
        let stocked = |l: &Line| self.demand[&l.sku] <= self.stock[&l.sku];
        let mut candidates: Vec<usize> = (0..half)
            .filter(|&i| {
                let p = &self.plans[i];
                !p.is_large()
                    && p.payment == Payment::Visa
                    && p.shipping == Shipping::Normal
                    && p.lines.iter().all(stocked)
            })
            .collect();
        let mut chosen = Vec::new();
        while chosen.len() < n && !candidates.is_empty() {
            let i = candidates.swap_remove(rng.random_range(0..candidates.len()));
            self.plans[i].charge_lands_late = true;
            chosen.push(self.plans[i].id.clone());
        }
        chosen
    }
}

/// A SKU, the popular ones more often.
fn pick_sku<'a>(rng: &mut StdRng, skus: &'a [String]) -> &'a String {
    let u: f64 = rng.random();
    &skus[((u * u) * skus.len() as f64) as usize % skus.len()]
}

/// The SKUs of the workload's catalog, by price range.
struct Catalog {
    everyday: Vec<String>,
    grand: Vec<String>,
}

fn plan(rng: &mut StdRng, id: String, catalog: &Catalog, prices: &BTreeMap<String, u64>) -> Plan {
    let large = rng.random_bool(0.2);
    let line = |sku: &String, quantity| Line {
        sku: sku.clone(),
        quantity,
        unit_price_cents: prices[sku],
    };
    let (lines, payment, shipping, decisions) = if large {
        let line = line(pick_sku(rng, &catalog.grand), 1);
        let payment = match rng.random_range(0..20) {
            0..=1 => Payment::Declined,
            2 => Payment::LostResponse,
            3 => Payment::UnavailableOnce,
            _ => Payment::Visa,
        };
        (vec![line], payment, Shipping::Normal, Some(decisions(rng)))
    } else {
        // At most 3 lines of 3 units under 9,000 cents: always under the threshold.
        let lines = (0..rng.random_range(1..=3))
            .map(|_| {
                let sku = pick_sku(rng, &catalog.everyday);
                line(sku, rng.random_range(1..=3))
            })
            .collect();
        let payment = match rng.random_range(0..100) {
            0..=13 => Payment::Declined,
            14..=25 => Payment::UnavailableOnce,
            26..=37 => Payment::LostResponse,
            _ => Payment::Visa,
        };
        let shipping = match rng.random_range(0..100) {
            0..=9 => Shipping::Rejected,
            10..=19 => Shipping::UnavailableOnce,
            _ => Shipping::Normal,
        };
        (lines, payment, shipping, None)
    };
    Plan {
        id,
        lines,
        payment,
        shipping,
        decisions,
        duplicates: if rng.random_bool(0.12) {
            rng.random_range(1..=3)
        } else {
            0
        },
        replay_later: rng.random_bool(0.08),
        conflicting: rng.random_bool(0.08),
        states_prices: rng.random_bool(0.5),
        charge_lands_late: false,
    }
}

fn decisions(rng: &mut StdRng) -> Decisions {
    let (sequence, concurrent) = match rng.random_range(0..10) {
        0..=2 => (vec!["approve"], false),
        3..=4 => (vec!["reject"], false),
        5 => (vec!["approve", "approve"], false),
        6 => (vec!["reject", "reject"], false),
        7 => {
            let first = if rng.random_bool(0.5) {
                "approve"
            } else {
                "reject"
            };
            let other = if first == "approve" {
                "reject"
            } else {
                "approve"
            };
            (vec![first, other], false)
        }
        8 => (vec!["approve", "reject", "approve"], true),
        // The window closes.
        _ => (Vec::new(), false),
    };
    Decisions {
        sequence,
        concurrent,
    }
}
