//! A payment gateway that counts the provider lookups (`find_charge`) made through it, to see
//! which requests ask the provider; it passes every call on to the real gateway.

use async_trait::async_trait;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use store::{Charge, ChargeRequest, GatewayError, OrderId, Page, PaymentGateway, Refund, Refunded};

pub struct CountingLookups {
    inner: Arc<dyn PaymentGateway>,
    finds: AtomicUsize,
}

impl CountingLookups {
    pub fn new(inner: Arc<dyn PaymentGateway>) -> CountingLookups {
        CountingLookups {
            inner,
            finds: AtomicUsize::new(0),
        }
    }

    /// How many times `find_charge` was called.
    pub fn finds(&self) -> usize {
        self.finds.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl PaymentGateway for CountingLookups {
    async fn charge(&self, request: &ChargeRequest) -> Result<Charge, GatewayError> {
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
