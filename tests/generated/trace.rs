//! What a conversation did, as an outside observer sees it: the checker's only input.
//!
//! Everything here is taken at the edges: the turn as sent, the replies and events as published
//! (the final delivery's, the only one whose outbox a worker commits), the model components and
//! tool endpoints as called (every delivery's: a call is a side effect even when the delivery
//! crashed), and the checkpoint as stored, read as plain JSON. The one thing not seen at an edge
//! is what a correction message means, which the grammar that wrote it knows (MG-6).

use serde_json::Value;

use super::grammar::Correction;

/// A tool endpoint call as the gateway saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallSeen {
    /// 0 for the first delivery of the turn, 1 for the redelivery after a crash.
    pub delivery: usize,
    pub tool: String,
    pub transaction_id: String,
    pub arguments: Value,
    pub idempotency_key: String,
    /// Pre-validation: the answer's `eligible`. Execution: whether it succeeded.
    pub ok: bool,
}

/// What delivering an already processed turn again did (EV-1).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RedeliverySeen {
    pub state_changed: bool,
    pub replies: Vec<String>,
    pub events: Vec<String>,
    pub tool_calls: usize,
    pub model_calls: usize,
}

/// One turn of a conversation, observed.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnTrace {
    /// 1-based, as in a scenario's error messages.
    pub index: usize,
    /// `Text(...)` or the action's name (`confirm`, `handoff`, ...).
    pub text: Option<String>,
    pub action: Option<String>,
    /// What the text means when it was written as a correction (the grammar's oracle, MG-6).
    pub correction: Option<Correction>,
    /// The clock step before this turn, in milliseconds (the time since the previous turn).
    pub after_ms: i64,
    /// The stored checkpoint before and after the turn, as JSON (`Null` when none yet).
    pub before: Value,
    pub after: Value,
    pub replies: Vec<String>,
    /// `(type, data)` in publication order.
    pub events: Vec<(String, Value)>,
    /// Model components called, over every delivery.
    pub model_calls: Vec<String>,
    pub pre_validations: Vec<ToolCallSeen>,
    pub executions: Vec<ToolCallSeen>,
    /// True when the first delivery died (crash injected) and a second one finished the turn.
    pub crashed: bool,
    pub redelivery: Option<RedeliverySeen>,
    /// A turn the pipeline refused (engine or store error): always a failure.
    pub error: Option<String>,
}

impl TurnTrace {
    /// An empty turn, for hand-made traces.
    pub fn new(index: usize) -> TurnTrace {
        TurnTrace {
            index,
            text: None,
            action: None,
            correction: None,
            after_ms: 1000,
            before: Value::Null,
            after: Value::Null,
            replies: Vec::new(),
            events: Vec::new(),
            model_calls: Vec::new(),
            pre_validations: Vec::new(),
            executions: Vec::new(),
            crashed: false,
            redelivery: None,
            error: None,
        }
    }
}
