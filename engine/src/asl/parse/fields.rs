//! Typed readers for definition fields. Each reader checks the JSON type and the value, reports
//! what is wrong as a [`Problem`] located by a [`Loc`], and returns what it could read.

use crate::asl::{NumberOrPath, OptPath, Problem};
use crate::data::{intrinsics, jsonpath, payload};
use serde_json::{Map, Value};
use std::collections::HashSet;

/// Where a field lives: the state (if any) and the path of enclosing fields, e.g. state `Try`
/// with prefix `Retry[1].`.
#[derive(Debug, Clone)]
pub struct Loc {
    state: Option<String>,
    prefix: String,
}

impl Loc {
    pub fn top() -> Self {
        Loc {
            state: None,
            prefix: String::new(),
        }
    }

    pub fn state(name: &str) -> Self {
        Loc {
            state: Some(name.to_owned()),
            prefix: String::new(),
        }
    }

    /// The location of a field inside this one, e.g. `loc.nested("Retry[0]")`.
    pub fn nested(&self, segment: &str) -> Self {
        Loc {
            state: self.state.clone(),
            prefix: format!("{}{segment}.", self.prefix),
        }
    }

    /// The full name of `field` here; `""` names the location itself.
    pub fn field(&self, field: &str) -> String {
        if field.is_empty() {
            self.prefix.trim_end_matches('.').to_owned()
        } else {
            format!("{}{field}", self.prefix)
        }
    }
}

/// The problems found so far, plus the state names seen (they must be unique machine-wide).
#[derive(Debug, Default)]
pub struct Problems {
    list: Vec<Problem>,
    state_names: HashSet<String>,
}

impl Problems {
    pub fn push(&mut self, problem: Problem) {
        self.list.push(problem);
    }

    pub fn at(&mut self, loc: &Loc, field: &str, reason: impl Into<String>) {
        let field = loc.field(field);
        self.list.push(Problem {
            state: loc.state.clone(),
            field: (!field.is_empty()).then_some(field),
            reason: reason.into(),
        });
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub fn into_vec(self) -> Vec<Problem> {
        self.list
    }

    /// Records a state name; false if it was already seen.
    pub fn note_state_name(&mut self, name: &str) -> bool {
        self.state_names.insert(name.to_owned())
    }
}

/// Reports every key of `obj` not in `allowed`, with `describe(key)` as the reason.
pub fn check_fields(
    obj: &Map<String, Value>,
    allowed: &[&str],
    loc: &Loc,
    problems: &mut Problems,
    describe: impl Fn(&str) -> String,
) {
    for key in obj.keys().filter(|k| !allowed.contains(&k.as_str())) {
        problems.at(loc, key, describe(key));
    }
}

/// Checks `QueryLanguage`; true when it asks for JSONata (reported as unsupported).
pub fn query_language_is_jsonata(
    obj: &Map<String, Value>,
    loc: &Loc,
    problems: &mut Problems,
) -> bool {
    match obj.get("QueryLanguage") {
        None => false,
        Some(Value::String(s)) if s == "JSONPath" => false,
        Some(Value::String(s)) if s == "JSONata" => {
            problems.at(
                loc,
                "QueryLanguage",
                "JSONata is not supported by this engine; use the JSONPath query language",
            );
            true
        }
        Some(_) => {
            problems.at(
                loc,
                "QueryLanguage",
                "must be \"JSONPath\" (or \"JSONata\", which is not supported)",
            );
            false
        }
    }
}

/// A string field, if present.
pub fn string(
    obj: &Map<String, Value>,
    key: &str,
    loc: &Loc,
    problems: &mut Problems,
) -> Option<String> {
    match obj.get(key)? {
        Value::String(s) => Some(s.clone()),
        _ => {
            problems.at(loc, key, "must be a string");
            None
        }
    }
}

/// A required string field.
pub fn required_string(
    obj: &Map<String, Value>,
    key: &str,
    loc: &Loc,
    problems: &mut Problems,
) -> String {
    if !obj.contains_key(key) {
        problems.at(loc, key, "is required");
    }
    string(obj, key, loc, problems).unwrap_or_default()
}

/// A non-negative integer field of at least `min`, if present.
pub fn uint(
    obj: &Map<String, Value>,
    key: &str,
    min: u64,
    loc: &Loc,
    problems: &mut Problems,
) -> Option<u64> {
    let value = obj.get(key)?;
    let n = uint_value(value, key, min, loc, problems)?;
    Some(n)
}

fn uint_value(
    value: &Value,
    key: &str,
    min: u64,
    loc: &Loc,
    problems: &mut Problems,
) -> Option<u64> {
    let reason = match value {
        Value::Number(n) => match n.as_u64() {
            Some(v) if v >= min => return Some(v),
            _ if n.is_f64() => "must be an integer".to_owned(),
            _ if min == 0 => "must not be negative".to_owned(),
            _ => format!("must be an integer of at least {min}"),
        },
        _ => format!("must be an integer of at least {min}"),
    };
    problems.at(loc, key, reason);
    None
}

/// A number field (integer or not), if present.
pub fn number(
    obj: &Map<String, Value>,
    key: &str,
    loc: &Loc,
    problems: &mut Problems,
) -> Option<f64> {
    match obj.get(key)? {
        Value::Number(n) => n.as_f64(),
        _ => {
            problems.at(loc, key, "must be a number");
            None
        }
    }
}

/// A path field (`$…`, `$$…`, `$var…`), if present; checked with [`jsonpath::validate`].
pub fn path(
    obj: &Map<String, Value>,
    key: &str,
    loc: &Loc,
    problems: &mut Problems,
) -> Option<String> {
    let p = string(obj, key, loc, problems)?;
    check_path(&p, key, loc, problems);
    Some(p)
}

pub fn check_path(p: &str, key: &str, loc: &Loc, problems: &mut Problems) {
    if let Err(e) = jsonpath::validate(p) {
        problems.at(loc, key, format!("'{p}' is not a valid JSONPath: {e}"));
    }
}

/// A field holding a path or an intrinsic function call (Fail's `ErrorPath` / `CausePath`).
pub fn expression(
    obj: &Map<String, Value>,
    key: &str,
    loc: &Loc,
    problems: &mut Problems,
) -> Option<String> {
    let expr = string(obj, key, loc, problems)?;
    if expr.starts_with("States.") {
        if let Err(e) = intrinsics::validate(&expr) {
            problems.at(
                loc,
                key,
                format!("'{expr}' is not a valid intrinsic function call: {e}"),
            );
        }
    } else {
        check_path(&expr, key, loc, problems);
    }
    Some(expr)
}

/// `InputPath` / `OutputPath` / `ItemsPath` (`reference == false`) or `ResultPath`
/// (`reference == true`, checked with [`jsonpath::validate_reference`]). Absent → `$`,
/// explicit `null` → [`OptPath::Null`].
pub fn opt_path(
    obj: &Map<String, Value>,
    key: &str,
    reference: bool,
    loc: &Loc,
    problems: &mut Problems,
) -> OptPath {
    match obj.get(key) {
        None => OptPath::dollar(),
        Some(Value::Null) => OptPath::Null,
        Some(Value::String(p)) => {
            let checked = if reference {
                jsonpath::validate_reference(p)
            } else {
                jsonpath::validate(p)
            };
            if let Err(e) = checked {
                let kind = if reference {
                    "reference path"
                } else {
                    "JSONPath"
                };
                problems.at(loc, key, format!("'{p}' is not a valid {kind}: {e}"));
            }
            OptPath::Path(p.clone())
        }
        Some(_) => {
            problems.at(loc, key, "must be a path string or null");
            OptPath::dollar()
        }
    }
}

/// A payload template (`Parameters`, `ResultSelector`, `ItemSelector`), if present.
pub fn template(
    obj: &Map<String, Value>,
    key: &str,
    loc: &Loc,
    problems: &mut Problems,
) -> Option<Value> {
    let value = obj.get(key)?;
    if let Err(e) = payload::validate(value) {
        problems.at(loc, key, format!("is not a valid payload template: {e}"));
    }
    Some(value.clone())
}

/// JSONPath `Assign`: an object whose keys (minus a `.$` suffix) are variable names and whose
/// values form a payload template.
pub fn assign(obj: &Map<String, Value>, loc: &Loc, problems: &mut Problems) -> Option<Value> {
    let value = obj.get("Assign")?;
    let Some(vars) = value.as_object() else {
        problems.at(
            loc,
            "Assign",
            "must be an object mapping variable names to values",
        );
        return None;
    };
    for key in vars.keys() {
        let name = key.strip_suffix(".$").unwrap_or(key);
        if !is_variable_name(name) {
            problems.at(
                loc,
                "Assign",
                format!(
                    "'{name}' is not a valid variable name (a letter or '_' followed by letters, digits or '_')"
                ),
            );
        }
    }
    if let Err(e) = payload::validate(value) {
        problems.at(
            loc,
            "Assign",
            format!("is not a valid payload template: {e}"),
        );
    }
    Some(value.clone())
}

fn is_variable_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_alphabetic() || c == '_')
        && chars.all(|c| c.is_alphanumeric() || c == '_')
}

/// A number given either literally (`literal_key`, at least `min`) or by a path (`path_key`);
/// both at once is a problem.
pub fn number_or_path(
    obj: &Map<String, Value>,
    literal_key: &str,
    path_key: &str,
    min: u64,
    loc: &Loc,
    problems: &mut Problems,
) -> Option<NumberOrPath> {
    if obj.contains_key(literal_key) && obj.contains_key(path_key) {
        problems.at(
            loc,
            literal_key,
            format!("'{literal_key}' and '{path_key}' cannot both be set"),
        );
    }
    let literal = uint(obj, literal_key, min, loc, problems).map(NumberOrPath::Literal);
    let by_path = path(obj, path_key, loc, problems).map(NumberOrPath::Path);
    literal.or(by_path)
}

/// Reads a field that must be an array; `None` (with a problem) when it is something else.
pub fn array<'v>(
    obj: &'v Map<String, Value>,
    key: &str,
    loc: &Loc,
    problems: &mut Problems,
) -> Option<&'v Vec<Value>> {
    match obj.get(key)? {
        Value::Array(items) => Some(items),
        _ => {
            problems.at(loc, key, "must be an array");
            None
        }
    }
}
