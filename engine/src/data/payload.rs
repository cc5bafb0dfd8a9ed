//! Payload templates (`Parameters`, `ResultSelector`, `ItemSelector`, `Assign`): keys ending in
//! `.$` take a path, a context path, a variable or an intrinsic; everything else is literal.

use super::{DataError, Scope};
use serde_json::Value;

/// Checks a template at definition time (every `.$` value is a string holding a valid path or
/// intrinsic call). Returns the offending key path and reason.
pub fn validate(template: &Value) -> Result<(), String> {
    let _ = template;
    todo!("helper A")
}

/// Renders a template against a scope.
pub fn render(template: &Value, scope: &Scope) -> Result<Value, DataError> {
    let _ = (template, scope);
    todo!("helper A")
}
