//! Decides one turn: steps the engine, performing each request through the ports, with the LC-4
//! write-ahead before a tool executes; and the in-flight record that makes recovery exact.

use serde::{Deserialize, Serialize};

use crate::domain::decision::Skill;
use crate::domain::decision::{ModelAnswer, RouterDecision};
use crate::domain::effect::{Answer, Request, RouterRequest};
use crate::domain::engine::{Engine, Step};
use crate::domain::state::{self, AgentState};
use crate::domain::turn::Turn;
use crate::ports::{
    CallContext, CheckpointRecord, CheckpointStore, DecisionModel, Fence, ToolGateway,
};

use super::{PipelineError, Ports, ProcessedTurn};
use crate::telemetry;
use metrics::counter;

/// A turn between its write-ahead (LC-4) and its end: replaying `answers` from `base` reproduces
/// it exactly, so recovery never asks a model again and re-issues the same idempotency key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InFlightTurn {
    pub turn_id: String,
    pub base: AgentState,
    pub answers: Vec<Answer>,
}

/// Encodes the [`InFlightTurn`] of `base` + `answers` + [`Answer::Persisted`] from borrows:
/// the owned struct would clone the base state and every answer just to serialise them.
fn encode_in_flight(turn_id: &str, base: &AgentState, answers: &[Answer]) -> Vec<u8> {
    struct Recorded<'a>(&'a [Answer]);
    impl Serialize for Recorded<'_> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            s.collect_seq(self.0.iter().chain(std::iter::once(&Answer::Persisted)))
        }
    }
    #[derive(Serialize)]
    struct Borrowed<'a> {
        turn_id: &'a str,
        base: &'a AgentState,
        answers: Recorded<'a>,
    }
    let borrowed = Borrowed {
        turn_id,
        base,
        answers: Recorded(answers),
    };
    serde_json::to_vec(&borrowed).unwrap_or_default()
}

/// Where a turn starts deciding: from the stored state, or (LC-4) from the in-flight record's
/// base with its recorded answers when that record is this turn's.
#[derive(Debug)]
pub struct TurnStart {
    pub base: AgentState,
    pub recorded: Vec<Answer>,
    pub recovered: bool,
}

impl TurnStart {
    pub fn new(state: AgentState, in_flight: Option<InFlightTurn>, turn_id: &str) -> TurnStart {
        match in_flight {
            Some(f) if f.turn_id == turn_id => TurnStart {
                base: f.base,
                recorded: f.answers,
                recovered: true,
            },
            _ => TurnStart {
                base: state,
                recorded: Vec::new(),
                recovered: false,
            },
        }
    }
}

/// Steps the engine to the end of the turn, performing each request; the LC-4 write-ahead goes
/// to `store` under `fence`. The caller saves the final state with its outbox. `start` is used
/// in place, not unpacked: every turn in flight holds this future, and unpacked copies of the
/// state would each take a slot in it.
pub async fn decide_turn<S, M, T>(
    engine: &Engine<'_>,
    ports: Ports<'_, S, M, T>,
    turn: &Turn,
    start: TurnStart,
    fence: Fence,
) -> Result<ProcessedTurn, PipelineError>
where
    S: CheckpointStore,
    M: DecisionModel,
    T: ToolGateway,
{
    let ctx = CallContext {
        turn_id: &turn.turn_id,
        turn_at_ms: turn.at_ms,
        speculative: false,
    };
    let mut model_calls = Vec::new();
    // ROUTER_SPECULATIVE: the router call started next to the classifier, and its answer.
    let mut speculative: Option<(RouterRequest, ModelAnswer<RouterDecision>)> = None;
    // The engine runs the turn once, suspended at each request (a coroutine); a recovered turn
    // first replays its recorded answers (LC-4), so it asks no model again.
    let (mut run, mut step) = engine.replay(&start.base, turn, &start.recorded)?;
    let recovered = start.recovered;
    loop {
        let request = match step {
            Step::Done(outcome) => {
                if speculative.is_some() {
                    counter!(telemetry::MODEL_SPECULATIVE_DISCARDED_TOTAL, "skill" => "router")
                        .increment(1);
                }
                return Ok(ProcessedTurn {
                    outcome: *outcome,
                    model_calls,
                    recovered,
                    answers: run.answers().to_vec(),
                });
            }
            Step::Need(request) => request,
        };
        match &request {
            Request::Classify(c) if engine.settings().router_speculative => {
                let guess = RouterRequest {
                    message: c.message.clone(),
                    locale: c.locale,
                    assistant: turn.identity.agent_id.clone(),
                    active_agent: c.active_agent.clone(),
                    active_transaction: c.active_transaction.clone(),
                    after_cancel: false,
                };
                let spec_ctx = CallContext {
                    speculative: true,
                    ..ctx
                };
                // Boxed, like `perform` below: a turn waiting for a model slot holds only the
                // calls of the step it is at, not the largest step's futures for its whole life.
                let (classified, routed) = Box::pin(async {
                    tokio::join!(
                        ports.model.classify(c, ctx),
                        ports.model.route(&guess, spec_ctx)
                    )
                })
                .await;
                model_calls.push(Skill::Classifier);
                speculative = Some((guess, routed));
                step = run.resume(Some(Answer::Classifier(classified)))?;
                continue;
            }
            Request::Route(r) => {
                if let Some((guess, routed)) = speculative.take() {
                    if &guess == r {
                        model_calls.push(Skill::Router);
                        step = run.resume(Some(Answer::Router(routed)))?;
                        continue;
                    }
                    counter!(telemetry::MODEL_SPECULATIVE_DISCARDED_TOTAL, "skill" => "router")
                        .increment(1);
                }
            }
            _ => {}
        }
        if let Some(skill) = request.skill() {
            model_calls.push(skill);
        }
        let write_ahead = WriteAhead {
            turn,
            base: &start.base,
            answers: run.answers(),
            fence,
        };
        let answer = Box::pin(perform(request, ports, ctx, write_ahead)).await?;
        step = run.resume(Some(answer))?;
    }
}

/// What an LC-4 write-ahead records besides the executing state: the turn, the state it
/// started from, the answers so far, and the lease's fence.
struct WriteAhead<'a> {
    turn: &'a Turn,
    base: &'a AgentState,
    answers: &'a [Answer],
    fence: Fence,
}

/// Carries out one engine request through its port.
async fn perform<S, M, T>(
    request: Request,
    ports: Ports<'_, S, M, T>,
    ctx: CallContext<'_>,
    write_ahead: WriteAhead<'_>,
) -> Result<Answer, PipelineError>
where
    S: CheckpointStore,
    M: DecisionModel,
    T: ToolGateway,
{
    let Ports {
        store,
        model,
        tools,
    } = ports;
    Ok(match request {
        Request::Classify(r) => Answer::Classifier(model.classify(&r, ctx).await),
        Request::Route(r) => Answer::Router(model.route(&r, ctx).await),
        Request::Interpret(r) => Answer::Interpreter(model.interpret(&r, ctx).await),
        Request::PreValidate(r) => Answer::PreValidation(tools.pre_validate(&r, ctx).await),
        Request::Execute(r) => Answer::Tool(tools.execute(&r, ctx).await),
        Request::PersistExecuting(executing) => {
            let WriteAhead {
                turn,
                base,
                answers,
                fence,
            } = write_ahead;
            let record = CheckpointRecord {
                state: state::encode(&executing),
                in_flight: Some(encode_in_flight(&turn.turn_id, base, answers)),
                epoch: fence.epoch,
                ..CheckpointRecord::default()
            };
            // Boxed: the store's future is large and this await is rare (one per execution).
            Box::pin(store.save_write_ahead(&turn.identity, &record, fence)).await?;
            Answer::Persisted
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::decision::{ClassifierDecision, SessionControl};
    use crate::domain::state::{HistoryEntry, Speaker};

    /// LC-4 recovery decodes what `encode_in_flight` wrote as an `InFlightTurn`: both must agree
    /// byte for byte with the owned struct's encoding, the recorded `Persisted` last.
    #[test]
    fn in_flight_from_borrows_encodes_like_the_owned_turn() {
        let mut base = AgentState::default();
        base.push_history(HistoryEntry {
            role: Speaker::User,
            text: "cancel my order \"PED-1001\"".into(),
            turn_id: "t-0".into(),
            at_ms: 7,
        });
        let answers = vec![Answer::Classifier(Ok(ClassifierDecision {
            decision: SessionControl::Continue,
            confidence: 0.93,
        }))];
        let owned = InFlightTurn {
            turn_id: "t-1".into(),
            base: base.clone(),
            answers: vec![answers[0].clone(), Answer::Persisted],
        };
        let bytes = encode_in_flight("t-1", &base, &answers);
        assert_eq!(bytes, serde_json::to_vec(&owned).unwrap());
        let (_, decoded) =
            super::super::decode_record(&state::encode(&base), Some(&bytes)).unwrap();
        assert_eq!(decoded, Some(owned));
    }
}
