//! The workflow port over AWS Step Functions (`aws-sdk-sfn`), with the embedded adapter's
//! semantics, and the provisioning of the saga's activities and state machine.
//!
//! Step Functions API actions the service calls (for a least-privilege IAM policy):
//! - at every start ([`AwsWorkflow::upgrade`]): `DescribeStateMachineAlias` on the alias
//!   `live`, `DescribeStateMachine` on its versions, `UpdateStateMachine` on the machine,
//!   `CreateStateMachineAlias` / `UpdateStateMachineAlias` on `live`.
//! - at run time ([`AwsWorkflow`]): `StartExecution` through the alias `live`; `DescribeExecution`,
//!   `GetExecutionHistory`, `StopExecution` on its executions; `GetActivityTask`,
//!   `SendTaskSuccess`, `SendTaskFailure`, `SendTaskHeartbeat` on its activities.
//! - in [`provision`]: `CreateActivity`, `CreateStateMachine`, `UpdateStateMachine`, and
//!   `iam:PassRole` on the state machine's role.
//!
//! Timeouts and retries: every call but `GetActivityTask` uses the client as the caller
//! configured it (the SDK's standard retries for throttling, 5xx and connection errors; safe:
//! StartExecution is idempotent by name, and a repeated Send* answers `TaskTimedOut`, which
//! the workers take as "the task is gone"). `GetActivityTask` uses a copy of that client with
//! [`POLL_TIMEOUT`] (65 s) as read, attempt and operation timeout and a single attempt.

mod arn;
mod error;
mod history;
mod provision;
mod releases;
mod workflow;

pub use provision::{Provisioned, provision};
pub use workflow::{AwsWorkflow, POLL_TIMEOUT};
