//! Intrinsic functions (`States.Format`, `States.Array`, …, `States.UUID`).

use super::{DataError, Scope};
use serde_json::Value;

/// Checks the syntax of an intrinsic call at definition time (known function, balanced
/// arguments, valid literal and path arguments).
pub fn validate(expr: &str) -> Result<(), String> {
    let _ = expr;
    todo!("helper A")
}

/// Evaluates an intrinsic call; failures are `States.IntrinsicFailure` (or `States.Runtime` for
/// a path argument that selects nothing), with AWS's messages where known.
pub fn eval(expr: &str, scope: &Scope) -> Result<Value, DataError> {
    let _ = (expr, scope);
    todo!("helper A")
}
