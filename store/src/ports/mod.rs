//! The ports through which the saga reaches its state and the outside world, one file per port,
//! each a trait a caller can read in one screen. The adapters are crates of their own
//! (`store_sqlite`, `store_dynamodb`, `providers`); `testkit` holds the contract every one of
//! them passes. Every write is idempotent by the order id, so an at-least-once step may run it
//! twice.

use crate::domain::*;
use std::sync::Arc;

mod approvals;
mod incidents;
mod inventory;
mod keys;
mod listing;
mod orders;
mod payments;
mod shipping;
mod webhooks;

pub use approvals::*;
pub use incidents::*;
pub use inventory::*;
pub use keys::*;
pub use listing::*;
pub use orders::*;
pub use payments::*;
pub use shipping::*;
pub use webhooks::*;

/// The four ports the saga and the service reach, together: the order records, the stock, the
/// payment provider and the carrier. Built once at start-up (`providers::sandbox::ports`,
/// `providers::sandbox::ports`, or by hand with a real provider) and shared by the HTTP handlers, the
/// saga's steps, the compensations and the audit.
#[derive(Clone)]
pub struct Ports {
    pub orders: Arc<dyn OrderRepository>,
    pub inventory: Arc<dyn InventoryRepository>,
    pub payments: Arc<dyn PaymentGateway>,
    pub shipping: Arc<dyn ShippingGateway>,
}

/// One page of a listing, in the adapter's own order (a key order, or a scan's). `next` is an
/// opaque cursor: pass it as `after` for the following page; `None` on the last page. A page
/// may hold fewer than `limit` items (even none) and still not be the last; following `next`
/// until it is `None` visits every item that existed throughout the listing exactly once.
/// Listings are for whole-store reads such as `fulfillment audit`: items written while one
/// runs may or may not appear.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next: Option<String>,
}

impl<T> Page<T> {
    /// The page of `items` read with `limit`, continuing after the last item's cursor when it
    /// is full: the rule of every adapter whose cursor is an item's key.
    pub fn keyed(items: Vec<T>, limit: u32, cursor: impl Fn(&T) -> String) -> Page<T> {
        let full = u32::try_from(items.len()).is_ok_and(|n| n >= limit.max(1));
        let next = if full { items.last().map(cursor) } else { None };
        Page { items, next }
    }
}

/// Everything the service keeps about orders, as one port: what a store adapter implements,
/// in four narrow traits a caller can read one at a time ([`OrderRecords`],
/// [`ApprovalRepository`], [`IncidentRepository`], [`OrderListing`]). A caller that needs one
/// part takes that trait; [`Ports::orders`] holds the whole.
pub trait OrderRepository:
    OrderRecords + ApprovalRepository + IncidentRepository + OrderListing
{
}

impl<T> OrderRepository for T where
    T: OrderRecords + ApprovalRepository + IncidentRepository + OrderListing + ?Sized
{
}

/// The cursor of a page of a queue of orders kept in time order (open incidents by their
/// `since`, pending approvals by their `requested_at`): the last order's time and id. Times are
/// stored as fixed-width RFC 3339 text, so the pair orders as the page does. As text (a page's
/// `next`), `{at}|{orderId}`. Positions compare as the queue orders them.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct QueueCursor {
    pub at: String,
    pub order_id: OrderId,
}

impl QueueCursor {
    /// The cursor after `order` in the incidents' queue (it has an open incident).
    pub fn after_incident(order: &Order) -> QueueCursor {
        let since = order
            .incident
            .as_ref()
            .map_or(order.updated_at, |i| i.since);
        QueueCursor {
            at: crate::timestamp(since),
            order_id: order.id().clone(),
        }
    }

    /// The cursor after `pending` in the approvals' queue.
    pub fn after_approval(pending: &PendingApproval) -> QueueCursor {
        QueueCursor {
            at: crate::timestamp(pending.requested_at),
            order_id: pending.order_id.clone(),
        }
    }

    /// `None` for text that is no cursor: `{at}|{orderId}`, `at` of a stored time's characters
    /// (a cursor is a position: one of the right shape that no page gave is harmless).
    pub fn parse(text: &str) -> Option<QueueCursor> {
        let (at, id) = text.split_once('|')?;
        let time_chars = |c: char| c.is_ascii_digit() || "T:.Z-".contains(c);
        if at.is_empty() || at.len() > 40 || !at.chars().all(time_chars) {
            return None;
        }
        Some(QueueCursor {
            at: at.to_owned(),
            order_id: OrderId::parse(id).ok()?,
        })
    }
}

impl std::fmt::Display for QueueCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}|{}", self.at, self.order_id)
    }
}
