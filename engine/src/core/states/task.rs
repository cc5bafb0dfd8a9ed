//! Task: hands its effective input to an activity worker or an in-process handler, and waits
//! for the answer, a timeout, or a missed heartbeat.

use super::super::errors::Failure;
use super::super::history;
use super::super::machine::{FrameWait, Run};
use super::super::{Action, ScheduledTask, TimeoutKind};
use super::runtime;
use crate::asl::{NumberOrPath, State, TaskSpec};
use crate::data::jsonpath;
use base64::Engine as _;
use serde_json::{Map, Value, json};

/// How history names a task's events: activity, Lambda function, or service integration.
enum Family {
    Activity,
    Lambda,
    Service {
        resource_type: String,
        resource: String,
    },
}

impl Family {
    fn of(run: &Run, resource: &str) -> Family {
        if (run.it.is_activity)(resource) {
            return Family::Activity;
        }
        let parts: Vec<&str> = resource.splitn(7, ':').collect();
        match parts.as_slice() {
            ["arn", _, "lambda", ..] => Family::Lambda,
            ["arn", _, "states", "", "", service, action] => Family::Service {
                resource_type: (*service).to_owned(),
                resource: (*action).to_owned(),
            },
            _ => Family::Service {
                resource_type: "custom".to_owned(),
                resource: resource.to_owned(),
            },
        }
    }

    /// The event name prefix: `Activity`, `LambdaFunction` or `Task`.
    fn prefix(&self) -> &'static str {
        match self {
            Family::Activity => "Activity",
            Family::Lambda => "LambdaFunction",
            Family::Service { .. } => "Task",
        }
    }

    /// Fields every `Task*` event of a service integration carries.
    fn base_details(&self) -> Map<String, Value> {
        let mut map = Map::new();
        if let Family::Service {
            resource_type,
            resource,
        } = self
        {
            map.insert("resourceType".to_owned(), json!(resource_type));
            map.insert("resource".to_owned(), json!(resource));
        }
        map
    }
}

/// A fresh task token: 288 random bits (unguessable as long as the step's seed is) behind the
/// time of the step that made it (hex milliseconds, so tokens sort by age). The engine indexes
/// tasks and timers by token; tokens made together then sit together in those indexes, and a
/// commit rewrites a few index pages instead of one at a random place per task.
fn new_token(run: &Run) -> String {
    let millis = run.now.timestamp_millis().max(0);
    let bytes: [u8; 36] = run.random.bytes();
    format!(
        "{millis:012x}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    )
}

pub fn run(run: &mut Run, id: u64, state: &State, spec: &TaskSpec) -> Result<(), Failure> {
    let token = new_token(run);
    // The `…SecondsPath` fields read the state's input (after InputPath), not what Parameters
    // makes of it: Parameters shapes the task's payload, the timeouts are the state's.
    let state_input = super::effective_input(run, id, state)?;
    let timeout = resolve_seconds(
        run,
        id,
        spec.timeout.as_ref(),
        "TimeoutSecondsPath",
        &state_input,
    )?;
    let heartbeat = resolve_seconds(
        run,
        id,
        spec.heartbeat.as_ref(),
        "HeartbeatSecondsPath",
        &state_input,
    )?;
    // `$$.Task.Token` is visible to Parameters (callback patterns pass it on).
    let effective = parameters_input_with_token(run, id, state, state_input, &token)?;
    let family = Family::of(run, &spec.resource);
    let mut details = family.base_details();
    match &family {
        Family::Activity | Family::Lambda => {
            details.insert("resource".to_owned(), json!(spec.resource));
            details.extend(history::payload("input", &effective));
        }
        Family::Service { .. } => {
            details.insert(
                "region".to_owned(),
                json!(region_of(&run.it.info.state_machine_arn)),
            );
            details.insert(
                "parameters".to_owned(),
                json!(history::json_text(&effective)),
            );
        }
    }
    if let Some(t) = timeout {
        details.insert("timeoutInSeconds".to_owned(), json!(t));
    }
    if let Some(h) = heartbeat {
        details.insert("heartbeatInSeconds".to_owned(), json!(h));
    }
    let prefix = family.prefix();
    run.emit(
        Some(id),
        &format!("{prefix}Scheduled"),
        Some(Value::Object(details)),
    );
    let activity = matches!(family, Family::Activity);
    if !activity {
        // In-process handlers start as soon as the task is committed.
        let started = match &family {
            Family::Service { .. } => Some(Value::Object(family.base_details())),
            _ => None,
        };
        run.emit(Some(id), &format!("{prefix}Started"), started);
    }
    run.frame_mut(id).wait = FrameWait::Task {
        token: token.clone(),
        resource: spec.resource.clone(),
        activity,
        heartbeat_seconds: heartbeat,
    };
    run.action(Action::ScheduleTask(ScheduledTask {
        token,
        resource: spec.resource.clone(),
        state_name: state.name.clone(),
        input: effective,
        timeout_seconds: timeout,
        heartbeat_seconds: heartbeat,
    }));
    Ok(())
}

fn parameters_input_with_token(
    run: &Run,
    id: u64,
    state: &State,
    effective: Value,
    token: &str,
) -> Result<Value, Failure> {
    match &state.parameters {
        None => Ok(effective),
        Some(template) => {
            let context = crate::data::LazyContext::new(|| run.context(id, Some(token), None));
            let frame = run.frame(id);
            let scope = crate::data::Scope {
                input: &effective,
                context: &context,
                variables: &frame.variables,
                random: &run.random,
            };
            crate::data::payload::render(template, &scope).map_err(|e| run.data_failure(id, e))
        }
    }
}

fn resolve_seconds(
    run: &Run,
    id: u64,
    field: Option<&NumberOrPath>,
    name: &str,
    effective: &Value,
) -> Result<Option<u64>, Failure> {
    match field {
        None => Ok(None),
        Some(NumberOrPath::Literal(n)) => Ok(Some(*n)),
        Some(NumberOrPath::Path(path)) => {
            let value = run
                .with_scope(id, effective, |s| jsonpath::select_for_field(path, name, s))
                .map_err(|e| run.data_failure(id, e))?;
            match value.as_u64() {
                Some(n) if n > 0 => Ok(Some(n)),
                _ => Err(runtime(
                    run,
                    id,
                    format!(
                        "The {name} field refers to value {value} which is not a valid positive integer: {path}"
                    ),
                )),
            }
        }
    }
}

fn region_of(arn: &str) -> &str {
    arn.split(':').nth(3).unwrap_or("")
}

/// Finds the frame waiting on `token`.
fn frame_of(run: &Run, token: &str) -> Option<u64> {
    run.st.frames.iter().find_map(|(id, f)| match &f.wait {
        FrameWait::Task { token: t, .. } if t == token => Some(*id),
        _ => None,
    })
}

fn family_of_frame(run: &Run, id: u64) -> Family {
    match &run.frame(id).wait {
        FrameWait::Task { resource, .. } => Family::of(run, resource),
        _ => Family::Service {
            resource_type: "custom".to_owned(),
            resource: String::new(),
        },
    }
}

pub fn started(run: &mut Run, token: &str, worker_name: Option<String>) {
    let Some(id) = frame_of(run, token) else {
        return;
    };
    let heartbeat = match &run.frame(id).wait {
        FrameWait::Task {
            activity: true,
            heartbeat_seconds,
            ..
        } => *heartbeat_seconds,
        _ => return,
    };
    let mut details = Map::new();
    if let Some(w) = worker_name {
        details.insert("workerName".to_owned(), json!(w));
    }
    run.emit(Some(id), "ActivityStarted", Some(Value::Object(details)));
    if let Some(h) = heartbeat {
        run.action(Action::StartHeartbeat {
            token: token.to_owned(),
            heartbeat_seconds: h,
        });
    }
}

pub fn succeeded(run: &mut Run, token: &str, output: Value) {
    let Some(id) = frame_of(run, token) else {
        return;
    };
    let family = family_of_frame(run, id);
    let mut details = family.base_details();
    details.extend(history::payload("output", &output));
    run.emit(
        Some(id),
        &format!("{}Succeeded", family.prefix()),
        Some(Value::Object(details)),
    );
    close(run, id, token);
    run.complete_with_result(id, output);
}

pub fn failed(run: &mut Run, token: &str, error: Option<String>, cause: Option<String>) {
    let Some(id) = frame_of(run, token) else {
        return;
    };
    let family = family_of_frame(run, id);
    let mut details = family.base_details();
    if let Value::Object(e) = history::error_details(error.as_deref(), cause.as_deref()) {
        details.extend(e);
    }
    run.emit(
        Some(id),
        &format!("{}Failed", family.prefix()),
        Some(Value::Object(details)),
    );
    close(run, id, token);
    run.state_failed(
        id,
        Failure {
            error,
            cause,
            terminal: false,
            heartbeat: false,
        },
    );
}

pub fn timed_out(run: &mut Run, token: &str, kind: TimeoutKind) {
    let Some(id) = frame_of(run, token) else {
        return;
    };
    let family = family_of_frame(run, id);
    // AWS records either timeout as `States.Timeout`; a Retry or Catch naming
    // `States.HeartbeatTimeout` tells a lapsed heartbeat apart (see `errors::matches`).
    let failure = Failure::timed_out(kind == TimeoutKind::Heartbeat);
    let mut details = family.base_details();
    details.insert("error".to_owned(), json!(failure.error));
    run.emit(
        Some(id),
        &format!("{}TimedOut", family.prefix()),
        Some(Value::Object(details)),
    );
    close(run, id, token);
    run.state_failed(id, failure);
}

fn close(run: &mut Run, id: u64, token: &str) {
    run.frame_mut(id).wait = FrameWait::Running;
    run.action(Action::CloseTask {
        token: token.to_owned(),
    });
}
