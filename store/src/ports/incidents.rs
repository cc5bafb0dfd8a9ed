//! Incidents of compensations that gave up, and what operators did about them.

use super::{Page, QueueCursor};
use crate::domain::*;
use crate::error::StoreError;
use async_trait::async_trait;

/// What resolving an incident did.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolved {
    /// Closed now: the order as it is afterwards.
    Now(Order),
    /// The order had no open incident (none was recorded, or it was closed before): unchanged.
    NotOpen(Order),
}

/// The incidents of compensations that gave up, and the operators' actions on them.
#[async_trait]
pub trait IncidentRepository: Send + Sync {
    /// Records that a compensation gave up: the order moves to `COMPENSATION_FAILED` with the
    /// incident (and `failure`, when none is recorded yet). An incident already open keeps its
    /// `since` and takes the newer step, error, cause and attempts (a redriven compensation
    /// that failed again). An order in a final status is left as it is. Returns the order
    /// afterwards.
    async fn record_incident(
        &self,
        id: &OrderId,
        incident: &Incident,
        failure: Option<Failure>,
    ) -> Result<Order, StoreError>;

    /// Appends an operator's action to the order's record. Returns the order afterwards.
    async fn record_action(
        &self,
        id: &OrderId,
        action: &OperatorAction,
    ) -> Result<Order, StoreError>;

    /// Closes the order's open incident by hand: the order moves to `CANCELLED` and the action
    /// is recorded, in one conditional write. An order without an open incident changes
    /// nothing and comes back as [`Resolved::NotOpen`].
    async fn resolve_incident(
        &self,
        id: &OrderId,
        action: &OperatorAction,
    ) -> Result<Resolved, StoreError>;

    /// The orders with an open incident, the oldest incident first, a page of at most `limit`
    /// at a time after the cursor `after` (see [`Page`]).
    async fn open_incidents(
        &self,
        after: Option<&QueueCursor>,
        limit: u32,
    ) -> Result<Page<Order>, StoreError>;
}
