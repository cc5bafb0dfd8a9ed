//! Integers as JSON Schema reads them: a number whose fraction is zero is an integer, so the
//! request bodies the schemas accept are the ones the types deserialize.

use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// The largest whole number every `f64` below it represents exactly (2^53).
const MAX_EXACT_FLOAT: f64 = 9_007_199_254_740_992.0;

/// A JSON number that is a non-negative integer. JSON Schema counts a number whose fraction is
/// zero as an integer, so `30785.0` is `30785`; `1.5`, `-1` and numbers beyond 2^53 written
/// with a fraction or an exponent are not.
pub fn whole_number(value: &Value) -> Option<u64> {
    value.as_u64().or_else(|| {
        let f = value.as_f64()?;
        (f.fract() == 0.0 && (0.0..=MAX_EXACT_FLOAT).contains(&f)).then_some(f as u64)
    })
}

/// Deserializes an integer field as JSON Schema reads one: `7` or `7.0`.
pub fn whole<'de, D: Deserializer<'de>, N: TryFrom<u64>>(d: D) -> Result<N, D::Error> {
    let value = Value::deserialize(d)?;
    whole_number(&value)
        .and_then(|n| N::try_from(n).ok())
        .ok_or_else(|| serde::de::Error::custom(format!("{value} is not a whole number in range")))
}

/// [`whole`] for an optional field.
pub fn whole_opt<'de, D: Deserializer<'de>, N: TryFrom<u64>>(d: D) -> Result<Option<N>, D::Error> {
    whole(d).map(Some)
}
