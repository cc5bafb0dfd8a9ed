//! The commands callers queue for the writer (one per engine verb that writes or waits), and how
//! each one is applied inside the current batch.

use super::load::{exec_info, machine_name};
use super::timers::{due_after, from_millis, millis};
use super::{Batch, Loaded, Poller, Reply, Sql, Writer};
use crate::arn;
use crate::core::{Event, ExecState};
use crate::db::{ExecutionRow, StateMachineRow, TaskRow, TaskStatus, TimerKind};
use crate::error::EngineError;
use crate::sfn::*;
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::time::Instant;
use tokio::sync::oneshot;

/// A worker's answer to a task.
#[derive(Debug)]
pub enum Answer {
    Success(Value),
    Failure {
        error: Option<String>,
        cause: Option<String>,
    },
}

pub enum Command {
    CreateStateMachine {
        name: String,
        definition: String,
        role_arn: String,
        publish: bool,
        version_description: Option<String>,
        reply: Reply<CreateStateMachineOutput>,
    },
    Versions(super::versions::VersionCommand),
    CreateActivity {
        name: String,
        reply: Reply<ActivityInfo>,
    },
    Start {
        sm_arn: String,
        name: String,
        input_text: String,
        input: Value,
        reply: Reply<StartExecutionOutput>,
    },
    Stop {
        arn: String,
        error: Option<String>,
        cause: Option<String>,
        reply: Reply<DateTime<Utc>>,
    },
    Poll {
        activity_arn: String,
        worker: Option<String>,
        deadline: Instant,
        reply: Reply<Option<ActivityTask>>,
    },
    Answer {
        token: String,
        answer: Answer,
        /// `None` for in-process handlers, whose results nobody waits for.
        reply: Option<Reply<()>>,
    },
    Heartbeat {
        token: String,
        reply: Reply<()>,
    },
    ExpireHeartbeats {
        activity_arns: Vec<String>,
        reply: Reply<u64>,
    },
    Redrive {
        arn: String,
        client_token: Option<String>,
        reply: Reply<DateTime<Utc>>,
    },
    WatchCompletion {
        arn: String,
        reply: oneshot::Sender<()>,
    },
    Shutdown {
        reply: Option<oneshot::Sender<()>>,
    },
}

impl Writer {
    pub(super) fn command(
        &mut self,
        b: &mut Batch,
        command: Command,
        now: DateTime<Utc>,
    ) -> Sql<()> {
        match command {
            Command::CreateStateMachine {
                name,
                definition,
                role_arn,
                publish,
                version_description,
                reply,
            } => {
                let sm_arn = arn::make(
                    &self.config.region,
                    &self.config.account_id,
                    "stateMachine",
                    &name,
                );
                let machine = match self.store.state_machine(&sm_arn)? {
                    Some(row)
                        if row.current.body == definition && row.current.role_arn == role_arn =>
                    {
                        Ok(row)
                    }
                    Some(_) => Err(EngineError::StateMachineAlreadyExists(format!(
                        "State Machine Already Exists: '{sm_arn}'"
                    ))),
                    None => {
                        self.targets.clear();
                        self.store.insert_state_machine(
                            &sm_arn,
                            &name,
                            &definition,
                            &role_arn,
                            millis(now),
                        )?;
                        Ok(self
                            .store
                            .state_machine(&sm_arn)?
                            .expect("the machine just inserted"))
                    }
                };
                let result = match machine {
                    Err(e) => Err(e),
                    Ok(m) if publish => self
                        .publish(&m, version_description.as_deref(), now)?
                        .map(|v| created(&m, Some(v.state_machine_version_arn))),
                    Ok(m) => Ok(created(&m, None)),
                };
                b.reply(reply, result);
            }
            Command::Versions(command) => self.version_command(b, command, now)?,
            Command::CreateActivity { name, reply } => {
                let activity_arn = arn::make(
                    &self.config.region,
                    &self.config.account_id,
                    "activity",
                    &name,
                );
                let created = match self.store.activity_created(&activity_arn)? {
                    Some(ms) => ms,
                    None => {
                        self.store
                            .insert_activity(&activity_arn, &name, millis(now))?;
                        b.new_activities.push(activity_arn.clone());
                        millis(now)
                    }
                };
                let info = ActivityInfo {
                    activity_arn,
                    name,
                    creation_date: from_millis(created),
                };
                b.reply(reply, Ok(info));
            }
            Command::Start {
                sm_arn,
                name,
                input_text,
                input,
                reply,
            } => {
                let result = self.start(b, &sm_arn, &name, input_text, input, now)?;
                b.reply(reply, result);
            }
            Command::Stop {
                arn,
                error,
                cause,
                reply,
            } => {
                let result = match self.store.execution_by_arn(&arn)? {
                    None => Err(EngineError::ExecutionDoesNotExist(format!(
                        "Execution Does Not Exist: '{arn}'"
                    ))),
                    Some(row) => {
                        if row.status == ExecutionStatus::Running {
                            b.events.push_back((row.id, Event::Stop { error, cause }));
                        }
                        Ok(now)
                    }
                };
                b.reply(reply, result);
            }
            Command::Poll {
                activity_arn,
                worker,
                deadline,
                reply,
            } => {
                if !self.activities.contains(&activity_arn) {
                    let e = EngineError::ActivityDoesNotExist(format!(
                        "Activity Does Not Exist: '{activity_arn}'"
                    ));
                    b.reply(reply, Err(e));
                } else if let Some(task) = self.next_task(b, &activity_arn, now)? {
                    self.hand_out(b, &task.token, task.exec_id, task.input, worker, reply)?;
                } else {
                    self.pollers
                        .entry(activity_arn)
                        .or_default()
                        .push_back(Poller {
                            worker,
                            deadline,
                            reply,
                        });
                }
            }
            Command::Answer {
                token,
                answer,
                reply,
            } => {
                let result = match self.open_task(&token)? {
                    Err(e) => Err(e),
                    Ok(task) => {
                        let event = match answer {
                            Answer::Success(output) => Event::TaskSucceeded { token, output },
                            Answer::Failure { error, cause } => Event::TaskFailed {
                                token,
                                error,
                                cause,
                            },
                        };
                        b.events.push_back((task.exec_id, event));
                        Ok(())
                    }
                };
                if let Some(reply) = reply {
                    b.reply(reply, result);
                }
            }
            Command::Heartbeat { token, reply } => {
                let result = match self.open_task(&token)? {
                    Err(e) => Err(e),
                    Ok(task) => {
                        // The clock runs once a worker holds the task (handlers hold it at once).
                        let held =
                            task.status == TaskStatus::Started || task.activity_arn.is_none();
                        if let (Some(h), true) = (task.heartbeat_s, held) {
                            let due = due_after(now, u64::try_from(h).unwrap_or(0));
                            self.store.set_timer(
                                task.exec_id,
                                TimerKind::Heartbeat,
                                &token,
                                due,
                            )?;
                        }
                        Ok(())
                    }
                };
                b.reply(reply, result);
            }
            Command::ExpireHeartbeats {
                activity_arns,
                reply,
            } => {
                let expired = self
                    .store
                    .expire_started_heartbeats(&activity_arns, millis(now))?;
                b.reply(reply, Ok(expired));
            }
            Command::Redrive {
                arn,
                client_token,
                reply,
            } => {
                let result = self.redrive(b, &arn, client_token, now)?;
                b.reply(reply, result);
            }
            Command::WatchCompletion { arn, reply } => {
                let done = match self.store.execution_by_arn(&arn)? {
                    None => true,
                    Some(row) => row.status.is_terminal(),
                };
                if done {
                    // After the commit that ended it is durable, as the other watchers are.
                    b.replies.push(Box::new(move |_| {
                        let _ = reply.send(());
                    }));
                } else {
                    let watchers = self.watchers.entry(arn).or_default();
                    watchers.retain(|w| !w.is_closed());
                    watchers.push(reply);
                }
            }
            Command::Shutdown { .. } => {}
        }
        Ok(())
    }

    fn start(
        &mut self,
        b: &mut Batch,
        sm_arn: &str,
        name: &str,
        input_text: String,
        input: Value,
        now: DateTime<Utc>,
    ) -> Sql<Result<StartExecutionOutput, EngineError>> {
        let target = match self.target(sm_arn)? {
            Ok(t) => t,
            Err(e) => return Ok(Err(e)),
        };
        let route = target.choose();
        let machine_name = machine_name(&target.machine);
        let Some(machine) = self.machine(route.definition, machine_name)? else {
            return Ok(Err(EngineError::StateMachineDoesNotExist(format!(
                "State Machine Does Not Exist: '{sm_arn}'"
            ))));
        };
        let exec_arn = arn::make(
            &self.config.region,
            &self.config.account_id,
            "execution",
            &format!("{machine_name}:{name}"),
        );
        if let Some(row) = self.store.execution_by_arn(&exec_arn)? {
            let same_input =
                serde_json::from_str::<Value>(&row.input).ok().as_ref() == Some(&input);
            return Ok(if row.status == ExecutionStatus::Running && same_input {
                Ok(StartExecutionOutput {
                    execution_arn: row.arn,
                    start_date: from_millis(row.start_ms),
                })
            } else {
                Err(EngineError::ExecutionAlreadyExists(format!(
                    "Execution Already Exists: '{exec_arn}'"
                )))
            });
        }
        let row = ExecutionRow {
            id: 0,
            arn: exec_arn.clone(),
            sm_arn: target.machine.clone(),
            name: name.to_owned(),
            status: ExecutionStatus::Running,
            input: input_text,
            output: None,
            error: None,
            cause: None,
            start_ms: millis(now),
            stop_ms: None,
            redrive_count: 0,
            redrive_ms: None,
            has_snapshot: false,
            definition: route.definition,
            version: route.version,
            alias: target.alias.clone(),
        };
        let id = self.store.insert_execution(&row)?;
        if let Some(t) = machine.def.timeout_seconds {
            self.store
                .set_timer(id, TimerKind::ExecutionTimeout, "", due_after(now, t))?;
        }
        let info = exec_info(&row, &machine, input);
        b.loaded.insert(
            id,
            Loaded {
                arn: exec_arn.clone(),
                state: ExecState::default(),
                info,
                machine,
                dirty: true,
                ended: None,
            },
        );
        b.events.push_back((id, Event::Start));
        Ok(Ok(StartExecutionOutput {
            execution_arn: exec_arn,
            start_date: from_millis(millis(now)),
        }))
    }

    /// The task behind a token a caller presented, when it can still be answered.
    fn open_task(&self, token: &str) -> Sql<Result<TaskRow, EngineError>> {
        Ok(match self.store.task(token)? {
            None => Err(EngineError::TaskDoesNotExist(
                "Task Does Not Exist".to_owned(),
            )),
            Some(t) if t.status == TaskStatus::Closed => {
                Err(EngineError::TaskTimedOut("Task Timed Out".to_owned()))
            }
            Some(t) => Ok(t),
        })
    }
}

fn created(m: &StateMachineRow, version: Option<String>) -> CreateStateMachineOutput {
    CreateStateMachineOutput {
        state_machine_arn: m.arn.clone(),
        creation_date: from_millis(m.created_ms),
        state_machine_version_arn: version,
    }
}
