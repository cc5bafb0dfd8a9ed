//! Prometheus metrics: requests by method, matched route and status, their durations, the
//! business outcomes (orders accepted/replayed/conflicting, approval decisions, sagas finished,
//! the repair loop's repairs by kind) and the embedded backend's commit counters. Served as text at `/metrics`; labels never carry
//! request content beyond the route template.

use crate::RepairKind;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::sync::Arc;
use store::OrderStatus;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: String,
    route: String,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    method: String,
    route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    decision: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabels {
    status: &'static str,
}

type DurationFamily = Family<RouteLabels, Histogram, fn() -> Histogram>;

/// A value kept elsewhere (the engine's and the store's own atomics, the start queue's length),
/// read at each scrape.
pub struct SampledMetric {
    /// The name without the `fulfillment_` prefix (and, for a counter, the `_total` suffix).
    pub name: &'static str,
    pub help: &'static str,
    pub kind: SampledKind,
    pub read: Box<dyn Fn() -> u64 + Send + Sync>,
}

/// How a sampled value is exported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampledKind {
    /// Only ever grows (exported with `_total`).
    Counter,
    /// Goes up and down.
    Gauge,
}

impl std::fmt::Debug for SampledMetric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

#[derive(Debug)]
struct Sampled(Vec<SampledMetric>);

impl Collector for Sampled {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for sampled in &self.0 {
            let value = (sampled.read)();
            match sampled.kind {
                SampledKind::Counter => {
                    encode_one(&mut encoder, sampled, ConstCounter::new(value))?;
                }
                SampledKind::Gauge => {
                    let value = i64::try_from(value).unwrap_or(i64::MAX);
                    encode_one(&mut encoder, sampled, ConstGauge::new(value))?;
                }
            }
        }
        Ok(())
    }
}

fn encode_one(
    encoder: &mut DescriptorEncoder,
    sampled: &SampledMetric,
    value: impl EncodeMetric,
) -> Result<(), std::fmt::Error> {
    let metric =
        encoder.encode_descriptor(sampled.name, sampled.help, None, value.metric_type())?;
    value.encode(metric)
}

fn duration_histogram() -> Histogram {
    // 1 ms … ~32 s
    Histogram::new(exponential_buckets(0.001, 2.0, 16))
}

struct Inner {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    durations: DurationFamily,
    orders: Family<OutcomeLabels, Counter>,
    decisions: Family<DecisionLabels, Counter>,
    cancels: Family<OutcomeLabels, Counter>,
    sagas: Family<StatusLabels, Counter>,
    repairs: Family<KindLabels, Counter>,
    repair_passes: Counter,
    webhooks: Family<OutcomeLabels, Counter>,
}

/// The service's metrics (cheap to clone: one shared registry).
#[derive(Clone)]
pub struct Metrics(Arc<Inner>);

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

/// The outcome of `POST /orders`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderOutcome {
    Accepted,
    Replayed,
    Conflict,
    /// Refused because the catalog cannot price its lines as asked.
    Mispriced,
}

impl Metrics {
    pub fn new() -> Self {
        Metrics::with_sampled(Vec::new())
    }

    /// The service's metrics and `sampled`, values read from their owners at each scrape.
    pub fn with_sampled(sampled: Vec<SampledMetric>) -> Self {
        let mut registry = Registry::with_prefix("fulfillment");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "http_requests",
            "HTTP requests answered, by method, matched route and status",
            requests.clone(),
        );
        let durations: DurationFamily = Family::new_with_constructor(duration_histogram);
        registry.register(
            "http_request_duration_seconds",
            "Time to answer HTTP requests, by method and matched route",
            durations.clone(),
        );
        let orders = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "orders",
            "Orders placed, by outcome (accepted, replayed, conflict)",
            orders.clone(),
        );
        let decisions = Family::<DecisionLabels, Counter>::default();
        registry.register(
            "approval_decisions",
            "Operator approval decisions, by decision and outcome",
            decisions.clone(),
        );
        let cancels = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "cancel_requests",
            "Requests to cancel an order, by outcome (accepted, replayed, too_late, ended, \
             not_found)",
            cancels.clone(),
        );
        let sagas = Family::<StatusLabels, Counter>::default();
        registry.register(
            "sagas_finished",
            "Orders this process saw end, by final status (a step delivered twice after a crash \
             may count its order twice)",
            sagas.clone(),
        );
        let repairs = Family::<KindLabels, Counter>::default();
        registry.register(
            "repairs",
            "What the repair loop did, by kind: orders started, late charges refunded, stock \
             released (or marked shipped) for finished orders, and findings reported to a person",
            repairs.clone(),
        );
        let repair_passes = Counter::default();
        registry.register(
            "repair_passes",
            "Passes of the repair loop that read the books to the end (one replica runs them \
             at a time; a count that stops rising on every replica means the loop has stopped)",
            repair_passes.clone(),
        );
        let webhooks = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "webhook_attempts",
            "Attempts to deliver a webhook, by outcome (delivered, retry, failed: the last \
             attempt of its schedule, or a 410; disabled: an endpoint disabled for failing)",
            webhooks.clone(),
        );
        for outcome in ["delivered", "retry", "failed", "disabled"] {
            let _ = webhooks.get_or_create(&OutcomeLabels { outcome });
        }
        // Every outcome is exported from the start, at zero.
        for kind in RepairKind::ALL {
            let _ = repairs.get_or_create(&KindLabels {
                kind: kind.as_str(),
            });
        }
        for outcome in ["accepted", "replayed", "conflict"] {
            let _ = orders.get_or_create(&OutcomeLabels { outcome });
        }
        for status in OrderStatus::ALL.into_iter().filter(|s| s.is_terminal()) {
            let _ = sagas.get_or_create(&StatusLabels {
                status: status.as_str(),
            });
        }
        if !sampled.is_empty() {
            registry.register_collector(Box::new(Sampled(sampled)));
        }
        Metrics(Arc::new(Inner {
            registry,
            requests,
            durations,
            orders,
            decisions,
            cancels,
            sagas,
            repairs,
            repair_passes,
            webhooks,
        }))
    }

    /// The repair loop did a repair of `kind` (or reported a finding).
    pub fn repaired(&self, kind: RepairKind) {
        self.0
            .repairs
            .get_or_create(&KindLabels {
                kind: kind.as_str(),
            })
            .inc();
    }

    /// A webhook attempt's outcome (`delivered`, `retry`, `failed`), or an endpoint disabled.
    pub fn webhook(&self, outcome: &'static str) {
        self.0
            .webhooks
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// The repair loop read the books to the end of a pass.
    pub fn repair_pass(&self) {
        self.0.repair_passes.inc();
    }

    /// An order ended with `status` (a terminal one).
    pub fn saga_finished(&self, status: OrderStatus) {
        self.0
            .sagas
            .get_or_create(&StatusLabels {
                status: status.as_str(),
            })
            .inc();
    }

    /// Sagas this replica saw end, in every terminal status (the console's sagas/s).
    pub fn sagas_finished(&self) -> u64 {
        OrderStatus::ALL
            .into_iter()
            .filter(|s| s.is_terminal())
            .map(|s| {
                self.0
                    .sagas
                    .get_or_create(&StatusLabels { status: s.as_str() })
                    .get()
            })
            .sum()
    }

    pub fn order(&self, outcome: OrderOutcome) {
        let outcome = match outcome {
            OrderOutcome::Accepted => "accepted",
            OrderOutcome::Replayed => "replayed",
            OrderOutcome::Conflict => "conflict",
            OrderOutcome::Mispriced => "mispriced",
        };
        self.0
            .orders
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    /// `decision` is `approve` or `reject`; `outcome` what came of it (`applied`, `replayed`,
    /// `conflict`, `not_awaiting`, `expired`, `not_found`).
    pub fn decision(&self, decision: &'static str, outcome: &'static str) {
        self.0
            .decisions
            .get_or_create(&DecisionLabels { decision, outcome })
            .inc();
    }

    /// A request to cancel an order, and what came of it (`accepted`, `replayed`, `too_late`,
    /// `ended`, `not_found`).
    pub fn cancel(&self, outcome: &'static str) {
        self.0
            .cancels
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
    }

    pub fn request(&self, method: &str, route: &str, status: u16, seconds: f64) {
        let (method, route) = (method.to_owned(), route.to_owned());
        self.0
            .durations
            .get_or_create(&RouteLabels {
                method: method.clone(),
                route: route.clone(),
            })
            .observe(seconds);
        self.0
            .requests
            .get_or_create(&RequestLabels {
                method,
                route,
                status,
            })
            .inc();
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut text = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut text, &self.0.registry) {
            tracing::error!(error = %e, "metrics encoding failed");
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_counters() {
        let m = Metrics::new();
        m.order(OrderOutcome::Accepted);
        m.decision("approve", "applied");
        m.request("GET", "/healthz", 200, 0.002);
        let text = m.render();
        assert!(
            text.contains("fulfillment_orders_total{outcome=\"accepted\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("fulfillment_approval_decisions_total"),
            "{text}"
        );
        assert!(
            text.contains(
                "fulfillment_http_requests_total{method=\"GET\",route=\"/healthz\",status=\"200\"} 1"
            ),
            "{text}"
        );
        assert!(text.contains("fulfillment_http_request_duration_seconds_bucket"));
    }

    #[test]
    fn every_repair_kind_is_exported_from_the_start_and_counted() {
        let m = Metrics::new();
        let text = m.render();
        for kind in [
            "started",
            "refunded_late_charge",
            "released_stock",
            "reported",
        ] {
            assert!(
                text.contains(&format!("fulfillment_repairs_total{{kind=\"{kind}\"}} 0")),
                "{text}"
            );
        }
        m.repaired(RepairKind::RefundedLateCharge);
        assert!(
            m.render()
                .contains("fulfillment_repairs_total{kind=\"refunded_late_charge\"} 1")
        );
    }
}
