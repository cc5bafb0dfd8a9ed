//! The gateway. An order's shipment is made in steps, each recorded in our store before the
//! next is sent (`book.rs`), so any worker, after any crash or lost answer, continues from what
//! is recorded instead of starting over:
//!
//! 1. the provider shipment: created with the order id as `reference`, then claimed; the first
//!    claim wins and every caller continues with the winner (a loser's shipment is never bought);
//! 2. the rate: the cheapest of the configured carrier (and service, when one is set) among the
//!    shipment's rates, ties broken by service then rate id, so every caller picks the same;
//! 3. the buy: recorded as started, sent, and ended once EasyPost answers. A buy refused (for
//!    any reason, "already purchased" among them) is resolved by retrieving the shipment: a
//!    label there is the order's label; an unknown outcome (timeout, 5xx) stays recorded as
//!    in flight and the next caller retrieves the shipment before buying;
//! 4. the label: recorded unless a void came first. One bought after the void is refunded at
//!    once (`POST …/refund`) and the answer is `Rejected`.
//!
//! A void fences the order (no claim, buy or label is recorded after it). When a buy may still
//! be in flight (started less than [`EasyPostShipping::settle_time`] ago), the void answers
//! `Unavailable` and the compensation tries again later; once nothing can land any more, a label
//! found on the order's shipment is refunded: a label never recorded was never printed.

use super::{Client, EasyPostConfig, EasyPostConfigError};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use reqwest::Method;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use store::domain::{OrderId, Shipment};
use store::error::GatewayError;
use store::labels::{LabelBook, LabelRecord, LabelStep};
use store::ports::{ShipmentRequest, ShippingGateway, Voided};

/// The EasyPost shipping gateway over a backend's label records.
#[derive(Clone)]
pub struct EasyPostShipping {
    client: Client,
    config: Arc<EasyPostConfig>,
    book: Arc<dyn LabelBook>,
}

impl std::fmt::Debug for EasyPostShipping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EasyPostShipping")
            .field("client", &self.client)
            .field("carrier", &self.config.carrier)
            .field("service", &self.config.service)
            .finish_non_exhaustive()
    }
}

/// A shipment as EasyPost answers it (the fields the gateway reads).
#[derive(Debug, Deserialize)]
struct EpShipment {
    id: String,
    #[serde(default)]
    rates: Vec<EpRate>,
    #[serde(default)]
    postage_label: Option<EpLabel>,
    #[serde(default)]
    tracking_code: Option<String>,
    #[serde(default)]
    refund_status: Option<String>,
    #[serde(default)]
    messages: Vec<Value>,
}

#[derive(Debug, Clone, Deserialize)]
struct EpRate {
    id: String,
    carrier: String,
    service: String,
    /// A decimal amount as text (`"6.07"`).
    rate: String,
}

#[derive(Debug, Deserialize)]
struct EpLabel {
    #[serde(default)]
    created_at: Option<String>,
}

/// Refund statuses that settle a label: the money is on its way back, or the carrier bills
/// only on scan and an unused label costs nothing. `rejected` may be asked again (EasyPost).
fn refund_settled(status: Option<&str>) -> bool {
    matches!(status, Some("submitted" | "refunded" | "not_applicable"))
}

impl EpShipment {
    /// The bought label as the port's shipment, if the shipment has one.
    fn label(&self, order_id: &OrderId) -> Option<Shipment> {
        let label = self.postage_label.as_ref()?;
        let created_at = label
            .created_at
            .as_deref()
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .map_or_else(Utc::now, |t| t.with_timezone(&Utc));
        Some(Shipment {
            shipment_id: self.id.clone(),
            order_id: order_id.clone(),
            tracking_number: self.tracking_code.clone().unwrap_or_default(),
            created_at,
        })
    }
}

/// `"6.07"` → 607 hundredths; an amount that is not one sorts last.
fn amount(rate: &str) -> u64 {
    let (whole, fraction) = rate.trim().split_once('.').unwrap_or((rate.trim(), ""));
    let fraction = format!("{fraction:0<2}");
    match (
        whole.parse::<u64>(),
        fraction.get(..2).map(str::parse::<u64>),
    ) {
        (Ok(w), Some(Ok(f))) => w.saturating_mul(100).saturating_add(f),
        _ => u64::MAX,
    }
}

/// An id unique to one buy attempt of this process (with the time, unique across processes).
fn attempt_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let at = Utc::now().timestamp_nanos_opt().unwrap_or_default();
    format!("{:x}-{at:x}-{n}", std::process::id())
}

fn voided(id: &OrderId) -> GatewayError {
    GatewayError::Rejected(format!(
        "shipping of order {id} was voided: the order was compensated"
    ))
}

impl EasyPostShipping {
    pub fn new(
        config: EasyPostConfig,
        book: Arc<dyn LabelBook>,
    ) -> Result<EasyPostShipping, EasyPostConfigError> {
        Ok(EasyPostShipping {
            client: Client::new(&config)?,
            config: Arc::new(config),
            book,
        })
    }

    /// What EasyPost's answers said about the service's settings, for `/metrics`.
    pub fn health_counts(&self) -> Arc<crate::http::ProviderHealth> {
        self.client.health.clone()
    }

    /// How long after a buy was started it may still land: the caller's timeout, and half as
    /// much again for a slow send and clocks of replicas that differ a little.
    pub fn settle_time(&self) -> Duration {
        self.config.timeout + self.config.timeout / 2
    }

    async fn retrieve(&self, shipment_id: &str) -> Result<EpShipment, GatewayError> {
        let request = self
            .client
            .request(Method::GET, &format!("/shipments/{shipment_id}"));
        self.client
            .send(request)
            .await
            .map_err(|e| self.client.classify(e))
    }

    /// `POST /v2/shipments`: a new provider shipment for the order, with its rates.
    async fn create(&self, request: &ShipmentRequest) -> Result<EpShipment, GatewayError> {
        let a = &request.address;
        let units: u64 = request.lines.iter().map(|l| u64::from(l.quantity)).sum();
        let weight = units.max(1) * u64::from(self.config.unit_weight_oz);
        let body = json!({
            "shipment": {
                "reference": request.order_id.as_str(),
                "to_address": {
                    "name": a.name,
                    "street1": a.line1,
                    "city": a.city,
                    "zip": a.postal_code,
                    "country": a.country,
                },
                "from_address": self.config.from_address,
                "parcel": { "weight": weight },
            }
        });
        let call = self.client.request(Method::POST, "/shipments").json(&body);
        self.client
            .send(call)
            .await
            .map_err(|e| self.client.classify(e))
    }

    /// The rate every caller picks (see the module docs); `Rejected` when the configured
    /// carrier offers none for this parcel and address, with what the carriers said.
    fn choose_rate(&self, shipment: &EpShipment) -> Result<EpRate, GatewayError> {
        let wanted = |r: &&EpRate| {
            r.carrier.eq_ignore_ascii_case(&self.config.carrier)
                && self
                    .config
                    .service
                    .as_ref()
                    .is_none_or(|s| r.service.eq_ignore_ascii_case(s))
        };
        shipment
            .rates
            .iter()
            .filter(wanted)
            .min_by(|a, b| {
                (amount(&a.rate), &a.service, &a.id).cmp(&(amount(&b.rate), &b.service, &b.id))
            })
            .cloned()
            .ok_or_else(|| {
                let said: Vec<String> = shipment.messages.iter().map(Value::to_string).collect();
                GatewayError::Rejected(format!(
                    "no {} {} rate for shipment {} (carrier messages: {})",
                    self.config.carrier,
                    self.config.service.as_deref().unwrap_or("(any service)"),
                    shipment.id,
                    if said.is_empty() {
                        "none".to_owned()
                    } else {
                        said.join("; ")
                    },
                ))
            })
    }

    /// `POST …/buy` of `rate`: the bought shipment, or (inner `Err`) EasyPost's final refusal
    /// when the shipment has no label; the outer `Err` is an unknown outcome.
    async fn buy(
        &self,
        shipment_id: &str,
        rate: &EpRate,
    ) -> Result<Result<EpShipment, GatewayError>, GatewayError> {
        let call = self
            .client
            .request(Method::POST, &format!("/shipments/{shipment_id}/buy"))
            .json(&json!({ "rate": { "id": rate.id } }));
        match self.client.send::<EpShipment>(call).await {
            Ok(bought) => Ok(Ok(bought)),
            // A final refusal may be "already purchased" (a racing caller, a lost answer): the
            // shipment itself says whether it has a label.
            Err(refusal) if refusal.is_final_refusal() => {
                let reason = self.client.classify(refusal);
                let found = self.retrieve(shipment_id).await?;
                Ok(if found.postage_label.is_some() {
                    Ok(found)
                } else {
                    Err(reason)
                })
            }
            Err(e) => Err(self.client.classify(e)),
        }
    }

    /// Refunds the label of `shipment_id` (a voided order's), and records it. A refusal is
    /// resolved by retrieving the shipment: a refund already asked (by a racing caller) counts.
    async fn refund_label(
        &self,
        order_id: &OrderId,
        shipment_id: &str,
    ) -> Result<(), GatewayError> {
        let call = self
            .client
            .request(Method::POST, &format!("/shipments/{shipment_id}/refund"))
            .json(&json!({}));
        let status = match self.client.send::<EpShipment>(call).await {
            Ok(refunded) => refunded.refund_status,
            Err(refusal) if refusal.is_final_refusal() => {
                let reason = self.client.classify(refusal);
                let found = self.retrieve(shipment_id).await?;
                if !refund_settled(found.refund_status.as_deref()) {
                    return Err(GatewayError::Unavailable(format!(
                        "the label of voided order {order_id} could not be refunded yet: {reason}"
                    )));
                }
                found.refund_status
            }
            Err(e) => return Err(self.client.classify(e)),
        };
        let status = status.unwrap_or_else(|| "submitted".to_owned());
        tracing::warn!(
            order_id = %order_id,
            shipment_id,
            refund_status = %status,
            "a label bought for a voided order was refunded"
        );
        self.book
            .record_label_step(order_id, &LabelStep::LabelRefunded(status))
            .await?;
        Ok(())
    }

    /// Steps 1: the order's provider shipment, as recorded (claimed now if there is none), and
    /// what EasyPost holds of it.
    async fn claimed_shipment(
        &self,
        request: &ShipmentRequest,
        record: LabelRecord,
    ) -> Result<(LabelRecord, EpShipment), GatewayError> {
        let id = &request.order_id;
        if let Some(shipment_id) = &record.shipment_id {
            let found = self.retrieve(shipment_id).await?;
            return Ok((record, found));
        }
        let created = self.create(request).await?;
        let record = self
            .book
            .record_label_step(id, &LabelStep::Claim(created.id.clone()))
            .await?;
        match record.shipment_id.as_deref() {
            Some(winner) if winner == created.id => Ok((record, created)),
            Some(winner) => {
                tracing::info!(order_id = %id, unused = %created.id, shipment_id = winner, "another caller's shipment is the order's");
                let found = self.retrieve(winner).await?;
                Ok((record, found))
            }
            // Voided (or labelled) meanwhile: the caller reads it from the record.
            None => Ok((record, created)),
        }
    }

    /// Step 4: records the label, or refunds it when a void came first.
    async fn record_label(&self, id: &OrderId, label: Shipment) -> Result<Shipment, GatewayError> {
        let record = self
            .book
            .record_label_step(id, &LabelStep::Bought(label.clone()))
            .await?;
        match record.label {
            Some(recorded) => Ok(recorded),
            None => {
                self.refund_label(id, &label.shipment_id).await?;
                Err(GatewayError::Rejected(format!(
                    "shipping of order {id} was voided while its label was bought; the label \
                     was refunded"
                )))
            }
        }
    }
}

#[async_trait]
impl ShippingGateway for EasyPostShipping {
    /// Unhealthy while EasyPost's last answer refused the key (or could not bill the account):
    /// asked again on each probe, so a fixed key shows at once.
    async fn health(&self) -> Result<(), GatewayError> {
        self.client.health.probe(self.client.check()).await
    }

    async fn create_shipment(&self, request: &ShipmentRequest) -> Result<Shipment, GatewayError> {
        let id = &request.order_id;
        let record = self.book.label_record(id).await?;
        if let Some(label) = record.label {
            return Ok(label);
        }
        if record.is_voided() {
            return Err(voided(id));
        }
        let (record, shipment) = self.claimed_shipment(request, record).await?;
        if let Some(label) = record.label {
            return Ok(label);
        }
        if record.is_voided() {
            return Err(voided(id));
        }
        // Bought before (an answer that was lost, a racing caller): record it.
        if let Some(label) = shipment.label(id) {
            return self.record_label(id, label).await;
        }
        let rate = self.choose_rate(&shipment)?;
        let attempt = attempt_id();
        let started = LabelStep::BuyStarted {
            attempt: attempt.clone(),
            at: Utc::now(),
        };
        let record = self.book.record_label_step(id, &started).await?;
        if !record.buying.contains_key(&attempt) {
            return match record.label {
                Some(label) => Ok(label),
                None => Err(voided(id)),
            };
        }
        // An unknown outcome leaves the attempt recorded as in flight (see the module docs).
        let answered = self.buy(&shipment.id, &rate).await?;
        let ended = match answered {
            Ok(bought) => bought.label(id).ok_or_else(|| {
                GatewayError::Unavailable(format!(
                    "carrier bought shipment {} without a label in its answer",
                    bought.id
                ))
            }),
            Err(refused) => Err(refused),
        };
        let outcome = match ended {
            Ok(label) => self.record_label(id, label).await,
            Err(e) => Err(e),
        };
        if outcome.is_ok() || matches!(outcome, Err(GatewayError::Rejected(_))) {
            self.book
                .record_label_step(id, &LabelStep::BuyEnded { attempt })
                .await?;
        }
        outcome
    }

    async fn void(&self, order_id: &OrderId) -> Result<Voided, GatewayError> {
        let now = Utc::now();
        let record = self
            .book
            .record_label_step(order_id, &LabelStep::Void { at: now })
            .await?;
        if let Some(label) = record.label {
            return Ok(Voided::Shipped(label));
        }
        let Some(shipment_id) = record.shipment_id.as_deref() else {
            return Ok(Voided::Now);
        };
        if record.buying.is_empty() || record.label_refund.is_some() {
            // No buy of this order can land: nothing was bought, or its label is refunded.
            return Ok(Voided::Now);
        }
        let settle = chrono::Duration::from_std(self.settle_time()).unwrap_or_default();
        if let Some(latest) = record.buying.values().max()
            && now < *latest + settle
        {
            return Err(GatewayError::Unavailable(format!(
                "a label purchase for order {order_id} may still land until {}; the void \
                 (recorded) finishes after it",
                *latest + settle
            )));
        }
        let found = self.retrieve(shipment_id).await?;
        if found.postage_label.is_some() {
            match found.refund_status {
                Some(status) if refund_settled(Some(&status)) => {
                    let step = LabelStep::LabelRefunded(status);
                    self.book.record_label_step(order_id, &step).await?;
                }
                _ => self.refund_label(order_id, shipment_id).await?,
            }
        }
        Ok(Voided::Now)
    }

    /// The label recorded for the order (a label never recorded was never shipped with).
    async fn shipment(&self, order_id: &OrderId) -> Result<Option<Shipment>, GatewayError> {
        Ok(self.book.label_record(order_id).await?.label)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_compare_as_money() {
        assert!(amount("6.07") < amount("7.4"));
        assert_eq!(amount("7.4"), 740);
        assert_eq!(amount("12"), 1200);
        assert_eq!(amount("abc"), u64::MAX);
    }

    #[test]
    fn settled_refunds_are_those_that_need_no_other_request() {
        for s in ["submitted", "refunded", "not_applicable"] {
            assert!(refund_settled(Some(s)), "{s}");
        }
        assert!(!refund_settled(Some("rejected")));
        assert!(!refund_settled(None));
    }
}
