//! The answers the engine asks for from outside: model decisions, pre-validation and tool results.
//! They are data, recorded with the turn so a replay never calls a model again.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::domain::transaction::{AttemptOutcome, EvidenceRecord};

/// The session-control labels (SC-1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SessionControl {
    Continue,
    Route,
    HumanHandoff,
    EndSession,
}

impl SessionControl {
    pub fn as_str(self) -> &'static str {
        match self {
            SessionControl::Continue => "CONTINUE",
            SessionControl::Route => "ROUTE",
            SessionControl::HumanHandoff => "HUMAN_HANDOFF",
            SessionControl::EndSession => "END_SESSION",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassifierDecision {
    pub decision: SessionControl,
    pub confidence: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RouterDecision {
    /// `intent` is a tool name; `None` is a generic mention of the agent (PR-4).
    Route {
        agent: String,
        intent: Option<String>,
        confidence: f64,
        #[serde(default)]
        arguments: BTreeMap<String, Value>,
    },
    OutOfScope {
        confidence: f64,
    },
    /// Not a request (PR-3a, SC-9): a question about a tool (`tool` set) or a conversational
    /// intent (`tool` null), named by `topic`; answered with its configured text.
    Topic {
        #[serde(default)]
        tool: Option<String>,
        topic: String,
        confidence: f64,
    },
}

/// The interpreter's reading of free text inside a transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InterpreterAct {
    Provide,
    Cancel,
    Affirm,
    Deny,
    Unclear,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InterpreterDecision {
    pub act: InterpreterAct,
    #[serde(default)]
    pub arguments: BTreeMap<String, Value>,
    pub confidence: f64,
}

/// Why a model call gave no usable decision; also the `reason` label of fallback metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelFailure {
    InvalidJson,
    Timeout,
    Error,
}

impl ModelFailure {
    pub fn as_str(self) -> &'static str {
        match self {
            ModelFailure::InvalidJson => "invalid_json",
            ModelFailure::Timeout => "timeout",
            ModelFailure::Error => "error",
        }
    }
}

pub type ModelAnswer<T> = Result<T, ModelFailure>;

/// A pre-validation answer (EV-2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PreValidationResult {
    pub eligible: bool,
    #[serde(default)]
    pub reason: Option<String>,
    /// RP-2: the answer's `code` (`already_shipped`), which a tool may configure per-locale
    /// texts for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(default)]
    pub data: Value,
    pub at_ms: i64,
}

/// The final result of a tool execution, after the caller's retries (EV-3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub outcome: AttemptOutcome,
    #[serde(default)]
    pub data: Value,
    #[serde(default)]
    pub error: Option<String>,
    /// Every attempt, in order; the last one decided the outcome.
    pub attempts: Vec<EvidenceRecord>,
}

impl ToolResult {
    pub fn is_ok(&self) -> bool {
        self.outcome == AttemptOutcome::Ok
    }
}

/// The model components, as named in scenarios (`model_calls`) and metric labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Skill {
    Classifier,
    Router,
    Interpreter,
}

impl Skill {
    pub fn as_str(self) -> &'static str {
        match self {
            Skill::Classifier => "classifier",
            Skill::Router => "router",
            Skill::Interpreter => "interpreter",
        }
    }
}
