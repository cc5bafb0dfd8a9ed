//! Intrinsic functions (`States.Format`, `States.Array`, …, `States.UUID`): the call syntax,
//! its evaluation against a [`Scope`], and (in `functions`) the functions themselves.
//!
//! Arguments are single-quoted string literals (backslash escapes `\'`, `\{`, `\}`, `\\`),
//! numbers, `true`/`false`/`null`, paths (`$.x`, `$$.x`, `$var`) and nested calls.

mod functions;

use super::cursor;
use super::{DataError, Scope, jsonpath};
use serde_json::Value;

/// Checks the syntax of an intrinsic call at definition time (known function, balanced
/// arguments, valid literal and path arguments).
pub fn validate(expr: &str) -> Result<(), String> {
    parse(expr).map(|_| ())
}

/// Evaluates an intrinsic call; failures are `States.IntrinsicFailure` (or `States.Runtime` for
/// a path argument that selects nothing), with AWS's messages where known.
pub fn eval(expr: &str, scope: &Scope) -> Result<Value, DataError> {
    let call = parse(expr).map_err(DataError::intrinsic)?;
    eval_call(&call, scope)
}

/// A parsed call: `States.<name>(<args>)`.
#[derive(Debug, Clone, PartialEq)]
struct Call {
    name: String,
    args: Vec<Arg>,
}

#[derive(Debug, Clone, PartialEq)]
enum Arg {
    /// A string literal; `raw` keeps its escapes, because `States.Format` must tell an
    /// escaped `\{` from a placeholder `{}`.
    Str {
        raw: String,
    },
    Literal(Value),
    Path(String),
    Call(Call),
}

/// An evaluated argument. `raw` is set for string literals (see [`Arg::Str`]).
#[derive(Debug, Clone)]
struct Evaluated {
    value: Value,
    raw: Option<String>,
}

fn eval_call(call: &Call, scope: &Scope) -> Result<Value, DataError> {
    let args = call
        .args
        .iter()
        .map(|arg| {
            Ok(match arg {
                Arg::Str { raw } => Evaluated {
                    value: Value::String(unescape(raw)),
                    raw: Some(raw.clone()),
                },
                Arg::Literal(value) => Evaluated {
                    value: value.clone(),
                    raw: None,
                },
                Arg::Path(path) => Evaluated {
                    value: jsonpath::select_for_filter(path, scope)?,
                    raw: None,
                },
                Arg::Call(inner) => Evaluated {
                    value: eval_call(inner, scope)?,
                    raw: None,
                },
            })
        })
        .collect::<Result<Vec<_>, DataError>>()?;
    functions::apply(&call.name, args, scope.random)
}

/// Resolves the backslash escapes of a string literal.
fn unescape(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            // `parse` guarantees a character follows every backslash.
            out.extend(chars.next());
        } else {
            out.push(c);
        }
    }
    out
}

fn parse(expr: &str) -> Result<Call, String> {
    let mut p = Parser::new(expr, "intrinsic function");
    p.skip_ws();
    let call = p.call()?;
    p.skip_ws();
    if !p.at_end() {
        return Err(p.error("unexpected text after the closing parenthesis"));
    }
    Ok(call)
}

/// The grammar of this module's [`Parser`].
enum IntrinsicCall {}

type Parser<'a> = cursor::Parser<'a, IntrinsicCall>;

impl Parser<'_> {
    fn call(&mut self) -> Result<Call, String> {
        if !self.starts_with("States.") {
            return Err(self.error("expected 'States.'"));
        }
        self.pos += "States.".len();
        let start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_alphanumeric()) {
            self.pos += 1;
        }
        let name: String = self.chars[start..self.pos].iter().collect();
        if !functions::is_known(&name) {
            self.pos = start;
            return Err(self.error(&format!("unknown function 'States.{name}'")));
        }
        self.skip_ws();
        if self.peek() != Some('(') {
            return Err(self.error("expected '('"));
        }
        self.pos += 1;
        let mut args = Vec::new();
        self.skip_ws();
        if self.peek() == Some(')') {
            self.pos += 1;
            return Ok(Call { name, args });
        }
        loop {
            self.skip_ws();
            args.push(self.arg()?);
            self.skip_ws();
            match self.peek() {
                Some(',') => self.pos += 1,
                Some(')') => {
                    self.pos += 1;
                    return Ok(Call { name, args });
                }
                _ => return Err(self.error("expected ',' or ')'")),
            }
        }
    }

    fn arg(&mut self) -> Result<Arg, String> {
        match self.peek() {
            Some('\'') => self.string(),
            Some('$') => self.path(),
            Some(c) if c == '-' || c.is_ascii_digit() => self.number(),
            _ if self.starts_with("States.") => Ok(Arg::Call(self.call()?)),
            _ => {
                for (word, value) in [
                    ("true", Value::Bool(true)),
                    ("false", Value::Bool(false)),
                    ("null", Value::Null),
                ] {
                    if self.starts_with(word) {
                        self.pos += word.len();
                        return Ok(Arg::Literal(value));
                    }
                }
                Err(self.error("expected an argument"))
            }
        }
    }

    fn string(&mut self) -> Result<Arg, String> {
        self.pos += 1;
        let start = self.pos;
        loop {
            match self.peek() {
                None => return Err(self.error("unterminated string literal")),
                Some('\\') => {
                    if self.chars.get(self.pos + 1).is_none() {
                        return Err(self.error("unterminated escape"));
                    }
                    self.pos += 2;
                }
                Some('\'') => {
                    let raw = self.chars[start..self.pos].iter().collect();
                    self.pos += 1;
                    return Ok(Arg::Str { raw });
                }
                Some(_) => self.pos += 1,
            }
        }
    }

    fn number(&mut self) -> Result<Arg, String> {
        let start = self.pos;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_digit() || "-+.eE".contains(c))
        {
            self.pos += 1;
        }
        let text: String = self.chars[start..self.pos].iter().collect();
        serde_json::from_str::<serde_json::Number>(&text)
            .map(|n| Arg::Literal(Value::Number(n)))
            .map_err(|_| self.error(&format!("invalid number '{text}'")))
    }

    /// A path runs to the next top-level `,` or `)`; brackets and quotes inside it (filters,
    /// quoted names) may hold either character.
    fn path(&mut self) -> Result<Arg, String> {
        let start = self.pos;
        let mut depth = 0usize;
        let mut quote: Option<char> = None;
        while let Some(c) = self.peek() {
            match (quote, c) {
                (Some(q), '\\') if self.chars.get(self.pos + 1) == Some(&q) => self.pos += 1,
                (Some(q), c) if c == q => quote = None,
                (Some(_), _) => {}
                (None, '\'' | '"') => quote = Some(c),
                (None, '[' | '(') => depth += 1,
                (None, ']') => depth = depth.saturating_sub(1),
                (None, ')') if depth == 0 => break,
                (None, ')') => depth -= 1,
                (None, ',') if depth == 0 => break,
                _ => {}
            }
            self.pos += 1;
        }
        let path: String = self.chars[start..self.pos]
            .iter()
            .collect::<String>()
            .trim_end()
            .to_owned();
        jsonpath::validate(&path)?;
        Ok(Arg::Path(path))
    }
}

#[cfg(test)]
mod tests;
