//! The saga, composed: its steps (forward and compensations) on the workflow's activities, the
//! worker pool that runs them, and the approval keeper.

pub mod compensation_steps;
