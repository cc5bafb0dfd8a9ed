//! A whole saga on real SQLite files, as `serve` composes it (`service::startup::App`): the
//! embedded engine, the store with its sandbox gateways, the workers and the keeper, and order
//! intake with its start queue.

use engine::{ExecutionDescription, ExecutionStatus, GetExecutionHistoryInput};
use intake::pricing::RequestedLine;
use intake::{OrderIntake, OrderRequest, Placed};
use service::config::Settings;
use service::startup::App;
use std::sync::Arc;
use std::time::{Duration, Instant};
use store::{Address, Order, OrderId, OrderStatus, Price};
use store::{PaymentGateway, Ports};
use workflow::SagaSettings;
use workflow::definition::Activity;
use workflow::embedded::EmbeddedWorkflow;
use workflow::{Step, StepTask};

pub const DEADLINE: Duration = Duration::from_secs(60);

pub struct Saga {
    _dir: tempfile::TempDir,
    pub ports: Ports,
    pub workflow: Arc<EmbeddedWorkflow>,
    pub intake: Arc<OrderIntake>,
    /// `serve`'s own composition, on temporary files: the workers, the keeper and the start
    /// queue run; the repair loop does not (the tests run its passes by hand).
    pub app: App,
}

impl Saga {
    pub async fn start(saga: SagaSettings) -> Saga {
        Saga::with_payments(saga, |payments| payments).await
    }

    /// The saga with its payment gateway (the steps' and the repair's) wrapped by `payments`.
    pub async fn with_payments(
        saga: SagaSettings,
        payments: impl FnOnce(Arc<dyn PaymentGateway>) -> Arc<dyn PaymentGateway>,
    ) -> Saga {
        let dir = tempfile::tempdir().unwrap();
        let mut settings = Settings::embedded(&dir.path().join("store.db")).unwrap();
        settings.saga = saga;
        settings.repair.interval = None;
        let mut opened = service::startup::open(&settings).await.unwrap();
        opened.ports.payments = payments(opened.ports.payments);
        let app = App::build(&settings, opened).await.unwrap();
        Saga {
            _dir: dir,
            ports: app.state.ports.clone(),
            workflow: app.embedded().expect("the embedded backend").clone(),
            intake: app.state.intake.clone(),
            app,
        }
    }

    /// A compensation's first task for order `id`, with the input the definition gives it:
    /// the failure that started the compensation, attempt 0, and whether it is the last.
    pub fn undo_task(activity: Activity, id: &str, failure: serde_json::Value) -> StepTask {
        let last = Activity::COMPENSATIONS.last() == Some(&activity);
        StepTask {
            task_token: format!("t-{}", activity.state()),
            input: serde_json::json!({
                "orderId": id,
                "failure": failure,
                "attempt": 0,
                "finishesOrder": last,
            }),
        }
    }

    /// The step the workers run for `activity`, to run by hand.
    pub fn step(&self, activity: Activity) -> Arc<dyn Step> {
        workflow::steps::for_activity(activity, &self.ports, &self.app.state.metrics)
    }

    pub async fn default() -> Saga {
        Saga::start(SagaSettings::default()).await
    }

    pub fn start_workers(&mut self) {
        self.app.start_workers();
    }

    pub async fn stop_workers(&mut self) {
        self.app.stop_workers().await;
    }

    /// Stocks `available` units of `sku` at its [`catalog_cents`] price in EUR.
    pub async fn stock(&self, sku: &str, available: u64) {
        let price = Price {
            cents: catalog_cents(sku),
            currency: "EUR".into(),
        };
        self.ports
            .inventory
            .set_stock(sku, Some(available), Some(&price))
            .await
            .unwrap();
    }

    pub async fn level(&self, sku: &str) -> (u64, u64, u64) {
        let s = self.ports.inventory.stock(sku).await.unwrap().unwrap();
        (s.available, s.reserved, s.shipped)
    }

    pub async fn place(&self, request: OrderRequest) -> Order {
        match self.intake.place(request, "shop").await.unwrap() {
            Placed::Accepted(o) | Placed::Replayed(o) => o,
            Placed::Conflict(o) => panic!("unexpected conflict for {}", o.id()),
            Placed::IdTaken => panic!("the id is another principal's"),
        }
    }

    pub async fn order(&self, id: &str) -> Order {
        self.ports
            .orders
            .get(&OrderId::parse(id).unwrap())
            .await
            .unwrap()
            .unwrap()
    }

    /// Waits until the order's execution has ended (and, first, until the start queue has
    /// started it).
    pub async fn finished(&self, order: &Order) -> ExecutionDescription {
        let arn = order
            .execution_arn
            .as_deref()
            .expect("the order has an execution");
        // The start queue starts the execution a moment after the order is accepted: until
        // then there is none to wait on (or the wait, begun before the start, ends at once).
        let deadline = Instant::now() + DEADLINE;
        let d = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.workflow.engine().wait_for_completion(arn, left).await {
                Err(engine::EngineError::ExecutionDoesNotExist(_)) if !left.is_zero() => {}
                Ok(d) if d.status == ExecutionStatus::Running && !left.is_zero() => {}
                done => break done.unwrap(),
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        if d.status == ExecutionStatus::Running {
            let last: Vec<String> = self
                .event_types(order)
                .await
                .into_iter()
                .rev()
                .take(8)
                .collect();
            let now = self.order(order.id().as_str()).await;
            panic!(
                "{} did not finish in time: it is {:?}, its history ends (last first) {last:?}",
                order.id(),
                now.status
            );
        }
        d
    }

    /// Waits until the order reaches `status` (polled: the store has no notifications).
    pub async fn reaches(&self, id: &str, status: OrderStatus) -> Order {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let order = self.order(id).await;
            if order.status == status {
                return order;
            }
            assert!(
                Instant::now() < deadline,
                "{id} is {:?}, never {status:?}",
                order.status
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn charges(&self, id: &str) -> usize {
        let id = OrderId::parse(id).unwrap();
        usize::from(
            self.ports
                .payments
                .find_charge(&id)
                .await
                .unwrap()
                .is_some(),
        )
    }

    pub async fn event_types(&self, order: &Order) -> Vec<String> {
        let page = self
            .workflow
            .engine()
            .get_execution_history(GetExecutionHistoryInput {
                execution_arn: order.execution_arn.clone().unwrap(),
                max_results: Some(1000),
                ..Default::default()
            })
            .await
            .unwrap();
        page.events.into_iter().map(|e| e.event_type).collect()
    }
}

pub fn request(
    id: &str,
    items: &[(&str, u32, u64)],
    payment_method: &str,
    postal_code: &str,
) -> OrderRequest {
    OrderRequest {
        order_id: OrderId::parse(id).unwrap(),
        customer_id: "cus_1".into(),
        items: items
            .iter()
            .map(|(sku, quantity, price)| RequestedLine {
                sku: (*sku).into(),
                quantity: *quantity,
                unit_price_cents: Some(*price),
            })
            .collect(),
        currency: "EUR".into(),
        payment_method: payment_method.into(),
        shipping_address: Address {
            name: "Ada Lovelace".into(),
            line1: "1 Analytical Way".into(),
            city: "London".into(),
            postal_code: postal_code.into(),
            country: "GB".into(),
        },
    }
}

/// The catalog price the tests stock a SKU at: a piano needs an approval, anything else not.
pub fn catalog_cents(sku: &str) -> u64 {
    if sku == "piano" { 250_000 } else { 2_500 }
}

/// A small order (no approval) of one unit of `sku`, which is not a piano.
pub fn small(id: &str, sku: &str, payment_method: &str) -> OrderRequest {
    request(id, &[(sku, 1, catalog_cents(sku))], payment_method, "10115")
}

/// A large order (needs approval) of one piano (`sku` is stocked as one).
pub fn large(id: &str, sku: &str) -> OrderRequest {
    assert_eq!(sku, "piano", "only a piano is priced for an approval");
    request(id, &[(sku, 1, catalog_cents(sku))], "pm_card_visa", "10115")
}
