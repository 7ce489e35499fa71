//! Engine step on a realistic checkpoint (a few arguments, 10 history turns), with checkpoint
//! decode and encode included: the per-turn CPU the worker spends outside I/O.
//! Run: `cargo bench --bench engine_step`.

use std::path::Path;

use divan::{black_box, Bencher};
use turnstile::config::agents::load_catalog;
use turnstile::domain::catalog::{Catalog, Settings};
use turnstile::domain::decision::{
    ClassifierDecision, InterpreterAct, InterpreterDecision, RouterDecision, SessionControl,
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
