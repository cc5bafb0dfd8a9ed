use super::{evaluate, string_matches};
use crate::asl::{Kind, Op, Operand, Rule, parse_value};
use crate::data::Scope;
use crate::data::random::{Randomness, Seed};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

/// Parses `rule` (a top-level Choice rule without `Next`) through the real parser.
fn rule(rule: Value) -> Rule {
    let mut rule = rule;
    rule["Next"] = json!("Yes");
    let definition = json!({
        "StartAt": "C",
        "States": {
            "C": {"Type": "Choice", "Choices": [rule], "Default": "No"},
            "Yes": {"Type": "Succeed"},
            "No": {"Type": "Succeed"}
        }
    });
    let machine = parse_value(&definition).unwrap_or_else(|e| panic!("{e}"));
    match &machine.state("C").map(|s| &s.kind) {
        Some(Kind::Choice(c)) => c.choices[0].rule.clone(),
        other => panic!("no Choice state: {other:?}"),
    }
}

fn eval_with(
    r: &Rule,
    input: &Value,
    variables: &Map<String, Value>,
) -> Result<bool, crate::data::DataError> {
    let context = json!({"Execution": {"Name": "exec-1"}});
    evaluate(
        r,
        &Scope {
            input,
            context: &context,
            variables,
            random: &Randomness::new(Seed::from_u64(0)),
        },
    )
}

fn eval(r: Value, input: Value) -> bool {
    eval_with(&rule(r), &input, &Map::new()).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs every case of the recorded `choice_operators` corpus: the branch AWS took is the name of
/// the Pass state whose literal `Result` became the output (`{"TestResult.$": "<state>"}`).
#[test]
fn choice_operator_corpus_matches_aws() {
    let dir = crate::conformance_cases().join("choice_operators");
    let entries =
        std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
    let mut paths: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    let mut failures = Vec::new();
    for path in &paths {
        let case: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let name = case["name"].as_str().unwrap_or_default().to_owned();
        let expected = case["expected"]["output"]["TestResult.$"]
            .as_str()
            .unwrap_or_default();
        let machine = match parse_value(&case["definition"]) {
            Ok(m) => m,
            Err(e) => {
                failures.push(format!("{name}: rejected: {e}"));
                continue;
            }
        };
        let choice = machine.states.values().find_map(|s| match &s.kind {
            Kind::Choice(c) => Some(c),
            _ => None,
        });
        let Some(choice) = choice else {
            failures.push(format!("{name}: no Choice state"));
            continue;
        };
        let mut taken = None;
        for branch in &choice.choices {
            match eval_with(&branch.rule, &case["input"], &Map::new()) {
                Ok(true) => {
                    taken = Some(branch.next.clone());
                    break;
                }
                Ok(false) => {}
                Err(e) => {
                    taken = Some(format!("error {e}"));
                    break;
                }
            }
        }
        let taken = taken.or_else(|| choice.default.clone()).unwrap_or_default();
        if taken != expected {
            failures.push(format!("{name}: took {taken}, AWS took {expected}"));
        }
    }
    assert!(
        paths.len() >= 378,
        "expected the 378 corpus cases, found {}",
        paths.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        paths.len(),
        failures.join("\n")
    );
}

#[test]
fn string_comparisons_are_exact_and_by_code_point() {
    assert!(eval(
        json!({"Variable": "$.v", "StringEquals": "Hello"}),
        json!({"v": "Hello"})
    ));
    assert!(!eval(
        json!({"Variable": "$.v", "StringEquals": "Hello"}),
        json!({"v": "hello"})
    ));
    assert!(eval(
        json!({"Variable": "$.v", "StringLessThan": "b"}),
        json!({"v": "a"})
    ));
    assert!(eval(
        json!({"Variable": "$.v", "StringLessThan": "a"}),
        json!({"v": "B"})
    ));
    assert!(eval(
        json!({"Variable": "$.v", "StringGreaterThan": "z"}),
        json!({"v": "é"})
    ));
    assert!(eval(
        json!({"Variable": "$.v", "StringLessThanEquals": "ab"}),
        json!({"v": "ab"})
    ));
    assert!(eval(
        json!({"Variable": "$.v", "StringGreaterThanEquals": "a"}),
        json!({"v": "ab"})
    ));
}

#[test]
fn numbers_compare_by_value_whatever_their_notation() {
    assert!(eval(
        json!({"Variable": "$.v", "NumericEquals": 1}),
        json!({"v": 1.0})
    ));
    assert!(eval(
        json!({"Variable": "$.v", "NumericLessThan": 1.5}),
        json!({"v": 1})
    ));
    assert!(eval(
        json!({"Variable": "$.v", "NumericGreaterThan": -1}),
        json!({"v": 0})
    ));
    assert!(eval(
        json!({"Variable": "$.v", "NumericLessThanEquals": 2}),
        json!({"v": 2})
    ));
    assert!(eval(
        json!({"Variable": "$.v", "NumericGreaterThanEquals": 2}),
        json!({"v": 2.5})
    ));
    assert!(!eval(
        json!({"Variable": "$.v", "NumericEquals": 1}),
        json!({"v": "1"})
    ));
}

#[test]
fn mismatched_types_are_false_not_errors() {
    for (op, operand) in [
        ("StringEquals", json!("1")),
        ("NumericEquals", json!(1)),
        ("BooleanEquals", json!(true)),
        ("TimestampEquals", json!("2012-10-09T19:00:55Z")),
        ("StringMatches", json!("*")),
    ] {
        for value in [json!(null), json!([1]), json!({"a": 1})] {
            let mut r = json!({"Variable": "$.v"});
            r[op] = operand.clone();
            assert!(!eval(r, json!({"v": value})), "{op} on {value}");
        }
    }
}

#[test]
fn timestamps_compare_as_instants_and_reject_non_timestamps() {
    let same_instant = json!({"v": "2012-10-09T20:00:55+01:00"});
    assert!(eval(
        json!({"Variable": "$.v", "TimestampEquals": "2012-10-09T19:00:55Z"}),
        same_instant
    ));
    assert!(eval(
        json!({"Variable": "$.v", "TimestampLessThan": "2012-10-09T19:00:55Z"}),
        json!({"v": "2012-10-09T19:00:54.999Z"})
    ));
    assert!(!eval(
        json!({"Variable": "$.v", "TimestampLessThan": "2012-10-09T19:00:55Z"}),
        json!({"v": "2012-10-09T19:00:54"})
    ));
    assert!(eval(
        json!({"Variable": "$.v", "IsTimestamp": true}),
        json!({"v": "2012-10-09T19:00:55Z"})
    ));
    assert!(eval(
        json!({"Variable": "$.v", "IsTimestamp": false}),
        json!({"v": "2012-10-09"})
    ));
}

#[test]
fn type_tests_compare_with_their_boolean_operand() {
    assert!(eval(
        json!({"Variable": "$.v", "IsString": false}),
        json!({"v": 3})
    ));
    assert!(!eval(
        json!({"Variable": "$.v", "IsString": false}),
        json!({"v": "3"})
    ));
    assert!(eval(
        json!({"Variable": "$.v", "IsNull": true}),
        json!({"v": null})
    ));
    assert!(eval(
        json!({"Variable": "$.v", "IsNumeric": true}),
        json!({"v": 1.5})
    ));
    assert!(eval(
        json!({"Variable": "$.v", "IsBoolean": true}),
        json!({"v": false})
    ));
}

#[test]
fn is_present_tests_presence_without_failing() {
    assert!(eval(
        json!({"Variable": "$.v", "IsPresent": false}),
        json!({})
    ));
    assert!(eval(
        json!({"Variable": "$.v", "IsPresent": true}),
        json!({"v": null})
    ));
    assert!(!eval(
        json!({"Variable": "$.v.w", "IsPresent": true}),
        json!({"v": 1})
    ));
}

#[test]
fn missing_variable_is_a_runtime_error_with_aws_message() {
    let err = eval_with(
        &rule(json!({"Variable": "$.nope", "IsNull": true})),
        &json!({}),
        &Map::new(),
    )
    .unwrap_err();
    assert_eq!(err.error, "States.Runtime");
    assert_eq!(
        err.message,
        "Invalid path '$.nope': The choice state's condition path references an invalid value."
    );
}

#[test]
fn missing_operand_path_is_a_runtime_error() {
    let r = rule(json!({"Variable": "$.a", "StringEqualsPath": "$.b"}));
    let err = eval_with(&r, &json!({"a": "x"}), &Map::new()).unwrap_err();
    assert_eq!(err.error, "States.Runtime");
    assert!(err.message.contains("'$.b'"), "{}", err.message);
    assert!(eval_with(&r, &json!({"a": "x", "b": "x"}), &Map::new()).unwrap());
}

#[test]
fn path_operands_read_the_second_value_from_the_input() {
    assert!(eval(
        json!({"Variable": "$.a", "NumericLessThanPath": "$.b"}),
        json!({"a": 1, "b": 2})
    ));
    assert!(eval(
        json!({"Variable": "$.a", "BooleanEqualsPath": "$.b"}),
        json!({"a": true, "b": true})
    ));
    assert!(!eval(
        json!({"Variable": "$.a", "BooleanEqualsPath": "$.b"}),
        json!({"a": true, "b": "true"})
    ));
}

#[test]
fn variables_and_context_are_visible_to_rules() {
    let mut vars = Map::new();
    vars.insert("limit".to_owned(), json!(10));
    let r = rule(json!({"Variable": "$limit", "NumericGreaterThan": 5}));
    assert!(eval_with(&r, &json!({}), &vars).unwrap());
    let r = rule(json!({"Variable": "$$.Execution.Name", "StringEquals": "exec-1"}));
    assert!(eval_with(&r, &json!({}), &Map::new()).unwrap());
}

#[test]
fn combinators_follow_boolean_logic_and_short_circuit() {
    let input = json!({"a": 1});
    let yes = json!({"Variable": "$.a", "NumericEquals": 1});
    let no = json!({"Variable": "$.a", "NumericEquals": 2});
    let missing = json!({"Variable": "$.missing", "NumericEquals": 2});
    assert!(eval(
        json!({"And": [yes.clone(), yes.clone()]}),
        input.clone()
    ));
    assert!(!eval(
        json!({"And": [yes.clone(), no.clone()]}),
        input.clone()
    ));
    assert!(eval(
        json!({"Or": [no.clone(), yes.clone()]}),
        input.clone()
    ));
    assert!(eval(json!({"Not": no.clone()}), input.clone()));
    // The missing path is never evaluated.
    assert!(!eval(
        json!({"And": [no.clone(), missing.clone()]}),
        input.clone()
    ));
    assert!(eval(json!({"Or": [yes, missing]}), input));
}

#[test]
fn string_matches_handles_wildcards_and_escapes() {
    assert!(string_matches("log.txt", "*.txt"));
    assert!(string_matches("a.txt.txt", "*.txt"));
    assert!(!string_matches("log.txt.bak", "*.txt"));
    assert!(string_matches("abc", "a*c"));
    assert!(string_matches("ac", "a*c"));
    assert!(string_matches("anything", "*"));
    assert!(string_matches("", "*"));
    assert!(!string_matches("", "a"));
    assert!(string_matches("a*b", r"a\*b"));
    assert!(!string_matches("axb", r"a\*b"));
    assert!(string_matches(r"a\b", r"a\\b"));
    assert!(string_matches("x-y-z", "*-*-*"));
    assert!(!string_matches("x-y", "*-*-*"));
}

/// A comparison rule built directly, bypassing the parser, so that proptest can vary it.
fn compare(op: Op, operand: Value) -> Rule {
    Rule::Compare {
        variable: "$.v".to_owned(),
        op,
        operand: Operand::Literal(operand),
    }
}

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(|n| json!(n)),
        (-1e6f64..1e6).prop_map(|f| json!(f)),
        "[a-c*\\\\]{0,4}".prop_map(Value::String),
        Just(json!("2012-10-09T19:00:55Z")),
    ]
}

fn any_op() -> impl Strategy<Value = Op> {
    use Op::*;
    prop::sample::select(vec![
        StringEquals,
        StringLessThan,
        StringGreaterThanEquals,
        StringMatches,
        NumericEquals,
        NumericLessThan,
        NumericGreaterThanEquals,
        BooleanEquals,
        TimestampEquals,
        TimestampLessThanEquals,
        IsNull,
        IsPresent,
        IsNumeric,
        IsString,
        IsBoolean,
        IsTimestamp,
    ])
}

proptest! {
    #[test]
    fn not_negates_every_comparison(op in any_op(), operand in json_leaf(), value in json_leaf()) {
        let r = compare(op, operand);
        let input = json!({"v": value});
        let vars = Map::new();
        let plain = eval_with(&r, &input, &vars).unwrap();
        let negated = eval_with(&Rule::Not(Box::new(r)), &input, &vars).unwrap();
        prop_assert_eq!(negated, !plain);
    }

    #[test]
    fn patterns_without_wildcards_match_only_themselves(s in "[a-z.]{0,6}", t in "[a-z.]{0,6}") {
        prop_assert_eq!(string_matches(&s, &t), s == t);
    }

    #[test]
    fn a_star_on_either_side_matches_any_superstring(pre in "[a-z]{0,4}", mid in "[a-z]{0,4}", post in "[a-z]{0,4}") {
        let s = format!("{pre}{mid}{post}");
        let pattern = format!("*{mid}*");
        prop_assert!(string_matches(&s, &pattern));
    }

    #[test]
    fn and_or_agree_with_their_parts(a in any::<bool>(), b in any::<bool>()) {
        let lit = |x: bool| compare(Op::BooleanEquals, json!(x));
        let input = json!({"v": true});
        let vars = Map::new();
        let and = eval_with(&Rule::And(vec![lit(a), lit(b)]), &input, &vars).unwrap();
        let or = eval_with(&Rule::Or(vec![lit(a), lit(b)]), &input, &vars).unwrap();
        prop_assert_eq!(and, a && b);
        prop_assert_eq!(or, a || b);
    }
}
