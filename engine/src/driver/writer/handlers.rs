//! In-process task handlers: a handler task is invoked once its scheduling has committed, its
//! answer comes back as a command, and the tasks a previous process left unanswered are invoked
//! again on open (at-least-once).

use super::commands::{Answer, Command};
use super::{Sql, Writer};
use crate::db::TaskRow;
use crate::sfn::{TaskHandler, TaskRequest};
use durable::After;
use serde_json::Value;
use std::sync::mpsc::Sender;

impl Writer {
    /// Re-invokes the handler tasks a previous process left unanswered (at-least-once).
    pub fn recover(&mut self) -> Sql<usize> {
        let tasks = self.store.open_handler_tasks()?;
        let n = tasks.len();
        for task in tasks {
            if let Some(request) = self.request_for(&task)? {
                self.invocation(request)();
            }
        }
        Ok(n)
    }

    fn request_for(&self, task: &TaskRow) -> Sql<Option<TaskRequest>> {
        let Some(row) = self.store.execution_by_id(task.exec_id)? else {
            return Ok(None);
        };
        let input = task
            .input
            .as_deref()
            .and_then(|i| serde_json::from_str(i).ok());
        Ok(Some(TaskRequest {
            resource: task.resource.clone(),
            input: input.unwrap_or(Value::Null),
            task_token: task.token.clone(),
            execution_arn: row.arn,
            state_name: task.state_name.clone(),
        }))
    }

    /// Invokes the handler for `request`: at once, or, as the closure this returns, from the
    /// syncer once the task's scheduling is durable.
    pub(super) fn invocation(&self, request: TaskRequest) -> After {
        let (tx, handler, runtime) = (self.tx.clone(), self.handler.clone(), self.runtime.clone());
        Box::new(move || invoke(handler.as_deref(), &runtime, tx, request))
    }
}

fn invoke(
    handler: Option<&dyn TaskHandler>,
    runtime: &tokio::runtime::Handle,
    tx: Sender<Command>,
    request: TaskRequest,
) {
    let token = request.task_token.clone();
    match handler {
        Some(handler) => {
            let fut = handler.invoke(request);
            runtime.spawn(async move {
                let answer = match fut.await {
                    Ok(v) => Answer::Success(v),
                    Err(f) => Answer::Failure {
                        error: Some(f.error),
                        cause: Some(f.cause),
                    },
                };
                let _ = tx.send(Command::Answer {
                    token,
                    answer,
                    reply: None,
                });
            });
        }
        None => {
            let answer = Answer::Failure {
                error: Some("States.TaskFailed".to_owned()),
                cause: Some(format!(
                    "No task handler is registered for resource '{}'",
                    request.resource
                )),
            };
            let _ = tx.send(Command::Answer {
                token,
                answer,
                reply: None,
            });
        }
    }
}
