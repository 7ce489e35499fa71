//! What a step asks for (requests), what it is resumed with (answers), and what a finished turn
//! produces (replies, events, tool calls): all data, executed by the caller.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::domain::decision::{
    ClassifierDecision, InterpreterDecision, ModelAnswer, ModelFailure, PreValidationResult,
    RouterDecision, Skill, ToolResult,
};
use crate::domain::locale::Locale;
use crate::domain::reply::ResultRendering;
use crate::domain::state::{AgentState, HistoryEntry};
use crate::domain::transaction::TransactionStatus;
use crate::domain::turn::Identity;

/// What the classifier and interpreter are told about the transaction in flight.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransactionSummary {
    pub agent: String,
    pub tool: String,
    pub status: TransactionStatus,
    pub arguments: BTreeMap<String, Value>,
    pub missing_parameters: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassifierRequest {
    pub message: String,
    /// The assistant (`agent_id`) the conversation talks to: an embeddings classifier compares
    /// the message with that assistant's examples. Empty in answer logs of older releases.
    #[serde(default)]
    pub assistant: String,
    pub locale: Locale,
    /// At most `ROUTE_STICKINESS_HISTORY_TURNS` previous turns (SC-8).
    pub history: Vec<HistoryEntry>,
    pub active_agent: Option<String>,
    pub active_transaction: Option<TransactionSummary>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RouterRequest {
    pub message: String,
    pub locale: Locale,
    pub assistant: String,
    pub active_agent: Option<String>,
    pub active_transaction: Option<TransactionSummary>,
    /// PR-2: this same message just cancelled the transaction (`nah forget it`) and the router
    /// is asked whether it also carries a new request: the abandonment the message expresses is
    /// then no request for a tool.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub after_cancel: bool,
}

/// A pending or collected parameter as the interpreter sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParameterBrief {
    pub name: String,
    #[serde(rename = "type")]
    pub type_name: String,
    pub label: String,
    pub required: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InterpreterRequest {
    pub message: String,
    /// The assistant (`agent_id`) whose interpreter profile answers.
    pub assistant: String,
    pub locale: Locale,
    pub transaction: TransactionSummary,
    pub parameters: Vec<ParameterBrief>,
}

/// A call to a tool endpoint (pre-validation or execution), with its idempotency key (EV-4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolRequest {
    pub identity: Identity,
    pub transaction_id: String,
    pub tool: String,
    pub arguments: BTreeMap<String, Value>,
    pub idempotency_key: String,
}

/// The next outside answer a step needs.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    Classify(ClassifierRequest),
    Route(RouterRequest),
    Interpret(InterpreterRequest),
    PreValidate(ToolRequest),
    /// LC-4: persist this state (the transaction in EXECUTING) before the tool is called.
    PersistExecuting(Box<AgentState>),
    Execute(ToolRequest),
}

impl Request {
    pub fn skill(&self) -> Option<Skill> {
        match self {
            Request::Classify(_) => Some(Skill::Classifier),
            Request::Route(_) => Some(Skill::Router),
            Request::Interpret(_) => Some(Skill::Interpreter),
            _ => None,
        }
    }
}

/// The answer to a [`Request`], in the same order the requests came.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "answer", rename_all = "snake_case")]
pub enum Answer {
    Classifier(ModelAnswer<ClassifierDecision>),
    Router(ModelAnswer<RouterDecision>),
    Interpreter(ModelAnswer<InterpreterDecision>),
    PreValidation(PreValidationResult),
    Persisted,
    Tool(ToolResult),
}

/// CloudEvents `type`s the engine emits, in the contract's order (Events section). Serialized as
/// its wire name, [`EventType::as_str`], the one place those names are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventType {
    StateInconsistent,
    Cancelled,
    Failed,
    OutOfScope,
    Completed,
    Started,
    HandbackCompleted,
    HumanHandoffRequested,
    EndRequested,
}

impl EventType {
    /// Every type, in the schema's order.
    pub const ALL: [EventType; 9] = [
        EventType::StateInconsistent,
        EventType::Cancelled,
        EventType::Failed,
        EventType::OutOfScope,
        EventType::Completed,
        EventType::Started,
        EventType::HandbackCompleted,
        EventType::HumanHandoffRequested,
        EventType::EndRequested,
    ];

    /// The wire names of [`EventType::ALL`], for a reader's "expected one of" error.
    pub const NAMES: [&'static str; 9] = {
        let mut names = [""; 9];
        let mut i = 0;
        while i < names.len() {
            names[i] = Self::ALL[i].as_str();
            i += 1;
        }
        names
    };

    /// The CloudEvents `type`, also the `type` label of the events metric.
    pub const fn as_str(self) -> &'static str {
        match self {
            EventType::StateInconsistent => "transaction.state.inconsistent",
            EventType::Cancelled => "transaction.cancelled",
            EventType::Failed => "transaction.failed",
            EventType::OutOfScope => "transaction.out_of_scope",
            EventType::Completed => "transaction.completed",
            EventType::Started => "transaction.started",
            EventType::HandbackCompleted => "session.handback.completed",
            EventType::HumanHandoffRequested => "session.human_handoff.requested",
            EventType::EndRequested => "session.end.requested",
        }
    }

    pub fn from_wire_name(name: &str) -> Option<EventType> {
        Self::ALL.into_iter().find(|t| t.as_str() == name)
    }

    pub fn for_terminal(status: TransactionStatus) -> Option<EventType> {
        match status {
            TransactionStatus::Completed => Some(EventType::Completed),
            TransactionStatus::Cancelled => Some(EventType::Cancelled),
            TransactionStatus::OutOfScope => Some(EventType::OutOfScope),
            TransactionStatus::Failed => Some(EventType::Failed),
            _ => None,
        }
    }
}

impl Serialize for EventType {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for EventType {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        EventType::from_wire_name(&name)
            .ok_or_else(|| serde::de::Error::unknown_variant(&name, &EventType::NAMES))
    }
}

/// One event: its type and the `data` of the CloudEvent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    #[serde(rename = "type")]
    pub kind: EventType,
    pub data: Value,
}

/// ST-5 diagnoses, also the `reason` label of the inconsistent-state metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Inconsistency {
    StatusWithoutTransaction,
    ToolNotConfigured,
    /// An `active_transaction` whose own status is IDLE or terminal (ST-5).
    TransactionNotActive,
}

impl Inconsistency {
    pub fn as_str(self) -> &'static str {
        match self {
            Inconsistency::StatusWithoutTransaction => "status_without_transaction",
            Inconsistency::ToolNotConfigured => "tool_not_configured",
            Inconsistency::TransactionNotActive => "transaction_not_active",
        }
    }
}

/// A model decision that did not count, and why (SC-2; metrics `reason` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FallbackReason {
    LowConfidence,
    InvalidJson,
    Timeout,
    Error,
    /// The answer named an agent or tool the assistant does not have.
    UnknownTarget,
}

impl FallbackReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FallbackReason::LowConfidence => "low_confidence",
            FallbackReason::InvalidJson => "invalid_json",
            FallbackReason::Timeout => "timeout",
            FallbackReason::Error => "error",
            FallbackReason::UnknownTarget => "unknown_target",
        }
    }
}

impl From<ModelFailure> for FallbackReason {
    fn from(f: ModelFailure) -> Self {
        match f {
            ModelFailure::InvalidJson => FallbackReason::InvalidJson,
            ModelFailure::Timeout => FallbackReason::Timeout,
            ModelFailure::Error => FallbackReason::Error,
        }
    }
}

/// A status change applied this turn (for the transitions metric).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transition {
    pub from: TransactionStatus,
    pub to: TransactionStatus,
}

/// The seed's routing result for this turn (SC-5, SC-6): which agent or global node took it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteDecision {
    pub route: String,
    pub intent: Option<String>,
    pub handoff: bool,
    pub session_control: Option<String>,
}

/// SC-11: what a `handback` action did (the `outcome` of the hand-back metric and log field,
/// and of the `session.handback.completed` event).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HandbackOutcome {
    /// The transaction kept at handoff is asked again where it was.
    Resumed,
    /// The session expired while a person had it: its transaction ended CANCELLED (`expired`).
    Expired,
    /// A handoff was pending with no transaction in progress: the assistant is simply back.
    NoTransaction,
    /// No handoff was pending: nothing changes, no reply, no event (docs/decisions.md).
    NotPending,
}

impl HandbackOutcome {
    pub const ALL: [HandbackOutcome; 4] = [
        HandbackOutcome::Resumed,
        HandbackOutcome::Expired,
        HandbackOutcome::NoTransaction,
        HandbackOutcome::NotPending,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            HandbackOutcome::Resumed => "resumed",
            HandbackOutcome::Expired => "expired",
            HandbackOutcome::NoTransaction => "no_transaction",
            HandbackOutcome::NotPending => "not_pending",
        }
    }
}

/// What settled a turn with no model call: the bounded `reading` label of
/// `turnstile_turns_settled_without_model_total`, so a reading that starts to fire more (or
/// less) after a change shows on the dashboard by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelFreeReading {
    /// A structured channel action (confirm, cancel, handback buttons).
    ChannelAction,
    /// A person owns the conversation; the bot only says so.
    HumanOwned,
    /// `one sec, let me find the amount` while something is pending (`domain::hold_on`).
    HoldOn,
    /// `I don't want a human, just fix it` (`domain::person_refusal`): the assistant carries on.
    PersonRefused,
    /// `did it go through?` (`domain::status_question`): answered from the state.
    StatusQuestion,
    /// `what do you need from me?` (`domain::needs_question`): the pending question again.
    NeedsQuestion,
    /// PR-1: a typed parser filled the pending parameters.
    TypedFill,
    /// The message that opened the confirmation, delivered again.
    Resend,
    /// PR-6: the recogniser read an affirmation (or yes with the values shown said back).
    Affirmed,
    /// PR-6: the recogniser read a negation.
    Declined,
    /// MG-6: a correction at the confirmation, merged and asked again.
    Correction,
}

impl ModelFreeReading {
    pub fn as_str(self) -> &'static str {
        match self {
            ModelFreeReading::ChannelAction => "channel_action",
            ModelFreeReading::HumanOwned => "human_owned",
            ModelFreeReading::HoldOn => "hold_on",
            ModelFreeReading::PersonRefused => "person_refused",
            ModelFreeReading::StatusQuestion => "status_question",
            ModelFreeReading::NeedsQuestion => "needs_question",
            ModelFreeReading::TypedFill => "typed_fill",
            ModelFreeReading::Resend => "resend",
            ModelFreeReading::Affirmed => "affirmed",
            ModelFreeReading::Declined => "declined",
            ModelFreeReading::Correction => "correction",
        }
    }

    pub const ALL: [ModelFreeReading; 11] = [
        ModelFreeReading::ChannelAction,
        ModelFreeReading::HumanOwned,
        ModelFreeReading::HoldOn,
        ModelFreeReading::PersonRefused,
        ModelFreeReading::StatusQuestion,
        ModelFreeReading::NeedsQuestion,
        ModelFreeReading::TypedFill,
        ModelFreeReading::Resend,
        ModelFreeReading::Affirmed,
        ModelFreeReading::Declined,
        ModelFreeReading::Correction,
    ];
}

/// A tool execution performed this turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecutedTool {
    pub tool: String,
    pub arguments: BTreeMap<String, Value>,
    pub idempotency_key: String,
    pub ok: bool,
}

/// Everything a finished turn produced. The state is the one to save; the rest is published.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    pub state: AgentState,
    /// True when the turn id was already applied (EV-1): nothing else here is to be published.
    pub duplicate: bool,
    pub replies: Vec<String>,
    pub events: Vec<Event>,
    pub route: Option<RouteDecision>,
    pub executed: Vec<ExecutedTool>,
    pub fallbacks: Vec<(Skill, FallbackReason)>,
    pub inconsistencies: Vec<Inconsistency>,
    pub transitions: Vec<Transition>,
    /// Set when the turn was settled with no model call (PR-1, PR-6), naming the reading that
    /// settled it.
    pub settled_without_model: Option<ModelFreeReading>,
    /// RP-1: each completed tool's result this turn, by tool, and how it was rendered.
    pub results: Vec<(String, ResultRendering)>,
    /// SC-11: set when the turn was a `handback` action.
    pub handback: Option<HandbackOutcome>,
}

impl TurnOutcome {
    pub fn reply_text(&self) -> String {
        self.replies.join("\n")
    }
}
