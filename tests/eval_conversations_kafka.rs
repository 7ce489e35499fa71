//! `turnstile eval conversations --through-kafka` against a real worker: the worker runs in this
//! process (`worker::run` on a thread of its own, as tests/worker_kafka.rs starts one) with the
//! embeddings profiles, the example tool service and the checkpoint store, on topics and a
//! keyspace of this test's own; the binary plays a small set through it and, against a second
//! fresh tool service, in process, and the two reports must judge every turn alike. A stopped
//! worker fails its turns with "no reply within N s"; an unreachable broker or store exits 69.
//!
//! Needs Kafka at 127.0.0.1:9092, Cassandra at 127.0.0.1:9042 and the embeddings server at
//! 127.0.0.1:8000 (`bash scripts/services.sh up`; `KAFKA_BROKERS` / `CQL_CONTACT` /
//! `EMBEDDINGS_BASE_URL` override). An unreachable service FAILS these tests with that hint; they
//! never skip.

use std::fs::File;
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use tokio::sync::oneshot;

use turnstile::cli::model_args::{ModelArgs, ModelConcurrency};
use turnstile::config::agents::load_agents_file;
use turnstile::config::profiles::load_profiles;
use turnstile::domain::catalog::Settings;
use turnstile::message::Topics;
use turnstile::store::cql::{CqlConfig, ScyllaCheckpointStore};
use turnstile::tool::HttpToolGateway;
use turnstile::worker::{self, Health, Services, WorkerConfig};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const HINT: &str = "run bash scripts/services.sh up";

fn brokers() -> String {
    std::env::var("KAFKA_BROKERS").unwrap_or_else(|_| "127.0.0.1:9092".into())
}

fn cql_contact() -> String {
    std::env::var("CQL_CONTACT").unwrap_or_else(|_| "127.0.0.1:9042".into())
}

fn embeddings() -> String {
    std::env::var("EMBEDDINGS_BASE_URL").unwrap_or_else(|_| "http://127.0.0.1:8000/v1".into())
}

fn require_services() {
    let embeddings_address = embeddings()
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap_or_default()
        .to_owned();
    for (what, address) in [
        ("Kafka", brokers()),
        ("Cassandra", cql_contact()),
        ("the embeddings server", embeddings_address),
    ] {
        let reachable = address
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .is_some_and(|a| TcpStream::connect_timeout(&a, Duration::from_secs(3)).is_ok());
        assert!(reachable, "{what} at {address} is unreachable; {HINT}");
    }
}

/// Unique per process and call: topics, group, keyspace and instance names.
fn unique(prefix: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{prefix}_{}_{:x}",
        std::process::id(),
        nanos % 0xffff_ffff_ffff
    )
}

fn topics(tag: &str) -> Topics {
    Topics {
        inbound: format!("{tag}.turns"),
        replies: format!("{tag}.replies"),
        events: format!("{tag}.events"),
        dead_letters: format!("{tag}.dead-letters"),
    }
}

fn cql(keyspace: &str) -> CqlConfig {
    CqlConfig {
        contact_points: vec![cql_contact()],
        keyspace: keyspace.to_owned(),
        ..CqlConfig::default()
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free loopback port")
        .port()
}

/// The example tool service as a child on a free port; dropping it kills the child.
struct ToolService {
    child: Child,
    port: u16,
}

impl ToolService {
    fn start() -> ToolService {
        let port = free_port();
        let log =
            Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("eval-kafka-tools-{port}.log"));
        let child = Command::new("python3")
            .arg(Path::new(ROOT).join("examples/tool_service/tool_service.py"))
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&log).expect("log file"))
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start the example tool service: {e} (install Python 3)")
            });
        let service = ToolService { child, port };
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "the tool service did not listen within 20 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        service
    }

    fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for ToolService {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A worker on a thread with its own runtime; dropping it stops it and waits for its drain.
struct InProcessWorker {
    stop: Option<oneshot::Sender<()>>,
    done: mpsc::Receiver<Result<(), String>>,
}

impl Drop for InProcessWorker {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = self.done.recv_timeout(Duration::from_secs(60));
    }
}

/// `turnstile run` in process: the example configuration, the embeddings profiles, `tools`.
fn start_worker(topics: &Topics, keyspace: &str, tools: &str) -> InProcessWorker {
    let config = WorkerConfig {
        brokers: brokers(),
        group_id: unique("eval-kafka-group"),
        instance_id: unique("eval-kafka"),
        topics: topics.clone(),
        session_timeout: Duration::from_secs(6),
        drain_budget: Duration::from_secs(3),
        ..WorkerConfig::default()
    };
    let (cql, tools) = (cql(keyspace), tools.to_owned());
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
    let (done_tx, done_rx) = mpsc::channel::<Result<(), String>>();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("worker runtime");
        let result = rt.block_on(async move {
            let services = match services(&cql, &tools).await {
                Ok(s) => s,
                Err(e) => {
                    let _ = ready_tx.send(Err(e));
                    return Ok(());
                }
            };
            let _ = ready_tx.send(Ok(()));
            let shutdown = async move {
                let _ = stop_rx.await;
            };
            let health = Arc::new(Health::default());
            worker::run(config, services, health, shutdown)
                .await
                .map_err(|e| e.to_string())
        });
        let _ = done_tx.send(result);
    });
    match ready_rx.recv_timeout(Duration::from_secs(300)) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => panic!("the worker did not start: {e}"),
        Err(e) => panic!("the worker did not start within 300 s: {e}"),
    }
    InProcessWorker {
        stop: Some(stop_tx),
        done: done_rx,
    }
}

type WorkerServices =
    Services<turnstile::model::configured::ConfiguredModel, HttpToolGateway, ScyllaCheckpointStore>;

/// What `turnstile run` builds from scripts/run.sh's environment.
async fn services(cql: &CqlConfig, tools: &str) -> Result<WorkerServices, String> {
    let file = load_agents_file(&Path::new(ROOT).join("config/agents.example.yaml"))
        .map_err(|e| e.to_string())?;
    let catalog = Arc::new(file.catalog);
    let settings = Arc::new(Settings::default());
    let profiles = load_profiles(&Path::new(ROOT).join("config/profiles.embeddings.yaml"))
        .map_err(|e| e.to_string())?;
    let model_args = ModelArgs {
        model_base_url: None,
        embeddings_base_url: Some(embeddings()),
        embeddings_cache_dir: Some(cache_dir()),
    };
    let model = model_args
        .build_model(
            &catalog,
            &settings,
            Arc::new(profiles),
            &|_: &str| None,
            ModelConcurrency::default(),
        )
        .await
        .map_err(|e| format!("the decision model: {e} ({HINT})"))?;
    let tools = HttpToolGateway::new(catalog.clone(), Some(tools.to_owned()), file.tool_http)
        .map_err(|e| e.to_string())?;
    let store = ScyllaCheckpointStore::connect(cql)
        .await
        .map_err(|e| format!("Cassandra at {}: {e}; {HINT}", cql_contact()))?;
    Ok(Services {
        catalog,
        settings,
        model,
        tools,
        store,
    })
}

fn cache_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("eval-conversations-embeddings")
}

/// A migrated keyspace of this test's own, dropped when done.
struct Keyspace(String);

impl Keyspace {
    fn new(rt: &tokio::runtime::Runtime) -> Keyspace {
        let name = unique("turnstile_test_evalkafka");
        rt.block_on(ScyllaCheckpointStore::migrate(&cql(&name)))
            .unwrap_or_else(|e| panic!("cannot migrate {name} on {}: {e}; {HINT}", cql_contact()));
        Keyspace(name)
    }

    fn drop_with(self, rt: &tokio::runtime::Runtime) {
        rt.block_on(async {
            if let Ok(store) = ScyllaCheckpointStore::connect(&cql(&self.0)).await {
                let drop = format!("DROP KEYSPACE IF EXISTS {}", self.0);
                let _ = store.session().query_unpaged(drop, ()).await;
            }
        });
    }
}

fn eval(args: &[&str], data: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_turnstile"))
        .current_dir(ROOT)
        .args([
            "eval",
            "conversations",
            "--config",
            "config/agents.example.yaml",
        ])
        .args(["--embeddings-base-url", &embeddings()])
        .arg("--embeddings-cache-dir")
        .arg(cache_dir())
        .args(["--json"])
        .args(args)
        .arg(data)
        .env_remove("TURNSTILE_TOOLS_BASE_URL")
        .env_remove("TURNSTILE_MODEL_BASE_URL")
        .output()
        .expect("run turnstile")
}

fn kafka_args(topics: &Topics, keyspace: &str) -> Vec<String> {
    kafka_args_at(topics, keyspace, &brokers(), &cql_contact())
}

fn kafka_args_at(topics: &Topics, keyspace: &str, brokers: &str, contact: &str) -> Vec<String> {
    [
        ("--brokers", brokers.to_owned()),
        ("--cql-contact", contact.to_owned()),
        ("--keyspace", keyspace.to_owned()),
        ("--topic-turns", topics.inbound.clone()),
        ("--topic-replies", topics.replies.clone()),
        ("--topic-events", topics.events.clone()),
        ("--topic-dead-letters", topics.dead_letters.clone()),
    ]
    .into_iter()
    .flat_map(|(flag, value)| [flag.to_owned(), value])
    .chain(["--through-kafka".to_owned()])
    .collect()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn report(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("one JSON object on stdout ({e}); stderr:\n{}", stderr(out)))
}

/// Every turn's verdict: (conversation, turn, judged outcome, why) of the failures.
fn failures(r: &Value) -> Vec<(String, u64, String, String)> {
    r["failures"]
        .as_array()
        .unwrap_or_else(|| panic!("failures: {r}"))
        .iter()
        .map(|f| {
            (
                f["id"].as_str().unwrap_or_default().to_owned(),
                f["turn"].as_u64().unwrap_or(0),
                f["actual"]["outcome"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                f["why"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// A look-up (its main expectation deliberately debatable), a handoff in pt-BR, a cancellation
/// to its end, and a conversation whose second turn expects the wrong thing on purpose.
const SET: &str = r#"{"id": "lookup", "locale": "en", "turns": [{"text": "where is my order?", "expect": {"outcome": "out_of_scope_or_clarify"}, "accept": [{"outcome": "asks_parameter", "tool": "retail_order_tracking", "param": "order_id"}]}, {"text": "PED-1001", "expect": {"outcome": "executed", "tool": "retail_order_tracking", "args": {"order_id": "PED-1001"}, "reply_contains": ["PED-1001"]}}]}
{"id": "handoff", "locale": "pt-BR", "turns": [{"text": "quero falar com um atendente", "expect": {"outcome": "handoff"}}]}
{"id": "cancel", "locale": "en", "turns": [{"text": "I want to cancel my order", "expect": {"outcome": "asks_parameter", "tool": "retail_order_cancel", "param": "order_id"}}, {"text": "PED-1001", "expect": {"outcome": "asks_confirmation", "tool": "retail_order_cancel", "args": {"order_id": "PED-1001"}}}, {"text": "yes", "expect": {"outcome": "executed", "tool": "retail_order_cancel", "args": {"order_id": "PED-1001"}}}]}
{"id": "wrong", "locale": "en", "turns": [{"text": "I want to cancel my order", "expect": {"outcome": "asks_parameter", "tool": "retail_order_cancel", "param": "order_id"}}, {"text": "PED-1002", "expect": {"outcome": "executed", "tool": "retail_order_cancel", "args": {"order_id": "PED-1002"}}}]}
"#;

fn data_file(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(unique("eval-kafka"));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let path = dir.join(name);
    std::fs::write(&path, SET).expect("write the set");
    path
}

#[test]
fn a_set_played_through_a_running_worker_is_judged_as_in_process() {
    require_services();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let keyspace = Keyspace::new(&rt);
    let data = data_file("set.jsonl");
    let (worker_tools, local_tools) = (ToolService::start(), ToolService::start());
    let topics = topics(&unique("eval-kafka"));
    // Created here, not by the worker at its start: the eval checks them before it sends.
    rt.block_on(turnstile::worker::topics::create_topics(
        &brokers(),
        &topics,
        3,
    ))
    .unwrap_or_else(|e| panic!("{e}; {HINT}"));
    let worker = start_worker(&topics, &keyspace.0, &worker_tools.base_url());

    let through = eval(
        &kafka_args(&topics, &keyspace.0)
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        &data,
    );
    let local = eval(&["--tools-base-url", &local_tools.base_url()], &data);
    drop(worker);
    keyspace.drop_with(&rt);
    assert_eq!(through.status.code(), Some(0), "{}", stderr(&through));
    assert_eq!(local.status.code(), Some(0), "{}", stderr(&local));
    let (k, p) = (report(&through), report(&local));
    assert_eq!(
        (k["mode"].as_str(), p["mode"].as_str()),
        (Some("kafka"), Some("in_process"))
    );
    assert_eq!(k["turns"], 8, "{k}");
    // Turn for turn: the same turns fail, judged the same, for the same reason.
    assert_eq!(
        failures(&k),
        failures(&p),
        "through Kafka: {k}\nin process: {p}"
    );
    let failed: Vec<(String, u64)> = failures(&k).into_iter().map(|f| (f.0, f.1)).collect();
    assert_eq!(
        failed,
        [("lookup".to_owned(), 1), ("wrong".to_owned(), 2)],
        "the debatable and the wrong expectations fail, nothing else: {k}"
    );
    assert_eq!(failures(&k)[1].2, "asks_confirmation", "{k}");
    for key in [
        "turn_accuracy",
        "conversation_success",
        "by_outcome",
        "unsafe",
    ] {
        assert_eq!(k[key], p[key], "{key}");
    }
    assert_eq!(k["by_outcome"]["executed"]["correct"], 2, "{k}");
    assert_eq!(k["by_outcome"]["handoff"]["recall"], 1.0, "{k}");
}

#[test]
fn turns_a_worker_leaves_unanswered_fail_and_unreachable_services_exit_69() {
    require_services();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let keyspace = Keyspace::new(&rt);
    let data = data_file("set.jsonl");
    // The worker's topics exist, but no worker reads them.
    let topics = topics(&unique("eval-kafka-idle"));
    rt.block_on(turnstile::worker::topics::create_topics(
        &brokers(),
        &topics,
        1,
    ))
    .unwrap_or_else(|e| panic!("{e}; {HINT}"));
    let mut args = kafka_args(&topics, &keyspace.0);
    args.extend(["--turn-timeout-secs".to_owned(), "2".to_owned()]);
    let out = eval(&args.iter().map(String::as_str).collect::<Vec<_>>(), &data);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let r = report(&out);
    assert_eq!(r["turn_accuracy"]["strict_count"], 0, "{r}");
    let whys: Vec<String> = failures(&r).into_iter().map(|f| f.3).collect();
    assert_eq!(whys.len(), 8, "every turn fails: {r}");
    assert!(
        whys.iter()
            .any(|w| w.contains("no reply within 2 s") && w.contains("bash scripts/run.sh")),
        "{whys:?}"
    );
    assert!(
        stderr(&out).contains("8 turns were not processed through Kafka"),
        "{}",
        stderr(&out)
    );

    let closed = format!("127.0.0.1:{}", free_port());
    let no_store = kafka_args_at(&topics, &keyspace.0, &brokers(), &closed);
    let out = eval(
        &no_store.iter().map(String::as_str).collect::<Vec<_>>(),
        &data,
    );
    assert_eq!(out.status.code(), Some(69), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("checkpoint store"),
        "{}",
        stderr(&out)
    );
    assert!(out.stdout.is_empty());

    let no_broker = kafka_args_at(&topics, &keyspace.0, &closed, &cql_contact());
    let out = eval(
        &no_broker.iter().map(String::as_str).collect::<Vec<_>>(),
        &data,
    );
    assert_eq!(out.status.code(), Some(69), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("unreachable") && stderr(&out).contains("bash scripts/run.sh"),
        "{}",
        stderr(&out)
    );
    keyspace.drop_with(&rt);
}
