//! The books the audit checks, collected through the ports: the provider's charges and refunds,
//! the store's orders, stock and reservations, and what the workflow says of the orders still
//! running and of the parked approval tokens.
//!
//! The reads are in the order that keeps a busy service's own progress from looking like a
//! violation where it can: refunds before charges (a refund's charge exists before it), the
//! provider before the orders (an order exists before its charge). What still moves between
//! two reads is re-checked (see `run`).

use super::AuditError;
use super::executions::Executions;
use chrono::{DateTime, Utc};
use futures_util::{StreamExt, stream};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use store::{Charge, Order, OrderId, OrderStatus, Page, Ports, Refund, Reservation, StockLevel};

/// Items per listing call: a DynamoDB scan page reads at most this many items (at most 1 MB);
/// Stripe takes at most 100 (its gateway asks for no more).
const PAGE: u32 = 500;

/// Execution and token lookups in flight at once. On AWS, DescribeExecution's token bucket is 300
/// refilled at 15/s, so the running executions are listed instead (a thousand a call) and only
/// the few unfinished orders not among them are looked up one by one.
const LOOKUPS_IN_FLIGHT: usize = 8;

/// How much earlier than a window's orders its charges, refunds and reservations are listed
/// from: each is made after its order, but by another clock (another replica's, the
/// provider's, which Stripe keeps in whole seconds), so one made a moment after an order at
/// the window's edge may carry a time a moment before it. Those of orders outside the window
/// are dropped after listing.
const CLOCK_SKEW: chrono::Duration = chrono::Duration::minutes(10);

/// Where the books are read.
#[derive(Clone)]
pub struct Sources {
    /// The orders, the stock and the payment provider's books (the carrier is not read).
    pub ports: Ports,
    pub executions: Arc<dyn Executions>,
    /// Whether to ask, for each approval token parked under a running execution, if it is
    /// still an open task (on AWS a `SendTaskHeartbeat` each; a token under an execution that
    /// is not running is known dead without asking). The repair loop does not: it has no
    /// remedy for a dead token, the approval keeper heartbeats every parked token anyway
    /// (counting the dead ones in `fulfillment_approval_tokens_dead_total`) and the workflow
    /// re-issues them; a heartbeat per parked approval per pass would spend the keeper's quota
    /// again.
    pub check_parked_tokens: bool,
}

/// What the rules need of an order (a few fields of it, so that a large store's books fit in
/// memory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderView {
    pub id: OrderId,
    pub status: OrderStatus,
    pub amount_cents: u64,
    pub currency: String,
    pub execution_arn: Option<String>,
    /// The charge the order records (`Order::charge_id`).
    pub charge_id: Option<String>,
    /// The approval task token parked on the order, if one is.
    pub parked_token: Option<String>,
}

impl From<Order> for OrderView {
    fn from(o: Order) -> OrderView {
        OrderView {
            id: o.new.order_id,
            status: o.status,
            amount_cents: o.new.amount_cents,
            currency: o.new.currency,
            execution_arn: o.execution_arn,
            charge_id: o.charge_id,
            parked_token: o.approval.and_then(|a| a.task_token),
        }
    }
}

/// Which part of the books a collection reads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Scope {
    /// All of them: every order, reservation, charge and refund there is.
    #[default]
    Whole,
    /// The orders created at or after a moment and what was made for them: their charges,
    /// refunds and reservations, each made after its order, so each listed from the same
    /// moment (a few minutes before it, `CLOCK_SKEW`; those of older orders are left out).
    /// Every SKU's stock, checked for conservation only: its counts against its reservations
    /// need every reservation, which a whole collection reads. What it reads grows with the orders of the window, not
    /// with the history: the repair loop's frequent passes (`crate::repair`).
    Since(DateTime<Utc>),
}

impl Scope {
    fn since(self) -> Option<DateTime<Utc>> {
        match self {
            Scope::Whole => None,
            Scope::Since(at) => Some(at),
        }
    }
}

/// Everything the rules look at.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Books {
    /// What was read.
    pub scope: Scope,
    pub orders: Vec<OrderView>,
    pub stock: Vec<StockLevel>,
    pub reservations: Vec<Reservation>,
    pub charges: Vec<Charge>,
    pub refunds: Vec<Refund>,
    /// The status of the execution of every order still running, by ARN (`None`: the workflow
    /// has no such execution).
    pub executions: HashMap<String, Option<String>>,
    /// For every approval token parked on an order awaiting a decision: whether it is an open
    /// task of a running execution.
    pub open_tokens: HashMap<String, bool>,
}

/// Every item of a listing, page after page.
async fn all<T, E, F, Fut>(what: &'static str, mut list: F) -> Result<Vec<T>, AuditError>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: Future<Output = Result<Page<T>, E>>,
    AuditError: From<E>,
{
    let mut items = Vec::new();
    let mut after = None;
    loop {
        let page = list(after).await?;
        items.extend(page.items);
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    tracing::debug!(count = items.len(), "listed {what}");
    Ok(items)
}

impl Books {
    /// Reads the `scope` of the books from `sources` (see the module docs for the order of
    /// the reads).
    pub async fn collect(sources: &Sources, scope: Scope) -> Result<Books, AuditError> {
        let since = scope.since();
        let made_since = since.map(|at| at - CLOCK_SKEW);
        let payments = sources.ports.payments.as_ref();
        let mut refunds = all("refunds", |after| async move {
            payments
                .list_refunds(made_since, after.as_deref(), PAGE)
                .await
        })
        .await?;
        let mut charges = all("charges", |after| async move {
            payments
                .list_charges(made_since, after.as_deref(), PAGE)
                .await
        })
        .await?;
        let orders = sources.ports.orders.as_ref();
        let orders: Vec<OrderView> = all("orders", |after| async move {
            orders
                .list_orders(since, after.as_deref(), PAGE)
                .await
                .map(|page| Page {
                    items: page.items.into_iter().map(OrderView::from).collect(),
                    next: page.next,
                })
        })
        .await?;
        let inventory = sources.ports.inventory.as_ref();
        let stock = all("stock", |after| async move {
            inventory.list_stock(after.as_deref(), PAGE).await
        })
        .await?;
        let mut reservations = all("reservations", |after| async move {
            inventory
                .list_reservations(made_since, after.as_deref(), PAGE)
                .await
        })
        .await?;
        if since.is_some() {
            // What was made since for orders older than the window (a provider's late charge
            // for one, say) is left to the whole collection, with the rest of their books.
            let window: HashSet<&OrderId> = orders.iter().map(|o| &o.id).collect();
            charges.retain(|c| window.contains(&c.order_id));
            refunds.retain(|r| window.contains(&r.order_id));
            reservations.retain(|r| window.contains(&r.order_id));
        }

        // The running executions listed (AWS: a thousand a call), then a lookup for each
        // unfinished order's execution not listed: one that ended, or started since. Owned
        // strings: a future that borrows into the stream's items is not `Send` for every
        // lifetime, and the repair loop runs this in a spawned task.
        let arns: BTreeSet<String> = orders
            .iter()
            .filter(|o| !o.status.is_terminal())
            .filter_map(|o| o.execution_arn.clone())
            .collect();
        let listed = match arns.is_empty() {
            true => None,
            false => sources.executions.running().await?,
        };
        let (running, to_look_up): (Vec<String>, Vec<String>) = arns
            .into_iter()
            .partition(|arn| listed.as_ref().is_some_and(|l| l.contains(arn)));
        let mut executions = stream::iter(to_look_up)
            .map(|arn| async move {
                let status = sources.executions.status(&arn).await?;
                Ok::<_, AuditError>((arn, status))
            })
            .buffer_unordered(LOOKUPS_IN_FLIGHT)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<Result<HashMap<_, _>, _>>()?;
        executions.extend(
            running
                .into_iter()
                .map(|arn| (arn, Some("RUNNING".to_owned()))),
        );
        // A token under an execution that is not running is not open: no call needed. One
        // under a running execution is asked about, unless the keeper is left to it.
        let mut open_tokens = HashMap::new();
        let mut to_ask = BTreeSet::new();
        for o in orders
            .iter()
            .filter(|o| o.status == OrderStatus::AwaitingApproval)
        {
            let Some(token) = &o.parked_token else {
                continue;
            };
            let status = o.execution_arn.as_ref().and_then(|a| executions.get(a));
            match status {
                Some(Some(s)) if s == "RUNNING" => {
                    if sources.check_parked_tokens {
                        to_ask.insert(token.clone());
                    }
                }
                Some(_) => {
                    open_tokens.insert(token.clone(), false);
                }
                None => {}
            }
        }
        let asked = stream::iter(to_ask)
            .map(|token| async move {
                let open = sources.executions.task_open(&token).await?;
                Ok::<_, AuditError>((token, open))
            })
            .buffer_unordered(LOOKUPS_IN_FLIGHT)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<Result<Vec<_>, _>>()?;
        open_tokens.extend(asked);
        Ok(Books {
            scope,
            orders,
            stock,
            reservations,
            charges,
            refunds,
            executions,
            open_tokens,
        })
    }
}
