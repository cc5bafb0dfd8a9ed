//! The task handler of the conformance run: it plays each case's `task_mocks`.
//!
//! One engine runs every case, and cases share `Resource` strings (the same fake Lambda ARN
//! behaves differently from case to case), so a task is looked up by its execution first. Each
//! case's execution is named after the case; Map and Parallel iterations run inside that
//! execution, so their tasks carry its ARN too. Resource strings stay as the case wrote them,
//! since outputs may echo them.

use crate::case::TaskMock;
use engine::{TaskFailure, TaskFuture, TaskHandler, TaskRequest};
use std::collections::HashMap;
use std::sync::Arc;

/// Execution name → that case's mocks, keyed by resource.
pub struct MockDispatcher {
    by_execution: HashMap<String, Arc<HashMap<String, TaskMock>>>,
}

impl MockDispatcher {
    pub fn new(by_execution: HashMap<String, Arc<HashMap<String, TaskMock>>>) -> Self {
        MockDispatcher { by_execution }
    }

    fn mocks_for(&self, execution_arn: &str) -> Option<&HashMap<String, TaskMock>> {
        // `arn:aws:states:<region>:<account>:execution:<machine>:<name>`; the machine has the
        // same name as the execution. Looking at every `:`/`/`-separated part, not just the
        // last, also finds the case if the engine gives iterations child ARNs (as AWS does for
        // distributed Map runs) that extend the parent's.
        execution_arn
            .rsplit([':', '/'])
            .find_map(|part| self.by_execution.get(part))
            .map(Arc::as_ref)
    }

    fn dispatch(&self, request: &TaskRequest) -> Result<serde_json::Value, TaskFailure> {
        let unknown = |error: &str| TaskFailure {
            error: error.to_owned(),
            cause: format!(
                "conformance runner: no mock for resource {} in execution {}",
                request.resource, request.execution_arn
            ),
        };
        let mocks = self
            .mocks_for(&request.execution_arn)
            .ok_or_else(|| unknown("Mock.UnknownExecution"))?;
        match mocks.get(&request.resource) {
            None => Err(unknown("Mock.UnknownResource")),
            Some(TaskMock::Echo) => Ok(request.input.clone()),
            Some(TaskMock::Return { value }) => Ok(value.clone()),
            Some(TaskMock::Fail { error, cause }) => Err(TaskFailure {
                error: error.clone(),
                cause: cause.clone().unwrap_or_default(),
            }),
        }
    }
}

impl TaskHandler for MockDispatcher {
    fn invoke(&self, request: TaskRequest) -> TaskFuture {
        let result = self.dispatch(&request);
        Box::pin(async move { result })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(execution_arn: &str, resource: &str) -> TaskRequest {
        TaskRequest {
            resource: resource.to_owned(),
            input: json!({"in": 1}),
            task_token: "token".to_owned(),
            execution_arn: execution_arn.to_owned(),
            state_name: "Task".to_owned(),
        }
    }

    #[test]
    fn dispatches_by_execution_then_resource() {
        let fn_arn = "arn:aws:lambda:us-east-1:111111111111:function:f";
        let mocks = |m: TaskMock| Arc::new(HashMap::from([(fn_arn.to_owned(), m)]));
        let dispatcher = MockDispatcher::new(HashMap::from([
            ("echoes".to_owned(), mocks(TaskMock::Echo)),
            (
                "fails".to_owned(),
                mocks(TaskMock::Fail {
                    error: "E".into(),
                    cause: Some("C".into()),
                }),
            ),
        ]));
        let arn =
            |name: &str| format!("arn:aws:states:us-east-1:111111111111:execution:{name}:{name}");
        assert_eq!(
            dispatcher.dispatch(&request(&arn("echoes"), fn_arn)),
            Ok(json!({"in": 1}))
        );
        assert_eq!(
            dispatcher.dispatch(&request(&format!("{}/child:1", arn("fails")), fn_arn)),
            Err(TaskFailure {
                error: "E".into(),
                cause: "C".into()
            })
        );
        let unknown = dispatcher.dispatch(&request(&arn("other"), fn_arn));
        assert_eq!(unknown.unwrap_err().error, "Mock.UnknownExecution");
        let unknown = dispatcher.dispatch(&request(&arn("echoes"), "arn:other"));
        assert_eq!(unknown.unwrap_err().error, "Mock.UnknownResource");
    }
}
