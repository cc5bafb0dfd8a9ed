//! The OpenAPI 3.1 document, generated from the handlers' and DTOs' annotations. The generator
//! writes [`document`] to `openapi/openapi.json`; the service serves it at `/openapi.json` and
//! Swagger UI (vendored assets) at `/docs`.

use super::problem::{FieldError, Problem, ProblemKind};
use super::{
    answers, approvals, cancel, events, health, incidents, inventory, listing, orders, webhooks,
};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use std::sync::OnceLock;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{IntoResponses, Modify, OpenApi};

/// The name of the API keys' bearer security scheme (clients' and operators' keys alike).
pub const API_KEY_SCHEME: &str = "apiKey";

struct Security;

impl Modify for Security {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            API_KEY_SCHEME,
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "An API key (`Authorization: Bearer fk_…`) from `fulfillment keys create`: \
                         a client's (its own orders) or an operator's (everything); \
                         `--operator-token` is an operator key too",
                    ))
                    .build(),
            ),
        );
    }
}

/// `429` on every operation that takes an API key: each key has a rate limit, and an address
/// guessing keys is throttled (see `rate_limit`). The answer is [`answers::RateLimited`].
struct RateLimits;

impl Modify for RateLimits {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let limited = answers::RateLimited::responses();
        for item in openapi.paths.paths.values_mut() {
            let operations = [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.patch,
            ];
            for operation in operations.into_iter().flatten() {
                if operation.security.as_ref().is_some_and(|s| !s.is_empty()) {
                    operation.responses.responses.extend(limited.clone());
                }
            }
        }
    }
}

/// `StockCount` sets at least one of its fields: `minProperties: 1`. (utoipa 5.5's derive
/// writes `min_properties` on a struct as `maxProperties`, so it is set here.)
struct StockCountSetsSomething;

impl Modify for StockCountSetsSomething {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::{RefOr, Schema};
        let schemas = openapi.components.as_mut().map(|c| &mut c.schemas);
        if let Some(RefOr::T(Schema::Object(object))) =
            schemas.and_then(|s| s.get_mut("StockCount"))
        {
            object.min_properties = Some(1);
            object.max_properties = None;
        }
    }
}

/// Lists every problem type in the description of the `Problem` schema's `type`.
struct ProblemTypes;

impl Modify for ProblemTypes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let list: Vec<String> = ProblemKind::ALL
            .iter()
            .map(|k| {
                format!(
                    "- `{}` ({}): {}",
                    k.type_uri(),
                    k.status().as_u16(),
                    k.title()
                )
            })
            .collect();
        let info = &mut openapi.info;
        let description = info.description.take().unwrap_or_default();
        info.description = Some(format!(
            "{description}\n\nErrors are `application/problem+json` (RFC 9457). Problem types:\n\n{}",
            list.join("\n")
        ));
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "fulfillment",
        description = "Order fulfillment as durable sagas: place an order, watch its saga, decide approvals, keep stock.",
        license(name = "Apache-2.0", identifier = "Apache-2.0"),
    ),
    paths(
        health::index,
        orders::place,
        listing::list,
        orders::get_order,
        orders::status,
        orders::history,
        cancel::cancel,
        events::stream,
        webhooks::create,
        webhooks::list,
        webhooks::get,
        webhooks::delete,
        webhooks::rotate,
        webhooks::enable,
        webhooks::deliveries,
        webhooks::replay,
        approvals::decide_approval,
        approvals::pending,
        incidents::list,
        incidents::redrive,
        incidents::resolve,
        inventory::put_stock,
        inventory::get_stock,
        inventory::list_stock,
        health::healthz,
        health::readyz,
        health::metrics,
        openapi_json,
    ),
    components(schemas(Problem, FieldError)),
    modifiers(&Security, &RateLimits, &StockCountSetsSomething, &ProblemTypes),
    tags(
        (name = "orders", description = "Placing orders and watching their sagas"),
        (name = "operator", description = "Operator actions (bearer token)"),
        (name = "inventory", description = "Stock levels"),
        (name = "webhooks", description = "Webhook endpoints, signed as Standard Webhooks 1.0 specifies, and their delivery logs"),
        (name = "service", description = "Health, readiness, metrics and this document"),
    )
)]
struct ApiDoc;

/// The service's OpenAPI document.
pub fn document() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

fn document_json() -> &'static str {
    static JSON: OnceLock<String> = OnceLock::new();
    JSON.get_or_init(|| document().to_pretty_json().unwrap_or_default())
}

/// This document.
#[utoipa::path(
    get,
    path = "/openapi.json",
    operation_id = "openapi",
    tag = "service",
    responses((status = 200, description = "The OpenAPI 3.1 document", body = Object, content_type = "application/json"))
)]
pub async fn openapi_json() -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        document_json(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_document_is_openapi_3_1() {
        let json = serde_json::to_value(super::document()).unwrap();
        assert!(json["openapi"].as_str().unwrap().starts_with("3.1"));
        assert!(json["components"]["securitySchemes"]["apiKey"].is_object());
    }

    #[test]
    fn a_stock_change_sets_at_least_one_field() {
        let json = serde_json::to_value(super::document()).unwrap();
        let schema = &json["components"]["schemas"]["StockCount"];
        assert_eq!(schema["minProperties"], 1, "{schema}");
        assert!(schema.get("maxProperties").is_none(), "{schema}");
    }

    #[test]
    fn every_operation_with_a_key_may_be_rate_limited_and_no_other() {
        let json = serde_json::to_value(super::document()).unwrap();
        for (path, item) in json["paths"].as_object().unwrap() {
            for (method, operation) in item.as_object().unwrap() {
                let secured = operation["security"]
                    .as_array()
                    .is_some_and(|s| !s.is_empty());
                let limited = &operation["responses"]["429"];
                assert_eq!(limited.is_object(), secured, "{method} {path}");
                if secured {
                    assert!(
                        limited["headers"]["Retry-After"].is_object(),
                        "{method} {path}"
                    );
                }
            }
        }
    }
}
