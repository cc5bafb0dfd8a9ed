//! The corpus's placeholder matching rules (`shared/conformance/README.md`, "Matching rule for
//! placeholders"), ported from the reference matcher `check_corpus.py --compare`. It follows the
//! reference step for step, including which match of a pattern binds a numbered placeholder, so
//! that a case passes here exactly when it passes there.

use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use std::fmt;

/// Placeholders that stand for a value of any JSON type: the recorder overwrote the whole value.
const ANY_VALUE_PLACEHOLDERS: [&str; 2] = ["<timestamp>", "<RandomNumberGenerated>"];

/// What an execution produced, in the shape `check_corpus.py --compare` reads.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ActualResult {
    pub status: String,
    /// The parsed output; `null` unless the execution succeeded.
    pub output: Value,
    pub error: Option<String>,
    pub cause: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub states_entered: Option<Vec<String>>,
}

/// Why a result does not match: `where` names the field or JSON path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch(pub String);

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Texts bound to numbered placeholders (`<uuid:1>`) so far in one case.
type Bindings = HashMap<String, String>;

/// Checks `actual` against a case's `expected` block (and `expected_states_entered`, when the
/// case has it and the result carries states). The order of the checks, and so which mismatch is
/// reported and which text a numbered placeholder binds first, is the reference's.
pub fn compare(
    expected: &Value,
    expected_states_entered: Option<&[String]>,
    actual: &ActualResult,
) -> Result<(), Mismatch> {
    let mut bind = Bindings::new();
    let status = expected.get("status").and_then(Value::as_str).unwrap_or("");
    if actual.status != status {
        return Err(Mismatch(format!(
            "status: expected {status}, got {}",
            actual.status
        )));
    }
    if status == "SUCCEEDED" {
        let output = expected.get("output").unwrap_or(&Value::Null);
        match_value(output, &actual.output, &mut bind, "$output")?;
    }
    for (field, got) in [("error", &actual.error), ("cause", &actual.cause)] {
        // An absent key means "not recorded": nothing to check.
        let Some(want) = expected.get(field) else {
            continue;
        };
        let got = got
            .as_ref()
            .map_or(Value::Null, |s| Value::String(s.clone()));
        if want.is_null() {
            if !got.is_null() {
                return Err(Mismatch(format!(
                    "{field}: expected none, got {}",
                    short(&got)
                )));
            }
        } else {
            match_text_or_json(want, &got, &mut bind, field)?;
        }
    }
    if let (Some(want), Some(got)) = (expected_states_entered, &actual.states_entered) {
        if want != got.as_slice() {
            return Err(Mismatch(format!(
                "states_entered: expected {want:?}, got {got:?}"
            )));
        }
    }
    Ok(())
}

/// Rules 1–4: `actual` satisfies the expected value `expected`.
fn match_value(
    expected: &Value,
    actual: &Value,
    bind: &mut Bindings,
    path: &str,
) -> Result<(), Mismatch> {
    let mismatch = || {
        Err(Mismatch(format!(
            "{path}: expected {}, got {}",
            short(expected),
            short(actual)
        )))
    };
    match expected {
        Value::String(pattern) if has_placeholder(pattern) => {
            if ANY_VALUE_PLACEHOLDERS.contains(&pattern.as_str()) {
                return Ok(());
            }
            match actual {
                Value::String(text) => match_pattern(pattern, text, bind, path),
                _ => mismatch(),
            }
        }
        Value::Null | Value::Bool(_) | Value::String(_) => {
            if expected == actual {
                Ok(())
            } else {
                mismatch()
            }
        }
        Value::Number(want) => match actual {
            Value::Number(got) if numbers_equal(want, got) => Ok(()),
            _ => mismatch(),
        },
        Value::Array(want) => match actual {
            Value::Array(got) if got.len() == want.len() => {
                for (i, (e, a)) in want.iter().zip(got).enumerate() {
                    match_value(e, a, bind, &format!("{path}[{i}]"))?;
                }
                Ok(())
            }
            _ => Err(Mismatch(format!(
                "{path}: expected a list of {} items, got {}",
                want.len(),
                short(actual)
            ))),
        },
        Value::Object(want) => match actual {
            Value::Object(got)
                if got.len() == want.len() && want.keys().all(|k| got.contains_key(k)) =>
            {
                // Expected's key order, as the reference walks it: it decides which occurrence of
                // a numbered placeholder binds first.
                for (k, e) in want {
                    match_value(e, &got[k], bind, &format!("{path}.{k}"))?;
                }
                Ok(())
            }
            _ => Err(Mismatch(format!(
                "{path}: expected keys {:?}, got {}",
                want.keys().collect::<Vec<_>>(),
                short(actual)
            ))),
        },
    }
}

/// Rule 5, for `error`/`cause`: when the text does not match but both sides are JSON texts,
/// compare the parsed values (the formatting of error JSON is not significant).
fn match_text_or_json(
    expected: &Value,
    actual: &Value,
    bind: &mut Bindings,
    path: &str,
) -> Result<(), Mismatch> {
    let Err(first) = match_value(expected, actual, bind, path) else {
        return Ok(());
    };
    let (Value::String(want), Value::String(got)) = (expected, actual) else {
        return Err(first);
    };
    match (
        serde_json::from_str::<Value>(want),
        serde_json::from_str::<Value>(got),
    ) {
        (Ok(want), Ok(got)) => match_value(&want, &got, bind, path),
        _ => Err(Mismatch(format!(
            "{path}: {} does not match {}",
            short_str(got),
            short_str(want)
        ))),
    }
}

/// Numbers compare by value, integers exactly (as Python compares `int` with `float`).
fn numbers_equal(a: &serde_json::Number, b: &serde_json::Number) -> bool {
    fn int(n: &serde_json::Number) -> Option<i128> {
        n.as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
    }
    fn float_is_int(f: f64, i: i128) -> bool {
        // `f` is integral and in i128's range here, so the cast is exact.
        f.is_finite() && f.fract() == 0.0 && f.abs() < 1.7e38 && f as i128 == i
    }
    match (int(a), int(b)) {
        (Some(x), Some(y)) => x == y,
        (Some(i), None) => b.as_f64().is_some_and(|f| float_is_int(f, i)),
        (None, Some(i)) => a.as_f64().is_some_and(|f| float_is_int(f, i)),
        (None, None) => a.as_f64() == b.as_f64(),
    }
}

/// One piece of a pattern string, as the reference compiles it into a regular expression.
#[derive(Debug, PartialEq)]
enum Piece<'a> {
    Literal(&'a str),
    /// `(?P<gN>.*?)`: the placeholder's first occurrence in this string (or an unnumbered one).
    Capture {
        token: &'a str,
    },
    /// `(?P=gN)`: a later occurrence of a numbered placeholder in the same string.
    BackRef {
        group: usize,
    },
}

/// Rules 2–3: each placeholder stands for any run of characters, the rest is literal; a numbered
/// placeholder stands for the same text everywhere in the case.
///
/// Like the reference (Python's `re.fullmatch` with lazy groups), the text a numbered placeholder
/// takes is the one of the first match found, trying shorter captures first from left to right;
/// only then is it checked against the bindings from earlier strings.
fn match_pattern(
    pattern: &str,
    text: &str,
    bind: &mut Bindings,
    path: &str,
) -> Result<(), Mismatch> {
    let pieces = compile(pattern);
    let mut captures = Vec::new();
    if !match_pieces(&pieces, text, 0, &mut captures) {
        return Err(Mismatch(format!(
            "{path}: {} does not match {}",
            short_str(text),
            short_str(pattern)
        )));
    }
    let tokens = pieces.iter().filter_map(|p| match p {
        Piece::Capture { token } => Some(*token),
        _ => None,
    });
    for (token, &(start, end)) in tokens.zip(&captures) {
        if !is_numbered(token) {
            continue;
        }
        let value = &text[start..end];
        let bound = bind
            .entry(token.to_owned())
            .or_insert_with(|| value.to_owned());
        if bound != value {
            return Err(Mismatch(format!(
                "{path}: {token} bound to {} and {}",
                short_str(bound),
                short_str(value)
            )));
        }
    }
    Ok(())
}

fn compile(pattern: &str) -> Vec<Piece<'_>> {
    let mut pieces = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    let mut pos = 0;
    for (start, end) in placeholders(pattern) {
        pieces.push(Piece::Literal(&pattern[pos..start]));
        let token = &pattern[start..end];
        match seen.iter().position(|t| *t == token) {
            Some(group) if is_numbered(token) => pieces.push(Piece::BackRef { group }),
            _ => {
                seen.push(token);
                pieces.push(Piece::Capture { token });
            }
        }
        pos = end;
    }
    pieces.push(Piece::Literal(&pattern[pos..]));
    pieces
}

/// Backtracking full match; `captures` holds the (start, end) of each capture so far. Captures
/// try the shortest run first, which makes the first match found the one Python's lazy `.*?`
/// finds.
fn match_pieces(
    pieces: &[Piece<'_>],
    text: &str,
    pos: usize,
    captures: &mut Vec<(usize, usize)>,
) -> bool {
    let Some((piece, rest)) = pieces.split_first() else {
        return pos == text.len();
    };
    match piece {
        Piece::Literal(lit) => {
            text[pos..].starts_with(lit) && match_pieces(rest, text, pos + lit.len(), captures)
        }
        Piece::BackRef { group } => {
            let (s, e) = captures[*group];
            let earlier = &text[s..e];
            text[pos..].starts_with(earlier)
                && match_pieces(rest, text, pos + earlier.len(), captures)
        }
        Piece::Capture { .. } => {
            let ends = text[pos..]
                .char_indices()
                .map(|(i, _)| pos + i)
                .chain([text.len()]);
            for end in ends {
                captures.push((pos, end));
                if match_pieces(rest, text, end, captures) {
                    return true;
                }
                captures.pop();
            }
            false
        }
    }
}

fn has_placeholder(s: &str) -> bool {
    placeholders(s).next().is_some()
}

/// Byte ranges of the placeholders in `s`, left to right, without overlap: tokens matching
/// `<[A-Za-z][A-Za-z0-9_.-]*(:[0-9]+)?>`.
fn placeholders(s: &str) -> impl Iterator<Item = (usize, usize)> + '_ {
    let bytes = s.as_bytes();
    let mut from = 0;
    std::iter::from_fn(move || {
        while let Some(offset) = bytes[from..].iter().position(|&b| b == b'<') {
            let start = from + offset;
            if let Some(len) = placeholder_len(&bytes[start..]) {
                from = start + len;
                return Some((start, start + len));
            }
            from = start + 1;
        }
        from = bytes.len();
        None
    })
}

/// The length of the placeholder at the start of `b` (which begins with `<`), if there is one.
fn placeholder_len(b: &[u8]) -> Option<usize> {
    let name_char = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-');
    if !b.get(1)?.is_ascii_alphabetic() {
        return None;
    }
    let mut i = 2;
    while b.get(i).is_some_and(|&c| name_char(c)) {
        i += 1;
    }
    if b.get(i) == Some(&b':') {
        let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        // The name charset has no ':', so without digits and a '>' after them there is no
        // placeholder here at all.
        if digits > 0 && b.get(i + 1 + digits) == Some(&b'>') {
            return Some(i + 2 + digits);
        }
        return None;
    }
    (b.get(i) == Some(&b'>')).then_some(i + 1)
}

/// Numbered placeholders (`<uuid:1>`) end in `:digits>`.
fn is_numbered(token: &str) -> bool {
    token
        .strip_suffix('>')
        .and_then(|t| t.rsplit_once(':'))
        .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// A JSON value for a one-line message, cut to about 300 characters.
pub fn short(v: &Value) -> String {
    truncate(v.to_string())
}

fn short_str(s: &str) -> String {
    truncate(format!("{s:?}"))
}

pub fn truncate(mut s: String) -> String {
    const MAX: usize = 300;
    if s.chars().count() > MAX {
        let cut = s.char_indices().nth(MAX).map_or(s.len(), |(i, _)| i);
        s.truncate(cut);
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ok(expected: Value, actual: Value) -> bool {
        match_value(&expected, &actual, &mut Bindings::new(), "$").is_ok()
    }

    fn succeeded(output: Value) -> ActualResult {
        ActualResult {
            status: "SUCCEEDED".into(),
            output,
            error: None,
            cause: None,
            states_entered: None,
        }
    }

    fn failed(error: Option<&str>, cause: Option<&str>) -> ActualResult {
        ActualResult {
            status: "FAILED".into(),
            output: Value::Null,
            error: error.map(str::to_owned),
            cause: cause.map(str::to_owned),
            states_entered: None,
        }
    }

    #[test]
    fn finds_placeholder_tokens_like_the_reference_regex() {
        let found = |s: &'static str| -> Vec<&'static str> {
            placeholders(s).map(|(a, b)| &s[a..b]).collect()
        };
        assert_eq!(found("<uuid:1>-<date>"), ["<uuid:1>", "<date>"]);
        assert_eq!(found("<<a>>"), ["<a>"]);
        assert_eq!(found("<1a> <a b> <a:> <a:1x> <> x<y.z-w_9>"), ["<y.z-w_9>"]);
        assert_eq!(found("arn:<partition>:states"), ["<partition>"]);
        assert!(is_numbered("<json-input:12>"));
        assert!(!is_numbered("<ArnPart_0idx>"));
    }

    #[test]
    fn whole_placeholder_matches_any_string_only() {
        assert!(ok(json!("<date>"), json!("2024-01-01T00:00:00Z")));
        assert!(ok(json!("<date>"), json!("")));
        assert!(!ok(json!("<date>"), json!(12)));
        assert!(ok(json!("<timestamp>"), json!(12)));
        assert!(ok(json!("<RandomNumberGenerated>"), json!({"a": [1]})));
        assert!(ok(json!("not <a placeholder"), json!("not <a placeholder")));
    }

    #[test]
    fn mixed_text_treats_placeholders_as_any_run() {
        let arn = json!("arn:<partition>:states:<region>:111111111111:stateMachine:<ArnPart_0idx>");
        assert!(ok(
            arn.clone(),
            json!("arn:aws:states:us-east-1:111111111111:stateMachine:sm")
        ));
        assert!(!ok(
            arn,
            json!("arn:aws:states:us-east-1:123456789012:stateMachine:sm")
        ));
        assert!(ok(json!("a<x>b<x>c"), json!("abc")));
        assert!(ok(json!("line <x> end"), json!("line 1\n2 end")));
    }

    #[test]
    fn numbered_placeholders_bind_across_the_case() {
        let expected =
            json!({"status": "SUCCEEDED", "output": {"a": "<uuid:1>", "b": ["x-<uuid:1>"]}});
        let same = succeeded(json!({"a": "u1", "b": ["x-u1"]}));
        let other = succeeded(json!({"a": "u1", "b": ["x-u2"]}));
        assert_eq!(compare(&expected, None, &same), Ok(()));
        assert!(compare(&expected, None, &other).is_err());
        // Within one string, a repeat is a back-reference.
        assert!(ok(json!("<n:1>/<n:1>"), json!("ab/ab")));
        assert!(!ok(json!("<n:1>/<n:1>"), json!("ab/ac")));
    }

    #[test]
    fn binds_the_shortest_first_capture_like_the_reference() {
        // The lazy first match binds <u:1> to "a"; the second string then needs "a" again,
        // even though "a-b" would have made both strings match.
        let expected = json!({"status": "SUCCEEDED", "output": ["<u:1>-<u:2>", "<u:1>"]});
        assert!(compare(&expected, None, &succeeded(json!(["a-b-c", "a"]))).is_ok());
        assert!(compare(&expected, None, &succeeded(json!(["a-b-c", "a-b"]))).is_err());
    }

    #[test]
    fn plain_json_compares_structurally() {
        assert!(ok(
            json!({"a": 1, "b": [true, null]}),
            json!({"b": [true, null], "a": 1.0})
        ));
        assert!(!ok(json!({"a": 1}), json!({"a": 1, "b": 2})));
        assert!(!ok(json!([1, 2]), json!([2, 1])));
        assert!(!ok(json!(1), json!(true)));
        assert!(!ok(json!(0), json!(false)));
        assert!(!ok(json!(null), json!("null")));
        assert!(!ok(json!(1.5), json!(1)));
        assert!(ok(json!(u64::MAX), json!(u64::MAX)));
        assert!(!ok(json!(9007199254740993_i64), json!(9007199254740992.0)));
    }

    #[test]
    fn error_and_cause_fall_back_to_json() {
        let expected =
            json!({"status": "FAILED", "error": "E", "cause": "{\"a\": 1, \"b\": \"<uuid:1>\"}"});
        assert!(
            compare(
                &expected,
                None,
                &failed(Some("E"), Some(r#"{"b":"x","a":1}"#))
            )
            .is_ok()
        );
        assert!(
            compare(
                &expected,
                None,
                &failed(Some("E"), Some(r#"{"a":2,"b":"x"}"#))
            )
            .is_err()
        );
        assert!(compare(&expected, None, &failed(Some("E"), Some("not json"))).is_err());
        assert!(compare(&expected, None, &failed(Some("E"), None)).is_err());
    }

    #[test]
    fn null_error_means_none_and_absent_means_unchecked() {
        let none = json!({"status": "FAILED", "error": null, "cause": null});
        assert!(compare(&none, None, &failed(None, None)).is_ok());
        assert!(compare(&none, None, &failed(Some("E"), None)).is_err());
        let unrecorded = json!({"status": "FAILED"});
        assert!(compare(&unrecorded, None, &failed(Some("E"), Some("c"))).is_ok());
        assert!(compare(&unrecorded, None, &succeeded(json!(1))).is_err());
    }

    /// `matcher_fixtures.json` holds results derived from every corpus case, each with the
    /// reference matcher's verdict (see `gen_matcher_fixtures.py`); the port must agree on
    /// every one.
    #[test]
    fn agrees_with_the_reference_matcher() {
        #[derive(serde::Deserialize)]
        struct Fixture {
            name: String,
            expected: Value,
            expected_states_entered: Option<Vec<String>>,
            results: Vec<Verdict>,
        }
        #[derive(serde::Deserialize)]
        struct Verdict {
            result: Value,
            mismatch: Option<String>,
        }
        let fixtures: Vec<Fixture> =
            serde_json::from_str(include_str!("matcher_fixtures.json")).unwrap();
        let mut disagreements = Vec::new();
        let mut checked = 0;
        for fixture in &fixtures {
            for verdict in &fixture.results {
                let r = &verdict.result;
                let text = |k: &str| r[k].as_str().map(str::to_owned);
                let actual = ActualResult {
                    status: r["status"].as_str().unwrap().to_owned(),
                    output: r["output"].clone(),
                    error: text("error"),
                    cause: text("cause"),
                    states_entered: r
                        .get("states_entered")
                        .map(|s| serde_json::from_value(s.clone()).unwrap()),
                };
                let ours = compare(
                    &fixture.expected,
                    fixture.expected_states_entered.as_deref(),
                    &actual,
                );
                checked += 1;
                if ours.is_ok() != verdict.mismatch.is_none() {
                    disagreements.push(format!(
                        "{}: reference {:?}, port {:?} for {}",
                        fixture.name,
                        verdict.mismatch,
                        ours,
                        short(r)
                    ));
                }
            }
        }
        assert!(checked > 1000, "only {checked} fixtures");
        assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
    }

    #[test]
    fn states_entered_compared_when_both_sides_have_them() {
        let expected = json!({"status": "SUCCEEDED", "output": 1});
        let want = vec!["A".to_owned(), "B".to_owned()];
        let mut got = succeeded(json!(1));
        assert!(compare(&expected, Some(&want), &got).is_ok());
        got.states_entered = Some(want.clone());
        assert!(compare(&expected, Some(&want), &got).is_ok());
        got.states_entered = Some(vec!["A".into()]);
        assert!(compare(&expected, Some(&want), &got).is_err());
    }
}
