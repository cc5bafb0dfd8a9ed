//! Choice rules: `And` / `Or` / `Not` and the comparison operators with their `…Path` twins.

use super::fields::{self, Loc, Problems};
use crate::asl::timestamp::parse_timestamp;
use crate::asl::{ChoiceBranch, Op, Operand, Rule};
use serde_json::{Map, Value};

/// What a comparison operator's literal operand must be.
#[derive(Debug, Clone, Copy, PartialEq)]
enum OperandKind {
    String,
    Number,
    Boolean,
    Timestamp,
    /// A `StringMatches` pattern (no `…Path` twin).
    Pattern,
    /// The boolean of an `Is…` type test (no `…Path` twin).
    Flag,
}

/// Every comparison operator by its AWS name.
const OPERATORS: &[(&str, Op, OperandKind)] = &[
    ("StringEquals", Op::StringEquals, OperandKind::String),
    ("StringLessThan", Op::StringLessThan, OperandKind::String),
    (
        "StringGreaterThan",
        Op::StringGreaterThan,
        OperandKind::String,
    ),
    (
        "StringLessThanEquals",
        Op::StringLessThanEquals,
        OperandKind::String,
    ),
    (
        "StringGreaterThanEquals",
        Op::StringGreaterThanEquals,
        OperandKind::String,
    ),
    ("StringMatches", Op::StringMatches, OperandKind::Pattern),
    ("NumericEquals", Op::NumericEquals, OperandKind::Number),
    ("NumericLessThan", Op::NumericLessThan, OperandKind::Number),
    (
        "NumericGreaterThan",
        Op::NumericGreaterThan,
        OperandKind::Number,
    ),
    (
        "NumericLessThanEquals",
        Op::NumericLessThanEquals,
        OperandKind::Number,
    ),
    (
        "NumericGreaterThanEquals",
        Op::NumericGreaterThanEquals,
        OperandKind::Number,
    ),
    ("BooleanEquals", Op::BooleanEquals, OperandKind::Boolean),
    (
        "TimestampEquals",
        Op::TimestampEquals,
        OperandKind::Timestamp,
    ),
    (
        "TimestampLessThan",
        Op::TimestampLessThan,
        OperandKind::Timestamp,
    ),
    (
        "TimestampGreaterThan",
        Op::TimestampGreaterThan,
        OperandKind::Timestamp,
    ),
    (
        "TimestampLessThanEquals",
        Op::TimestampLessThanEquals,
        OperandKind::Timestamp,
    ),
    (
        "TimestampGreaterThanEquals",
        Op::TimestampGreaterThanEquals,
        OperandKind::Timestamp,
    ),
    ("IsNull", Op::IsNull, OperandKind::Flag),
    ("IsPresent", Op::IsPresent, OperandKind::Flag),
    ("IsNumeric", Op::IsNumeric, OperandKind::Flag),
    ("IsString", Op::IsString, OperandKind::Flag),
    ("IsBoolean", Op::IsBoolean, OperandKind::Flag),
    ("IsTimestamp", Op::IsTimestamp, OperandKind::Flag),
];

/// A comparison key of a rule: the operator, whether it is the `…Path` twin, its operand kind.
fn comparison(key: &str) -> Option<(Op, bool, OperandKind)> {
    let (base, is_path) = match key.strip_suffix("Path") {
        Some(base) => (base, true),
        None => (key, false),
    };
    let &(_, op, kind) = OPERATORS.iter().find(|(name, _, _)| *name == base)?;
    let has_path_twin = !matches!(kind, OperandKind::Pattern | OperandKind::Flag);
    (!is_path || has_path_twin).then_some((op, is_path, kind))
}

const COMBINATORS: [&str; 3] = ["And", "Or", "Not"];

/// A top-level rule of `Choices`: the rule plus its `Next` and `Assign`.
pub fn parse_branch(value: &Value, loc: &Loc, problems: &mut Problems) -> Option<ChoiceBranch> {
    let Some(obj) = value.as_object() else {
        problems.at(loc, "", "A Choice rule must be an object");
        return None;
    };
    let rule = parse_rule(obj, true, loc, problems);
    let next = fields::required_string(obj, "Next", loc, problems);
    let assign = fields::assign(obj, loc, problems);
    Some(ChoiceBranch { rule, next, assign })
}

/// One rule. `top` allows `Next` and `Assign` (only top-level rules have them). Problems leave a
/// placeholder rule behind.
fn parse_rule(obj: &Map<String, Value>, top: bool, loc: &Loc, problems: &mut Problems) -> Rule {
    for key in obj.keys() {
        let known = matches!(key.as_str(), "Variable" | "Comment")
            || COMBINATORS.contains(&key.as_str())
            || comparison(key).is_some()
            || (top && matches!(key.as_str(), "Next" | "Assign"));
        if !known {
            let reason = if !top && matches!(key.as_str(), "Next" | "Assign") {
                format!("Field '{key}' is only allowed on a top-level Choice rule")
            } else {
                format!("Field '{key}' is not supported in a Choice rule")
            };
            problems.at(loc, key, reason);
        }
    }

    let operators: Vec<&str> = obj
        .keys()
        .map(String::as_str)
        .filter(|k| COMBINATORS.contains(k) || comparison(k).is_some())
        .collect();
    let placeholder = Rule::And(Vec::new());
    let key = match operators.as_slice() {
        [key] => *key,
        [] => {
            problems.at(
                loc,
                "",
                "A Choice rule needs one comparison operator, or one of And, Or, Not",
            );
            return placeholder;
        }
        several => {
            problems.at(
                loc,
                several[1],
                format!(
                    "A Choice rule takes a single operator (found {})",
                    several.join(", ")
                ),
            );
            return placeholder;
        }
    };
    let operand = &obj[key];

    if COMBINATORS.contains(&key) {
        if obj.contains_key("Variable") {
            problems.at(
                loc,
                "Variable",
                format!("'Variable' cannot be used with '{key}'"),
            );
        }
        return match key {
            "Not" => match operand.as_object() {
                Some(inner) => Rule::Not(Box::new(parse_rule(
                    inner,
                    false,
                    &loc.nested("Not"),
                    problems,
                ))),
                None => {
                    problems.at(loc, "Not", "must be a Choice rule object");
                    placeholder
                }
            },
            _ => match operand.as_array() {
                Some(items) if !items.is_empty() => {
                    let rules = items.iter().enumerate().map(|(i, item)| {
                        let item_loc = loc.nested(&format!("{key}[{i}]"));
                        match item.as_object() {
                            Some(inner) => parse_rule(inner, false, &item_loc, problems),
                            None => {
                                problems.at(&item_loc, "", "A Choice rule must be an object");
                                Rule::And(Vec::new())
                            }
                        }
                    });
                    let rules = rules.collect();
                    if key == "And" {
                        Rule::And(rules)
                    } else {
                        Rule::Or(rules)
                    }
                }
                _ => {
                    problems.at(loc, key, "must be a non-empty array of Choice rules");
                    placeholder
                }
            },
        };
    }

    // `comparison(key)` is Some: `operators` only holds combinators and comparisons.
    let Some((op, is_path, kind)) = comparison(key) else {
        return placeholder;
    };
    let variable = match obj.get("Variable") {
        Some(Value::String(v)) => {
            fields::check_path(v, "Variable", loc, problems);
            v.clone()
        }
        Some(_) => {
            problems.at(loc, "Variable", "must be a path string");
            String::new()
        }
        None => {
            problems.at(loc, "Variable", format!("is required with '{key}'"));
            String::new()
        }
    };
    let operand = if is_path {
        match operand {
            Value::String(p) => {
                fields::check_path(p, key, loc, problems);
                Operand::Path(p.clone())
            }
            _ => {
                problems.at(loc, key, "must be a path string");
                Operand::Path(String::new())
            }
        }
    } else {
        check_literal(operand, kind, key, loc, problems);
        Operand::Literal(operand.clone())
    };
    Rule::Compare {
        variable,
        op,
        operand,
    }
}

fn check_literal(value: &Value, kind: OperandKind, key: &str, loc: &Loc, problems: &mut Problems) {
    let reason = match kind {
        OperandKind::String | OperandKind::Pattern if !value.is_string() => "must be a string",
        OperandKind::Number if !value.is_number() => "must be a number",
        OperandKind::Boolean | OperandKind::Flag if !value.is_boolean() => "must be true or false",
        OperandKind::Timestamp => match value.as_str() {
            Some(ts) if parse_timestamp(ts).is_some() => return,
            _ => "must be an RFC 3339 timestamp string such as 2016-03-14T01:59:00Z",
        },
        _ => return,
    };
    problems.at(loc, key, reason);
}
