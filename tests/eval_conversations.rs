//! `turnstile eval conversations` through the binary: data it cannot play exits 64 naming file,
//! line and field; a real run plays a short set with the embeddings model (the local server
//! `scripts/services.sh` starts, EMBEDDINGS_BASE_URL, default http://127.0.0.1:8000/v1) and the
//! example tool service this test starts on a free port, and its figures are asserted; with the
//! tools on a closed port the run still exits 0 and the tool turns are judged as the failed
//! transactions the customer would get.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn upstream() -> String {
    std::env::var("EMBEDDINGS_BASE_URL").unwrap_or_else(|_| "http://127.0.0.1:8000/v1".into())
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("eval-conversations-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// `turnstile eval conversations --config config/agents.example.yaml ARGS…`, the embeddings
/// profiles at the test's server, fitted examples cached across runs of this test file.
fn eval(args: &[&str], data: &[&Path]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_turnstile"))
        .current_dir(ROOT)
        .args([
            "eval",
            "conversations",
            "--config",
            "config/agents.example.yaml",
        ])
        .args(["--embeddings-base-url", &upstream()])
        .arg("--embeddings-cache-dir")
        .arg(Path::new(env!("CARGO_TARGET_TMPDIR")).join("eval-conversations-embeddings"))
        .args(args)
        .args(data)
        .env_remove("TURNSTILE_TOOLS_BASE_URL")
        .env_remove("TURNSTILE_MODEL_BASE_URL")
        .output()
        .expect("run turnstile")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn data_it_cannot_play_exits_64_naming_file_line_and_field() {
    let dir = scratch("bad");
    let good = r#"{"id": "c1", "locale": "en", "turns": [{"text": "hi", "expect": {"outcome": "answered_other"}}]}"#;
    let cases = [
        (
            r#"{"id": "c2", "turns": [{"text": "x", "expect": {"outcome": "executed", "args": 5}}]}"#,
            "dev.jsonl line 2: turns[0].expect.args: not a JSON object",
        ),
        (
            r#"{"id": "c2", "turns": [{"text": "x", "expect": {"outcome": "end"}}, {"text": "y", "expect": {"outcome": "exec"}}]}"#,
            "dev.jsonl line 2: turns[1].expect.outcome: unknown outcome class \"exec\" (expected one of handoff, end, executed, cancelled, asks_confirmation, asks_parameter, out_of_scope_or_clarify, answered_other)",
        ),
        (
            r#"{"id": "c2", "turns": [{"text": "x", "expect": {"outcome": "executed", "tool": "weather"}}]}"#,
            "dev.jsonl line 2: turns[0].expect.tool: unknown tool \"weather\"",
        ),
        (
            r#"{"id": "c2", "turns": [{"text": "x", "expect": {"outcome": "asks_parameter", "tool": "retail_order_cancel", "param": "zip_code"}}]}"#,
            "dev.jsonl line 2: turns[0].expect.param: unknown parameter \"zip_code\" of tool \"retail_order_cancel\"",
        ),
        (r#"{"id": "c2", "turns": ["#, "dev.jsonl line 2: not valid JSON"),
    ];
    for (line, expected) in cases {
        let data = dir.join("dev.jsonl");
        std::fs::write(&data, format!("{good}\n{line}\n")).expect("write");
        let out = Command::new(env!("CARGO_BIN_EXE_turnstile"))
            .current_dir(&dir)
            .args(["eval", "conversations", "--config"])
            .arg(Path::new(ROOT).join("config/agents.example.yaml"))
            .arg("--profiles")
            .arg(Path::new(ROOT).join("config/profiles.embeddings.yaml"))
            .arg("dev.jsonl")
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(64), "{line}: {}", stderr(&out));
        assert!(stderr(&out).contains(expected), "{line}\n{}", stderr(&out));
        assert!(out.stdout.is_empty(), "no report for data it cannot play");
    }
    let empty = dir.join("empty.jsonl");
    std::fs::write(&empty, "\n\n").expect("write");
    let out = eval(&[], &[&empty]);
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("empty.jsonl: the file holds no conversation"),
        "{}",
        stderr(&out)
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// The example tool service as a child on a free port; dropping it kills the child.
struct ToolService {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl ToolService {
    fn start() -> ToolService {
        let port = free_port();
        let log = Path::new(env!("CARGO_TARGET_TMPDIR")).join("eval-conversations-tools.log");
        let child = Command::new("python3")
            .arg(Path::new(ROOT).join("examples/tool_service/tool_service.py"))
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&log).expect("log file"))
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start python3 examples/tool_service/tool_service.py: {e} (install Python 3)"));
        let mut service = ToolService { child, port, log };
        service.wait_ready();
        service
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.get("/health").contains("ok") {
            if let Some(status) = self.child.try_wait().expect("child status") {
                panic!(
                    "the tool service exited ({status}); its log:\n{}",
                    self.log_text()
                );
            }
            assert!(
                Instant::now() < deadline,
                "the tool service was not ready after 20 s:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A plain HTTP/1.0 GET; the body, or "" when the service does not answer.
    fn get(&self, path: &str) -> String {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return String::new();
        };
        let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
        let mut response = String::new();
        if stream.write_all(request.as_bytes()).is_err()
            || stream.read_to_string(&mut response).is_err()
        {
            return String::new();
        }
        response
            .split_once("\r\n\r\n")
            .map(|(_, body)| body.to_owned())
            .unwrap_or_default()
    }

    fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for ToolService {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

/// Three conversations: a look-up (its first turn's main expectation deliberately debatable, the
/// right one an `accept` alternative), a handoff in pt-BR, an order cancellation to its end.
const SET: &str = r#"{"id": "lookup", "locale": "en", "turns": [{"text": "where is my order?", "expect": {"outcome": "out_of_scope_or_clarify"}, "accept": [{"outcome": "asks_parameter", "tool": "retail_order_tracking", "param": "order_id", "reply_contains": ["order number"]}]}, {"text": "PED-1001", "expect": {"outcome": "executed", "tool": "retail_order_tracking", "args": {"order_id": "PED-1001"}, "reply_contains": ["PED-1001"]}}]}
{"id": "handoff", "locale": "pt-BR", "turns": [{"text": "quero falar com um atendente", "expect": {"outcome": "handoff"}}]}
{"id": "cancel", "locale": "en", "turns": [{"text": "I want to cancel my order", "expect": {"outcome": "asks_parameter", "tool": "retail_order_cancel", "param": "order_id"}}, {"text": "PED-1001", "expect": {"outcome": "asks_confirmation", "tool": "retail_order_cancel", "args": {"order_id": "PED-1001"}}}, {"text": "yes", "expect": {"outcome": "executed", "tool": "retail_order_cancel", "args": {"order_id": "PED-1001"}}}]}
"#;

fn report(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("one JSON object on stdout ({e}); stderr:\n{}", stderr(out)))
}

fn model_available(out: &Output) {
    assert_ne!(
        out.status.code(),
        Some(69),
        "{}\n(the embeddings server must run: `bash scripts/services.sh up`)",
        stderr(out)
    );
}

#[test]
fn plays_a_set_with_the_real_model_and_tools_and_survives_a_tool_service_that_is_down() {
    let dir = scratch("run");
    let data = dir.join("set.jsonl");
    std::fs::write(&data, SET).expect("write");
    let tools = ToolService::start();
    let base = tools.base_url();
    let floors = ["--min-turn-accuracy", "0.99", "--max-unsafe", "0"];
    let out = eval(
        &[&["--json", "--tools-base-url", &base][..], &floors].concat(),
        &[&data],
    );
    model_available(&out);
    let r = report(&out);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a floor was not met: {}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains(
            "floor not met: turn accuracy (strict) 0.8333 is below --min-turn-accuracy 0.99"
        ),
        "{}",
        stderr(&out)
    );
    assert!(
        !stderr(&out).contains("--max-unsafe"),
        "no unsafe turn: {r}"
    );
    assert_eq!(
        (
            r["part"].as_str(),
            r["conversations"].as_u64(),
            r["turns"].as_u64()
        ),
        (Some("all"), Some(3), Some(6)),
        "{r}"
    );
    assert_eq!(r["turn_accuracy"]["strict_count"], 5, "{r}");
    assert_eq!(r["turn_accuracy"]["lenient"], 1.0, "{r}");
    assert_eq!(
        r["conversation_success"]["strict"]
            .as_f64()
            .map(|x| (x * 3.0).round()),
        Some(2.0),
        "{r}"
    );
    assert_eq!(r["conversation_success"]["lenient"], 1.0, "{r}");
    let ci = &r["turn_accuracy"]["ci95"];
    assert!(
        ci[0].as_f64() < Some(0.8333) && ci[1].as_f64() > Some(0.8333),
        "{ci}"
    );
    assert_eq!(r["by_locale"]["pt-BR"]["turns"], 1, "{r}");
    assert_eq!(
        r["by_locale"]["en"]["conversation_success"]["lenient"], 1.0,
        "{r}"
    );
    assert_eq!(
        (
            r["by_outcome"]["executed"]["expected"].as_u64(),
            r["by_outcome"]["executed"]["actual"].as_u64()
        ),
        (Some(2), Some(2)),
        "{r}"
    );
    assert_eq!(r["by_outcome"]["handoff"]["recall"], 1.0, "{r}");
    assert_eq!(
        r["by_outcome"]["out_of_scope_or_clarify"]["recall"], 0.0,
        "{r}"
    );
    assert_eq!(r["unsafe"].as_array().map(Vec::len), Some(0), "{r}");
    let failures = r["failures"].as_array().expect("failures");
    assert_eq!(failures.len(), 1, "{r}");
    assert_eq!(
        (failures[0]["id"].as_str(), failures[0]["turn"].as_u64()),
        (Some("lookup"), Some(1))
    );
    assert_eq!(failures[0]["actual"]["outcome"], "asks_parameter");
    assert_eq!(failures[0]["lenient_ok"], true);
    assert!(r["latency_ms"]["mean"].as_f64() > Some(0.0), "{r}");
    assert!(r["model_calls"]["router"].as_u64() > Some(0), "{r}");
    // The tool service really ran the cancellation (and the look-up), once each.
    let executions = tools.get("/executions");
    assert!(
        executions.contains("retail_order_cancel") && executions.contains("retail_order_tracking"),
        "{executions}"
    );

    // The same set with the tools on a closed port: the run goes on, the tool turns fail as the
    // worker's would (the look-up's execution and the cancellation's pre-validation).
    let closed = format!("http://127.0.0.1:{}", free_port());
    let out = eval(&["--json", "--tools-base-url", &closed], &[&data]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let r = report(&out);
    assert_eq!(r["turns"], 6, "{r}");
    let failed: Vec<(String, u64, String)> = r["failures"]
        .as_array()
        .expect("failures")
        .iter()
        .map(|f| {
            let id = f["id"].as_str().unwrap_or_default().to_owned();
            (
                id,
                f["turn"].as_u64().unwrap_or(0),
                f["actual"]["outcome"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect();
    let answered =
        |id: &str, turn: u64| failed.contains(&(id.to_owned(), turn, "answered_other".to_owned()));
    assert!(answered("lookup", 2) && answered("cancel", 2), "{failed:?}");
    let lookup = r["failures"]
        .as_array()
        .and_then(|f| f.iter().find(|f| f["id"] == "lookup" && f["turn"] == 2))
        .expect("lookup turn 2");
    assert_eq!(
        lookup["actual"]["tool"], "retail_order_tracking",
        "{lookup}"
    );
    assert!(
        lookup["reply"]
            .as_str()
            .is_some_and(|t| t.contains("could not complete the order tracking")),
        "{lookup}"
    );
    // Why it went that way: each answer the turn consumed. The id was read with no model call,
    // and the tool's retries ran out on the closed port.
    let decided: Vec<&str> = lookup["decisions"]
        .as_array()
        .map(|d| d.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert_eq!(decided, ["tool retryable_failure"], "{lookup}");
    assert_eq!(r["by_outcome"]["executed"]["actual"], 0, "{r}");
    assert_eq!(
        r["by_outcome"]["handoff"]["recall"], 1.0,
        "the model turns still decide: {r}"
    );

    // The text form: the figures, then the failed conversations' transcripts.
    let out = eval(&["--tools-base-url", &closed], &[&data]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("3 conversations, 6 turns (part: all)\n"),
        "{text}"
    );
    assert!(
        text.contains("FAILED cancel") && text.contains("✗ 2. PED-1001 → "),
        "{text}"
    );
    assert!(
        text.contains("events: transaction.failed; judged answered_other retail_order_cancel"),
        "{text}"
    );
    assert!(
        text.contains("     decided: ") && text.contains("tool retryable_failure\n"),
        "{text}"
    );
    drop(tools);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn the_test_part_keeps_about_a_third_by_id() {
    // en05, en06 and pt01 are in the test part (FNV-1a 64 of the id mod 3 == 0); en01 is not.
    let dir = scratch("part");
    let data = dir.join("set.jsonl");
    let line = |id: &str| {
        format!(
            r#"{{"id": "{id}", "turns": [{{"text": "hi", "expect": {{"outcome": "answered_other"}}}}]}}"#
        )
    };
    std::fs::write(&data, [line("en01"), line("en05")].join("\n")).expect("write");
    let closed = format!("http://127.0.0.1:{}", free_port());
    let out = eval(
        &["--json", "--part", "test", "--tools-base-url", &closed],
        &[&data],
    );
    model_available(&out);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let r = report(&out);
    assert_eq!(
        (r["part"].as_str(), r["conversations"].as_u64()),
        (Some("test"), Some(1)),
        "{r}"
    );
    std::fs::write(&data, line("en01")).expect("write");
    let out = eval(&["--part", "test"], &[&data]);
    assert_eq!(out.status.code(), Some(64), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the test part holds none of the 1 conversations read"),
        "{}",
        stderr(&out)
    );
    let _ = std::fs::remove_dir_all(dir);
}
