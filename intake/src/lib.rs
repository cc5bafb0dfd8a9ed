//! Order intake: the business-key idempotency of `POST /orders`. The first request stores the
//! order with a hash of its canonical body and its execution's ARN (the execution is named by
//! the order id), then starts the execution: itself (AWS), or through the start queue
//! (embedded, [`crate::start_queue`]). One left unstarted (a crash, a lost queue) is started by
//! the repair loop (`ops::repair`) or by a repeat of its POST. A repeat
//! with the same body replays, with a different body conflicts, and a repeat of an order still
//! running starts its execution again, idempotently (repair on retry).
//!
//! Lines are priced from the catalog first ([`crate::pricing`]); an order whose lines cannot be
//! priced is refused and nothing is stored, unless it repeats one placed before (the prices may
//! have changed since): that replays as any repeat does.

pub mod numbers;
pub mod pricing;
pub mod start_queue;

use crate::pricing::{Mispriced, RequestedLine, price_lines};
use crate::start_queue::{Queued, StartQueue};
use chrono::Utc;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use store::{
    Address, Created, InventoryRepository, LineItem, NewOrder, Order, OrderId, OrderRepository,
    StoreError,
};
use workflow::{SagaInput, SagaSettings, WorkflowError, WorkflowPort};

/// An order as a client submits it (validated by the HTTP layer).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OrderRequest {
    pub order_id: OrderId,
    pub customer_id: String,
    pub items: Vec<RequestedLine>,
    pub currency: String,
    pub payment_method: String,
    pub shipping_address: Address,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Placed {
    /// Stored now, and started or queued to be started.
    Accepted(Order),
    /// The same order was placed before; nothing new happened (its execution was started if a
    /// crash had left it unstarted).
    Replayed(Order),
    /// The caller placed an order with this id but another body; nothing changed.
    Conflict(Order),
    /// Another principal's order has this id (ids are global: they name executions); nothing
    /// changed, and nothing of that order may be told.
    IdTaken,
}

#[derive(Debug, thiserror::Error)]
pub enum IntakeError {
    #[error("order total overflows")]
    AmountOverflow,
    /// Lines the catalog cannot price as asked; nothing was stored.
    #[error("{} line(s) cannot be priced from the catalog", .0.len())]
    Mispriced(Vec<Mispriced>),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Workflow(#[from] WorkflowError),
}

impl IntakeError {
    pub fn is_transient(&self) -> bool {
        match self {
            IntakeError::AmountOverflow | IntakeError::Mispriced(_) => false,
            IntakeError::Store(e) => e.is_transient(),
            IntakeError::Workflow(e) => e.is_transient(),
        }
    }
}

pub struct OrderIntake {
    pub orders: Arc<dyn OrderRepository>,
    /// The catalog the lines are priced from.
    pub inventory: Arc<dyn InventoryRepository>,
    pub workflow: Arc<dyn WorkflowPort>,
    pub settings: SagaSettings,
    /// Where new orders' starts go; `None`: each request starts its order's execution itself.
    pub queue: Option<StartQueue>,
}

/// Σ quantity × unit price, or `None` on overflow.
pub fn total_cents(items: &[LineItem]) -> Option<u64> {
    items.iter().try_fold(0u64, |sum, i| {
        sum.checked_add(u64::from(i.quantity).checked_mul(i.unit_price_cents)?)
    })
}

/// SHA-256 of the request's canonical JSON (fields in declaration order, no whitespace).
pub fn body_hash(request: &OrderRequest) -> String {
    let canonical = serde_json::to_vec(request).unwrap_or_default();
    Sha256::digest(&canonical)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl OrderIntake {
    /// The order to store: its lines at the catalog's prices (`items`), its total and whether
    /// it needs an approval from them.
    pub fn new_order(
        &self,
        request: OrderRequest,
        items: Vec<LineItem>,
        owner: &str,
    ) -> Result<NewOrder, IntakeError> {
        let amount_cents = total_cents(&items).ok_or(IntakeError::AmountOverflow)?;
        let body_hash = body_hash(&request);
        Ok(NewOrder {
            order_id: request.order_id,
            customer_id: request.customer_id,
            items,
            currency: request.currency,
            payment_method: request.payment_method,
            shipping_address: request.shipping_address,
            amount_cents,
            requires_approval: self.settings.requires_approval(amount_cents),
            body_hash,
            owner: Some(owner.to_owned()),
            created_at: Utc::now(),
        })
    }

    /// The execution input of an order's saga.
    pub fn saga_input(&self, order: &NewOrder) -> SagaInput {
        SagaInput::new(order, &self.settings)
    }

    /// Stores the order with its execution's ARN (one write), then queues its start, or starts
    /// it when there is no queue or the queue is full. A repeat of an order still running
    /// starts its execution again, which is idempotent: that is what repairs an order a crash
    /// left stored but unstarted.
    pub async fn place(&self, request: OrderRequest, owner: &str) -> Result<Placed, IntakeError> {
        let skus: Vec<&str> = request.items.iter().map(|l| l.sku.as_str()).collect();
        let catalog = self.inventory.prices(&skus).await?;
        let items = match price_lines(&request.items, &request.currency, &catalog) {
            Ok(items) => items,
            Err(mispriced) => {
                // Only the refusal path reads the order: a repeat of one placed at the prices
                // of then is answered as any repeat.
                let hash = body_hash(&request);
                return match self.orders.get(&request.order_id).await? {
                    Some(order) => self.repeated(order, owner, &hash).await,
                    None => Err(IntakeError::Mispriced(mispriced)),
                };
            }
        };
        let new = self.new_order(request, items, owner)?;
        let hash = new.body_hash.clone();
        let arn = self.workflow.execution_arn(new.order_id.as_str());
        match self.orders.create(new, &arn).await? {
            Created::New(order) => Ok(Placed::Accepted(self.queue_or_start(order).await?)),
            Created::Existing(order) => self.repeated(order, owner, &hash).await,
        }
    }

    /// The answer to placing an order whose id is taken by `order`: another principal's, the
    /// caller's with another body, or a repeat (which starts its execution again while it runs).
    async fn repeated(&self, order: Order, owner: &str, hash: &str) -> Result<Placed, IntakeError> {
        if order.new.owner.as_deref() != Some(owner) {
            Ok(Placed::IdTaken)
        } else if order.new.body_hash != hash {
            Ok(Placed::Conflict(order))
        } else if !order.status.is_terminal() {
            Ok(Placed::Replayed(self.start(order).await?))
        } else {
            Ok(Placed::Replayed(order))
        }
    }

    /// Queues the start of a stored order's execution, or starts it now when there is no
    /// queue or the queue is full.
    pub async fn queue_or_start(&self, order: Order) -> Result<Order, IntakeError> {
        let queued = self.queue.as_ref().is_some_and(|queue| {
            queue
                .offer(Queued::new(
                    order.id().clone(),
                    &self.saga_input(&order.new).to_json(),
                ))
                .is_ok()
        });
        if queued {
            Ok(order)
        } else {
            self.start(order).await
        }
    }

    async fn start(&self, order: Order) -> Result<Order, IntakeError> {
        Ok(self.start_execution(order).await?.0)
    }

    /// Starts the execution of a stored order, now (not through the queue): a repeat's repair,
    /// and the repair loop's start of an order left `ACCEPTED`. Idempotent by the execution
    /// name; says whether this call started it.
    pub async fn start_execution(&self, order: Order) -> Result<(Order, Start), IntakeError> {
        let input = self.saga_input(&order.new).to_json();
        let name = order.id().as_str();
        // The execution named by the order id is the order's, whatever input it was started
        // with (the saga settings may have changed between a crash and this repair): never an
        // error for the client (DESIGN §4.2).
        // The order was stored with the execution's ARN (`create`).
        let start = match self.workflow.start_execution(name, &input).await {
            Ok(_) => Start::Now,
            Err(WorkflowError::ExecutionAlreadyExists(_)) => Start::AlreadyStarted,
            Err(e) => return Err(e.into()),
        };
        Ok((order, start))
    }
}

/// What [`OrderIntake::start_execution`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// The execution was started by this call.
    Now,
    /// It had been started before (or by a racing caller): nothing changed.
    AlreadyStarted,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(quantity: u32, unit_price_cents: u64) -> LineItem {
        LineItem {
            sku: "s".into(),
            quantity,
            unit_price_cents,
        }
    }

    #[test]
    fn totals_never_overflow_silently() {
        assert_eq!(total_cents(&[item(2, 150), item(1, 5)]), Some(305));
        assert_eq!(total_cents(&[item(u32::MAX, u64::MAX)]), None);
        assert_eq!(total_cents(&[item(1, u64::MAX), item(1, 1)]), None);
    }
}
