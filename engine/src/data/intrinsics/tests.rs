use super::*;
use crate::data::random::{Randomness, Seed};
use proptest::prelude::*;
use serde_json::{Map, json};
use std::sync::atomic::{AtomicU64, Ordering};

/// Every evaluation draws from a seed of its own, so repeated calls of a random function vary.
fn run(expr: &str, input: Value) -> Result<Value, DataError> {
    static SEEDS: AtomicU64 = AtomicU64::new(0);
    let random = Randomness::new(Seed::from_u64(SEEDS.fetch_add(1, Ordering::Relaxed)));
    let context = json!({"StateMachine": {"Id": "arn:sm", "Name": "my-state-machine"}});
    let mut variables = Map::new();
    variables.insert("template".to_owned(), json!("It's {}!"));
    eval(
        expr,
        &Scope {
            input: &input,
            context: &context,
            variables: &variables,
            random: &random,
        },
    )
}

fn ok(expr: &str, input: Value) -> Value {
    run(expr, input).unwrap_or_else(|e| panic!("{expr}: {e}"))
}

#[test]
fn format_fills_placeholders_in_order() {
    let input = json!({"a": "x", "n": null, "f": 1.1, "o": {"Arg1": 1, "Arg2": []}});
    assert_eq!(
        ok("States.Format('{} and {}.', $.a, $.n)", input.clone()),
        json!("x and null.")
    );
    assert_eq!(
        ok("States.Format('v={}', $.f)", input.clone()),
        json!("v=1.1")
    );
    assert_eq!(
        ok("States.Format('o={}', $.o)", input.clone()),
        json!("o={Arg1=1, Arg2=[]}")
    );
    assert_eq!(
        ok("States.Format($template, 'Pikachu')", input),
        json!("It's Pikachu!")
    );
}

#[test]
fn format_honours_escapes() {
    assert_eq!(
        ok(r"States.Format('\{\} {} it\'s \\', 1)", json!({})),
        json!(r"{} 1 it's \")
    );
}

#[test]
fn format_with_wrong_argument_count_fails() {
    let err = run("States.Format('{} {}', 1)", json!({})).expect_err("too few");
    assert_eq!(err.error, "States.IntrinsicFailure");
    assert!(run("States.Format('{}', 1, 2)", json!({})).is_err());
}

#[test]
fn string_to_json_parses_and_blank_is_null() {
    assert_eq!(
        ok("States.StringToJson($.s)", json!({"s": "[1, 2, \"x\"]"})),
        json!([1, 2, "x"])
    );
    assert_eq!(
        ok("States.StringToJson($.s)", json!({"s": " "})),
        json!(null)
    );
    assert_eq!(ok("States.StringToJson($.s)", json!({"s": "-0"})), json!(0));
    assert!(run("States.StringToJson('{')", json!({})).is_err());
}

#[test]
fn json_to_string_is_compact() {
    assert_eq!(
        ok("States.JsonToString($)", json!({"Arg1": 1, "Arg2": []})),
        json!("{\"Arg1\":1,\"Arg2\":[]}")
    );
    assert_eq!(
        ok("States.JsonToString($.s)", json!({"s": "Hi"})),
        json!("\"Hi\"")
    );
}

#[test]
fn array_functions_follow_aws() {
    assert_eq!(ok("States.Array()", json!({})), json!([]));
    assert_eq!(
        ok("States.Array('a', 1, true, null, $.x)", json!({"x": [1]})),
        json!(["a", 1, true, null, [1]])
    );
    assert_eq!(
        ok("States.ArrayPartition($, 3)", json!([0, 1, 2, 3])),
        json!([[0, 1, 2], [3]])
    );
    assert_eq!(ok("States.ArrayPartition($, 2)", json!([])), json!([]));
    assert_eq!(
        ok("States.ArrayContains($, $[0])", json!([[1, 2], 2])),
        json!(true)
    );
    assert_eq!(
        ok("States.ArrayContains($, 3)", json!([1.0, 3.0])),
        json!(true)
    );
    assert_eq!(
        ok("States.ArrayRange(0, 10, 3)", json!({})),
        json!([0, 3, 6, 9])
    );
    assert_eq!(ok("States.ArrayRange(1, 9, 9)", json!({})), json!([1]));
    assert_eq!(
        ok("States.ArrayRange(5, 1, -2)", json!({})),
        json!([5, 3, 1])
    );
    assert_eq!(
        ok("States.ArrayGetItem($, 5)", json!([1, 2, 3, 4, 5, 6])),
        json!(6)
    );
    assert_eq!(ok("States.ArrayLength($)", json!([1, 2, 3])), json!(3));
    assert_eq!(
        ok(
            "States.ArrayUnique($)",
            json!([1, 1, "a", "a", {"a": 1}, {"a": 1}])
        ),
        json!([1, "a", {"a": 1}])
    );
}

#[test]
fn bad_array_arguments_fail() {
    for expr in [
        "States.ArrayPartition($, 0)",
        "States.ArrayGetItem($, 9)",
        "States.ArrayRange(0, 1, 0)",
        "States.ArrayRange(0, 5000, 1)",
        "States.ArrayLength('x')",
        "States.ArrayLength($, 1)",
    ] {
        let err = run(expr, json!([1])).expect_err(expr);
        assert_eq!(err.error, "States.IntrinsicFailure", "{expr}");
    }
}

#[test]
fn encoding_and_hashes_match_aws() {
    assert_eq!(
        ok("States.Base64Encode('Data to encode')", json!({})),
        json!("RGF0YSB0byBlbmNvZGU=")
    );
    assert_eq!(
        ok("States.Base64Decode('RGF0YSB0byBlbmNvZGU=')", json!({})),
        json!("Data to encode")
    );
    assert_eq!(ok("States.Base64Decode('')", json!({})), json!(""));
    assert!(run("States.Base64Decode('***')", json!({})).is_err());
    let cases = [
        ("MD5", "812f45842bc6d66ee14572ce20db8e86"),
        ("SHA-1", "aaff4a450a104cd177d28d18d74485e8cae074b7"),
        (
            "SHA-256",
            "b4a697a057313163aee33cd8d40c66e9f0f177e00cac2de32475ffff6169c3e3",
        ),
    ];
    for (algorithm, hex) in cases {
        assert_eq!(
            ok(
                &format!("States.Hash('input data', '{algorithm}')"),
                json!({})
            ),
            json!(hex)
        );
    }
    assert!(run("States.Hash('x', 'SHA-3')", json!({})).is_err());
}

#[test]
fn json_merge_is_shallow_and_rejects_deep() {
    let input = json!({"a": {"a": {"a1": 1}, "b": 2}, "b": {"a": {"a3": 1}, "c": 3}});
    assert_eq!(
        ok("States.JsonMerge($.a, $.b, false)", input.clone()),
        json!({"a": {"a3": 1}, "b": 2, "c": 3})
    );
    assert!(run("States.JsonMerge($.a, $.b, true)", input).is_err());
}

#[test]
fn math_add_rounds_each_operand_half_up() {
    let add = |a: Value, b: Value| ok("States.MathAdd($.a, $.b)", json!({"a": a, "b": b}));
    assert_eq!(add(json!(-9), json!(3)), json!(-6));
    assert_eq!(add(json!(1.49), json!(1.5)), json!(3));
    assert_eq!(add(json!(-1.49), json!(-1.5)), json!(-2));
    assert_eq!(add(json!(-0.5), json!(0.5)), json!(1));
    assert_eq!(add(json!(-2.5), json!(0)), json!(-2));
    assert_eq!(add(json!(2.5), json!(0)), json!(3));
}

#[test]
fn math_random_stays_in_range_and_seed_repeats() {
    for _ in 0..50 {
        let n = ok("States.MathRandom(1, 5)", json!({}))
            .as_i64()
            .expect("int");
        assert!((1..=5).contains(&n));
    }
    let seeded = ok("States.MathRandom(0, 999, 3)", json!({}));
    assert_eq!(seeded, ok("States.MathRandom(0, 999, 3)", json!({})));
}

#[test]
fn string_split_uses_every_delimiter_char_and_drops_empties() {
    assert_eq!(ok("States.StringSplit(',,,,', ',')", json!({})), json!([]));
    assert_eq!(
        ok("States.StringSplit(' , ', ',')", json!({})),
        json!([" ", " "])
    );
    assert_eq!(
        ok(
            "States.StringSplit('This.is+a,test=string', '.+,=')",
            json!({})
        ),
        json!(["This", "is", "a", "test", "string"])
    );
}

#[test]
fn uuid_is_a_v4() {
    let id = ok("States.UUID()", json!({}));
    let parsed = uuid::Uuid::parse_str(id.as_str().expect("string")).expect("uuid");
    assert_eq!(parsed.get_version_num(), 4);
}

#[test]
fn nested_calls_and_context_paths_evaluate() {
    let expr = "States.ArrayGetItem(States.StringSplit($$.StateMachine.Name, '-'), \
                States.MathAdd(States.ArrayLength(States.StringSplit($$.StateMachine.Name, '-')), -1))";
    assert_eq!(ok(expr, json!({})), json!("machine"));
    let merged = ok(
        "States.JsonMerge(States.StringToJson('{\"k\": \"false\"}'), $.o, false)",
        json!({"o": {"x": 1}}),
    );
    assert_eq!(merged, json!({"k": "false", "x": 1}));
}

#[test]
fn missing_path_argument_is_a_runtime_error() {
    let err = run("States.Array($.nope)", json!({})).expect_err("missing");
    assert_eq!(err.error, "States.Runtime");
}

#[test]
fn validation_rejects_malformed_calls() {
    assert!(validate("States.Format('{}', $.a[?(@.x == 'a,b')])").is_ok());
    for bad in [
        "States.Nope()",
        "States.Array(",
        "States.Array('x)",
        "States.Array(1 2)",
        "States.Array($.)",
        "States.Array() x",
        "Format('x')",
        "States.Array(foo)",
    ] {
        assert!(validate(bad).is_err(), "{bad}");
    }
}

proptest! {
    #[test]
    fn base64_round_trips(text in "\\PC{0,200}") {
        let input = json!({"s": text});
        let encoded = ok("States.Base64Encode($.s)", input);
        let decoded = ok("States.Base64Decode($.e)", json!({"e": encoded}));
        prop_assert_eq!(decoded, json!(text));
    }

    #[test]
    fn json_string_round_trips(value in arb_json()) {
        let text = ok("States.JsonToString($.v)", json!({"v": value.clone()}));
        let back = ok("States.StringToJson($.t)", json!({"t": text}));
        prop_assert_eq!(back, value);
    }

    #[test]
    fn parser_never_panics(text in "States\\.[A-Za-z]{0,12}\\([ -~]{0,30}") {
        let _ = validate(&text);
        let _ = run(&text, json!({"a": 1}));
    }
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        "[a-z ]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map("[a-z]{1,4}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}
