//! Amazon States Language definitions: the typed model, the parser with its validation, and
//! Choice rule evaluation.

pub mod choice;
mod model;
mod parse;
pub mod timestamp;

pub use model::*;
pub use parse::{parse, parse_value};

use std::fmt;

/// One problem found in a definition: where it is and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The state the problem is in (`None` for the top level).
    pub state: Option<String>,
    /// The field, e.g. `Next`, `Retry[1].ErrorEquals`.
    pub field: Option<String>,
    pub reason: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.state, &self.field) {
            (Some(s), Some(fl)) => write!(f, "state '{s}', field '{fl}': {}", self.reason),
            (Some(s), None) => write!(f, "state '{s}': {}", self.reason),
            (None, Some(fl)) => write!(f, "field '{fl}': {}", self.reason),
            (None, None) => write!(f, "{}", self.reason),
        }
    }
}

/// A definition was rejected. Lists every problem found, in a stable order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct DefinitionError {
    pub problems: Vec<Problem>,
}

impl fmt::Display for DefinitionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Invalid State Machine Definition: ")?;
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                write!(f, "; ")?;
            }
            write!(f, "{p}")?;
        }
        Ok(())
    }
}
