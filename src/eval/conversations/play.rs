//! Plays conversations through the worker's own path ([`process_turn`]): each conversation in a
//! session of its own, in a fresh in-memory checkpoint store, with the real model and tools the
//! caller built. The checkpoint is read back from the store before and after every turn, and the
//! turn is judged from that, its events and its reply ([`super::judge`]).

use std::collections::BTreeMap;
use std::time::Instant;

use crate::domain::catalog::Catalog;
use crate::domain::engine::Engine;
use crate::domain::state::AgentState;
use crate::domain::turn::{Identity, Turn};
use crate::pipeline::{load_state, process_turn, ProcessedTurn};
use crate::ports::{DecisionModel, ToolGateway};
use crate::store::InMemoryCheckpointStore;

use super::format::{Conversation, ConversationTurn};
use super::judge::{judge, unsafe_findings, verdict, Finding, Observed, TurnFacts};

/// Turn times start here (2026-01-01T00:00:00Z) and advance 1 s per turn: the engine reads no
/// clock, and a fixed start makes a run repeatable.
pub const EVAL_EPOCH_MS: i64 = 1_767_225_600_000;
/// Time between two turns of a conversation.
pub const TURN_GAP_MS: i64 = 1_000;

/// One played turn and its verdicts.
#[derive(Debug, Clone)]
pub struct PlayedTurn {
    pub user: String,
    pub reply: String,
    /// CloudEvents types of the turn's events, in order.
    pub events: Vec<String>,
    pub observed: Observed,
    /// Why the main expectation does not hold; `None` when it does.
    pub strict_failure: Option<String>,
    /// The main expectation or an alternative holds.
    pub lenient_ok: bool,
    pub findings: Vec<Finding>,
    pub latency_ms: f64,
    /// The pipeline refused the turn (the worker would dead-letter it: no reply).
    pub error: Option<String>,
}

/// One played conversation.
#[derive(Debug, Clone)]
pub struct PlayedConversation<'a> {
    pub conversation: &'a Conversation,
    pub session_id: String,
    pub turns: Vec<PlayedTurn>,
}

impl PlayedConversation<'_> {
    pub fn strict_ok(&self) -> bool {
        self.turns.iter().all(|t| t.strict_failure.is_none())
    }

    pub fn lenient_ok(&self) -> bool {
        self.turns.iter().all(|t| t.lenient_ok)
    }
}

/// A whole run.
#[derive(Debug, Clone)]
pub struct Played<'a> {
    pub conversations: Vec<PlayedConversation<'a>>,
    /// Model calls by skill over the whole run.
    pub model_calls: BTreeMap<String, usize>,
}

/// What plays the turns: the worker's engine, model and tools.
pub struct Player<'a, M, T> {
    pub catalog: &'a Catalog,
    pub engine: Engine<'a>,
    pub model: &'a M,
    pub tools: &'a T,
    /// Sessions are `<prefix>-<n>`: a prefix per run keeps the tool service's idempotency keys
    /// of two runs apart (a second run is not answered from the first one's stored results).
    pub session_prefix: String,
}

impl<M: DecisionModel, T: ToolGateway> Player<'_, M, T> {
    /// Plays every conversation, one after the other, turn by turn.
    pub async fn play_all<'c>(&self, conversations: &'c [Conversation]) -> Played<'c> {
        let mut model_calls = BTreeMap::new();
        let mut played = Vec::with_capacity(conversations.len());
        for (n, c) in conversations.iter().enumerate() {
            played.push(self.play(n + 1, c, &mut model_calls).await);
        }
        Played {
            conversations: played,
            model_calls,
        }
    }

    async fn play<'c>(
        &self,
        n: usize,
        conversation: &'c Conversation,
        model_calls: &mut BTreeMap<String, usize>,
    ) -> PlayedConversation<'c> {
        let store = InMemoryCheckpointStore::new();
        let session_id = format!("{}-{n}", self.session_prefix);
        let identity = Identity::new(&conversation.tenant, &conversation.agent, &session_id);
        let mut turns = Vec::with_capacity(conversation.turns.len());
        for (k, expected) in conversation.turns.iter().enumerate() {
            let turn = Turn {
                turn_id: format!("{session_id}-u{}", k + 1),
                identity: identity.clone(),
                input: expected.input.clone(),
                locale: conversation.locale,
                at_ms: EVAL_EPOCH_MS + TURN_GAP_MS * (k as i64 + 1),
            };
            let before = stored_state(&store, &turn).await;
            let started = Instant::now();
            let result = process_turn(&self.engine, &store, self.model, self.tools, &turn).await;
            let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
            let after = stored_state(&store, &turn).await;
            if let Ok(p) = &result {
                for skill in &p.model_calls {
                    *model_calls.entry(skill.as_str().to_owned()).or_default() += 1;
                }
            }
            let result = result.map_err(|e| e.to_string());
            let states = (&before, &after);
            let mut played = self.verdict(conversation, expected, states, result.as_ref());
            played.latency_ms = latency_ms;
            turns.push(played);
        }
        PlayedConversation {
            conversation,
            session_id,
            turns,
        }
    }

    /// Judges one turn from the stored states around it and what processing it returned.
    fn verdict(
        &self,
        conversation: &Conversation,
        expected: &ConversationTurn,
        (before, after): (&Result<AgentState, String>, &Result<AgentState, String>),
        result: Result<&ProcessedTurn, &String>,
    ) -> PlayedTurn {
        let assistant = self
            .catalog
            .assistant(&conversation.agent)
            .expect("the reader checked the assistant");
        let messages = assistant.messages(conversation.locale);
        let outcome = result.ok().map(|p| &p.outcome);
        let reply = outcome.map(|o| o.reply_text()).unwrap_or_default();
        let facts = TurnFacts {
            before: before
                .as_ref()
                .ok()
                .and_then(|s| s.active_transaction.as_ref()),
            after: after
                .as_ref()
                .ok()
                .and_then(|s| s.active_transaction.as_ref()),
            events: outcome.map_or(&[], |o| o.events.as_slice()),
            reply: &reply,
            handoff_route: outcome
                .and_then(|o| o.route.as_ref())
                .is_some_and(|r| r.handoff),
            executed: outcome.map_or(&[], |o| o.executed.as_slice()),
        };
        let observed = judge(&facts, messages);
        let findings = unsafe_findings(expected, &facts, &observed, messages, assistant);
        let error = [result.err(), before.as_ref().err(), after.as_ref().err()]
            .into_iter()
            .flatten()
            .next()
            .cloned();
        let (strict_failure, lenient_ok) = match &error {
            Some(e) => (Some(format!("the turn was not processed: {e}")), false),
            None => verdict(expected, &observed, &reply),
        };
        PlayedTurn {
            user: expected.user_text(),
            events: facts
                .events
                .iter()
                .map(|e| e.kind.as_str().to_owned())
                .collect(),
            reply,
            observed,
            strict_failure,
            lenient_ok,
            findings,
            latency_ms: 0.0,
            error,
        }
    }
}

/// The conversation's stored state (a fresh one before the first turn).
async fn stored_state(store: &InMemoryCheckpointStore, turn: &Turn) -> Result<AgentState, String> {
    load_state(store, turn)
        .await
        .map(|(state, _)| state)
        .map_err(|e| format!("cannot read the stored checkpoint: {e}"))
}
