//! JSONPath as Step Functions understands it (Jayway semantics): parsing, selection,
//! and writing through reference paths (`ResultPath`).

use super::{DataError, Scope};
use serde_json::Value;

/// Checks the syntax of a path at definition time (`$…`, `$$…`, `$var…`).
pub fn validate(path: &str) -> Result<(), String> {
    let _ = path;
    todo!("helper A")
}

/// Checks that `path` is a *reference path* (no wildcards, slices, filters, recursive descent),
/// as `ResultPath` requires.
pub fn validate_reference(path: &str) -> Result<(), String> {
    let _ = path;
    todo!("helper A")
}

/// Selects with `path` from the scope (`$` → scope.input, `$$` → scope.context, `$name` →
/// variable). `Ok(None)` when nothing matches a definite path. Indefinite paths (wildcards,
/// slices, filters) yield an array (possibly empty).
pub fn select(path: &str, scope: &Scope) -> Result<Option<Value>, DataError> {
    let _ = (path, scope);
    todo!("helper A")
}

/// `InputPath`/`OutputPath`/`ItemsPath` selection: nothing found is
/// `States.Runtime` `Invalid path '<path>' : No results for path: $['a']`.
pub fn select_for_filter(path: &str, scope: &Scope) -> Result<Value, DataError> {
    let _ = (path, scope);
    todo!("helper A")
}

/// Selection for a named field (`x.$`, `ErrorPath`, …): nothing found is `States.Runtime`
/// `The JSONPath '<path>' specified for the field '<field>' could not be found in the input '<json>'`.
pub fn select_for_field(path: &str, field: &str, scope: &Scope) -> Result<Value, DataError> {
    let _ = (path, field, scope);
    todo!("helper A")
}

/// Writes `result` into a copy of `raw` at reference path `path` (`ResultPath`).
pub fn put(path: &str, raw: &Value, result: Value) -> Result<Value, DataError> {
    let _ = (path, raw, result);
    todo!("helper A")
}
