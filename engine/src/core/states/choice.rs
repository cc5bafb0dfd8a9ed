//! Choice: picks the first rule that matches, or the Default.

use super::super::errors::Failure;
use super::super::machine::Run;
use super::{effective_input, output};
use crate::asl::{ChoiceSpec, State, Transition, choice};

pub fn run(run: &mut Run, id: u64, state: &State, spec: &ChoiceSpec) -> Result<(), Failure> {
    let effective = effective_input(run, id, state)?;
    for branch in &spec.choices {
        let matched = run
            .with_scope(id, &effective, |s| choice::evaluate(&branch.rule, s))
            .map_err(|e| run.data_failure(id, e))?;
        if matched {
            let assigned = run.evaluate_assign(id, branch.assign.as_ref(), &effective)?;
            let out = output(run, id, state, &effective)?;
            run.leave(id, out, assigned, Transition::Next(branch.next.clone()));
            return Ok(());
        }
    }
    match &spec.default {
        Some(default) => {
            let assigned = run.evaluate_assign(id, state.assign.as_ref(), &effective)?;
            let out = output(run, id, state, &effective)?;
            run.leave(id, out, assigned, Transition::Next(default.clone()));
            Ok(())
        }
        None => {
            let frame = run.frame(id);
            Err(Failure {
                error: Some("States.NoChoiceMatched".to_owned()),
                cause: Some(format!(
                    "An error occurred while executing the state '{}' (entered at the event id #{}). No Choice rule matched and no Default is given.",
                    frame.state, frame.entered_event_id
                )),
                terminal: false,
                heartbeat: false,
            })
        }
    }
}
