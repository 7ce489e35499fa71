//! The HTTP tool gateway against a real loopback tool server: retries, idempotency keys, evidence,
//! fail-closed pre-validation, and the engine's terminal states driven through real HTTP.

// Needs the test harness (src/testkit, the fault hook, `chaos`, `scenarios --e2e`):
// `cargo test --features harness`; without the feature this file compiles to no tests.
#![cfg(feature = "harness")]

use std::collections::BTreeMap;
use std::net::TcpListener as StdTcpListener;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use turnstile::config::agents::{load_catalog, parse_catalog};
use turnstile::domain::catalog::{Catalog, Settings};
use turnstile::domain::effect::ToolRequest;
use turnstile::domain::engine::Engine;
use turnstile::domain::transaction::{
    AttemptOutcome, TransactionStatus, EVIDENCE_SUMMARY_MAX_CHARS,
};
use turnstile::domain::turn::{Identity, Turn, TurnInput};
use turnstile::model::scripted::{ModelScript, ScriptedModel};
use turnstile::pipeline::{process_turn, ProcessedTurn};
use turnstile::ports::{CallContext, ToolGateway};
use turnstile::store::InMemoryCheckpointStore;
use turnstile::testkit::tool_server::{ToolAction, ToolServer};
use turnstile::tool::http::{ToolConfigError, PRE_VALIDATION_UNAVAILABLE, TOOLS_BASE_URL_ENV};
use turnstile::tool::{HttpToolGateway, ToolHttpSettings, ToolScript};

const AGENTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/agents.example.yaml");

fn catalog() -> Arc<Catalog> {
    Arc::new(load_catalog(Path::new(AGENTS)).expect("example config"))
}

/// Short backoff so retries cost milliseconds; a timeout generous for a loaded machine.
fn fast() -> ToolHttpSettings {
    ToolHttpSettings {
        timeout_ms: 3_000,
        max_attempts: 3,
        initial_backoff_ms: 10,
        max_backoff_ms: 40,
    }
}

fn gateway(server: &ToolServer, settings: ToolHttpSettings) -> HttpToolGateway {
    HttpToolGateway::new(catalog(), Some(server.base_url()), settings).expect("gateway")
}

fn identity() -> Identity {
    Identity::new("t1", "retail-bot", "s-http")
}

fn request(tool: &str) -> ToolRequest {
    ToolRequest {
        identity: identity(),
        transaction_id: "tx-1".into(),
        tool: tool.into(),
        arguments: BTreeMap::from([("order_id".to_owned(), json!("PED-1001"))]),
        idempotency_key: "tx-1:execute".into(),
    }
}

fn ctx(turn_id: &str) -> CallContext<'_> {
    CallContext {
        turn_id,
        turn_at_ms: 1_000,
        speculative: false,
    }
}

fn tools_script(value: Value) -> BTreeMap<String, ToolScript> {
    serde_json::from_value(value).expect("tools script")
}

fn executes(server: &ToolServer) -> Vec<turnstile::testkit::tool_server::ToolCall> {
    server
        .calls()
        .into_iter()
        .filter(|c| c.action == ToolAction::Execute)
        .collect()
}

/// One conversation through the real engine and pipeline, tools over HTTP.
struct Conversation {
    catalog: Arc<Catalog>,
    settings: Settings,
    store: InMemoryCheckpointStore,
}

impl Conversation {
    fn new() -> Self {
        Conversation {
            catalog: catalog(),
            settings: Settings::default(),
            store: InMemoryCheckpointStore::new(),
        }
    }

    fn turn(id: &str, text: &str, at_ms: i64) -> Turn {
        Turn {
            turn_id: id.into(),
            identity: identity(),
            input: TurnInput::Text(text.into()),
            locale: Default::default(),
            at_ms,
        }
    }

    async fn send(&self, tools: &HttpToolGateway, turn: &Turn, model: Value) -> ProcessedTurn {
        let script: ModelScript = serde_json::from_value(model).expect("model script");
        let engine = Engine::new(&self.catalog, &self.settings);
        process_turn(
            &engine,
            &self.store,
            &ScriptedModel::new(script),
            tools,
            turn,
        )
        .await
        .expect("turn processed")
    }
}

fn route_to(agent: &str, tool: &str, arguments: Value) -> Value {
    json!({
        "classifier": {"decision": "ROUTE", "confidence": 0.96},
        "router": {"agent": agent, "intent": tool, "confidence": 0.95, "arguments": arguments},
    })
}

async fn wait_until(what: &str, done: impl Fn() -> bool) {
    for _ in 0..500 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting until {what}");
}

// EV-3, EV-4: a 503 is retried with the same key; the tool executes once; the evidence shows both
// attempts (through the engine: the transaction completes with two evidence records).
#[tokio::test]
async fn retried_after_503_executes_once_with_one_key() {
    let server = ToolServer::start().await.unwrap();
    server.fail_next("billing_show_bill", 1, 503);
    let tools = gateway(&server, fast());
    let conv = Conversation::new();
    let turn = Conversation::turn("u1", "show my bill", 1_000);
    let done = conv
        .send(
            &tools,
            &turn,
            route_to("billing", "billing_show_bill", json!({})),
        )
        .await;

    let last = done
        .outcome
        .state
        .last_transaction
        .expect("terminal snapshot");
    assert_eq!(last.status, TransactionStatus::Completed);
    let key = last.execution_key();
    assert_eq!(last.evidence.len(), 2, "{:?}", last.evidence);
    let (first, second) = (&last.evidence[0], &last.evidence[1]);
    assert_eq!(first.outcome, AttemptOutcome::RetryableFailure);
    assert_eq!(first.status_code, Some(503));
    assert_eq!((first.attempt, second.attempt), (1, 2));
    assert_eq!(second.outcome, AttemptOutcome::Ok);
    assert_eq!(second.status_code, Some(200));
    assert!(first.idempotency_key == key && second.idempotency_key == key);
    assert!(first.started_at_ms <= first.ended_at_ms && first.ended_at_ms <= second.started_at_ms);

    let calls = executes(&server);
    assert_eq!(calls.len(), 2);
    for call in &calls {
        assert_eq!(call.idempotency_key.as_deref(), Some(key.as_str()));
        assert_eq!(call.turn_id.as_deref(), Some("u1"));
    }
    let executions = server.executions();
    assert_eq!(executions.len(), 1, "executed once");
    assert_eq!(executions[0].idempotency_key, key);
    server.shutdown().await;
}

// LC-1, EV-3: a 400 is final — not retried — and the confirmed cancellation ends FAILED with the
// attempt in evidence and the tool's reason in the reply.
#[tokio::test]
async fn client_error_is_not_retried_and_ends_failed() {
    let server = ToolServer::start().await.unwrap();
    let tools = gateway(&server, fast());
    let conv = Conversation::new();
    let opened = conv
        .send(
            &tools,
            &Conversation::turn("u1", "cancel my order PED-1001", 1_000),
            route_to(
                "retail",
                "retail_order_cancel",
                json!({"order_id": "PED-1001"}),
            ),
        )
        .await;
    assert_eq!(
        opened.outcome.state.transaction_status,
        Some(TransactionStatus::AwaitingConfirmation)
    );

    server.set_turn_script(
        "u2",
        &tools_script(json!({
            "retail_order_cancel": {"ok": false, "retryable": false, "error": "already shipped"}
        })),
    );
    let done = conv
        .send(&tools, &Conversation::turn("u2", "yes", 2_000), json!({}))
        .await;
    let state = &done.outcome.state;
    assert_eq!(state.transaction_status, Some(TransactionStatus::Failed));
    assert!(state.active_transaction.is_none());
    let last = state.last_transaction.as_ref().unwrap();
    assert_eq!(last.status, TransactionStatus::Failed);
    assert_eq!(last.evidence.len(), 1, "a 4xx is not retried");
    let attempt = &last.evidence[0];
    assert_eq!(attempt.outcome, AttemptOutcome::Failure);
    assert_eq!(attempt.status_code, Some(400));
    assert_eq!(attempt.idempotency_key, last.execution_key());
    assert!(
        attempt.summary.contains("already shipped"),
        "{}",
        attempt.summary
    );
    assert!(done.outcome.reply_text().contains("already shipped"));
    assert_eq!(executes(&server).len(), 1);
    assert_eq!(server.executions()[0].status, 400);
    server.shutdown().await;
}

// LC-1, EV-3, EV-4: a retryable failure on every attempt ends FAILED with max_attempts records,
// one key throughout, and nothing executed at the tool.
#[tokio::test]
async fn retryable_failure_exhausted_ends_failed_with_every_attempt() {
    let server = ToolServer::start().await.unwrap();
    server.set_turn_script(
        "u1",
        &tools_script(json!({
            "billing_show_bill": {"ok": false, "retryable": true, "error": "billing backend unavailable"}
        })),
    );
    let tools = gateway(&server, fast());
    let conv = Conversation::new();
    let done = conv
        .send(
            &tools,
            &Conversation::turn("u1", "show my bill", 1_000),
            route_to("billing", "billing_show_bill", json!({})),
        )
        .await;
    let last = done
        .outcome
        .state
        .last_transaction
        .clone()
        .expect("terminal snapshot");
    assert_eq!(last.status, TransactionStatus::Failed);
    assert_eq!(last.evidence.len(), 3);
    for (i, attempt) in last.evidence.iter().enumerate() {
        assert_eq!(attempt.attempt, i as u32 + 1);
        assert_eq!(attempt.outcome, AttemptOutcome::RetryableFailure);
        assert_eq!(attempt.status_code, Some(503));
        assert_eq!(attempt.idempotency_key, last.execution_key());
        assert_eq!(attempt.summary, "HTTP 503: billing backend unavailable");
    }
    assert!(done
        .outcome
        .reply_text()
        .contains("billing backend unavailable"));
    assert_eq!(
        done.outcome.executed.len(),
        1,
        "one tool call, however many attempts"
    );
    assert_eq!(executes(&server).len(), 3);
    assert!(server.executions().is_empty());
    server.shutdown().await;
}

// LC-1, EV-2: a not-eligible pre-validation answer ends OUT_OF_SCOPE with the record kept and no
// execution.
#[tokio::test]
async fn pre_validation_not_eligible_ends_out_of_scope() {
    let server = ToolServer::start().await.unwrap();
    server.set_turn_script(
        "u1",
        &tools_script(json!({
            "retail_order_cancel.pre_validation": {
                "eligible": false, "reason": "already shipped", "data": {"carrier": "X"}
            }
        })),
    );
    let tools = gateway(&server, fast());
    let conv = Conversation::new();
    let done = conv
        .send(
            &tools,
            &Conversation::turn("u1", "cancel my order PED-1001", 1_000),
            route_to(
                "retail",
                "retail_order_cancel",
                json!({"order_id": "PED-1001"}),
            ),
        )
        .await;
    let last = done
        .outcome
        .state
        .last_transaction
        .expect("terminal snapshot");
    assert_eq!(last.status, TransactionStatus::OutOfScope);
    assert_eq!(last.pre_validation.len(), 1);
    let record = &last.pre_validation[0];
    assert!(!record.eligible);
    assert_eq!(record.reason.as_deref(), Some("already shipped"));
    assert_eq!(record.data, json!({"carrier": "X"}));
    let calls = server.calls();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].action, ToolAction::PreValidate);
    assert_eq!(calls[0].path, "/tools/retail_order_cancel/pre-validate");
    assert_eq!(calls[0].body["action"], "pre_validate");
    assert!(executes(&server).is_empty());
    server.shutdown().await;
}

// EV-2, LC-1: fail closed — a pre-validation that never answers is NOT eligible with reason
// `pre_validation_unavailable: ...`; the transaction ends FAILED (reason
// `pre_validation_unavailable`, not OUT_OF_SCOPE, which means "not eligible") and nothing executes.
#[tokio::test]
async fn unavailable_pre_validation_fails_closed() {
    let server = ToolServer::start().await.unwrap();
    server.fail_next("retail_order_cancel.pre_validation", 3, 503);
    let tools = gateway(&server, fast());
    let conv = Conversation::new();
    let done = conv
        .send(
            &tools,
            &Conversation::turn("u1", "cancel my order PED-1001", 1_000),
            route_to(
                "retail",
                "retail_order_cancel",
                json!({"order_id": "PED-1001"}),
            ),
        )
        .await;
    let last = done
        .outcome
        .state
        .last_transaction
        .expect("terminal snapshot");
    assert_eq!(last.status, TransactionStatus::Failed);
    assert_eq!(last.reason.as_deref(), Some("pre_validation_unavailable"));
    let record = &last.pre_validation[0];
    assert!(!record.eligible);
    let reason = record.reason.as_deref().unwrap_or_default();
    assert!(
        reason.starts_with(&format!("{PRE_VALIDATION_UNAVAILABLE}: HTTP 503")),
        "{reason}"
    );
    assert_eq!(server.calls().len(), 3, "retried up to max_attempts");
    assert!(executes(&server).is_empty());
    server.shutdown().await;
}

// EV-2: a malformed 2xx answer is not retried and is not eligible.
#[tokio::test]
async fn malformed_pre_validation_answer_is_not_eligible() {
    let server = ToolServer::start().await.unwrap();
    server.respond_next(
        "retail_order_cancel.pre_validation",
        1,
        200,
        r#"{"ok": true}"#,
    );
    let tools = gateway(&server, fast());
    let mut req = request("retail_order_cancel");
    req.idempotency_key = "tx-1:pre_validation:1".into();
    let result = tools.pre_validate(&req, ctx("u1")).await;
    assert!(!result.eligible);
    let reason = result.reason.unwrap_or_default();
    assert!(reason.starts_with(PRE_VALIDATION_UNAVAILABLE), "{reason}");
    assert!(reason.contains("malformed"), "{reason}");
    assert_eq!(server.calls().len(), 1);
    server.shutdown().await;
}

// LC-4, EV-4: the worker dies after the tool executed but before the answer arrived; after the
// restart (new gateway instance, same stored transaction) the same key is sent again and the tool
// answers from its first result instead of executing again.
#[tokio::test]
async fn same_key_after_restart_is_answered_from_the_first_result() {
    let server = ToolServer::start().await.unwrap();
    server.set_turn_script(
        "u1",
        &tools_script(json!({"billing_show_bill": {"ok": true, "data": {"amount": "71.99"}}})),
    );
    server.delay_next("billing_show_bill", 1, Duration::from_secs(5));
    let conv = Conversation::new();
    let turn = Conversation::turn("u1", "show my bill", 1_000);
    let model = route_to("billing", "billing_show_bill", json!({}));
    {
        let before_crash = gateway(&server, fast());
        tokio::select! {
            _ = conv.send(&before_crash, &turn, model.clone()) => {
                panic!("the answer is delayed: the turn cannot finish before the crash")
            }
            _ = wait_until("the tool executed", || server.executions().len() == 1) => {}
        }
    }

    let after_restart = gateway(&server, fast());
    let done = conv.send(&after_restart, &turn, model).await;
    assert!(done.recovered, "resumed from the write-ahead");
    let last = done
        .outcome
        .state
        .last_transaction
        .expect("terminal snapshot");
    assert_eq!(last.status, TransactionStatus::Completed);
    assert_eq!(last.evidence.len(), 1);
    assert_eq!(last.evidence[0].outcome, AttemptOutcome::Ok);
    assert!(last.evidence[0].summary.contains("71.99"));

    let calls = executes(&server);
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].idempotency_key, calls[1].idempotency_key);
    assert_eq!(
        calls[1].idempotency_key.as_deref(),
        Some(last.execution_key().as_str())
    );
    assert!(!calls[0].replayed && calls[1].replayed);
    assert_eq!(server.executions().len(), 1, "not executed again");
}

// EV-3, EV-4: an attempt that times out is retried with the same key; the tool had done the work,
// so the retry gets the stored result.
#[tokio::test]
async fn timeout_is_retried_with_the_same_key() {
    let server = ToolServer::start().await.unwrap();
    server.delay_next("retail_order_cancel", 1, Duration::from_secs(3));
    let tools = gateway(
        &server,
        ToolHttpSettings {
            timeout_ms: 300,
            ..fast()
        },
    );
    let result = tools
        .execute(&request("retail_order_cancel"), ctx("u1"))
        .await;
    assert_eq!(result.outcome, AttemptOutcome::Ok);
    assert_eq!(result.attempts.len(), 2);
    let first = &result.attempts[0];
    assert_eq!(first.outcome, AttemptOutcome::RetryableFailure);
    assert_eq!(first.status_code, None);
    assert!(first.summary.contains("timed out"), "{}", first.summary);
    assert!(first.ended_at_ms - first.started_at_ms >= 250);
    assert_eq!(result.attempts[1].status_code, Some(200));
    let calls = executes(&server);
    assert_eq!(calls.len(), 2);
    assert!(calls
        .iter()
        .all(|c| c.idempotency_key.as_deref() == Some("tx-1:execute")));
    assert!(calls[1].replayed);
    assert_eq!(server.executions().len(), 1);
}

// EV-3: a connection closed with no answer is retried; nothing ran on the closed attempt.
#[tokio::test]
async fn closed_connection_is_retried() {
    let server = ToolServer::start().await.unwrap();
    server.close_next("retail_order_cancel", 1);
    let tools = gateway(&server, fast());
    let result = tools
        .execute(&request("retail_order_cancel"), ctx("u1"))
        .await;
    assert_eq!(result.outcome, AttemptOutcome::Ok, "{result:?}");
    assert_eq!(result.attempts.len(), 2);
    assert_eq!(result.attempts[0].outcome, AttemptOutcome::RetryableFailure);
    assert_eq!(result.attempts[0].status_code, None);
    let calls = executes(&server);
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].status, None);
    assert_eq!(server.executions().len(), 1);
    server.shutdown().await;
}

// 408 and 429 mean "not processed, come back": retried like 5xx.
#[tokio::test]
async fn rate_limit_and_server_errors_are_retried() {
    let server = ToolServer::start().await.unwrap();
    server.fail_next("retail_order_cancel", 1, 429);
    server.fail_next("retail_order_cancel", 1, 500);
    let tools = gateway(&server, fast());
    let result = tools
        .execute(&request("retail_order_cancel"), ctx("u1"))
        .await;
    assert_eq!(result.outcome, AttemptOutcome::Ok);
    let codes: Vec<_> = result.attempts.iter().map(|a| a.status_code).collect();
    assert_eq!(codes, [Some(429), Some(500), Some(200)]);
    server.shutdown().await;
}

// EV-3: summaries (and the error shown to the user) are bounded however large the response.
#[tokio::test]
async fn response_summary_is_bounded() {
    let server = ToolServer::start().await.unwrap();
    let huge = "x".repeat(EVIDENCE_SUMMARY_MAX_CHARS * 20);
    server.respond_next("retail_order_cancel", 1, 200, huge.clone());
    server.respond_next(
        "billing_show_bill",
        1,
        400,
        json!({"error": huge}).to_string(),
    );
    let tools = gateway(&server, fast());

    let ok = tools
        .execute(&request("retail_order_cancel"), ctx("u1"))
        .await;
    assert_eq!(ok.outcome, AttemptOutcome::Ok);
    let summary = &ok.attempts[0].summary;
    assert_eq!(summary.chars().count(), EVIDENCE_SUMMARY_MAX_CHARS);
    assert!(summary.ends_with('…'));
    let data = ok.data.as_str().expect("a non-JSON body becomes text data");
    assert!(data.chars().count() <= EVIDENCE_SUMMARY_MAX_CHARS);

    let failed = tools
        .execute(&request("billing_show_bill"), ctx("u1"))
        .await;
    assert_eq!(failed.outcome, AttemptOutcome::Failure);
    assert!(failed.attempts[0].summary.chars().count() <= EVIDENCE_SUMMARY_MAX_CHARS);
    let error = failed.error.expect("error set");
    assert!(error.starts_with("HTTP 400: xxx"), "{}", &error[..20]);
    assert!(error.chars().count() <= EVIDENCE_SUMMARY_MAX_CHARS);
    server.shutdown().await;
}

// EV-4: the wire format — action, tool, arguments, identity, transaction id in the body; the
// idempotency key, turn id and JSON content type in headers; the tool's data comes back.
#[tokio::test]
async fn requests_carry_the_protocol_fields() {
    let server = ToolServer::start().await.unwrap();
    server.set_turn_script(
        "turn-7",
        &tools_script(json!({"retail_order_cancel": {"ok": true, "data": {"refund": "R$ 10.00"}}})),
    );
    let tools = gateway(&server, fast());
    let result = tools
        .execute(&request("retail_order_cancel"), ctx("turn-7"))
        .await;
    assert_eq!(result.data, json!({"refund": "R$ 10.00"}));
    assert_eq!(result.error, None);

    let call = &server.calls()[0];
    assert_eq!(call.path, "/tools/retail_order_cancel");
    assert_eq!(call.headers["idempotency-key"], "tx-1:execute");
    assert_eq!(call.headers["x-turnstile-turn-id"], "turn-7");
    assert_eq!(call.headers["content-type"], "application/json");
    assert_eq!(
        call.body,
        json!({
            "action": "execute",
            "tool": "retail_order_cancel",
            "arguments": {"order_id": "PED-1001"},
            "identity": {"tenant_id": "t1", "agent_id": "retail-bot", "session_id": "s-http"},
            "transaction_id": "tx-1",
        })
    );
    let execution = &server.executions()[0];
    assert_eq!(execution.arguments, json!({"order_id": "PED-1001"}));
    server.shutdown().await;
}

// EV-2: an unscripted pre-validation is eligible; its answer is passed through.
#[tokio::test]
async fn unscripted_pre_validation_is_eligible() {
    let server = ToolServer::start().await.unwrap();
    let tools = gateway(&server, fast());
    let mut req = request("retail_order_cancel");
    req.idempotency_key = "tx-1:pre_validation:1".into();
    let result = tools.pre_validate(&req, ctx("u1")).await;
    assert!(result.eligible, "{result:?}");
    assert!(result.at_ms > 0);
    assert_eq!(
        server.calls()[0].headers["idempotency-key"],
        "tx-1:pre_validation:1"
    );
    server.shutdown().await;
}

// EV-2, EV-3: nothing listening — execution exhausts its attempts (RetryableFailure), and
// pre-validation fails closed.
#[tokio::test]
async fn unreachable_tool_exhausts_attempts_and_fails_closed() {
    let port = {
        let probe = StdTcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().port()
    };
    let settings = ToolHttpSettings {
        max_attempts: 2,
        ..fast()
    };
    let tools = HttpToolGateway::new(
        catalog(),
        Some(format!("http://127.0.0.1:{port}")),
        settings,
    )
    .unwrap();
    let result = tools
        .execute(&request("retail_order_cancel"), ctx("u1"))
        .await;
    assert_eq!(result.outcome, AttemptOutcome::RetryableFailure);
    assert_eq!(result.attempts.len(), 2);
    let error = result.error.unwrap_or_default();
    assert!(error.starts_with("connection failed"), "{error}");
    assert!(!error.contains("127.0.0.1"), "no URL in the error: {error}");

    let pre = tools
        .pre_validate(&request("retail_order_cancel"), ctx("u1"))
        .await;
    assert!(!pre.eligible);
    assert!(pre
        .reason
        .unwrap_or_default()
        .starts_with(PRE_VALIDATION_UNAVAILABLE));
}

// Configuration problems surface when the gateway is built, each saying what to change; with no
// base URL, relative endpoints join the documented default.
#[tokio::test]
async fn gateway_construction_names_configuration_problems() {
    assert!(HttpToolGateway::new(catalog(), None, fast()).is_ok());

    let bad_base = HttpToolGateway::new(catalog(), Some("ftp://x".into()), fast()).unwrap_err();
    assert!(
        matches!(bad_base, ToolConfigError::BaseUrl { .. }),
        "{bad_base}"
    );
    assert!(bad_base.to_string().contains(TOOLS_BASE_URL_ENV));
    let path_base = HttpToolGateway::new(catalog(), Some("/api".into()), fast()).unwrap_err();
    assert!(matches!(path_base, ToolConfigError::BaseUrl { .. }));

    let no_endpoint = parse_catalog(
        r#"
assistants:
  shop-bot:
    tenants: [{tenant: "*", tools: "*"}]
    agents: {retail: {description: orders}}
    tools:
      order_status: {agent: retail}
"#,
        "agents.yaml",
    )
    .unwrap();
    let err = HttpToolGateway::new(Arc::new(no_endpoint), Some("http://h".into()), fast())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("order_status") && err.contains("endpoint"),
        "{err}"
    );
}
