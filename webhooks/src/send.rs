//! Attempts of the due deliveries: at most [`PER_ENDPOINT`] requests at once to one receiver,
//! endpoints side by side; each attempt signed afresh, recorded with its outcome, and the next
//! one scheduled; then each endpoint's state (failing since, disabled) from what it answered.

use super::WebhookSettings;
use super::guard::{self, GuardedResolver};
use super::signing::signature_header;
use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use rand::Rng;
use reqwest::StatusCode;
use reqwest::header::{HeaderMap, RETRY_AFTER};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use store::{
    Attempt, Delivery, DeliveryState, Disabled, StoreError, WebhookEndpoint, WebhookRepository,
};
use telemetry::Metrics;

/// Deliveries read a pass.
const BATCH: u32 = 512;
/// Endpoints attempted at once.
const ENDPOINTS_AT_ONCE: usize = 32;
/// Attempts in flight to one endpoint at once.
const PER_ENDPOINT: usize = 8;
/// The longest `Retry-After` honoured.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 3600);

/// The deliveries' client: no redirects, no proxy, the guarded resolver, a timeout per attempt.
pub fn client(settings: &WebhookSettings) -> reqwest::Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(super::ATTEMPT_TIMEOUT)
        .connect_timeout(super::ATTEMPT_TIMEOUT)
        .user_agent(concat!("fulfillment-webhooks/", env!("CARGO_PKG_VERSION")));
    if !settings.allow_private {
        builder = builder.dns_resolver(Arc::new(GuardedResolver));
    }
    builder.build()
}

/// One pass over the due deliveries; how many it attempted.
pub async fn pass(
    repo: &dyn WebhookRepository,
    client: &reqwest::Client,
    settings: &WebhookSettings,
    metrics: &Metrics,
) -> Result<usize, StoreError> {
    let due = repo.due_deliveries(Utc::now(), BATCH).await?;
    let count = due.len();
    let mut by_endpoint: BTreeMap<String, Vec<Delivery>> = BTreeMap::new();
    for d in due {
        by_endpoint
            .entry(d.endpoint_id.clone())
            .or_default()
            .push(d);
    }
    futures_util::stream::iter(by_endpoint)
        .map(|(endpoint, deliveries)| {
            endpoint_turn(repo, client, settings, metrics, endpoint, deliveries)
        })
        .buffer_unordered(ENDPOINTS_AT_ONCE)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<Vec<()>, _>>()?;
    Ok(count)
}

/// What an attempt came to.
enum Outcome {
    Delivered,
    /// The endpoint said it is gone for good.
    Gone,
    /// Try again, no sooner than the answer's `Retry-After` if it gave one.
    Failed {
        retry_after: Option<Duration>,
    },
}

/// What one attempt told of its endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Heard {
    Answered,
    Gone,
    Failed,
    /// Nothing was sent (the endpoint is deleted or disabled).
    Nothing,
}

/// One endpoint's due deliveries, oldest due first, at most [`PER_ENDPOINT`] at once; then
/// the endpoint's state from what the attempts heard.
async fn endpoint_turn(
    repo: &dyn WebhookRepository,
    client: &reqwest::Client,
    settings: &WebhookSettings,
    metrics: &Metrics,
    endpoint_id: String,
    deliveries: Vec<Delivery>,
) -> Result<(), StoreError> {
    let endpoint = repo.endpoint(&endpoint_id).await?;
    let endpoint = endpoint.as_ref();
    let heard = futures_util::stream::iter(deliveries)
        .map(|delivery| deliver(repo, client, settings, metrics, endpoint, delivery))
        .buffer_unordered(PER_ENDPOINT)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<Vec<Heard>, _>>()?;
    let Some(before) = endpoint else {
        return Ok(());
    };
    let now = Utc::now();
    let mut after = before.clone();
    if heard.contains(&Heard::Gone) {
        metrics.webhook("disabled");
        tracing::warn!(endpoint = %after.id, owner = %after.owner, "webhook endpoint answered 410 Gone: disabled");
        after.disabled = Some(Disabled {
            at: now,
            reason: "the endpoint answered 410 Gone".to_owned(),
        });
    } else if heard.contains(&Heard::Answered) {
        after.failing_since = None;
    } else if heard.contains(&Heard::Failed) {
        let since = *after.failing_since.get_or_insert(now);
        let limit = chrono::Duration::from_std(settings.disable_after).unwrap_or_default();
        if now - since >= limit {
            metrics.webhook("disabled");
            tracing::warn!(endpoint = %after.id, owner = %after.owner, %since, "webhook endpoint failing for too long: disabled");
            after.disabled = Some(Disabled {
                at: now,
                reason: format!(
                    "every delivery failed since {}",
                    since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                ),
            });
        }
    }
    if &after != before {
        // Only what the attempts decide, over the endpoint as it is now (a rotation made
        // meanwhile stays).
        if let Some(mut now) = repo.endpoint(&endpoint_id).await? {
            now.failing_since = after.failing_since;
            if now.disabled.is_none() {
                now.disabled = after.disabled;
            }
            repo.put_endpoint(&now).await?;
        }
    }
    Ok(())
}

/// One attempt of `delivery` to `endpoint` (as the pass read it), recorded.
async fn deliver(
    repo: &dyn WebhookRepository,
    client: &reqwest::Client,
    settings: &WebhookSettings,
    metrics: &Metrics,
    endpoint: Option<&WebhookEndpoint>,
    mut delivery: Delivery,
) -> Result<Heard, StoreError> {
    let now = Utc::now();
    let Some(ep) = endpoint.filter(|e| e.disabled.is_none()) else {
        // Deleted or disabled: nothing is sent; a replay after enabling it sends it.
        let why = match endpoint {
            None => "the endpoint was deleted",
            Some(_) => "the endpoint is disabled",
        };
        record(&mut delivery, now, None, Some(why.to_owned()), 0);
        finish(&mut delivery, DeliveryState::Failed);
        repo.save_delivery(&delivery).await?;
        metrics.webhook("failed");
        return Ok(Heard::Nothing);
    };
    let (outcome, status, error, took) = attempt(client, settings, ep, &delivery, now).await;
    record(&mut delivery, now, status, error, took);
    let heard = match outcome {
        Outcome::Delivered => {
            finish(&mut delivery, DeliveryState::Delivered);
            metrics.webhook("delivered");
            Heard::Answered
        }
        Outcome::Gone => {
            finish(&mut delivery, DeliveryState::Failed);
            metrics.webhook("failed");
            Heard::Gone
        }
        Outcome::Failed { retry_after } => {
            match settings.retries.get(delivery.attempts.len() - 1) {
                Some(delay) => {
                    let floor = retry_after.unwrap_or_default().min(MAX_RETRY_AFTER);
                    let wait = jitter(*delay).max(floor);
                    delivery.next_attempt_at =
                        Some(now + chrono::Duration::from_std(wait).unwrap_or_default());
                    metrics.webhook("retry");
                }
                None => {
                    finish(&mut delivery, DeliveryState::Failed);
                    metrics.webhook("failed");
                }
            }
            Heard::Failed
        }
    };
    repo.save_delivery(&delivery).await?;
    Ok(heard)
}

fn record(
    delivery: &mut Delivery,
    at: DateTime<Utc>,
    status: Option<u16>,
    error: Option<String>,
    duration_ms: u64,
) {
    delivery.attempts.push(Attempt {
        at,
        status,
        error,
        duration_ms,
    });
}

fn finish(delivery: &mut Delivery, state: DeliveryState) {
    delivery.state = state;
    delivery.next_attempt_at = None;
}

/// `delay`, 10 % either way, at random: retries of many deliveries failed together spread out.
fn jitter(delay: Duration) -> Duration {
    delay.mul_f64(rand::rng().random_range(0.9..=1.1))
}

/// One signed POST of the delivery's payload.
async fn attempt(
    client: &reqwest::Client,
    settings: &WebhookSettings,
    endpoint: &WebhookEndpoint,
    delivery: &Delivery,
    now: DateTime<Utc>,
) -> (Outcome, Option<u16>, Option<String>, u64) {
    let started = std::time::Instant::now();
    let took = || u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    // An address in the URL is not resolved: the guard checks it here, at each attempt too.
    if let Err(why) = guard::check_url(&endpoint.url, settings.allow_private) {
        return (
            Outcome::Failed { retry_after: None },
            None,
            Some(format!("the URL {why}")),
            0,
        );
    }
    let timestamp = now.timestamp();
    let signature = signature_header(
        &endpoint.secrets,
        now,
        &delivery.message_id,
        timestamp,
        &delivery.payload,
    );
    let sent = client
        .post(&endpoint.url)
        .header("content-type", "application/json")
        .header("webhook-id", &delivery.message_id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signature)
        .body(delivery.payload.clone())
        .send()
        .await;
    match sent {
        Ok(response) => {
            let status = response.status();
            let outcome = if status.is_success() {
                Outcome::Delivered
            } else if status == StatusCode::GONE {
                Outcome::Gone
            } else {
                let honoured = matches!(
                    status,
                    StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
                );
                Outcome::Failed {
                    retry_after: honoured
                        .then(|| retry_after(response.headers(), now))
                        .flatten(),
                }
            };
            (outcome, Some(status.as_u16()), None, took())
        }
        Err(e) => {
            let why = if e.is_timeout() {
                format!("no answer within {:?}", super::ATTEMPT_TIMEOUT)
            } else {
                error_chain(&e)
            };
            (
                Outcome::Failed { retry_after: None },
                None,
                Some(why),
                took(),
            )
        }
    }
}

/// `Retry-After` as seconds or an HTTP date.
fn retry_after(headers: &HeaderMap, now: DateTime<Utc>) -> Option<Duration> {
    let raw = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = raw.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = DateTime::parse_from_rfc2822(raw).ok()?.with_timezone(&Utc);
    (at - now).to_std().ok()
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_seconds_or_a_date() {
        let now = Utc::now();
        let mut headers = HeaderMap::new();
        headers.insert(RETRY_AFTER, "120".parse().unwrap());
        assert_eq!(retry_after(&headers, now), Some(Duration::from_secs(120)));
        let later = (now + chrono::Duration::seconds(30)).to_rfc2822();
        headers.insert(RETRY_AFTER, later.parse().unwrap());
        let d = retry_after(&headers, now).unwrap();
        assert!((29..=30).contains(&d.as_secs()), "{d:?}");
        headers.insert(RETRY_AFTER, "soon".parse().unwrap());
        assert_eq!(retry_after(&headers, now), None);
    }

    #[test]
    fn jitter_stays_within_a_tenth() {
        for _ in 0..100 {
            let d = jitter(Duration::from_secs(100)).as_secs_f64();
            assert!((90.0..=110.0).contains(&d), "{d}");
        }
    }
}
