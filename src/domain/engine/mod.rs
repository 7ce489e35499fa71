//! The turn engine: `state + turn + answers → request | outcome`, following the contract's
//! "Order of evaluation" step by step. No I/O, no clock, no randomness.
//!
//! A turn is a coroutine ([`TurnRun`]): it runs once, straight through, and when it needs a
//! model's or a tool's answer it suspends at that `ask` and resumes from exactly there when the
//! caller feeds the answer in. Nothing is recomputed per answer, so a turn that asks six
//! questions costs about what a turn that asks one costs (docs/benchmarks.md). The code is still
//! deterministic in (state, turn, answers): crash recovery (LC-4) feeds the answer log recorded
//! with the write-ahead to a fresh run ([`Engine::replay`]) and gets the same requests,
//! idempotency keys, state and effects, without asking any model again. [`Engine::step`] is that
//! replay for callers that hold the whole log.
//!
//! One concern per file, in the contract's order of evaluation:
//! - `coroutine`: the [`TurnRun`] driver and the one suspension point, `ask`;
//! - `restore`: step 1, diagnosis, expiry and LC-4 recovery;
//! - `session`: step 2's channel actions, step 4's classifier, handoff and end (SC-5, SC-6),
//!   and a hold-on (`one sec, let me find the amount`), read before any model;
//! - `handover`: the handoff event's routing context (SC-5) and the hand-back (SC-11);
//! - `routing`: steps 3 to 6 for free text, the router and what its answer does;
//! - `lookup`: a look-up after it ran — a follow-up or a question on its result, another value
//!   for it (RP-1);
//! - `values`: typed parsers, the interpreter's reading, validation and merging (PR-1, MG-*);
//! - `free_text`: a reason in the customer's words filling a free-text parameter (MG-5);
//! - `lifecycle`: opening, advancing, executing and ending transactions (LC-1..LC-4);
//! - `replies`: what the customer reads.

use serde_json::{json, Value};

use crate::domain::catalog::{Assistant, Catalog, MessageSet, Settings, Tool};
use crate::domain::decision::Skill;
use crate::domain::effect::{
    Answer, Event, EventType, FallbackReason, Request, RouteDecision, ToolRequest,
    TransactionSummary, TurnOutcome,
};
use crate::domain::state::{AgentState, HistoryEntry, Speaker};
use crate::domain::transaction::{Transaction, TransactionStatus};
use crate::domain::turn::{Turn, TurnInput};

mod coroutine;
mod free_text;
mod handover;
mod lifecycle;
mod lookup;
mod replies;
mod restore;
mod routing;
mod session;
#[cfg(test)]
mod tests;
mod values;

pub use coroutine::TurnRun;
use coroutine::{Ask, Slot};
pub use lifecycle::single_attempt_result;

/// The reason prefix a tool gateway gives when pre-validation had no usable answer (fail closed).
pub const PRE_VALIDATION_UNAVAILABLE: &str = "pre_validation_unavailable";

/// Route names of the global session-control nodes (SC-5, SC-6).
pub const ROUTE_HUMAN_HANDOFF: &str = "human_handoff";
pub const ROUTE_END_SESSION: &str = "end_session";

/// A bug or a caller error: never a user-facing outcome.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EngineError {
    #[error("no assistant `{0}` is configured")]
    UnknownAssistant(String),
    #[error("illegal transition {from:?} -> {to:?} for transaction {transaction_id} (LC-3)")]
    IllegalTransition {
        transaction_id: String,
        from: TransactionStatus,
        to: TransactionStatus,
    },
    #[error("answer #{index} is a {got} answer but the engine asked for {expected}")]
    AnswerMismatch {
        index: usize,
        expected: &'static str,
        got: &'static str,
    },
    /// `resume` after the turn ended (it returned `Done` or an error): there is nothing to run.
    #[error("the turn is over: resume after Done or after an error")]
    TurnOver,
    /// `resume(None)` while request #index waits for its answer. The run is left as it was.
    #[error("request #{index} is waiting for its answer, and resume was given none")]
    AnswerMissing { index: usize },
    /// `resume(Some(..))` before the turn asked anything. The run is left as it was.
    #[error("a {got} answer was given as #{index} but nothing was asked")]
    UnaskedAnswer { index: usize, got: &'static str },
}

/// The result of one call: the next request, or the finished turn.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Need(Request),
    Done(Box<TurnOutcome>),
}

/// The pure turn engine over a catalog and settings.
#[derive(Debug, Clone, Copy)]
pub struct Engine<'a> {
    catalog: &'a Catalog,
    settings: &'a Settings,
}

impl<'a> Engine<'a> {
    pub fn new(catalog: &'a Catalog, settings: &'a Settings) -> Engine<'a> {
        Engine { catalog, settings }
    }

    pub fn settings(&self) -> &Settings {
        self.settings
    }

    pub fn catalog(&self) -> &'a Catalog {
        self.catalog
    }

    /// Starts `turn` from `state` (copied: the caller keeps its base for the write-ahead).
    /// Nothing of the turn runs until the first [`TurnRun::resume`]. An unknown assistant is an
    /// error here; a turn already applied (EV-1) gives a run whose first resume is `Done` with
    /// `duplicate` set and the state unchanged.
    pub fn start<'t>(&self, state: &AgentState, turn: &'t Turn) -> Result<TurnRun<'t>, EngineError>
    where
        'a: 't,
    {
        let assistant = self
            .catalog
            .assistant(&turn.identity.agent_id)
            .ok_or_else(|| EngineError::UnknownAssistant(turn.identity.agent_id.clone()))?;
        if state.has_applied(&turn.turn_id) {
            // EV-1: a redelivered turn changes nothing and produces nothing.
            return Ok(TurnRun::finished(TurnOutcome {
                state: state.clone(),
                duplicate: true,
                ..empty_outcome()
            }));
        }
        let slot = Slot::default();
        let run = Run::new(self.settings, assistant, turn, state.clone(), slot.clone());
        Ok(TurnRun::running(run, slot))
    }

    /// Starts `turn` and feeds it `answers` in order while it asks (LC-4 recovery from a recorded
    /// log). Returns the run and where the log ran out: `Need` with the first request the log has
    /// no answer for (resume the run with it), or `Done` (answers beyond the end are ignored).
    pub fn replay<'t>(
        &self,
        state: &AgentState,
        turn: &'t Turn,
        answers: &[Answer],
    ) -> Result<(TurnRun<'t>, Step), EngineError>
    where
        'a: 't,
    {
        let mut run = self.start(state, turn)?;
        let mut step = run.resume(None)?;
        for answer in answers {
            if matches!(step, Step::Done(_)) {
                break;
            }
            step = run.resume(Some(answer.clone()))?;
        }
        Ok((run, step))
    }

    /// Runs the turn from `state` with the answers given so far: the request the first missing
    /// answer is for, or the finished turn. A fresh run per call (see [`Engine::replay`]); a
    /// caller that answers one request at a time drives a [`TurnRun`] instead.
    pub fn step(
        &self,
        state: &AgentState,
        turn: &Turn,
        answers: &[Answer],
    ) -> Result<Step, EngineError> {
        self.replay(state, turn, answers).map(|(_, step)| step)
    }
}

/// An outcome with nothing in it yet; `finish` moves the final state in.
fn empty_outcome() -> TurnOutcome {
    TurnOutcome {
        state: AgentState::default(),
        duplicate: false,
        replies: Vec::new(),
        events: Vec::new(),
        route: None,
        executed: Vec::new(),
        fallbacks: Vec::new(),
        inconsistencies: Vec::new(),
        transitions: Vec::new(),
        settled_without_model: None,
        results: Vec::new(),
        handback: None,
    }
}

/// The only early stop left: a bug or a caller error. (Waiting for an answer is a suspension.)
type Flowing<T> = Result<T, EngineError>;

/// One turn in progress: the state it changes and the outcome it builds.
struct Run<'a> {
    settings: &'a Settings,
    assistant: &'a Assistant,
    msgs: &'a MessageSet,
    turn: &'a Turn,
    /// Where `ask` leaves its request and finds its answer (shared with the [`TurnRun`]).
    exchange: Slot,
    /// Answers consumed so far (the index of the next one).
    cursor: usize,
    /// Transactions opened this turn, so two opened in one turn get distinct ids.
    opened: u32,
    /// Whether the interpreter already read this message (step 6 reads it at most once).
    interpreted: bool,
    /// SC-11: a handoff was pending when the turn arrived (before step 1 closed anything).
    handed_off: bool,
    /// ST-6: step 1 closed an expired session this turn.
    expired: bool,
    /// The confidence of the classifier's accepted label this turn (the handoff's reason).
    classifier_confidence: f64,
    state: AgentState,
    out: TurnOutcome,
}

impl<'a> Run<'a> {
    fn new(
        settings: &'a Settings,
        assistant: &'a Assistant,
        turn: &'a Turn,
        state: AgentState,
        exchange: Slot,
    ) -> Run<'a> {
        Run {
            settings,
            assistant,
            msgs: assistant.messages(turn.locale),
            turn,
            exchange,
            cursor: 0,
            opened: 0,
            interpreted: false,
            handed_off: state.human_handoff_requested,
            expired: false,
            classifier_confidence: 0.0,
            state,
            out: empty_outcome(),
        }
    }

    async fn run(&mut self) -> Flowing<()> {
        self.diagnose()?;
        self.expire_if_idle()?;
        // Boxed like on_text's steps: a turn parked at its first ask holds only that path.
        if Box::pin(self.resume_executing()).await? {
            return Ok(());
        }
        if self.state.session_ended {
            // A turn after SESSION_ENDED opens a fresh session (docs/decisions.md).
            self.start_fresh_session();
        }
        let turn: &'a Turn = self.turn;
        match &turn.input {
            TurnInput::Action(action) => Box::pin(self.on_action(*action)).await,
            TurnInput::Text(text) => self.on_text(text).await,
        }
    }

    // ---- plumbing ----

    /// The one suspension point: hands `request` to the driver and waits for its answer.
    async fn ask(&mut self, request: Request) -> Answer {
        self.cursor += 1;
        Ask::new(&self.exchange, request).await
    }

    /// The answer just consumed is not the kind its request asked for.
    fn mismatch(&self, expected: &'static str, got: &Answer) -> EngineError {
        EngineError::AnswerMismatch {
            index: self.cursor.saturating_sub(1),
            expected,
            got: answer_kind(got),
        }
    }

    fn fallback(&mut self, skill: Skill, why: FallbackReason) {
        self.out.fallbacks.push((skill, why));
    }

    fn emit(&mut self, kind: EventType, data: Value) {
        self.out.events.push(Event { kind, data });
    }

    fn set_route(&mut self, agent: &str, intent: Option<String>) {
        self.out.route = Some(RouteDecision {
            route: agent.to_owned(),
            intent,
            handoff: false,
            session_control: None,
        });
    }

    fn active(&self) -> Option<&Transaction> {
        self.state.active_transaction.as_ref()
    }

    fn active_mut(&mut self) -> &mut Transaction {
        self.state
            .active_transaction
            .as_mut()
            .expect("caller checked the transaction")
    }

    fn active_status(&self) -> Option<TransactionStatus> {
        self.active().map(|t| t.status)
    }

    fn active_tool(&self) -> Option<&'a Tool> {
        let assistant: &'a Assistant = self.assistant;
        self.active().and_then(|t| assistant.tools.get(&t.tool))
    }

    fn summary(&self) -> Option<TransactionSummary> {
        self.active().map(|t| TransactionSummary {
            agent: t.agent.clone(),
            tool: t.tool.clone(),
            status: t.status,
            arguments: t.arguments.clone(),
            missing_parameters: t.missing_parameters.clone(),
        })
    }

    fn snapshot(&self) -> Value {
        json!({"transaction": self.active()})
    }

    fn tool_request(&self, idempotency_key: String) -> ToolRequest {
        let tx = self.active().expect("active");
        ToolRequest {
            identity: self.turn.identity.clone(),
            transaction_id: tx.id.clone(),
            tool: tx.tool.clone(),
            arguments: tx.arguments.clone(),
            idempotency_key,
        }
    }

    /// The last `turns` turns of history (a turn = its user line and the replies to it).
    fn recent_history(&self, turns: usize) -> Vec<HistoryEntry> {
        let mut seen = 0;
        let mut start = self.state.history.len();
        let mut last_turn: Option<&str> = None;
        for (i, entry) in self.state.history.iter().enumerate().rev() {
            if last_turn != Some(entry.turn_id.as_str()) {
                if seen == turns {
                    break;
                }
                seen += 1;
                last_turn = Some(entry.turn_id.as_str());
            }
            start = i;
        }
        self.state.history[start..].to_vec()
    }

    fn finish(mut self) -> TurnOutcome {
        let user_line = match &self.turn.input {
            TurnInput::Text(t) => t.clone(),
            TurnInput::Action(a) => format!("[{}]", a.as_str()),
        };
        let at = self.turn.at_ms;
        let turn_id = self.turn.turn_id.clone();
        self.state.push_history(HistoryEntry {
            role: Speaker::User,
            text: user_line,
            turn_id: turn_id.clone(),
            at_ms: at,
        });
        if !self.out.replies.is_empty() {
            self.state.push_history(HistoryEntry {
                role: Speaker::Assistant,
                text: self.out.replies.join("\n"),
                turn_id: turn_id.clone(),
                at_ms: at,
            });
        }
        if let Some(tx) = self.state.active_transaction.as_mut() {
            tx.record_turn(&turn_id);
        }
        self.state.mark_applied(&turn_id);
        self.state.last_turn_at_ms = Some(at);
        self.state.recompute_projections();
        // Contract, Events: the order things happened, with a diagnosis first and session events
        // last (a stable sort keeps the transaction events as emitted: ended, started, ended).
        self.out.events.sort_by_key(|e| match e.kind {
            EventType::StateInconsistent => 0,
            EventType::HumanHandoffRequested | EventType::EndRequested => 2,
            _ => 1,
        });
        self.out.state = self.state;
        self.out
    }
}

/// The name an [`Answer`]'s kind has in [`EngineError`]s.
fn answer_kind(answer: &Answer) -> &'static str {
    match answer {
        Answer::Classifier(_) => "classifier",
        Answer::Router(_) => "router",
        Answer::Interpreter(_) => "interpreter",
        Answer::PreValidation(_) => "pre_validation",
        Answer::Persisted => "persisted",
        Answer::Tool(_) => "tool",
    }
}

/// SC-2: "above the threshold" read as "not below it"; NaN and out-of-range never count.
fn confident(confidence: f64, threshold: f64) -> bool {
    (0.0..=1.0).contains(&confidence) && confidence >= threshold
}

fn required_names(tool: &Tool) -> Vec<String> {
    tool.parameters
        .iter()
        .filter(|p| p.required)
        .map(|p| p.name.clone())
        .collect()
}
