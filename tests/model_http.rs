//! The OpenAI-compatible model adapter over real HTTP against `testkit::ModelServer`: the wire
//! request (golden files, headers, SC-8 limits), every fallback reason through the real client,
//! the engine's acceptance rules end to end (SC-2, SC-3, SC-4), key redaction, and the
//! `turnstile classify` binary.
//!
//! Golden files: `tests/golden/model/*.json` hold the exact chat request bodies. After an intended
//! prompt or wire change, regenerate them with
//! `UPDATE_GOLDEN=1 cargo test --test model_http golden` and review the diff.

// Needs the test harness (src/testkit, the fault hook, `chaos`, `scenarios --e2e`):
// `cargo test --features harness`; without the feature this file compiles to no tests.
#![cfg(feature = "harness")]

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use turnstile::config::agents::load_catalog;
use turnstile::config::profiles::{load_profiles, parse_profiles, Profiles};
use turnstile::domain::catalog::{Catalog, Settings};
use turnstile::domain::decision::{ModelFailure, SessionControl, Skill};
use turnstile::domain::effect::{
    ClassifierRequest, FallbackReason, InterpreterRequest, ParameterBrief, RouterRequest,
    TransactionSummary,
};
use turnstile::domain::engine::Engine;
use turnstile::domain::locale::Locale;
use turnstile::domain::state::{HistoryEntry, Speaker};
use turnstile::domain::transaction::TransactionStatus;
use turnstile::domain::turn::{Identity, Turn, TurnInput};
use turnstile::model::http::{OpenAiCompatibleModel, RawAnswer};
use turnstile::model::prompt::{self, chat_request};
use turnstile::model::{ModelConfigError, ModelScript, Scripted};
use turnstile::pipeline::{process_turn, ProcessedTurn};
use turnstile::ports::{CallContext, DecisionModel};
use turnstile::store::InMemoryCheckpointStore;
use turnstile::testkit::model_server::{Behaviour, ModelServer};
use turnstile::tool::scripted::ScriptedTools;

const KEY_VAR: &str = "TURNSTILE_TEST_MODEL_KEY";
const KEY: &str = "sk-test-7Hq2Zx9Lw4Rt-DO-NOT-LEAK";

fn catalog() -> Arc<Catalog> {
    Arc::new(load_catalog(Path::new("config/agents.example.yaml")).expect("example config"))
}

fn profiles_yaml(timeout_seconds: f64) -> String {
    format!(
        r#"
profiles:
  route_continuity:
    provider: oci_openai
    model: openai.gpt-4.1-mini
    temperature: 0.25
    max_tokens: 80
    timeout_seconds: {timeout_seconds}
    base_url: http://127.0.0.1:9/v1
    api_key_env: {KEY_VAR}
    headers: {{X-Team: customer-service}}
    json_mode: true
  router:
    provider: openai_compatible
    model: router-model
    temperature: 0
    max_tokens: 300
    timeout_seconds: {timeout_seconds}
    api_key_env: {KEY_VAR}
  interpreter:
    provider: openai_compatible
    model: interpreter-model
    temperature: 0
    max_tokens: 200
    timeout_seconds: {timeout_seconds}
"#
    )
}

fn profiles(timeout_seconds: f64) -> Arc<Profiles> {
    Arc::new(parse_profiles(&profiles_yaml(timeout_seconds), "test profiles").expect("profiles"))
}

/// The key comes from a lookup closure, never from the process environment.
fn env(var: &str) -> Option<String> {
    (var == KEY_VAR).then(|| KEY.to_owned())
}

fn settings() -> Settings {
    Settings {
        route_stickiness_max_tokens: 42,
        ..Settings::default()
    }
}

fn model_at(base_url: &str, settings: &Settings, timeout_seconds: f64) -> OpenAiCompatibleModel {
    OpenAiCompatibleModel::new(
        catalog(),
        Arc::new(settings.clone()),
        profiles(timeout_seconds),
        env,
    )
    .expect("model")
    .with_base_url_override(base_url)
}

fn answer(v: Value) -> Scripted {
    match v {
        Value::Object(map) => Scripted::Answer(map),
        other => panic!("not an object: {other}"),
    }
}

fn classifier_script(v: Value) -> ModelScript {
    ModelScript {
        classifier: Some(answer(v)),
        ..Default::default()
    }
}

fn classifier_request(message: &str) -> ClassifierRequest {
    ClassifierRequest {
        message: message.into(),
        assistant: "retail-bot".into(),
        locale: Locale::En,
        history: Vec::new(),
        active_agent: None,
        active_transaction: None,
    }
}

fn ctx(turn_id: &str) -> CallContext<'_> {
    CallContext {
        turn_id,
        turn_at_ms: 1_000,
        speculative: false,
    }
}

fn turn(session: &str, id: &str, text: &str, at_ms: i64) -> Turn {
    Turn {
        turn_id: id.into(),
        identity: Identity::new("t1", "retail-bot", session),
        input: TurnInput::Text(text.into()),
        locale: Locale::En,
        at_ms,
    }
}

async fn run_turn(
    settings: &Settings,
    store: &InMemoryCheckpointStore,
    model: &OpenAiCompatibleModel,
    turn: &Turn,
) -> ProcessedTurn {
    let catalog = catalog();
    let engine = Engine::new(&catalog, settings);
    process_turn(&engine, store, model, &ScriptedTools::default(), turn)
        .await
        .expect("turn processed")
}

fn classifier_fallbacks(p: &ProcessedTurn) -> Vec<FallbackReason> {
    p.outcome
        .fallbacks
        .iter()
        .filter(|(s, _)| *s == Skill::Classifier)
        .map(|(_, r)| *r)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Golden request bodies

fn golden_profiles() -> Profiles {
    load_profiles(Path::new("config/profiles.example.yaml")).expect("example profiles")
}

fn summary(
    tool: &str,
    status: TransactionStatus,
    args: Value,
    missing: &[&str],
) -> TransactionSummary {
    let arguments: BTreeMap<String, Value> = serde_json::from_value(args).expect("arguments");
    TransactionSummary {
        agent: if tool.starts_with("billing") {
            "billing".into()
        } else {
            "retail".into()
        },
        tool: tool.into(),
        status,
        arguments,
        missing_parameters: missing.iter().map(|s| s.to_string()).collect(),
    }
}

fn check_golden(name: &str, body: &prompt::ChatRequest) {
    let path = PathBuf::from(format!("tests/golden/model/{name}.json"));
    let actual = serde_json::to_value(body).expect("body serialises");
    let pretty = format!(
        "{}\n",
        serde_json::to_string_pretty(&actual).expect("pretty")
    );
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("golden dir");
        std::fs::write(&path, &pretty).expect("write golden");
        return;
    }
    let stored = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run UPDATE_GOLDEN=1 cargo test --test model_http golden",
            path.display()
        )
    });
    let expected: Value = serde_json::from_str(&stored).expect("golden file is JSON");
    assert_eq!(
        serde_json::to_string_pretty(&expected).expect("pretty"),
        serde_json::to_string_pretty(&actual).expect("pretty"),
        "{} differs; if intended, regenerate with UPDATE_GOLDEN=1",
        path.display()
    );
}

// SC-1, SC-8: the exact classifier, router and interpreter request bodies for fixed inputs.
#[test]
fn golden_chat_request_bodies() {
    let profiles = golden_profiles();
    let catalog = catalog();
    let assistant = catalog.assistant("retail-bot").expect("retail-bot");
    let settings = Settings::default();

    let classifier = ClassifierRequest {
        message: "actually, can I talk to a person?".into(),
        assistant: "retail-bot".into(),
        locale: Locale::En,
        history: vec![
            HistoryEntry {
                role: Speaker::User,
                text: "I want to cancel my order".into(),
                turn_id: "u1".into(),
                at_ms: 1_000,
            },
            HistoryEntry {
                role: Speaker::Assistant,
                text: "To continue with the order cancellation, please send your order number."
                    .into(),
                turn_id: "u1".into(),
                at_ms: 1_000,
            },
        ],
        active_agent: Some("retail".into()),
        active_transaction: Some(summary(
            "retail_order_cancel",
            TransactionStatus::CollectingParameters,
            json!({}),
            &["order_id"],
        )),
    };
    check_golden(
        "classifier",
        &chat_request(
            profiles.get("route_continuity").expect("profile"),
            settings.route_stickiness_max_tokens,
            prompt::classifier_messages(&classifier),
        ),
    );

    let router = RouterRequest {
        message: "where is my order PED-1001?".into(),
        locale: Locale::En,
        assistant: "retail-bot".into(),
        active_agent: None,
        active_transaction: None,
        after_cancel: false,
    };
    let router_profile = profiles.get(&assistant.router_profile).expect("profile");
    check_golden(
        "router",
        &chat_request(
            router_profile,
            router_profile.max_tokens,
            prompt::router_messages(&router, assistant),
        ),
    );

    let tool = &assistant.tools["retail_address_change"];
    let interpreter = InterpreterRequest {
        message: "the number is 45, not 10".into(),
        assistant: "retail-bot".into(),
        locale: Locale::En,
        transaction: summary(
            "retail_address_change",
            TransactionStatus::AwaitingConfirmation,
            json!({"order_id": "PED-1001", "zip_code": "01310-100", "house_number": "10"}),
            &[],
        ),
        parameters: tool
            .parameters
            .iter()
            .map(|p| ParameterBrief {
                name: p.name.clone(),
                type_name: p.kind.type_name().into(),
                label: p.label.en.clone(),
                required: p.required,
            })
            .collect(),
    };
    let interpreter_profile = profiles
        .get(&assistant.interpreter_profile)
        .expect("profile");
    check_golden(
        "interpreter",
        &chat_request(
            interpreter_profile,
            interpreter_profile.max_tokens,
            prompt::interpreter_messages(&interpreter),
        ),
    );
}

// ---------------------------------------------------------------------------------------------
// The wire

// SC-1, SC-8: an accepted answer; max_tokens = ROUTE_STICKINESS_MAX_TOKENS, the profile's
// temperature, json mode, and the skill / turn / auth / profile headers on the wire.
#[tokio::test]
async fn classifier_request_on_the_wire() {
    let server = ModelServer::start().await;
    server.set_turn_script(
        "w1",
        &classifier_script(json!({"decision": "CONTINUE", "confidence": 0.97})),
    );
    let model = model_at(&server.base_url(), &settings(), 5.0);
    let mut request = classifier_request("the order is the one from yesterday");
    request.active_agent = Some("retail".into());
    let decision = model.classify(&request, ctx("w1")).await.expect("decision");
    assert_eq!(decision.decision, SessionControl::Continue);
    assert_eq!(decision.confidence, 0.97);

    let recorded = server.requests();
    assert_eq!(recorded.len(), 1);
    let r = &recorded[0];
    assert_eq!(r.path, "/v1/chat/completions");
    assert_eq!(r.skill.as_deref(), Some("classifier"));
    assert_eq!(r.turn_id.as_deref(), Some("w1"));
    assert_eq!(
        r.authorization.as_deref(),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(r.header("X-Team"), Some("customer-service"));
    assert_eq!(
        r.body["max_tokens"], 42,
        "SC-8: ROUTE_STICKINESS_MAX_TOKENS"
    );
    assert_eq!(r.body["temperature"], 0.25);
    assert_eq!(r.body["model"], "openai.gpt-4.1-mini");
    assert_eq!(r.body["response_format"], json!({"type": "json_object"}));
    assert_eq!(r.body["messages"][0]["role"], "system");
    let input = r.user_input().expect("user input is JSON");
    assert_eq!(input["message"], "the order is the one from yesterday");
    assert_eq!(input["active_agent"], "retail");
    server.shutdown().await;
}

// The router sees this assistant's agents and tools from config; no json mode, no key when the
// profile names none (interpreter).
#[tokio::test]
async fn router_and_interpreter_requests_on_the_wire() {
    let server = ModelServer::start().await;
    server.set_turn_script(
        "w2",
        &ModelScript {
            router: Some(answer(
                json!({"agent": "retail", "intent": "retail_order_tracking",
                "confidence": 0.95, "arguments": {"order_id": "PED-1001"}}),
            )),
            interpreter: Some(answer(
                json!({"act": "provide", "arguments": {"house_number": "45"}, "confidence": 0.9}),
            )),
            ..Default::default()
        },
    );
    let model = model_at(&server.base_url(), &settings(), 5.0);
    let routed = model
        .route(
            &RouterRequest {
                message: "where is PED-1001".into(),
                locale: Locale::En,
                assistant: "retail-bot".into(),
                active_agent: None,
                active_transaction: None,
                after_cancel: false,
            },
            ctx("w2"),
        )
        .await;
    assert!(routed.is_ok(), "{routed:?}");
    let interpreted = model
        .interpret(
            &InterpreterRequest {
                message: "45".into(),
                assistant: "retail-bot".into(),
                locale: Locale::En,
                transaction: summary(
                    "retail_address_change",
                    TransactionStatus::CollectingParameters,
                    json!({"order_id": "PED-1001"}),
                    &["zip_code", "house_number"],
                ),
                parameters: Vec::new(),
            },
            ctx("w2"),
        )
        .await;
    assert!(interpreted.is_ok(), "{interpreted:?}");

    let router = &server.requests_for(Skill::Router)[0];
    assert_eq!(router.body["model"], "router-model");
    assert_eq!(router.body["max_tokens"], 300);
    assert!(router.body.get("response_format").is_none());
    let input = router.user_input().expect("router input");
    let agents: Vec<&str> = input["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .filter_map(|a| a["name"].as_str())
        .collect();
    assert_eq!(agents, ["billing", "retail"]);
    let tools: Vec<&str> = input["agents"][1]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(
        tools,
        [
            "retail_address_change",
            "retail_order_cancel",
            "retail_order_tracking"
        ]
    );
    assert_eq!(
        input["agents"][1]["tools"][0]["parameters"][1],
        json!({"name": "zip_code", "type": "cep", "required": true})
    );

    let interpreter = &server.requests_for(Skill::Interpreter)[0];
    assert_eq!(interpreter.skill.as_deref(), Some("interpreter"));
    assert_eq!(interpreter.authorization, None, "the profile names no key");
    let input = interpreter.user_input().expect("interpreter input");
    assert_eq!(input["transaction"]["arguments"]["order_id"], "PED-1001");
    server.shutdown().await;
}

// A turn id that cannot be a header value as is goes out percent-encoded, as the tool adapter
// sends it (docs/decisions.md, "Turn-id header"): the call keeps its correlation.
#[tokio::test]
async fn an_invalid_turn_id_is_percent_encoded_in_the_header() {
    let server = ModelServer::start().await;
    server.set_default(
        Skill::Classifier,
        Behaviour::answer(json!({"decision": "CONTINUE", "confidence": 0.97})),
    );
    let model = model_at(&server.base_url(), &settings(), 5.0);
    model
        .classify(&classifier_request("hello"), ctx("w\n1ü"))
        .await
        .expect("decision");
    let recorded = server.requests();
    assert_eq!(recorded[0].turn_id.as_deref(), Some("w%0A1%C3%BC"));
    server.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// SC-2: every fallback reason through the real client

async fn classify_once(
    model: &OpenAiCompatibleModel,
    turn_id: &str,
) -> RawAnswer<turnstile::domain::decision::ClassifierDecision> {
    model
        .classify_raw(&classifier_request("hello"), ctx(turn_id))
        .await
}

// SC-2: timeout → Timeout, within the profile's limit for the whole call.
#[tokio::test]
async fn timeout_falls_back() {
    let server = ModelServer::start().await;
    server.set_turn_script(
        "f1",
        &ModelScript {
            classifier: Some(Scripted::Fault(ModelFailure::Timeout)),
            ..Default::default()
        },
    );
    let model = model_at(&server.base_url(), &settings(), 0.3);
    let started = Instant::now();
    let raw = classify_once(&model, "f1").await;
    assert_eq!(raw.answer, Err(ModelFailure::Timeout));
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    // A held reply does not keep the server from stopping.
    let stopping = Instant::now();
    server.shutdown().await;
    assert!(stopping.elapsed() < Duration::from_secs(3));
}

// SC-2: HTTP 500 (scripted `error`, and any unscripted turn) → Error.
#[tokio::test]
async fn server_error_falls_back() {
    let server = ModelServer::start().await;
    server.set_turn_script(
        "f2",
        &ModelScript {
            classifier: Some(Scripted::Fault(ModelFailure::Error)),
            ..Default::default()
        },
    );
    let model = model_at(&server.base_url(), &settings(), 5.0);
    let raw = classify_once(&model, "f2").await;
    assert_eq!(raw.answer, Err(ModelFailure::Error));
    assert_eq!(raw.status, Some(500));
    let unscripted = classify_once(&model, "never-scripted").await;
    assert_eq!(unscripted.answer, Err(ModelFailure::Error));
    server.shutdown().await;
}

// SC-2: content that holds no JSON object → InvalidJson.
#[tokio::test]
async fn invalid_json_content_falls_back() {
    let server = ModelServer::start().await;
    server.set_turn_script(
        "f3",
        &ModelScript {
            classifier: Some(Scripted::Fault(ModelFailure::InvalidJson)),
            ..Default::default()
        },
    );
    let model = model_at(&server.base_url(), &settings(), 5.0);
    let raw = classify_once(&model, "f3").await;
    assert_eq!(raw.answer, Err(ModelFailure::InvalidJson));
    assert!(raw.content.is_some(), "the prose is kept for diagnosis");
    // JSON of the wrong shape is invalid too.
    server.set_turn_script(
        "f3b",
        &classifier_script(json!({"decision": "MAYBE", "confidence": 0.99})),
    );
    assert_eq!(
        classify_once(&model, "f3b").await.answer,
        Err(ModelFailure::InvalidJson)
    );
    server.shutdown().await;
}

// SC-2: a body cut short (Content-Length larger than what is sent) → Error.
#[tokio::test]
async fn truncated_body_falls_back() {
    let server = ModelServer::start().await;
    server.set_default(
        Skill::Classifier,
        Behaviour::answer(json!({"decision": "ROUTE", "confidence": 0.99})).truncated(),
    );
    let model = model_at(&server.base_url(), &settings(), 5.0);
    let raw = classify_once(&model, "f4").await;
    assert_eq!(raw.answer, Err(ModelFailure::Error), "{:?}", raw.cause);
    assert!(
        raw.cause.as_deref().unwrap_or("").contains("cut short"),
        "{:?}",
        raw.cause
    );
    server.shutdown().await;
}

// SC-2: an HTML page (wrong content type) or a JSON body that is no chat completion →
// InvalidJson.
#[tokio::test]
async fn wrong_content_type_or_shape_falls_back() {
    let server = ModelServer::start().await;
    server.set_default(Skill::Classifier, Behaviour::html());
    let model = model_at(&server.base_url(), &settings(), 5.0);
    let raw = classify_once(&model, "f5").await;
    assert_eq!(raw.answer, Err(ModelFailure::InvalidJson));
    assert!(raw.cause.as_deref().unwrap_or("").contains("text/html"));
    server.set_default(Skill::Classifier, Behaviour::raw(r#"{"result": "ROUTE"}"#));
    let raw = classify_once(&model, "f5b").await;
    assert_eq!(raw.answer, Err(ModelFailure::InvalidJson));
    server.shutdown().await;
}

// SC-2: nobody listening → Error, with a cause naming the connection.
#[tokio::test]
async fn refused_connection_falls_back() {
    let url = closed_port_url().await;
    let model = model_at(&url, &settings(), 5.0);
    let raw = classify_once(&model, "f6").await;
    assert_eq!(raw.answer, Err(ModelFailure::Error));
    assert!(
        raw.cause
            .as_deref()
            .unwrap_or("")
            .contains("cannot connect"),
        "{:?}",
        raw.cause
    );
}

async fn closed_port_url() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    format!("http://{addr}/v1")
}

// ---------------------------------------------------------------------------------------------
// The engine over real HTTP

// SC-2: 0.89 falls back (low_confidence), 0.90 and 0.91 are accepted (threshold 0.90).
#[tokio::test]
async fn threshold_edges_through_the_engine() {
    let server = ModelServer::start().await;
    let settings = settings();
    assert_eq!(settings.route_stickiness_confidence_threshold, 0.90);
    let model = model_at(&server.base_url(), &settings, 5.0);
    for (i, (confidence, accepted)) in [(0.89, false), (0.90, true), (0.91, true)]
        .into_iter()
        .enumerate()
    {
        let turn_id = format!("edge-{i}");
        server.set_turn_script(
            &turn_id,
            &classifier_script(json!({"decision": "HUMAN_HANDOFF", "confidence": confidence})),
        );
        let store = InMemoryCheckpointStore::new();
        let t = turn(&format!("s-edge-{i}"), &turn_id, "hello there", 1_000);
        let p = run_turn(&settings, &store, &model, &t).await;
        let route = p.outcome.route.as_ref().map(|r| r.route.as_str());
        if accepted {
            assert_eq!(route, Some("human_handoff"), "{confidence}");
            assert!(classifier_fallbacks(&p).is_empty(), "{confidence}");
            assert!(p.outcome.state.human_handoff_requested);
        } else {
            assert_eq!(
                classifier_fallbacks(&p),
                [FallbackReason::LowConfidence],
                "{confidence}"
            );
            assert!(!p.outcome.state.human_handoff_requested);
            assert!(
                p.model_calls.contains(&Skill::Router),
                "fell back to the router"
            );
        }
    }
    server.shutdown().await;
}

// SC-3: CONTINUE with no active agent becomes ROUTE: the router runs and routes.
#[tokio::test]
async fn continue_without_active_agent_routes() {
    let server = ModelServer::start().await;
    server.set_turn_script(
        "c1",
        &ModelScript {
            classifier: Some(answer(json!({"decision": "CONTINUE", "confidence": 0.99}))),
            router: Some(answer(
                json!({"agent": "billing", "intent": "billing_show_bill",
                "confidence": 0.97, "arguments": {}}),
            )),
            ..Default::default()
        },
    );
    let settings = settings();
    let model = model_at(&server.base_url(), &settings, 5.0);
    let store = InMemoryCheckpointStore::new();
    let p = run_turn(
        &settings,
        &store,
        &model,
        &turn("s-c1", "c1", "show my bill", 1_000),
    )
    .await;
    assert_eq!(p.model_calls, [Skill::Classifier, Skill::Router]);
    assert!(classifier_fallbacks(&p).is_empty());
    assert_eq!(
        p.outcome.route.as_ref().map(|r| r.route.as_str()),
        Some("billing")
    );
    assert_eq!(server.requests_for(Skill::Router).len(), 1);
    server.shutdown().await;
}

// SC-4: HUMAN_HANDOFF and END_SESSION are recognised on the first turn; no router call.
#[tokio::test]
async fn first_turn_global_actions() {
    let server = ModelServer::start().await;
    let settings = settings();
    let model = model_at(&server.base_url(), &settings, 5.0);
    server.set_turn_script(
        "g1",
        &classifier_script(json!({"decision": "HUMAN_HANDOFF", "confidence": 0.95})),
    );
    server.set_turn_script(
        "g2",
        &classifier_script(json!({"decision": "END_SESSION", "confidence": 0.95})),
    );
    let handoff = run_turn(
        &settings,
        &InMemoryCheckpointStore::new(),
        &model,
        &turn("s-g1", "g1", "I want a human", 1_000),
    )
    .await;
    assert_eq!(handoff.model_calls, [Skill::Classifier]);
    assert!(handoff.outcome.state.human_handoff_requested);
    assert!(!handoff.outcome.state.session_ended);
    assert_eq!(
        handoff.outcome.route.as_ref().map(|r| r.route.as_str()),
        Some("human_handoff")
    );
    let end = run_turn(
        &settings,
        &InMemoryCheckpointStore::new(),
        &model,
        &turn("s-g2", "g2", "bye, that's all", 1_000),
    )
    .await;
    assert_eq!(end.model_calls, [Skill::Classifier]);
    assert!(end.outcome.state.session_ended);
    assert!(!end.outcome.state.human_handoff_requested);
    assert_eq!(
        end.outcome.route.as_ref().map(|r| r.route.as_str()),
        Some("end_session")
    );
    assert!(server.requests_for(Skill::Router).is_empty());
    server.shutdown().await;
}

// SC-8: after a longer conversation the classifier request carries at most
// ROUTE_STICKINESS_HISTORY_TURNS previous turns, and every call is capped at
// ROUTE_STICKINESS_MAX_TOKENS.
#[tokio::test]
async fn classifier_history_is_capped() {
    let server = ModelServer::start().await;
    let settings = Settings {
        route_stickiness_history_turns: 2,
        ..settings()
    };
    let model = model_at(&server.base_url(), &settings, 5.0);
    let store = InMemoryCheckpointStore::new();
    for i in 0..6 {
        let turn_id = format!("h{i}");
        server.set_turn_script(
            &turn_id,
            &ModelScript {
                classifier: Some(answer(json!({"decision": "ROUTE", "confidence": 0.99}))),
                router: Some(answer(json!({"out_of_scope": true, "confidence": 0.95}))),
                ..Default::default()
            },
        );
        let t = turn(
            "s-h",
            &turn_id,
            &format!("message number {i}"),
            1_000 + i * 1_000,
        );
        run_turn(&settings, &store, &model, &t).await;
    }
    let calls = server.requests_for(Skill::Classifier);
    assert_eq!(calls.len(), 6);
    for call in &calls {
        assert_eq!(call.body["max_tokens"], 42);
        let history = call.user_input().expect("input")["history"]
            .as_array()
            .cloned()
            .expect("history array");
        assert!(history.len() <= 2, "{history:?}");
    }
    let last = calls.last().expect("last").user_input().expect("input");
    let history = last["history"].as_array().expect("history");
    assert_eq!(history.len(), 2, "a long conversation fills the cap");
    let text = last["history"].to_string();
    assert!(
        text.contains("message number 4"),
        "the latest previous turn: {text}"
    );
    for old in ["message number 0", "message number 1", "message number 2"] {
        assert!(!text.contains(old), "{old} is older than the cap: {text}");
    }
    server.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// The key never shows

/// A `tracing` writer into a shared buffer.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

// The API key is sent (Authorization) but never appears in Debug output, failure causes,
// configuration errors or log lines (TRACE level, every crate).
#[tokio::test]
async fn api_key_never_leaks() {
    let logs = Captured::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let server = ModelServer::start().await;
    let model = model_at(&server.base_url(), &settings(), 0.3);
    let mut texts = vec![format!("{model:?}"), format!("{model:#?}")];
    server.set_default(Skill::Classifier, Behaviour::status(401));
    let unauthorized = classify_once(&model, "k1").await;
    assert_eq!(unauthorized.status, Some(401));
    assert!(unauthorized
        .cause
        .as_deref()
        .unwrap_or("")
        .contains(KEY_VAR));
    server.set_default(Skill::Classifier, Behaviour::status(500));
    let failed = classify_once(&model, "k2").await;
    server.set_default(Skill::Classifier, Behaviour::content("no json"));
    let invalid = classify_once(&model, "k3").await;
    server.set_turn_script(
        "k4",
        &ModelScript {
            classifier: Some(Scripted::Fault(ModelFailure::Timeout)),
            ..Default::default()
        },
    );
    let timed_out = classify_once(&model, "k4").await;
    let refused_model = model_at(&closed_port_url().await, &settings(), 1.0);
    let refused = classify_once(&refused_model, "k5").await;
    texts.push(format!("{refused_model:?}"));
    for raw in [&unauthorized, &failed, &invalid, &timed_out, &refused] {
        texts.push(format!("{raw:?}"));
        texts.push(raw.cause.clone().unwrap_or_default());
    }
    // Configuration errors about the key name the variable, never its value.
    let bad_key = |var: &str| -> Option<String> {
        (var == KEY_VAR).then(|| format!("{KEY}\nInjected: header"))
    };
    let err = OpenAiCompatibleModel::new(catalog(), Arc::new(settings()), profiles(1.0), bad_key)
        .expect_err("a key with a line break is refused");
    assert!(matches!(err, ModelConfigError::InvalidApiKey { .. }));
    texts.push(err.to_string());
    texts.push(format!("{err:?}"));
    let missing =
        OpenAiCompatibleModel::new(catalog(), Arc::new(settings()), profiles(1.0), |_| None)
            .expect_err("no key");
    assert!(missing.to_string().contains(KEY_VAR));
    texts.push(missing.to_string());
    server.shutdown().await;

    let logged =
        String::from_utf8_lossy(&logs.0.lock().unwrap_or_else(|e| e.into_inner())).into_owned();
    assert!(logged.contains("Model call failed"), "logs were captured");
    texts.push(logged);
    for text in &texts {
        assert!(!text.contains(KEY), "the key leaked: {text}");
        assert!(
            !text.contains("7Hq2Zx9Lw4Rt"),
            "part of the key leaked: {text}"
        );
    }
    assert!(server
        .requests()
        .iter()
        .all(|r| r.authorization.as_deref() == Some(format!("Bearer {KEY}").as_str())));
}

// ---------------------------------------------------------------------------------------------
// `turnstile classify`

struct CliRun {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn profiles_file(tag: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!(
        "turnstile-classify-{}-{tag}.yaml",
        std::process::id()
    ));
    std::fs::write(&path, profiles_yaml(2.0)).expect("write profiles");
    path
}

async fn classify_cli(args: Vec<String>, with_key: bool) -> CliRun {
    tokio::task::spawn_blocking(move || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_turnstile"));
        cmd.arg("classify").args(&args);
        for name in turnstile::config::settings::SETTING_NAMES {
            cmd.env_remove(name);
        }
        cmd.env_remove(KEY_VAR);
        if with_key {
            cmd.env(KEY_VAR, KEY);
        }
        let out = cmd.output().expect("run turnstile classify");
        CliRun {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    })
    .await
    .expect("join")
}

fn cli_args(profiles: &Path, base_url: &str, message: &str) -> Vec<String> {
    vec![
        "--profiles".into(),
        profiles.display().to_string(),
        "--base-url".into(),
        base_url.into(),
        message.into(),
    ]
}

// SC-1, SC-2: an accepted decision prints the decision, latency and `fallback: none`, exit 0.
#[tokio::test]
async fn classify_command_accepts_a_decision() {
    let server = ModelServer::start().await;
    server.set_default(
        Skill::Classifier,
        Behaviour::answer(json!({"decision": "END_SESSION", "confidence": 0.97})),
    );
    let profiles = profiles_file("ok");
    let run = classify_cli(
        cli_args(&profiles, &server.base_url(), "that's all, thanks"),
        true,
    )
    .await;
    assert_eq!(run.code, Some(0), "stderr: {}", run.stderr);
    let lines: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert_eq!(
        lines[0],
        json!({"decision": "END_SESSION", "confidence": 0.97})
    );
    assert!(lines[1]["latency_ms"].is_u64());
    assert_eq!(lines[2], json!({"fallback": "none"}));
    let sent = &server.requests_for(Skill::Classifier)[0];
    assert_eq!(
        sent.authorization.as_deref(),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(
        sent.user_input().expect("input")["message"],
        "that's all, thanks"
    );
    server.shutdown().await;
    let _ = std::fs::remove_file(profiles);
}

// SC-2: refused connection, HTTP 401 and a non-JSON answer exit 3 with a one-line cause.
#[tokio::test]
async fn classify_command_reports_fallbacks() {
    let profiles = profiles_file("fallbacks");
    let refused = classify_cli(cli_args(&profiles, &closed_port_url().await, "hi"), true).await;
    assert_eq!(refused.code, Some(3), "stderr: {}", refused.stderr);
    assert!(
        refused.stderr.contains("cannot connect"),
        "{}",
        refused.stderr
    );
    assert!(
        refused.stdout.contains(r#"{"fallback":"error"}"#),
        "{}",
        refused.stdout
    );

    let server = ModelServer::start().await;
    server.set_default(Skill::Classifier, Behaviour::status(401));
    let unauthorized = classify_cli(cli_args(&profiles, &server.base_url(), "hi"), true).await;
    assert_eq!(
        unauthorized.code,
        Some(3),
        "stderr: {}",
        unauthorized.stderr
    );
    assert!(
        unauthorized.stderr.contains("401"),
        "{}",
        unauthorized.stderr
    );
    assert!(
        unauthorized.stderr.contains(KEY_VAR),
        "{}",
        unauthorized.stderr
    );

    server.set_default(
        Skill::Classifier,
        Behaviour::content("Sure! The customer wants to continue."),
    );
    let prose = classify_cli(cli_args(&profiles, &server.base_url(), "hi"), true).await;
    assert_eq!(prose.code, Some(3), "stderr: {}", prose.stderr);
    assert!(prose.stderr.contains("no JSON object"), "{}", prose.stderr);
    assert!(
        prose.stdout.contains(r#"{"fallback":"invalid_json"}"#),
        "{}",
        prose.stdout
    );

    for run in [&refused, &unauthorized, &prose] {
        assert_eq!(run.stderr.trim().lines().count(), 1, "{}", run.stderr);
        assert!(!run.stderr.contains(KEY) && !run.stdout.contains(KEY));
    }
    server.shutdown().await;
    let _ = std::fs::remove_file(profiles);
}

// Configuration errors exit 64: an unknown profile, a missing API key variable, a bad URL.
#[tokio::test]
async fn classify_command_configuration_errors() {
    let profiles = profiles_file("config");
    let mut unknown = cli_args(&profiles, "http://127.0.0.1:9/v1", "hi");
    unknown.extend(["--profile".into(), "no_such_profile".into()]);
    let run = classify_cli(unknown, true).await;
    assert_eq!(run.code, Some(64), "stderr: {}", run.stderr);
    assert!(run.stderr.contains("no_such_profile"), "{}", run.stderr);
    assert!(
        run.stderr.contains("route_continuity"),
        "lists the known profiles"
    );

    let run = classify_cli(cli_args(&profiles, "http://127.0.0.1:9/v1", "hi"), false).await;
    assert_eq!(run.code, Some(64), "stderr: {}", run.stderr);
    assert!(run.stderr.contains(KEY_VAR), "{}", run.stderr);

    let run = classify_cli(cli_args(&profiles, "not a url", "hi"), true).await;
    assert_eq!(run.code, Some(64), "stderr: {}", run.stderr);
    assert!(run.stderr.contains("not a url"), "{}", run.stderr);
    let _ = std::fs::remove_file(profiles);
}

// Operations: with_max_concurrency bounds the calls (and so the connections) in progress; the
// others wait for a slot, and the wait does not eat into the profile's timeout.
#[tokio::test]
async fn concurrency_cap_bounds_calls_in_progress() {
    let server = ModelServer::start().await;
    server.set_default(
        Skill::Classifier,
        Behaviour::answer(json!({"decision": "CONTINUE", "confidence": 0.97}))
            .with_latency(Duration::from_millis(250)),
    );
    // Each call may take 1.2 s, nearly 1 s more than the server needs, so a loaded machine does
    // not time it out; the last pair waits ~1.75 s for a slot before it starts, so if the wait
    // counted, every pair from the sixth on would time out.
    let model = model_at(&server.base_url(), &settings(), 1.2)
        .with_max_concurrency(2)
        .expect("client");
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..16 {
        let model = model.clone();
        calls.spawn(async move {
            let id = format!("cap-{i}");
            let raw = classify_once(&model, &id).await;
            (id, raw)
        });
    }
    while let Some(done) = calls.join_next().await {
        let (id, raw) = done.expect("call task");
        assert!(
            raw.answer.is_ok(),
            "{id}: {:?} ({:?})",
            raw.answer,
            raw.cause
        );
    }
    assert_eq!(server.requests_for(Skill::Classifier).len(), 16);
    assert_eq!(server.peak_concurrent_requests(), 2);
    server.shutdown().await;
}
