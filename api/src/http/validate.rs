//! Request bodies validated by hand from JSON values, so every bad field is reported at once and
//! by its JSON pointer: a missing field, a wrong type, a value out of range, an unknown field.

use super::problem::FieldError;
use crate::intake::OrderRequest;
use crate::pricing::RequestedLine;
use serde_json::{Map, Value};
use store::{Address, Decision, OrderId, Price};

/// Lines per order. Every line's SKU is written in the reservation's one DynamoDB transaction
/// (at most 100 actions, the reservation record among them), so this stays well below that.
pub const MAX_ITEMS: usize = 50;
pub const MAX_QUANTITY: u64 = 10_000;
pub const MAX_UNIT_PRICE_CENTS: u64 = 100_000_000;
pub const MAX_AVAILABLE: u64 = 1_000_000_000;
pub const MAX_REASON_CHARS: usize = 500;

/// Collects the errors of one body.
#[derive(Default)]
struct Errors(Vec<FieldError>);

impl Errors {
    fn add(&mut self, field: &str, message: impl Into<String>) {
        self.0.push(FieldError::new(field, message));
    }

    /// The object at `pointer`, checking that it has only `allowed` keys.
    fn object<'v>(
        &mut self,
        pointer: &str,
        value: &'v Value,
        allowed: &[&str],
    ) -> Option<&'v Map<String, Value>> {
        let Some(object) = value.as_object() else {
            self.add(pointer, "must be an object");
            return None;
        };
        for key in object.keys() {
            if !allowed.contains(&key.as_str()) {
                self.add(&child(pointer, key), "is not a known field");
            }
        }
        Some(object)
    }

    /// A required member of an object, or an error.
    fn member<'v>(
        &mut self,
        pointer: &str,
        object: &'v Map<String, Value>,
        key: &str,
    ) -> Option<(String, &'v Value)> {
        let at = child(pointer, key);
        match object.get(key) {
            Some(v) => Some((at, v)),
            None => {
                self.add(&at, "is required");
                None
            }
        }
    }

    /// A string of `min..=max` characters without control characters.
    fn text(&mut self, at: &str, value: &Value, min: usize, max: usize) -> Option<String> {
        let Some(s) = value.as_str() else {
            self.add(at, "must be a string");
            return None;
        };
        let n = s.chars().count();
        if n < min || n > max {
            self.add(at, format!("must be {min} to {max} characters"));
            None
        } else if s.chars().any(char::is_control) {
            self.add(at, "must not contain control characters");
            None
        } else {
            Some(s.to_owned())
        }
    }

    /// A string of exactly `len` ASCII uppercase letters.
    fn code(&mut self, at: &str, value: &Value, len: usize, what: &str) -> Option<String> {
        let Some(s) = value.as_str() else {
            self.add(at, "must be a string");
            return None;
        };
        if s.len() == len && s.bytes().all(|b| b.is_ascii_uppercase()) {
            Some(s.to_owned())
        } else {
            self.add(at, format!("must be {len} uppercase letters ({what})"));
            None
        }
    }

    /// An integer in `min..=max`: a whole JSON number, written `7` or `7.0` (a fraction, a
    /// string or a negative number is an error).
    fn integer(&mut self, at: &str, value: &Value, min: u64, max: u64) -> Option<u64> {
        match whole_number(value) {
            Some(n) if (min..=max).contains(&n) => Some(n),
            _ => {
                self.add(at, format!("must be an integer from {min} to {max}"));
                None
            }
        }
    }
}

/// The largest whole number every `f64` below it represents exactly (2^53).
const MAX_EXACT_FLOAT: f64 = 9_007_199_254_740_992.0;

/// A JSON number that is a non-negative integer. JSON Schema counts a number whose fraction is
/// zero as an integer, so `30785.0` is `30785`; `1.5`, `-1` and numbers beyond 2^53 written
/// with a fraction or an exponent are not.
pub fn whole_number(value: &Value) -> Option<u64> {
    value.as_u64().or_else(|| {
        let f = value.as_f64()?;
        (f.fract() == 0.0 && (0.0..=MAX_EXACT_FLOAT).contains(&f)).then_some(f as u64)
    })
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

/// `pointer` + `/key`, escaped as RFC 6901 says.
fn child(pointer: &str, key: &str) -> String {
    format!("{pointer}/{}", key.replace('~', "~0").replace('/', "~1"))
}

/// A SKU: 1–64 characters of `[A-Za-z0-9_.-]`.
pub fn sku_error(s: &str) -> Option<&'static str> {
    let ok = !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    (!ok).then_some("must be 1 to 64 characters of letters, digits, '_', '.' and '-'")
}

const ORDER_FIELDS: &[&str] = &[
    "orderId",
    "customerId",
    "items",
    "currency",
    "paymentMethod",
    "shippingAddress",
];
const ITEM_FIELDS: &[&str] = &["sku", "quantity", "unitPriceCents"];
const ADDRESS_FIELDS: &[&str] = &["name", "line1", "city", "postalCode", "country"];

/// The body of `POST /orders`.
pub fn order_request(body: &Value) -> Result<OrderRequest, Vec<FieldError>> {
    let mut e = Errors::default();
    let Some(o) = e.object("", body, ORDER_FIELDS) else {
        return Err(e.0);
    };
    let order_id = e
        .member("", o, "orderId")
        .and_then(|(at, v)| match v.as_str() {
            None => {
                e.add(&at, "must be a string");
                None
            }
            Some(s) => OrderId::parse(s).map_err(|m| e.add(&at, m)).ok(),
        });
    let customer_id = e
        .member("", o, "customerId")
        .and_then(|(at, v)| e.text(&at, v, 1, 80));
    let items = e
        .member("", o, "items")
        .and_then(|(at, v)| items(&mut e, &at, v));
    let currency = e
        .member("", o, "currency")
        .and_then(|(at, v)| e.code(&at, v, 3, "ISO 4217"));
    let payment_method = e
        .member("", o, "paymentMethod")
        .and_then(|(at, v)| e.text(&at, v, 1, 100));
    let shipping_address = e
        .member("", o, "shippingAddress")
        .and_then(|(at, v)| address(&mut e, &at, v));
    match (
        order_id,
        customer_id,
        items,
        currency,
        payment_method,
        shipping_address,
    ) {
        (Some(order_id), Some(customer_id), Some(items), Some(currency), Some(pm), Some(addr))
            if e.0.is_empty() =>
        {
            Ok(OrderRequest {
                order_id,
                customer_id,
                items,
                currency,
                payment_method: pm,
                shipping_address: addr,
            })
        }
        _ => Err(e.0),
    }
}

fn items(e: &mut Errors, at: &str, value: &Value) -> Option<Vec<RequestedLine>> {
    let Some(list) = value.as_array() else {
        e.add(at, "must be an array");
        return None;
    };
    if list.is_empty() || list.len() > MAX_ITEMS {
        e.add(at, format!("must have 1 to {MAX_ITEMS} items"));
        return None;
    }
    let mut items = Vec::with_capacity(list.len());
    for (i, item) in list.iter().enumerate() {
        let at = format!("{at}/{i}");
        let Some(o) = e.object(&at, item, ITEM_FIELDS) else {
            continue;
        };
        let sku = e
            .member(&at, o, "sku")
            .and_then(|(at, v)| match v.as_str() {
                None => {
                    e.add(&at, "must be a string");
                    None
                }
                Some(s) => match sku_error(s) {
                    Some(m) => {
                        e.add(&at, m);
                        None
                    }
                    None => Some(s.to_owned()),
                },
            });
        let quantity = e
            .member(&at, o, "quantity")
            .and_then(|(at, v)| e.integer(&at, v, 1, MAX_QUANTITY));
        // Optional: the price the caller expects, checked against the catalog's.
        let price = match o.get("unitPriceCents") {
            None => Some(None),
            Some(v) => {
                let at = child(&at, "unitPriceCents");
                e.integer(&at, v, 0, MAX_UNIT_PRICE_CENTS).map(Some)
            }
        };
        if let (Some(sku), Some(quantity), Some(unit_price_cents)) = (sku, quantity, price) {
            items.push(RequestedLine {
                sku,
                quantity: quantity as u32,
                unit_price_cents,
            });
        }
    }
    (items.len() == list.len()).then_some(items)
}

fn address(e: &mut Errors, at: &str, value: &Value) -> Option<Address> {
    let o = e.object(at, value, ADDRESS_FIELDS)?;
    let mut line = |key: &str| {
        e.member(at, o, key)
            .and_then(|(at, v)| e.text(&at, v, 1, 200))
    };
    let name = line("name");
    let line1 = line("line1");
    let city = line("city");
    let postal_code = line("postalCode");
    let country = e
        .member(at, o, "country")
        .and_then(|(at, v)| e.code(&at, v, 2, "ISO 3166-1 alpha-2"));
    Some(Address {
        name: name?,
        line1: line1?,
        city: city?,
        postal_code: postal_code?,
        country: country?,
    })
}

/// The body of `POST /orders/{orderId}/approval`.
pub fn approval_decision(body: &Value) -> Result<(Decision, Option<String>), Vec<FieldError>> {
    let mut e = Errors::default();
    let Some(o) = e.object("", body, &["decision", "reason"]) else {
        return Err(e.0);
    };
    let decision = e
        .member("", o, "decision")
        .and_then(|(at, v)| match v.as_str() {
            Some("approve") => Some(Decision::Approve),
            Some("reject") => Some(Decision::Reject),
            _ => {
                e.add(&at, "must be \"approve\" or \"reject\"");
                None
            }
        });
    let reason = match o.get("reason") {
        None | Some(Value::Null) => None,
        Some(v) => e.text("/reason", v, 1, MAX_REASON_CHARS),
    };
    match decision {
        Some(d) if e.0.is_empty() => Ok((d, reason)),
        _ => Err(e.0),
    }
}

/// What `PUT /inventory/{sku}` sets: the available quantity, the catalog price, or both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StockChange {
    pub available: Option<u64>,
    pub price: Option<Price>,
}

/// The body of `PUT /inventory/{sku}`: `available`, `price` (`cents` and `currency`), or both.
pub fn stock_change(body: &Value) -> Result<StockChange, Vec<FieldError>> {
    let mut e = Errors::default();
    let Some(o) = e.object("", body, &["available", "price"]) else {
        return Err(e.0);
    };
    let available = o
        .get("available")
        .map(|v| e.integer("/available", v, 0, MAX_AVAILABLE));
    let price = o.get("price").map(|v| {
        let p = e.object("/price", v, &["cents", "currency"])?;
        let cents = e
            .member("/price", p, "cents")
            .and_then(|(at, v)| e.integer(&at, v, 0, MAX_UNIT_PRICE_CENTS));
        let currency = e
            .member("/price", p, "currency")
            .and_then(|(at, v)| e.code(&at, v, 3, "ISO 4217"));
        Some(Price {
            cents: cents?,
            currency: currency?,
        })
    });
    if available.is_none() && price.is_none() && e.0.is_empty() {
        e.add("", "must set available, price, or both");
    }
    if !e.0.is_empty() {
        return Err(e.0);
    }
    Ok(StockChange {
        available: available.flatten(),
        price: price.flatten(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
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
        assert_eq!(fields(&json!({})).len(), ORDER_FIELDS.len());
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
        let fields = |body: Value| -> Vec<String> {
            stock_change(&body)
                .unwrap_err()
                .into_iter()
                .map(|e| e.field)
                .collect()
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
            ["/price/x", "/price/cents", "/price/currency"]
        );
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
        use crate::intake::OrderRequest;
        use crate::pricing::RequestedLine;
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
