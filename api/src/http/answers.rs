//! The error answers that several operations share, each declared once for the OpenAPI document:
//! a handler names the ones it can give (`responses(..., answers::Unauthorized, ...)`) and keeps
//! its own row only where it says something specific to it. Each is a [`Problem`] as
//! `application/problem+json`; the types are never built, they only carry the documentation.

#![allow(
    dead_code,
    reason = "never built: each answer's field only names its body for the document"
)]

use super::problem::{PROBLEM_JSON, Problem};
use std::collections::BTreeMap;
use utoipa::IntoResponses;
use utoipa::openapi::{ContentBuilder, HeaderBuilder, Ref, RefOr, ResponseBuilder, Type};

/// Every operation that takes an API key.
#[derive(IntoResponses)]
#[response(
    status = 401,
    description = "No API key, or an unknown or revoked one (`unauthorized`)",
    content_type = PROBLEM_JSON,
    headers(("WWW-Authenticate" = String, description = "`Bearer`"))
)]
pub struct Unauthorized(Problem);

/// The operator's operations, asked with a client's key.
#[derive(IntoResponses)]
#[response(
    status = 403,
    description = "A client's key: this is for operators (`forbidden`)",
    content_type = PROBLEM_JSON
)]
pub struct Forbidden(Problem);

/// Every operation that reads the store or the workflow service.
#[derive(IntoResponses)]
#[response(
    status = 503,
    description = "A backend is unavailable",
    content_type = PROBLEM_JSON
)]
pub struct ServiceUnavailable(Problem);

/// An operation that takes a JSON body (the `JsonBody` extractor).
#[derive(IntoResponses)]
#[response(
    status = 400,
    description = "The body is not JSON",
    content_type = PROBLEM_JSON
)]
pub struct MalformedJson(Problem);

/// An operation that takes a body, read under the server's body read timeout.
#[derive(IntoResponses)]
#[response(
    status = 408,
    description = "The body did not arrive within the read timeout (`body-timeout`); the connection is closed",
    content_type = PROBLEM_JSON
)]
pub struct BodyTimeout(Problem);

/// An operation that takes a body, past the body-size limit.
#[derive(IntoResponses)]
#[response(
    status = 413,
    description = "The body is too large",
    content_type = PROBLEM_JSON
)]
pub struct PayloadTooLarge(Problem);

/// An operation that takes a JSON body, sent as another media type.
#[derive(IntoResponses)]
#[response(
    status = 415,
    description = "The body is not `application/json`",
    content_type = PROBLEM_JSON
)]
pub struct UnsupportedMediaType(Problem);

/// A body whose fields fail validation, where no more needs saying.
#[derive(IntoResponses)]
#[response(
    status = 422,
    description = "Invalid fields, each listed in `errors`",
    content_type = PROBLEM_JSON
)]
pub struct ValidationFailed(Problem);

/// A page of a list paged by `limit` and `after`.
#[derive(IntoResponses)]
#[response(
    status = 400,
    description = "Invalid `limit` or `after`",
    content_type = PROBLEM_JSON
)]
pub struct InvalidPage(Problem);

/// An operator's operation on an order (`find_order`: every order is the operator's).
#[derive(IntoResponses)]
#[response(
    status = 404,
    description = "No such order (`order-not-found`)",
    content_type = PROBLEM_JSON
)]
pub struct OrderNotFound(Problem);

/// A caller's operation on an order (`find_own_order`: another client's order is not found).
#[derive(IntoResponses)]
#[response(
    status = 404,
    description = "No such order, or another client's (`order-not-found`)",
    content_type = PROBLEM_JSON
)]
pub struct OwnOrderNotFound(Problem);

/// An operation on one of the caller's webhook endpoints.
#[derive(IntoResponses)]
#[response(
    status = 404,
    description = "No such endpoint of the caller's (`webhook-endpoint-not-found`)",
    content_type = PROBLEM_JSON
)]
pub struct EndpointNotFound(Problem);

/// Every operation that takes an API key; the document adds it to each of them (the `openapi`
/// module's modifier) rather than each handler naming it. Written out because the derive cannot
/// give `Retry-After` a bare `integer` schema.
pub struct RateLimited;

impl IntoResponses for RateLimited {
    fn responses() -> BTreeMap<String, RefOr<utoipa::openapi::Response>> {
        let response = ResponseBuilder::new()
            .description(
                "Past the key's rate limit, or too many failed authentications from this address (`rate-limited`); retry after `Retry-After`",
            )
            .header(
                "Retry-After",
                HeaderBuilder::new()
                    .schema(utoipa::openapi::schema::Object::with_type(Type::Integer))
                    .description(Some("Seconds to wait before the next request"))
                    .build(),
            )
            .content(
                PROBLEM_JSON,
                ContentBuilder::new()
                    .schema(Some(Ref::from_schema_name("Problem")))
                    .build(),
            )
            .build();
        BTreeMap::from([("429".to_owned(), response.into())])
    }
}
