//! Engine step on a realistic checkpoint (a few arguments, 10 history turns), with checkpoint
//! decode and encode included: the per-turn CPU the worker spends outside I/O. And the cost of a
//! turn by the number of answers it needs (0..=6), driven as a continuation (`start`/`resume`,
//! the turn runs once) and as the from-scratch replay (`step` with growing answer prefixes).
//! Run: `cargo bench --bench engine_step` (figures in docs/benchmarks.md).

use std::path::Path;

use divan::{black_box, Bencher};
use turnstile::config::agents::load_catalog;
use turnstile::domain::catalog::{Catalog, Settings};
use turnstile::domain::decision::{
    ClassifierDecision, InterpreterAct, InterpreterDecision, PreValidationResult, RouterDecision,
    SessionControl,
};
use turnstile::domain::effect::{Answer, Request};
use turnstile::domain::engine::{Engine, Step};
use turnstile::domain::state::{self, AgentState};
use turnstile::domain::turn::{Identity, Turn, TurnInput};

fn main() {
    divan::main();
}

fn catalog() -> Catalog {
    load_catalog(Path::new("config/agents.example.yaml")).expect("example config")
}

fn turn(id: &str, text: &str, at_ms: i64) -> Turn {
    Turn {
        turn_id: id.into(),
        identity: Identity::new("tenant-1", "retail-bot", "session-42"),
        input: TurnInput::Text(text.into()),
        locale: Default::default(),
        at_ms,
    }
}

/// Plays `texts` through the engine (routing scripted) and returns the resulting checkpoint.
fn realistic_checkpoint(engine: &Engine<'_>) -> Vec<u8> {
    let mut state = AgentState::default();
    let mut at = 1_000_000;
    let mut texts: Vec<&str> = Vec::new();
    for _ in 0..4 {
        texts.extend(["show my bill", "thanks"]);
    }
    texts.extend([
        "I need to change the delivery address",
        "order PED-1001, zip 01310-100",
    ]);
    for (i, text) in texts.iter().enumerate() {
        at += 5_000;
        let t = turn(&format!("warm-{i}"), text, at);
        let mut answers = Vec::new();
        state = loop {
            match engine.step(&state, &t, &answers).expect("engine") {
                Step::Done(o) => break o.state,
                Step::Need(req) => answers.push(match req {
                    Request::Classify(_) => Answer::Classifier(Ok(ClassifierDecision {
                        decision: SessionControl::Route,
                        confidence: 0.97,
                    })),
                    Request::Route(r) => Answer::Router(Ok(RouterDecision::Route {
                        agent: if r.message.contains("bill") {
                            "billing"
                        } else {
                            "retail"
                        }
                        .into(),
                        intent: Some(
                            if r.message.contains("bill") {
                                "billing_show_bill"
                            } else {
                                "retail_address_change"
                            }
                            .into(),
                        ),
                        confidence: 0.97,
                        arguments: Default::default(),
                    })),
                    // Step 6: the interpreter reads a message the router left in the transaction.
                    Request::Interpret(_) => Answer::Interpreter(Ok(InterpreterDecision {
                        act: InterpreterAct::Unclear,
                        arguments: Default::default(),
                        confidence: 0.9,
                    })),
                    Request::PersistExecuting(_) => Answer::Persisted,
                    Request::Execute(r) => {
                        Answer::Tool(turnstile::domain::engine::single_attempt_result(
                            &r.idempotency_key,
                            true,
                            false,
                            serde_json::json!({"total": "R$ 71,99"}),
                            None,
                            at,
                        ))
                    }
                    other => panic!("unexpected {other:?}"),
                }),
            }
        };
    }
    assert_eq!(state.history.len(), 20, "10 turns of history");
    state::encode(&state)
}

/// decode → step (a typed fill that settles the turn with no model) → encode.
#[divan::bench]
fn typed_fill_with_checkpoint_roundtrip(bencher: Bencher) {
    let catalog = catalog();
    let settings = Settings::default();
    let engine = Engine::new(&catalog, &settings);
    let bytes = realistic_checkpoint(&engine);
    let t = turn("bench-turn", "the number is 45", 2_000_000);
    bencher.bench_local(|| {
        let state = state::decode(black_box(&bytes)).expect("decode");
        let Step::Done(outcome) = engine.step(&state, &t, &[]).expect("step") else {
            panic!("a typed fill needs no answers");
        };
        black_box(state::encode(&outcome.state))
    });
}

/// The step alone, for comparison.
#[divan::bench]
fn typed_fill_step_only(bencher: Bencher) {
    let catalog = catalog();
    let settings = Settings::default();
    let engine = Engine::new(&catalog, &settings);
    let state = state::decode(&realistic_checkpoint(&engine)).expect("decode");
    let t = turn("bench-turn", "the number is 45", 2_000_000);
    bencher.bench_local(|| black_box(engine.step(black_box(&state), &t, &[]).expect("step")));
}

/// Checkpoint decode alone.
#[divan::bench]
fn checkpoint_decode(bencher: Bencher) {
    let catalog = catalog();
    let settings = Settings::default();
    let bytes = realistic_checkpoint(&Engine::new(&catalog, &settings));
    bencher.bench_local(|| black_box(state::decode(black_box(&bytes)).expect("decode")));
}

/// Checkpoint encode alone.
#[divan::bench]
fn checkpoint_encode(bencher: Bencher) {
    let catalog = catalog();
    let settings = Settings::default();
    let state =
        state::decode(&realistic_checkpoint(&Engine::new(&catalog, &settings))).expect("decode");
    bencher.bench_local(|| black_box(state::encode(black_box(&state))));
}

/// The example config, except that order cancellation needs no confirmation: the example has no
/// tool with pre-validation and without confirmation, so no single turn there asks six answers.
fn bench_catalog() -> Catalog {
    let mut catalog = catalog();
    let bot = catalog
        .assistants
        .get_mut("retail-bot")
        .expect("retail-bot");
    bot.tools
        .get_mut("retail_order_cancel")
        .expect("retail_order_cancel")
        .confirmation = false;
    catalog
}

/// A turn on the realistic checkpoint (an address change collecting its house number) that asks
/// exactly `answers` answers, and those answers.
struct ByAnswers {
    state: AgentState,
    turn: Turn,
    answers: Vec<Answer>,
}

/// 0: a typed fill; 1: classify (handoff); 2: classify, interpret (unclear); 3: classify,
/// interpret (cancel), route (out of scope); 4: classify, route (a new intent), write-ahead,
/// execute; 5: classify, interpret (cancel), route, write-ahead, execute; 6: the same with a
/// pre-validation before the write-ahead.
const TEXTS: [&str; 7] = [
    "the number is 45",
    "I want a person",
    "hmm, not sure",
    "forget it",
    "forget it, show my bill",
    "forget it, where is order PED-1001",
    "forget it, cancel order PED-1001",
];

fn scripted(n: usize, req: &Request, at: i64) -> Answer {
    let route = |agent: &str, tool: &str| {
        Answer::Router(Ok(RouterDecision::Route {
            agent: agent.into(),
            intent: Some(tool.into()),
            confidence: 0.97,
            arguments: Default::default(),
        }))
    };
    match req {
        Request::Classify(_) => Answer::Classifier(Ok(ClassifierDecision {
            decision: match n {
                1 => SessionControl::HumanHandoff,
                4 => SessionControl::Route,
                _ => SessionControl::Continue,
            },
            confidence: 0.97,
        })),
        Request::Interpret(_) => Answer::Interpreter(Ok(InterpreterDecision {
            act: if n == 2 {
                InterpreterAct::Unclear
            } else {
                InterpreterAct::Cancel
            },
            arguments: Default::default(),
            confidence: 0.9,
        })),
        Request::Route(_) => match n {
            4 => route("billing", "billing_show_bill"),
            5 => route("retail", "retail_order_tracking"),
            6 => route("retail", "retail_order_cancel"),
            _ => Answer::Router(Ok(RouterDecision::OutOfScope { confidence: 0.9 })),
        },
        Request::PreValidate(_) => Answer::PreValidation(PreValidationResult {
            eligible: true,
            reason: None,
            code: None,
            data: serde_json::Value::Null,
            at_ms: at,
        }),
        Request::PersistExecuting(_) => Answer::Persisted,
        Request::Execute(r) => Answer::Tool(turnstile::domain::engine::single_attempt_result(
            &r.idempotency_key,
            true,
            false,
            serde_json::json!({"status": "ok"}),
            None,
            at,
        )),
    }
}

fn by_answers(engine: &Engine<'_>, n: usize) -> ByAnswers {
    let state = state::decode(&realistic_checkpoint(engine)).expect("decode");
    let at = 2_000_000;
    let turn = turn("bench-turn", TEXTS[n], at);
    let mut answers = Vec::new();
    let mut run = engine.start(&state, &turn).expect("start");
    let mut step = run.resume(None).expect("resume");
    while let Step::Need(req) = step {
        let answer = scripted(n, &req, at);
        answers.push(answer.clone());
        step = run.resume(Some(answer)).expect("resume");
    }
    drop(run);
    assert_eq!(answers.len(), n, "`{}` asks {n} answers", TEXTS[n]);
    // Both drivers give the same turn.
    assert_eq!(engine.step(&state, &turn, &answers).expect("step"), step);
    ByAnswers {
        state,
        turn,
        answers,
    }
}

const ANSWERS: [usize; 7] = [0, 1, 2, 3, 4, 5, 6];

/// The turn runs once and suspends at each request: what the pipeline does.
#[divan::bench(args = ANSWERS)]
fn continuation_by_answers(bencher: Bencher, n: usize) {
    let catalog = bench_catalog();
    let settings = Settings::default();
    let engine = Engine::new(&catalog, &settings);
    let case = by_answers(&engine, n);
    bencher.bench_local(|| {
        let mut run = engine
            .start(black_box(&case.state), &case.turn)
            .expect("start");
        let mut step = run.resume(None).expect("resume");
        for answer in &case.answers {
            step = run.resume(Some(answer.clone())).expect("resume");
        }
        black_box(step)
    });
}

/// The same turns re-run from the start for every answer (`step` with growing prefixes): what
/// the pipeline did before the continuation.
#[divan::bench(args = ANSWERS)]
fn replay_by_answers(bencher: Bencher, n: usize) {
    let catalog = bench_catalog();
    let settings = Settings::default();
    let engine = Engine::new(&catalog, &settings);
    let case = by_answers(&engine, n);
    bencher.bench_local(|| {
        let mut last = None;
        for k in 0..=case.answers.len() {
            let step = engine
                .step(black_box(&case.state), &case.turn, &case.answers[..k])
                .expect("step");
            last = Some(step);
        }
        black_box(last)
    });
}
