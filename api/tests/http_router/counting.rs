//! A payment gateway that counts the charges and the lookups (`find_charge`) asked through it,
//! to see which requests and steps ask the provider, and refuses refunds while told to; it
//! passes every other call on to the real gateway. Shared by the test binaries that need it
//! (`#[path]`).

use async_trait::async_trait;
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
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<Charge>, GatewayError> {
        self.inner.list_charges(after, limit).await
    }
    async fn list_refunds(
        &self,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<Refund>, GatewayError> {
        self.inner.list_refunds(after, limit).await
    }
}
