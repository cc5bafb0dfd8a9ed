//! The children of Parallel and Map states: starting them (within MaxConcurrency), collecting
//! their results in order, and failing the parent when one fails beyond what it tolerates.

use super::super::errors::Failure;
use super::super::machine::{ChildKind, Children, FrameWait, Run};
use serde_json::{Value, json};

fn children<'r>(run: &'r mut Run, parent: u64) -> Option<&'r mut Children> {
    match &mut run.st.frames.get_mut(&parent)?.wait {
        FrameWait::Children(c) => Some(c),
        _ => None,
    }
}

/// Starts children while there is capacity, then completes the parent when all are done.
/// Children that finish synchronously (all-Pass branches) only record their result while this
/// loop runs, so a long Map does not recurse once per item.
pub fn launch(run: &mut Run, parent: u64) {
    let Some(epoch) = children(run, parent).map(|c| c.epoch) else {
        return;
    };
    run.launching.push(parent);
    while let Some(c) = children(run, parent) {
        if c.epoch != epoch {
            break;
        }
        let limit = if c.max_concurrency == 0 {
            usize::MAX
        } else {
            c.max_concurrency
        };
        if c.running >= limit || c.next_index >= c.inputs.len() {
            break;
        }
        let index = c.next_index;
        c.next_index += 1;
        c.running += 1;
        let kind = c.kind;
        let input = std::mem::take(&mut c.inputs[index]);
        let branch = if kind == ChildKind::Map { 0 } else { index };
        let child = run.spawn_child(parent, index, branch);
        if kind == ChildKind::Map {
            let name = run.frame(parent).state.clone();
            run.emit(
                Some(child),
                "MapIterationStarted",
                Some(json!({"name": name, "index": index})),
            );
        }
        run.start_child(child, input);
    }
    run.launching.pop();
    complete_if_done(run, parent, epoch);
}

fn complete_if_done(run: &mut Run, parent: u64, epoch: u64) {
    let Some(c) = children(run, parent) else {
        return;
    };
    if c.epoch != epoch || c.running > 0 || c.next_index < c.inputs.len() {
        return;
    }
    let kind = c.kind;
    let results: Vec<Value> = c
        .results
        .iter_mut()
        .map(|r| r.take().unwrap_or(Value::Null))
        .collect();
    run.frame_mut(parent).wait = FrameWait::Running;
    let event = match kind {
        ChildKind::Parallel => "ParallelStateSucceeded",
        ChildKind::Map => "MapStateSucceeded",
    };
    run.emit(Some(parent), event, None);
    run.complete_with_result(parent, Value::Array(results));
}

pub fn child_done(run: &mut Run, parent: u64, index: usize, output: Value) {
    let Some(c) = children(run, parent) else {
        return;
    };
    c.results[index] = Some(output);
    c.running -= 1;
    let kind = c.kind;
    if kind == ChildKind::Map {
        let name = run.frame(parent).state.clone();
        run.emit(
            Some(parent),
            "MapIterationSucceeded",
            Some(json!({"name": name, "index": index})),
        );
    }
    if !run.launching.contains(&parent) {
        launch(run, parent);
    }
}

pub fn child_failed(run: &mut Run, parent: u64, index: usize, failure: Failure) {
    run.preserve(parent);
    let Some(c) = children(run, parent) else {
        return;
    };
    c.running -= 1;
    c.failures += 1;
    let kind = c.kind;
    let total = c.inputs.len();
    let tolerated = c.tolerated;
    let failures = c.failures;
    if kind == ChildKind::Map {
        let name = run.frame(parent).state.clone();
        run.emit(
            Some(parent),
            "MapIterationFailed",
            Some(json!({"name": name, "index": index})),
        );
    }
    // Either limit that is set fails the Map when exceeded; an absent limit never does.
    let within = tolerated.is_some_and(|t| {
        let by_count = t.count.is_none_or(|n| failures as u64 <= n);
        let by_pct = t
            .percentage
            .is_none_or(|p| (failures as f64) * 100.0 / (total as f64) <= p);
        by_count && by_pct
    });
    if within {
        run.failing = None;
        if let Some(c) = children(run, parent) {
            c.results[index] = Some(failure.to_output());
        }
        if !run.launching.contains(&parent) {
            launch(run, parent);
        }
        return;
    }
    // Abandon the siblings, then let the parent state's Retry/Catch see the failure.
    let siblings: Vec<u64> = run
        .st
        .frames
        .iter()
        .filter(|(_, f)| f.parent.map(|(p, _)| p) == Some(parent))
        .map(|(id, _)| *id)
        .collect();
    for s in siblings {
        run.abort_frame(s);
    }
    run.frame_mut(parent).wait = FrameWait::Running;
    let (event, failure) = match kind {
        ChildKind::Parallel => ("ParallelStateFailed", failure),
        ChildKind::Map if tolerated.is_some() => (
            "MapStateFailed",
            Failure::new(
                "States.ExceedToleratedFailureThreshold",
                "The specified tolerated failure threshold was exceeded",
            ),
        ),
        ChildKind::Map => ("MapStateFailed", failure),
    };
    run.emit(Some(parent), event, None);
    run.state_failed(parent, failure);
}
