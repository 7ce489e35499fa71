//! ROUTER_SPECULATIVE: the router starts next to the classifier; its answer is used when the
//! engine then asks the same question, discarded otherwise, and every such call is marked.

// Needs the test harness (src/testkit, the fault hook, `chaos`, `scenarios --e2e`):
// `cargo test --features harness`; without the feature this file compiles to no tests.
#![cfg(feature = "harness")]

use std::path::Path;
use std::sync::Arc;

use serde_json::{json, Value};
use turnstile::config::agents::load_catalog;
use turnstile::config::profiles::parse_profiles;
use turnstile::domain::catalog::Settings;
use turnstile::domain::engine::Engine;
use turnstile::domain::turn::{Identity, Turn, TurnInput};
use turnstile::model::{ModelScript, OpenAiCompatibleModel, Scripted};
use turnstile::pipeline::process_turn;
use turnstile::store::InMemoryCheckpointStore;
use turnstile::testkit::model_server::ModelServer;
use turnstile::tool::ScriptedTools;

const PROFILES: &str = r#"
profiles:
  route_continuity: {provider: openai_compatible, model: c, temperature: 0, max_tokens: 80, timeout_seconds: 5}
  router: {provider: openai_compatible, model: r, temperature: 0, max_tokens: 300, timeout_seconds: 5}
  interpreter: {provider: openai_compatible, model: i, temperature: 0, max_tokens: 200, timeout_seconds: 5}
"#;

fn answer(v: Value) -> Option<Scripted> {
    match v {
        Value::Object(m) => Some(Scripted::Answer(m)),
        _ => None,
    }
}

fn turn(id: &str, text: &str, at_ms: i64) -> Turn {
    Turn {
        turn_id: id.into(),
        identity: Identity::new("t1", "retail-bot", "spec"),
        input: TurnInput::Text(text.into()),
        locale: Default::default(),
        at_ms,
    }
}

#[tokio::test]
async fn speculative_router_is_used_when_asked_and_discarded_otherwise() {
    let server = ModelServer::start().await;
    let catalog = Arc::new(load_catalog(Path::new("config/agents.example.yaml")).unwrap());
    let settings = Settings {
        router_speculative: true,
        ..Settings::default()
    };
    let model = OpenAiCompatibleModel::new(
        catalog.clone(),
        Arc::new(settings.clone()),
        Arc::new(parse_profiles(PROFILES, "inline").unwrap()),
        |_| None,
    )
    .unwrap()
    .with_base_url_override(server.base_url());
    let engine = Engine::new(&catalog, &settings);
    let store = InMemoryCheckpointStore::new();
    let tools = ScriptedTools::default();

    // Turn 1: ROUTE — the engine asks the router the same question: the speculative answer
    // is used and the router is called once.
    server.set_turn_script(
        "s1",
        &ModelScript {
            classifier: answer(json!({"decision": "ROUTE", "confidence": 0.97})),
            router: answer(
                json!({"agent": "retail", "intent": "retail_order_cancel", "confidence": 0.95}),
            ),
            interpreter: None,
        },
    );
    let first = process_turn(
        &engine,
        &store,
        &model,
        &tools,
        &turn("s1", "cancel my order", 1_000),
    )
    .await
    .unwrap();
    assert_eq!(
        first
            .outcome
            .state
            .active_transaction
            .as_ref()
            .unwrap()
            .tool,
        "retail_order_cancel"
    );
    let routers: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.turn_id.as_deref() == Some("s1") && r.skill.as_deref() == Some("router"))
        .collect();
    assert_eq!(routers.len(), 1, "no second router call");
    assert_eq!(routers[0].speculative.as_deref(), Some("true"));

    // Turn 2: CONTINUE → the interpreter reads it; the speculative router answer is discarded
    // and not listed among the model calls.
    server.set_turn_script(
        "s2",
        &ModelScript {
            classifier: answer(json!({"decision": "CONTINUE", "confidence": 0.97})),
            router: answer(
                json!({"agent": "retail", "intent": "retail_order_tracking", "confidence": 0.95}),
            ),
            interpreter: answer(json!({"act": "unclear", "confidence": 0.9})),
        },
    );
    let second = process_turn(
        &engine,
        &store,
        &model,
        &tools,
        &turn("s2", "hmm, well", 2_000),
    )
    .await
    .unwrap();
    let skills: Vec<&str> = second.model_calls.iter().map(|s| s.as_str()).collect();
    assert_eq!(skills, vec!["classifier", "interpreter"]);
    assert_eq!(
        second.outcome.state.active_transaction.unwrap().tool,
        "retail_order_cancel",
        "the discarded router answer changed nothing"
    );
    let marked = server
        .requests()
        .into_iter()
        .filter(|r| r.turn_id.as_deref() == Some("s2") && r.skill.as_deref() == Some("router"))
        .all(|r| r.speculative.as_deref() == Some("true"));
    assert!(marked);
}
