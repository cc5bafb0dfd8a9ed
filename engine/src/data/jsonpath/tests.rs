use super::*;
use crate::data::random::{Randomness, Seed};
use proptest::prelude::*;
use serde_json::json;

fn with_input<T>(input: Value, f: impl FnOnce(&Scope) -> T) -> T {
    let context = json!({"Execution": {"Input": {"a": 1}, "Name": "exec"}});
    let mut variables = Map::new();
    variables.insert("answer".to_owned(), json!({"value": 42, "list": [1, 2]}));
    f(&Scope {
        input: &input,
        context: &context,
        variables: &variables,
        random: &Randomness::new(Seed::from_u64(0)),
    })
}

fn sel(path: &str, input: Value) -> Option<Value> {
    with_input(input, |scope| select(path, scope).expect("valid path"))
}

#[test]
fn definite_path_yields_the_value_itself() {
    assert_eq!(sel("$.a.b", json!({"a": {"b": [1]}})), Some(json!([1])));
    assert_eq!(sel("$", json!(7)), Some(json!(7)));
    assert_eq!(
        sel("$.items[0]", json!({"items": [{"k": 0}, {"k": 1}]})),
        Some(json!({"k": 0}))
    );
    assert_eq!(
        sel("$.items[-1]", json!({"items": [1, 2, 3]})),
        Some(json!(3))
    );
    assert_eq!(
        sel("$.input-value", json!({"input-value": 0})),
        Some(json!(0))
    );
}

#[test]
fn definite_path_that_misses_yields_none() {
    assert_eq!(sel("$.a.b", json!({})), None);
    assert_eq!(sel("$.items[5]", json!({"items": [1]})), None);
}

#[test]
fn indefinite_path_yields_array() {
    let input = json!({"items": [{"v": 1}, {"v": 2}, {"w": 3}]});
    assert_eq!(sel("$.items[*].v", input.clone()), Some(json!([1, 2])));
    assert_eq!(
        sel("$.items[1:]", input.clone()),
        Some(json!([{"v": 2}, {"w": 3}]))
    );
    assert_eq!(sel("$.items[:1]", input.clone()), Some(json!([{"v": 1}])));
    assert_eq!(
        sel("$.items[-2:]", input.clone()),
        Some(json!([{"v": 2}, {"w": 3}]))
    );
    assert_eq!(
        sel("$.items[0,2]", input.clone()),
        Some(json!([{"v": 1}, {"w": 3}]))
    );
    assert_eq!(sel("$..v", input.clone()), Some(json!([1, 2])));
    assert_eq!(
        sel("$.items.*", json!({"items": {"x": 1, "y": 2}})),
        Some(json!([1, 2]))
    );
}

#[test]
fn indefinite_path_over_missing_input_is_empty_array() {
    for path in [
        "$[*]",
        "$.items[*]",
        "$.item.items[1:5].itemValue",
        "$.items[:1]",
    ] {
        assert_eq!(sel(path, json!({})), Some(json!([])), "{path}");
    }
}

#[test]
fn filters_select_matching_elements() {
    let input = json!({"users": [{"year": 1997, "status": 0}, {"year": 1998, "status": 1}]});
    assert_eq!(
        sel("$.users[?(@.status == 0)]", input.clone()),
        Some(json!([{"year": 1997, "status": 0}]))
    );
    assert_eq!(
        sel("$.users[?(@.year > 1997)].status", input.clone()),
        Some(json!([1]))
    );
    assert_eq!(
        sel(
            "$.users[?(@.year >= 1997 && @.status != 0)].year",
            input.clone()
        ),
        Some(json!([1998]))
    );
    assert_eq!(
        sel(
            "$.users[?(@.year < 1997 || @.status == 1)].year",
            input.clone()
        ),
        Some(json!([1998]))
    );
    assert_eq!(sel("$.users[?(@.missing)]", input.clone()), Some(json!([])));
    assert_eq!(sel("$.users[?(@.year)].status", input), Some(json!([0, 1])));
    assert_eq!(
        sel(
            "$.s[?(@.n == 'x')].v",
            json!({"s": [{"n": "x", "v": 1}, {"n": "y", "v": 2}]})
        ),
        Some(json!([1]))
    );
}

#[test]
fn bracket_names_keep_backslashes_that_do_not_escape_the_quote() {
    let input = json!({"Test\\\"\"Name\"": "Value\"\\"});
    assert_eq!(sel(r#"$['Test\""Name"']"#, input), Some(json!("Value\"\\")));
    assert_eq!(sel(r"$['it\'s']", json!({"it's": 1})), Some(json!(1)));
}

#[test]
fn context_and_variables_are_roots() {
    assert_eq!(sel("$$.Execution.Input.a", json!({})), Some(json!(1)));
    assert_eq!(sel("$answer.value", json!({})), Some(json!(42)));
    assert_eq!(sel("$answer.list[1]", json!({})), Some(json!(2)));
    assert_eq!(sel("$nosuch", json!({})), None);
}

#[test]
fn filter_path_errors_use_jayway_messages() {
    let err = with_input(json!({"int-literal": 0}), |s| {
        select_for_filter("$.NoSuchInputPath", s)
    })
    .expect_err("missing");
    assert_eq!(err.error, "States.Runtime");
    assert_eq!(
        err.message,
        "Invalid path '$.NoSuchInputPath' : No results for path: $['NoSuchInputPath']"
    );
    let err = with_input(json!({}), |s| select_for_filter("$.no.such.result.path", s))
        .expect_err("missing");
    assert_eq!(
        err.message,
        "Invalid path '$.no.such.result.path' : Missing property in path $['no']"
    );
}

#[test]
fn field_errors_quote_the_input() {
    let err = with_input(json!({"int-literal": 0}), |s| {
        select_for_field("$.no_such_jsonpath", "value.$", s)
    })
    .expect_err("missing");
    assert_eq!(
        err.message,
        "The JSONPath '$.no_such_jsonpath' specified for the field 'value.$' could not be found \
         in the input '{\"int-literal\":0}'"
    );
}

#[test]
fn put_creates_missing_objects_and_replaces_on_dollar() {
    assert_eq!(put("$", &json!({"a": 1}), json!(2)).ok(), Some(json!(2)));
    assert_eq!(
        put("$.x.y", &json!({"a": 1}), json!(2)).ok(),
        Some(json!({"a": 1, "x": {"y": 2}}))
    );
    assert_eq!(
        put("$.a", &json!({"a": 1}), json!([3])).ok(),
        Some(json!({"a": [3]}))
    );
    assert_eq!(
        put("$.l[1]", &json!({"l": [0, 0]}), json!(5)).ok(),
        Some(json!({"l": [0, 5]}))
    );
}

#[test]
fn put_through_a_non_object_is_a_result_path_match_failure() {
    let err = put("$.a.b", &json!({"a": "text"}), json!(1)).expect_err("mismatch");
    assert_eq!(err.error, "States.ResultPathMatchFailure");
    let err = put("$.a", &json!("text"), json!(1)).expect_err("mismatch");
    assert_eq!(err.error, "States.ResultPathMatchFailure");
}

#[test]
fn reference_paths_reject_indefinite_segments() {
    assert!(validate_reference("$.a.b[0]").is_ok());
    assert!(validate_reference("$").is_ok());
    for bad in [
        "$.a[*]",
        "$..a",
        "$.a[1:2]",
        "$.a[?(@.x)]",
        "$.a[-1]",
        "$$.a",
        "$var",
        "a",
    ] {
        assert!(validate_reference(bad).is_err(), "{bad}");
    }
}

#[test]
fn malformed_paths_are_rejected() {
    for bad in [
        "",
        "a.b",
        "$.",
        "$[",
        "$['a'",
        "$.a[?(@.x ==)]",
        "$[1",
        "$.a]",
    ] {
        assert!(validate(bad).is_err(), "{bad}");
    }
}

proptest! {
    #[test]
    fn parser_never_panics(text in "\\PC*") {
        let _ = validate(&text);
    }

    #[test]
    fn parser_never_panics_on_path_like_text(text in "\\$[\\$a-z0-9\\.\\[\\]\\*\\?\\(\\)@=<>!&|:,' -]{0,20}") {
        let _ = validate(&text);
        let _ = with_input(json!({"a": [1, {"b": 2}]}), |s| select(&text, s).map(|_| ()));
    }

    #[test]
    fn put_then_select_returns_the_value(
        names in proptest::collection::vec("[a-z]{1,4}", 1..4),
        value in any::<i64>(),
    ) {
        let path = format!("$.{}", names.join("."));
        let written = put(&path, &json!({"keep": true}), json!(value)).expect("put");
        prop_assert_eq!(sel(&path, written.clone()), Some(json!(value)));
        if names[0] != "keep" {
            prop_assert_eq!(&written["keep"], &json!(true));
        }
    }
}
