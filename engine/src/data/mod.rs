//! Data flow of the JSONPath dialect: paths, payload templates (`.$` keys), intrinsic functions
//! and the `InputPath → Parameters → ResultSelector → ResultPath → OutputPath` pipeline steps.
//! Everything here is pure: values in, values (or a [`DataError`]) out.

mod cursor;
pub mod intrinsics;
pub mod jsonpath;
pub mod payload;
pub mod random;

use random::Randomness;
use serde_json::{Map, Value};

/// What a path can see while a state runs.
#[derive(Clone, Copy)]
pub struct Scope<'a> {
    /// `$`: the value the path is applied to (state input, effective input, result, …).
    pub input: &'a Value,
    /// `$$`: the context object (a [`Value`], or a [`LazyContext`] built on first use).
    pub context: &'a dyn ContextObject,
    /// JSONPath variables visible to the state (`$name`), innermost scope already merged in.
    pub variables: &'a Map<String, Value>,
    /// Where `States.UUID` and an unseeded `States.MathRandom` draw from.
    pub random: &'a Randomness,
}

impl std::fmt::Debug for Scope<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scope")
            .field("input", self.input)
            .field("variables", self.variables)
            .finish_non_exhaustive()
    }
}

/// The context object (`$$`) as a path reads it.
pub trait ContextObject {
    fn value(&self) -> &Value;
}

impl ContextObject for Value {
    fn value(&self) -> &Value {
        self
    }
}

/// A context object built the first time a path reads it. Most paths never do, and building
/// one copies the execution's input, which made it a measurable part of every transition
/// (docs/benchmarks/engine.md).
pub struct LazyContext<F> {
    built: std::cell::OnceCell<Value>,
    build: F,
}

impl<F: Fn() -> Value> LazyContext<F> {
    pub fn new(build: F) -> Self {
        LazyContext {
            built: std::cell::OnceCell::new(),
            build,
        }
    }
}

impl<F: Fn() -> Value> ContextObject for LazyContext<F> {
    fn value(&self) -> &Value {
        self.built.get_or_init(&self.build)
    }
}

/// A data-flow failure. `error` is an AWS error name (`States.Runtime`,
/// `States.IntrinsicFailure`, `States.ResultPathMatchFailure`, …); `message` is AWS's text
/// *without* the "An error occurred while executing the state 'X' (entered at the event id #N). "
/// prefix, which the interpreter adds because only it knows the state and the event id.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{error}: {message}")]
pub struct DataError {
    pub error: String,
    pub message: String,
}

impl DataError {
    pub fn runtime(message: impl Into<String>) -> Self {
        DataError {
            error: "States.Runtime".to_owned(),
            message: message.into(),
        }
    }

    pub fn intrinsic(message: impl Into<String>) -> Self {
        DataError {
            error: "States.IntrinsicFailure".to_owned(),
            message: message.into(),
        }
    }
}

/// Applies `InputPath` (or `OutputPath`, or Map's `ItemsPath`) to `scope.input`.
/// `Null` yields `{}`. A path that selects nothing is a `States.Runtime` error:
/// `Invalid path '<path>' : No results for path: $['a']['b']`.
pub fn apply_filter_path(path: &crate::asl::OptPath, scope: &Scope) -> Result<Value, DataError> {
    match path {
        crate::asl::OptPath::Null => Ok(Value::Object(Map::new())),
        crate::asl::OptPath::Path(p) => jsonpath::select_for_filter(p, scope),
    }
}

/// Merges `result` into `raw_input` at `ResultPath`. `Null` discards the result (returns the raw
/// input); `$` replaces the input. Missing intermediate objects are created. Writing through a
/// non-object (or past the end of an array) is `States.ResultPathMatchFailure`.
pub fn apply_result_path(
    path: &crate::asl::OptPath,
    raw_input: &Value,
    result: Value,
) -> Result<Value, DataError> {
    match path {
        crate::asl::OptPath::Null => Ok(raw_input.clone()),
        crate::asl::OptPath::Path(p) => jsonpath::put(p, raw_input, result),
    }
}

/// Evaluates a value-producing expression: a path (`$…`, `$$…`, `$var…`) or an intrinsic call
/// (`States.X(...)`). `field` is the name of the field it came from (e.g. `value.$`, `ErrorPath`),
/// used in error messages: `The JSONPath '$.x' specified for the field 'value.$' could not be
/// found in the input '<input as JSON>'`.
pub fn eval_expression(expr: &str, field: &str, scope: &Scope) -> Result<Value, DataError> {
    if expr.starts_with("States.") {
        intrinsics::eval(expr, scope)
    } else {
        jsonpath::select_for_field(expr, field, scope)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::cell::Cell;

    #[test]
    fn the_context_object_is_built_only_when_a_path_reads_it_and_then_once() {
        let builds = Cell::new(0);
        let context = LazyContext::new(|| {
            builds.set(builds.get() + 1);
            json!({"Execution": {"Name": "order-1"}})
        });
        let input = json!({"sku": "A"});
        let variables = Map::new();
        let random = Randomness::new(random::Seed::from_u64(0));
        let scope = Scope {
            input: &input,
            context: &context,
            variables: &variables,
            random: &random,
        };

        assert_eq!(
            jsonpath::select_for_field("$.sku", "sku", &scope).unwrap(),
            json!("A")
        );
        assert_eq!(builds.get(), 0, "a path over `$` builds no context");

        for _ in 0..2 {
            let name = jsonpath::select_for_field("$$.Execution.Name", "name", &scope).unwrap();
            assert_eq!(name, json!("order-1"));
        }
        assert_eq!(
            builds.get(),
            1,
            "built on the first read of `$$`, then kept"
        );
    }
}
