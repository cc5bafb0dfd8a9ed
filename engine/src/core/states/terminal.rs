//! Succeed and Fail: the states that end their (sub)machine.

use super::super::errors::Failure;
use super::super::machine::Run;
use super::{effective_input, output};
use crate::asl::{FailSpec, State, StringOrPath, Transition};
use crate::data;

pub fn succeed(run: &mut Run, id: u64, state: &State) -> Result<(), Failure> {
    let effective = effective_input(run, id, state)?;
    let out = output(run, id, state, &effective)?;
    run.leave(id, out, None, Transition::End);
    Ok(())
}

pub fn fail(run: &mut Run, id: u64, spec: &FailSpec) -> Result<(), Failure> {
    let error = resolve(run, id, spec.error.as_ref(), "ErrorPath")?;
    let cause = resolve(run, id, spec.cause.as_ref(), "CausePath")?;
    Err(Failure {
        error,
        cause,
        terminal: false,
        heartbeat: false,
    })
}

fn resolve(
    run: &Run,
    id: u64,
    field: Option<&StringOrPath>,
    name: &str,
) -> Result<Option<String>, Failure> {
    match field {
        None => Ok(None),
        Some(StringOrPath::Literal(s)) => Ok(Some(s.clone())),
        Some(StringOrPath::Path(path)) => {
            let raw = &run.frame(id).input;
            let value = run
                .with_scope(id, raw, |s| data::eval_expression(path, name, s))
                .map_err(|e| run.data_failure(id, e))?;
            Ok(Some(super::text_of(&value)))
        }
    }
}
