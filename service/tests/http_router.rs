//! The HTTP API through its router, without a socket, on the real stack (embedded engine, SQLite
//! store, saga workers): one test per endpoint and per error, every error as problem+json.

#[path = "http_router/app.rs"]
mod app;
#[path = "http_router/broken.rs"]
mod broken;
#[path = "http_router/counting.rs"]
mod counting;

#[path = "http_router/approvals.rs"]
mod approvals;
#[path = "http_router/broken_backends.rs"]
mod broken_backends;
#[path = "http_router/console.rs"]
mod console;
#[path = "http_router/cross_cutting.rs"]
mod cross_cutting;
#[path = "http_router/incidents.rs"]
mod incidents;
#[path = "http_router/inventory.rs"]
mod inventory;
#[path = "http_router/orders.rs"]
mod orders;
#[path = "http_router/service.rs"]
mod service;
#[path = "http_router/status.rs"]
mod status;

use api::http::HttpLimits;
use app::{App, PROBLEM_JSON, TOKEN, large, order, send, small};
use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use broken::{Broken, SECRET};
use counting::{CountingPayments, CountingWorkflow};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use store::{OrderId, OrderStatus};
use workflow::SagaSettings;
