//! The gateway: a charge is one PaymentIntent created and confirmed in one call, a refund one
//! Refund of the order's intent, both under the saga's idempotency keys (`charge:{order}`,
//! `refund:{order}`), which Stripe honours by replaying the first answer.
//!
//! A refund given the intent's id (the charge step records it on the order) retrieves that
//! intent by id, which Stripe answers consistently, checks that its `metadata[order_id]` is the
//! order's (another order's intent is refused, never refunded), then refunds it: one more round
//! trip, on the compensation path only, for never giving back the wrong payment. Without the id,
//! and in `find_charge`, the intent is found by its `metadata[order_id]` through Stripe's search
//! API, which is eventually consistent (Stripe: usually under a minute), so right after a charge
//! it may not see it yet and answer "nothing charged". A provider cannot void an order either: a
//! charge that lands after the refund found nothing is refunded by a later refund (the
//! contract's second branch).

use super::{Answer, Client, ProviderHealth, StripeConfig, StripeConfigError};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::Arc;
use store::domain::{Charge, OrderId, Refund};
use store::error::GatewayError;
use store::ports::{ChargeRequest, Page, PaymentGateway, Refunded};

/// The Stripe-compatible payment gateway.
#[derive(Debug, Clone)]
pub struct StripePayments {
    client: Client,
}

impl StripePayments {
    pub fn new(config: StripeConfig) -> Result<StripePayments, StripeConfigError> {
        Ok(StripePayments {
            client: Client::new(config)?,
        })
    }

    /// What the provider's answers say about the service's key and URL (for `/metrics`).
    pub fn health_counts(&self) -> Arc<ProviderHealth> {
        self.client.health.clone()
    }
}

#[derive(Debug, Deserialize)]
struct PaymentIntent {
    id: String,
    amount: u64,
    currency: String,
    status: String,
    created: i64,
    #[serde(default)]
    metadata: HashMap<String, String>,
}

#[derive(Debug, Deserialize)]
struct StripeRefund {
    id: String,
    amount: u64,
    #[serde(default)]
    payment_intent: Option<String>,
    #[serde(default)]
    status: Option<String>,
    created: i64,
    #[serde(default)]
    metadata: HashMap<String, String>,
}

/// A list or a search result.
#[derive(Debug, Deserialize)]
struct List<T> {
    data: Vec<T>,
    #[serde(default)]
    has_more: bool,
}

/// The most objects Stripe returns in one list call.
const LIST_LIMIT: u32 = 100;

/// An object of a Stripe list, which continues after an object's id (`starting_after`).
trait Listed: serde::de::DeserializeOwned {
    fn id(&self) -> &str;
}

impl Listed for PaymentIntent {
    fn id(&self) -> &str {
        &self.id
    }
}

impl Listed for StripeRefund {
    fn id(&self) -> &str {
        &self.id
    }
}

/// The order an object's `metadata[order_id]` names: set on every intent and refund this
/// service makes. Objects without one (or with one that is no order id) are another
/// integration's on the same account.
fn order_of(metadata: &HashMap<String, String>) -> Option<OrderId> {
    metadata
        .get("order_id")
        .and_then(|id| OrderId::parse(id).ok())
}

fn timestamp(seconds: i64) -> Result<DateTime<Utc>, GatewayError> {
    DateTime::from_timestamp(seconds, 0).ok_or_else(|| {
        GatewayError::Unavailable(format!("payment provider sent a bad timestamp {seconds}"))
    })
}

impl PaymentIntent {
    /// The intent as the port's charge. Stripe writes currencies in lower case, the domain in
    /// ISO 4217's upper case; key and order come back from the metadata the charge wrote.
    fn into_charge(self, order_id: &OrderId) -> Result<Charge, GatewayError> {
        let idempotency_key = self
            .metadata
            .get("idempotency_key")
            .cloned()
            .unwrap_or_else(|| order_id.charge_key());
        Ok(Charge {
            charge_id: self.id,
            idempotency_key,
            order_id: order_id.clone(),
            amount_cents: self.amount,
            currency: self.currency.to_ascii_uppercase(),
            created_at: timestamp(self.created)?,
        })
    }
}

impl StripeRefund {
    fn into_refund(self, charge: &Charge, key: &str) -> Result<Refund, GatewayError> {
        Ok(Refund {
            refund_id: self.id,
            idempotency_key: self
                .metadata
                .get("idempotency_key")
                .cloned()
                .unwrap_or_else(|| key.to_owned()),
            charge_id: self
                .payment_intent
                .unwrap_or_else(|| charge.charge_id.clone()),
            order_id: charge.order_id.clone(),
            amount_cents: self.amount,
            created_at: timestamp(self.created)?,
        })
    }

    /// Pending refunds count: the money is on its way back and must not be sent twice.
    fn counts(&self) -> bool {
        !matches!(self.status.as_deref(), Some("failed" | "canceled"))
    }
}

impl StripePayments {
    /// The intent `charge_id`, retrieved by id, as the order's charge: `None` when it never
    /// succeeded (nothing was taken), `Rejected` when Stripe does not know it or it is another
    /// order's.
    async fn intent_of(
        &self,
        order_id: &OrderId,
        charge_id: &str,
    ) -> Result<Option<Charge>, GatewayError> {
        // Stripe's ids are letters, digits and '_': anything else is none, and stays out of the
        // URL's path.
        if charge_id.is_empty()
            || !charge_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            return Err(GatewayError::Rejected(format!(
                "{charge_id:?} is not a payment intent id"
            )));
        }
        let request = self.client.get(&format!("/v1/payment_intents/{charge_id}"));
        let intent = match self.client.send::<PaymentIntent>(request).await? {
            Answer::Ok { body, .. } => body,
            Answer::Failed { status, error } => return Err(self.client.classify(status, &error)),
        };
        let owner = intent.metadata.get("order_id").map(String::as_str);
        if owner != Some(order_id.as_str()) || !self.client.is_ours(&intent.metadata) {
            return Err(GatewayError::Rejected(format!(
                "payment {} is not order {order_id}'s (its order: {})",
                intent.id,
                owner.unwrap_or("none")
            )));
        }
        if intent.status != "succeeded" {
            return Ok(None);
        }
        intent.into_charge(order_id).map(Some)
    }

    /// One page of the list at `path` (newest first, Stripe's order) after the object `after`,
    /// and the cursor of the next: the last object's id while Stripe has more.
    /// With `since`, `created[gte]`: Stripe's times are whole seconds, so the listing starts
    /// at the second `since` falls in (a few items before it may come too, never one fewer).
    async fn list<T: Listed>(
        &self,
        path: &str,
        since: Option<DateTime<Utc>>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<(Vec<T>, Option<String>), GatewayError> {
        let limit = limit.clamp(1, LIST_LIMIT).to_string();
        let since = since.map(|at| at.timestamp().to_string());
        let mut query = vec![("limit", limit.as_str())];
        if let Some(since) = &since {
            query.push(("created[gte]", since.as_str()));
        }
        if let Some(after) = after {
            query.push(("starting_after", after));
        }
        let request = self.client.get(path).query(&query);
        match self.client.send::<List<T>>(request).await? {
            Answer::Ok { body, .. } => {
                let next = match body.data.last() {
                    Some(last) if body.has_more => Some(last.id().to_owned()),
                    _ => None,
                };
                Ok((body.data, next))
            }
            Answer::Failed { status, error } => Err(self.client.classify(status, &error)),
        }
    }

    /// The order's refund, looked up after Stripe said the charge was refunded already (under
    /// another key, or after the key expired).
    async fn refund_of(&self, charge: &Charge, key: &str) -> Result<Refund, GatewayError> {
        let request = self
            .client
            .get("/v1/refunds")
            .query(&[("payment_intent", charge.charge_id.as_str())]);
        match self.client.send::<List<StripeRefund>>(request).await? {
            Answer::Ok { body, .. } => body
                .data
                .into_iter()
                .filter(StripeRefund::counts)
                .min_by_key(|r| r.created)
                .ok_or_else(|| {
                    GatewayError::Unavailable(format!(
                        "payment provider says {} is refunded but lists no refund",
                        charge.charge_id
                    ))
                })?
                .into_refund(charge, key),
            Answer::Failed { status, error } => Err(self.client.classify(status, &error)),
        }
    }
}

#[async_trait]
impl PaymentGateway for StripePayments {
    async fn check(&self) -> Result<(), GatewayError> {
        self.client.check().await
    }

    /// Healthy unless the last answer refused the key or the URL; then asks again, so a fixed
    /// setting (a proxy, a key restored) shows at once.
    async fn health(&self) -> Result<(), GatewayError> {
        self.client.health.probe(self.client.check()).await
    }

    async fn charge(&self, request: &ChargeRequest) -> Result<Charge, GatewayError> {
        let amount = request.amount_cents.to_string();
        let currency = request.currency.to_ascii_lowercase();
        let mut form = vec![
            ("amount", amount.as_str()),
            ("currency", currency.as_str()),
            ("payment_method", request.payment_method.as_str()),
            ("confirm", "true"),
            // The saga cannot send a customer to a bank's page: redirect methods are refused.
            ("automatic_payment_methods[enabled]", "true"),
            ("automatic_payment_methods[allow_redirects]", "never"),
            ("metadata[order_id]", request.order_id.as_str()),
            (
                "metadata[idempotency_key]",
                request.idempotency_key.as_str(),
            ),
        ];
        form.extend(self.client.prefix_metadata());
        let call = self
            .client
            .post("/v1/payment_intents", &request.idempotency_key)
            .form(&form);
        let intent = match self.client.send::<PaymentIntent>(call).await? {
            Answer::Ok { body, .. } => body,
            Answer::Failed { status, error } => {
                return Err(self.client.classify(status, &error));
            }
        };
        match intent.status.as_str() {
            "succeeded" => intent.into_charge(&request.order_id),
            // Asynchronous methods settle later; `find_charge` sees the intent once it has.
            "processing" => Err(GatewayError::Unavailable(format!(
                "payment {} is still processing",
                intent.id
            ))),
            // 3-D Secure or another step the customer must take: the saga has no customer to
            // send to it, so this payment method cannot pay this order.
            "requires_action" => Err(GatewayError::Rejected(format!(
                "authentication_required: payment {} needs the customer to authenticate, which \
                 an order placed by a system cannot do",
                intent.id
            ))),
            "requires_payment_method" => Err(GatewayError::Rejected(format!(
                "declined: payment {} needs another payment method",
                intent.id
            ))),
            // Capture-later or unconfirmed intents: this account's settings do not fit the
            // one-call charge; no retry changes that.
            other => Err(GatewayError::Invalid(format!(
                "payment {} ended {other}, not succeeded",
                intent.id
            ))),
        }
    }

    /// The order's earliest succeeded intent (declined attempts leave intents that never
    /// succeeded; a refunded intent stays `succeeded`).
    async fn find_charge(&self, order_id: &OrderId) -> Result<Option<Charge>, GatewayError> {
        // Order ids are letters, digits, '-' and '_': nothing to escape in the quoted value.
        let mut query = format!("metadata['order_id']:'{order_id}'");
        if let Some((_, prefix)) = self.client.prefix_metadata() {
            // Prefixes are letters, digits and `-_:.`: nothing to escape either.
            query.push_str(&format!(" AND metadata['key_prefix']:'{prefix}'"));
        }
        let request = self
            .client
            .get("/v1/payment_intents/search")
            .query(&[("query", query.as_str())]);
        match self.client.send::<List<PaymentIntent>>(request).await? {
            Answer::Ok { body, .. } => body
                .data
                .into_iter()
                .filter(|i| i.status == "succeeded" && self.client.is_ours(&i.metadata))
                .min_by_key(|i| i.created)
                .map(|i| i.into_charge(order_id))
                .transpose(),
            Answer::Failed { status, error } => Err(self.client.classify(status, &error)),
        }
    }

    /// Refunds the order's charge in full: the intent `charge_id`, checked to be the order's, or
    /// else the one search finds. The same key again is a replay (`Already`); another key after
    /// a refund gets Stripe's `charge_already_refunded`, and the refund made is returned as
    /// `Already`. No charge found, or the intent never succeeded: `NothingCharged` (see the
    /// module docs).
    async fn refund(
        &self,
        order_id: &OrderId,
        charge_id: Option<&str>,
        idempotency_key: &str,
    ) -> Result<Refunded, GatewayError> {
        let charge = match charge_id {
            Some(charge_id) => self.intent_of(order_id, charge_id).await?,
            None => self.find_charge(order_id).await?,
        };
        let Some(charge) = charge else {
            return Ok(Refunded::NothingCharged);
        };
        let mut form = vec![
            ("payment_intent", charge.charge_id.as_str()),
            ("metadata[order_id]", order_id.as_str()),
            ("metadata[idempotency_key]", idempotency_key),
        ];
        form.extend(self.client.prefix_metadata());
        let call = self.client.post("/v1/refunds", idempotency_key).form(&form);
        match self.client.send::<StripeRefund>(call).await? {
            Answer::Ok { body, replayed } => {
                let refund = body.into_refund(&charge, idempotency_key)?;
                Ok(if replayed {
                    Refunded::Already(refund)
                } else {
                    Refunded::Now(refund)
                })
            }
            Answer::Failed { error, .. }
                if error.code.as_deref() == Some("charge_already_refunded") =>
            {
                Ok(Refunded::Already(
                    self.refund_of(&charge, idempotency_key).await?,
                ))
            }
            Answer::Failed { status, error } => Err(self.client.classify(status, &error)),
        }
    }

    /// `GET /v1/payment_intents`: the succeeded intents that name an order (a refunded intent
    /// stays `succeeded`; declined attempts took nothing). A page may hold fewer charges than
    /// the intents Stripe listed.
    async fn list_charges(
        &self,
        since: Option<DateTime<Utc>>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<Charge>, GatewayError> {
        let (intents, next) = self
            .list::<PaymentIntent>("/v1/payment_intents", since, after, limit)
            .await?;
        let mut items = Vec::new();
        for intent in intents {
            if intent.status != "succeeded" || !self.client.is_ours(&intent.metadata) {
                continue;
            }
            if let Some(order_id) = order_of(&intent.metadata) {
                items.push(intent.into_charge(&order_id)?);
            }
        }
        Ok(Page { items, next })
    }

    /// `GET /v1/refunds`: the refunds that name an order and count (pending ones too, see
    /// `StripeRefund::counts`). A refund made outside this service (the dashboard) names no
    /// order and is not listed.
    async fn list_refunds(
        &self,
        since: Option<DateTime<Utc>>,
        after: Option<&str>,
        limit: u32,
    ) -> Result<Page<Refund>, GatewayError> {
        let (refunds, next) = self
            .list::<StripeRefund>("/v1/refunds", since, after, limit)
            .await?;
        let mut items = Vec::new();
        for refund in refunds
            .into_iter()
            .filter(|r| r.counts() && self.client.is_ours(&r.metadata))
        {
            let (Some(order_id), Some(intent)) =
                (order_of(&refund.metadata), refund.payment_intent.clone())
            else {
                continue;
            };
            let key = refund
                .metadata
                .get("idempotency_key")
                .cloned()
                .unwrap_or_else(|| order_id.refund_key());
            items.push(Refund {
                refund_id: refund.id,
                idempotency_key: key,
                charge_id: intent,
                order_id,
                amount_cents: refund.amount,
                created_at: timestamp(refund.created)?,
            });
        }
        Ok(Page { items, next })
    }
}
