//! Payload templates (`Parameters`, `ResultSelector`, `ItemSelector`, `Assign`): keys ending in
//! `.$` take a path, a context path, a variable or an intrinsic; everything else is literal.
//!
//! Templates are walked recursively through objects and arrays, so a `.$` key nested inside a
//! literal object or array is still evaluated. The output key drops the `.$` suffix.

use super::{DataError, Scope, eval_expression, intrinsics, jsonpath};
use serde_json::{Map, Value};

/// The suffix that marks a key whose value is an expression.
const EXPR_SUFFIX: &str = ".$";

/// Checks a template at definition time (every `.$` value is a string holding a valid path or
/// intrinsic call). Returns the offending key path and reason.
pub fn validate(template: &Value) -> Result<(), String> {
    validate_at(template, "")
}

/// Checks one expression (the value of a `.$` key): a path or an intrinsic call.
pub fn validate_expression(expr: &str) -> Result<(), String> {
    if expr.starts_with("States.") {
        intrinsics::validate(expr)
    } else if expr.starts_with('$') {
        jsonpath::validate(expr)
    } else {
        Err(format!(
            "'{expr}' is neither a path ('$…', '$$…', '$variable…') nor an intrinsic function call"
        ))
    }
}

fn validate_at(template: &Value, location: &str) -> Result<(), String> {
    match template {
        Value::Object(map) => {
            for (key, value) in map {
                let here = if location.is_empty() {
                    key.clone()
                } else {
                    format!("{location}.{key}")
                };
                if key.ends_with(EXPR_SUFFIX) {
                    let expr = value.as_str().ok_or_else(|| {
                        format!("{here}: the value of a field ending in '.$' must be a string")
                    })?;
                    validate_expression(expr).map_err(|reason| format!("{here}: {reason}"))?;
                } else {
                    validate_at(value, &here)?;
                }
            }
            Ok(())
        }
        Value::Array(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(i, item)| validate_at(item, &format!("{location}[{i}]"))),
        _ => Ok(()),
    }
}

/// Renders a template against a scope.
pub fn render(template: &Value, scope: &Scope) -> Result<Value, DataError> {
    match template {
        Value::Object(map) => {
            let mut out = Map::with_capacity(map.len());
            for (key, value) in map {
                match key.strip_suffix(EXPR_SUFFIX) {
                    Some(name) => {
                        let expr = value.as_str().ok_or_else(|| {
                            DataError::runtime(format!(
                                "The value of the field '{key}' must be a path or an intrinsic \
                                 function, found {value}"
                            ))
                        })?;
                        out.insert(name.to_owned(), eval_expression(expr, key, scope)?);
                    }
                    None => {
                        out.insert(key.clone(), render(value, scope)?);
                    }
                }
            }
            Ok(Value::Object(out))
        }
        Value::Array(items) => items
            .iter()
            .map(|item| render(item, scope))
            .collect::<Result<_, _>>()
            .map(Value::Array),
        literal => Ok(literal.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::random::{Randomness, Seed};
    use proptest::prelude::*;
    use serde_json::json;

    fn render_with(template: Value, input: Value) -> Result<Value, DataError> {
        let context = json!({"Execution": {"Name": "exec-1"}});
        let mut variables = Map::new();
        variables.insert("bucket".to_owned(), json!("b-1"));
        render(
            &template,
            &Scope {
                input: &input,
                context: &context,
                variables: &variables,
                random: &Randomness::new(Seed::from_u64(0)),
            },
        )
    }

    #[test]
    fn expression_keys_are_evaluated_and_lose_their_suffix() {
        let template = json!({
            "literal": "$.not_a_path",
            "fromInput.$": "$.a",
            "fromContext.$": "$$.Execution.Name",
            "fromVariable.$": "$bucket",
            "intrinsic.$": "States.Format('{}-{}', $.a, $bucket)",
        });
        let rendered = render_with(template, json!({"a": 1})).expect("render");
        assert_eq!(
            rendered,
            json!({
                "literal": "$.not_a_path",
                "fromInput": 1,
                "fromContext": "exec-1",
                "fromVariable": "b-1",
                "intrinsic": "1-b-1",
            })
        );
    }

    #[test]
    fn nested_objects_and_arrays_are_walked() {
        let template = json!({"outer": {"inner.$": "$.x"}, "list": [{"v.$": "$.x"}, 3]});
        let rendered = render_with(template, json!({"x": [true]})).expect("render");
        assert_eq!(
            rendered,
            json!({"outer": {"inner": [true]}, "list": [{"v": [true]}, 3]})
        );
    }

    #[test]
    fn missing_path_names_the_field() {
        let err = render_with(
            json!({"value.$": "$.no_such_jsonpath"}),
            json!({"int-literal": 0}),
        )
        .expect_err("missing");
        assert_eq!(err.error, "States.Runtime");
        assert_eq!(
            err.message,
            "The JSONPath '$.no_such_jsonpath' specified for the field 'value.$' could not be \
             found in the input '{\"int-literal\":0}'"
        );
    }

    #[test]
    fn validation_reports_the_offending_key() {
        assert!(validate(&json!({"a.$": "$.x", "b": {"c.$": "States.UUID()"}})).is_ok());
        let err = validate(&json!({"b": [{"c.$": "States.Nope()"}]})).expect_err("bad");
        assert!(err.starts_with("b[0].c.$:"), "{err}");
        assert!(validate(&json!({"a.$": 1})).is_err());
        assert!(validate(&json!({"a.$": "plain text"})).is_err());
        assert!(validate(&json!({"a.$": "$.x["})).is_err());
    }

    fn arb_literal() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            "[$a-z.]{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map("[a-z]{1,4}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn template_without_expression_keys_renders_to_itself(template in arb_literal()) {
            prop_assert!(validate(&template).is_ok());
            prop_assert_eq!(render_with(template.clone(), json!({"a": 1})).ok(), Some(template));
        }
    }
}
