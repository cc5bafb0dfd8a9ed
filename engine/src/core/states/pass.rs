//! Pass: passes its input (or `Result`, or `Parameters`) to its output.

use super::super::errors::Failure;
use super::super::machine::Run;
use super::parameters_input;
use crate::asl::{PassSpec, State};

pub fn run(run: &mut Run, id: u64, state: &State, spec: &PassSpec) -> Result<(), Failure> {
    let result = match &spec.result {
        // `Result` is literal, but InputPath still has to select something.
        Some(result) => {
            super::effective_input(run, id, state)?;
            result.clone()
        }
        None => parameters_input(run, id, state)?,
    };
    run.complete_with_result(id, result);
    Ok(())
}
