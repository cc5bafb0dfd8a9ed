//! The HTTP API: `fn router(state) -> Router`. Handlers, problem+json errors, operator auth,
//! the OpenAPI document and Swagger UI live below this module.

use crate::orders::OrderIntake;
use std::sync::Arc;
use std::time::Duration;
use store::{InventoryRepository, OrderRepository};
use workflow::WorkflowPort;

/// An operator bearer token. Never printed: `Debug` shows a placeholder.
#[derive(Clone)]
pub struct OperatorToken(Arc<str>);

impl OperatorToken {
    pub fn new(token: impl Into<Arc<str>>) -> Self {
        OperatorToken(token.into())
    }

    /// The token itself, for the one place that must show it (the start-up banner).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for OperatorToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OperatorToken(***)")
    }
}

/// Limits every request is held to.
#[derive(Debug, Clone)]
pub struct HttpLimits {
    /// The largest request body accepted (413 above).
    pub max_body_bytes: usize,
    /// How long a request may take before it is answered 408/503.
    pub request_timeout: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_body_bytes: 64 * 1024,
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// What the handlers share.
#[derive(Clone)]
pub struct AppState {
    pub orders: Arc<dyn OrderRepository>,
    pub inventory: Arc<dyn InventoryRepository>,
    pub workflow: Arc<dyn WorkflowPort>,
    pub intake: Arc<OrderIntake>,
    pub operator_token: OperatorToken,
    pub limits: HttpLimits,
}
