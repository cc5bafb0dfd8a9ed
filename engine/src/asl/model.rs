//! The typed form of an Amazon States Language definition (JSONPath dialect), as produced by
//! [`super::parse`]. Defaults are already applied here, so the interpreter never has to know
//! what an absent field means.

use serde_json::Value;
use std::collections::HashMap;

/// A state machine, or one branch / item processor of a Parallel or Map state.
#[derive(Debug, Clone)]
pub struct StateMachine {
    pub start_at: String,
    pub states: HashMap<String, State>,
    /// Execution-level `TimeoutSeconds` (only meaningful at the top level).
    pub timeout_seconds: Option<u64>,
}

impl StateMachine {
    pub fn state(&self, name: &str) -> Option<&State> {
        self.states.get(name)
    }
}

/// `InputPath` / `OutputPath` / `ResultPath` fields. `Null` is an explicit JSON `null`.
#[derive(Debug, Clone, PartialEq)]
pub enum OptPath {
    /// Explicit `null`: InputPath/OutputPath → `{}`, ResultPath → discard the result.
    Null,
    /// A path (the default `$` is stored as `Path("$")`).
    Path(String),
}

impl OptPath {
    pub fn dollar() -> Self {
        OptPath::Path("$".to_owned())
    }
}

/// Where a state goes when it finishes.
#[derive(Debug, Clone, PartialEq)]
pub enum Transition {
    Next(String),
    End,
}

#[derive(Debug, Clone)]
pub struct State {
    pub name: String,
    /// `Next` / `End`. Choice, Succeed and Fail carry `End` here (they transition otherwise).
    pub transition: Transition,
    /// Defaults to `$`. Not used by Fail; Succeed/Choice/Wait/Pass/Task/Parallel/Map use it.
    pub input_path: OptPath,
    /// Defaults to `$`.
    pub output_path: OptPath,
    /// Defaults to `$`. Only Pass, Task, Parallel and Map have one.
    pub result_path: OptPath,
    /// `Parameters` (Pass, Task, Parallel, Map) — a payload template.
    pub parameters: Option<Value>,
    /// `ResultSelector` (Task, Parallel, Map) — a payload template.
    pub result_selector: Option<Value>,
    /// JSONPath `Assign`: a payload template evaluated against the state's *result*
    /// (see `data::payload`), assigned to variables when the state is left.
    pub assign: Option<Value>,
    pub kind: Kind,
}

#[derive(Debug, Clone)]
pub enum Kind {
    Pass(PassSpec),
    Task(TaskSpec),
    Choice(ChoiceSpec),
    Wait(WaitSpec),
    Succeed,
    Fail(FailSpec),
    Parallel(ParallelSpec),
    Map(MapSpec),
}

impl Kind {
    /// The AWS name of the state type (`"Pass"`, `"Task"`, …), as used in history event names.
    pub fn type_name(&self) -> &'static str {
        match self {
            Kind::Pass(_) => "Pass",
            Kind::Task(_) => "Task",
            Kind::Choice(_) => "Choice",
            Kind::Wait(_) => "Wait",
            Kind::Succeed => "Succeed",
            Kind::Fail(_) => "Fail",
            Kind::Parallel(_) => "Parallel",
            Kind::Map(_) => "Map",
        }
    }

    pub fn retriers(&self) -> &[Retrier] {
        match self {
            Kind::Task(t) => &t.retry,
            Kind::Parallel(p) => &p.retry,
            Kind::Map(m) => &m.retry,
            _ => &[],
        }
    }

    pub fn catchers(&self) -> &[Catcher] {
        match self {
            Kind::Task(t) => &t.catch,
            Kind::Parallel(p) => &p.catch,
            Kind::Map(m) => &m.catch,
            _ => &[],
        }
    }
}

#[derive(Debug, Clone)]
pub struct PassSpec {
    /// `Result`: literal (keys ending in `.$` are *not* evaluated).
    pub result: Option<Value>,
}

/// A number given either literally or through a path (`TimeoutSeconds` / `TimeoutSecondsPath`, …).
#[derive(Debug, Clone, PartialEq)]
pub enum NumberOrPath {
    Literal(u64),
    Path(String),
}

#[derive(Debug, Clone)]
pub struct TaskSpec {
    pub resource: String,
    pub timeout: Option<NumberOrPath>,
    pub heartbeat: Option<NumberOrPath>,
    pub retry: Vec<Retrier>,
    pub catch: Vec<Catcher>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Jitter {
    None,
    Full,
}

#[derive(Debug, Clone)]
pub struct Retrier {
    pub error_equals: Vec<String>,
    /// Default 1.
    pub interval_seconds: u64,
    /// Default 3; 0 means never retry.
    pub max_attempts: u32,
    /// Default 2.0, ≥ 1.0.
    pub backoff_rate: f64,
    pub max_delay_seconds: Option<u64>,
    /// Default `None`.
    pub jitter: Jitter,
}

#[derive(Debug, Clone)]
pub struct Catcher {
    pub error_equals: Vec<String>,
    pub next: String,
    /// Default `$`.
    pub result_path: OptPath,
    /// JSONPath `Assign` of the catcher, evaluated against the error output.
    pub assign: Option<Value>,
}

#[derive(Debug, Clone)]
pub struct ChoiceSpec {
    pub choices: Vec<ChoiceBranch>,
    pub default: Option<String>,
}

#[derive(Debug, Clone)]
pub struct ChoiceBranch {
    pub rule: Rule,
    pub next: String,
    pub assign: Option<Value>,
}

/// A Choice rule. Comparison operators keep their AWS name in `op`.
#[derive(Debug, Clone)]
pub enum Rule {
    And(Vec<Rule>),
    Or(Vec<Rule>),
    Not(Box<Rule>),
    Compare {
        /// The `Variable` path (`$…`, `$$…` or a `$variable…` reference).
        variable: String,
        op: Op,
        operand: Operand,
    },
}

/// Comparison operators, without their `Path` suffix (that is in [`Operand::Path`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    StringEquals,
    StringLessThan,
    StringGreaterThan,
    StringLessThanEquals,
    StringGreaterThanEquals,
    StringMatches,
    NumericEquals,
    NumericLessThan,
    NumericGreaterThan,
    NumericLessThanEquals,
    NumericGreaterThanEquals,
    BooleanEquals,
    TimestampEquals,
    TimestampLessThan,
    TimestampGreaterThan,
    TimestampLessThanEquals,
    TimestampGreaterThanEquals,
    IsNull,
    IsPresent,
    IsNumeric,
    IsString,
    IsBoolean,
    IsTimestamp,
}

#[derive(Debug, Clone)]
pub enum Operand {
    /// The literal operand of e.g. `StringEquals` (for `Is*` a boolean).
    Literal(Value),
    /// The path of e.g. `StringEqualsPath`.
    Path(String),
}

#[derive(Debug, Clone)]
pub enum WaitSpec {
    Seconds(u64),
    /// An RFC 3339 timestamp, validated at parse time.
    Timestamp(String),
    SecondsPath(String),
    TimestampPath(String),
}

/// A string given literally or through a path (Fail's `Error`/`ErrorPath`, `Cause`/`CausePath`).
/// A path may also be an intrinsic function call (`States.Format(...)`).
#[derive(Debug, Clone)]
pub enum StringOrPath {
    Literal(String),
    Path(String),
}

#[derive(Debug, Clone)]
pub struct FailSpec {
    pub error: Option<StringOrPath>,
    pub cause: Option<StringOrPath>,
}

#[derive(Debug, Clone)]
pub struct ParallelSpec {
    pub branches: Vec<StateMachine>,
    pub retry: Vec<Retrier>,
    pub catch: Vec<Catcher>,
}

/// A number or a percentage given literally or through a path (Map's tolerated failures).
#[derive(Debug, Clone, PartialEq)]
pub enum FloatOrPath {
    Literal(f64),
    Path(String),
}

#[derive(Debug, Clone)]
pub struct MapSpec {
    /// `ItemProcessor`, or the legacy `Iterator`.
    pub processor: Box<StateMachine>,
    /// Defaults to `$`.
    pub items_path: OptPath,
    /// `ItemSelector`, or the legacy `Parameters` of a Map (which the parser moves here).
    pub item_selector: Option<Value>,
    /// `MaxConcurrency` (0 = unlimited) / `MaxConcurrencyPath`.
    pub max_concurrency: Option<NumberOrPath>,
    pub tolerated_failure_count: Option<NumberOrPath>,
    pub tolerated_failure_percentage: Option<FloatOrPath>,
    pub retry: Vec<Retrier>,
    pub catch: Vec<Catcher>,
}
