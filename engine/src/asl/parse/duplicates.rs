//! Finds state names defined twice in the same `States` object. `serde_json::Value` keeps only
//! the last of duplicate keys, so this walks the JSON text with a serde visitor that knows
//! where `States` objects occur: at the top, in each Parallel branch and in a Map's
//! `ItemProcessor` / `Iterator`. Duplicate keys elsewhere (inside `Parameters`, say) are left
//! alone.

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::collections::HashSet;
use std::fmt;

/// The duplicated names, in the order their second occurrence appears. Empty if the text is
/// not valid JSON (the caller reports that).
pub fn duplicate_state_names(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut de = serde_json::Deserializer::from_str(text);
    let walk = Walk {
        at: At::Machine,
        found: &mut found,
    };
    if walk.deserialize(&mut de).is_err() {
        return Vec::new();
    }
    found
}

/// What the value being visited is, as far as `States` objects are concerned.
#[derive(Debug, Clone, Copy, PartialEq)]
enum At {
    /// A state machine, branch or item processor.
    Machine,
    /// A `States` object: its keys are state names.
    States,
    /// One state.
    State,
    /// A Parallel state's `Branches` array.
    Branches,
    /// Anything else.
    Other,
}

struct Walk<'a> {
    at: At,
    found: &'a mut Vec<String>,
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        if self.at == At::Other {
            // Nothing below can hold a `States` object that matters.
            IgnoredAny::deserialize(deserializer).map(|_| ())
        } else {
            deserializer.deserialize_any(self)
        }
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let child = if self.at == At::Branches {
            At::Machine
        } else {
            At::Other
        };
        while seq
            .next_element_seed(Walk {
                at: child,
                found: &mut *self.found,
            })?
            .is_some()
        {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let child = match (self.at, key.as_str()) {
                (At::Machine, "States") => At::States,
                (At::States, _) => At::State,
                (At::State, "Branches") => At::Branches,
                (At::State, "ItemProcessor" | "Iterator") => At::Machine,
                _ => At::Other,
            };
            if self.at == At::States && !seen.insert(key.clone()) {
                self.found.push(key);
            }
            map.next_value_seed(Walk {
                at: child,
                found: &mut *self.found,
            })?;
        }
        Ok(())
    }
}
