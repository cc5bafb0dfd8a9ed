//! The pure interpreter: given an execution's state and an event, decide what happens next.

pub mod history;
