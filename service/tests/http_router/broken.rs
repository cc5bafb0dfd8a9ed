//! An order repository that fails in a chosen way, to see how the API answers a broken backend.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use store::ports::{ApprovalRepository, IncidentRepository, OrderListing, OrderRecords};
use store::{
    CancelRequested, Cancellation, Charge, Created, Decided, Decision, Expiry, Failure, Incident,
    NewOrder, OperatorAction, Order, OrderFilter, OrderId, OrderStatus, Page, PendingApproval,
    QueueCursor, Refund, Resolved, StatusCounts, StoreError,
};

/// The text every failure carries: it must never reach a client.
pub const SECRET: &str = "sqlite:/var/lib/secret.db disk I/O error";

#[derive(Debug, Clone, Copy)]
pub enum Broken {
    /// Transient: `StoreError::Unavailable`.
    Unavailable,
    /// Terminal: `StoreError::Internal`.
    Internal,
    Panics,
    /// Never answers.
    Hangs,
}

impl Broken {
    async fn fail<T>(self) -> Result<T, StoreError> {
        match self {
            Broken::Unavailable => Err(StoreError::Unavailable(SECRET.to_owned())),
            Broken::Internal => Err(StoreError::Internal(SECRET.to_owned())),
            Broken::Panics => panic!("{SECRET}"),
            Broken::Hangs => std::future::pending().await,
        }
    }
}

#[async_trait]
impl OrderRecords for Broken {
    async fn create(&self, _: NewOrder, _: &str) -> Result<Created, StoreError> {
        self.fail().await
    }

    async fn get(&self, _: &OrderId) -> Result<Option<Order>, StoreError> {
        self.fail().await
    }

    async fn record_charge(&self, _: &OrderId, _: &Charge) -> Result<Order, StoreError> {
        self.fail().await
    }

    async fn record_refund(&self, _: &OrderId, _: &Refund) -> Result<Order, StoreError> {
        self.fail().await
    }

    async fn advance(
        &self,
        _: &OrderId,
        _: OrderStatus,
        _: Option<Failure>,
    ) -> Result<Order, StoreError> {
        self.fail().await
    }

    async fn start_shipment(&self, _: &OrderId, _: DateTime<Utc>) -> Result<Order, StoreError> {
        self.fail().await
    }
}

#[async_trait]
impl ApprovalRepository for Broken {
    async fn park_approval(
        &self,
        _: &OrderId,
        _: &str,
        _: DateTime<Utc>,
        _: Option<DateTime<Utc>>,
    ) -> Result<Order, StoreError> {
        self.fail().await
    }

    async fn request_cancel(
        &self,
        _: &OrderId,
        _: &Cancellation,
    ) -> Result<CancelRequested, StoreError> {
        self.fail().await
    }

    async fn decide(
        &self,
        _: &OrderId,
        _: Decision,
        _: &str,
        _: Option<&str>,
        _: DateTime<Utc>,
    ) -> Result<Decided, StoreError> {
        self.fail().await
    }

    async fn expire_approval(
        &self,
        _: &OrderId,
        _: &str,
        _: DateTime<Utc>,
        _: Failure,
    ) -> Result<Expiry, StoreError> {
        self.fail().await
    }

    async fn pending_approvals(
        &self,
        _: Option<&QueueCursor>,
        _: u32,
    ) -> Result<Page<PendingApproval>, StoreError> {
        self.fail().await
    }
}

#[async_trait]
impl IncidentRepository for Broken {
    async fn record_incident(
        &self,
        _: &OrderId,
        _: &Incident,
        _: Option<Failure>,
    ) -> Result<Order, StoreError> {
        self.fail().await
    }

    async fn record_action(&self, _: &OrderId, _: &OperatorAction) -> Result<Order, StoreError> {
        self.fail().await
    }

    async fn resolve_incident(
        &self,
        _: &OrderId,
        _: &OperatorAction,
    ) -> Result<Resolved, StoreError> {
        self.fail().await
    }

    async fn open_incidents(
        &self,
        _: Option<&QueueCursor>,
        _: u32,
    ) -> Result<Page<Order>, StoreError> {
        self.fail().await
    }
}

#[async_trait]
impl OrderListing for Broken {
    async fn list_orders(
        &self,
        _: Option<DateTime<Utc>>,
        _: Option<&str>,
        _: u32,
    ) -> Result<Page<Order>, StoreError> {
        self.fail().await
    }

    async fn find_orders(
        &self,
        _: &OrderFilter,
        _: Option<&QueueCursor>,
        _: u32,
    ) -> Result<Page<Order>, StoreError> {
        self.fail().await
    }

    async fn count_by_status(&self) -> Result<StatusCounts, StoreError> {
        self.fail().await
    }
}
