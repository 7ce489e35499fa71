//! The example tool service (`examples/tool_service/tool_service.py`) against the real
//! `HttpToolGateway`: the quick start's tool webhooks speak the worker's contract. Each test starts
//! the service as a `python3` child on a free port and kills it at the end, also on panic.

use std::collections::BTreeMap;
use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use turnstile::config::agents::load_catalog;
use turnstile::domain::effect::ToolRequest;
use turnstile::domain::transaction::AttemptOutcome;
use turnstile::domain::turn::Identity;
use turnstile::ports::{CallContext, ToolGateway};
use turnstile::tool::{HttpToolGateway, ToolHttpSettings};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The running service; dropping it kills the child, so a failed assertion leaves no process.
struct ToolService {
    child: Child,
    base_url: String,
    log: PathBuf,
}

impl ToolService {
    fn start(name: &str) -> ToolService {
        // A port the OS just handed out; free again once the probe listener is dropped.
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free loopback port")
            .port();
        let log =
            Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("example_tool_service-{name}.log"));
        let stderr = File::create(&log).expect("log file for the tool service");
        let child = Command::new("python3")
            .arg(Path::new(ROOT).join("examples/tool_service/tool_service.py"))
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start python3 examples/tool_service/tool_service.py: {e} (install Python 3: apt-get install -y python3)")
            });
        ToolService {
            child,
            base_url: format!("http://127.0.0.1:{port}"),
            log,
        }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Until GET /health answers ok; fails at once if the child exits.
    async fn wait_ready(&mut self) {
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().expect("child status") {
                panic!(
                    "the tool service exited ({status}) before it was ready; its log:\n{}",
                    self.log_text()
                );
            }
            let health = client
                .get(format!("{}/health", self.base_url))
                .timeout(Duration::from_secs(2))
                .send()
                .await;
            if let Ok(response) = health {
                if response.status().is_success()
                    && response.text().await.unwrap_or_default().contains("ok")
                {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "the tool service at {} was not ready after 20 s; its log:\n{}",
                self.base_url,
                self.log_text()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// GET /executions: per idempotency key, how often the tool really ran and was replayed.
    async fn executions(&self) -> Value {
        let text = reqwest::get(format!("{}/executions", self.base_url))
            .await
            .expect("GET /executions")
            .text()
            .await
            .expect("body");
        let body: Value = serde_json::from_str(&text).expect("JSON from /executions");
        body["executions"].clone()
    }
}

impl Drop for ToolService {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn started(name: &str) -> (ToolService, HttpToolGateway) {
    let mut service = ToolService::start(name);
    service.wait_ready().await;
    let catalog = Arc::new(
        load_catalog(&Path::new(ROOT).join("config/agents.example.yaml")).expect("example config"),
    );
    // No retries: every call here must succeed (or be refused) on its first attempt.
    let settings = ToolHttpSettings {
        timeout_ms: 5_000,
        max_attempts: 1,
        ..ToolHttpSettings::default()
    };
    let gateway =
        HttpToolGateway::new(catalog, Some(service.base_url.clone()), settings).expect("gateway");
    (service, gateway)
}

fn request(tool: &str, key: &str, arguments: Value) -> ToolRequest {
    let arguments: BTreeMap<String, Value> =
        serde_json::from_value(arguments).expect("arguments object");
    ToolRequest {
        identity: Identity::new("t1", "retail-bot", "s-example"),
        transaction_id: format!("tx-{key}"),
        tool: tool.into(),
        arguments,
        idempotency_key: key.into(),
    }
}

fn ctx(turn_id: &str) -> CallContext<'_> {
    CallContext {
        turn_id,
        turn_at_ms: 1_000,
        speculative: false,
    }
}

#[tokio::test]
async fn pre_validation_accepts_an_open_order_and_refuses_a_shipped_one() {
    let (service, gateway) = started("pre-validation").await;
    let open = gateway
        .pre_validate(
            &request(
                "retail_order_cancel",
                "pv-1",
                json!({"order_id": "PED-1001"}),
            ),
            ctx("u1"),
        )
        .await;
    assert!(
        open.eligible,
        "PED-1001 should be eligible: {open:?}\n{}",
        service.log_text()
    );
    assert_eq!(open.data["status"], "processing");

    let shipped = gateway
        .pre_validate(
            &request(
                "retail_order_cancel",
                "pv-2",
                json!({"order_id": "PED-9999"}),
            ),
            ctx("u2"),
        )
        .await;
    assert!(
        !shipped.eligible,
        "PED-9999 should not be eligible: {shipped:?}"
    );
    assert_eq!(
        shipped.reason.as_deref(),
        Some("order PED-9999 has already shipped")
    );
    // RP-2: the code the tool's `reasons` texts are keyed by.
    assert_eq!(shipped.code.as_deref(), Some("already_shipped"));
    assert_eq!(shipped.data["status"], "shipped");
}

#[tokio::test]
async fn every_example_tool_executes_and_its_result_is_in_the_evidence() {
    let (service, gateway) = started("execute").await;
    let calls = [
        (
            "retail_order_cancel",
            json!({"order_id": "PED-1001"}),
            "cancellation_id",
        ),
        (
            "retail_order_tracking",
            json!({"order_id": "PED-1002"}),
            "status",
        ),
        (
            "retail_address_change",
            json!({"order_id": "PED-1003", "zip_code": "01310-100", "house_number": 45}),
            "address",
        ),
        (
            "billing_contestation",
            json!({"subject": "gym charge", "amount": "71.99"}),
            "contestation_id",
        ),
        ("billing_show_bill", json!({}), "due_date"),
    ];
    for (i, (tool, arguments, field)) in calls.into_iter().enumerate() {
        let key = format!("exec-{i}");
        let result = gateway
            .execute(&request(tool, &key, arguments), ctx("u1"))
            .await;
        assert_eq!(
            result.outcome,
            AttemptOutcome::Ok,
            "{tool}: {result:?}\ntool service log:\n{}",
            service.log_text()
        );
        assert!(
            result.data.get(field).is_some(),
            "{tool}: no `{field}` in {}",
            result.data
        );
        let [attempt] = result.attempts.as_slice() else {
            panic!("{tool}: expected one attempt, got {:?}", result.attempts);
        };
        assert_eq!(attempt.status_code, Some(200), "{tool}");
        assert_eq!(attempt.idempotency_key, key);
        // The evidence summary is the response body: the same JSON as the result.
        let recorded: Value =
            serde_json::from_str(&attempt.summary).expect("summary is the JSON body");
        assert_eq!(recorded, result.data, "{tool}");
    }
    let executions = service.executions().await;
    assert_eq!(
        executions.as_object().map(|o| o.len()),
        Some(5),
        "{executions}"
    );
}

#[tokio::test]
async fn the_same_idempotency_key_executes_once() {
    let (service, gateway) = started("idempotency").await;
    let cancel = request(
        "retail_order_cancel",
        "tx-9:execute",
        json!({"order_id": "PED-2001"}),
    );
    let first = gateway.execute(&cancel, ctx("u1")).await;
    // A redelivered turn repeats the call with the same key: the stored answer comes back.
    let second = gateway.execute(&cancel, ctx("u1-redelivered")).await;
    assert_eq!(first.outcome, AttemptOutcome::Ok, "{first:?}");
    assert_eq!(second.outcome, AttemptOutcome::Ok, "{second:?}");
    assert_eq!(
        first.data, second.data,
        "the same key returns the same response"
    );

    let executions = service.executions().await;
    assert_eq!(executions["tx-9:execute"]["executions"], 1, "{executions}");
    assert_eq!(executions["tx-9:execute"]["replays"], 1, "{executions}");

    // A new key is a new call: the order is already cancelled, a decided failure (not retried).
    let again = gateway
        .execute(
            &request(
                "retail_order_cancel",
                "tx-10:execute",
                json!({"order_id": "PED-2001"}),
            ),
            ctx("u2"),
        )
        .await;
    assert_eq!(again.outcome, AttemptOutcome::Failure, "{again:?}");
    assert_eq!(again.attempts[0].status_code, Some(409));
    assert!(
        again
            .error
            .as_deref()
            .unwrap_or("")
            .contains("already cancelled"),
        "{again:?}"
    );
    // RP-2: a decided failure's body is the result data, with its code.
    assert_eq!(again.data["code"], "already_cancelled", "{again:?}");
}

#[tokio::test]
async fn a_shipped_order_fails_at_execution_too() {
    // Pre-validation may be skipped or stale: the execution checks again and refuses for good.
    let (_service, gateway) = started("shipped").await;
    let result = gateway
        .execute(
            &request(
                "retail_order_cancel",
                "tx-11:execute",
                json!({"order_id": "PED-9999"}),
            ),
            ctx("u1"),
        )
        .await;
    assert_eq!(result.outcome, AttemptOutcome::Failure, "{result:?}");
    assert_eq!(result.attempts[0].status_code, Some(409));
    assert!(
        result
            .error
            .as_deref()
            .unwrap_or("")
            .contains("already shipped"),
        "{result:?}"
    );
    assert_eq!(result.data["code"], "already_shipped", "{result:?}");
}

#[tokio::test]
async fn unknown_paths_and_malformed_json_get_json_errors() {
    let (service, _gateway) = started("errors").await;
    let client = reqwest::Client::new();
    let post = |path: &str, body: &str| {
        client
            .post(format!("{}{path}", service.base_url))
            .header("Content-Type", "application/json")
            .header("Idempotency-Key", "k-errors")
            .body(body.to_owned())
            .send()
    };
    for (path, body, status) in [
        ("/tools/no_such_tool", "{}", 404),
        ("/elsewhere", "{}", 404),
        ("/tools/billing_show_bill", "{not json", 400),
    ] {
        let response = post(path, body).await.expect("a response");
        assert_eq!(response.status().as_u16(), status, "POST {path}");
        let answer: Value =
            serde_json::from_str(&response.text().await.unwrap()).expect("JSON error body");
        assert!(
            answer["error"].as_str().is_some_and(|e| !e.is_empty()),
            "POST {path}: {answer}"
        );
    }
}
