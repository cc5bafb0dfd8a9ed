//! Request bodies checked against the published contract itself: each body is validated with
//! the JSON Schema that `openapi/openapi.json` documents for it (generated from the request
//! types: [`PlaceOrder`], [`StockCount`], [`ApprovalRequest`], [`CancelRequest`],
//! [`IncidentActionRequest`]), so every limit is written once, on the type, and every bad field
//! is reported at once by its JSON pointer; only then is the body deserialized into that same
//! type.

use super::approvals::ApprovalRequest;
use super::cancel::CancelRequest;
use super::incidents::IncidentActionRequest;
use super::inventory::StockCount;
use super::orders::PlaceOrder;
use super::problem::FieldError;
use intake::OrderRequest;
use jsonschema::error::{TypeKind, ValidationErrorKind};
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::OnceLock;
use store::{Decision, Price};
use utoipa::ToSchema;

/// Lines per order. Every line's SKU is written in the reservation's one DynamoDB transaction
/// (at most 100 actions, the reservation record among them), so this stays well below that.
/// (The schema's `maxItems`; a test keeps the two equal.)
pub const MAX_ITEMS: usize = 50;
/// `OrderLine.quantity`'s `maximum`.
pub const MAX_QUANTITY: u64 = 10_000;
/// `OrderLine.unitPriceCents`' and `CatalogPrice.cents`' `maximum`.
pub const MAX_UNIT_PRICE_CENTS: u64 = 100_000_000;
/// `StockCount.available`'s `maximum`.
pub const MAX_AVAILABLE: u64 = 1_000_000_000;
/// `ApprovalRequest.reason`'s `maxLength`.
pub const MAX_REASON_CHARS: usize = 500;

/// The compiled schema of every request body, by its schema's name.
fn validators() -> &'static HashMap<String, jsonschema::Validator> {
    static VALIDATORS: OnceLock<HashMap<String, jsonschema::Validator>> = OnceLock::new();
    VALIDATORS.get_or_init(|| {
        let document = serde_json::to_value(super::openapi::document())
            .expect("the OpenAPI document serializes");
        let components = document["components"].clone();
        [
            PlaceOrder::name(),
            StockCount::name(),
            ApprovalRequest::name(),
            CancelRequest::name(),
            IncidentActionRequest::name(),
            super::webhooks::EndpointRequest::name(),
            super::webhooks::ReplayRequest::name(),
        ]
        .into_iter()
        .map(|name| {
            // The component's schema, with the document's components beside it so that its
            // `$ref`s (`#/components/schemas/…`) resolve.
            let schema = serde_json::json!({
                "$ref": format!("#/components/schemas/{name}"),
                "components": components,
            });
            let validator = jsonschema::draft202012::new(&schema)
                .unwrap_or_else(|e| panic!("the schema of {name} compiles: {e}"));
            (name.into_owned(), validator)
        })
        .collect()
    })
}

/// `body` as a `T`, or every field that breaks `T`'s published schema (one message per field,
/// the first found).
pub fn parse<T: ToSchema + DeserializeOwned>(body: &Value) -> Result<T, Vec<FieldError>> {
    let name = T::name();
    let validator = &validators()[name.as_ref()];
    let mut errors: Vec<FieldError> = Vec::new();
    for error in validator.iter_errors(body) {
        let at = error.instance_path().as_str().to_owned();
        for (field, message) in explain(&at, error.kind()) {
            if !errors.iter().any(|e| e.field == field) {
                errors.push(FieldError::new(field, message));
            }
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    // The schema is generated from `T`, so what it admits deserializes; a mismatch is a bug in
    // the type's annotations, reported on the whole body rather than as a 500.
    serde_json::from_value(body.clone()).map_err(|e| vec![FieldError::new("", e.to_string())])
}

/// The field(s) and message(s) of one schema violation found at `at`.
fn explain(at: &str, kind: &ValidationErrorKind) -> Vec<(String, String)> {
    let one = |message: String| vec![(at.to_owned(), message)];
    match kind {
        ValidationErrorKind::AdditionalProperties { unexpected } => unexpected
            .iter()
            .map(|key| (child(at, key), "is not a known field".to_owned()))
            .collect(),
        ValidationErrorKind::Required { property } => {
            let key = property.as_str().unwrap_or_default();
            vec![(child(at, key), "is required".to_owned())]
        }
        ValidationErrorKind::Type { kind } => one(format!("must be {}", type_name(kind))),
        ValidationErrorKind::MinLength { limit } => {
            one(format!("must be at least {limit} characters"))
        }
        ValidationErrorKind::MaxLength { limit } => {
            one(format!("must be at most {limit} characters"))
        }
        ValidationErrorKind::Pattern { pattern } if pattern == NO_CONTROL_CHARACTERS => {
            one("must not contain control characters".to_owned())
        }
        ValidationErrorKind::Pattern { pattern } => one(format!("must match {pattern}")),
        ValidationErrorKind::Minimum { limit } => one(format!("must be at least {limit}")),
        ValidationErrorKind::Maximum { limit } => one(format!("must be at most {limit}")),
        ValidationErrorKind::MinItems { limit } => one(format!("must have at least {limit} items")),
        ValidationErrorKind::MaxItems { limit } => one(format!("must have at most {limit} items")),
        ValidationErrorKind::Enum { options } => one(format!("must be one of {options}")),
        ValidationErrorKind::MinProperties { .. } => {
            one("must set at least one of its fields".to_owned())
        }
        other => one(format!("is invalid ({})", other.keyword())),
    }
}

/// The pattern of free text: any characters but control characters (Unicode `Cc`).
const NO_CONTROL_CHARACTERS: &str = "^[^\\u0000-\\u001F\\u007F-\\u009F]+$";

fn type_name(kind: &TypeKind) -> String {
    use jsonschema::JsonType;
    let one = |t: JsonType| match t {
        JsonType::Array => "an array",
        JsonType::Boolean => "a boolean",
        JsonType::Integer => "an integer",
        JsonType::Null => "null",
        JsonType::Number => "a number",
        JsonType::Object => "an object",
        JsonType::String => "a string",
    };
    match kind {
        TypeKind::Single(t) => one(*t).to_owned(),
        TypeKind::Multiple(types) => types.iter().map(one).collect::<Vec<_>>().join(" or "),
    }
}

/// `pointer` + `/key`, escaped as RFC 6901 says.
fn child(pointer: &str, key: &str) -> String {
    format!("{pointer}/{}", key.replace('~', "~0").replace('/', "~1"))
}

/// The `after` query parameter of a queue's page: the `next` a page of `queue` gave, parsed;
/// `None` when absent or (with an error) of another shape.
pub fn queue_cursor(
    raw: Option<&str>,
    queue: &str,
    errors: &mut Vec<FieldError>,
) -> Option<store::QueueCursor> {
    let cursor = store::QueueCursor::parse(raw?);
    if cursor.is_none() {
        errors.push(FieldError::new(
            "after",
            format!("must be the `next` of a page of {queue}"),
        ));
    }
    cursor
}

/// An integer query parameter in `min..=max`, written `7` or `7.0`; `None` when absent.
pub fn query_integer(
    name: &str,
    raw: Option<&str>,
    min: u64,
    max: u64,
    errors: &mut Vec<FieldError>,
) -> Option<u64> {
    let raw = raw?;
    let (int, fraction) = raw.split_once('.').unwrap_or((raw, "0"));
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let n = int
        .parse::<u64>()
        .ok()
        .filter(|_| digits(int) && digits(fraction) && fraction.bytes().all(|b| b == b'0'));
    match n {
        Some(n) if (min..=max).contains(&n) => Some(n),
        _ => {
            errors.push(FieldError::new(
                name,
                format!("must be an integer from {min} to {max}"),
            ));
            None
        }
    }
}

/// A SKU in a path: 1–64 characters of `[A-Za-z0-9_.-]` (`OrderLine.sku`'s schema; a test
/// keeps the two equal).
pub fn sku_error(s: &str) -> Option<&'static str> {
    let ok = !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    (!ok).then_some("must be 1 to 64 characters of letters, digits, '_', '.' and '-'")
}

/// The body of `POST /orders`.
pub fn order_request(body: &Value) -> Result<OrderRequest, Vec<FieldError>> {
    // Not required by the schema (the `Idempotency-Key` header may carry it, see
    // `orders::with_idempotency_key`), but one of the two must.
    let missing_id = body.is_object() && body.get("orderId").is_none();
    let required = || {
        FieldError::new(
            "/orderId",
            "is required (in the body, or as the Idempotency-Key header)",
        )
    };
    match parse::<PlaceOrder>(body) {
        Err(mut errors) => {
            if missing_id {
                errors.insert(0, required());
            }
            Err(errors)
        }
        Ok(_) if missing_id => Err(vec![required()]),
        Ok(order) => order
            .try_into()
            .map_err(|message: String| vec![FieldError::new("/orderId", message)]),
    }
}

/// The body of `POST /orders/{orderId}/approval`.
pub fn approval_decision(body: &Value) -> Result<(Decision, Option<String>), Vec<FieldError>> {
    let request = parse::<ApprovalRequest>(body)?;
    Ok((request.decision.into(), request.reason))
}

/// What `PUT /inventory/{sku}` sets: the available quantity, the catalog price, or both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StockChange {
    pub available: Option<u64>,
    pub price: Option<Price>,
}

/// The body of `PUT /inventory/{sku}`: `available`, `price` (`cents` and `currency`), or both.
pub fn stock_change(body: &Value) -> Result<StockChange, Vec<FieldError>> {
    let count = parse::<StockCount>(body)?;
    Ok(StockChange {
        available: count.available,
        price: count.price.map(|p| Price {
            cents: p.cents,
            currency: p.currency,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use intake::numbers::whole_number;
    use serde_json::json;

    fn valid() -> Value {
        json!({
            "orderId": "o-1",
            "customerId": "cus_1",
            "items": [{"sku": "book", "quantity": 2, "unitPriceCents": 1250}],
            "currency": "EUR",
            "paymentMethod": "pm_card_visa",
            "shippingAddress": {
                "name": "Ada", "line1": "1 Way", "city": "London",
                "postalCode": "10115", "country": "GB"
            }
        })
    }

    fn fields(body: &Value) -> Vec<String> {
        order_request(body)
            .unwrap_err()
            .into_iter()
            .map(|e| e.field)
            .collect()
    }

    #[test]
    fn a_valid_order_becomes_a_request() {
        let r = order_request(&valid()).unwrap();
        assert_eq!(r.order_id.as_str(), "o-1");
        assert_eq!(r.items[0].quantity, 2);
        assert_eq!(r.shipping_address.country, "GB");
    }

    #[test]
    fn every_bad_field_is_named_by_its_pointer() {
        let mut body = valid();
        body["orderId"] = json!("a/b");
        body["items"][0]["quantity"] = json!("2");
        body["items"][0]["unitPriceCents"] = json!(-1);
        body["currency"] = json!("eur");
        body["shippingAddress"]["country"] = json!("GBR");
        body["extra"] = json!(1);
        let mut got = fields(&body);
        got.sort();
        assert_eq!(
            got,
            [
                "/currency",
                "/extra",
                "/items/0/quantity",
                "/items/0/unitPriceCents",
                "/orderId",
                "/shippingAddress/country"
            ]
        );
    }

    #[test]
    fn missing_fields_and_wrong_shapes_are_errors() {
        assert_eq!(fields(&json!([])), [""]);
        // Every one of the six fields of an order is required (the id may come in a header,
        // but without it the body must carry one).
        assert_eq!(fields(&json!({})).len(), 6);
        let mut body = valid();
        body.as_object_mut().unwrap().remove("orderId");
        assert_eq!(fields(&body), ["/orderId"]);
        let mut body = valid();
        body["items"] = json!([]);
        assert_eq!(fields(&body), ["/items"]);
        body["items"] = json!([{"sku": "a"}, 3]);
        assert_eq!(fields(&body), ["/items/0/quantity", "/items/1"]);
        let mut body = valid();
        body["items"][0]["quantity"] = json!(1.5);
        body["customerId"] = json!("a\u{7}b");
        body["shippingAddress"]["city"] = json!("");
        assert_eq!(
            fields(&body),
            ["/customerId", "/items/0/quantity", "/shippingAddress/city"]
        );
    }

    #[test]
    fn limits_are_inclusive() {
        let mut body = valid();
        body["items"][0]["quantity"] = json!(MAX_QUANTITY);
        body["items"][0]["unitPriceCents"] = json!(MAX_UNIT_PRICE_CENTS);
        body["orderId"] = json!("x".repeat(80));
        assert!(order_request(&body).is_ok());
        body["items"][0]["quantity"] = json!(MAX_QUANTITY + 1);
        body["items"][0]["unitPriceCents"] = json!(MAX_UNIT_PRICE_CENTS + 1);
        body["orderId"] = json!("x".repeat(81));
        assert_eq!(fields(&body).len(), 3);
    }

    #[test]
    fn decisions_and_stock_counts_are_validated() {
        assert_eq!(
            approval_decision(&json!({"decision": "approve"})).unwrap(),
            (Decision::Approve, None)
        );
        assert_eq!(
            approval_decision(&json!({"decision": "reject", "reason": "fraud"})).unwrap(),
            (Decision::Reject, Some("fraud".to_owned()))
        );
        assert_eq!(
            approval_decision(&json!({"decision": "maybe", "x": 1}))
                .unwrap_err()
                .len(),
            2
        );
        let count = |available| StockChange {
            available: Some(available),
            price: None,
        };
        assert_eq!(stock_change(&json!({"available": 7})).unwrap(), count(7));
        assert!(stock_change(&json!({"available": -1})).is_err());
        assert!(sku_error("a.b-c_1").is_none() && sku_error("a b").is_some());
    }

    #[test]
    fn whole_numbers_may_be_written_with_a_zero_fraction() {
        for (v, n) in [
            (json!(7), 7),
            (json!(7.0), 7),
            (json!(0.0), 0),
            (json!(-0.0), 0),
        ] {
            assert_eq!(whole_number(&v), Some(n), "{v}");
        }
        for v in [
            json!(1.5),
            json!(-1),
            json!(-1.0),
            json!(1e300),
            json!("7"),
            json!(null),
        ] {
            assert_eq!(whole_number(&v), None, "{v}");
        }
        assert_eq!(
            stock_change(&json!({"available": 30785.0}))
                .unwrap()
                .available,
            Some(30785)
        );
        let mut body = valid();
        body["items"][0]["quantity"] = json!(2.0);
        body["items"][0]["unitPriceCents"] = json!(1250.0);
        assert_eq!(
            order_request(&body).unwrap().items[0].unit_price_cents,
            Some(1250)
        );
    }

    #[test]
    fn a_line_may_leave_out_its_price() {
        let mut body = valid();
        body["items"][0]
            .as_object_mut()
            .unwrap()
            .remove("unitPriceCents");
        assert_eq!(
            order_request(&body).unwrap().items[0].unit_price_cents,
            None
        );
    }

    #[test]
    fn a_price_has_cents_and_a_currency_and_a_change_sets_something() {
        let eur = |cents| Price {
            cents,
            currency: "EUR".to_owned(),
        };
        assert_eq!(
            stock_change(&json!({"price": {"cents": 2500, "currency": "EUR"}})).unwrap(),
            StockChange {
                available: None,
                price: Some(eur(2500))
            }
        );
        assert_eq!(
            stock_change(&json!({"available": 3, "price": {"cents": 0, "currency": "EUR"}}))
                .unwrap(),
            StockChange {
                available: Some(3),
                price: Some(eur(0))
            }
        );
        // The fields named, in no particular order.
        let fields = |body: Value| -> Vec<String> {
            let mut fields: Vec<String> = stock_change(&body)
                .unwrap_err()
                .into_iter()
                .map(|e| e.field)
                .collect();
            fields.sort();
            fields
        };
        assert_eq!(fields(json!({"price": {"cents": 1}})), ["/price/currency"]);
        assert_eq!(
            fields(json!({"price": {"currency": "EUR"}})),
            ["/price/cents"]
        );
        assert_eq!(fields(json!({"price": 100})), ["/price"]);
        assert_eq!(fields(json!({})), [""]);
        assert_eq!(
            fields(json!({"price": {"cents": 100_000_001, "currency": "eur", "x": 1}})),
            ["/price/cents", "/price/currency", "/price/x"]
        );
    }

    #[test]
    fn the_published_limits_are_the_schemas() {
        let doc = serde_json::to_value(crate::http::openapi::document()).unwrap();
        let schemas = &doc["components"]["schemas"];
        let property = |schema: &str, field: &str| schemas[schema]["properties"][field].clone();
        assert_eq!(property("PlaceOrder", "items")["maxItems"], MAX_ITEMS);
        assert_eq!(property("OrderLine", "quantity")["maximum"], MAX_QUANTITY);
        assert_eq!(
            property("OrderLine", "unitPriceCents")["maximum"],
            MAX_UNIT_PRICE_CENTS
        );
        assert_eq!(
            property("CatalogPrice", "cents")["maximum"],
            MAX_UNIT_PRICE_CENTS
        );
        assert_eq!(
            property("StockCount", "available")["maximum"],
            MAX_AVAILABLE
        );
        assert_eq!(
            property("ApprovalRequest", "reason")["maxLength"],
            MAX_REASON_CHARS
        );
    }

    #[test]
    fn a_sku_in_a_path_is_judged_as_in_an_order() {
        let long = "x".repeat(64);
        let too_long = "x".repeat(65);
        for sku in ["book", "a.b-c_1", "", "a b", "é", "a/b", &long, &too_long] {
            let mut body = valid();
            body["items"][0]["sku"] = json!(sku);
            assert_eq!(
                sku_error(sku).is_none(),
                order_request(&body).is_ok(),
                "{sku:?}"
            );
        }
    }

    #[test]
    fn integer_query_parameters_are_parsed_and_bounded() {
        let mut errors = Vec::new();
        let mut q = |raw| query_integer("maxResults", raw, 1, 1000, &mut errors);
        assert_eq!(q(None), None);
        assert_eq!(q(Some("7")), Some(7));
        assert_eq!(q(Some("7.0")), Some(7));
        assert_eq!(q(Some("1000.00")), Some(1000));
        for bad in [
            "0",
            "1001",
            "1.5",
            "7.",
            "+7",
            "ten",
            "-1",
            "",
            "1e2",
            "99999999999999999999",
        ] {
            assert_eq!(q(Some(bad)), None, "{bad}");
        }
        assert_eq!(errors.len(), 10);
        assert!(errors.iter().all(|e| e.field == "maxResults"));
    }

    mod round_trip {
        use super::super::order_request;
        use intake::OrderRequest;
        use intake::pricing::RequestedLine;
        use proptest::prelude::*;
        use store::{Address, OrderId};

        fn text(max: usize) -> impl Strategy<Value = String> {
            proptest::string::string_regex(&format!("[a-zA-Z0-9 éü€_.-]{{1,{max}}}")).unwrap()
        }

        fn request() -> impl Strategy<Value = OrderRequest> {
            let price = proptest::option::of(0u64..=100_000_000);
            let item = ("[A-Za-z0-9_.-]{1,64}", 1u32..=10_000, price).prop_map(
                |(sku, quantity, unit_price_cents)| RequestedLine {
                    sku,
                    quantity,
                    unit_price_cents,
                },
            );
            let address = (text(200), text(200), text(200), text(200), "[A-Z]{2}").prop_map(
                |(name, line1, city, postal_code, country)| Address {
                    name,
                    line1,
                    city,
                    postal_code,
                    country,
                },
            );
            (
                "[A-Za-z0-9_-]{1,80}",
                text(80),
                proptest::collection::vec(item, 1..=super::MAX_ITEMS),
                "[A-Z]{3}",
                text(100),
                address,
            )
                .prop_map(
                    |(id, customer_id, items, currency, payment_method, address)| OrderRequest {
                        order_id: OrderId::parse(&id).unwrap(),
                        customer_id,
                        items,
                        currency,
                        payment_method,
                        shipping_address: address,
                    },
                )
        }

        fn any_json() -> impl Strategy<Value = serde_json::Value> {
            let leaf = prop_oneof![
                Just(serde_json::Value::Null),
                any::<bool>().prop_map(serde_json::Value::from),
                any::<i64>().prop_map(serde_json::Value::from),
                any::<f64>().prop_map(serde_json::Value::from),
                ".{0,10}".prop_map(serde_json::Value::from),
            ];
            leaf.prop_recursive(3, 32, 6, |inner| {
                prop_oneof![
                    proptest::collection::vec(inner.clone(), 0..4)
                        .prop_map(serde_json::Value::from),
                    proptest::collection::btree_map(
                        prop_oneof![
                            Just("orderId".to_owned()),
                            Just("items".to_owned()),
                            ".{0,6}".prop_map(String::from)
                        ],
                        inner,
                        0..6,
                    )
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
                ]
            })
        }

        proptest! {
            /// Every request within the limits, as JSON, validates back to itself.
            #[test]
            fn valid_requests_validate_to_themselves(request in request()) {
                let json = serde_json::to_value(&request).unwrap();
                prop_assert_eq!(order_request(&json).unwrap(), request);
            }

            /// Whatever JSON comes, validation answers (a request or named fields), never panics.
            #[test]
            fn any_json_gets_an_answer(json in any_json()) {
                if let Err(errors) = order_request(&json) {
                    prop_assert!(!errors.is_empty());
                }
            }
        }
    }
}
