//! The intrinsic functions themselves: evaluated arguments in, a value or a
//! `States.IntrinsicFailure` out. Number handling follows AWS (Java): integers stay integers,
//! and `States.MathAdd` rounds each operand half-up (`Math.round`) before adding.

use super::Evaluated;
use crate::data::random::Randomness;
use crate::data::{DataError, jsonpath::json_eq};
use base64::Engine as _;
use rand::{Rng, SeedableRng};
use serde_json::{Map, Number, Value};

/// AWS's documented input limit for the string functions (Base64, Hash).
const MAX_STRING_CHARS: usize = 10_000;
/// AWS's documented limit on the length of a `States.ArrayRange` result.
const MAX_RANGE_ITEMS: usize = 1_000;

const FUNCTIONS: &[&str] = &[
    "Format",
    "StringToJson",
    "JsonToString",
    "Array",
    "ArrayPartition",
    "ArrayContains",
    "ArrayRange",
    "ArrayGetItem",
    "ArrayLength",
    "ArrayUnique",
    "Base64Encode",
    "Base64Decode",
    "Hash",
    "JsonMerge",
    "MathRandom",
    "MathAdd",
    "StringSplit",
    "UUID",
];

pub(super) fn is_known(name: &str) -> bool {
    FUNCTIONS.contains(&name)
}

/// Applies function `name`; `random` is where `UUID` and an unseeded `MathRandom` draw from.
pub(super) fn apply(
    name: &str,
    args: Vec<Evaluated>,
    random: &Randomness,
) -> Result<Value, DataError> {
    let f = Invocation { name, args: &args };
    match name {
        "Format" => f.format(),
        "StringToJson" => {
            f.arity(1)?;
            let text = f.string(0)?;
            if text.trim().is_empty() {
                // AWS turns an empty or blank string into null rather than failing.
                return Ok(Value::Null);
            }
            let parsed: Value = serde_json::from_str(text)
                .map_err(|e| f.fail(format!("invalid JSON string: {e}")))?;
            // serde reads `-0` as the float -0.0; AWS (Jackson) yields the integer 0.
            Ok(match parsed.as_f64() {
                Some(n) if n == 0.0 && parsed.is_f64() && !text.contains(['.', 'e', 'E']) => {
                    Value::from(0)
                }
                _ => parsed,
            })
        }
        "JsonToString" => {
            f.arity(1)?;
            Ok(Value::String(f.value(0).to_string()))
        }
        "Array" => Ok(Value::Array(args.into_iter().map(|a| a.value).collect())),
        "ArrayPartition" => {
            f.arity(2)?;
            let size = f.integer(1)?;
            if size <= 0 {
                return Err(f.fail("the chunk size must be a positive integer"));
            }
            let size = usize::try_from(size).unwrap_or(usize::MAX);
            let chunks = f
                .array(0)?
                .chunks(size)
                .map(|c| Value::Array(c.to_vec()))
                .collect();
            Ok(Value::Array(chunks))
        }
        "ArrayContains" => {
            f.arity(2)?;
            Ok(Value::Bool(
                f.array(0)?.iter().any(|item| json_eq(item, f.value(1))),
            ))
        }
        "ArrayRange" => f.array_range(),
        "ArrayGetItem" => {
            f.arity(2)?;
            let items = f.array(0)?;
            let index = f.integer(1)?;
            usize::try_from(index)
                .ok()
                .and_then(|i| items.get(i))
                .cloned()
                .ok_or_else(|| f.fail(format!("index {index} is out of bounds")))
        }
        "ArrayLength" => {
            f.arity(1)?;
            Ok(Value::from(f.array(0)?.len()))
        }
        "ArrayUnique" => {
            f.arity(1)?;
            let mut unique: Vec<Value> = Vec::new();
            for item in f.array(0)? {
                if !unique.iter().any(|seen| json_eq(seen, item)) {
                    unique.push(item.clone());
                }
            }
            Ok(Value::Array(unique))
        }
        "Base64Encode" => {
            f.arity(1)?;
            let text = f.limited_string(0)?;
            Ok(Value::String(
                base64::engine::general_purpose::STANDARD.encode(text),
            ))
        }
        "Base64Decode" => {
            f.arity(1)?;
            let text = f.limited_string(0)?;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(text)
                .map_err(|e| f.fail(format!("invalid base64 string: {e}")))?;
            String::from_utf8(bytes)
                .map(Value::String)
                .map_err(|_| f.fail("the decoded data is not UTF-8 text"))
        }
        "Hash" => {
            f.arity(2)?;
            let data = f.limited_string(0)?.as_bytes();
            let digest = match f.string(1)? {
                "MD5" => digest::<md5::Md5>(data),
                "SHA-1" => digest::<sha1::Sha1>(data),
                "SHA-256" => digest::<sha2::Sha256>(data),
                "SHA-384" => digest::<sha2::Sha384>(data),
                "SHA-512" => digest::<sha2::Sha512>(data),
                other => {
                    return Err(f.fail(format!(
                        "unsupported hash algorithm '{other}' (expected MD5, SHA-1, SHA-256, \
                         SHA-384 or SHA-512)"
                    )));
                }
            };
            Ok(Value::String(digest))
        }
        "JsonMerge" => {
            f.arity(3)?;
            let (mut merged, overlay) = (f.object(0)?.clone(), f.object(1)?);
            if f.value(2) != &Value::Bool(false) {
                return Err(
                    f.fail("only shallow merging is supported: the third argument must be false")
                );
            }
            // Shallow: a key of the second object replaces the first's value wholesale.
            merged.extend(overlay.iter().map(|(k, v)| (k.clone(), v.clone())));
            Ok(Value::Object(merged))
        }
        "MathRandom" => f.math_random(random),
        "MathAdd" => {
            f.arity(2)?;
            let (a, b) = (f.rounded(0)?, f.rounded(1)?);
            a.checked_add(b)
                .map(Value::from)
                .ok_or_else(|| f.fail("the sum overflows"))
        }
        "StringSplit" => {
            f.arity(2)?;
            let (text, delimiters) = (f.string(0)?, f.string(1)?);
            // Every character of the second argument is a delimiter, and empty pieces are
            // dropped (AWS: `",,,,"` splits into `[]`).
            let parts = text
                .split(|c| delimiters.contains(c))
                .filter(|part| !part.is_empty())
                .map(|part| Value::String(part.to_owned()))
                .collect();
            Ok(Value::Array(parts))
        }
        "UUID" => {
            f.arity(0)?;
            Ok(Value::String(random.uuid().to_string()))
        }
        other => Err(DataError::intrinsic(format!(
            "Unknown intrinsic function 'States.{other}'"
        ))),
    }
}

fn digest<D: sha2::Digest>(data: &[u8]) -> String {
    D::digest(data)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// One call being applied: its name (for messages) and its arguments, with typed accessors.
struct Invocation<'a> {
    name: &'a str,
    args: &'a [Evaluated],
}

impl<'a> Invocation<'a> {
    fn fail(&self, why: impl std::fmt::Display) -> DataError {
        DataError::intrinsic(format!("Invalid arguments in States.{}: {why}", self.name))
    }

    fn arity(&self, n: usize) -> Result<(), DataError> {
        if self.args.len() == n {
            Ok(())
        } else {
            Err(self.fail(format!("expected {n} argument(s), got {}", self.args.len())))
        }
    }

    fn value(&self, i: usize) -> &'a Value {
        &self.args[i].value
    }

    fn type_error(&self, i: usize, expected: &str) -> DataError {
        self.fail(format!(
            "argument {} must be {expected}, got {}",
            i + 1,
            self.value(i)
        ))
    }

    fn string(&self, i: usize) -> Result<&'a str, DataError> {
        self.value(i)
            .as_str()
            .ok_or_else(|| self.type_error(i, "a string"))
    }

    fn limited_string(&self, i: usize) -> Result<&'a str, DataError> {
        let text = self.string(i)?;
        if text.chars().count() > MAX_STRING_CHARS {
            return Err(self.fail(format!("the input exceeds {MAX_STRING_CHARS} characters")));
        }
        Ok(text)
    }

    fn array(&self, i: usize) -> Result<&'a Vec<Value>, DataError> {
        self.value(i)
            .as_array()
            .ok_or_else(|| self.type_error(i, "an array"))
    }

    fn object(&self, i: usize) -> Result<&'a Map<String, Value>, DataError> {
        self.value(i)
            .as_object()
            .ok_or_else(|| self.type_error(i, "a JSON object"))
    }

    /// An integer argument; a float with an integral value (`2.0`) also counts.
    fn integer(&self, i: usize) -> Result<i64, DataError> {
        let n = self
            .value(i)
            .as_number()
            .ok_or_else(|| self.type_error(i, "an integer"))?;
        n.as_i64()
            .or_else(|| {
                n.as_f64()
                    .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
                    .map(|f| f as i64)
            })
            .ok_or_else(|| self.type_error(i, "an integer"))
    }

    /// A number rounded like Java's `Math.round` (half up: `-2.5` → `-2`).
    fn rounded(&self, i: usize) -> Result<i64, DataError> {
        let n = self
            .value(i)
            .as_number()
            .ok_or_else(|| self.type_error(i, "a number"))?;
        if let Some(int) = n.as_i64() {
            return Ok(int);
        }
        let f = n.as_f64().filter(|f| f.is_finite() && f.abs() < 9.0e18);
        f.map(|f| (f + 0.5).floor() as i64)
            .ok_or_else(|| self.type_error(i, "a number in range"))
    }

    fn format(&self) -> Result<Value, DataError> {
        if self.args.is_empty() {
            return Err(self.fail("expected a format string"));
        }
        self.string(0)?;
        // A literal keeps its escapes so `\{` is a brace, not half a placeholder; a template
        // read from a path has no escapes to honour.
        let template = match &self.args[0].raw {
            Some(raw) => raw.clone(),
            None => self.string(0)?.replace('\\', "\\\\"),
        };
        let mut values = self.args[1..].iter().map(|a| &a.value);
        let mut out = String::new();
        let mut chars = template.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' => out.extend(chars.next()),
                '{' if chars.peek() == Some(&'}') => {
                    chars.next();
                    let value = values
                        .next()
                        .ok_or_else(|| self.fail("more placeholders '{}' than arguments"))?;
                    out.push_str(&format_value(value));
                }
                c => out.push(c),
            }
        }
        if values.next().is_some() {
            return Err(self.fail("more arguments than placeholders '{}'"));
        }
        Ok(Value::String(out))
    }

    fn array_range(&self) -> Result<Value, DataError> {
        self.arity(3)?;
        let (start, end, step) = (self.integer(0)?, self.integer(1)?, self.integer(2)?);
        if step == 0 {
            return Err(self.fail("the step must not be 0"));
        }
        let mut items = Vec::new();
        let mut next = start;
        while (step > 0 && next <= end) || (step < 0 && next >= end) {
            if items.len() == MAX_RANGE_ITEMS {
                return Err(self.fail(format!("the range exceeds {MAX_RANGE_ITEMS} items")));
            }
            items.push(Value::from(next));
            match next.checked_add(step) {
                Some(n) => next = n,
                None => break,
            }
        }
        Ok(Value::Array(items))
    }

    fn math_random(&self, random: &Randomness) -> Result<Value, DataError> {
        if !(2..=3).contains(&self.args.len()) {
            return Err(self.fail(format!(
                "expected 2 or 3 arguments, got {}",
                self.args.len()
            )));
        }
        let (start, end) = (self.rounded(0)?, self.rounded(1)?);
        if start > end {
            return Err(self.fail("the start must not be greater than the end"));
        }
        let value = match self.args.len() {
            3 => {
                let seed = self.rounded(2)?;
                rand::rngs::StdRng::seed_from_u64(seed as u64).random_range(start..=end)
            }
            _ => random.between(start, end),
        };
        Ok(Value::Number(Number::from(value)))
    }
}

/// How `States.Format` prints an argument: strings bare, containers the way Java's
/// `Map`/`List` `toString` does (`{a=1, b=[x, y]}`), which is what AWS shows.
fn format_value(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(format_value).collect();
            format!("[{}]", inner.join(", "))
        }
        Value::Object(map) => {
            let inner: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{k}={}", format_value(v)))
                .collect();
            format!("{{{}}}", inner.join(", "))
        }
        other => other.to_string(),
    }
}
