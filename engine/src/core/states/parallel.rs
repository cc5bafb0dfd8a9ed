//! Parallel: runs every branch on the same input and outputs their results in branch order.

use super::super::errors::Failure;
use super::super::machine::{ChildKind, Children, FrameWait, Run};
use super::{children, parameters_input};
use crate::asl::{ParallelSpec, State};

pub fn run(run: &mut Run, id: u64, state: &State, spec: &ParallelSpec) -> Result<(), Failure> {
    let input = parameters_input(run, id, state)?;
    let epoch = run.emit(Some(id), "ParallelStateStarted", None);
    let n = spec.branches.len();
    run.frame_mut(id).wait = FrameWait::Children(Children {
        kind: ChildKind::Parallel,
        epoch,
        inputs: vec![input; n],
        results: vec![None; n],
        next_index: 0,
        running: 0,
        max_concurrency: 0,
        failures: 0,
        tolerated: None,
    });
    children::launch(run, id);
    Ok(())
}
