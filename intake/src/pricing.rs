//! Prices from the catalog: an order's lines are priced by the operators' catalog, never by the
//! caller. A line may carry the unit price the caller expects; it must then be the catalog's
//! (a storefront showing a stale price learns it before anyone is charged). A SKU without a
//! price cannot be ordered, nor can a line priced in another currency than the order's.

use crate::numbers::{whole, whole_opt};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use store::{LineItem, Price};
use utoipa::ToSchema;

/// A line of an order.
// As the caller sends it: the price is optional, and only checked. Its serialized form is part
// of the order's body hash (`intake::body_hash`): keep it stable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schema(as = OrderLine)]
pub struct RequestedLine {
    #[schema(
        min_length = 1,
        max_length = 64,
        pattern = "^[A-Za-z0-9_.-]+$",
        example = "book"
    )]
    pub sku: String,
    #[schema(minimum = 1, maximum = 10000, example = 1)]
    #[serde(deserialize_with = "whole")]
    pub quantity: u32,
    /// The price of one unit the caller expects, in the currency's minor unit. Optional: the
    /// order is priced from the catalog; when given, it must be the catalog's price
    /// (`price-mismatch` otherwise).
    #[schema(minimum = 0, maximum = 100000000, example = 2500, nullable = false)]
    #[serde(
        default,
        deserialize_with = "whole_opt",
        skip_serializing_if = "Option::is_none"
    )]
    pub unit_price_cents: Option<u64>,
}

/// Why one line cannot be priced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineProblem {
    /// The SKU has no price in the catalog (or is not in it at all).
    NotPriced,
    /// The catalog prices the SKU in another currency than the order's.
    OtherCurrency { catalog: String },
    /// The caller's unit price is not the catalog's.
    PriceMismatch { sent: u64, catalog: u64 },
}

/// A line that cannot be priced: its index in the order, its SKU and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mispriced {
    pub index: usize,
    pub sku: String,
    pub problem: LineProblem,
}

impl Mispriced {
    /// The line's field the problem is about, as a JSON pointer into the order's body.
    pub fn pointer(&self) -> String {
        match self.problem {
            LineProblem::NotPriced | LineProblem::OtherCurrency { .. } => {
                format!("/items/{}/sku", self.index)
            }
            LineProblem::PriceMismatch { .. } => format!("/items/{}/unitPriceCents", self.index),
        }
    }

    pub fn message(&self, currency: &str) -> String {
        let sku = &self.sku;
        match &self.problem {
            LineProblem::NotPriced => format!("{sku:?} has no price in the catalog"),
            LineProblem::OtherCurrency { catalog } => {
                format!("{sku:?} is priced in {catalog}, not in the order's {currency}")
            }
            LineProblem::PriceMismatch { sent, catalog } => {
                format!("the catalog price of {sku:?} is {catalog}, not {sent}")
            }
        }
    }
}

/// The order's lines at the catalog's prices, or every line that cannot be priced.
pub fn price_lines(
    lines: &[RequestedLine],
    currency: &str,
    catalog: &HashMap<String, Price>,
) -> Result<Vec<LineItem>, Vec<Mispriced>> {
    let mut priced = Vec::with_capacity(lines.len());
    let mut refused = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        let problem = match catalog.get(&line.sku) {
            None => Some(LineProblem::NotPriced),
            Some(price) if price.currency != currency => Some(LineProblem::OtherCurrency {
                catalog: price.currency.clone(),
            }),
            Some(price) => match line.unit_price_cents {
                Some(sent) if sent != price.cents => Some(LineProblem::PriceMismatch {
                    sent,
                    catalog: price.cents,
                }),
                _ => {
                    priced.push(LineItem {
                        sku: line.sku.clone(),
                        quantity: line.quantity,
                        unit_price_cents: price.cents,
                    });
                    None
                }
            },
        };
        if let Some(problem) = problem {
            refused.push(Mispriced {
                index,
                sku: line.sku.clone(),
                problem,
            });
        }
    }
    if refused.is_empty() {
        Ok(priced)
    } else {
        Err(refused)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(sku: &str, unit_price_cents: Option<u64>) -> RequestedLine {
        RequestedLine {
            sku: sku.to_owned(),
            quantity: 2,
            unit_price_cents,
        }
    }

    fn catalog() -> HashMap<String, Price> {
        HashMap::from([
            (
                "book".to_owned(),
                Price {
                    cents: 2500,
                    currency: "EUR".to_owned(),
                },
            ),
            (
                "mug".to_owned(),
                Price {
                    cents: 900,
                    currency: "USD".to_owned(),
                },
            ),
        ])
    }

    #[test]
    fn lines_take_the_catalog_price_whether_or_not_the_caller_says_it() {
        let priced = price_lines(
            &[line("book", None), line("book", Some(2500))],
            "EUR",
            &catalog(),
        )
        .expect("priced");
        assert!(priced.iter().all(|l| l.unit_price_cents == 2500));
        assert!(priced.iter().all(|l| l.quantity == 2 && l.sku == "book"));
    }

    #[test]
    fn every_line_that_cannot_be_priced_is_named() {
        let refused = price_lines(
            &[
                line("book", Some(0)),
                line("book", None),
                line("mug", None),
                line("ghost", Some(1)),
            ],
            "EUR",
            &catalog(),
        )
        .expect_err("refused");
        let problems: Vec<_> = refused
            .iter()
            .map(|m| (m.index, m.problem.clone()))
            .collect();
        assert_eq!(
            problems,
            vec![
                (
                    0,
                    LineProblem::PriceMismatch {
                        sent: 0,
                        catalog: 2500
                    }
                ),
                (
                    2,
                    LineProblem::OtherCurrency {
                        catalog: "USD".to_owned()
                    }
                ),
                (3, LineProblem::NotPriced),
            ]
        );
        assert_eq!(refused[0].pointer(), "/items/0/unitPriceCents");
        assert_eq!(refused[2].pointer(), "/items/3/sku");
        assert_eq!(
            refused[0].message("EUR"),
            "the catalog price of \"book\" is 2500, not 0"
        );
    }
}
