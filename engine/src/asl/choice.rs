//! Evaluation of Choice rules against a state's input, with AWS's semantics:
//!
//! * a comparison whose `Variable` selects nothing is a `States.Runtime` error — except
//!   `IsPresent`, which exists to test exactly that;
//! * a value of the wrong type for the operator (a number under `StringEquals`, a string that is
//!   not a timestamp under `TimestampLessThan`, …) makes the comparison false, never an error;
//! * strings compare by code point, numbers by value as `f64` (`1` equals `1.0`), timestamps as
//!   instants (`…19:00:55Z` equals `…20:00:55+01:00`);
//! * `Is*` type tests compare the test's result with their boolean operand, so `IsString: false`
//!   matches every non-string.

use super::timestamp::parse_timestamp;
use super::{Op, Operand, Rule};
use crate::data::{DataError, Scope, jsonpath};
use serde_json::Value;
use std::borrow::Cow;
use std::cmp::Ordering;

/// Whether `rule` matches. A missing `Variable` (except under `IsPresent`) is a
/// `States.Runtime` error with AWS's message.
pub fn evaluate(rule: &Rule, scope: &Scope) -> Result<bool, DataError> {
    match rule {
        // Short-circuits like AWS: a later rule's missing path is not reached.
        Rule::And(rules) => {
            for r in rules {
                if !evaluate(r, scope)? {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        Rule::Or(rules) => {
            for r in rules {
                if evaluate(r, scope)? {
                    return Ok(true);
                }
            }
            Ok(false)
        }
        Rule::Not(r) => Ok(!evaluate(r, scope)?),
        Rule::Compare {
            variable,
            op,
            operand,
        } => compare(variable, *op, operand, scope),
    }
}

/// AWS's error for a comparison path that selects nothing.
fn missing_path(path: &str) -> DataError {
    DataError::runtime(format!(
        "Invalid path '{path}': The choice state's condition path references an invalid value."
    ))
}

fn compare(variable: &str, op: Op, operand: &Operand, scope: &Scope) -> Result<bool, DataError> {
    let selected = jsonpath::select(variable, scope)?;
    if op == Op::IsPresent {
        let wanted = resolve_operand(operand, scope)?;
        return Ok(wanted.as_bool() == Some(selected.is_some()));
    }
    let value = selected.ok_or_else(|| missing_path(variable))?;
    let operand = resolve_operand(operand, scope)?;
    Ok(test(op, &value, &operand))
}

fn resolve_operand<'a>(operand: &'a Operand, scope: &Scope) -> Result<Cow<'a, Value>, DataError> {
    match operand {
        Operand::Literal(v) => Ok(Cow::Borrowed(v)),
        Operand::Path(p) => jsonpath::select(p, scope)?
            .map(Cow::Owned)
            .ok_or_else(|| missing_path(p)),
    }
}

/// Applies `op` to the selected `value` and the (resolved) `operand`. Mismatched types are false.
fn test(op: Op, value: &Value, operand: &Value) -> bool {
    use Op::*;
    match op {
        StringEquals => strings(value, operand).is_some_and(Ordering::is_eq),
        StringLessThan => strings(value, operand).is_some_and(Ordering::is_lt),
        StringGreaterThan => strings(value, operand).is_some_and(Ordering::is_gt),
        StringLessThanEquals => strings(value, operand).is_some_and(Ordering::is_le),
        StringGreaterThanEquals => strings(value, operand).is_some_and(Ordering::is_ge),
        StringMatches => match (value, operand) {
            (Value::String(s), Value::String(pattern)) => string_matches(s, pattern),
            _ => false,
        },
        NumericEquals => numbers(value, operand).is_some_and(Ordering::is_eq),
        NumericLessThan => numbers(value, operand).is_some_and(Ordering::is_lt),
        NumericGreaterThan => numbers(value, operand).is_some_and(Ordering::is_gt),
        NumericLessThanEquals => numbers(value, operand).is_some_and(Ordering::is_le),
        NumericGreaterThanEquals => numbers(value, operand).is_some_and(Ordering::is_ge),
        BooleanEquals => match (value, operand) {
            (Value::Bool(a), Value::Bool(b)) => a == b,
            _ => false,
        },
        TimestampEquals => timestamps(value, operand).is_some_and(Ordering::is_eq),
        TimestampLessThan => timestamps(value, operand).is_some_and(Ordering::is_lt),
        TimestampGreaterThan => timestamps(value, operand).is_some_and(Ordering::is_gt),
        TimestampLessThanEquals => timestamps(value, operand).is_some_and(Ordering::is_le),
        TimestampGreaterThanEquals => timestamps(value, operand).is_some_and(Ordering::is_ge),
        IsNull => type_test(value.is_null(), operand),
        IsNumeric => type_test(value.is_number(), operand),
        IsString => type_test(value.is_string(), operand),
        IsBoolean => type_test(value.is_boolean(), operand),
        IsTimestamp => type_test(as_timestamp(value).is_some(), operand),
        // Presence was decided before the value was needed (see `compare`).
        IsPresent => type_test(true, operand),
    }
}

fn type_test(is: bool, operand: &Value) -> bool {
    operand.as_bool() == Some(is)
}

/// Rust's `str` ordering is byte-wise on UTF-8, which is code-point order.
fn strings(a: &Value, b: &Value) -> Option<Ordering> {
    Some(a.as_str()?.cmp(b.as_str()?))
}

/// `None` when either side is not a number (or the comparison is undefined, e.g. NaN).
fn numbers(a: &Value, b: &Value) -> Option<Ordering> {
    if !a.is_number() || !b.is_number() {
        return None;
    }
    a.as_f64()?.partial_cmp(&b.as_f64()?)
}

fn as_timestamp(v: &Value) -> Option<chrono::DateTime<chrono::FixedOffset>> {
    parse_timestamp(v.as_str()?)
}

fn timestamps(a: &Value, b: &Value) -> Option<Ordering> {
    Some(as_timestamp(a)?.cmp(&as_timestamp(b)?))
}

/// One element of a `StringMatches` pattern.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Token {
    Char(char),
    /// An unescaped `*`: any run of characters, possibly empty.
    Star,
}

/// `*` matches any run of characters; `\*` is a literal star and `\\` a literal backslash
/// (any other escaped character stands for itself, a trailing `\` for a backslash).
fn pattern_tokens(pattern: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => tokens.push(Token::Char(chars.next().unwrap_or('\\'))),
            '*' => tokens.push(Token::Star),
            other => tokens.push(Token::Char(other)),
        }
    }
    tokens
}

/// Wildcard matching with the classic backtrack-to-last-star algorithm: linear in practice,
/// O(n·m) worst case, no recursion (patterns come from user definitions).
fn string_matches(s: &str, pattern: &str) -> bool {
    let text: Vec<char> = s.chars().collect();
    let pat = pattern_tokens(pattern);
    let (mut t, mut p) = (0, 0);
    // Position of the last star seen and the text position it is currently standing in for.
    let mut backtrack: Option<(usize, usize)> = None;
    while t < text.len() {
        match pat.get(p) {
            Some(Token::Char(c)) if *c == text[t] => {
                t += 1;
                p += 1;
            }
            Some(Token::Star) => {
                backtrack = Some((p, t));
                p += 1;
            }
            _ => match backtrack {
                Some((star, matched_to)) => {
                    // Let the star swallow one more character and retry.
                    p = star + 1;
                    t = matched_to + 1;
                    backtrack = Some((star, t));
                }
                None => return false,
            },
        }
    }
    pat[p..].iter().all(|tok| *tok == Token::Star)
}

#[cfg(test)]
mod tests;
