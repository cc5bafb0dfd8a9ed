//! The sandbox gateways' ledger in the table's `SANDBOX#…` items. What SQLite checks inside one
//! transaction, DynamoDB checks in one conditional write:
//!
//! - a charge is its `CHARGE#{key}` item, put only if absent, together (one transaction) with
//!   its order's `PAYMENT#{order}` item, which records the order's first charge and is refused
//!   once the order's payment is voided, and a `CHARGE-ID#{id}` item that finds the charge by
//!   its id; a void is refused once the order has a charge;
//! - a refund is its `REFUND#{key}` item, put only if absent, together with a mark on the
//!   charge that is refused once the charge was refunded;
//! - the `SHIPMENT#{order}` item holds the shipment or the void, whichever came first.

use super::codec::{Fields, Item, n, s, ts};
use super::created::created_shard;
use super::table::{CREATED_SHARD, PARTITION_KEY, prefix};
use super::{DynamoStore, Transacted, Written, failed};
use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use store::domain::{Charge, OrderId, Refund, Shipment};
use store::error::StoreError;
use store::ledger::{
    ChargeAdded, Ledger, LedgerCharge, PaymentVoid, RefundAdded, ShipmentAdded, Shipping,
};
use store::ports::Page;

fn charge_pk(key: &str) -> String {
    format!("{}{key}", prefix::CHARGE)
}

fn charge_id_pk(charge_id: &str) -> String {
    format!("{}{charge_id}", prefix::CHARGE_ID)
}

fn payment_pk(id: &OrderId) -> String {
    format!("{}{id}", prefix::PAYMENT)
}

fn refund_pk(key: &str) -> String {
    format!("{}{key}", prefix::REFUND)
}

fn shipment_pk(id: &OrderId) -> String {
    format!("{}{id}", prefix::SHIPMENT)
}

fn charge_item(row: &LedgerCharge) -> Item {
    let c = &row.charge;
    HashMap::from([
        (PARTITION_KEY.to_owned(), s(charge_pk(&c.idempotency_key))),
        ("idempotency_key".to_owned(), s(&c.idempotency_key)),
        ("charge_id".to_owned(), s(&c.charge_id)),
        ("order_id".to_owned(), s(c.order_id.as_str())),
        ("amount_cents".to_owned(), n(c.amount_cents)),
        ("currency".to_owned(), s(&c.currency)),
        ("payment_method".to_owned(), s(&row.payment_method)),
        ("created_at".to_owned(), ts(c.created_at)),
        (
            CREATED_SHARD.to_owned(),
            created_shard(prefix::CHARGE, &c.idempotency_key, c.created_at),
        ),
    ])
}

fn charge_from(item: &Item) -> Result<LedgerCharge, StoreError> {
    let f = Fields::of(item);
    Ok(LedgerCharge {
        charge: Charge {
            charge_id: f.string("charge_id")?,
            idempotency_key: f.string("idempotency_key")?,
            order_id: f.order_id("order_id")?,
            amount_cents: f.n("amount_cents")?,
            currency: f.string("currency")?,
            created_at: f.ts("created_at")?,
        },
        payment_method: f.string("payment_method")?,
    })
}

fn refund_item(r: &Refund) -> Item {
    HashMap::from([
        (PARTITION_KEY.to_owned(), s(refund_pk(&r.idempotency_key))),
        ("idempotency_key".to_owned(), s(&r.idempotency_key)),
        ("refund_id".to_owned(), s(&r.refund_id)),
        ("charge_id".to_owned(), s(&r.charge_id)),
        ("order_id".to_owned(), s(r.order_id.as_str())),
        ("amount_cents".to_owned(), n(r.amount_cents)),
        ("created_at".to_owned(), ts(r.created_at)),
        (
            CREATED_SHARD.to_owned(),
            created_shard(prefix::REFUND, &r.idempotency_key, r.created_at),
        ),
    ])
}

fn refund_from(item: &Item) -> Result<Refund, StoreError> {
    let f = Fields::of(item);
    Ok(Refund {
        refund_id: f.string("refund_id")?,
        idempotency_key: f.string("idempotency_key")?,
        charge_id: f.string("charge_id")?,
        order_id: f.order_id("order_id")?,
        amount_cents: f.n("amount_cents")?,
        created_at: f.ts("created_at")?,
    })
}

fn shipping_from(id: &OrderId, item: Option<&Item>) -> Result<Shipping, StoreError> {
    let Some(item) = item else {
        return Ok(Shipping::Open);
    };
    let f = Fields::of(item);
    if f.has("shipment_id") {
        return Ok(Shipping::Shipped(Shipment {
            shipment_id: f.string("shipment_id")?,
            order_id: id.clone(),
            tracking_number: f.string("tracking_number")?,
            created_at: f.ts("created_at")?,
        }));
    }
    Ok(if f.bool("voided")? {
        Shipping::Voided
    } else {
        Shipping::Open
    })
}

fn missing(what: String) -> StoreError {
    StoreError::Internal(format!("sandbox ledger: {what} is missing"))
}

impl DynamoStore {
    async fn charge_at(&self, pk: String) -> Result<Option<LedgerCharge>, StoreError> {
        self.get_item(pk)
            .await?
            .as_ref()
            .map(charge_from)
            .transpose()
    }

    async fn refund_at(&self, pk: String) -> Result<Option<Refund>, StoreError> {
        self.get_item(pk)
            .await?
            .as_ref()
            .map(refund_from)
            .transpose()
    }

    /// The charge an order's payment item names as its first.
    async fn first_charge(&self, payment: &Item) -> Result<Option<LedgerCharge>, StoreError> {
        let Some(key) = Fields::of(payment).opt_s("first_charge_key")? else {
            return Ok(None);
        };
        let found = self.charge_at(charge_pk(key)).await?;
        found
            .map(Some)
            .ok_or_else(|| missing(format!("charge {key}")))
    }
}

#[async_trait]
impl Ledger for DynamoStore {
    async fn count_attempt(&self, key: &str) -> Result<u64, StoreError> {
        let pk = format!("{}{key}", prefix::ATTEMPT);
        let one = HashMap::from([(":one".to_owned(), n(1))]);
        match self.update(pk, "ADD #attempts :one", None, one).await? {
            Written::Done(item) => Fields::of(&item).n("attempts"),
            Written::Refused(_) => Err(StoreError::Internal(format!(
                "unconditional count of {key} refused"
            ))),
        }
    }

    async fn charge_by_key(&self, key: &str) -> Result<Option<LedgerCharge>, StoreError> {
        self.charge_at(charge_pk(key)).await
    }

    async fn charge_by_id(&self, charge_id: &str) -> Result<Option<LedgerCharge>, StoreError> {
        let Some(pointer) = self.get_item(charge_id_pk(charge_id)).await? else {
            return Ok(None);
        };
        let key = Fields::of(&pointer).string("idempotency_key")?;
        let found = self.charge_at(charge_pk(&key)).await?;
        found
            .map(Some)
            .ok_or_else(|| missing(format!("charge {key}")))
    }

    async fn charge_of_order(
        &self,
        order_id: &OrderId,
    ) -> Result<Option<LedgerCharge>, StoreError> {
        match self.get_item(payment_pk(order_id)).await? {
            Some(payment) => self.first_charge(&payment).await,
            None => Ok(None),
        }
    }

    async fn payment_voided(&self, order_id: &OrderId) -> Result<bool, StoreError> {
        match self.get_item(payment_pk(order_id)).await? {
            Some(payment) => Fields::of(&payment).bool("voided"),
            None => Ok(false),
        }
    }

    async fn add_charge(&self, charge: &LedgerCharge) -> Result<ChargeAdded, StoreError> {
        let c = &charge.charge;
        let items = vec![
            self.tx_put_new(charge_item(charge))?,
            self.tx_update(
                payment_pk(&c.order_id),
                "SET #first_charge_key = if_not_exists(#first_charge_key, :key)",
                "attribute_not_exists(#voided)",
                HashMap::from([(":key".to_owned(), s(&c.idempotency_key))]),
            )?,
            self.tx_put_new(HashMap::from([
                (PARTITION_KEY.to_owned(), s(charge_id_pk(&c.charge_id))),
                ("idempotency_key".to_owned(), s(&c.idempotency_key)),
            ]))?,
        ];
        let reasons = match self.transact(items).await? {
            Transacted::Done => return Ok(ChargeAdded::New),
            Transacted::Refused(reasons) => reasons,
        };
        if failed(&reasons, 0) {
            let pk = charge_pk(&c.idempotency_key);
            let found = self.refused_item(&reasons[0], pk).await?;
            let found = found.ok_or_else(|| missing(format!("charge {}", c.idempotency_key)))?;
            return Ok(ChargeAdded::Existing(charge_from(&found)?));
        }
        if failed(&reasons, 1) {
            return Ok(ChargeAdded::Voided);
        }
        Err(StoreError::Internal(format!(
            "charge id {} names another charge than {}",
            c.charge_id, c.idempotency_key
        )))
    }

    async fn void_payment(&self, order_id: &OrderId) -> Result<PaymentVoid, StoreError> {
        let values = HashMap::from([(":true".to_owned(), AttributeValue::Bool(true))]);
        let written = self
            .update(
                payment_pk(order_id),
                "SET #voided = :true",
                Some("attribute_not_exists(#first_charge_key)"),
                values,
            )
            .await?;
        match written {
            Written::Done(_) => Ok(PaymentVoid::Voided),
            Written::Refused(payment) => {
                let payment = payment.ok_or_else(|| missing(format!("payment of {order_id}")))?;
                let charge = self.first_charge(&payment).await?;
                let charge = charge.ok_or_else(|| missing(format!("charge of {order_id}")))?;
                Ok(PaymentVoid::Charged(charge))
            }
        }
    }

    async fn refund_by_key(&self, key: &str) -> Result<Option<Refund>, StoreError> {
        self.refund_at(refund_pk(key)).await
    }

    async fn refund_of_charge(&self, charge: &Charge) -> Result<Option<Refund>, StoreError> {
        let Some(item) = self.get_item(charge_pk(&charge.idempotency_key)).await? else {
            return Ok(None);
        };
        match Fields::of(&item).opt_s("refund_key")? {
            Some(key) => self.refund_at(refund_pk(key)).await,
            None => Ok(None),
        }
    }

    async fn add_refund(
        &self,
        refund: &Refund,
        charge: &Charge,
    ) -> Result<RefundAdded, StoreError> {
        let items = vec![
            self.tx_put_new(refund_item(refund))?,
            self.tx_update(
                charge_pk(&charge.idempotency_key),
                "SET #refund_key = :key",
                &format!(
                    "attribute_exists(#{PARTITION_KEY}) AND attribute_not_exists(#refund_key)"
                ),
                HashMap::from([(":key".to_owned(), s(&refund.idempotency_key))]),
            )?,
        ];
        let reasons = match self.transact(items).await? {
            Transacted::Done => return Ok(RefundAdded::New),
            Transacted::Refused(reasons) => reasons,
        };
        if failed(&reasons, 0) {
            let key = &refund.idempotency_key;
            let found = self.refused_item(&reasons[0], refund_pk(key)).await?;
            let found = found.ok_or_else(|| missing(format!("refund {key}")))?;
            return Ok(RefundAdded::KeyUsed(refund_from(&found)?));
        }
        let key = &charge.idempotency_key;
        let found = self.refused_item(&reasons[1], charge_pk(key)).await?;
        let found = found.ok_or_else(|| missing(format!("charge {key}")))?;
        let refund_key = Fields::of(&found).string("refund_key")?;
        let earlier = self.refund_at(refund_pk(&refund_key)).await?;
        let earlier = earlier.ok_or_else(|| missing(format!("refund {refund_key}")))?;
        Ok(RefundAdded::ChargeRefunded(earlier))
    }

    async fn shipping(&self, order_id: &OrderId) -> Result<Shipping, StoreError> {
        let item = self.get_item(shipment_pk(order_id)).await?;
        shipping_from(order_id, item.as_ref())
    }

    async fn add_shipment(&self, shipment: &Shipment) -> Result<ShipmentAdded, StoreError> {
        let id = &shipment.order_id;
        let item = HashMap::from([
            (PARTITION_KEY.to_owned(), s(shipment_pk(id))),
            ("shipment_id".to_owned(), s(&shipment.shipment_id)),
            ("tracking_number".to_owned(), s(&shipment.tracking_number)),
            ("created_at".to_owned(), ts(shipment.created_at)),
        ]);
        match self.put_new(item).await? {
            Written::Done(_) => Ok(ShipmentAdded::New),
            Written::Refused(found) => match shipping_from(id, found.as_ref())? {
                Shipping::Shipped(found) => Ok(ShipmentAdded::Existing(found)),
                Shipping::Voided => Ok(ShipmentAdded::Voided),
                Shipping::Open => Err(missing(format!("shipping record of {id}"))),
            },
        }
    }

    async fn void_shipping(&self, order_id: &OrderId) -> Result<Shipping, StoreError> {
        let values = HashMap::from([(":true".to_owned(), AttributeValue::Bool(true))]);
        let written = self
            .update(
                shipment_pk(order_id),
                "SET #voided = :true",
                Some("attribute_not_exists(#shipment_id)"),
                values,
            )
            .await?;
        match written {
            Written::Done(_) => Ok(Shipping::Voided),
            Written::Refused(found) => shipping_from(order_id, found.as_ref()),
        }
    }

    /// The `CHARGE#` items (`CHARGE-ID#` pointers have another prefix).
    async fn list_charges(
        &self,
        since: Option<DateTime<Utc>>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<Charge>, StoreError> {
        let (items, next) = match since {
            None => self.scan_prefix(prefix::CHARGE, after, limit).await?,
            Some(since) => {
                self.list_created(prefix::CHARGE, since, after, limit)
                    .await?
            }
        };
        let items = items
            .iter()
            .map(|item| charge_from(item).map(|c| c.charge))
            .collect::<Result<_, _>>()?;
        Ok(Page { items, next })
    }

    async fn list_refunds(
        &self,
        since: Option<DateTime<Utc>>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<Refund>, StoreError> {
        let (items, next) = match since {
            None => self.scan_prefix(prefix::REFUND, after, limit).await?,
            Some(since) => {
                self.list_created(prefix::REFUND, since, after, limit)
                    .await?
            }
        };
        let items = items.iter().map(refund_from).collect::<Result<_, _>>()?;
        Ok(Page { items, next })
    }
}
