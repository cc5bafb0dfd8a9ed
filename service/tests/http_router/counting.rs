//! A payment gateway that counts the charges and the lookups (`find_charge`) asked through it,
//! to see which requests and steps ask the provider, and refuses refunds while told to; it
//! passes every other call on to the real gateway. Shared by the test binaries that need it
//! (`#[path]`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use store::{Charge, ChargeRequest, GatewayError, OrderId, Page, PaymentGateway, Refund, Refunded};

pub struct CountingPayments {
    inner: Arc<dyn PaymentGateway>,
    charges: AtomicUsize,
    finds: AtomicUsize,
    refund_refusal: Mutex<Option<GatewayError>>,
}

impl CountingPayments {
    pub fn new(inner: Arc<dyn PaymentGateway>) -> CountingPayments {
        CountingPayments {
            inner,
            charges: AtomicUsize::new(0),
            finds: AtomicUsize::new(0),
            refund_refusal: Mutex::new(None),
        }
    }

    /// Every refund fails with `refusal` from now on (`None`: refunds go through again).
    #[allow(dead_code)] // each test binary uses what it needs
    pub fn refuse_refunds(&self, refusal: Option<GatewayError>) {
        *self.refund_refusal.lock().unwrap() = refusal;
    }

    /// How many times `charge` was called.
    #[allow(dead_code)] // each test binary reads what it needs
    pub fn charges(&self) -> usize {
        self.charges.load(Ordering::SeqCst)
    }

    /// How many times `find_charge` was called.
    #[allow(dead_code)] // each test binary reads what it needs
    pub fn finds(&self) -> usize {
        self.finds.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl PaymentGateway for CountingPayments {
    async fn charge(&self, request: &ChargeRequest) -> Result<Charge, GatewayError> {
        self.charges.fetch_add(1, Ordering::SeqCst);
        self.inner.charge(request).await
    }
    async fn find_charge(&self, order_id: &OrderId) -> Result<Option<Charge>, GatewayError> {
        self.finds.fetch_add(1, Ordering::SeqCst);
        self.inner.find_charge(order_id).await
    }
    async fn refund(
        &self,
        order_id: &OrderId,
        charge_id: Option<&str>,
        idempotency_key: &str,
    ) -> Result<Refunded, GatewayError> {
        let refusal = self.refund_refusal.lock().unwrap().clone();
        if let Some(refusal) = refusal {
            return Err(refusal);
        }
        self.inner
            .refund(order_id, charge_id, idempotency_key)
            .await
    }
    async fn list_charges(
        &self,
        since: Option<DateTime<Utc>>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<Charge>, GatewayError> {
        self.inner.list_charges(since, after, limit).await
    }
    async fn list_refunds(
        &self,
        since: Option<DateTime<Utc>>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<Refund>, GatewayError> {
        self.inner.list_refunds(since, after, limit).await
    }
}

/// A workflow port that counts the Step Functions reads asked through it (descriptions,
/// listings and history pages) and the heartbeats, and passes every call on to the real one.
pub struct CountingWorkflow {
    inner: Arc<dyn workflow::WorkflowPort>,
    describes: AtomicUsize,
    listings: AtomicUsize,
    histories: AtomicUsize,
    heartbeats: AtomicUsize,
}

#[allow(dead_code)] // each test binary uses what it needs
impl CountingWorkflow {
    pub fn new(inner: Arc<dyn workflow::WorkflowPort>) -> CountingWorkflow {
        CountingWorkflow {
            inner,
            describes: AtomicUsize::new(0),
            listings: AtomicUsize::new(0),
            histories: AtomicUsize::new(0),
            heartbeats: AtomicUsize::new(0),
        }
    }

    /// How many pages of running executions were listed.
    pub fn listings(&self) -> usize {
        self.listings.load(Ordering::SeqCst)
    }

    /// How many heartbeats were sent.
    pub fn heartbeats(&self) -> usize {
        self.heartbeats.load(Ordering::SeqCst)
    }

    /// How many times `describe_execution` was called.
    pub fn describes(&self) -> usize {
        self.describes.load(Ordering::SeqCst)
    }

    /// How many history pages were asked for.
    pub fn histories(&self) -> usize {
        self.histories.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl workflow::WorkflowPort for CountingWorkflow {
    fn execution_arn(&self, name: &str) -> String {
        self.inner.execution_arn(name)
    }

    async fn start_execution(
        &self,
        name: &str,
        input: &serde_json::Value,
    ) -> Result<workflow::StartedExecution, workflow::WorkflowError> {
        self.inner.start_execution(name, input).await
    }

    async fn describe_execution(
        &self,
        execution_arn: &str,
    ) -> Result<workflow::ExecutionInfo, workflow::WorkflowError> {
        self.describes.fetch_add(1, Ordering::SeqCst);
        self.inner.describe_execution(execution_arn).await
    }

    async fn list_running_executions(
        &self,
        next_token: Option<String>,
    ) -> Result<workflow::RunningPage, workflow::WorkflowError> {
        self.listings.fetch_add(1, Ordering::SeqCst);
        self.inner.list_running_executions(next_token).await
    }

    async fn get_execution_history(
        &self,
        execution_arn: &str,
        next_token: Option<String>,
        max_results: u32,
    ) -> Result<workflow::HistoryPage, workflow::WorkflowError> {
        self.histories.fetch_add(1, Ordering::SeqCst);
        self.inner
            .get_execution_history(execution_arn, next_token, max_results)
            .await
    }

    async fn stop_execution(
        &self,
        execution_arn: &str,
        error: &str,
        cause: &str,
    ) -> Result<(), workflow::WorkflowError> {
        self.inner.stop_execution(execution_arn, error, cause).await
    }

    async fn redrive_execution(
        &self,
        execution_arn: &str,
    ) -> Result<workflow::RedriveOutcome, workflow::WorkflowError> {
        self.inner.redrive_execution(execution_arn).await
    }

    async fn get_activity_task(
        &self,
        activity_arn: &str,
        worker_name: &str,
        wait: std::time::Duration,
    ) -> Result<Option<workflow::TaskHandle>, workflow::WorkflowError> {
        self.inner
            .get_activity_task(activity_arn, worker_name, wait)
            .await
    }

    async fn send_task_success(
        &self,
        task_token: &str,
        output: &serde_json::Value,
    ) -> Result<(), workflow::WorkflowError> {
        self.inner.send_task_success(task_token, output).await
    }

    async fn send_task_failure(
        &self,
        task_token: &str,
        error: &str,
        cause: &str,
    ) -> Result<(), workflow::WorkflowError> {
        self.inner.send_task_failure(task_token, error, cause).await
    }

    async fn send_task_heartbeat(&self, task_token: &str) -> Result<(), workflow::WorkflowError> {
        self.heartbeats.fetch_add(1, Ordering::SeqCst);
        self.inner.send_task_heartbeat(task_token).await
    }
}
