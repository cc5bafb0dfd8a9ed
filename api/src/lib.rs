//! The HTTP API: the routes, handlers and extractors, problem+json errors, the request and
//! answer types that make the OpenAPI contract, and API keys (their text, hash and checks).
//! The binary that serves it, with everything else it composes, is the `service` crate.

pub mod http;
pub mod keys;
