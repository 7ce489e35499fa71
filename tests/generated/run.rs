//! Plays a generated conversation through the real pipeline (`pipeline::process_turn`, the engine,
//! the in-memory checkpoint store), the way the scenario runner does (same turn ids, clock and
//! identity, so the rendered YAML replays the same transactions), and records a [`TurnTrace`] per
//! turn from the edges: recording wrappers around the scripted model and tools, and the store.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use serde_json::{json, Map, Value};
use turnstile::config::settings::apply_overrides;
use turnstile::domain::catalog::{Catalog, Settings};
use turnstile::domain::decision::{
    ClassifierDecision, InterpreterDecision, ModelAnswer, ModelFailure, PreValidationResult,
    RouterDecision, ToolResult,
};
use turnstile::domain::effect::{
    ClassifierRequest, InterpreterRequest, RouterRequest, ToolRequest,
};
use turnstile::domain::engine::Engine;
use turnstile::domain::locale::Locale;
use turnstile::domain::turn::{Identity, Turn, TurnInput};
use turnstile::model::{ModelScript, Scripted, ScriptedModel};
use turnstile::pipeline::{process_turn, PipelineError};
use turnstile::ports::ToolGateway;
use turnstile::ports::{
    CallContext, CheckpointRecord, CheckpointStore, DecisionModel, Fence, StoreError,
};
use turnstile::scenario::format::{ScenarioTurn, TurnInputSpec};
use turnstile::scenario::runner::SCENARIO_EPOCH_MS;
use turnstile::store::InMemoryCheckpointStore;
use turnstile::tool::scripted::{ExecutionScript, PreValidationScript, PRE_VALIDATION_SUFFIX};
use turnstile::tool::{ScriptedTools, ToolScript};

use super::grammar::{Conversation, Crash, GenTurn, Input};
use super::trace::{RedeliverySeen, ToolCallSeen, TurnTrace};

const CRASH: &str = "simulated crash";

/// The scenario turn a generated turn is (no `expect`): what both this harness and a rendered
/// YAML file run.
pub fn scenario_turn(t: &GenTurn) -> ScenarioTurn {
    let scripted = |v: &Option<Value>| -> Option<Scripted> {
        match v {
            None => None,
            Some(Value::String(w)) => Some(Scripted::Fault(match w.as_str() {
                "timeout" => ModelFailure::Timeout,
                "invalid_json" => ModelFailure::InvalidJson,
                _ => ModelFailure::Error,
            })),
            Some(Value::Object(m)) => Some(Scripted::Answer(m.clone())),
            Some(_) => None,
        }
    };
    let tools = t
        .tools
        .iter()
        .map(|(k, v)| {
            let script = if k.ends_with(PRE_VALIDATION_SUFFIX) {
                ToolScript::PreValidation(
                    serde_json::from_value::<PreValidationScript>(v.clone())
                        .expect("generated pre-validation script"),
                )
            } else {
                ToolScript::Execution(
                    serde_json::from_value::<ExecutionScript>(v.clone())
                        .expect("generated execution script"),
                )
            };
            (k.clone(), script)
        })
        .collect();
    ScenarioTurn {
        input: match &t.input {
            Input::Text(s) => TurnInputSpec::Text(s.clone()),
            Input::Action(a) => TurnInputSpec::Action(*a),
        },
        locale: if t.pt_br { Locale::PtBr } else { Locale::En },
        after_ms: t.after_ms,
        model: ModelScript {
            classifier: scripted(&t.classifier),
            router: scripted(&t.router),
            interpreter: scripted(&t.interpreter),
        },
        tools,
        restart: t.restart,
        redeliver: t.redeliver,
        expect: Map::new(),
    }
}

/// The `settings:` block of a conversation.
pub fn settings_block(c: &Conversation) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("ENABLE_ROUTE_STICKINESS".into(), json!(c.stickiness));
    m
}

/// Kills a delivery at the injected point, around the real store.
struct CrashingStore<'a> {
    inner: &'a InMemoryCheckpointStore,
    crash: Option<Crash>,
    crashed: AtomicBool,
}

impl CheckpointStore for CrashingStore<'_> {
    async fn load(&self, identity: &Identity) -> Result<Option<CheckpointRecord>, StoreError> {
        self.inner.load(identity).await
    }

    async fn save_write_ahead(
        &self,
        identity: &Identity,
        record: &CheckpointRecord,
        fence: Fence,
    ) -> Result<(), StoreError> {
        self.inner.save_write_ahead(identity, record, fence).await?;
        if let Some(Crash::AtWriteAhead) = self.crash {
            self.crashed.store(true, Ordering::SeqCst);
            return Err(StoreError::unavailable(CRASH));
        }
        Ok(())
    }

    async fn save_turn(
        &self,
        identity: &Identity,
        record: &CheckpointRecord,
        fence: Fence,
    ) -> Result<(), StoreError> {
        if let Some(Crash::BeforeFinalSave) = self.crash {
            self.crashed.store(true, Ordering::SeqCst);
            return Err(StoreError::unavailable(CRASH));
        }
        self.inner.save_turn(identity, record, fence).await
    }

    async fn acquire_epoch(
        &self,
        topic: &str,
        partition: i32,
        owner: &str,
    ) -> Result<i64, StoreError> {
        self.inner.acquire_epoch(topic, partition, owner).await
    }
}

/// The scripted model, recording which components were asked.
struct RecordingModel {
    inner: ScriptedModel,
    calls: Mutex<Vec<String>>,
}

impl RecordingModel {
    fn note(&self, what: &str) {
        self.calls.lock().unwrap().push(what.to_owned());
    }
}

impl DecisionModel for RecordingModel {
    async fn classify(
        &self,
        request: &ClassifierRequest,
        ctx: CallContext<'_>,
    ) -> ModelAnswer<ClassifierDecision> {
        self.note("classifier");
        self.inner.classify(request, ctx).await
    }

    async fn route(
        &self,
        request: &RouterRequest,
        ctx: CallContext<'_>,
    ) -> ModelAnswer<RouterDecision> {
        self.note("router");
        self.inner.route(request, ctx).await
    }

    async fn interpret(
        &self,
        request: &InterpreterRequest,
        ctx: CallContext<'_>,
    ) -> ModelAnswer<InterpreterDecision> {
        self.note("interpreter");
        self.inner.interpret(request, ctx).await
    }
}

/// The scripted tools, recording every endpoint call as a tool service would see it.
struct RecordingTools {
    inner: ScriptedTools,
    delivery: usize,
    pre_validations: Mutex<Vec<ToolCallSeen>>,
    executions: Mutex<Vec<ToolCallSeen>>,
}

fn seen(r: &ToolRequest, delivery: usize, ok: bool) -> ToolCallSeen {
    ToolCallSeen {
        delivery,
        tool: r.tool.clone(),
        transaction_id: r.transaction_id.clone(),
        arguments: json!(r.arguments),
        idempotency_key: r.idempotency_key.clone(),
        ok,
    }
}

impl ToolGateway for RecordingTools {
    async fn pre_validate(
        &self,
        request: &ToolRequest,
        ctx: CallContext<'_>,
    ) -> PreValidationResult {
        let result = self.inner.pre_validate(request, ctx).await;
        self.pre_validations
            .lock()
            .unwrap()
            .push(seen(request, self.delivery, result.eligible));
        result
    }

    async fn execute(&self, request: &ToolRequest, ctx: CallContext<'_>) -> ToolResult {
        let result = self.inner.execute(request, ctx).await;
        self.executions
            .lock()
            .unwrap()
            .push(seen(request, self.delivery, result.is_ok()));
        result
    }
}

fn stored(store: &InMemoryCheckpointStore, id: &Identity) -> (Option<Vec<u8>>, Value) {
    match store.get(id) {
        None => (None, Value::Null),
        Some(r) => {
            let v = serde_json::from_slice(&r.state).unwrap_or(Value::Null);
            (Some(r.state), v)
        }
    }
}

/// Plays `c` and returns one trace per turn (the trace stops at a turn the pipeline refused).
pub fn play(c: &Conversation, catalog: &Catalog, rt: &tokio::runtime::Runtime) -> Vec<TurnTrace> {
    let settings = apply_overrides(&Settings::default(), &settings_block(c), "generated")
        .expect("generated settings");
    let identity = Identity::new("t1", "retail-bot", "s1");
    let store = InMemoryCheckpointStore::new();
    let mut clock = SCENARIO_EPOCH_MS;
    let mut traces = Vec::with_capacity(c.turns.len());
    for (i, g) in c.turns.iter().enumerate() {
        let spec = scenario_turn(g);
        clock += spec.after_ms;
        let turn = Turn {
            turn_id: format!("turn-{}", i + 1),
            identity: identity.clone(),
            input: match &spec.input {
                TurnInputSpec::Text(t) => TurnInput::Text(t.clone()),
                TurnInputSpec::Action(a) => TurnInput::Action(*a),
            },
            locale: spec.locale,
            at_ms: clock,
        };
        let mut trace = TurnTrace::new(i + 1);
        trace.correction = g.correction.clone();
        trace.after_ms = g.after_ms;
        match &g.input {
            Input::Text(t) => trace.text = Some(t.clone()),
            Input::Action(a) => trace.action = Some(a.as_str().to_owned()),
        }
        let (_, before) = stored(&store, &identity);
        trace.before = before;
        // A restart drops the engine; only the store's bytes survive (they always do here).
        let engine = Engine::new(catalog, &settings);
        let mut delivery = 0;
        let processed = loop {
            let crash = if delivery == 0 { g.crash } else { None };
            let wrapped = CrashingStore {
                inner: &store,
                crash,
                crashed: AtomicBool::new(false),
            };
            let model = RecordingModel {
                inner: ScriptedModel::new(spec.model.clone()),
                calls: Mutex::new(Vec::new()),
            };
            let tools = RecordingTools {
                inner: ScriptedTools::new(spec.tools.clone()),
                delivery,
                pre_validations: Mutex::new(Vec::new()),
                executions: Mutex::new(Vec::new()),
            };
            let result = rt.block_on(process_turn(&engine, &wrapped, &model, &tools, &turn));
            trace.model_calls.extend(model.calls.into_inner().unwrap());
            trace
                .pre_validations
                .extend(tools.pre_validations.into_inner().unwrap());
            trace
                .executions
                .extend(tools.executions.into_inner().unwrap());
            match result {
                Err(PipelineError::Store(StoreError::Unavailable { .. }))
                    if wrapped.crashed.load(Ordering::SeqCst) =>
                {
                    // The worker died; Kafka redelivers the uncommitted turn to a new one.
                    trace.crashed = true;
                    delivery += 1;
                }
                Err(e) => {
                    trace.error = Some(e.to_string());
                    break None;
                }
                Ok(p) => break Some(p),
            }
        };
        let Some(p) = processed else {
            traces.push(trace);
            return traces;
        };
        trace.replies = p.outcome.replies.clone();
        trace.events = p
            .outcome
            .events
            .iter()
            .map(|e| (e.kind.as_str().to_owned(), e.data.clone()))
            .collect();
        let (bytes, after) = stored(&store, &identity);
        trace.after = after;
        if g.redeliver {
            let model = RecordingModel {
                inner: ScriptedModel::new(spec.model.clone()),
                calls: Mutex::new(Vec::new()),
            };
            let tools = RecordingTools {
                inner: ScriptedTools::new(spec.tools.clone()),
                delivery: 9,
                pre_validations: Mutex::new(Vec::new()),
                executions: Mutex::new(Vec::new()),
            };
            match rt.block_on(process_turn(&engine, &store, &model, &tools, &turn)) {
                Ok(again) => {
                    trace.redelivery = Some(RedeliverySeen {
                        state_changed: stored(&store, &identity).0 != bytes,
                        replies: again.outcome.replies.clone(),
                        events: again
                            .outcome
                            .events
                            .iter()
                            .map(|e| e.kind.as_str().to_owned())
                            .collect(),
                        tool_calls: tools.pre_validations.into_inner().unwrap().len()
                            + tools.executions.into_inner().unwrap().len(),
                        model_calls: model.calls.into_inner().unwrap().len(),
                    });
                }
                Err(e) => {
                    trace.error = Some(format!("redelivery: {e}"));
                    traces.push(trace);
                    return traces;
                }
            }
        }
        traces.push(trace);
    }
    traces
}

/// Tool scripts by name, for tests that build conversations by hand.
#[allow(dead_code)]
pub fn tools_of(pairs: &[(&str, Value)]) -> BTreeMap<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}
