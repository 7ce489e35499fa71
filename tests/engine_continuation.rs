//! The turn engine as a coroutine (`Engine::start` / `TurnRun::resume`): what resume does at the
//! edges (a wrong answer, no answer, an answer before any question, after the end), EV-1 and an
//! unknown assistant through it, and LC-4 recovery from the recorded answer log. The equivalence
//! with the from-scratch replay over random turns is in tests/engine_properties.rs.

use turnstile::config::agents::load_catalog;
use turnstile::domain::catalog::{Catalog, Settings};
use turnstile::domain::decision::{
    ClassifierDecision, ModelFailure, RouterDecision, SessionControl,
};
use turnstile::domain::effect::{Answer, Request};
use turnstile::domain::engine::{single_attempt_result, Engine, EngineError, Step, TurnRun};
use turnstile::domain::state::AgentState;
use turnstile::domain::turn::{ChannelAction, Identity, Turn, TurnInput};

fn catalog() -> Catalog {
    load_catalog(std::path::Path::new("config/agents.example.yaml")).expect("example config")
}

fn turn(input: TurnInput) -> Turn {
    Turn {
        turn_id: "t-1".into(),
        identity: Identity::new("tenant-1", "retail-bot", "s-1"),
        input,
        locale: Default::default(),
        at_ms: 1_000_000,
    }
}

fn text(t: &str) -> Turn {
    turn(TurnInput::Text(t.into()))
}

fn route_to_bill() -> Answer {
    Answer::Router(Ok(RouterDecision::Route {
        agent: "billing".into(),
        intent: Some("billing_show_bill".into()),
        confidence: 0.97,
        arguments: Default::default(),
    }))
}

fn classified(decision: SessionControl) -> Answer {
    Answer::Classifier(Ok(ClassifierDecision {
        decision,
        confidence: 0.97,
    }))
}

/// Answers every request of the "show my bill" turn (no parameters, no confirmation: it runs
/// classify → route → write-ahead → execute).
fn bill_answer(req: &Request) -> Answer {
    match req {
        Request::Classify(_) => classified(SessionControl::Route),
        Request::Route(_) => route_to_bill(),
        Request::PersistExecuting(_) => Answer::Persisted,
        Request::Execute(r) => Answer::Tool(single_attempt_result(
            &r.idempotency_key,
            true,
            false,
            serde_json::json!({"total": "R$ 71,99"}),
            None,
            1_000_000,
        )),
        other => panic!("the bill turn does not ask {other:?}"),
    }
}

/// Runs `run` to its end answering with `answer`; the requests asked, and the last step.
fn finish(
    run: &mut TurnRun<'_>,
    mut step: Step,
    answer: fn(&Request) -> Answer,
) -> (Vec<Request>, Step) {
    let mut asked = Vec::new();
    while let Step::Need(req) = step {
        let a = answer(&req);
        asked.push(req);
        step = run.resume(Some(a)).expect("no engine error");
    }
    (asked, step)
}

#[test]
fn a_wrong_kind_of_answer_is_a_mismatch_at_its_index_and_ends_the_run() {
    let catalog = catalog();
    let settings = Settings::default();
    let engine = Engine::new(&catalog, &settings);
    let t = text("show my bill");
    let mut run = engine.start(&AgentState::default(), &t).unwrap();
    assert!(matches!(
        run.resume(None),
        Ok(Step::Need(Request::Classify(_)))
    ));
    assert_eq!(
        run.resume(Some(route_to_bill())),
        Err(EngineError::AnswerMismatch {
            index: 0,
            expected: "classifier",
            got: "router",
        })
    );
    assert!(run.is_over());
    assert_eq!(run.resume(None), Err(EngineError::TurnOver));
    // The same mismatch further in (answer #1), and the replay reports it identically.
    let mut run = engine.start(&AgentState::default(), &t).unwrap();
    run.resume(None).unwrap();
    assert!(matches!(
        run.resume(Some(classified(SessionControl::Route))),
        Ok(Step::Need(Request::Route(_)))
    ));
    let wrong = Answer::Interpreter(Err(ModelFailure::Timeout));
    let expected = Err(EngineError::AnswerMismatch {
        index: 1,
        expected: "router",
        got: "interpreter",
    });
    assert_eq!(run.resume(Some(wrong.clone())), expected);
    let log = [classified(SessionControl::Route), wrong];
    assert_eq!(engine.step(&AgentState::default(), &t, &log), expected);
}

#[test]
fn resume_after_done_is_turn_over_not_a_panic() {
    let catalog = catalog();
    let settings = Settings::default();
    let engine = Engine::new(&catalog, &settings);
    // A channel action with nothing to cancel: done at the first resume, no model asked.
    let t = turn(TurnInput::Action(ChannelAction::Cancel));
    let mut run = engine.start(&AgentState::default(), &t).unwrap();
    let Ok(Step::Done(outcome)) = run.resume(None) else {
        panic!("a cancel with nothing to cancel asks nothing");
    };
    assert_eq!(
        outcome.settled_without_model,
        Some(turnstile::domain::effect::ModelFreeReading::ChannelAction)
    );
    assert!(run.is_over());
    for _ in 0..3 {
        assert_eq!(run.resume(None), Err(EngineError::TurnOver));
        assert_eq!(
            run.resume(Some(Answer::Persisted)),
            Err(EngineError::TurnOver)
        );
    }
    // And after a turn that asked: the last answer ends it, the next resume is over.
    let t = text("show my bill");
    let mut run = engine.start(&AgentState::default(), &t).unwrap();
    let first = run.resume(None).unwrap();
    let (asked, last) = finish(&mut run, first, bill_answer);
    assert_eq!(
        asked.len(),
        4,
        "classify, route, write-ahead, execute: {asked:?}"
    );
    assert!(matches!(last, Step::Done(_)));
    assert_eq!(
        run.resume(Some(Answer::Persisted)),
        Err(EngineError::TurnOver)
    );
}

#[test]
fn no_answer_while_asked_and_an_answer_before_any_question_are_refused_and_change_nothing() {
    let catalog = catalog();
    let settings = Settings::default();
    let engine = Engine::new(&catalog, &settings);
    let t = text("show my bill");
    let base = AgentState::default();
    let mut clean = engine.start(&base, &t).unwrap();
    let first = clean.resume(None).unwrap();
    let (_, expected) = finish(&mut clean, first.clone(), bill_answer);

    let mut run = engine.start(&base, &t).unwrap();
    assert_eq!(
        run.resume(Some(Answer::Persisted)),
        Err(EngineError::UnaskedAnswer {
            index: 0,
            got: "persisted",
        })
    );
    assert_eq!(run.resume(None).as_ref(), Ok(&first));
    assert_eq!(
        run.resume(None),
        Err(EngineError::AnswerMissing { index: 0 })
    );
    let second = run.resume(Some(classified(SessionControl::Route))).unwrap();
    assert_eq!(
        run.resume(None),
        Err(EngineError::AnswerMissing { index: 1 })
    );
    assert!(run.answers().len() == 1 && !run.is_over());
    let (_, last) = finish(&mut run, second, bill_answer);
    assert_eq!(
        last, expected,
        "the refused calls left the run where it was"
    );
}

#[test]
fn duplicate_turn_and_unknown_assistant_behave_as_the_replay() {
    let catalog = catalog();
    let settings = Settings::default();
    let engine = Engine::new(&catalog, &settings);
    let t = text("show my bill");
    let mut run = engine.start(&AgentState::default(), &t).unwrap();
    let first = run.resume(None).unwrap();
    let Step::Done(outcome) = finish(&mut run, first, bill_answer).1 else {
        panic!("the bill turn ends");
    };
    // EV-1: the turn again, through the continuation: done at once, nothing changes.
    let mut again = engine.start(&outcome.state, &t).unwrap();
    assert_eq!(
        again.resume(Some(Answer::Persisted)),
        Err(EngineError::UnaskedAnswer {
            index: 0,
            got: "persisted",
        })
    );
    let done = again.resume(None).unwrap();
    assert_eq!(Ok(done.clone()), engine.step(&outcome.state, &t, &[]));
    let Step::Done(dup) = done else {
        panic!("a duplicate asks nothing");
    };
    assert!(dup.duplicate && dup.replies.is_empty() && dup.events.is_empty());
    assert_eq!(dup.state, outcome.state);
    assert_eq!(again.resume(None), Err(EngineError::TurnOver));

    let mut stranger = t.clone();
    stranger.identity.agent_id = "no-such-bot".into();
    let unknown = Err(EngineError::UnknownAssistant("no-such-bot".into()));
    assert_eq!(
        engine.start(&AgentState::default(), &stranger).err(),
        unknown.clone().err()
    );
    assert_eq!(engine.step(&AgentState::default(), &stranger, &[]), unknown);
}

// LC-4: the write-ahead records the base state and the answers so far (the run's log plus the
// write-ahead's own `Persisted`); a fresh run fed that log after a crash asks no model again,
// re-issues the tool call with the same idempotency key and ends the turn exactly as the
// uninterrupted run does.
#[test]
fn recovery_from_the_recorded_answer_log_reproduces_the_turn() {
    let catalog = catalog();
    let settings = Settings::default();
    let engine = Engine::new(&catalog, &settings);
    let t = text("show my bill");
    let base = AgentState::default();
    let mut run = engine.start(&base, &t).unwrap();
    let mut step = run.resume(None).unwrap();
    let mut log = loop {
        match step {
            Step::Need(Request::PersistExecuting(_)) => break run.answers().to_vec(),
            Step::Need(req) => step = run.resume(Some(bill_answer(&req))).unwrap(),
            Step::Done(_) => panic!("the bill turn executes"),
        }
    };
    log.push(Answer::Persisted);
    let Step::Need(Request::Execute(call)) = run.resume(Some(Answer::Persisted)).unwrap() else {
        panic!("execute follows the write-ahead");
    };
    let (mut recovered, first) = engine.replay(&base, &t, &log).unwrap();
    let Step::Need(Request::Execute(again)) = first.clone() else {
        panic!("recovery asks for the execution first, got {first:?}");
    };
    assert_eq!(again, call, "same call, same idempotency key");
    assert_eq!(recovered.answers(), &log[..]);
    let answer = bill_answer(&Request::Execute(call));
    let original = run.resume(Some(answer.clone())).unwrap();
    let replayed = recovered.resume(Some(answer)).unwrap();
    assert!(matches!(original, Step::Done(_)));
    assert_eq!(replayed, original);
}
