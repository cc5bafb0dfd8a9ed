//! What the EasyPost gateway records in our own store about each order's label, so that at most
//! one label is ever bought for an order. EasyPost has no idempotency keys: two `POST
//! /v2/shipments` make two shipments, and a lost answer leaves nothing to replay. What it does
//! guarantee is one label per shipment (a second buy of a bought shipment is refused). So the
//! gateway records, first come first served, which provider shipment is the order's, and only
//! ever buys that one; a worker that created another shipment (a race, a lost answer) leaves it
//! unbought, which costs nothing.
//!
//! The record is one row (SQLite) or item (DynamoDB) per order, changed by [`LabelStep`]s: each
//! is applied atomically by the backend (a savepoint of the single writer; a write conditional
//! on the item's version) through the one rule [`LabelRecord::after`], so both backends decide
//! alike and two racing callers see each other's writes.

use crate::domain::{OrderId, Shipment};
use crate::error::StoreError;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The gateway's record of one order (the default: nothing done yet).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelRecord {
    /// The provider shipment that is the order's: the first one recorded, the only one bought.
    pub shipment_id: Option<String>,
    /// Buys sent whose outcome is not known yet, by attempt, with when each was started: a buy
    /// may still land until its caller's timeout has passed.
    #[serde(default)]
    pub buying: BTreeMap<String, DateTime<Utc>>,
    /// The label bought, as the port's shipment. Once recorded the order has shipped.
    pub label: Option<Shipment>,
    /// When the order's shipping was voided, before any label was recorded: no label may be
    /// recorded after, and one bought meanwhile is refunded.
    pub voided_at: Option<DateTime<Utc>>,
    /// The provider's refund status of a label that was bought for a voided order.
    pub label_refund: Option<String>,
}

/// One change of a [`LabelRecord`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelStep {
    /// This provider shipment is the order's, unless one is recorded or the order is voided.
    Claim(String),
    /// A buy is about to be sent, unless the order is voided or has its label.
    BuyStarted { attempt: String, at: DateTime<Utc> },
    /// The provider answered that buy (a label, or a refusal): it can no longer land.
    BuyEnded { attempt: String },
    /// The label, unless the order is voided or has one.
    Bought(Shipment),
    /// Void the order's shipping, unless it has its label.
    Void { at: DateTime<Utc> },
    /// The label of a voided order was refunded, with the provider's refund status.
    LabelRefunded(String),
}

impl LabelRecord {
    pub fn is_voided(&self) -> bool {
        self.voided_at.is_some()
    }

    /// Open: neither a label nor a void recorded, so a shipment may still be made.
    fn open(&self) -> bool {
        self.label.is_none() && !self.is_voided()
    }

    /// The record once `step` is applied: the rule every backend applies atomically. A step that
    /// does not apply leaves the record as it is, and the caller reads why from it.
    pub fn after(&self, step: &LabelStep) -> LabelRecord {
        let mut next = self.clone();
        match step {
            LabelStep::Claim(id) if self.open() && self.shipment_id.is_none() => {
                next.shipment_id = Some(id.clone());
            }
            LabelStep::BuyStarted { attempt, at } if self.open() => {
                next.buying.insert(attempt.clone(), *at);
            }
            LabelStep::BuyEnded { attempt } => {
                next.buying.remove(attempt);
            }
            LabelStep::Bought(label) if self.open() => {
                next.label = Some(label.clone());
                next.buying.clear();
            }
            LabelStep::Void { at } if self.open() => next.voided_at = Some(*at),
            LabelStep::LabelRefunded(status) if self.is_voided() => {
                next.label_refund = Some(status.clone());
            }
            _ => {}
        }
        next
    }
}

/// Where the EasyPost gateway keeps its [`LabelRecord`]s: `SqliteStore` (table
/// `carrier_labels`) and `DynamoStore` (`LABEL#` items). Reads are strongly consistent.
#[async_trait]
pub trait LabelBook: Send + Sync {
    /// The order's record; the default one when nothing was recorded.
    async fn label_record(&self, order_id: &OrderId) -> Result<LabelRecord, StoreError>;

    /// Applies `step` atomically (see [`LabelRecord::after`]) and returns the record after it.
    async fn record_label_step(
        &self,
        order_id: &OrderId,
        step: &LabelStep,
    ) -> Result<LabelRecord, StoreError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label(id: &str) -> Shipment {
        Shipment {
            shipment_id: id.to_owned(),
            order_id: OrderId::parse("o1").unwrap(),
            tracking_number: "9400".to_owned(),
            created_at: Utc::now(),
        }
    }

    fn apply(steps: &[LabelStep]) -> LabelRecord {
        steps
            .iter()
            .fold(LabelRecord::default(), |r, step| r.after(step))
    }

    #[test]
    fn the_first_claimed_shipment_stays_the_orders() {
        let r = apply(&[
            LabelStep::Claim("shp_a".into()),
            LabelStep::Claim("shp_b".into()),
        ]);
        assert_eq!(r.shipment_id.as_deref(), Some("shp_a"));
    }

    #[test]
    fn a_void_fences_out_claims_buys_and_labels() {
        let at = Utc::now();
        let r = apply(&[
            LabelStep::Void { at },
            LabelStep::Claim("shp_a".into()),
            LabelStep::BuyStarted {
                attempt: "1".into(),
                at,
            },
            LabelStep::Bought(label("shp_a")),
        ]);
        assert_eq!(
            r,
            LabelRecord {
                voided_at: Some(at),
                ..LabelRecord::default()
            }
        );
        let r = r.after(&LabelStep::LabelRefunded("submitted".into()));
        assert_eq!(r.label_refund.as_deref(), Some("submitted"));
    }

    #[test]
    fn a_recorded_label_is_kept_and_refuses_the_void() {
        let first = label("shp_a");
        let at = Utc::now();
        let r = apply(&[
            LabelStep::Claim("shp_a".into()),
            LabelStep::BuyStarted {
                attempt: "1".into(),
                at,
            },
            LabelStep::Bought(first.clone()),
            LabelStep::Bought(label("shp_b")),
            LabelStep::Void { at },
            LabelStep::LabelRefunded("submitted".into()),
        ]);
        assert_eq!(r.label, Some(first));
        assert!(!r.is_voided() && r.buying.is_empty() && r.label_refund.is_none());
    }

    #[test]
    fn buys_in_flight_are_kept_until_each_ends() {
        let at = Utc::now();
        let r = apply(&[
            LabelStep::BuyStarted {
                attempt: "1".into(),
                at,
            },
            LabelStep::BuyStarted {
                attempt: "2".into(),
                at,
            },
            LabelStep::BuyEnded {
                attempt: "1".into(),
            },
        ]);
        assert_eq!(r.buying.keys().collect::<Vec<_>>(), ["2"]);
        // A void keeps them: the buys may still land, and the void must wait for them.
        assert_eq!(r.after(&LabelStep::Void { at }).buying.len(), 1);
    }
}
