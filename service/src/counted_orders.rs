//! The orders repository as the saga's steps see it: every call goes to the store, and an order
//! the steps move to a final status is counted in the service's metrics
//! (`fulfillment_sagas_finished_total`), where operators and the benchmarks watch sagas end.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::sync::Arc;
use store::ports::{ApprovalRepository, IncidentRepository, OrderListing, OrderRecords};
use store::{
    CancelRequested, Cancellation, Charge, Created, Decided, Decision, Expiry, Failure, Incident,
    NewOrder, OperatorAction, Order, OrderFilter, OrderId, OrderRepository, OrderStatus, Page,
    PendingApproval, QueueCursor, Refund, Resolved, StatusCounts, StoreError,
};
use telemetry::Metrics;

pub struct CountedOrders {
    pub orders: Arc<dyn OrderRepository>,
    pub metrics: Metrics,
}

#[async_trait]
impl OrderRecords for CountedOrders {
    async fn create(&self, order: NewOrder, execution_arn: &str) -> Result<Created, StoreError> {
        self.orders.create(order, execution_arn).await
    }

    async fn get(&self, id: &OrderId) -> Result<Option<Order>, StoreError> {
        self.orders.get(id).await
    }

    async fn record_charge(&self, id: &OrderId, charge: &Charge) -> Result<Order, StoreError> {
        self.orders.record_charge(id, charge).await
    }

    async fn record_refund(&self, id: &OrderId, refund: &Refund) -> Result<Order, StoreError> {
        self.orders.record_refund(id, refund).await
    }

    /// Counts the order when this move ends it. Steps are delivered at least once, so a
    /// redelivery after a crash, finding the order already there, counts it again: the count
    /// is of ends recorded, not of distinct orders.
    async fn advance(
        &self,
        id: &OrderId,
        to: OrderStatus,
        failure: Option<Failure>,
    ) -> Result<Order, StoreError> {
        let order = self.orders.advance(id, to, failure).await?;
        if to.is_terminal() && order.status == to {
            self.metrics.saga_finished(to);
        }
        Ok(order)
    }

    async fn start_shipment(&self, id: &OrderId, at: DateTime<Utc>) -> Result<Order, StoreError> {
        self.orders.start_shipment(id, at).await
    }
}

#[async_trait]
impl ApprovalRepository for CountedOrders {
    async fn park_approval(
        &self,
        id: &OrderId,
        task_token: &str,
        at: DateTime<Utc>,
        deadline: Option<DateTime<Utc>>,
    ) -> Result<Order, StoreError> {
        self.orders
            .park_approval(id, task_token, at, deadline)
            .await
    }

    async fn request_cancel(
        &self,
        id: &OrderId,
        request: &Cancellation,
    ) -> Result<CancelRequested, StoreError> {
        self.orders.request_cancel(id, request).await
    }

    async fn decide(
        &self,
        id: &OrderId,
        decision: Decision,
        by: &str,
        reason: Option<&str>,
        at: DateTime<Utc>,
    ) -> Result<Decided, StoreError> {
        self.orders.decide(id, decision, by, reason, at).await
    }

    async fn expire_approval(
        &self,
        id: &OrderId,
        task_token: &str,
        at: DateTime<Utc>,
        failure: Failure,
    ) -> Result<Expiry, StoreError> {
        self.orders
            .expire_approval(id, task_token, at, failure)
            .await
    }

    async fn pending_approvals(
        &self,
        after: Option<&QueueCursor>,
        limit: u32,
    ) -> Result<Page<PendingApproval>, StoreError> {
        self.orders.pending_approvals(after, limit).await
    }

    fn approval_shards(&self) -> u32 {
        self.orders.approval_shards()
    }

    async fn pending_approvals_in(
        &self,
        shard: u32,
        after: Option<&QueueCursor>,
        limit: u32,
    ) -> Result<Page<PendingApproval>, StoreError> {
        self.orders.pending_approvals_in(shard, after, limit).await
    }
}

#[async_trait]
impl IncidentRepository for CountedOrders {
    /// Counts the order as ended `COMPENSATION_FAILED` (again, when a redriven compensation
    /// gives up once more).
    async fn record_incident(
        &self,
        id: &OrderId,
        incident: &Incident,
        failure: Option<Failure>,
    ) -> Result<Order, StoreError> {
        let order = self.orders.record_incident(id, incident, failure).await?;
        if order.status == OrderStatus::CompensationFailed {
            self.metrics.saga_finished(OrderStatus::CompensationFailed);
        }
        Ok(order)
    }

    async fn record_action(
        &self,
        id: &OrderId,
        action: &OperatorAction,
    ) -> Result<Order, StoreError> {
        self.orders.record_action(id, action).await
    }

    async fn resolve_incident(
        &self,
        id: &OrderId,
        action: &OperatorAction,
    ) -> Result<Resolved, StoreError> {
        self.orders.resolve_incident(id, action).await
    }

    async fn open_incidents(
        &self,
        after: Option<&QueueCursor>,
        limit: u32,
    ) -> Result<Page<Order>, StoreError> {
        self.orders.open_incidents(after, limit).await
    }
}

#[async_trait]
impl OrderListing for CountedOrders {
    async fn list_orders(
        &self,
        since: Option<DateTime<Utc>>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<Order>, StoreError> {
        self.orders.list_orders(since, after, limit).await
    }

    async fn find_orders(
        &self,
        filter: &OrderFilter,
        after: Option<&QueueCursor>,
        limit: u32,
    ) -> Result<Page<Order>, StoreError> {
        self.orders.find_orders(filter, after, limit).await
    }

    async fn count_by_status(&self) -> Result<StatusCounts, StoreError> {
        self.orders.count_by_status().await
    }
}
