//! Property tests of the engine's invariants over random conversations (LC-2, LC-3, MG-3, EV-1).

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::{json, Value};
use turnstile::config::agents::load_catalog;
use turnstile::domain::catalog::{Catalog, Settings};
use turnstile::domain::decision::{
    ClassifierDecision, InterpreterAct, InterpreterDecision, ModelFailure, PreValidationResult,
    RouterDecision, SessionControl,
};
use turnstile::domain::effect::{Answer, Request};
use turnstile::domain::engine::{single_attempt_result, Engine, EngineError, Step};
use turnstile::domain::locale::Locale;
use turnstile::domain::state::AgentState;
use turnstile::domain::transaction::{Transaction, TransactionStatus};
use turnstile::domain::turn::{ChannelAction, Identity, Turn, TurnInput};

const TEXTS: &[&str] = &[
    "cancel my order",
    "PED-1001",
    "the order is PED-2002",
    "o pedido é PED-3003",
    "PED-12",
    "R$ 71,99",
    "my zip is 01310-100 and the number is 45",
    "yes",
    "sim, pode",
    "no",
    "wait, the number is 46",
    "forget it, show my bill",
    "order",
    "I want a person",
    "bye",
    "",
    "🙂 ???",
];

const TOOLS: &[(&str, &str)] = &[
    ("retail", "retail_order_cancel"),
    ("retail", "retail_order_tracking"),
    ("retail", "retail_address_change"),
    ("billing", "billing_contestation"),
    ("billing", "billing_show_bill"),
];

#[derive(Debug, Clone)]
struct TurnPlan {
    input: Result<usize, ChannelAction>,
    pt_br: bool,
    gap_s: i64,
    classifier: (u8, f64),
    router: (u8, usize, f64),
    interpreter: (u8, f64, Option<(String, Value)>),
    eligible: bool,
    tool_ok: bool,
}

fn action() -> impl Strategy<Value = ChannelAction> {
    prop_oneof![
        Just(ChannelAction::Confirm),
        Just(ChannelAction::Decline),
        Just(ChannelAction::Cancel),
        Just(ChannelAction::Handoff),
        Just(ChannelAction::End),
    ]
}

fn argument() -> impl Strategy<Value = Option<(String, Value)>> {
    prop_oneof![
        Just(None),
        Just(Some(("order_id".to_string(), json!("PED-4444")))),
        Just(Some(("order_id".to_string(), json!("nope")))),
        Just(Some(("amount".to_string(), json!("R$ 10,00")))),
        Just(Some(("subject".to_string(), json!("gym")))),
        Just(Some(("house_number".to_string(), json!(12)))),
        Just(Some(("zip_code".to_string(), json!(true)))),
    ]
}

fn plan() -> impl Strategy<Value = TurnPlan> {
    (
        prop_oneof![4 => (0..TEXTS.len()).prop_map(Ok), 1 => action().prop_map(Err)],
        any::<bool>(),
        prop_oneof![10 => 1i64..60, 1 => 1800i64..4000],
        (0u8..6, 0.0f64..1.0),
        (0u8..5, 0..TOOLS.len(), 0.5f64..1.0),
        (0u8..7, 0.5f64..1.0, argument()),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(input, pt_br, gap_s, classifier, router, interpreter, eligible, tool_ok)| TurnPlan {
                input,
                pt_br,
                gap_s,
                classifier,
                router,
                interpreter,
                eligible,
                tool_ok,
            },
        )
}

fn answer(req: &Request, p: &TurnPlan, at_ms: i64) -> Answer {
    match req {
        Request::Classify(_) => Answer::Classifier(match p.classifier.0 {
            0 => Err(ModelFailure::InvalidJson),
            1 => Ok(ClassifierDecision {
                decision: SessionControl::Continue,
                confidence: 0.5 + p.classifier.1 / 2.0,
            }),
            2 => Ok(ClassifierDecision {
                decision: SessionControl::Route,
                confidence: 0.95,
            }),
            3 => Ok(ClassifierDecision {
                decision: SessionControl::HumanHandoff,
                confidence: p.classifier.1,
            }),
            4 => Ok(ClassifierDecision {
                decision: SessionControl::EndSession,
                confidence: 0.95,
            }),
            _ => Ok(ClassifierDecision {
                decision: SessionControl::Continue,
                confidence: 0.99,
            }),
        }),
        Request::Route(_) => Answer::Router(match p.router.0 {
            0 => Err(ModelFailure::Timeout),
            1 => Ok(RouterDecision::OutOfScope { confidence: 0.9 }),
            2 => Ok(RouterDecision::Route {
                agent: TOOLS[p.router.1].0.into(),
                intent: None,
                confidence: p.router.2,
                arguments: BTreeMap::new(),
            }),
            _ => Ok(RouterDecision::Route {
                agent: TOOLS[p.router.1].0.into(),
                intent: Some(TOOLS[p.router.1].1.into()),
                confidence: p.router.2,
                arguments: p.interpreter.2.clone().into_iter().collect(),
            }),
        }),
        Request::Interpret(_) => Answer::Interpreter(match p.interpreter.0 {
            0 => Err(ModelFailure::Error),
            n => Ok(InterpreterDecision {
                act: [
                    InterpreterAct::Provide,
                    InterpreterAct::Cancel,
                    InterpreterAct::Affirm,
                    InterpreterAct::Deny,
                    InterpreterAct::Unclear,
                    InterpreterAct::Provide,
                ][(n as usize - 1) % 6],
                arguments: p.interpreter.2.clone().into_iter().collect(),
                confidence: p.interpreter.1,
            }),
        }),
        Request::PreValidate(_) => Answer::PreValidation(PreValidationResult {
            eligible: p.eligible,
            reason: None,
            code: None,
            data: Value::Null,
            at_ms,
        }),
        Request::PersistExecuting(_) => Answer::Persisted,
        Request::Execute(r) => Answer::Tool(single_attempt_result(
            &r.idempotency_key,
            p.tool_ok,
            !p.tool_ok,
            json!({}),
            None,
            at_ms,
        )),
    }
}

fn catalog() -> Catalog {
    load_catalog(std::path::Path::new("config/agents.example.yaml")).expect("example config")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_over_random_conversations(plans in prop::collection::vec(plan(), 1..14)) {
        let catalog = catalog();
        let settings = Settings::default();
        let engine = Engine::new(&catalog, &settings);
        let assistant = catalog.assistant("retail-bot").unwrap();
        let mut state = AgentState::default();
        let mut at = 1_000_000i64;
        for (i, p) in plans.iter().enumerate() {
            at += p.gap_s * 1000;
            let turn = Turn {
                turn_id: format!("p{i}"),
                identity: Identity::new("t1", "retail-bot", "prop"),
                input: match p.input {
                    Ok(t) => TurnInput::Text(TEXTS[t].into()),
                    Err(a) => TurnInput::Action(a),
                },
                locale: if p.pt_br { Locale::PtBr } else { Locale::En },
                at_ms: at,
            };
            let mut answers = Vec::new();
            let outcome = loop {
                match engine.step(&state, &turn, &answers).expect("no engine error") {
                    Step::Done(o) => break *o,
                    Step::Need(req) => answers.push(answer(&req, p, at)),
                }
            };
            prop_assert!(answers.len() <= 8, "a turn asks a bounded number of questions");
            // LC-3: no transition leaves a terminal state.
            for t in &outcome.transitions {
                prop_assert!(!t.from.is_terminal(), "{:?}", t);
            }
            let new = &outcome.state;
            // LC-2: the latch is cleared only through a terminal state, with its snapshot emitted.
            if let Some(prev) = &state.active_transaction {
                let still = new.active_transaction.as_ref().is_some_and(|t| t.id == prev.id);
                if !still {
                    let ended = outcome.events.iter().any(|e| {
                        e.data["transaction"]["id"] == json!(prev.id)
                            && e.data["transaction"]["status"].as_str().is_some_and(|s| {
                                ["COMPLETED", "CANCELLED", "OUT_OF_SCOPE", "FAILED"].contains(&s)
                            })
                    });
                    prop_assert!(ended, "transaction {} vanished without a terminal event", prev.id);
                }
            }
            if let Some(tx) = &new.active_transaction {
                prop_assert!(!tx.status.is_terminal());
                // MG-3: missing = required − valid present, after every turn.
                let tool = &assistant.tools[&tx.tool];
                let expected: Vec<String> = tool.parameters.iter()
                    .filter(|p| p.required && !tx.arguments.contains_key(&p.name))
                    .map(|p| p.name.clone()).collect();
                prop_assert_eq!(&tx.missing_parameters, &expected);
                prop_assert_eq!(&new.missing_parameters, &expected);
                for (k, v) in &tx.arguments {
                    let spec = tool.parameter(k).expect("only the tool's parameters are stored");
                    prop_assert_eq!(&spec.kind.validate(v, Locale::En).expect("stored values are valid"), v);
                }
            } else {
                prop_assert!(new.missing_parameters.is_empty());
            }
            // EV-1: the same turn again changes nothing.
            match engine.step(new, &turn, &[]).expect("no engine error") {
                Step::Done(again) => {
                    prop_assert!(again.duplicate);
                    prop_assert_eq!(&again.state, new);
                    prop_assert!(again.replies.is_empty() && again.events.is_empty() && again.executed.is_empty());
                }
                Step::Need(r) => prop_assert!(false, "a redelivered turn asked {:?}", r),
            }
            state = outcome.state;
        }
    }
}

/// A stored transaction of `tool` in any status, with a prefix of its required parameters filled.
fn planted(tool: usize, status: usize, filled: usize, confirmed: bool) -> AgentState {
    let catalog = catalog();
    let assistant = catalog.assistant("retail-bot").unwrap();
    let (agent, name) = TOOLS[tool];
    let spec = &assistant.tools[name];
    let values = [
        ("order_id", json!("PED-1001")),
        ("zip_code", json!("01310-100")),
        ("house_number", json!(45)),
        ("subject", json!("gym charge")),
        ("amount", json!("71.99")),
    ];
    let required: Vec<String> = spec
        .parameters
        .iter()
        .filter(|p| p.required)
        .map(|p| p.name.clone())
        .collect();
    let arguments: BTreeMap<String, Value> = required
        .iter()
        .take(filled)
        .filter_map(|n| values.iter().find(|(k, _)| k == n))
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let mut state = AgentState {
        active_transaction: Some(Transaction {
            id: "planted".into(),
            agent: agent.into(),
            tool: name.into(),
            status: TransactionStatus::ALL[status],
            reason: None,
            missing_parameters: required
                .iter()
                .filter(|n| !arguments.contains_key(*n))
                .cloned()
                .collect(),
            arguments,
            confirmation_required: spec.confirmation,
            confirmation_received: confirmed,
            pre_validation: Vec::new(),
            evidence: Vec::new(),
            turn_ids: Vec::new(),
            failed_attempts: 0,
            executing_turn_id: Some("earlier".into()),
            opened_at_ms: 1_000_000,
            updated_at_ms: 1_000_000,
        }),
        active_agent: Some(agent.into()),
        last_turn_at_ms: Some(1_000_000),
        ..AgentState::default()
    };
    state.recompute_projections();
    state
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    // LC-3: whatever status a stored transaction has (all nine, seed-era checkpoints included) and
    // whatever the turn and the answers are, the engine never attempts an illegal transition: the
    // restore step normalises IDLE, terminal and EXECUTING first, and every later target is legal.
    #[test]
    fn no_stored_status_and_input_reach_an_illegal_transition(
        tool in 0..TOOLS.len(),
        status in 0..TransactionStatus::ALL.len(),
        filled in 0usize..4,
        confirmed in any::<bool>(),
        plans in prop::collection::vec(plan(), 1..4),
    ) {
        let catalog = catalog();
        let settings = Settings::default();
        let engine = Engine::new(&catalog, &settings);
        let mut state = planted(tool, status, filled, confirmed);
        let mut at = 1_000_000i64;
        for (i, p) in plans.iter().enumerate() {
            at += p.gap_s * 1000;
            let turn = Turn {
                turn_id: format!("p{i}"),
                identity: Identity::new("t1", "retail-bot", "prop"),
                input: match p.input {
                    Ok(t) => TurnInput::Text(TEXTS[t].into()),
                    Err(a) => TurnInput::Action(a),
                },
                locale: if p.pt_br { Locale::PtBr } else { Locale::En },
                at_ms: at,
            };
            let mut answers = Vec::new();
            let outcome = loop {
                match engine.step(&state, &turn, &answers) {
                    Ok(Step::Done(o)) => break *o,
                    Ok(Step::Need(req)) => answers.push(answer(&req, p, at)),
                    Err(e @ EngineError::IllegalTransition { .. }) => {
                        return Err(TestCaseError::fail(format!("reached {e}")))
                    }
                    Err(e) => return Err(TestCaseError::fail(format!("engine error {e}"))),
                }
            };
            state = outcome.state;
        }
    }
}

/// An answer of the wrong kind for `req` (a mismatch the engine must report, never absorb).
fn wrong_kind(req: &Request) -> Answer {
    match req {
        Request::Classify(_) => Answer::Persisted,
        _ => Answer::Classifier(Err(ModelFailure::Timeout)),
    }
}

/// Drives one turn through a single continuation, answering per `p` (the answer at `wrong`, if
/// it is reached, of the wrong kind). Returns every result `resume` gave, in order, and the
/// answers fed.
fn drive(
    engine: &Engine<'_>,
    state: &AgentState,
    turn: &Turn,
    p: &TurnPlan,
    wrong: Option<usize>,
) -> (Vec<Result<Step, EngineError>>, Vec<Answer>) {
    let mut run = engine.start(state, turn).expect("a configured assistant");
    let mut results = vec![run.resume(None)];
    let mut answers = Vec::new();
    while let Some(Ok(Step::Need(req))) = results.last() {
        let answer = if wrong == Some(answers.len()) {
            wrong_kind(req)
        } else {
            answer(req, p, turn.at_ms)
        };
        answers.push(answer.clone());
        results.push(run.resume(Some(answer)));
        assert_eq!(run.answers(), &answers[..], "the run's log is what was fed");
        assert!(
            results.len() <= 10,
            "a turn asks a bounded number of questions"
        );
    }
    // After Done or an error the run is over: a clear error, whatever is fed.
    assert!(run.is_over());
    assert_eq!(run.resume(None), Err(EngineError::TurnOver));
    assert_eq!(
        run.resume(Some(Answer::Persisted)),
        Err(EngineError::TurnOver)
    );
    (results, answers)
}

/// The continuation and the replay agree on one turn: `step` with the first k answers (a fresh
/// run replaying them, the old from-scratch semantics) gives what the one run's k-th `resume`
/// gave, and a run replayed to any point then resumed (LC-4 recovery from the answer log) gives
/// the rest of it. Returns the state after the turn.
fn continuation_matches_replay(
    engine: &Engine<'_>,
    state: &AgentState,
    turn: &Turn,
    p: &TurnPlan,
    wrong: Option<usize>,
) -> Result<AgentState, TestCaseError> {
    let (results, answers) = drive(engine, state, turn, p, wrong);
    for (k, result) in results.iter().enumerate() {
        prop_assert_eq!(
            &engine.step(state, turn, &answers[..k]),
            result,
            "answer prefix {}",
            k
        );
    }
    for k in 0..answers.len() {
        let (mut run, first) = engine.replay(state, turn, &answers[..k]).expect("replayed");
        prop_assert_eq!(Ok(first), results[k].clone(), "replayed to {}", k);
        prop_assert_eq!(run.answers(), &answers[..k]);
        for (j, answer) in answers.iter().enumerate().skip(k) {
            prop_assert_eq!(
                &run.resume(Some(answer.clone())),
                &results[j + 1],
                "resumed at {}",
                j
            );
        }
    }
    let last = results.last().expect("at least one resume");
    // Answers past the end of the turn are ignored by the replay, as they always were.
    let mut longer = answers.clone();
    longer.push(Answer::Persisted);
    if let Ok(Step::Done(_)) = last {
        prop_assert_eq!(&engine.step(state, turn, &longer), last);
    }
    Ok(match last {
        Ok(Step::Done(outcome)) => outcome.state.clone(),
        // A failed turn is not applied: the next one starts from the same state.
        Err(EngineError::AnswerMismatch { index, .. }) => {
            prop_assert_eq!(
                Some(*index),
                wrong,
                "only the planted wrong answer mismatches"
            );
            state.clone()
        }
        other => return Err(TestCaseError::fail(format!("turn ended with {other:?}"))),
    })
}

fn plan_turn(i: usize, p: &TurnPlan, at: i64) -> Turn {
    Turn {
        turn_id: format!("p{i}"),
        identity: Identity::new("t1", "retail-bot", "prop"),
        input: match p.input {
            Ok(t) => TurnInput::Text(TEXTS[t].into()),
            Err(a) => TurnInput::Action(a),
        },
        locale: if p.pt_br { Locale::PtBr } else { Locale::En },
        at_ms: at,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    // The turn engine as a coroutine (start/resume, one run per turn) gives exactly the steps and
    // outcome of replaying the answers from scratch (step with growing answer prefixes), over
    // random conversations, with the occasional answer of the wrong kind (AnswerMismatch at the
    // same index either way), redeliveries (EV-1) and recovery from every point (LC-4).
    #[test]
    fn continuation_gives_the_steps_of_the_replay(
        plans in prop::collection::vec((plan(), prop::option::weighted(0.15, 0usize..4)), 1..14),
    ) {
        let catalog = catalog();
        let settings = Settings::default();
        let engine = Engine::new(&catalog, &settings);
        let mut state = AgentState::default();
        let mut at = 1_000_000i64;
        for (i, (p, wrong)) in plans.iter().enumerate() {
            at += p.gap_s * 1000;
            let turn = plan_turn(i, p, at);
            state = continuation_matches_replay(&engine, &state, &turn, p, *wrong)?;
            if state.has_applied(&turn.turn_id) {
                // EV-1: redelivered, through the continuation too.
                let (results, answers) = drive(&engine, &state, &turn, p, None);
                prop_assert!(answers.is_empty());
                match &results[..] {
                    [Ok(Step::Done(again))] => {
                        prop_assert!(again.duplicate);
                        prop_assert_eq!(&again.state, &state);
                    }
                    other => prop_assert!(false, "a redelivered turn gave {:?}", other),
                }
            }
        }
    }

    // The same from stored transactions in every status (EXECUTING: LC-4 re-issues the call
    // before the turn goes on; IDLE and terminal: ST-5 diagnosis first).
    #[test]
    fn continuation_gives_the_steps_of_the_replay_from_any_stored_status(
        tool in 0..TOOLS.len(),
        status in 0..TransactionStatus::ALL.len(),
        filled in 0usize..4,
        confirmed in any::<bool>(),
        plans in prop::collection::vec((plan(), prop::option::weighted(0.15, 0usize..4)), 1..4),
    ) {
        let catalog = catalog();
        let settings = Settings::default();
        let engine = Engine::new(&catalog, &settings);
        let mut state = planted(tool, status, filled, confirmed);
        let mut at = 1_000_000i64;
        for (i, (p, wrong)) in plans.iter().enumerate() {
            at += p.gap_s * 1000;
            state = continuation_matches_replay(&engine, &state, &plan_turn(i, p, at), p, *wrong)?;
        }
    }
}
