//! Stock and reservations.

use super::Page;
use crate::domain::*;
use crate::error::StoreError;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::collections::HashMap;

/// What a reservation attempt did.
#[derive(Debug, Clone, PartialEq)]
pub enum Reserved {
    /// Every line was reserved now.
    New(Reservation),
    /// The order already had its reservation (whatever its status); nothing changed.
    Existing(Reservation),
    /// Some line could not be reserved; nothing was reserved.
    OutOfStock {
        sku: String,
        requested: u32,
        available: u64,
    },
}

/// What a release did.
#[derive(Debug, Clone, PartialEq)]
pub enum Released {
    /// The held stock went back to available now.
    Now(Reservation),
    /// Released before: nothing changed.
    Already(Reservation),
    /// The order never reserved anything: nothing to undo (recorded so a late reserve can't
    /// happen after the release).
    NothingReserved,
    /// The reservation was shipped; stock that left the warehouse is not released.
    Shipped(Reservation),
}

#[async_trait]
pub trait InventoryRepository: Send + Sync {
    /// Sets what an operator counts and prices, in one write: the available quantity (a stock
    /// count) and the catalog price, each when given (the other stays as it is). A SKU not
    /// stocked before starts with nothing available.
    async fn set_stock(
        &self,
        sku: &str,
        available: Option<u64>,
        price: Option<&Price>,
    ) -> Result<StockLevel, StoreError>;

    /// Sets the available quantity of a SKU (an operator's stock count).
    async fn set_available(&self, sku: &str, available: u64) -> Result<StockLevel, StoreError> {
        self.set_stock(sku, Some(available), None).await
    }

    async fn stock(&self, sku: &str) -> Result<Option<StockLevel>, StoreError>;

    /// The catalog prices of `skus`, by SKU, as they are now; a SKU never stocked or never
    /// priced is left out.
    async fn prices(&self, skus: &[&str]) -> Result<HashMap<String, Price>, StoreError>;

    /// Reserves every line of the order, or none, atomically; at most one reservation per
    /// order. Stock never goes negative, even under concurrent orders for the last unit.
    async fn reserve(
        &self,
        order_id: &OrderId,
        lines: &[ReservedLine],
    ) -> Result<Reserved, StoreError>;

    /// Returns held stock to available (idempotent; a no-op, recorded, when nothing was reserved).
    async fn release(&self, order_id: &OrderId) -> Result<Released, StoreError>;

    /// Moves the order's held stock to shipped (idempotent).
    async fn mark_shipped(&self, order_id: &OrderId) -> Result<Reservation, StoreError>;

    async fn reservation(&self, order_id: &OrderId) -> Result<Option<Reservation>, StoreError>;

    /// Every SKU's stock, a page at a time (see [`Page`]).
    async fn list_stock(
        &self,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<StockLevel>, StoreError>;

    /// Every reservation, a page at a time (see [`Page`]), the markers of releases that came
    /// before any reservation included (`RELEASED`, no lines); with `since`, only those created
    /// at or after it.
    async fn list_reservations(
        &self,
        since: Option<DateTime<Utc>>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<Reservation>, StoreError>;
}
