//! Evaluation of Choice rules against a state's input.

use super::Rule;
use crate::data::{DataError, Scope};

/// Whether `rule` matches. A missing `Variable` (except under `IsPresent`) is a
/// `States.Runtime` error with AWS's message.
pub fn evaluate(rule: &Rule, scope: &Scope) -> Result<bool, DataError> {
    let _ = (rule, scope);
    todo!("helper B")
}
