//! Plays conversations turn by turn through a [`TurnTransport`] — in process through the worker's
//! own path ([`InProcess`]: `pipeline::process_turn` over a fresh in-memory store per
//! conversation) or through Kafka against a running worker ([`super::kafka`]) — and judges every
//! turn the same way from what the transport observed: the stored checkpoint before and after
//! it, its events, its executed tools and its reply ([`super::judge`]).

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::Instant;

use crate::domain::catalog::Catalog;
use crate::domain::decision::{RouterDecision, Skill};
use crate::domain::effect::{Answer, Event, ExecutedTool};
use crate::domain::engine::Engine;
use crate::domain::state::AgentState;
use crate::domain::transaction::Transaction;
use crate::domain::turn::{Identity, Turn};
use crate::pipeline::{load_state, process_turn};
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
    /// What each model and tool answered, in order ([`ObservedTurn::decisions`]).
    pub decisions: Vec<String>,
    /// The turn was not processed: the pipeline refused it (the worker would dead-letter it),
    /// or, through Kafka, the worker dead-lettered it or did not answer in time.
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
    /// Model calls by skill over the whole run (empty through Kafka: the worker does not
    /// publish them).
    pub model_calls: BTreeMap<String, usize>,
}

/// What the worker produced for one processed turn, whichever way it was played.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ObservedTurn {
    /// Every non-empty reply text of the turn joined by `\n` (what the reply record carries).
    pub reply: String,
    /// The turn's events, in order.
    pub events: Vec<Event>,
    /// Tool executions the turn made (successful or not).
    pub executed: Vec<ExecutedTool>,
    /// The reply's route says handoff (`route.handoff`).
    pub handoff_route: bool,
    /// Model components called (in process only).
    pub model_calls: Vec<Skill>,
    /// What each model and tool answered, in order, one line each (in process only): why a
    /// failed turn went the way it did, without a debugger.
    pub decisions: Vec<String>,
}

/// One turn as a transport played it: the stored state around it and what it produced.
#[derive(Debug, Clone)]
pub struct TurnRun {
    pub before: Result<AgentState, String>,
    pub after: Result<AgentState, String>,
    pub result: Result<ObservedTurn, String>,
    pub latency_ms: f64,
    /// The conversation cannot go on (through Kafka: a turn that got no answer may still be
    /// processed later, and the next turn's outputs would be judged against the wrong state):
    /// its remaining turns are not played.
    pub abandon: bool,
}

impl TurnRun {
    /// A turn that was not played (or not answered): `error` names why.
    pub fn failed(error: String, abandon: bool) -> TurnRun {
        TurnRun {
            before: Ok(AgentState::default()),
            after: Ok(AgentState::default()),
            result: Err(error),
            latency_ms: 0.0,
            abandon,
        }
    }
}

/// How a turn is played: in process, or through Kafka against a running worker.
pub trait TurnTransport {
    /// Per-conversation state of the transport (the in-process store; nothing through Kafka).
    type Session;
    fn open_session(&self) -> Self::Session;
    /// Plays `turn` and reads the stored checkpoint before and after it.
    fn play_turn(&self, session: &Self::Session, turn: &Turn) -> impl Future<Output = TurnRun>;
}

/// The worker's own turn path in process: engine, model and tools the caller built.
pub struct InProcess<'a, M, T> {
    pub engine: Engine<'a>,
    pub model: &'a M,
    pub tools: &'a T,
}

impl<M: DecisionModel, T: ToolGateway> TurnTransport for InProcess<'_, M, T> {
    type Session = InMemoryCheckpointStore;

    fn open_session(&self) -> InMemoryCheckpointStore {
        InMemoryCheckpointStore::new()
    }

    async fn play_turn(&self, store: &InMemoryCheckpointStore, turn: &Turn) -> TurnRun {
        let before = stored_state(store, turn).await;
        let started = Instant::now();
        let result = process_turn(&self.engine, store, self.model, self.tools, turn).await;
        let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
        let after = stored_state(store, turn).await;
        let result = result
            .map(|p| {
                let o = &p.outcome;
                ObservedTurn {
                    reply: published_reply(&o.replies),
                    events: o.events.clone(),
                    executed: o.executed.clone(),
                    handoff_route: o.route.as_ref().is_some_and(|r| r.handoff),
                    model_calls: p.model_calls,
                    decisions: p.answers.iter().filter_map(summarise).collect(),
                }
            })
            .map_err(|e| e.to_string());
        TurnRun {
            before,
            after,
            result,
            latency_ms,
            abandon: false,
        }
    }
}

/// The reply text as the worker publishes it (`message::encode_outputs`): the non-empty replies
/// joined by `\n`, so both ways of playing judge the same text.
pub fn published_reply(replies: &[String]) -> String {
    let texts: Vec<&str> = replies
        .iter()
        .map(String::as_str)
        .filter(|t| !t.is_empty())
        .collect();
    texts.join("\n")
}

/// Plays conversations through a transport and judges their turns.
pub struct Player<'a, X> {
    pub catalog: &'a Catalog,
    pub transport: X,
    /// Sessions are `<prefix>-<n>`: a prefix per run keeps the tool service's idempotency keys
    /// (and, through Kafka, the checkpoints) of two runs apart.
    pub session_prefix: String,
    /// Conversations played at once (turns within one stay sequential); 1 = one after the other.
    pub concurrency: usize,
}

impl<X: TurnTransport> Player<'_, X> {
    /// Plays every conversation, at most `concurrency` at once, turn by turn; the result keeps
    /// the input order.
    pub async fn play_all<'c>(&self, conversations: &'c [Conversation]) -> Played<'c> {
        let plays = conversations
            .iter()
            .enumerate()
            .map(|(n, c)| self.play(n + 1, c));
        let results = run_bounded(plays, self.concurrency.max(1)).await;
        let mut model_calls = BTreeMap::new();
        let mut played = Vec::with_capacity(results.len());
        for (conversation, calls) in results {
            for skill in calls {
                *model_calls.entry(skill.as_str().to_owned()).or_default() += 1;
            }
            played.push(conversation);
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
    ) -> (PlayedConversation<'c>, Vec<Skill>) {
        let session = self.transport.open_session();
        let session_id = format!("{}-{n}", self.session_prefix);
        let identity = Identity::new(&conversation.tenant, &conversation.agent, &session_id);
        let mut turns = Vec::with_capacity(conversation.turns.len());
        let mut calls = Vec::new();
        let mut abandoned: Option<usize> = None;
        for (k, expected) in conversation.turns.iter().enumerate() {
            let run = match abandoned {
                Some(at) => TurnRun::failed(
                    format!("not played: turn {at} of this conversation got no answer"),
                    true,
                ),
                None => {
                    let turn = Turn {
                        turn_id: format!("{session_id}-u{}", k + 1),
                        identity: identity.clone(),
                        input: expected.input.clone(),
                        locale: conversation.locale,
                        at_ms: EVAL_EPOCH_MS + TURN_GAP_MS * (k as i64 + 1),
                    };
                    self.transport.play_turn(&session, &turn).await
                }
            };
            if run.abandon && abandoned.is_none() {
                abandoned = Some(k + 1);
            }
            if let Ok(o) = &run.result {
                calls.extend(o.model_calls.iter().copied());
            }
            turns.push(self.verdict(conversation, expected, &run));
        }
        let played = PlayedConversation {
            conversation,
            session_id,
            turns,
        };
        (played, calls)
    }

    /// Judges one turn from the stored states around it and what the transport observed.
    fn verdict(
        &self,
        conversation: &Conversation,
        expected: &ConversationTurn,
        run: &TurnRun,
    ) -> PlayedTurn {
        let assistant = self
            .catalog
            .assistant(&conversation.agent)
            .expect("the reader checked the assistant");
        let messages = assistant.messages(conversation.locale);
        let observed = run.result.as_ref().ok();
        let reply = observed.map(|o| o.reply.clone()).unwrap_or_default();
        let facts = TurnFacts {
            before: active_transaction(&run.before),
            after: active_transaction(&run.after),
            events: observed.map_or(&[], |o| o.events.as_slice()),
            reply: &reply,
            handoff_route: observed.is_some_and(|o| o.handoff_route),
            executed: observed.map_or(&[], |o| o.executed.as_slice()),
        };
        let judged = judge(&facts, messages);
        let findings = unsafe_findings(expected, &facts, &judged, messages, assistant);
        let error = [
            run.result.as_ref().err(),
            run.before.as_ref().err(),
            run.after.as_ref().err(),
        ]
        .into_iter()
        .flatten()
        .next()
        .cloned();
        let (strict_failure, lenient_ok) = match &error {
            Some(e) => (Some(format!("the turn was not processed: {e}")), false),
            None => verdict(expected, &judged, &reply),
        };
        PlayedTurn {
            user: expected.user_text(),
            events: facts
                .events
                .iter()
                .map(|e| e.kind.as_str().to_owned())
                .collect(),
            reply,
            observed: judged,
            strict_failure,
            lenient_ok,
            findings,
            latency_ms: run.latency_ms,
            decisions: observed.map(|o| o.decisions.clone()).unwrap_or_default(),
            error,
        }
    }
}

/// One answer the engine consumed, as a line of a failed turn's transcript (`None`: the
/// write-ahead acknowledgement, which decides nothing).
fn summarise(answer: &Answer) -> Option<String> {
    Some(match answer {
        Answer::Classifier(Ok(d)) => {
            format!("classifier {} {:.2}", d.decision.as_str(), d.confidence)
        }
        Answer::Router(Ok(RouterDecision::Route {
            agent,
            intent,
            confidence,
            arguments,
        })) => {
            let names: Vec<&str> = arguments.keys().map(String::as_str).collect();
            let read = if names.is_empty() {
                String::new()
            } else {
                format!(" reading {}", names.join(", "))
            };
            let target = intent.as_deref().unwrap_or(agent);
            format!("router {target} {confidence:.2}{read}")
        }
        Answer::Router(Ok(RouterDecision::OutOfScope { confidence })) => {
            format!("router out of scope {confidence:.2}")
        }
        Answer::Router(Ok(RouterDecision::Topic {
            tool,
            topic,
            confidence,
        })) => {
            let tool = tool.as_deref().map_or(String::new(), |t| format!("{t}."));
            format!("router topic {tool}{topic} {confidence:.2}")
        }
        Answer::Interpreter(Ok(d)) => {
            let names: Vec<&str> = d.arguments.keys().map(String::as_str).collect();
            format!(
                "interpreter {:?} {:.2}{}",
                d.act,
                d.confidence,
                if names.is_empty() {
                    String::new()
                } else {
                    format!(" reading {}", names.join(", "))
                }
            )
            .to_lowercase()
        }
        Answer::Classifier(Err(f)) => format!("classifier failed: {}", f.as_str()),
        Answer::Router(Err(f)) => format!("router failed: {}", f.as_str()),
        Answer::Interpreter(Err(f)) => format!("interpreter failed: {}", f.as_str()),
        Answer::PreValidation(p) => format!(
            "pre-validation {}",
            if p.eligible {
                "eligible"
            } else {
                "not eligible"
            }
        ),
        Answer::Tool(t) => format!("tool {}", t.outcome.as_str()),
        Answer::Persisted => return None,
    })
}

fn active_transaction(state: &Result<AgentState, String>) -> Option<&Transaction> {
    state
        .as_ref()
        .ok()
        .and_then(|s| s.active_transaction.as_ref())
}

/// The conversation's stored state (a fresh one before the first turn).
async fn stored_state(store: &InMemoryCheckpointStore, turn: &Turn) -> Result<AgentState, String> {
    load_state(store, turn)
        .await
        .map(|(state, _)| state)
        .map_err(|e| format!("cannot read the stored checkpoint: {e}"))
}

/// Runs `futures` with at most `limit` in progress at once, on the caller's task (nothing is
/// spawned, so they may borrow); the outputs come back in the input order.
pub async fn run_bounded<F: Future>(
    futures: impl IntoIterator<Item = F>,
    limit: usize,
) -> Vec<F::Output> {
    let mut queue = futures.into_iter().enumerate();
    let mut active: Vec<(usize, Pin<Box<F>>)> = Vec::new();
    let mut done: BTreeMap<usize, F::Output> = BTreeMap::new();
    std::future::poll_fn(|cx| loop {
        while active.len() < limit.max(1) {
            match queue.next() {
                Some((i, f)) => active.push((i, Box::pin(f))),
                None => break,
            }
        }
        if active.is_empty() {
            return Poll::Ready(());
        }
        let mut finished = false;
        let mut k = 0;
        while k < active.len() {
            if let Poll::Ready(out) = active[k].1.as_mut().poll(cx) {
                let (i, _) = active.swap_remove(k);
                done.insert(i, out);
                finished = true;
            } else {
                k += 1;
            }
        }
        if !finished {
            return Poll::Pending;
        }
    })
    .await;
    done.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn run_bounded_keeps_the_order_and_the_bound() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let running = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        let jobs = (0..10u64).map(|i| {
            let (running, most) = (&running, &most);
            async move {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                // Later jobs finish first: the output order must still be the input order.
                for _ in 0..(10 - i) {
                    tokio::task::yield_now().await;
                }
                running.fetch_sub(1, Ordering::SeqCst);
                i
            }
        });
        let out = run_bounded(jobs, 3).await;
        assert_eq!(out, (0..10).collect::<Vec<_>>());
        assert_eq!(most.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn the_published_reply_skips_empty_texts() {
        let replies = ["a".to_owned(), String::new(), "b".to_owned()];
        assert_eq!(published_reply(&replies), "a\nb");
        assert_eq!(published_reply(&[]), "");
    }
}
