//! Every line a turn causes names the turn (IO-5, docs/operations.md "Logs"): records run through
//! the worker's record path (`pipeline::handle_record` inside `telemetry::turn_span`, as
//! `worker::turn` runs them) with the worker's JSON log format, and every path a model, tool or
//! store call takes — a model error (fallback), a model timeout, the speculative router, calls
//! waiting under a concurrency cap, the embeddings → LLM cascade, a tool retry, a store outage —
//! must log only lines that carry the turn's `turn_id`. Under a filter that keeps only warnings
//! (`RUST_LOG=warn`, as under load) too: the turn span was an INFO item, filtered out there, and
//! its warnings lost their turn.

// Needs the test harness (src/testkit): `cargo test --features harness`.
#![cfg(feature = "harness")]

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};
use tracing::Instrument;
use turnstile::config::agents::load_catalog;
use turnstile::config::profiles::parse_profiles;
use turnstile::config::skills::SkillProfiles;
use turnstile::domain::catalog::{Catalog, Settings};
use turnstile::domain::turn::Identity;
use turnstile::message::{DecodeLimits, InboundRecord};
use turnstile::model::configured::{ConfiguredModel, EmbeddingsSetup};
use turnstile::model::http::OpenAiCompatibleModel;
use turnstile::model::ModelScript;
use turnstile::pipeline::{handle_record, Disposition, Ports, Rules};
use turnstile::ports::{CheckpointRecord, CheckpointStore, DecisionModel, Fence, StoreError};
use turnstile::store::retrying::Backoff;
use turnstile::store::{InMemoryCheckpointStore, RetryingStore};
use turnstile::telemetry;
use turnstile::testkit::model_server::ModelServer;
use turnstile::testkit::tool_server::ToolServer;
use turnstile::tool::{HttpToolGateway, ToolHttpSettings};

const TOPIC: &str = "turns";
/// Model calls time out after this (profiles below); a scripted `timeout` holds its reply longer.
const MODEL_TIMEOUT_SECONDS: f64 = 0.3;

/// The log lines written so far, shared with the subscriber's writer.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log buffer").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn lines(&self) -> Vec<Value> {
        let bytes = self.0.lock().expect("log buffer").clone();
        String::from_utf8_lossy(&bytes)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }
}

fn catalog() -> Arc<Catalog> {
    Arc::new(load_catalog(std::path::Path::new("config/agents.example.yaml")).expect("config"))
}

fn no_env(_: &str) -> Option<String> {
    None
}

/// Session control by embeddings, escalating to an LLM when they fail or are not confident (the
/// cascade); router and interpreter by chat profiles. Chat calls go to `models`.
fn profiles(embeddings_url: &str) -> Arc<turnstile::config::profiles::Profiles> {
    let t = MODEL_TIMEOUT_SECONDS;
    let chat = |name: &str| {
        format!("  {name}: {{provider: openai_compatible, model: m, temperature: 0, max_tokens: 80, timeout_seconds: {t}}}\n")
    };
    let yaml = format!(
        "profiles:\n  route_continuity: {{provider: embeddings, model: e5, base_url: \"{embeddings_url}\", timeout_seconds: {t}, escalate_to: route_continuity_llm}}\n{}{}{}",
        chat("route_continuity_llm"),
        chat("router"),
        chat("interpreter"),
    );
    Arc::new(parse_profiles(&yaml, "test profiles").expect("profiles"))
}

/// An OpenAI-compatible embeddings endpoint: a fixed vector per text (so examples fit), or HTTP
/// 500 for every call once `failing` is set.
#[derive(Clone, Default)]
struct Embeddings {
    failing: Arc<AtomicBool>,
}

async fn embed(State(e): State<Embeddings>, Json(body): Json<Value>) -> Response {
    if e.failing.load(Ordering::SeqCst) {
        return (StatusCode::INTERNAL_SERVER_ERROR, "down").into_response();
    }
    let inputs = body["input"].as_array().cloned().unwrap_or_default();
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let h = text
                .as_str()
                .unwrap_or("")
                .bytes()
                .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
            let v: Vec<f64> = (0..8)
                .map(|k| ((h >> (k * 8)) & 0xff) as f64 + 1.0)
                .collect();
            json!({"index": i, "embedding": v})
        })
        .collect();
    Json(json!({"data": data})).into_response()
}

async fn start_embeddings() -> (String, Embeddings) {
    let state = Embeddings::default();
    let app = Router::new()
        .route("/v1/embeddings", post(embed))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/v1"), state)
}

/// The in-memory store, failing its first `load_failures` loads (a store outage).
#[derive(Default)]
struct Flaky {
    inner: InMemoryCheckpointStore,
    load_failures: AtomicUsize,
}

impl CheckpointStore for Flaky {
    async fn load(&self, id: &Identity) -> Result<Option<CheckpointRecord>, StoreError> {
        if self
            .load_failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(StoreError::unavailable("connection refused"));
        }
        self.inner.load(id).await
    }
    async fn save_write_ahead(
        &self,
        id: &Identity,
        r: &CheckpointRecord,
        f: Fence,
    ) -> Result<(), StoreError> {
        self.inner.save_write_ahead(id, r, f).await
    }
    async fn save_turn(
        &self,
        id: &Identity,
        r: &CheckpointRecord,
        f: Fence,
    ) -> Result<(), StoreError> {
        self.inner.save_turn(id, r, f).await
    }
    async fn acquire_epoch(&self, t: &str, p: i32, o: &str) -> Result<i64, StoreError> {
        self.inner.acquire_epoch(t, p, o).await
    }
}

struct World {
    catalog: Arc<Catalog>,
    settings: Settings,
    limits: DecodeLimits,
    store: RetryingStore<Flaky>,
    models: ModelServer,
    tools_server: ToolServer,
    tools: HttpToolGateway,
    embeddings: Embeddings,
    /// Embeddings cascade; chat calls one at a time (`TURNSTILE_MODEL_MAX_CONCURRENCY=1`).
    model: ConfiguredModel,
    /// The same, with the router asked next to the classifier (`ROUTER_SPECULATIVE`).
    speculative: ConfiguredModel,
}

impl World {
    async fn new() -> World {
        let catalog = catalog();
        let settings = Settings::default();
        let models = ModelServer::start().await;
        // Longer than the profiles' timeout, short enough not to hold the test up.
        models.set_timeout_delay(Duration::from_secs(2));
        let tools_server = ToolServer::start().await.expect("tool server");
        let tools = HttpToolGateway::new(
            catalog.clone(),
            Some(tools_server.base_url()),
            ToolHttpSettings {
                timeout_ms: 3_000,
                max_attempts: 3,
                initial_backoff_ms: 10,
                max_backoff_ms: 40,
            },
        )
        .expect("tool gateway");
        let (embeddings_url, embeddings) = start_embeddings().await;
        let build = |settings: Settings| {
            let catalog = catalog.clone();
            let profiles = profiles(&embeddings_url);
            let base = models.base_url();
            async move {
                let settings = Arc::new(settings);
                let skills =
                    SkillProfiles::resolve(&catalog, &settings, &profiles).expect("skills");
                let llm = OpenAiCompatibleModel::from_skills(
                    catalog.clone(),
                    settings.clone(),
                    &skills,
                    no_env,
                )
                .expect("chat model")
                .with_base_url_override(&base)
                .with_max_concurrency(1)
                .expect("cap");
                ConfiguredModel::build(
                    llm,
                    catalog,
                    settings,
                    &skills,
                    &EmbeddingsSetup::default(),
                    &no_env,
                    |m| m.with_base_url_override(&base).with_max_concurrency(1),
                )
                .await
                .expect("configured model")
            }
        };
        let model = build(settings.clone()).await;
        let speculative = build(Settings {
            router_speculative: true,
            ..settings.clone()
        })
        .await;
        World {
            catalog,
            settings,
            limits: DecodeLimits::default(),
            store: RetryingStore::new(Flaky::default()).with_backoff(Backoff {
                first: Duration::from_millis(1),
                max: Duration::from_millis(5),
            }),
            models,
            tools_server,
            tools,
            embeddings,
            model,
            speculative,
        }
    }

    fn script(&self, turn_id: &str, script: Value) {
        let script: ModelScript = serde_json::from_value(script).expect("model script");
        self.models.set_turn_script(turn_id, &script);
    }

    /// One record through the worker's record path, in the worker's turn span.
    async fn turn<M: DecisionModel>(&self, model: &M, offset: i64, turn_id: &str, text: &str) {
        let payload = serde_json::to_vec(&json!({
            "turn_id": turn_id, "tenant_id": "t1", "agent_id": "retail-bot",
            "session_id": format!("s-{turn_id}"), "locale": "en", "channel": "test", "text": text,
        }))
        .expect("payload");
        let key = Identity::new("t1", "retail-bot", &format!("s-{turn_id}")).key();
        let record = InboundRecord {
            topic: TOPIC,
            partition: 0,
            offset,
            key: Some(key.as_bytes()),
            payload: Some(&payload),
            timestamp_ms: Some(10_000),
        };
        let rules = Rules {
            engine: turnstile::domain::engine::Engine::new(&self.catalog, &self.settings),
            catalog: &self.catalog,
            limits: &self.limits,
        };
        let ports = Ports {
            store: &self.store,
            model,
            tools: &self.tools,
        };
        let handled = handle_record(rules, ports, &record, 1, -1)
            .instrument(telemetry::turn_span(TOPIC, 0, offset))
            .await
            .expect("no store error escapes the retry layer");
        assert_eq!(handled.disposition, Disposition::Applied, "{turn_id}");
    }

    /// Every path, each in its own turn; returns the lines logged.
    async fn run_every_path(&self, filter: &str) -> Vec<Value> {
        let logs = Captured::default();
        let writer = logs.clone();
        let subscriber =
            telemetry::json_logs(telemetry::log_filter(filter), move || writer.clone());
        let _guard = tracing::subscriber::set_default(subscriber);
        let route = json!({"decision": "ROUTE", "confidence": 0.97});
        let bill = json!({"agent": "billing", "intent": "billing_show_bill", "confidence": 0.95});

        // Fallback: the embeddings fail, the cascade's LLM errs; the router errs too.
        self.embeddings.failing.store(true, Ordering::SeqCst);
        self.script(
            "fallback",
            json!({"classifier": "error", "router": "error"}),
        );
        self.turn(&self.model, 1, "fallback", "what's the weather like?")
            .await;
        // Timeout: the escalated classifier and the router both time out.
        self.script(
            "timeout",
            json!({"classifier": "timeout", "router": "timeout"}),
        );
        self.turn(&self.model, 2, "timeout", "what's the weather like?")
            .await;
        // Speculative router: asked next to the classifier, and it fails.
        self.script(
            "speculative",
            json!({"classifier": route, "router": "error"}),
        );
        self.turn(&self.speculative, 3, "speculative", "show my bill")
            .await;
        // Capped concurrency: two turns at once, one chat call at a time; the second waits for
        // the first's timeout, then times out itself.
        for id in ["capped-a", "capped-b"] {
            self.script(id, json!({"classifier": "timeout", "router": "error"}));
        }
        tokio::join!(
            self.turn(&self.model, 4, "capped-a", "hello there"),
            self.turn(&self.model, 5, "capped-b", "hello there"),
        );
        // A tool retry, then a store outage waited out.
        self.script("tool", json!({"classifier": route, "router": bill}));
        self.tools_server.fail_next("billing_show_bill", 1, 503);
        self.turn(&self.model, 6, "tool", "show my bill").await;
        self.script("store", json!({"classifier": route, "router": bill}));
        self.store.inner().load_failures.store(3, Ordering::SeqCst);
        self.turn(&self.model, 7, "store", "show my bill").await;
        self.embeddings.failing.store(false, Ordering::SeqCst);
        logs.lines()
    }
}

/// The lines of `turn_id` whose message contains `text`.
fn of<'a>(lines: &'a [Value], turn_id: &str, text: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|l| l["span"]["turn_id"] == json!(turn_id))
        .filter(|l| l["fields"]["message"].as_str().unwrap_or("").contains(text))
        .collect()
}

fn assert_every_line_names_its_turn(lines: &[Value], filter: &str) {
    let anonymous: Vec<&Value> = lines
        .iter()
        .filter(|l| l["span"]["turn_id"].as_str().is_none_or(|id| id.is_empty()))
        .collect();
    assert!(
        anonymous.is_empty(),
        "RUST_LOG={filter}: lines without their turn:\n{}",
        anonymous
            .iter()
            .map(|l| l.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    );
    // Each path did log (a path that logs nothing would pass the check above vacuously).
    let model_failed = "Model call failed";
    let failed_skill = |id: &str, skill: &str, outcome: &str| {
        of(lines, id, model_failed).iter().any(|l| {
            l["fields"]["skill"] == json!(skill) && l["fields"]["outcome"] == json!(outcome)
        })
    };
    assert!(
        !of(lines, "fallback", "Embeddings call failed").is_empty(),
        "{filter}: the cascade's embeddings failure"
    );
    assert!(
        failed_skill("fallback", "classifier", "error"),
        "{filter}: the escalated LLM"
    );
    assert!(
        failed_skill("fallback", "router", "error"),
        "{filter}: the router"
    );
    assert!(failed_skill("timeout", "classifier", "timeout"), "{filter}");
    assert!(failed_skill("timeout", "router", "timeout"), "{filter}");
    assert!(failed_skill("speculative", "router", "error"), "{filter}");
    assert!(
        failed_skill("capped-a", "classifier", "timeout"),
        "{filter}"
    );
    assert!(
        failed_skill("capped-b", "classifier", "timeout"),
        "{filter}"
    );
    assert!(
        !of(lines, "tool", "Tool call attempt failed").is_empty(),
        "{filter}"
    );
    assert!(
        !of(lines, "store", "Checkpoint store unavailable").is_empty(),
        "{filter}"
    );
    for l in lines {
        assert_eq!(l["span"]["tenant_id"], json!("t1"), "{l}");
        assert_eq!(l["span"]["topic"], json!(TOPIC), "{l}");
    }
}

#[tokio::test]
async fn every_line_of_a_turn_names_it_under_a_warning_filter() {
    let world = World::new().await;
    let lines = world.run_every_path("warn").await;
    assert_every_line_names_its_turn(&lines, "warn");
    assert!(
        lines.iter().all(|l| l["level"] != json!("INFO")),
        "the filter keeps warnings only"
    );
}

#[tokio::test]
async fn every_line_of_a_turn_names_it_under_the_default_filter() {
    let world = World::new().await;
    let lines = world.run_every_path("info").await;
    assert_every_line_names_its_turn(&lines, "info");
    // INFO lines are checked too: a tool attempt that finished, the store back.
    assert!(!of(&lines, "tool", "Tool call attempt finished").is_empty());
    assert!(!of(&lines, "store", "Checkpoint store answers again").is_empty());
}
