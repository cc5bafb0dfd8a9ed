//! `InventoryRepository` on DynamoDB. A reservation is one `TransactWriteItems`: a conditional
//! decrement of each SKU (`available >= quantity`) and the reservation item, put only if the
//! order has none. DynamoDB applies all of it or nothing, so stock never goes negative and an
//! order never reserves twice, however many run at once; a cancelled transaction's reasons tell
//! which condition failed: the reservation (the order has one: it is read and returned) or a
//! SKU (out of stock, with what the SKU held). A release or a shipment moves the held stock and
//! the reservation's status in one transaction too.
//!
//! A release that finds no reservation puts a marker item (status `RELEASED`, no lines), so a
//! reserve that arrives late (a retried or zombie step after the compensation ran) is refused,
//! exactly as in SQLite.
//!
//! One transaction holds at most 100 items: an order of up to 99 distinct SKUs.

use super::codec::{Fields, Item, json, n, s, ts};
use super::created::created_shard;
use super::table::{CREATED_SHARD, PARTITION_KEY, prefix};
use super::{DynamoStore, Transacted, Written, failed};
use async_trait::async_trait;
use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use store::domain::*;
use store::error::StoreError;
use store::ports::{InventoryRepository, Page, Released, Reserved};

/// DynamoDB's limit of items in one transaction.
const TRANSACTION_ITEMS: usize = 100;

/// How often a reserve or release starts over after the reservation changed under it.
const ATTEMPTS: u32 = 5;

/// How often a count starts over after a reservation or shipment of the SKU changed it between
/// its read and its write.
const COUNT_ATTEMPTS: u32 = 10;

fn stock_pk(sku: &str) -> String {
    format!("{}{sku}", prefix::STOCK)
}

fn reservation_pk(id: &OrderId) -> String {
    format!("{}{id}", prefix::RESERVATION)
}

fn status_str(s: ReservationStatus) -> &'static str {
    match s {
        ReservationStatus::Held => "HELD",
        ReservationStatus::Released => "RELEASED",
        ReservationStatus::Shipped => "SHIPPED",
    }
}

fn stock_from(item: &Item) -> Result<StockLevel, StoreError> {
    let f = Fields::of(item);
    Ok(StockLevel {
        sku: f.string("sku")?,
        available: f.n("available")?,
        reserved: f.n("reserved")?,
        shipped: f.n("shipped")?,
        stocked: f.n("stocked")?,
        price: match (f.opt_n("price_cents")?, f.opt_string("currency")?) {
            (Some(cents), Some(currency)) => Some(Price { cents, currency }),
            _ => None,
        },
    })
}

/// A reservation item, with the marker of a release that came first.
struct Row {
    reservation: Reservation,
    released_unreserved: bool,
}

fn row_from(item: &Item) -> Result<Row, StoreError> {
    let f = Fields::of(item);
    let status = match f.s("status")? {
        "HELD" => ReservationStatus::Held,
        "RELEASED" => ReservationStatus::Released,
        "SHIPPED" => ReservationStatus::Shipped,
        other => {
            return Err(StoreError::Internal(format!(
                "reservation with unknown status {other}"
            )));
        }
    };
    Ok(Row {
        reservation: Reservation {
            order_id: f.order_id("order_id")?,
            lines: f.json("lines")?,
            status,
            created_at: f.ts("created_at")?,
        },
        released_unreserved: f.bool("released_unreserved")?,
    })
}

fn reservation_item(
    reservation: &Reservation,
    released_unreserved: bool,
) -> Result<Item, StoreError> {
    let id = &reservation.order_id;
    Ok(HashMap::from([
        (PARTITION_KEY.to_owned(), s(reservation_pk(id))),
        ("order_id".to_owned(), s(id.as_str())),
        ("lines".to_owned(), json(&reservation.lines)?),
        ("status".to_owned(), s(status_str(reservation.status))),
        (
            "released_unreserved".to_owned(),
            AttributeValue::Bool(released_unreserved),
        ),
        ("created_at".to_owned(), ts(reservation.created_at)),
        (
            CREATED_SHARD.to_owned(),
            created_shard(prefix::RESERVATION, id.as_str(), reservation.created_at),
        ),
        ("updated_at".to_owned(), ts(reservation.created_at)),
    ]))
}

/// What moving a held reservation's stock did.
enum Moved {
    Done,
    /// The reservation is no longer held (another call moved it first).
    NotHeld,
}

impl DynamoStore {
    async fn load_reservation(&self, id: &OrderId) -> Result<Option<Row>, StoreError> {
        self.get_item(reservation_pk(id))
            .await?
            .as_ref()
            .map(row_from)
            .transpose()
    }

    /// Moves the held reservation's quantities from `reserved` to `to_attribute` (`available` on
    /// a release, `shipped` on shipping) and sets its status, in one transaction.
    async fn move_reserved(
        &self,
        res: &Reservation,
        status: ReservationStatus,
        to_attribute: &str,
    ) -> Result<Moved, StoreError> {
        let mut items = vec![self.tx_update(
            reservation_pk(&res.order_id),
            "SET #status = :status, #updated_at = :now",
            "#status = :held",
            HashMap::from([
                (":status".to_owned(), s(status_str(status))),
                (":now".to_owned(), ts(Utc::now())),
                (":held".to_owned(), s(status_str(ReservationStatus::Held))),
            ]),
        )?];
        let lines = quantities_per_sku(&res.lines);
        let update =
            format!("SET #reserved = #reserved - :q, #{to_attribute} = #{to_attribute} + :q");
        for (sku, quantity) in &lines {
            items.push(self.tx_update(
                stock_pk(sku),
                &update,
                "#reserved >= :q",
                HashMap::from([(":q".to_owned(), n(*quantity))]),
            )?);
        }
        match self.transact(items).await? {
            Transacted::Done => Ok(Moved::Done),
            Transacted::Refused(reasons) if failed(&reasons, 0) => Ok(Moved::NotHeld),
            Transacted::Refused(_) => Err(StoreError::Internal(format!(
                "stock does not hold the reservation of order {}",
                res.order_id
            ))),
        }
    }
}

#[async_trait]
impl InventoryRepository for DynamoStore {
    /// The total (`stocked`) is the count plus what is reserved and shipped, which an update
    /// expression cannot add up (one `+` per operand pair), so the item is read (consistently)
    /// and written on the condition that `reserved` and `shipped` are still what was read; a
    /// reservation or shipment in between refuses the write, and the count is tried again.
    ///
    /// A price alone is one unconditional `SET` on an item that exists.
    async fn set_stock(
        &self,
        sku: &str,
        available: Option<u64>,
        price: Option<&Price>,
    ) -> Result<StockLevel, StoreError> {
        let (price_set, price_values) = match price {
            Some(p) => (
                ", #price_cents = :price_cents, #currency = :currency",
                HashMap::from([
                    (":price_cents".to_owned(), n(p.cents)),
                    (":currency".to_owned(), s(&p.currency)),
                ]),
            ),
            None => ("", HashMap::new()),
        };
        for _ in 0..COUNT_ATTEMPTS {
            let mut values = price_values.clone();
            let written = match (self.stock(sku).await?, available) {
                (None, available) => {
                    values.extend([
                        (":sku".to_owned(), s(sku)),
                        (":available".to_owned(), n(available.unwrap_or(0))),
                        (":zero".to_owned(), n(0)),
                    ]);
                    self.update(
                        stock_pk(sku),
                        &format!(
                            "SET #sku = :sku, #available = :available, #reserved = :zero, \
                             #shipped = :zero, #stocked = :available{price_set}"
                        ),
                        Some(&format!("attribute_not_exists(#{PARTITION_KEY})")),
                        values,
                    )
                    .await?
                }
                (Some(_), None) => {
                    let Some(set) = price_set.strip_prefix(", ") else {
                        // Nothing to change: the item as it is.
                        return self.stock(sku).await?.ok_or_else(|| {
                            StoreError::Internal(format!("stock of {sku} vanished"))
                        });
                    };
                    self.update(
                        stock_pk(sku),
                        &format!("SET {set}"),
                        Some(&format!("attribute_exists(#{PARTITION_KEY})")),
                        values,
                    )
                    .await?
                }
                (Some(level), Some(available)) => {
                    let stocked = available
                        .checked_add(level.reserved)
                        .and_then(|t| t.checked_add(level.shipped))
                        .ok_or_else(|| {
                            StoreError::Internal(format!("the stock of {sku} would overflow"))
                        })?;
                    values.extend([
                        (":available".to_owned(), n(available)),
                        (":stocked".to_owned(), n(stocked)),
                        (":reserved".to_owned(), n(level.reserved)),
                        (":shipped".to_owned(), n(level.shipped)),
                    ]);
                    self.update(
                        stock_pk(sku),
                        &format!("SET #available = :available, #stocked = :stocked{price_set}"),
                        Some("#reserved = :reserved AND #shipped = :shipped"),
                        values,
                    )
                    .await?
                }
            };
            match written {
                Written::Done(item) => return stock_from(&item),
                Written::Refused(_) => continue,
            }
        }
        Err(StoreError::Unavailable(format!(
            "the stock of {sku} kept changing while it was counted"
        )))
    }

    async fn prices(&self, skus: &[&str]) -> Result<HashMap<String, Price>, StoreError> {
        let mut pks: Vec<String> = skus.iter().map(|sku| stock_pk(sku)).collect();
        pks.sort();
        pks.dedup();
        let mut prices = HashMap::new();
        for item in self.get_items(&pks).await?.values() {
            let level = stock_from(item)?;
            if let Some(price) = level.price {
                prices.insert(level.sku, price);
            }
        }
        Ok(prices)
    }

    async fn stock(&self, sku: &str) -> Result<Option<StockLevel>, StoreError> {
        self.get_item(stock_pk(sku))
            .await?
            .as_ref()
            .map(stock_from)
            .transpose()
    }

    async fn reserve(
        &self,
        order_id: &OrderId,
        lines: &[ReservedLine],
    ) -> Result<Reserved, StoreError> {
        let wanted = quantities_per_sku(lines);
        if wanted.len() >= TRANSACTION_ITEMS {
            return Err(StoreError::Internal(format!(
                "order {order_id} has {} SKUs; one reservation holds at most {}",
                wanted.len(),
                TRANSACTION_ITEMS - 1
            )));
        }
        let reservation = Reservation {
            order_id: order_id.clone(),
            lines: lines.to_vec(),
            status: ReservationStatus::Held,
            created_at: Utc::now(),
        };
        let put = self.tx_put_new(reservation_item(&reservation, false)?)?;
        for _ in 0..ATTEMPTS {
            // The common replay path answers from one read, without a refused transaction.
            if let Some(row) = self.load_reservation(order_id).await? {
                return Ok(Reserved::Existing(row.reservation));
            }
            let mut items = Vec::with_capacity(wanted.len() + 1);
            for (sku, quantity) in &wanted {
                items.push(self.tx_update(
                    stock_pk(sku),
                    "SET #available = #available - :q, #reserved = #reserved + :q",
                    &format!("attribute_exists(#{PARTITION_KEY}) AND #available >= :q"),
                    HashMap::from([(":q".to_owned(), n(*quantity))]),
                )?);
            }
            items.push(put.clone());
            let reasons = match self.transact(items).await? {
                Transacted::Done => return Ok(Reserved::New(reservation)),
                Transacted::Refused(reasons) => reasons,
            };
            if failed(&reasons, wanted.len()) {
                // The order got its reservation meanwhile: read it.
                continue;
            }
            let Some((i, (sku, quantity))) = wanted
                .iter()
                .enumerate()
                .find(|(i, _)| failed(&reasons, *i))
            else {
                return Err(StoreError::Internal(format!(
                    "reservation of order {order_id} refused for no reason given"
                )));
            };
            let available = match self.refused_item(&reasons[i], stock_pk(sku)).await? {
                Some(item) => stock_from(&item)?.available,
                None => 0,
            };
            return Ok(Reserved::OutOfStock {
                sku: (*sku).to_owned(),
                requested: u32::try_from(*quantity).unwrap_or(u32::MAX),
                available,
            });
        }
        Err(StoreError::Unavailable(format!(
            "the reservation of order {order_id} kept changing"
        )))
    }

    async fn release(&self, order_id: &OrderId) -> Result<Released, StoreError> {
        for _ in 0..ATTEMPTS {
            let Some(row) = self.load_reservation(order_id).await? else {
                let marker = Reservation {
                    order_id: order_id.clone(),
                    lines: Vec::new(),
                    status: ReservationStatus::Released,
                    created_at: Utc::now(),
                };
                match self.put_new(reservation_item(&marker, true)?).await? {
                    Written::Done(_) => return Ok(Released::NothingReserved),
                    // A reservation (or another release) came first: decide on it.
                    Written::Refused(_) => continue,
                }
            };
            if row.released_unreserved {
                return Ok(Released::NothingReserved);
            }
            let reservation = row.reservation;
            match reservation.status {
                ReservationStatus::Released => return Ok(Released::Already(reservation)),
                ReservationStatus::Shipped => return Ok(Released::Shipped(reservation)),
                ReservationStatus::Held => {
                    let released = ReservationStatus::Released;
                    match self
                        .move_reserved(&reservation, released, "available")
                        .await?
                    {
                        Moved::Done => {
                            return Ok(Released::Now(Reservation {
                                status: released,
                                ..reservation
                            }));
                        }
                        Moved::NotHeld => continue,
                    }
                }
            }
        }
        Err(StoreError::Unavailable(format!(
            "the reservation of order {order_id} kept changing"
        )))
    }

    async fn mark_shipped(&self, order_id: &OrderId) -> Result<Reservation, StoreError> {
        for _ in 0..ATTEMPTS {
            let Some(row) = self.load_reservation(order_id).await? else {
                return Err(StoreError::NotFound(format!(
                    "reservation of order {order_id}"
                )));
            };
            let reservation = row.reservation;
            match reservation.status {
                ReservationStatus::Shipped => return Ok(reservation),
                ReservationStatus::Released => {
                    return Err(StoreError::NotFound(format!(
                        "held reservation of order {order_id} (it was released)"
                    )));
                }
                ReservationStatus::Held => {
                    let shipped = ReservationStatus::Shipped;
                    match self.move_reserved(&reservation, shipped, "shipped").await? {
                        Moved::Done => {
                            return Ok(Reservation {
                                status: shipped,
                                ..reservation
                            });
                        }
                        Moved::NotHeld => continue,
                    }
                }
            }
        }
        Err(StoreError::Unavailable(format!(
            "the reservation of order {order_id} kept changing"
        )))
    }

    async fn reservation(&self, order_id: &OrderId) -> Result<Option<Reservation>, StoreError> {
        Ok(self
            .load_reservation(order_id)
            .await?
            .map(|row| row.reservation))
    }

    async fn list_stock(
        &self,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<StockLevel>, StoreError> {
        let (items, next) = self.scan_prefix(prefix::STOCK, after, limit).await?;
        let items = items.iter().map(stock_from).collect::<Result<_, _>>()?;
        Ok(Page { items, next })
    }

    async fn list_reservations(
        &self,
        since: Option<DateTime<Utc>>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<Reservation>, StoreError> {
        let (items, next) = match since {
            None => self.scan_prefix(prefix::RESERVATION, after, limit).await?,
            Some(since) => {
                self.list_created(prefix::RESERVATION, since, after, limit)
                    .await?
            }
        };
        let items = items
            .iter()
            .map(|item| row_from(item).map(|row| row.reservation))
            .collect::<Result<_, _>>()?;
        Ok(Page { items, next })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::mock_store;
    use aws_sdk_dynamodb::Client;
    use aws_sdk_dynamodb::operation::get_item::GetItemOutput;
    use aws_sdk_dynamodb::operation::update_item::{UpdateItemError, UpdateItemOutput};
    use aws_sdk_dynamodb::types::error::ConditionalCheckFailedException;
    use aws_smithy_mocks::mock;

    fn stock_item(available: u64, reserved: u64, shipped: u64, stocked: u64) -> Item {
        HashMap::from([
            (PARTITION_KEY.to_owned(), s("STOCK#book")),
            ("sku".to_owned(), s("book")),
            ("available".to_owned(), n(available)),
            ("reserved".to_owned(), n(reserved)),
            ("shipped".to_owned(), n(shipped)),
            ("stocked".to_owned(), n(stocked)),
        ])
    }

    /// A reservation lands between the count's read and its write: the write is refused on the
    /// `reserved` it read, and the count is made again on what is there now.
    #[tokio::test]
    async fn a_count_raced_by_a_reservation_is_made_again_on_the_new_counts() {
        let read = |item: Item| {
            mock!(Client::get_item).then_output(move || {
                GetItemOutput::builder()
                    .set_item(Some(item.clone()))
                    .build()
            })
        };
        let first_read = read(stock_item(5, 1, 0, 6));
        let refused = mock!(Client::update_item)
            .match_requests(|r| {
                r.expression_attribute_values()
                    .and_then(|v| v.get(":reserved"))
                    == Some(&n(1))
            })
            .then_error(|| {
                UpdateItemError::ConditionalCheckFailedException(
                    ConditionalCheckFailedException::builder()
                        .item(PARTITION_KEY, s("STOCK#book"))
                        .build(),
                )
            });
        let second_read = read(stock_item(4, 2, 0, 6));
        let written = mock!(Client::update_item)
            .match_requests(|r| {
                let values = r.expression_attribute_values();
                values.and_then(|v| v.get(":reserved")) == Some(&n(2))
                    && values.and_then(|v| v.get(":stocked")) == Some(&n(12))
            })
            .then_output(|| {
                UpdateItemOutput::builder()
                    .set_attributes(Some(stock_item(10, 2, 0, 12)))
                    .build()
            });
        let store = mock_store(&[&first_read, &refused, &second_read, &written]);
        let level = store.set_available("book", 10).await.expect("counted");
        assert_eq!(
            (level.available, level.reserved, level.stocked),
            (10, 2, 12)
        );
        assert_eq!(written.num_calls(), 1);
    }
}
