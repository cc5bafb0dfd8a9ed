//! Webhooks' records: the endpoints clients register, the order events the outbox holds (each
//! written with the status change it reports, in the same write), and the deliveries of those
//! events to endpoints with their attempts. The delivery itself (signing, retries, the guard
//! against private addresses) is the service's: `webhooks/src/`.

use crate::domain::{OrderId, OrderStatus};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// The events a client may subscribe an endpoint to, each a status an order reaches at most
/// once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum EventType {
    #[serde(rename = "order.accepted")]
    Accepted,
    #[serde(rename = "order.awaiting_approval")]
    AwaitingApproval,
    #[serde(rename = "order.completed")]
    Completed,
    #[serde(rename = "order.cancelled")]
    Cancelled,
    #[serde(rename = "order.compensation_failed")]
    CompensationFailed,
}

impl EventType {
    pub const ALL: [EventType; 5] = [
        EventType::Accepted,
        EventType::AwaitingApproval,
        EventType::Completed,
        EventType::Cancelled,
        EventType::CompensationFailed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Accepted => "order.accepted",
            EventType::AwaitingApproval => "order.awaiting_approval",
            EventType::Completed => "order.completed",
            EventType::Cancelled => "order.cancelled",
            EventType::CompensationFailed => "order.compensation_failed",
        }
    }

    pub fn parse(s: &str) -> Option<EventType> {
        EventType::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// The event an order reaching `status` makes, if clients may subscribe to it (the steps
    /// between are in the status stream only).
    pub fn of_status(status: OrderStatus) -> Option<EventType> {
        match status {
            OrderStatus::Accepted => Some(EventType::Accepted),
            OrderStatus::AwaitingApproval => Some(EventType::AwaitingApproval),
            OrderStatus::Completed => Some(EventType::Completed),
            OrderStatus::Cancelled => Some(EventType::Cancelled),
            OrderStatus::CompensationFailed => Some(EventType::CompensationFailed),
            _ => None,
        }
    }
}

/// An order reaching a status, as the outbox holds it. An order reaches each status at most
/// once (statuses only move forward), so (order id, status) names the event for good.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderEvent {
    pub order_id: OrderId,
    /// The principal whose order it is (its webhooks get the event); `None` for orders placed
    /// before principals existed.
    pub owner: Option<String>,
    pub status: OrderStatus,
    pub at: DateTime<Utc>,
    /// The adapter's handle of the event in its outbox (passed back to `dispatch`).
    pub key: String,
}

impl OrderEvent {
    /// The event's id, the same on every attempt and every endpoint: `webhook-id` and the
    /// status stream's event id.
    pub fn message_id(&self) -> String {
        format!(
            "msg_{}.{}",
            self.order_id,
            self.status.as_str().to_lowercase()
        )
    }
}

/// A signing secret of an endpoint: `whsec_` and the base64 of its key bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SigningSecret {
    pub secret: String,
    pub created_at: DateTime<Utc>,
    /// When a rotated-out secret stops signing; `None` for the current one.
    pub expires_at: Option<DateTime<Utc>>,
}

/// Why and when an endpoint stopped receiving.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Disabled {
    pub at: DateTime<Utc>,
    pub reason: String,
}

/// An endpoint a client registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookEndpoint {
    /// `ep_` and random letters.
    pub id: String,
    pub owner: String,
    pub url: String,
    /// The events it wants; every event when empty.
    pub event_types: Vec<EventType>,
    /// The current secret first, then rotated-out ones until they expire.
    pub secrets: Vec<SigningSecret>,
    pub created_at: DateTime<Utc>,
    pub disabled: Option<Disabled>,
    /// Since when every attempt to it failed; cleared by a success.
    pub failing_since: Option<DateTime<Utc>>,
}

impl WebhookEndpoint {
    pub fn wants(&self, event: EventType) -> bool {
        self.disabled.is_none()
            && (self.event_types.is_empty() || self.event_types.contains(&event))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DeliveryState {
    /// To be attempted at `next_attempt_at`.
    Pending,
    /// An attempt got a 2xx.
    Delivered,
    /// Every attempt of the schedule failed, or the endpoint is gone or disabled.
    Failed,
}

impl DeliveryState {
    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Pending => "PENDING",
            DeliveryState::Delivered => "DELIVERED",
            DeliveryState::Failed => "FAILED",
        }
    }

    pub fn parse(s: &str) -> Option<DeliveryState> {
        [
            DeliveryState::Pending,
            DeliveryState::Delivered,
            DeliveryState::Failed,
        ]
        .into_iter()
        .find(|d| d.as_str() == s)
    }
}

/// One attempt to deliver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attempt {
    pub at: DateTime<Utc>,
    /// The endpoint's HTTP status, if it answered.
    pub status: Option<u16>,
    /// What went wrong, if it did (a timeout, a refused connection, a forbidden address).
    pub error: Option<String>,
    pub duration_ms: u64,
}

/// An event on its way to one endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The event's id ([`OrderEvent::message_id`]): `webhook-id`.
    pub message_id: String,
    pub endpoint_id: String,
    pub order_id: OrderId,
    pub event_type: EventType,
    /// The body, exactly as signed and sent.
    pub payload: String,
    /// When the event happened (`webhook-timestamp` is each attempt's own time).
    pub created_at: DateTime<Utc>,
    pub state: DeliveryState,
    /// When the next attempt is due, while `Pending`.
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// Oldest first.
    pub attempts: Vec<Attempt>,
}
