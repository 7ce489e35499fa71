//! Engine and pipeline behaviour the scenario format cannot express: planted inconsistent or old
//! checkpoints (ST-4, ST-5), crash recovery after the write-ahead (LC-4), determinism (EV-4).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use turnstile::config::agents::load_catalog;
use turnstile::domain::catalog::{Catalog, Settings};
use turnstile::domain::decision::{
    ClassifierDecision, InterpreterDecision, ModelAnswer, ModelFailure, PreValidationResult,
    RouterDecision, SessionControl, ToolResult,
};
use turnstile::domain::effect::{
    Answer, ClassifierRequest, EventType, HandbackOutcome, InterpreterRequest, Request,
    RouterRequest, ToolRequest, TurnOutcome,
};
use turnstile::domain::engine::{single_attempt_result, Engine, Step};
use turnstile::domain::locale::Locale;
use turnstile::domain::state::{self, AgentState};
use turnstile::domain::transaction::{Transaction, TransactionStatus};
use turnstile::domain::turn::{ChannelAction, Identity, Turn, TurnInput};
use turnstile::model::{ModelScript, Scripted, ScriptedModel};
use turnstile::pipeline::{process_turn, PipelineError};
use turnstile::ports::{CallContext, CheckpointRecord, DecisionModel, ToolGateway};
use turnstile::store::InMemoryCheckpointStore;
use turnstile::telemetry::{self, MODEL_FALLBACKS_TOTAL};
use turnstile::tool::scripted::ScriptedTools;

fn catalog() -> Catalog {
    load_catalog(std::path::Path::new("config/agents.example.yaml")).expect("example config")
}

fn identity() -> Identity {
    Identity::new("t1", "retail-bot", "s-engine")
}

fn text_turn(id: &str, text: &str, at_ms: i64) -> Turn {
    Turn {
        turn_id: id.into(),
        identity: identity(),
        input: TurnInput::Text(text.into()),
        locale: Default::default(),
        at_ms,
    }
}

/// Routes "cancel" to retail_order_cancel, counts every model call.
#[derive(Default)]
struct CountingModel {
    calls: AtomicUsize,
}

impl DecisionModel for CountingModel {
    async fn classify(
        &self,
        _: &ClassifierRequest,
        _: CallContext<'_>,
    ) -> ModelAnswer<ClassifierDecision> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(ClassifierDecision {
            decision: SessionControl::Route,
            confidence: 0.99,
        })
    }
    async fn route(&self, r: &RouterRequest, _: CallContext<'_>) -> ModelAnswer<RouterDecision> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if r.message.contains("bill") {
            return Ok(RouterDecision::Route {
                agent: "billing".into(),
                intent: Some("billing_show_bill".into()),
                confidence: 0.99,
                arguments: BTreeMap::new(),
            });
        }
        Ok(RouterDecision::Route {
            agent: "retail".into(),
            intent: Some("retail_order_cancel".into()),
            confidence: 0.99,
            arguments: BTreeMap::new(),
        })
    }
    async fn interpret(
        &self,
        _: &InterpreterRequest,
        _: CallContext<'_>,
    ) -> ModelAnswer<InterpreterDecision> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Err(ModelFailure::Error)
    }
}

/// Records execution keys; can hang forever on execute to simulate a crash mid-call.
#[derive(Default)]
struct RecordingTools {
    keys: Mutex<Vec<String>>,
    hang: bool,
}

impl ToolGateway for RecordingTools {
    async fn pre_validate(&self, _: &ToolRequest, ctx: CallContext<'_>) -> PreValidationResult {
        PreValidationResult {
            eligible: true,
            reason: None,
            code: None,
            data: json!(null),
            at_ms: ctx.turn_at_ms,
        }
    }
    async fn execute(&self, r: &ToolRequest, ctx: CallContext<'_>) -> ToolResult {
        self.keys.lock().unwrap().push(r.idempotency_key.clone());
        if self.hang {
            std::future::pending::<()>().await;
        }
        single_attempt_result(
            &r.idempotency_key,
            true,
            false,
            json!({}),
            None,
            ctx.turn_at_ms,
        )
    }
}

// LC-4 + EV-1 + EV-4: a crash after the EXECUTING write-ahead re-issues the same call with the
// same key on redelivery, asks no model again, and produces the turn's full outcome.
#[tokio::test]
async fn crash_after_write_ahead_replays_without_model_and_same_key() {
    let catalog = catalog();
    let settings = Settings::default();
    let engine = Engine::new(&catalog, &settings);
    let store = InMemoryCheckpointStore::new();
    let model = CountingModel::default();
    let turn = text_turn("u1", "show my bill", 1_000);

    let crashing = RecordingTools {
        hang: true,
        ..Default::default()
    };
    let crashed = tokio::time::timeout(
        Duration::from_millis(200),
        process_turn(&engine, &store, &model, &crashing, &turn),
    )
    .await;
    assert!(
        crashed.is_err(),
        "the execute call hangs: the turn never finished"
    );
    let calls_before = model.calls.load(Ordering::SeqCst);
    assert_eq!(calls_before, 2, "classifier + router before the crash");
    let stored = state::decode(&store.get(&identity()).unwrap().state).unwrap();
    assert_eq!(
        stored.active_transaction.as_ref().unwrap().status,
        TransactionStatus::Executing,
        "LC-4: EXECUTING is checkpointed before the tool is called"
    );

    let tools = RecordingTools::default();
    let replayed = process_turn(&engine, &store, &model, &tools, &turn)
        .await
        .unwrap();
    assert!(replayed.recovered);
    assert_eq!(
        model.calls.load(Ordering::SeqCst),
        calls_before,
        "no second model call"
    );
    assert_eq!(
        *crashing.keys.lock().unwrap(),
        *tools.keys.lock().unwrap(),
        "same idempotency key"
    );
    let kinds: Vec<_> = replayed.outcome.events.iter().map(|e| e.kind).collect();
    // Contract, Events: as things happened — started, then its own ending.
    assert_eq!(kinds, vec![EventType::Started, EventType::Completed]);
    assert_eq!(
        replayed.outcome.state.transaction_status,
        Some(TransactionStatus::Completed)
    );

    // EV-1: a third delivery is a duplicate and executes nothing.
    let again = process_turn(&engine, &store, &model, &tools, &turn)
        .await
        .unwrap();
    assert!(again.outcome.duplicate);
    assert_eq!(tools.keys.lock().unwrap().len(), 1);
}

fn planted(status: TransactionStatus, tool: &str) -> AgentState {
    let mut s = AgentState {
        active_transaction: Some(Transaction {
            id: "tx-planted".into(),
            agent: "retail".into(),
            tool: tool.into(),
            status,
            reason: None,
            arguments: BTreeMap::from([("order_id".into(), json!("PED-1001"))]),
            missing_parameters: vec![],
            confirmation_required: true,
            confirmation_received: true,
            pre_validation: vec![],
            evidence: vec![],
            turn_ids: vec!["old".into()],
            failed_attempts: 0,
            executing_turn_id: Some("old".into()),
            opened_at_ms: 0,
            updated_at_ms: 0,
        }),
        active_agent: Some("retail".into()),
        last_turn_at_ms: Some(0),
        ..Default::default()
    };
    s.recompute_projections();
    s
}

// LC-4: a transaction found in EXECUTING by a later turn is finished first with the same key.
#[test]
fn executing_found_on_a_later_turn_reissues_the_same_call() {
    let catalog = catalog();
    let settings = Settings::default();
    let engine = Engine::new(&catalog, &settings);
    let state = planted(TransactionStatus::Executing, "retail_order_cancel");
    let turn = text_turn("u2", "hello", 1_000);
    match engine.step(&state, &turn, &[]).unwrap() {
        Step::Need(Request::Execute(r)) => assert_eq!(r.idempotency_key, "tx-planted:execute"),
        other => panic!("expected the tool call first, got {other:?}"),
    }
}

// ST-5: a live status without a transaction is diagnosed, and nothing is restarted.
#[test]
fn status_without_transaction_is_diagnosed() {
    let catalog = catalog();
    let settings = Settings::default();
    let engine = Engine::new(&catalog, &settings);
    let state = AgentState {
        transaction_status: Some(TransactionStatus::CollectingParameters),
        missing_parameters: vec!["order_id".into()],
        ..Default::default()
    };
    let turn = Turn {
        input: TurnInput::Action(ChannelAction::Confirm),
        ..text_turn("u3", "", 1_000)
    };
    let Step::Done(outcome) = engine.step(&state, &turn, &[]).unwrap() else {
        panic!("a structured action needs no answers");
    };
    assert_eq!(outcome.inconsistencies.len(), 1);
    assert_eq!(outcome.events[0].kind, EventType::StateInconsistent);
    assert_eq!(
        outcome.events[0].data["reason"],
        "status_without_transaction"
    );
    assert!(
        outcome.executed.is_empty(),
        "the tool is never silently restarted"
    );
    assert_eq!(outcome.state.transaction_status, None);
}

// ST-5: an active transaction whose tool is no longer configured ends FAILED, diagnosed.
#[test]
fn unconfigured_tool_is_diagnosed_and_failed() {
    let catalog = catalog();
    let settings = Settings::default();
    let engine = Engine::new(&catalog, &settings);
    let state = planted(TransactionStatus::AwaitingConfirmation, "retail_gift_wrap");
    let turn = Turn {
        input: TurnInput::Action(ChannelAction::Confirm),
        ..text_turn("u4", "", 1_000)
    };
    let Step::Done(outcome) = engine.step(&state, &turn, &[]).unwrap() else {
        panic!("no answers needed");
    };
    let kinds: Vec<_> = outcome.events.iter().map(|e| e.kind).collect();
    assert_eq!(kinds, vec![EventType::StateInconsistent, EventType::Failed]);
    let last = outcome.state.last_transaction.unwrap();
    assert_eq!(last.status, TransactionStatus::Failed);
    assert_eq!(last.reason.as_deref(), Some("tool_not_configured"));
    assert!(outcome.executed.is_empty());
}

// ST-5: a stored active transaction whose own status is IDLE ends CANCELLED (inconsistent_state),
// diagnosed, and the turn goes on — the conversation is never wedged into dead letters.
#[test]
fn idle_active_transaction_is_cancelled_and_the_turn_goes_on() {
    let catalog = catalog();
    let settings = Settings::default();
    let engine = Engine::new(&catalog, &settings);
    let state = planted(TransactionStatus::Idle, "retail_order_cancel");
    let turn = Turn {
        input: TurnInput::Action(ChannelAction::Handoff),
        ..text_turn("u6", "", 1_000)
    };
    let Step::Done(outcome) = engine.step(&state, &turn, &[]).unwrap() else {
        panic!("a structured action needs no answers");
    };
    let kinds: Vec<_> = outcome.events.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        vec![
            EventType::StateInconsistent,
            EventType::Cancelled,
            EventType::HumanHandoffRequested
        ]
    );
    assert_eq!(outcome.events[0].data["reason"], "transaction_not_active");
    assert_eq!(outcome.events[1].data["transaction"]["id"], "tx-planted");
    let last = outcome.state.last_transaction.as_ref().unwrap();
    assert_eq!(last.status, TransactionStatus::Cancelled);
    assert_eq!(last.reason.as_deref(), Some("inconsistent_state"));
    assert!(outcome.state.active_transaction.is_none());
    assert!(outcome.state.human_handoff_requested, "the turn went on");
}

// ST-5: a stored active transaction that is already terminal is copied to last_transaction as
// it is, with no second ending event; the next message is handled normally.
#[test]
fn terminal_active_transaction_moves_to_last_without_a_second_event() {
    let catalog = catalog();
    let settings = Settings::default();
    let engine = Engine::new(&catalog, &settings);
    for status in [
        TransactionStatus::Completed,
        TransactionStatus::Cancelled,
        TransactionStatus::OutOfScope,
        TransactionStatus::Failed,
    ] {
        let state = planted(status, "retail_order_cancel");
        let turn = Turn {
            input: TurnInput::Action(ChannelAction::Cancel),
            ..text_turn("u7", "", 1_000)
        };
        let Step::Done(outcome) = engine.step(&state, &turn, &[]).unwrap() else {
            panic!("a structured action needs no answers");
        };
        let kinds: Vec<_> = outcome.events.iter().map(|e| e.kind).collect();
        assert_eq!(kinds, vec![EventType::StateInconsistent], "{status:?}");
        let last = outcome.state.last_transaction.as_ref().unwrap();
        assert_eq!(last.status, status);
        assert_eq!(last.id, "tx-planted");
        assert!(last.reason.is_none(), "kept as it was");
        assert!(outcome.state.active_transaction.is_none());
        assert_eq!(outcome.state.transaction_status, Some(status));
    }
}

// ST-4: a seed-era checkpoint whose active transaction has only the seed's fields loads, gets its
// agent from the configured tool, and continues: `PED-1001` fills the order id.
#[tokio::test]
async fn seed_shaped_checkpoint_continues_the_transaction() {
    let catalog = catalog();
    let settings = Settings::default();
    let engine = Engine::new(&catalog, &settings);
    let store = InMemoryCheckpointStore::new();
    let seed = br#"{
        "active_transaction": {"tool": "retail_order_cancel", "status": "COLLECTING_PARAMETERS",
            "arguments": {}, "missing_parameters": ["order_id"],
            "confirmation_required": true, "confirmation_received": false},
        "last_transaction": {},
        "transaction_status": "COLLECTING_PARAMETERS",
        "missing_parameters": ["order_id"],
        "history": [{"role": "user", "content": "cancel my order"}]
    }"#;
    store.put(
        &identity(),
        CheckpointRecord {
            state: seed.to_vec(),
            ..Default::default()
        },
    );
    let model = CountingModel::default();
    let processed = process_turn(
        &engine,
        &store,
        &model,
        &RecordingTools::default(),
        &text_turn("u8", "PED-1001", 1_000),
    )
    .await
    .unwrap();
    let tx = processed.outcome.state.active_transaction.as_ref().unwrap();
    assert_eq!(tx.agent, "retail");
    assert_eq!(tx.arguments["order_id"], "PED-1001");
    assert_eq!(tx.status, TransactionStatus::AwaitingConfirmation);
    assert_eq!(model.calls.load(Ordering::SeqCst), 0, "PR-1: no model");
    let stored = state::decode(&store.get(&identity()).unwrap().state).unwrap();
    assert_eq!(stored.schema_version, state::SCHEMA_VERSION);
    assert_eq!(stored.active_transaction.unwrap().id, tx.id);
}

// ST-4: an undecodable checkpoint is an error, never silently replaced by an empty state.
#[tokio::test]
async fn undecodable_checkpoint_is_reported_not_replaced() {
    let catalog = catalog();
    let settings = Settings::default();
    let engine = Engine::new(&catalog, &settings);
    let store = InMemoryCheckpointStore::new();
    let garbage = CheckpointRecord {
        state: b"{\"schema_version\": 2, \"history\": 7".to_vec(),
        ..Default::default()
    };
    store.put(&identity(), garbage.clone());
    let result = process_turn(
        &engine,
        &store,
        &CountingModel::default(),
        &RecordingTools::default(),
        &text_turn("u5", "cancel my order", 1_000),
    )
    .await;
    assert!(
        matches!(result, Err(PipelineError::Checkpoint(_))),
        "{result:?}"
    );
    assert_eq!(
        store.get(&identity()),
        Some(garbage),
        "the stored bytes are untouched"
    );
}

// EV-4: the same turn on the same identity opens the same transaction id, on any instance.
#[test]
fn transaction_ids_are_deterministic() {
    let catalog = catalog();
    let settings = Settings::default();
    let engine = Engine::new(&catalog, &settings);
    let turn = text_turn("u6", "cancel my order", 1_000);
    let answers = vec![
        turnstile::domain::effect::Answer::Classifier(Ok(ClassifierDecision {
            decision: SessionControl::Route,
            confidence: 0.99,
        })),
        turnstile::domain::effect::Answer::Router(Ok(RouterDecision::Route {
            agent: "retail".into(),
            intent: Some("retail_order_cancel".into()),
            confidence: 0.99,
            arguments: BTreeMap::new(),
        })),
    ];
    let id_of = || match engine
        .step(&AgentState::default(), &turn, &answers)
        .unwrap()
    {
        Step::Done(o) => o.state.active_transaction.unwrap().id,
        other => panic!("{other:?}"),
    };
    assert_eq!(id_of(), id_of());
    let other = Turn {
        identity: Identity::new("t2", "retail-bot", "s-engine"),
        ..turn.clone()
    };
    let Step::Done(o) = engine
        .step(&AgentState::default(), &other, &answers)
        .unwrap()
    else {
        panic!()
    };
    assert_ne!(
        o.state.active_transaction.unwrap().id,
        id_of(),
        "tenants never share ids"
    );
}

/// Counts every counter by `name{label=value,…}` (labels sorted), for one closure at a time
/// (`metrics::with_local_recorder`), so a test sees exactly the label sets the code used.
#[derive(Default)]
struct CountingRecorder {
    counters: Mutex<BTreeMap<String, Arc<AtomicU64>>>,
}

impl CountingRecorder {
    /// Every series of the family `name` that counted anything.
    fn family(&self, name: &str) -> Vec<(String, u64)> {
        self.counters
            .lock()
            .unwrap()
            .iter()
            .filter(|(k, _)| k.split('{').next() == Some(name))
            .map(|(k, v)| (k.clone(), v.load(Ordering::SeqCst)))
            .filter(|(_, v)| *v > 0)
            .collect()
    }
}

impl metrics::Recorder for CountingRecorder {
    fn describe_counter(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_gauge(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_histogram(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }

    fn register_counter(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Counter {
        let mut labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        labels.sort();
        let series = format!("{}{{{}}}", key.name(), labels.join(","));
        let counter = self
            .counters
            .lock()
            .unwrap()
            .entry(series)
            .or_default()
            .clone();
        metrics::Counter::from_arc(counter)
    }

    fn register_gauge(&self, _: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
        metrics::Gauge::noop()
    }

    fn register_histogram(
        &self,
        _: &metrics::Key,
        _: &metrics::Metadata<'_>,
    ) -> metrics::Histogram {
        metrics::Histogram::noop()
    }
}

fn scripted(answer: Value) -> Scripted {
    match answer {
        Value::Object(map) => Scripted::Answer(map),
        other => panic!("a scripted answer is an object, got {other}"),
    }
}

/// SC-2: every fallback is counted in `turnstile_model_fallbacks_total` with exactly its own
/// `reason` (and skill): a turn through the pipeline with one model fault, its outcome recorded
/// as the worker records it (`telemetry::record_outcome`), and no other fallback series moves.
#[tokio::test]
async fn sc2_each_fallback_is_counted_with_exactly_its_reason_label() {
    let routed = json!({"agent": "retail", "intent": "retail_order_cancel", "confidence": 0.95, "arguments": {}});
    let cases = [
        (
            "classifier",
            "low_confidence",
            Some(scripted(json!({"decision": "CONTINUE", "confidence": 0.5}))),
            scripted(routed.clone()),
        ),
        // The body a real endpoint could send: a label outside the enum is invalid output.
        (
            "classifier",
            "invalid_json",
            Some(scripted(json!({"decision": "MAYBE", "confidence": 0.99}))),
            scripted(routed.clone()),
        ),
        (
            "classifier",
            "timeout",
            Some(Scripted::Fault(ModelFailure::Timeout)),
            scripted(routed.clone()),
        ),
        (
            "classifier",
            "error",
            Some(Scripted::Fault(ModelFailure::Error)),
            scripted(routed.clone()),
        ),
        (
            "router",
            "unknown_target",
            Some(scripted(json!({"decision": "ROUTE", "confidence": 0.97}))),
            scripted(
                json!({"agent": "travel", "intent": "travel_book", "confidence": 0.95, "arguments": {}}),
            ),
        ),
    ];
    let catalog = catalog();
    let settings = Settings::default();
    let engine = Engine::new(&catalog, &settings);
    for (skill, reason, classifier, router) in cases {
        let store = InMemoryCheckpointStore::new();
        let model = ScriptedModel::new(ModelScript {
            classifier,
            router: Some(router),
            interpreter: None,
        });
        let tools = ScriptedTools::new(BTreeMap::new());
        let turn = text_turn("u1", "I want to cancel my order", 1_000);
        let processed = process_turn(&engine, &store, &model, &tools, &turn)
            .await
            .unwrap_or_else(|e| panic!("{reason}: {e}"));
        let recorder = CountingRecorder::default();
        metrics::with_local_recorder(&recorder, || telemetry::record_outcome(&processed.outcome));
        let series = format!("{MODEL_FALLBACKS_TOTAL}{{reason={reason},skill={skill}}}");
        assert_eq!(
            recorder.family(MODEL_FALLBACKS_TOTAL),
            vec![(series, 1)],
            "SC-2: a {skill} {reason} fallback is counted once, under that reason only"
        );
    }
}

/// LC-2, Events: the `transaction.out_of_scope` event of a not-eligible pre-validation carries the
/// same final transaction that `last_transaction` stores, reason included (the event used to say
/// `not_eligible` while `last_transaction` said `not_eligible: already shipped`). Found by
/// `tests/generated_conversations.rs`.
#[tokio::test]
async fn lc2_not_eligible_event_snapshot_is_the_stored_last_transaction() {
    let catalog = catalog();
    let settings = Settings::default();
    let engine = Engine::new(&catalog, &settings);
    let store = InMemoryCheckpointStore::new();
    let model = ScriptedModel::new(ModelScript {
        classifier: Some(scripted(json!({"decision": "ROUTE", "confidence": 0.97}))),
        router: Some(scripted(
            json!({"agent": "retail", "intent": "retail_order_cancel", "confidence": 0.97}),
        )),
        interpreter: None,
    });
    let tools: BTreeMap<String, turnstile::tool::ToolScript> = serde_json::from_value(json!({
        "retail_order_cancel.pre_validation": {"eligible": false, "reason": "already shipped"}
    }))
    .unwrap();
    let turn = text_turn("u1", "cancel order PED-1001", 1_000);
    let processed = process_turn(&engine, &store, &model, &ScriptedTools::new(tools), &turn)
        .await
        .unwrap();
    let o = &processed.outcome;
    let last = o.state.last_transaction.as_ref().expect("last_transaction");
    assert_eq!(last.status, TransactionStatus::OutOfScope);
    assert_eq!(
        last.reason.as_deref(),
        Some("not_eligible: already shipped")
    );
    let ending = o
        .events
        .iter()
        .find(|e| e.kind == EventType::OutOfScope)
        .expect("out_of_scope event");
    assert_eq!(ending.data["transaction"], json!(last));
}

fn action_turn(id: &str, action: ChannelAction, locale: Locale, at_ms: i64) -> Turn {
    Turn {
        input: TurnInput::Action(action),
        locale,
        ..text_turn(id, "", at_ms)
    }
}

/// A retail_order_cancel for PED-1001 waiting for the customer's yes, last touched at 0.
fn awaiting_confirmation() -> AgentState {
    let mut s = planted(
        TransactionStatus::AwaitingConfirmation,
        "retail_order_cancel",
    );
    let tx = s.active_transaction.as_mut().unwrap();
    tx.confirmation_received = false;
    tx.executing_turn_id = None;
    s.recompute_projections();
    s
}

fn handed_off(mut s: AgentState) -> AgentState {
    s.human_handoff_requested = true;
    s.recompute_projections();
    s
}

fn finished(
    engine: &Engine<'_>,
    state: &AgentState,
    turn: &Turn,
    answers: &[Answer],
) -> TurnOutcome {
    match engine.step(state, turn, answers).unwrap() {
        Step::Done(outcome) => *outcome,
        Step::Need(request) => panic!("the turn asked for {request:?}"),
    }
}

/// SC-5, issue 26 item 4: the handoff event tells a queue router why (the channel action, the
/// classifier's label and confidence, or exhausted attempts), in which locale, about which
/// transaction (tool and status) and a short summary built from the state — no model call, no
/// parameter values, the same text every time — and keeps every field it had.
#[test]
fn sc5_handoff_event_carries_reason_locale_transaction_and_summary() {
    let catalog = catalog();
    let settings = Settings::default();
    let engine = Engine::new(&catalog, &settings);

    let turn = action_turn("h1", ChannelAction::Handoff, Locale::En, 1_000);
    let outcome = finished(&engine, &awaiting_confirmation(), &turn, &[]);
    assert_eq!(outcome.events.len(), 1);
    assert_eq!(outcome.events[0].kind, EventType::HumanHandoffRequested);
    let data = &outcome.events[0].data;
    for kept in [
        "route",
        "intent",
        "handoff",
        "session_control",
        "identity",
        "locale",
        "last_turns",
        "message",
        "active_agent",
        "active_transaction",
    ] {
        assert!(data.get(kept).is_some(), "v1 field {kept} kept: {data:#}");
    }
    assert_eq!(
        data["reason"],
        json!({"source": "channel_action", "action": "handoff"})
    );
    assert_eq!(data["locale"], "en");
    assert_eq!(data["transaction_tool"], "retail_order_cancel");
    assert_eq!(data["transaction_status"], "AWAITING_CONFIRMATION");
    assert_eq!(
        data["summary"],
        "The customer asked for a person with the channel's button. In progress: Order \
         cancellation (awaiting confirmation); collected: order number; missing: none. Customer \
         messages in this session: 1."
    );
    let again = finished(&engine, &awaiting_confirmation(), &turn, &[]);
    assert_eq!(again.events, outcome.events, "deterministic");

    // The classifier's label and confidence, in pt-BR, while collecting.
    let mut collecting = planted(
        TransactionStatus::CollectingParameters,
        "retail_order_cancel",
    );
    {
        let tx = collecting.active_transaction.as_mut().unwrap();
        tx.arguments.clear();
        tx.missing_parameters = vec!["order_id".into()];
        tx.confirmation_received = false;
        tx.executing_turn_id = None;
    }
    collecting.recompute_projections();
    let turn = Turn {
        locale: Locale::PtBr,
        ..text_turn("h2", "quero falar com um atendente", 1_000)
    };
    let classified = Answer::Classifier(Ok(ClassifierDecision {
        decision: SessionControl::HumanHandoff,
        confidence: 0.97,
    }));
    let outcome = finished(&engine, &collecting, &turn, &[classified]);
    let data = &outcome.events[0].data;
    assert_eq!(
        data["reason"],
        json!({"source": "classifier", "label": "HUMAN_HANDOFF", "confidence": 0.97})
    );
    assert_eq!(data["locale"], "pt-BR");
    assert_eq!(data["transaction_status"], "COLLECTING_PARAMETERS");
    assert_eq!(
        data["summary"],
        "O cliente pediu um atendente (confiança do classificador 0,97). Em andamento: \
         Cancelamento do pedido (coletando dados); informado: nenhum; faltando: número do pedido. \
         Mensagens do cliente nesta sessão: 1."
    );

    // No transaction: tool and status are null, and the summary says so.
    let turn = action_turn("h3", ChannelAction::Handoff, Locale::En, 1_000);
    let outcome = finished(&engine, &AgentState::default(), &turn, &[]);
    let data = &outcome.events[0].data;
    assert_eq!(data["transaction_tool"], Value::Null);
    assert_eq!(data["transaction_status"], Value::Null);
    assert!(data["summary"]
        .as_str()
        .unwrap()
        .contains("No request in progress."));
}

/// SC-11: a hand-back resumes the kept transaction where it was: the assistant-is-back line,
/// then the pending question; `session.handback.completed` names the transaction; the flag is
/// cleared and next_state is the agent again; counted under `outcome=resumed`.
#[test]
fn sc11_handback_resumes_and_is_counted() {
    let catalog = catalog();
    let settings = Settings::default();
    let engine = Engine::new(&catalog, &settings);
    let turn = action_turn("b1", ChannelAction::Handback, Locale::En, 2_000);
    let outcome = finished(&engine, &handed_off(awaiting_confirmation()), &turn, &[]);
    assert_eq!(outcome.handback, Some(HandbackOutcome::Resumed));
    assert_eq!(
        outcome.replies,
        vec![
            "You are chatting with the virtual assistant again.".to_owned(),
            "Please confirm the order cancellation — order number: PED-1001. Reply yes or no."
                .to_owned()
        ]
    );
    assert!(!outcome.state.human_handoff_requested);
    assert_eq!(outcome.state.next_state.as_deref(), Some("retail"));
    assert_eq!(
        outcome.state.transaction_status,
        Some(TransactionStatus::AwaitingConfirmation)
    );
    assert!(outcome.route.is_none(), "not routed");
    assert_eq!(outcome.events.len(), 1);
    assert_eq!(outcome.events[0].kind, EventType::HandbackCompleted);
    let data = &outcome.events[0].data;
    assert_eq!(data["outcome"], "resumed");
    assert_eq!(data["transaction_id"], "tx-planted");
    assert_eq!(data["transaction_tool"], "retail_order_cancel");
    assert_eq!(data["transaction_status"], "AWAITING_CONFIRMATION");
    assert_eq!(data["next_state"], "retail");
    assert_eq!(data["locale"], "en");
    assert_eq!(data["identity"]["session_id"], "s-engine");

    let recorder = CountingRecorder::default();
    metrics::with_local_recorder(&recorder, || telemetry::record_outcome(&outcome));
    assert_eq!(
        recorder.family(telemetry::HANDBACKS_TOTAL),
        vec![(
            format!("{}{{outcome=resumed}}", telemetry::HANDBACKS_TOTAL),
            1
        )]
    );
    assert_eq!(
        recorder.family(telemetry::EVENTS_TOTAL),
        vec![(
            format!(
                "{}{{type=session.handback.completed}}",
                telemetry::EVENTS_TOTAL
            ),
            1
        )]
    );
}

/// SC-11, ST-6: the session expired while a person had it: the transaction's ending first, then
/// the hand-back naming it (`outcome=expired`, CANCELLED, reason `expired`); nothing is asked.
#[test]
fn sc11_handback_after_expiry_names_the_expired_transaction() {
    let catalog = catalog();
    let settings = Settings::default();
    let engine = Engine::new(&catalog, &settings);
    let late = settings.session_ttl_ms + 1;
    let turn = action_turn("b2", ChannelAction::Handback, Locale::PtBr, late);
    let outcome = finished(&engine, &handed_off(awaiting_confirmation()), &turn, &[]);
    assert_eq!(outcome.handback, Some(HandbackOutcome::Expired));
    let kinds: Vec<_> = outcome.events.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        vec![EventType::Cancelled, EventType::HandbackCompleted]
    );
    let data = &outcome.events[1].data;
    assert_eq!(data["outcome"], "expired");
    assert_eq!(data["transaction_id"], "tx-planted");
    assert_eq!(data["transaction_status"], "CANCELLED");
    assert_eq!(data["transaction"]["reason"], "expired");
    assert_eq!(data["next_state"], Value::Null);
    assert_eq!(
        outcome.replies[0],
        "Você está falando novamente com o assistente virtual."
    );
    assert_eq!(outcome.replies.len(), 2, "back, then the expiry sentence");
    assert!(outcome.state.active_transaction.is_none());
    assert!(outcome.executed.is_empty());
}

/// SC-11 (docs/decisions.md): a hand-back with no handoff pending says nothing, emits nothing
/// and leaves the transaction as it was; it is still counted (`outcome=not_pending`).
#[test]
fn sc11_handback_with_nothing_pending_is_silent() {
    let catalog = catalog();
    let settings = Settings::default();
    let engine = Engine::new(&catalog, &settings);
    let before = awaiting_confirmation();
    let turn = action_turn("b3", ChannelAction::Handback, Locale::En, 2_000);
    let outcome = finished(&engine, &before, &turn, &[]);
    assert_eq!(outcome.handback, Some(HandbackOutcome::NotPending));
    assert!(outcome.replies.is_empty());
    assert!(outcome.events.is_empty());
    assert!(outcome.transitions.is_empty());
    assert_eq!(
        outcome
            .state
            .active_transaction
            .as_ref()
            .map(|t| (t.status, &t.arguments)),
        before
            .active_transaction
            .as_ref()
            .map(|t| (t.status, &t.arguments))
    );
    assert_eq!(outcome.state.next_state.as_deref(), Some("retail"));
    let recorder = CountingRecorder::default();
    metrics::with_local_recorder(&recorder, || telemetry::record_outcome(&outcome));
    assert_eq!(
        recorder.family(telemetry::HANDBACKS_TOTAL),
        vec![(
            format!("{}{{outcome=not_pending}}", telemetry::HANDBACKS_TOTAL),
            1
        )]
    );
}

/// Runs one turn to its end answering the write-ahead and the tool call, and panics on any model
/// request: the turn must settle with no model (a tool's eligibility check is no model).
fn settled_without_asking_a_model(
    engine: &Engine<'_>,
    state: &AgentState,
    turn: &Turn,
) -> TurnOutcome {
    let mut answers = Vec::new();
    loop {
        match engine.step(state, turn, &answers).unwrap() {
            Step::Done(outcome) => return *outcome,
            Step::Need(Request::PersistExecuting(_)) => answers.push(Answer::Persisted),
            Step::Need(Request::PreValidate(_)) => {
                answers.push(Answer::PreValidation(PreValidationResult {
                    eligible: true,
                    reason: None,
                    code: None,
                    data: Value::Null,
                    at_ms: 1_000,
                }))
            }
            Step::Need(Request::Execute(r)) => answers.push(Answer::Tool(single_attempt_result(
                &r.idempotency_key,
                true,
                false,
                json!({}),
                None,
                1_000,
            ))),
            Step::Need(other) => panic!("asked a model: {other:?}"),
        }
    }
}

/// PR-1, PR-6, MG-6: a turn settled with no model call is counted in
/// `turnstile_turns_settled_without_model_total` under the reading that settled it, so an
/// operator sees a hold-on or a correction reading fire by name; a turn a model decided is not
/// counted at all.
#[test]
fn settled_turns_are_counted_by_the_reading_that_settled_them() {
    use turnstile::domain::effect::ModelFreeReading;
    use turnstile::telemetry::TURNS_SETTLED_WITHOUT_MODEL_TOTAL;
    let catalog = catalog();
    let settings = Settings::default();
    let engine = Engine::new(&catalog, &settings);
    let cases = [
        ("one sec, let me check", ModelFreeReading::HoldOn, "hold_on"),
        ("yes", ModelFreeReading::Affirmed, "affirmed"),
        ("no", ModelFreeReading::Declined, "declined"),
        (
            "I meant PED-1002",
            ModelFreeReading::Correction,
            "correction",
        ),
    ];
    for (text, reading, label) in cases {
        let turn = text_turn("r1", text, 1_000);
        let outcome = settled_without_asking_a_model(&engine, &awaiting_confirmation(), &turn);
        assert_eq!(outcome.settled_without_model, Some(reading), "{text}");
        let recorder = CountingRecorder::default();
        metrics::with_local_recorder(&recorder, || telemetry::record_outcome(&outcome));
        assert_eq!(
            recorder.family(TURNS_SETTLED_WITHOUT_MODEL_TOTAL),
            vec![(
                format!("{TURNS_SETTLED_WITHOUT_MODEL_TOTAL}{{reading={label}}}"),
                1
            )],
            "{text}"
        );
    }
    // The hold-on keeps the transaction and asks its question again.
    let turn = text_turn("r2", "one sec, let me check", 1_000);
    let held = settled_without_asking_a_model(&engine, &awaiting_confirmation(), &turn);
    let tx = held.state.active_transaction.expect("kept");
    assert_eq!(tx.status, TransactionStatus::AwaitingConfirmation);
    // A message the readings leave to the models asks one, and counts nothing.
    let turn = text_turn("r3", "what is the weather like", 1_000);
    match engine.step(&awaiting_confirmation(), &turn, &[]).unwrap() {
        Step::Need(Request::Classify(_) | Request::Route(_)) => {}
        other => panic!("settled without a model: {other:?}"),
    }
}
