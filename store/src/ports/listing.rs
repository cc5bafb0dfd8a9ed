//! Listings of orders: whole-store pages, a client's or operator's filtered listing, counts.

use super::{Page, QueueCursor};
use crate::domain::*;
use crate::error::StoreError;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;

/// What [`OrderListing::count_by_status`] found: every status, with how many orders are in
/// it now, or `None` where the adapter does not count (a status with no orders is `Some(0)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusCounts(pub BTreeMap<OrderStatus, Option<u64>>);

impl StatusCounts {
    /// Every status, none of them counted: an adapter sets those it counts.
    pub fn uncounted() -> StatusCounts {
        StatusCounts(OrderStatus::ALL.into_iter().map(|s| (s, None)).collect())
    }

    /// How many orders are in `status`; `None` when it was not counted.
    pub fn get(&self, status: OrderStatus) -> Option<u64> {
        self.0.get(&status).copied().flatten()
    }
}

/// The most orders one page of [`OrderListing::find_orders`] reads to fill itself.
pub const FIND_EXAMINED: u32 = 1000;

/// Which orders [`OrderListing::find_orders`] lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OrderFilter {
    /// Only the orders this principal placed (a client's own); `None`: every order.
    pub owner: Option<String>,
    /// Only the orders in this status now.
    pub status: Option<OrderStatus>,
    /// Only the orders created at or after this.
    pub created_since: Option<DateTime<Utc>>,
    /// Only the orders created before this.
    pub created_until: Option<DateTime<Utc>>,
    /// Only the orders whose customer id starts with this (exactly: case and every character
    /// count). Tested on the orders read, as the status is, so a page's read stays bounded.
    pub customer_prefix: Option<String>,
}

impl OrderFilter {
    /// Whether `order` is one the filter selects (the adapters read by owner and creation
    /// window through an index, then test the rest with this).
    pub fn selects(&self, order: &Order) -> bool {
        let at = order.new.created_at;
        self.owner
            .as_ref()
            .is_none_or(|o| order.new.owner.as_ref() == Some(o))
            && self.status.is_none_or(|s| order.status == s)
            && self.created_since.is_none_or(|t| at >= t)
            && self.created_until.is_none_or(|t| at < t)
            && self
                .customer_prefix
                .as_ref()
                .is_none_or(|p| order.new.customer_id.starts_with(p.as_str()))
    }

    /// Whether the filter tests something the adapters' indexes do not read by (the status, the
    /// customer), so that many of the orders a listing reads may be left out.
    pub fn tests_after_reading(&self) -> bool {
        self.status.is_some() || self.customer_prefix.is_some()
    }

    /// The newest position a listing of this filter starts below (exclusive): `created_until`
    /// (nothing at it is selected), or after the cursor `after`, whichever is older. `None`:
    /// from the newest order.
    pub fn start(&self, after: Option<&QueueCursor>) -> Option<QueueCursor> {
        let until = self.created_until.map(|t| QueueCursor {
            at: crate::timestamp(t),
            // Below every id at that time ("" is less than any id, and the cursor is exclusive).
            order_id: OrderId::lowest(),
        });
        match (until, after.cloned()) {
            (Some(u), Some(a)) => Some(u.min(a)),
            (u, a) => u.or(a),
        }
    }
}

impl QueueCursor {
    /// The position of `order` in a listing by creation time: its `created_at` and id.
    pub fn of_created(order: &Order) -> QueueCursor {
        QueueCursor {
            at: crate::timestamp(order.new.created_at),
            order_id: order.id().clone(),
        }
    }
}

/// Whole-store reads: the audit's and the repair loop's listings, `GET /orders` and the
/// console's counts.
#[async_trait]
pub trait OrderListing: Send + Sync {
    /// Every order, a page of at most `limit` at a time, starting after the cursor `after`
    /// (see [`Page`]); with `since`, only the orders created at or after it (pass the same
    /// `since` with every page of a listing). Strongly consistent reads, for `fulfillment
    /// audit` and the repair loop.
    async fn list_orders(
        &self,
        since: Option<DateTime<Utc>>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<Order>, StoreError>;

    /// The orders `filter` selects, newest first (by creation time, then id, both descending),
    /// a page of at most `limit` after the cursor `after` (the position of the last order
    /// examined: its creation time and id). A page examines at most [`FIND_EXAMINED`] orders of
    /// the owner's (or, without one, of all) in the creation window, so a rare status costs a
    /// bounded read per page: a page may then hold fewer than `limit` orders, even none, and
    /// still have a `next`. Orders created while a listing runs, newer than its first page,
    /// appear on no page of it; for `GET /orders` and the console.
    async fn find_orders(
        &self,
        filter: &OrderFilter,
        after: Option<&QueueCursor>,
        limit: u32,
    ) -> Result<Page<Order>, StoreError>;

    /// How many orders are in each status now, for the operators' console. `None` for a status
    /// the adapter does not count cheaply (see the adapter's docs).
    async fn count_by_status(&self) -> Result<StatusCounts, StoreError>;
}
