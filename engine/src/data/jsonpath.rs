//! JSONPath as Step Functions understands it (Jayway semantics): parsing, selection,
//! and writing through reference paths (`ResultPath`).
//!
//! Jayway's central rule shapes everything here: a *definite* path (only names and single
//! indexes) yields the value itself and fails when it is missing, while an *indefinite* path
//! (wildcards, slices, unions, filters, `..`) yields the array of its matches, possibly empty,
//! and never fails for a missing property. Failure texts mirror Jayway's, because AWS puts them
//! verbatim in its error causes.

mod parse;

use super::{DataError, Scope};
use parse::{CmpOp, Filter, Operand, Path, Root, Segment};
use serde_json::{Map, Value};
use std::cmp::Ordering;

pub use parse::is_ident_char;

/// Checks the syntax of a path at definition time (`$…`, `$$…`, `$var…`).
pub fn validate(path: &str) -> Result<(), String> {
    parse::parse(path).map(|_| ())
}

/// Checks that `path` is a *reference path* (no wildcards, slices, filters, recursive descent),
/// as `ResultPath` requires.
pub fn validate_reference(path: &str) -> Result<(), String> {
    parse_reference(path).map(|_| ())
}

/// Selects with `path` from the scope (`$` → scope.input, `$$` → scope.context, `$name` →
/// variable). `Ok(None)` when nothing matches a definite path (or the variable is unknown).
/// Indefinite paths (wildcards, slices, filters) yield an array (possibly empty).
pub fn select(path: &str, scope: &Scope) -> Result<Option<Value>, DataError> {
    match lookup(path, scope)? {
        Ok(value) => Ok(Some(value)),
        Err(_) => Ok(None),
    }
}

/// `InputPath`/`OutputPath`/`ItemsPath` selection: nothing found is
/// `States.Runtime` `Invalid path '<path>' : No results for path: $['a']`.
pub fn select_for_filter(path: &str, scope: &Scope) -> Result<Value, DataError> {
    lookup(path, scope)?
        .map_err(|miss| DataError::runtime(format!("Invalid path '{path}' : {miss}")))
}

/// Selection for a named field (`x.$`, `ErrorPath`, …): nothing found is `States.Runtime`
/// `The JSONPath '<path>' specified for the field '<field>' could not be found in the input '<json>'`.
pub fn select_for_field(path: &str, field: &str, scope: &Scope) -> Result<Value, DataError> {
    lookup(path, scope)?.map_err(|_| {
        DataError::runtime(format!(
            "The JSONPath '{path}' specified for the field '{field}' could not be found in the input '{}'",
            scope.input
        ))
    })
}

/// Writes `result` into a copy of `raw` at reference path `path` (`ResultPath`).
/// Missing intermediate objects are created; stepping through a value of the wrong kind
/// (a name into a non-object, an index into a non-array or past its end) is
/// `States.ResultPathMatchFailure`.
pub fn put(path: &str, raw: &Value, result: Value) -> Result<Value, DataError> {
    let segments = parse_reference(path).map_err(DataError::runtime)?;
    let mut out = raw.clone();
    let mut node = &mut out;
    for (i, segment) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        let mismatch = |node: &Value, step: String| DataError {
            error: "States.ResultPathMatchFailure".to_owned(),
            message: format!("Unable to apply step \"{step}\" to input {node}"),
        };
        node = match segment {
            Segment::Child(name) => match node {
                Value::Object(map) => map
                    .entry(name.clone())
                    // The placeholder object is what lets `$.a.b` create `a`.
                    .or_insert_with(|| Value::Object(Map::new())),
                other => return Err(mismatch(other, name.clone())),
            },
            Segment::Index(index) => {
                let slot = match node {
                    Value::Array(items) => {
                        usize::try_from(*index).ok().filter(|&i| i < items.len())
                    }
                    _ => None,
                };
                match (slot, node) {
                    (Some(slot), Value::Array(items)) => &mut items[slot],
                    (_, other) => return Err(mismatch(other, format!("[{index}]"))),
                }
            }
            // `parse_reference` admits nothing else.
            _ => {
                return Err(DataError::runtime(format!(
                    "Invalid reference path '{path}'"
                )));
            }
        };
        if last {
            *node = result;
            return Ok(out);
        }
    }
    // Only `$` itself gets here: the result replaces the whole input.
    Ok(result)
}

/// Parses a reference path: `$` followed by names and non-negative single indexes only.
fn parse_reference(path: &str) -> Result<Vec<Segment>, String> {
    let parsed = parse::parse(path)?;
    if parsed.root != Root::Input {
        return Err(format!(
            "Invalid reference path '{path}': it must start with '$.' or be '$'"
        ));
    }
    let ok = parsed.segments.iter().all(|s| match s {
        Segment::Child(_) => true,
        Segment::Index(i) => *i >= 0,
        _ => false,
    });
    if !ok {
        return Err(format!(
            "Invalid reference path '{path}': only names and non-negative indexes are allowed"
        ));
    }
    Ok(parsed.segments)
}

/// The outer `Result` is a hard failure (bad syntax); the inner `Err` is Jayway's "nothing
/// found" text, which each caller words differently.
fn lookup(path: &str, scope: &Scope) -> Result<Result<Value, String>, DataError> {
    let parsed = parse::parse(path).map_err(DataError::runtime)?;
    let root = match &parsed.root {
        Root::Input => scope.input,
        Root::Context => scope.context.value(),
        Root::Variable(name) => match scope.variables.get(name) {
            Some(value) => value,
            None => return Ok(Err(format!("Variable '{name}' is not defined"))),
        },
    };
    Ok(evaluate(&parsed, root))
}

fn evaluate(path: &Path, root: &Value) -> Result<Value, String> {
    if path.is_definite() {
        select_definite(root, &path.segments).cloned()
    } else {
        let mut found = Vec::new();
        collect(root, &path.segments, root, &mut found);
        Ok(Value::Array(found.into_iter().cloned().collect()))
    }
}

/// Jayway's rendering of a path in its messages: `$['a'][0]`.
fn render(segments: &[Segment]) -> String {
    let mut out = String::from("$");
    for segment in segments {
        match segment {
            Segment::Child(name) => out.push_str(&format!("['{name}']")),
            Segment::Index(i) => out.push_str(&format!("[{i}]")),
            _ => out.push_str("[*]"),
        }
    }
    out
}

/// The Java class Jayway names when a path expects an object and finds something else.
fn java_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "java.lang.Boolean",
        Value::Number(n) if n.is_f64() => "java.lang.Double",
        Value::Number(_) => "java.lang.Integer",
        Value::String(_) => "java.lang.String",
        Value::Array(_) => "java.util.ArrayList",
        Value::Object(_) => "java.util.LinkedHashMap",
    }
}

/// A definite path: the value itself, or Jayway's message for why there is none.
fn select_definite<'v>(root: &'v Value, segments: &[Segment]) -> Result<&'v Value, String> {
    let no_results = || format!("No results for path: {}", render(segments));
    let mut node = root;
    for (i, segment) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        node = match (segment, node) {
            (Segment::Child(name), Value::Object(map)) => match map.get(name) {
                Some(value) => value,
                None if last => return Err(no_results()),
                None => {
                    return Err(format!(
                        "Missing property in path {}",
                        render(&segments[..=i])
                    ));
                }
            },
            (Segment::Child(name), other) => {
                return Err(format!(
                    "Expected to find an object with property ['{name}'] in path {} but found '{}'. \
                     This is not a json object according to the JsonProvider: \
                     'com.jayway.jsonpath.spi.json.JacksonJsonProvider'.",
                    render(&segments[..i]),
                    java_type(other)
                ));
            }
            (Segment::Index(index), Value::Array(items)) => {
                match resolve_index(*index, items.len()).and_then(|i| items.get(i)) {
                    Some(value) => value,
                    None => return Err(no_results()),
                }
            }
            (Segment::Index(_), Value::Null) => {
                return Err(format!("The path {} is null", render(&segments[..i])));
            }
            (Segment::Index(index), other) => {
                return Err(format!(
                    "Filter: [{index}] can only be applied to arrays. Current context is: {other}"
                ));
            }
            _ => return Err(no_results()),
        };
    }
    Ok(node)
}

/// A possibly negative index into an array of `len` elements.
fn resolve_index(index: i64, len: usize) -> Option<usize> {
    let len = i64::try_from(len).ok()?;
    let effective = if index < 0 { len + index } else { index };
    usize::try_from(effective)
        .ok()
        .filter(|&i| (i as i64) < len)
}

/// Indefinite evaluation: every match, in document order; missing parts are skipped.
fn collect<'v>(node: &'v Value, segments: &[Segment], root: &'v Value, out: &mut Vec<&'v Value>) {
    let Some((segment, rest)) = segments.split_first() else {
        out.push(node);
        return;
    };
    if let Segment::Descend(inner) = segment {
        descend(node, inner, rest, root, out);
    } else {
        for child in step(node, segment, root) {
            collect(child, rest, root, out);
        }
    }
}

/// `..inner`: applies `inner` to `node` and then to each descendant, pre-order like Jayway.
fn descend<'v>(
    node: &'v Value,
    inner: &Segment,
    rest: &[Segment],
    root: &'v Value,
    out: &mut Vec<&'v Value>,
) {
    for hit in step(node, inner, root) {
        collect(hit, rest, root, out);
    }
    for child in children(node) {
        descend(child, inner, rest, root, out);
    }
}

fn children(node: &Value) -> Vec<&Value> {
    match node {
        Value::Object(map) => map.values().collect(),
        Value::Array(items) => items.iter().collect(),
        _ => Vec::new(),
    }
}

/// One segment applied to one node: the nodes it leads to.
fn step<'v>(node: &'v Value, segment: &Segment, root: &'v Value) -> Vec<&'v Value> {
    match (segment, node) {
        (Segment::Child(name), Value::Object(map)) => map.get(name).into_iter().collect(),
        (Segment::Names(names), Value::Object(map)) => {
            names.iter().filter_map(|name| map.get(name)).collect()
        }
        (Segment::Index(index), Value::Array(items)) => resolve_index(*index, items.len())
            .and_then(|i| items.get(i))
            .into_iter()
            .collect(),
        (Segment::Indexes(indexes), Value::Array(items)) => indexes
            .iter()
            .filter_map(|&index| resolve_index(index, items.len()).and_then(|i| items.get(i)))
            .collect(),
        (Segment::Wildcard, _) => children(node),
        (Segment::Slice { start, end }, Value::Array(items)) => {
            let len = items.len() as i64;
            let clamp = |bound: i64| {
                if bound < 0 {
                    (len + bound).max(0)
                } else {
                    bound.min(len)
                }
            };
            let from = start.map_or(0, clamp) as usize;
            let to = end.map_or(len, clamp) as usize;
            items
                .get(from..to.max(from))
                .map(|s| s.iter().collect())
                .unwrap_or_default()
        }
        (Segment::Filter(filter), Value::Array(items)) => items
            .iter()
            .filter(|item| matches_filter(filter, item, root))
            .collect(),
        (Segment::Filter(filter), Value::Object(_)) if matches_filter(filter, node, root) => {
            vec![node]
        }
        (Segment::Descend(inner), _) => {
            let mut out = Vec::new();
            descend(node, inner, &[], root, &mut out);
            out
        }
        _ => Vec::new(),
    }
}

fn matches_filter(filter: &Filter, current: &Value, root: &Value) -> bool {
    match filter {
        Filter::Or(a, b) => matches_filter(a, current, root) || matches_filter(b, current, root),
        Filter::And(a, b) => matches_filter(a, current, root) && matches_filter(b, current, root),
        Filter::Not(inner) => !matches_filter(inner, current, root),
        Filter::Exists(operand) => operand_value(operand, current, root).is_some(),
        Filter::Compare(left, op, right) => {
            let (left, right) = (
                operand_value(left, current, root),
                operand_value(right, current, root),
            );
            let (Some(left), Some(right)) = (left, right) else {
                // Jayway: `!=` is the negation of `==`, so an absent side makes it true.
                return *op == CmpOp::Ne;
            };
            match op {
                CmpOp::Eq => json_eq(&left, &right),
                CmpOp::Ne => !json_eq(&left, &right),
                CmpOp::Lt => compare(&left, &right) == Some(Ordering::Less),
                CmpOp::Le => matches!(
                    compare(&left, &right),
                    Some(Ordering::Less | Ordering::Equal)
                ),
                CmpOp::Gt => compare(&left, &right) == Some(Ordering::Greater),
                CmpOp::Ge => {
                    matches!(
                        compare(&left, &right),
                        Some(Ordering::Greater | Ordering::Equal)
                    )
                }
            }
        }
    }
}

/// The value of a filter operand; `None` when its path selects nothing.
fn operand_value(operand: &Operand, current: &Value, root: &Value) -> Option<Value> {
    let (base, segments) = match operand {
        Operand::Literal(value) => return Some(value.clone()),
        Operand::Current(segments) => (current, segments),
        Operand::Root(segments) => (root, segments),
    };
    evaluate(
        &Path {
            root: Root::Input,
            segments: segments.clone(),
        },
        base,
    )
    .ok()
}

/// JSON equality with numbers compared by value (`1 == 1.0`).
pub(crate) fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(_), Value::Number(_)) => compare(a, b) == Some(Ordering::Equal),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// Ordering of two numbers or two strings; anything else is incomparable.
fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => Some(x.cmp(&y)),
            _ => x.as_f64()?.partial_cmp(&y.as_f64()?),
        },
        (Value::String(x), Value::String(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
