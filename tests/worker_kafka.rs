//! The worker against the real broker and checkpoint store: per-conversation order (IO-1), real
//! messages against the schemas (IO-2), dead letters (IO-3), operations endpoints (IO-5), a
//! duplicate turn and a crash between checkpoint and commit (EV-1, LC-4), a restart between two
//! turns (ST-3, PR-7) and a second worker joining mid-stream.
//!
//! Needs Kafka at 127.0.0.1:9092 and Cassandra at 127.0.0.1:9042 (`bash scripts/services.sh up`;
//! `KAFKA_BROKERS` / `CQL_CONTACT` override). An unreachable service FAILS these tests with that
//! hint; they never skip.
//!
//! Isolation: each test creates its own topics, consumer group, instance ids and session ids.
//! All tests of one run share one freshly migrated keyspace (`turnstile_test_<secs>_<random>`,
//! migrated once: concurrent DDL on one node is slow and fragile); their rows never meet because
//! checkpoints are keyed by unique session ids and partition leases by the unique topic.
//!
//! Workers run in process (`worker::run` on a thread of their own) unless the test needs a real
//! process: the crash test (the fault hook aborts the process) and the metrics test (the metrics
//! recorder is process-global, so only a child can own one).

// Needs the test harness (src/testkit, the fault hook, `chaos`, `scenarios --e2e`):
// `cargo test --features harness`; without the feature this file compiles to no tests.
#![cfg(feature = "harness")]

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::Ordering;
use std::sync::{mpsc as std_mpsc, Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use jsonschema::Validator;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::producer::{BaseProducer, BaseRecord, FutureProducer, FutureRecord, Producer};
use rdkafka::TopicPartitionList;
use serde_json::{json, Value};
use tokio::sync::oneshot;

use turnstile::config::agents::{load_catalog, parse_catalog};
use turnstile::config::profiles::load_profiles;
use turnstile::domain::catalog::{Catalog, Settings};
use turnstile::domain::decision::Skill;
use turnstile::domain::state::AgentState;
use turnstile::domain::transaction::TransactionStatus;
use turnstile::domain::turn::Identity;
use turnstile::message::{Topics, CONTENT_TYPE_CLOUDEVENTS, CONTENT_TYPE_JSON};
use turnstile::model::{ModelScript, OpenAiCompatibleModel};
use turnstile::pipeline::decode_record;
use turnstile::store::cql::ScyllaCheckpointStore;
use turnstile::testkit::bus::{self, OutputReader, ReadMessage};
use turnstile::testkit::cql::{config as cql_config, contact as cql_contact};
use turnstile::testkit::model_server::{Behaviour, ModelServer};
use turnstile::testkit::tool_server::{ToolAction, ToolServer};
use turnstile::testkit::worker_process::{self, WorkerEnv};
use turnstile::tool::{HttpToolGateway, ToolHttpSettings};
use turnstile::worker::committer::abort_transaction;
use turnstile::worker::{self, Health, Services, WorkerConfig};

const HINT: &str = "run bash scripts/services.sh up";
const AGENT: &str = "retail-bot";
/// Short group timings so a rejoin after a stopped member takes seconds, not the 15 s default.
const SESSION_TIMEOUT_MS: u64 = 6_000;
const DRAIN_BUDGET_MS: u64 = 3_000;
/// Generous: the 2-core test box is shared with other builds, and a wait ends as soon as the
/// outputs are there.
const OUTPUT_TIMEOUT: Duration = Duration::from_secs(120);
/// How long to keep reading after the expected outputs arrived, so a late duplicate shows.
const SETTLE: Duration = Duration::from_secs(3);
/// Test keyspaces of runs older than this are dropped (same rule as tests/store_cql.rs).
const STALE_KEYSPACE_SECS: u64 = 2 * 3600;

// ---------------------------------------------------------------------------------------------
// Services
// ---------------------------------------------------------------------------------------------

/// A cheap TCP probe first, so a stopped service fails in seconds with the fix in the message
/// instead of after a client library's long timeouts.
fn reachable(what: &str, addresses: &str) -> Result<(), String> {
    let first = addresses.split(',').next().unwrap_or(addresses).trim();
    first
        .to_socket_addrs()
        .map_err(|e| e.to_string())
        .and_then(|mut a| a.next().ok_or_else(|| "no address".to_owned()))
        .and_then(|a| {
            TcpStream::connect_timeout(&a, Duration::from_secs(3)).map_err(|e| e.to_string())
        })
        .map(drop)
        .map_err(|e| format!("{what} at {first} is unreachable ({e}); {HINT}"))
}

fn require_services() {
    for (what, address) in [("Kafka", bus::brokers()), ("Cassandra", cql_contact())] {
        if let Err(e) = reachable(what, &address) {
            panic!("{e}");
        }
    }
}

fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// This run's keyspace, migrated once on its own thread and runtime (tests run on separate
/// runtimes; one migration keeps Cassandra's schema changes serial).
fn keyspace() -> &'static str {
    static NAME: OnceLock<Result<String, String>> = OnceLock::new();
    let result = NAME.get_or_init(|| {
        let name = format!(
            "turnstile_test_{}_{}",
            unix_secs(),
            bus::unique_suffix()
                .chars()
                .rev()
                .take(8)
                .collect::<String>()
        );
        let ks = name.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            rt.block_on(async {
                ScyllaCheckpointStore::migrate(&cql_config(&ks))
                    .await
                    .map_err(|e| e.to_string())?;
                drop_stale_keyspaces(&ks).await;
                Ok::<(), String>(())
            })
        })
        .join()
        .unwrap_or_else(|_| Err("migration thread panicked".to_owned()))
        .map(|()| name)
    });
    match result {
        Ok(name) => name,
        Err(e) => panic!(
            "cannot migrate a test keyspace on Cassandra at {}: {e}; {HINT}",
            cql_contact()
        ),
    }
}

/// Keeps the shared node's schema small: drops test keyspaces of runs long finished.
async fn drop_stale_keyspaces(current: &str) {
    let Ok(store) = ScyllaCheckpointStore::connect(&cql_config(current)).await else {
        return;
    };
    let Ok(result) = store
        .session()
        .query_unpaged("SELECT keyspace_name FROM system_schema.keyspaces", ())
        .await
    else {
        return;
    };
    let Ok(rows) = result.into_rows_result() else {
        return;
    };
    let Ok(names) = rows.rows::<(String,)>() else {
        return;
    };
    let now = unix_secs();
    for (name,) in names.flatten() {
        let Some(rest) = name.strip_prefix("turnstile_test_") else {
            continue;
        };
        let secs = rest.split('_').next().and_then(|s| s.parse::<u64>().ok());
        if secs.is_some_and(|s| s + STALE_KEYSPACE_SECS < now) {
            let _ = store
                .session()
                .query_unpaged(format!("DROP KEYSPACE IF EXISTS {name}"), ())
                .await;
        }
    }
}

async fn connect_store(keyspace: &str) -> ScyllaCheckpointStore {
    ScyllaCheckpointStore::connect(&cql_config(keyspace))
        .await
        .unwrap_or_else(|e| {
            panic!(
                "cannot connect to Cassandra at {}: {e}; {HINT}",
                cql_contact()
            )
        })
}

async fn stored_state(store: &ScyllaCheckpointStore, identity: &Identity) -> Option<AgentState> {
    let row = store
        .load_row(identity)
        .await
        .unwrap_or_else(|e| panic!("load {}: {e}", identity.key()))?;
    let (state, _) = decode_record(&row.state, row.in_flight.as_deref())
        .unwrap_or_else(|e| panic!("stored checkpoint of {} undecodable: {e}", identity.key()));
    Some(state)
}

// ---------------------------------------------------------------------------------------------
// Configuration and model scripts
// ---------------------------------------------------------------------------------------------

fn manifest(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn example_catalog() -> Arc<Catalog> {
    Arc::new(load_catalog(&manifest("config/agents.example.yaml")).expect("example agents config"))
}

/// The example assistant, serving tenant `acme` only, so other tenants are `unknown_tenant`.
fn acme_only_catalog() -> Arc<Catalog> {
    let text = std::fs::read_to_string(manifest("config/agents.example.yaml"))
        .expect("read example agents config");
    let every_tenant = r#"- {tenant: "*", tools: "*"}"#;
    assert!(
        text.contains(every_tenant),
        "config/agents.example.yaml no longer has the `{every_tenant}` rule this test replaces"
    );
    let yaml = text.replace(every_tenant, r#"- {tenant: acme, tools: "*"}"#);
    Arc::new(parse_catalog(&yaml, "acme-only agents").expect("acme-only agents config"))
}

fn script(value: Value) -> ModelScript {
    serde_json::from_value(value).expect("model script")
}

/// Classifier says ROUTE, router picks this tool: the first turn of a transaction.
fn routed_to(agent: &str, tool: &str) -> ModelScript {
    script(json!({
        "classifier": {"decision": "ROUTE", "confidence": 0.96},
        "router": {"agent": agent, "intent": tool, "confidence": 0.95},
    }))
}

fn classified(decision: &str) -> ModelScript {
    script(json!({"classifier": {"decision": decision, "confidence": 0.97}}))
}

/// Unscripted turns get a plain out-of-scope reply: one reply, no transaction, no tool.
fn out_of_scope_by_default(model: &ModelServer, router_latency: Duration) {
    model.set_default(
        Skill::Classifier,
        Behaviour::answer(json!({"decision": "ROUTE", "confidence": 0.96})),
    );
    model.set_default(
        Skill::Router,
        Behaviour::answer(json!({"out_of_scope": true, "confidence": 0.93}))
            .with_latency(router_latency),
    );
}

fn model_requests(model: &ModelServer, turn_id: &str, skill: Skill) -> usize {
    model
        .requests_for(skill)
        .iter()
        .filter(|r| r.turn_id.as_deref() == Some(turn_id))
        .count()
}

// ---------------------------------------------------------------------------------------------
// Fixture: topics, servers, workers
// ---------------------------------------------------------------------------------------------

struct Fixture {
    suffix: String,
    brokers: String,
    topics: Topics,
    group: String,
    keyspace: String,
    model: ModelServer,
    tools: ToolServer,
    producer: FutureProducer,
}

impl Drop for Fixture {
    /// The child workers' logs are kept for a failing test (its assertion messages point at
    /// them) and removed after a passing one, so test runs do not fill the temporary folder.
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(self.log_dir());
        }
    }
}

async fn fixture(name: &str, partitions: i32) -> Fixture {
    require_services();
    let keyspace = tokio::task::block_in_place(keyspace).to_owned();
    let brokers = bus::brokers();
    let topics = bus::unique_topics(&format!("wk-{name}"));
    bus::create_topics(&brokers, &topics, partitions)
        .await
        .unwrap_or_else(|e| panic!("{e}; {HINT}"));
    let suffix = bus::unique_suffix();
    let producer = bus::turn_producer(&brokers).unwrap_or_else(|e| panic!("{e}; {HINT}"));
    Fixture {
        group: format!("wk-{name}-{suffix}"),
        suffix,
        brokers,
        topics,
        keyspace,
        model: ModelServer::start().await,
        tools: ToolServer::start().await.expect("start the tool server"),
        producer,
    }
}

impl Fixture {
    fn session(&self, label: &str) -> String {
        format!("{label}-{}", self.suffix)
    }

    fn instance(&self, label: &str) -> String {
        format!("{label}-{}", self.suffix)
    }

    fn reader(&self) -> OutputReader {
        OutputReader::new(
            &self.brokers,
            &[
                &self.topics.replies,
                &self.topics.events,
                &self.topics.dead_letters,
            ],
        )
        .unwrap_or_else(|e| panic!("{e}; {HINT}"))
    }

    /// Produces a text turn keyed by its identity (IO-1); returns (partition, offset).
    async fn send_text(
        &self,
        tenant: &str,
        session: &str,
        turn_id: &str,
        text: &str,
    ) -> (i32, i64) {
        let key = format!("{tenant}/{AGENT}/{session}");
        let body = bus::turn_json(
            tenant,
            AGENT,
            session,
            turn_id,
            Some(text),
            None,
            "en",
            None,
        );
        bus::produce(&self.producer, &self.topics.inbound, &key, &body)
            .await
            .unwrap_or_else(|e| panic!("{e}; {HINT}"))
    }

    /// Produces any record, key or payload possibly absent (a tombstone, a keyless record).
    async fn send_raw(&self, key: Option<&[u8]>, payload: Option<&[u8]>) -> (i32, i64) {
        let mut record = FutureRecord::<[u8], [u8]>::to(&self.topics.inbound);
        if let Some(k) = key {
            record = record.key(k);
        }
        if let Some(p) = payload {
            record = record.payload(p);
        }
        self.producer
            .send(record, Duration::from_secs(30))
            .await
            .map(|d| (d.partition, d.offset))
            .unwrap_or_else(|(e, _)| panic!("produce to {}: {e}; {HINT}", self.topics.inbound))
    }

    fn worker_config(&self, instance: &str) -> WorkerConfig {
        WorkerConfig {
            brokers: self.brokers.clone(),
            group_id: self.group.clone(),
            instance_id: instance.to_owned(),
            topics: self.topics.clone(),
            session_timeout: Duration::from_millis(SESSION_TIMEOUT_MS),
            drain_budget: Duration::from_millis(DRAIN_BUDGET_MS),
            ..WorkerConfig::default()
        }
    }

    /// Starts `worker::run` on a thread with its own runtime, so blocking waits of the test never
    /// starve it; returns once its checkpoint store is connected.
    async fn start_worker(
        &self,
        instance: &str,
        catalog: Arc<Catalog>,
        tweak: impl FnOnce(&mut WorkerConfig),
    ) -> InProcessWorker {
        let mut config = self.worker_config(instance);
        tweak(&mut config);
        let settings = Arc::new(Settings::default());
        let profiles = Arc::new(
            load_profiles(&manifest("config/profiles.example.yaml")).expect("example profiles"),
        );
        // The example profiles read no API key; the base URL goes to the scripted model server.
        let model =
            OpenAiCompatibleModel::new(catalog.clone(), settings.clone(), profiles, |_: &str| {
                None::<String>
            })
            .expect("model adapter")
            .with_base_url_override(self.model.base_url());
        let tools = HttpToolGateway::new(
            catalog.clone(),
            Some(self.tools.base_url()),
            ToolHttpSettings {
                timeout_ms: 5_000,
                max_attempts: 3,
                initial_backoff_ms: 20,
                max_backoff_ms: 200,
            },
        )
        .expect("tool gateway");
        let health = Arc::new(Health::default());
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let (ready_tx, ready_rx) = std_mpsc::channel::<Result<(), String>>();
        let (done_tx, done_rx) = std_mpsc::channel::<Result<(), String>>();
        let cql = cql_config(&self.keyspace);
        let run_health = health.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("worker-{instance}"))
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(format!("runtime: {e}")));
                        return;
                    }
                };
                let result = rt.block_on(async move {
                    let store = match ScyllaCheckpointStore::connect(&cql).await {
                        Ok(s) => s,
                        Err(e) => {
                            let _ = ready_tx.send(Err(format!(
                                "cannot connect to Cassandra at {}: {e}; {HINT}",
                                cql_contact()
                            )));
                            return Ok(());
                        }
                    };
                    let _ = ready_tx.send(Ok(()));
                    let services = Services {
                        catalog,
                        settings,
                        model,
                        tools,
                        store,
                    };
                    let shutdown = async move {
                        let _ = stop_rx.await;
                    };
                    worker::run(config, services, run_health, shutdown)
                        .await
                        .map_err(|e| e.to_string())
                });
                let _ = done_tx.send(result);
            });
        if let Err(e) = spawned {
            panic!("spawn the worker thread: {e}");
        }
        let ready = tokio::task::block_in_place(|| ready_rx.recv_timeout(Duration::from_secs(60)));
        match ready {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!("worker {instance} did not start: {e}"),
            Err(e) => panic!("worker {instance} did not start within 60 s: {e}"),
        }
        InProcessWorker {
            instance: instance.to_owned(),
            health,
            stop: Some(stop_tx),
            done: done_rx,
        }
    }

    /// Where this fixture's child workers write their JSON logs.
    fn log_dir(&self) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("turnstile-worker-kafka-{}", self.suffix))
    }

    /// Starts `turnstile run` as a child process writing its JSON log to a file.
    fn spawn_child(&self, instance: &str, extra_env: &[(&str, String)]) -> ChildWorker {
        let dir = self.log_dir();
        std::fs::create_dir_all(&dir).expect("log directory");
        let log = dir.join(format!("{instance}-{}.log", bus::unique_suffix()));
        let mut env = WorkerEnv {
            log_filter: "info".into(),
            config: manifest("config/agents.example.yaml"),
            profiles: manifest("config/profiles.example.yaml"),
            brokers: self.brokers.clone(),
            group_id: self.group.clone(),
            topics: self.topics.clone(),
            keyspace: self.keyspace.clone(),
            cql_contact: cql_contact(),
            model_base_url: self.model.base_url(),
            tools_base_url: self.tools.base_url(),
            session_timeout_ms: SESSION_TIMEOUT_MS,
            drain_budget_ms: DRAIN_BUDGET_MS,
            commit_interval_ms: None,
        }
        .vars()
        .expect("worker environment");
        env.push(("TURNSTILE_INSTANCE_ID".into(), instance.to_owned()));
        // Port 0 unless the test needs the listener: parallel children never collide.
        env.push(("TURNSTILE_LISTEN".into(), "127.0.0.1:0".into()));
        env.extend(extra_env.iter().map(|(k, v)| ((*k).to_owned(), v.clone())));
        let exe = PathBuf::from(env!("CARGO_BIN_EXE_turnstile"));
        let child = worker_process::spawn(&exe, &env, &log, &format!("worker {instance}"))
            .unwrap_or_else(|e| panic!("{e}"));
        ChildWorker { child, log }
    }
}

struct InProcessWorker {
    instance: String,
    health: Arc<Health>,
    stop: Option<oneshot::Sender<()>>,
    done: std_mpsc::Receiver<Result<(), String>>,
}

impl InProcessWorker {
    fn assigned(&self) -> usize {
        self.health.assigned_partitions.load(Ordering::Relaxed)
    }

    /// Graceful stop: drain, commit, leave; the worker must end without an error.
    fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let ended = tokio::task::block_in_place(|| self.done.recv_timeout(Duration::from_secs(60)));
        match ended {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!("worker {} failed: {e}", self.instance),
            Err(e) => panic!("worker {} did not stop within 60 s: {e}", self.instance),
        }
    }
}

impl Drop for InProcessWorker {
    /// A failed assertion must not leave a worker consuming in the background.
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

struct ChildWorker {
    child: Child,
    log: PathBuf,
}

impl ChildWorker {
    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let until = Instant::now() + timeout;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(50)),
                _ => return None,
            }
        }
    }

    /// SIGKILL: no drain, no commit, no goodbye to the group.
    fn kill(&mut self) {
        worker_process::kill(&mut self.child);
    }

    /// SIGTERM (the graceful path of `turnstile run`), then the exit status; `None` if it had
    /// to be killed after `timeout`.
    fn terminate(&mut self, timeout: Duration) -> Option<ExitStatus> {
        tokio::task::block_in_place(|| worker_process::terminate(&mut self.child, timeout))
    }
}

impl Drop for ChildWorker {
    /// SIGKILL whatever is still running: a failed test must not leave a worker behind.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            worker_process::kill(&mut self.child);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Reading outputs
// ---------------------------------------------------------------------------------------------

fn wait_for(reader: &mut OutputReader, what: &str, pred: impl Fn(&[ReadMessage]) -> bool) {
    let ok = tokio::task::block_in_place(|| reader.wait_until(OUTPUT_TIMEOUT, pred));
    assert!(
        ok,
        "timed out after {OUTPUT_TIMEOUT:?} waiting for {what}; saw {} outputs:\n{}",
        reader.seen.len(),
        summary(&reader.seen)
    );
}

fn settle(reader: &mut OutputReader) {
    tokio::task::block_in_place(|| reader.poll_for(SETTLE));
}

fn summary(seen: &[ReadMessage]) -> String {
    seen.iter()
        .take(40)
        .map(|m| {
            format!(
                "  {} p{} o{} key={} turn={:?} id={:?}",
                m.topic, m.partition, m.offset, m.key, m.turn_id, m.output_id
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn on<'a>(seen: &'a [ReadMessage], topic: &'a str) -> impl Iterator<Item = &'a ReadMessage> + 'a {
    seen.iter().filter(move |m| m.topic == topic)
}

fn for_turn<'a>(seen: &'a [ReadMessage], topic: &'a str, turn_id: &str) -> Vec<&'a ReadMessage> {
    on(seen, topic)
        .filter(|m| m.turn_id.as_deref() == Some(turn_id))
        .collect()
}

fn event_types(seen: &[ReadMessage], topic: &str, turn_id: &str) -> Vec<String> {
    for_turn(seen, topic, turn_id)
        .iter()
        .map(|m| m.payload["type"].as_str().unwrap_or("?").to_owned())
        .collect()
}

fn distinct_turns(seen: &[ReadMessage], topic: &str) -> usize {
    on(seen, topic)
        .filter_map(|m| m.turn_id.as_deref())
        .collect::<HashSet<_>>()
        .len()
}

fn assert_no_duplicates(reader: &OutputReader) {
    let dups = reader.duplicate_output_ids();
    assert!(
        dups.is_empty(),
        "EV-1: output ids published more than once: {dups:?}"
    );
}

/// `(content-type, output_id)` headers of every committed record of a topic.
fn content_types(brokers: &str, topic: &str, expected: usize) -> Vec<(String, String)> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", format!("headers-{}", bus::unique_suffix()))
        .set("isolation.level", "read_committed")
        .set("enable.auto.commit", "false")
        .create()
        .expect("header reader");
    let meta = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .expect("topic metadata");
    let mut tpl = TopicPartitionList::new();
    for t in meta.topics() {
        for p in t.partitions() {
            let _ = tpl.add_partition_offset(topic, p.id(), rdkafka::Offset::Beginning);
        }
    }
    consumer.assign(&tpl).expect("assign");
    let mut found = Vec::new();
    let until = Instant::now() + Duration::from_secs(30);
    while found.len() < expected && Instant::now() < until {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            let header = |name: &str| {
                m.headers()
                    .and_then(|h| h.iter().find(|x| x.key == name).and_then(|x| x.value))
                    .map(|v| String::from_utf8_lossy(v).into_owned())
                    .unwrap_or_default()
            };
            found.push((header("content-type"), header("output_id")));
        }
    }
    found
}

// ---------------------------------------------------------------------------------------------
// Schemas (IO-2, IO-3)
// ---------------------------------------------------------------------------------------------

/// Draft 2020-12 with `format` asserted: `date-time` is part of the contract, not an annotation.
fn validator(name: &str) -> Validator {
    let path = manifest(&format!("schemas/{name}.v1.json"));
    let text = std::fs::read_to_string(&path).expect("schema file");
    let schema: Value = serde_json::from_str(&text).expect("schema is JSON");
    jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn assert_valid(v: &Validator, name: &str, instance: &Value) {
    let errors: Vec<String> = v
        .iter_errors(instance)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "IO-2: a real {name} message violates schemas/{name}.v1.json: {errors:?}\n{instance:#}"
    );
}

// ---------------------------------------------------------------------------------------------
// Prometheus text format
// ---------------------------------------------------------------------------------------------

/// A small parser of the text exposition format (0.0.4): every line is a `# HELP`, a `# TYPE`
/// with a known type, another comment, or `name{labels} value`; every histogram has `+Inf`,
/// `_sum` and `_count`. Returns the problems found.
fn exposition_problems(text: &str) -> Vec<String> {
    let name = regex::Regex::new(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$").expect("regex");
    let sample = regex::Regex::new(
        r#"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:\\.|[^"\\])*",?)*\})? (\S+)( -?[0-9]+)?$"#,
    )
    .expect("regex");
    let mut problems = Vec::new();
    let mut histograms = Vec::new();
    let mut samples: HashSet<String> = HashSet::new();
    let mut inf_buckets: HashSet<String> = HashSet::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let metric = rest.split(' ').next().unwrap_or("");
            if !name.is_match(metric) {
                problems.push(format!("line {n}: HELP of a bad name: {line}"));
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split(' ');
            let metric = parts.next().unwrap_or("");
            let kind = parts.next().unwrap_or("");
            if !name.is_match(metric)
                || !["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind)
                || parts.next().is_some()
            {
                problems.push(format!("line {n}: bad TYPE line: {line}"));
            }
            if kind == "histogram" {
                histograms.push(metric.to_owned());
            }
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let Some(c) = sample.captures(line) else {
            problems.push(format!("line {n}: not a sample: {line}"));
            continue;
        };
        let metric = c.get(1).map_or("", |m| m.as_str());
        let value = c.get(3).map_or("", |m| m.as_str());
        if value.parse::<f64>().is_err() && !["+Inf", "-Inf", "NaN"].contains(&value) {
            problems.push(format!("line {n}: value `{value}` is not a number: {line}"));
        }
        samples.insert(metric.to_owned());
        if metric.ends_with("_bucket") && line.contains("le=\"+Inf\"") {
            inf_buckets.insert(metric.trim_end_matches("_bucket").to_owned());
        }
    }
    for h in histograms {
        for part in ["_sum", "_count"] {
            if !samples.contains(&format!("{h}{part}")) {
                problems.push(format!("histogram {h} has no {h}{part}"));
            }
        }
        if !inf_buckets.contains(&h) {
            problems.push(format!("histogram {h} has no le=\"+Inf\" bucket"));
        }
    }
    problems
}

async fn http_get(url: &str) -> Result<(u16, String), String> {
    let response = reqwest::get(url).await.map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let body = response.text().await.map_err(|e| e.to_string())?;
    Ok((status, body))
}

/// Polls `url` until it answers `status`; returns the body.
async fn wait_http(url: &str, status: u16, timeout: Duration, child: &ChildWorker) -> String {
    let until = Instant::now() + timeout;
    let mut last = String::from("no answer yet");
    while Instant::now() < until {
        match http_get(url).await {
            Ok((s, body)) if s == status => return body,
            Ok((s, body)) => last = format!("HTTP {s}: {body}"),
            Err(e) => last = e,
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!(
        "{url} did not answer {status} within {timeout:?} (last: {last}); worker log:\n{}",
        child.log_text()
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

/// The message these tests fail with when a service is down: the fix, never a skip.
#[test]
fn unreachable_services_fail_with_the_start_hint() {
    let port = free_port();
    let message = reachable("Kafka", &format!("127.0.0.1:{port}"))
        .err()
        .unwrap_or_default();
    assert!(
        message.contains(HINT) && message.contains("unreachable"),
        "an unreachable broker must fail with `{HINT}`, got: {message:?}"
    );
}

/// IO-1: 40 conversations x 5 turns, produced interleaved into 6 partitions. Each conversation's
/// replies come out in its turn order, each turn has exactly one reply, and the stored state
/// applied the turns in that order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn io1_each_conversation_is_applied_in_turn_order_while_many_run_in_parallel() {
    let started = Instant::now();
    let fx = fixture("order", 6).await;
    // Router latency keeps many conversations in flight at once, so a broken per-key order
    // (two turns of one conversation running together) would reorder replies or state.
    out_of_scope_by_default(&fx.model, Duration::from_millis(15));
    let worker = fx
        .start_worker(&fx.instance("order-a"), example_catalog(), |_| {})
        .await;
    const CONVERSATIONS: usize = 40;
    const TURNS: usize = 5;
    let sessions: Vec<String> = (0..CONVERSATIONS)
        .map(|c| fx.session(&format!("c{c:02}")))
        .collect();
    let mut expected: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for t in 0..TURNS {
        for s in &sessions {
            let turn_id = format!("{s}-t{t}");
            fx.send_text("t1", s, &turn_id, &format!("question number {t}"))
                .await;
            expected
                .entry(format!("t1/{AGENT}/{s}"))
                .or_default()
                .push(turn_id);
        }
    }
    let total = CONVERSATIONS * TURNS;
    let mut reader = fx.reader();
    let replies = fx.topics.replies.clone();
    wait_for(&mut reader, "a reply to every turn", |seen| {
        distinct_turns(seen, &replies) >= total
    });
    settle(&mut reader);
    worker.stop();

    assert_no_duplicates(&reader);
    let mut per_turn: HashMap<&str, usize> = HashMap::new();
    for m in on(&reader.seen, &replies) {
        *per_turn
            .entry(m.turn_id.as_deref().unwrap_or(""))
            .or_default() += 1;
    }
    let repeated: Vec<_> = per_turn.iter().filter(|(_, n)| **n != 1).collect();
    assert!(
        repeated.is_empty(),
        "EV-1: turns with more than one reply: {repeated:?}"
    );
    assert_eq!(per_turn.len(), total, "IO-1: every turn gets a reply");
    let store = connect_store(&fx.keyspace).await;
    for (key, turn_ids) in &expected {
        let replies_of_key: Vec<&ReadMessage> = on(&reader.seen, &replies)
            .filter(|m| &m.key == key)
            .collect();
        let order: Vec<&str> = replies_of_key
            .iter()
            .filter_map(|m| m.turn_id.as_deref())
            .collect();
        assert_eq!(order, *turn_ids, "IO-1: replies of {key} out of turn order");
        let partitions: HashSet<i32> = replies_of_key.iter().map(|m| m.partition).collect();
        assert_eq!(
            partitions.len(),
            1,
            "IO-1: replies of {key} spread over {partitions:?}"
        );
        for m in &replies_of_key {
            assert_eq!(
                m.payload["turn_id"],
                json!(m.turn_id),
                "reply body and header agree"
            );
        }
        let session = key.rsplit('/').next().unwrap_or_default();
        let state = stored_state(&store, &Identity::new("t1", AGENT, session))
            .await
            .unwrap_or_else(|| panic!("ST-3: no stored state for {key}"));
        assert_eq!(
            state.applied_turn_ids, *turn_ids,
            "IO-1: the checkpoint of {key} applied its turns out of order"
        );
    }
    eprintln!("io1 ordering: {total} turns in {:?}", started.elapsed());
}

/// ST-3, PR-7: turn 1 opens a cancellation on worker A; A stops; worker B (another instance of the
/// same group) takes turn 2 `PED-1001` and continues the same transaction from the checkpoint,
/// without any model call, up to AWAITING_CONFIRMATION.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn st3_pr7_a_worker_restarted_between_two_turns_resumes_the_transaction() {
    let started = Instant::now();
    let fx = fixture("resume", 3).await;
    let session = fx.session("resume");
    let t1 = format!("{session}-1");
    let t2 = format!("{session}-2");
    fx.model
        .set_turn_script(&t1, &routed_to("retail", "retail_order_cancel"));
    let mut reader = fx.reader();
    let replies = fx.topics.replies.clone();

    let a = fx
        .start_worker(&fx.instance("resume-a"), example_catalog(), |_| {})
        .await;
    fx.send_text("t1", &session, &t1, "cancel my order").await;
    wait_for(&mut reader, "the reply to turn 1", |seen| {
        !for_turn(seen, &replies, &t1).is_empty()
    });
    let first = for_turn(&reader.seen, &replies, &t1)[0].payload.clone();
    assert_eq!(
        first["transaction_status"], "COLLECTING_PARAMETERS",
        "{first}"
    );
    a.stop();

    let b = fx
        .start_worker(&fx.instance("resume-b"), example_catalog(), |_| {})
        .await;
    fx.send_text("t1", &session, &t2, "PED-1001").await;
    wait_for(&mut reader, "the reply to turn 2", |seen| {
        !for_turn(seen, &replies, &t2).is_empty()
    });
    settle(&mut reader);
    b.stop();

    assert_no_duplicates(&reader);
    let second = for_turn(&reader.seen, &replies, &t2);
    assert_eq!(second.len(), 1, "one reply to turn 2");
    let reply = &second[0].payload;
    assert_eq!(
        reply["transaction_status"], "AWAITING_CONFIRMATION",
        "{reply}"
    );
    let text = reply["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("PED-1001") && text.to_lowercase().contains("confirm"),
        "the reply asks to confirm the order: {text}"
    );
    let model_calls = fx
        .model
        .requests()
        .iter()
        .filter(|r| r.turn_id.as_deref() == Some(t2.as_str()))
        .count();
    assert_eq!(
        model_calls, 0,
        "PR-1/PR-7: turn 2 continues from the checkpoint, no model"
    );
    let pre_validations = fx
        .tools
        .calls()
        .iter()
        .filter(|c| c.action == ToolAction::PreValidate && c.tool == "retail_order_cancel")
        .count();
    assert_eq!(pre_validations, 1, "LC-1: pre-validated once on worker B");

    let store = connect_store(&fx.keyspace).await;
    let state = stored_state(&store, &Identity::new("t1", AGENT, &session))
        .await
        .expect("ST-3: the conversation's checkpoint");
    let tx = state
        .active_transaction
        .as_ref()
        .expect("an active transaction in the checkpoint");
    assert_eq!(tx.tool, "retail_order_cancel");
    assert_eq!(tx.status, TransactionStatus::AwaitingConfirmation);
    assert_eq!(tx.arguments.get("order_id"), Some(&json!("PED-1001")));
    assert_eq!(
        state.transaction_status,
        Some(TransactionStatus::AwaitingConfirmation)
    );
    assert_eq!(state.applied_turn_ids, vec![t1, t2]);
    eprintln!("st3 resume: {:?}", started.elapsed());
}

/// ST-3, LC-1, EV-1: the worker process is SIGKILLed between two turns of a cancellation (no
/// drain, no goodbye to the group); a new process with the same instance id, as a restarted pod
/// has, continues the transaction: `PED-1001` asks for confirmation and `yes` cancels the order
/// with exactly one tool execution.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn st3_a_worker_killed_between_two_turns_continues_the_transaction() {
    let started = Instant::now();
    let fx = fixture("kill", 2).await;
    let session = fx.session("kill");
    let turns: Vec<String> = (1..=3).map(|i| format!("{session}-{i}")).collect();
    fx.model
        .set_turn_script(&turns[0], &routed_to("retail", "retail_order_cancel"));
    let instance = fx.instance("kill");
    let mut reader = fx.reader();
    let (replies, events) = (fx.topics.replies.clone(), fx.topics.events.clone());

    let mut first = fx.spawn_child(&instance, &[]);
    fx.send_text("t1", &session, &turns[0], "cancel my order")
        .await;
    wait_for(&mut reader, "the reply to turn 1", |seen| {
        !for_turn(seen, &replies, &turns[0]).is_empty()
    });
    first.kill();

    let mut second = fx.spawn_child(&instance, &[]);
    fx.send_text("t1", &session, &turns[1], "PED-1001").await;
    fx.send_text("t1", &session, &turns[2], "yes").await;
    wait_for(&mut reader, "the replies to turns 2 and 3", |seen| {
        !for_turn(seen, &replies, &turns[2]).is_empty()
    });
    settle(&mut reader);
    let exit = second.terminate(Duration::from_secs(60));
    assert!(
        exit.is_some_and(|s| s.success()),
        "the second worker stops cleanly on SIGTERM: {exit:?}; log:\n{}",
        second.log_text()
    );

    assert_no_duplicates(&reader);
    let statuses: Vec<Value> = turns
        .iter()
        .map(|t| {
            let got = for_turn(&reader.seen, &replies, t);
            assert_eq!(got.len(), 1, "one reply to {t}");
            got[0].payload["transaction_status"].clone()
        })
        .collect();
    assert_eq!(
        statuses,
        vec![
            json!("COLLECTING_PARAMETERS"),
            json!("AWAITING_CONFIRMATION"),
            json!("COMPLETED")
        ],
        "ST-3: the new process continued the same transaction"
    );
    assert_eq!(
        event_types(&reader.seen, &events, &turns[0]),
        vec!["transaction.started"]
    );
    assert_eq!(
        event_types(&reader.seen, &events, &turns[2]),
        vec!["transaction.completed"]
    );
    let executions = fx.tools.executions();
    assert_eq!(
        executions.len(),
        1,
        "EV-1: one cancellation: {executions:?}"
    );
    assert_eq!(executions[0].tool, "retail_order_cancel");
    assert_eq!(executions[0].arguments["order_id"], "PED-1001");
    let store = connect_store(&fx.keyspace).await;
    let state = stored_state(&store, &Identity::new("t1", AGENT, &session))
        .await
        .expect("ST-3: the conversation's checkpoint");
    assert!(state.active_transaction.is_none(), "LC-2: latch cleared");
    let last = state
        .last_transaction
        .as_ref()
        .expect("LC-2: the finished transaction is kept");
    assert_eq!(last.status, TransactionStatus::Completed);
    assert_eq!(state.applied_turn_ids, turns);
    eprintln!("st3 kill: {:?}", started.elapsed());
}

/// EV-1: the same turn produced twice back to back, and once more after it was committed, gives
/// one reply, one pair of events and one tool execution; the copies reach no model either.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ev1_a_turn_delivered_twice_produces_one_reply_and_one_tool_execution() {
    let started = Instant::now();
    let fx = fixture("dup", 2).await;
    out_of_scope_by_default(&fx.model, Duration::ZERO);
    let session = fx.session("dup");
    let bill = format!("{session}-bill");
    let after = format!("{session}-after");
    fx.model
        .set_turn_script(&bill, &routed_to("billing", "billing_show_bill"));
    let worker = fx
        .start_worker(&fx.instance("dup-a"), example_catalog(), |_| {})
        .await;
    let mut reader = fx.reader();
    let (replies, events) = (fx.topics.replies.clone(), fx.topics.events.clone());

    let (p1, o1) = fx.send_text("t1", &session, &bill, "show my bill").await;
    let (p2, o2) = fx.send_text("t1", &session, &bill, "show my bill").await;
    assert_eq!(p1, p2, "IO-1: one key, one partition");
    assert!(o2 > o1);
    wait_for(&mut reader, "the bill reply", |seen| {
        !for_turn(seen, &replies, &bill).is_empty()
    });
    // A later redelivery, after the first copy's outputs and offsets were committed.
    fx.send_text("t1", &session, &bill, "show my bill").await;
    // Same key, so when this turn's reply is out, every copy before it was processed (IO-1).
    fx.send_text("t1", &session, &after, "thanks").await;
    wait_for(&mut reader, "the reply after the copies", |seen| {
        !for_turn(seen, &replies, &after).is_empty()
    });
    settle(&mut reader);
    worker.stop();

    assert_no_duplicates(&reader);
    assert_eq!(
        for_turn(&reader.seen, &replies, &bill).len(),
        1,
        "EV-1: one reply"
    );
    let mut types = event_types(&reader.seen, &events, &bill);
    types.sort();
    assert_eq!(
        types,
        vec!["transaction.completed", "transaction.started"],
        "EV-1: the events once"
    );
    let executions: Vec<_> = fx
        .tools
        .executions()
        .into_iter()
        .filter(|e| e.tool == "billing_show_bill")
        .collect();
    assert_eq!(executions.len(), 1, "EV-1: one execution: {executions:?}");
    let execute_calls = fx
        .tools
        .calls()
        .iter()
        .filter(|c| c.action == ToolAction::Execute)
        .count();
    assert_eq!(
        execute_calls, 1,
        "EV-1: the copies never called the tool again"
    );
    assert_eq!(model_requests(&fx.model, &bill, Skill::Classifier), 1);
    assert_eq!(model_requests(&fx.model, &bill, Skill::Router), 1);
    eprintln!("ev1 duplicate: {:?}", started.elapsed());
}

/// LC-4, EV-1: the worker process aborts right after the turn's checkpoint (state + outbox) was
/// saved and before its Kafka commit. The restarted worker republishes the stored outputs: one
/// reply, no duplicate output id, one tool execution, and no second model call for the turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lc4_ev1_crash_after_the_checkpoint_before_the_commit_republishes_from_the_outbox() {
    let started = Instant::now();
    let fx = fixture("crash", 2).await;
    out_of_scope_by_default(&fx.model, Duration::ZERO);
    let session = fx.session("crash");
    let bill = format!("{session}-bill");
    fx.model
        .set_turn_script(&bill, &routed_to("billing", "billing_show_bill"));
    // The same instance id, as a restarted pod has: its transactional id fences the dead one.
    let instance = fx.instance("crash");
    let mut reader = fx.reader();
    let (replies, events) = (fx.topics.replies.clone(), fx.topics.events.clone());

    let mut first = fx.spawn_child(
        &instance,
        &[("TURNSTILE_FAULT_ABORT_AFTER_SAVES", "1".to_owned())],
    );
    fx.send_text("t1", &session, &bill, "show my bill").await;
    let status = tokio::task::block_in_place(|| first.wait_exit(OUTPUT_TIMEOUT));
    let log = first.log_text();
    let status = status.unwrap_or_else(|| panic!("the fault did not fire; log:\n{log}"));
    assert!(!status.success(), "the process aborted: {status:?}");
    assert!(
        log.contains("Fault injection"),
        "aborted by the fault hook; log:\n{log}"
    );
    assert_eq!(
        fx.tools.executions().len(),
        1,
        "the tool ran before the crash"
    );
    tokio::task::block_in_place(|| reader.poll_for(Duration::from_secs(2)));
    assert!(
        for_turn(&reader.seen, &replies, &bill).is_empty(),
        "nothing of the crashed turn is visible to read_committed"
    );

    let mut second = fx.spawn_child(&instance, &[]);
    wait_for(&mut reader, "the republished reply", |seen| {
        !for_turn(seen, &replies, &bill).is_empty()
    });
    settle(&mut reader);
    let exit = second.terminate(Duration::from_secs(60));
    assert!(
        exit.is_some_and(|s| s.success()),
        "the second worker stops cleanly on SIGTERM: {exit:?}; log:\n{}",
        second.log_text()
    );

    assert_no_duplicates(&reader);
    assert_eq!(
        for_turn(&reader.seen, &replies, &bill).len(),
        1,
        "EV-1: one reply"
    );
    let mut types = event_types(&reader.seen, &events, &bill);
    types.sort();
    assert_eq!(types, vec!["transaction.completed", "transaction.started"]);
    assert_eq!(fx.tools.executions().len(), 1, "EV-1: one tool execution");
    let execute_calls = fx
        .tools
        .calls()
        .iter()
        .filter(|c| c.action == ToolAction::Execute)
        .count();
    assert_eq!(
        execute_calls, 1,
        "LC-4: the outbox was republished, the tool not called"
    );
    assert_eq!(
        model_requests(&fx.model, &bill, Skill::Classifier),
        1,
        "no second classifier request: republished from the outbox"
    );
    assert_eq!(
        model_requests(&fx.model, &bill, Skill::Router),
        1,
        "no second router request: republished from the outbox"
    );
    eprintln!("lc4 crash: {:?}", started.elapsed());
}

/// EV-1: a transaction that failed with outputs in it is aborted without running out its
/// timeout, none of its outputs becomes visible, and the producer commits the next one. A plain
/// `BaseProducer::abort_transaction` does not serve the delivery reports librdkafka waits for,
/// so it stalls the committer (and every revocation waiting on it) for the whole timeout: the
/// 20-30 s stalls once seen when a worker joined mid-stream.
#[tokio::test(flavor = "multi_thread")]
async fn ev1_an_aborted_transaction_publishes_nothing_and_frees_the_producer() {
    let fx = fixture("abort", 1).await;
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &fx.brokers)
        .set("transactional.id", format!("abort-{}", fx.suffix))
        .set("enable.idempotence", "true")
        .create()
        .expect("transactional producer");
    let timeout = Duration::from_secs(30);
    let send = |text: &str| {
        let payload = json!({ "text": text }).to_string();
        producer
            .send(
                BaseRecord::to(&fx.topics.replies)
                    .key("k")
                    .payload(&payload),
            )
            .expect("queued");
    };
    tokio::task::block_in_place(|| {
        producer
            .init_transactions(timeout)
            .expect("init transactions");
        producer.begin_transaction().expect("begin");
        for i in 0..20 {
            send(&format!("aborted {i}"));
        }
        // Not polled: their delivery reports wait in the producer's queue, as in the committer.
        abort_transaction(&producer, Duration::from_secs(60))
            .expect("the abort finishes while delivery reports are outstanding");
        producer
            .begin_transaction()
            .expect("a new transaction right after the abort");
        send("committed");
        producer.commit_transaction(timeout).expect("commit");
    });
    let mut reader = fx.reader();
    wait_for(&mut reader, "the committed reply", |seen| !seen.is_empty());
    settle(&mut reader);
    let texts: Vec<&Value> = reader.seen.iter().map(|m| &m.payload["text"]).collect();
    assert_eq!(
        texts,
        vec!["committed"],
        "only the committed transaction is visible"
    );
}

/// IO-1, EV-1: worker B joins worker A's group mid-stream (cooperative rebalance, drain, commit).
/// Every one of 300 turns of 100 conversations gets exactly one reply and one tool execution, and
/// B really took partitions.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn io1_ev1_a_second_worker_joining_mid_stream_duplicates_nothing() {
    let started = Instant::now();
    let fx = fixture("join", 6).await;
    // Every turn routes to the bill: one tool execution per turn, with its own idempotency key.
    fx.model.set_default(
        Skill::Classifier,
        Behaviour::answer(json!({"decision": "ROUTE", "confidence": 0.96})),
    );
    fx.model.set_default(
        Skill::Router,
        Behaviour::answer(
            json!({"agent": "billing", "intent": "billing_show_bill", "confidence": 0.95}),
        )
        .with_latency(Duration::from_millis(10)),
    );
    const CONVERSATIONS: usize = 100;
    const ROUNDS: usize = 3;
    let sessions: Vec<String> = (0..CONVERSATIONS)
        .map(|c| fx.session(&format!("j{c:03}")))
        .collect();
    let mut expected: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut reader = fx.reader();
    let replies = fx.topics.replies.clone();

    let a = fx
        .start_worker(&fx.instance("join-a"), example_catalog(), |_| {})
        .await;
    let mut b = None;
    for round in 0..ROUNDS {
        for s in &sessions {
            let turn_id = format!("{s}-r{round}");
            fx.send_text("t1", s, &turn_id, "show my bill").await;
            expected
                .entry(format!("t1/{AGENT}/{s}"))
                .or_default()
                .push(turn_id);
        }
        if round == 0 {
            // B joins while A is busy with the first round.
            wait_for(&mut reader, "some replies from worker A", |seen| {
                distinct_turns(seen, &replies) >= 20
            });
            b = Some(
                fx.start_worker(&fx.instance("join-b"), example_catalog(), |_| {})
                    .await,
            );
        }
    }
    let b = b.expect("worker B started");
    let total = CONVERSATIONS * ROUNDS;
    wait_for(&mut reader, "a reply to every turn", |seen| {
        distinct_turns(seen, &replies) >= total
    });
    settle(&mut reader);
    let (a_assigned, b_assigned) = (a.assigned(), b.assigned());
    a.stop();
    b.stop();

    assert!(
        b_assigned > 0,
        "worker B took partitions (A holds {a_assigned}, B {b_assigned})"
    );
    assert_no_duplicates(&reader);
    let mut per_turn: HashMap<&str, usize> = HashMap::new();
    for m in on(&reader.seen, &replies) {
        *per_turn
            .entry(m.turn_id.as_deref().unwrap_or(""))
            .or_default() += 1;
    }
    let repeated: Vec<_> = per_turn.iter().filter(|(_, n)| **n != 1).collect();
    assert!(
        repeated.is_empty(),
        "EV-1: turns with more than one reply: {repeated:?}"
    );
    assert_eq!(per_turn.len(), total, "every produced turn got a reply");
    for (key, turn_ids) in &expected {
        let order: Vec<&str> = on(&reader.seen, &replies)
            .filter(|m| &m.key == key)
            .filter_map(|m| m.turn_id.as_deref())
            .collect();
        assert_eq!(
            order, *turn_ids,
            "IO-1: replies of {key} out of order across the rebalance"
        );
    }
    let executions = fx.tools.executions();
    let keys: HashSet<&str> = executions
        .iter()
        .map(|e| e.idempotency_key.as_str())
        .collect();
    let turns: HashSet<Option<&str>> = executions.iter().map(|e| e.turn_id.as_deref()).collect();
    assert_eq!(executions.len(), total, "one execution per turn");
    assert_eq!(keys.len(), total, "EV-4: one idempotency key per turn");
    assert_eq!(turns.len(), total, "EV-1: no turn executed twice");
    // A replayed call (same key, stored answer) is no new effect; it happens only when a turn
    // outlives the drain budget of a revocation, so it is reported, not failed on.
    let replayed = fx
        .tools
        .calls()
        .iter()
        .filter(|c| c.action == ToolAction::Execute && c.replayed)
        .count();
    eprintln!(
        "join: {total} turns, A ended with {a_assigned} partitions, B with {b_assigned}, \
         {replayed} replayed tool calls, in {:?}",
        started.elapsed()
    );
}

/// A record the worker must refuse: what it is, its Kafka key and payload (either may be
/// absent), and the dead-letter reason expected (IO-3).
type Hostile = (&'static str, Option<Vec<u8>>, Option<Vec<u8>>, &'static str);

/// IO-3: malformed, hostile and unservable records go to the dead-letter topic with their reason
/// and a lossless copy, validate against schemas/dead_letter.v1.json, and never disturb the valid
/// turns around them (same conversations, same partitions).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn io3_malformed_and_hostile_records_are_dead_lettered_and_neighbours_are_served() {
    let started = Instant::now();
    let fx = fixture("dlq", 2).await;
    out_of_scope_by_default(&fx.model, Duration::ZERO);
    let worker = fx
        .start_worker(&fx.instance("dlq-a"), acme_only_catalog(), |c| {
            c.max_payload_bytes = 2048;
        })
        .await;
    let sessions: Vec<String> = (0..3).map(|i| fx.session(&format!("v{i}"))).collect();
    let key_of = |s: &str| format!("acme/{AGENT}/{s}");
    let body = |tenant: &str, agent: &str, session: &str, turn_id: &str| {
        json!({"turn_id": turn_id, "tenant_id": tenant, "agent_id": agent,
               "session_id": session, "text": "hello", "locale": "en"})
    };
    let s0 = sessions[0].clone();
    let k0 = key_of(&s0);
    let mut wrong_type = body("acme", AGENT, &s0, "bad-type");
    wrong_type["text"] = json!(5);
    let mut unknown_field = body("acme", AGENT, &s0, "bad-field");
    unknown_field["colour"] = json!("blue");
    let mut oversized = body("acme", AGENT, &s0, "too-big");
    oversized["text"] = json!("a".repeat(2500));
    let globex = fx.session("globex");
    let nobody = fx.session("nobody");
    // (label, key, payload, expected reason)
    let hostile: Vec<Hostile> = vec![
        (
            "malformed JSON",
            Some(k0.clone().into_bytes()),
            Some(br#"{"turn_id": "x", "tenant_id": "#.to_vec()),
            "undecodable",
        ),
        (
            "wrong type",
            Some(k0.clone().into_bytes()),
            Some(wrong_type.to_string().into_bytes()),
            "schema_violation",
        ),
        (
            "unknown field",
            Some(k0.clone().into_bytes()),
            Some(unknown_field.to_string().into_bytes()),
            "schema_violation",
        ),
        (
            "oversized",
            Some(k0.clone().into_bytes()),
            Some(oversized.to_string().into_bytes()),
            "oversized",
        ),
        (
            "invalid UTF-8",
            Some(k0.clone().into_bytes()),
            Some(b"{\"turn_id\": \"\xff\xfe\"}".to_vec()),
            "invalid_utf8",
        ),
        (
            "unknown agent",
            Some(format!("acme/nobody-bot/{nobody}").into_bytes()),
            Some(
                body("acme", "nobody-bot", &nobody, "no-agent")
                    .to_string()
                    .into_bytes(),
            ),
            "unknown_agent",
        ),
        (
            "unknown tenant",
            Some(format!("globex/{AGENT}/{globex}").into_bytes()),
            Some(
                body("globex", AGENT, &globex, "no-tenant")
                    .to_string()
                    .into_bytes(),
            ),
            "unknown_tenant",
        ),
        (
            "key/body mismatch",
            Some(key_of(&sessions[2]).into_bytes()),
            Some(
                body("acme", AGENT, &sessions[1], "mismatch")
                    .to_string()
                    .into_bytes(),
            ),
            "key_mismatch",
        ),
        (
            "no key",
            None,
            Some(
                body("acme", AGENT, &sessions[1], "keyless")
                    .to_string()
                    .into_bytes(),
            ),
            "key_mismatch",
        ),
        (
            "empty payload",
            Some(k0.clone().into_bytes()),
            Some(Vec::new()),
            "undecodable",
        ),
        (
            "tombstone",
            Some(k0.clone().into_bytes()),
            None,
            "undecodable",
        ),
    ];
    let mut valid_turns = Vec::new();
    let mut produced = Vec::new();
    for (i, (label, key, payload, reason)) in hostile.iter().enumerate() {
        // A valid neighbour before each hostile record, rotating over three conversations.
        let s = &sessions[i % sessions.len()];
        let turn_id = format!("{s}-ok{i}");
        fx.send_text("acme", s, &turn_id, "hello").await;
        valid_turns.push(turn_id);
        let at = fx.send_raw(key.as_deref(), payload.as_deref()).await;
        produced.push((at, *label, key.clone(), payload.clone(), *reason));
    }
    let last = format!("{}-last", sessions[0]);
    fx.send_text("acme", &sessions[0], &last, "hello").await;
    valid_turns.push(last);

    let mut reader = fx.reader();
    let (replies, dead) = (fx.topics.replies.clone(), fx.topics.dead_letters.clone());
    let want_dead = produced.len();
    let want_replies = valid_turns.len();
    wait_for(&mut reader, "every dead letter and reply", |seen| {
        on(seen, &dead).count() >= want_dead && distinct_turns(seen, &replies) >= want_replies
    });
    settle(&mut reader);
    worker.stop();

    assert_no_duplicates(&reader);
    for turn_id in &valid_turns {
        assert_eq!(
            for_turn(&reader.seen, &replies, turn_id).len(),
            1,
            "IO-3: the valid neighbour {turn_id} got its reply"
        );
    }
    let schema = validator("dead_letter");
    let letters: Vec<&ReadMessage> = on(&reader.seen, &dead).collect();
    assert_eq!(
        letters.len(),
        want_dead,
        "one dead letter per hostile record"
    );
    for ((partition, offset), label, key, payload, reason) in &produced {
        let found: Vec<&&ReadMessage> = letters
            .iter()
            .filter(|m| {
                m.payload["original"]["partition"] == json!(partition)
                    && m.payload["original"]["offset"] == json!(offset)
            })
            .collect();
        assert_eq!(
            found.len(),
            1,
            "{label}: one dead letter for p{partition} o{offset}"
        );
        let letter = &found[0].payload;
        assert_valid(&schema, "dead_letter", letter);
        assert_eq!(
            letter["reason"],
            json!(reason),
            "{label}: reason; {letter:#}"
        );
        assert!(
            !letter["detail"].as_str().unwrap_or_default().is_empty(),
            "{label}: the detail explains it"
        );
        let original = &letter["original"];
        assert_eq!(original["topic"], json!(fx.topics.inbound), "{label}");
        assert_eq!(found[0].output_id.as_deref(), letter["output_id"].as_str());
        let key_copy = original["key_base64"]
            .as_str()
            .map(|k| BASE64.decode(k).expect("key_base64 is base64"));
        assert_eq!(key_copy, *key, "{label}: the key is copied exactly");
        let payload_copy = original["payload_base64"]
            .as_str()
            .map(|p| BASE64.decode(p).expect("payload_base64 is base64"));
        match payload.as_deref() {
            // librdkafka may carry an empty value as a null one: both are "no bytes".
            Some([]) => assert!(
                payload_copy.as_deref().is_none_or(<[u8]>::is_empty),
                "{label}: {original}"
            ),
            other => assert_eq!(
                payload_copy.as_deref(),
                other,
                "{label}: exact payload copy"
            ),
        }
        let size = payload.as_ref().map_or(0, Vec::len);
        assert_eq!(original["payload_size"], json!(size), "{label}");
    }
    eprintln!("io3 dead letters: {:?}", started.elapsed());
}

/// IO-2: the replies and events a real conversation produces validate against
/// schemas/reply.v1.json and schemas/event.v1.json, carry their ids in the headers, and the
/// declared content types.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn io2_real_replies_and_events_validate_against_the_schemas() {
    let started = Instant::now();
    let fx = fixture("schema", 2).await;
    let s1 = fx.session("flow");
    let s2 = fx.session("bye");
    let turns = [
        (s1.clone(), format!("{s1}-1"), "cancel my order"),
        (s1.clone(), format!("{s1}-2"), "PED-1001"),
        (s1.clone(), format!("{s1}-3"), "yes"),
        (s1.clone(), format!("{s1}-4"), "I want to talk to a person"),
        (s2.clone(), format!("{s2}-1"), "bye, that is all"),
    ];
    fx.model
        .set_turn_script(&turns[0].1, &routed_to("retail", "retail_order_cancel"));
    fx.model
        .set_turn_script(&turns[3].1, &classified("HUMAN_HANDOFF"));
    fx.model
        .set_turn_script(&turns[4].1, &classified("END_SESSION"));
    let worker = fx
        .start_worker(&fx.instance("schema-a"), example_catalog(), |_| {})
        .await;
    for (session, turn_id, text) in &turns {
        fx.send_text("t1", session, turn_id, text).await;
    }
    let mut reader = fx.reader();
    let (replies, events) = (fx.topics.replies.clone(), fx.topics.events.clone());
    let expected_events = [
        (turns[0].1.clone(), "transaction.started"),
        (turns[2].1.clone(), "transaction.completed"),
        (turns[3].1.clone(), "session.human_handoff.requested"),
        (turns[4].1.clone(), "session.end.requested"),
    ];
    let want_events = expected_events.len();
    wait_for(&mut reader, "every reply and event", |seen| {
        distinct_turns(seen, &replies) >= 5 && on(seen, &events).count() >= want_events
    });
    settle(&mut reader);
    worker.stop();

    assert_no_duplicates(&reader);
    let reply_schema = validator("reply");
    let event_schema = validator("event");
    for (session, turn_id, _) in &turns {
        let got = for_turn(&reader.seen, &replies, turn_id);
        assert_eq!(got.len(), 1, "one reply to {turn_id}");
        let m = got[0];
        assert_valid(&reply_schema, "reply", &m.payload);
        assert_eq!(m.output_id.as_deref(), m.payload["output_id"].as_str());
        assert_eq!(m.payload["turn_id"], json!(turn_id));
        assert_eq!(m.key, format!("t1/{AGENT}/{session}"));
    }
    let statuses: Vec<Value> = turns[..3]
        .iter()
        .map(|(_, t, _)| {
            for_turn(&reader.seen, &replies, t)[0].payload["transaction_status"].clone()
        })
        .collect();
    assert_eq!(
        statuses,
        vec![
            json!("COLLECTING_PARAMETERS"),
            json!("AWAITING_CONFIRMATION"),
            json!("COMPLETED")
        ]
    );
    let all_events: Vec<&ReadMessage> = on(&reader.seen, &events).collect();
    assert_eq!(all_events.len(), want_events, "{}", summary(&reader.seen));
    for (turn_id, kind) in &expected_events {
        assert_eq!(
            event_types(&reader.seen, &events, turn_id),
            vec![kind.to_owned()],
            "events of {turn_id}"
        );
    }
    for m in &all_events {
        assert_valid(&event_schema, "event", &m.payload);
        assert_eq!(
            m.output_id.as_deref(),
            m.payload["id"].as_str(),
            "event id = output_id"
        );
        assert_eq!(m.turn_id.as_deref(), m.payload["turnid"].as_str());
        assert_eq!(json!(m.key), m.payload["subject"]);
    }
    // docs/messages.md, "Topics": replies are application/json, events CloudEvents JSON.
    let reply_types = tokio::task::block_in_place(|| content_types(&fx.brokers, &replies, 5));
    let event_types_seen =
        tokio::task::block_in_place(|| content_types(&fx.brokers, &events, want_events));
    assert_eq!(reply_types.len(), 5);
    assert!(
        reply_types.iter().all(|(ct, _)| ct == CONTENT_TYPE_JSON),
        "reply content-type headers: {reply_types:?}"
    );
    assert_eq!(event_types_seen.len(), want_events);
    assert!(
        event_types_seen
            .iter()
            .all(|(ct, _)| ct == CONTENT_TYPE_CLOUDEVENTS),
        "event content-type headers must be `{CONTENT_TYPE_CLOUDEVENTS}`: {event_types_seen:?}"
    );
    eprintln!("io2 schemas: {:?}", started.elapsed());
}

/// IO-5: a worker process serves /healthz, /readyz (200 once it holds partitions) and /metrics
/// with the documented families after traffic, in valid Prometheus text format (checked by
/// `promtool check metrics` when it is installed, and by a line parser always).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn io5_metrics_health_and_readiness_of_a_running_worker() {
    let started = Instant::now();
    let fx = fixture("ops", 2).await;
    out_of_scope_by_default(&fx.model, Duration::ZERO);
    let session = fx.session("ops");
    let bill = format!("{session}-bill");
    fx.model
        .set_turn_script(&bill, &routed_to("billing", "billing_show_bill"));
    let listen = format!("127.0.0.1:{}", free_port());
    let mut child = fx.spawn_child(&fx.instance("ops"), &[("TURNSTILE_LISTEN", listen.clone())]);
    let base = format!("http://{listen}");
    wait_http(
        &format!("{base}/healthz"),
        200,
        Duration::from_secs(60),
        &child,
    )
    .await;
    let ready = wait_http(
        &format!("{base}/readyz"),
        200,
        Duration::from_secs(60),
        &child,
    )
    .await;
    let ready: Value = serde_json::from_str(&ready).expect("/readyz answers JSON");
    assert!(
        ready["assigned_partitions"].as_u64().unwrap_or(0) > 0,
        "ready means partitions assigned: {ready}"
    );

    fx.send_text("t1", &session, &bill, "show my bill").await;
    fx.send_raw(
        Some(format!("t1/{AGENT}/{session}").as_bytes()),
        Some(b"not json"),
    )
    .await;
    let mut reader = fx.reader();
    let (replies, dead) = (fx.topics.replies.clone(), fx.topics.dead_letters.clone());
    wait_for(&mut reader, "the reply and the dead letter", |seen| {
        !for_turn(seen, &replies, &bill).is_empty() && on(seen, &dead).count() >= 1
    });
    // The conversation's next turn under the same lease reads the row the worker just saved
    // from its checkpoint cache (docs/store.md §7), and is answered.
    let again = format!("{session}-again");
    fx.send_text("t1", &session, &again, "thanks").await;
    wait_for(&mut reader, "the reply to the second turn", |seen| {
        !for_turn(seen, &replies, &again).is_empty()
    });
    let (status, metrics) = http_get(&format!("{base}/metrics"))
        .await
        .unwrap_or_else(|e| panic!("GET /metrics: {e}"));
    assert_eq!(status, 200);
    let exit = child.terminate(Duration::from_secs(60));
    assert!(
        exit.is_some_and(|s| s.success()),
        "SIGTERM stops the worker cleanly (exit 0): {exit:?}; log:\n{}",
        child.log_text()
    );
    assert!(
        child.log_text().contains("Partitions assigned"),
        "IO-5: the log reports the assignment"
    );

    for family in [
        "turnstile_turns_total",
        "turnstile_transaction_transitions_total",
        "turnstile_model_requests_total",
        "turnstile_dead_letters_total",
        "turnstile_turn_duration_seconds_bucket",
    ] {
        assert!(
            metrics.lines().any(|l| l.starts_with(family)),
            "IO-5: /metrics has no {family}:\n{metrics}"
        );
    }
    assert_eq!(
        series_value(
            &metrics,
            "turnstile_dead_letters_total",
            "reason=\"undecodable\""
        ),
        Some(1.0),
        "the dead letter is counted by reason:\n{metrics}"
    );
    let lookups = |result: &str| {
        series_value(
            &metrics,
            "turnstile_checkpoint_cache_lookups_total",
            &format!("result=\"{result}\""),
        )
    };
    assert_eq!(
        (lookups("miss"), lookups("hit")),
        (Some(1.0), Some(1.0)),
        "the first turn read the store, the second the cache:\n{metrics}"
    );
    // Readiness and the in-flight caps as gauges (the alerts compare against them): ready 1
    // while /readyz answers 200, the caps as configured (defaults here).
    let unlabelled = |family: &str| {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{family} ")))
            .and_then(|v| v.trim().parse::<f64>().ok())
    };
    for (family, expected) in [
        ("turnstile_ready", 1.0),
        ("turnstile_in_flight_limit", 10_000.0),
        ("turnstile_in_flight_per_partition_limit", 256.0),
    ] {
        assert_eq!(
            unlabelled(family),
            Some(expected),
            "/metrics: {family} should be {expected}:\n{metrics}"
        );
    }
    let problems = exposition_problems(&metrics);
    assert!(
        problems.is_empty(),
        "IO-5: /metrics is not valid exposition text: {problems:#?}"
    );
    match Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(mut promtool) => {
            if let Some(mut stdin) = promtool.stdin.take() {
                use std::io::Write as _;
                stdin
                    .write_all(metrics.as_bytes())
                    .expect("write to promtool");
            }
            let out = promtool.wait_with_output().expect("promtool output");
            assert!(
                out.status.success(),
                "IO-5: `promtool check metrics` rejects the scrape:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            eprintln!("io5: promtool check metrics accepted the scrape");
        }
        Err(e) => eprintln!(
            "note: promtool not on PATH ({e}); checked /metrics with the line parser only \
             (Debian: apt-get install --no-install-recommends prometheus)"
        ),
    }
    eprintln!("io5 metrics: {:?}", started.elapsed());
}

/// Readiness of a worker that joined the group but got no partition (more replicas than
/// partitions): `/readyz` answers 200 ("group joined … or holds partitions") and
/// `turnstile_ready` is 1, so an idle standby is not reported as broken and a StatefulSet's
/// ordered rollout is not stuck behind it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn io5_a_worker_without_partitions_is_ready_once_it_joined() {
    let started = Instant::now();
    let fx = fixture("idle", 1).await;
    out_of_scope_by_default(&fx.model, Duration::ZERO);
    let (listen_a, listen_b) = (
        format!("127.0.0.1:{}", free_port()),
        format!("127.0.0.1:{}", free_port()),
    );
    let mut a = fx.spawn_child(
        &fx.instance("idle-a"),
        &[("TURNSTILE_LISTEN", listen_a.clone())],
    );
    let ready_a = wait_http(
        &format!("http://{listen_a}/readyz"),
        200,
        Duration::from_secs(60),
        &a,
    )
    .await;
    let mut b = fx.spawn_child(
        &fx.instance("idle-b"),
        &[("TURNSTILE_LISTEN", listen_b.clone())],
    );
    let ready_b = wait_http(
        &format!("http://{listen_b}/readyz"),
        200,
        Duration::from_secs(60),
        &b,
    )
    .await;
    let holds = |body: &str| -> u64 {
        serde_json::from_str::<Value>(body).expect("/readyz answers JSON")["assigned_partitions"]
            .as_u64()
            .unwrap_or(0)
    };
    // The one partition belongs to one of them; the other is ready with none.
    let (_, metrics_b) = http_get(&format!("http://{listen_b}/metrics"))
        .await
        .unwrap_or_else(|e| panic!("GET /metrics: {e}"));
    let (_, ready_a_now) = http_get(&format!("http://{listen_a}/readyz"))
        .await
        .unwrap_or_else(|e| panic!("GET /readyz: {e}"));
    assert_eq!(
        holds(&ready_a_now) + holds(&ready_b),
        1,
        "one partition, one owner: {ready_a} / {ready_a_now} / {ready_b}"
    );
    assert!(
        metrics_b.lines().any(|l| l == "turnstile_ready 1"),
        "turnstile_ready follows /readyz:\n{metrics_b}"
    );
    for child in [&mut a, &mut b] {
        let exit = child.terminate(Duration::from_secs(60));
        assert!(
            exit.is_some_and(|s| s.success()),
            "SIGTERM stops the worker cleanly: {exit:?}; log:\n{}",
            child.log_text()
        );
    }
    eprintln!("io5 idle standby: {:?}", started.elapsed());
}

/// The lag and latency customers feel, from a worker process on one partition where a turn whose
/// classifier call times out (5 s) holds the partition's low-water mark:
/// - `turnstile_consumer_lag_records` is broker-side: while the slow turn runs, the quick turns
///   of other conversations after it finish but nothing past it is committed, so the lag counts
///   them all while `turnstile_partition_lag` (delivered, unfinished) counts only the few still
///   running, and `turnstile_consumer_committed_offset` stands still; once all are committed the
///   lag is 0 and the offset is the partition's end;
/// - `turnstile_turn_age_seconds` runs from the record timestamp, so the slow conversation's next
///   turns, quick to process but queued behind it, are old while their turn duration is short;
/// - the buffer cap is exported as configured.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn io5_broker_lag_and_turn_age_behind_a_slow_turn() {
    const OTHERS: usize = 20;
    // A first turn committed before the rest, then the slow conversation's three, then the others.
    const TOTAL: usize = 1 + 3 + OTHERS;
    let started = Instant::now();
    let fx = fixture("lag", 1).await;
    out_of_scope_by_default(&fx.model, Duration::ZERO);
    // The slow conversation's first turn: the classifier answers after the profile's 5 s timeout.
    fx.model.set_timeout_delay(Duration::from_secs(6));
    let slow = fx.session("slow");
    let first = format!("{slow}-0");
    fx.model
        .set_turn_script(&first, &script(json!({"classifier": "timeout"})));
    let listen = format!("127.0.0.1:{}", free_port());
    let mut child = fx.spawn_child(
        &fx.instance("lag"),
        &[
            ("TURNSTILE_LISTEN", listen.clone()),
            ("TURNSTILE_LAG_INTERVAL_MS", "200".into()),
            ("TURNSTILE_MAX_BUFFERED_PER_PARTITION", "1500".into()),
        ],
    );
    let base = format!("http://{listen}");
    wait_http(
        &format!("{base}/readyz"),
        200,
        Duration::from_secs(60),
        &child,
    )
    .await;
    let scrape = || async {
        http_get(&format!("{base}/metrics"))
            .await
            .unwrap_or_else(|e| panic!("GET /metrics: {e}"))
            .1
    };
    let p0 = "partition=\"0\"";
    let gauge = |m: &str, family: &str| series_value(m, family, p0);
    // Offset 0 committed first, so the lag below is counted from a committed offset.
    let warm = fx.session("warm");
    fx.send_text("t1", &warm, &format!("{warm}-0"), "hello")
        .await;
    let deadline = Instant::now() + OUTPUT_TIMEOUT;
    while gauge(&scrape().await, "turnstile_consumer_committed_offset") != Some(1.0) {
        assert!(
            Instant::now() < deadline,
            "the first turn was not committed in time"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for i in 0..3 {
        fx.send_text("t1", &slow, &format!("{slow}-{i}"), "hello")
            .await;
    }
    for i in 0..OTHERS {
        let session = fx.session(&format!("quick{i}"));
        fx.send_text("t1", &session, &format!("{session}-0"), "hello")
            .await;
    }
    // (broker-side lag, delivered-unfinished, committed offset) seen while the slow turn ran.
    let mut behind: Option<(f64, f64, f64)> = None;
    let deadline = Instant::now() + OUTPUT_TIMEOUT;
    let metrics = loop {
        let m = scrape().await;
        let lag = gauge(&m, "turnstile_consumer_lag_records");
        let delivered = gauge(&m, "turnstile_partition_lag");
        let committed = gauge(&m, "turnstile_consumer_committed_offset");
        if let (Some(l), Some(d), Some(c)) = (lag, delivered, committed) {
            if l >= OTHERS as f64 && behind.is_none_or(|(best, _, _)| l > best) {
                behind = Some((l, d, c));
            }
        }
        if committed == Some(TOTAL as f64) && lag == Some(0.0) {
            break m;
        }
        assert!(
            Instant::now() < deadline,
            "the worker did not commit all {TOTAL} turns with lag 0 in time:\n{m}\nlog:\n{}",
            child.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let exit = child.terminate(Duration::from_secs(60));
    assert!(exit.is_some_and(|s| s.success()), "clean stop: {exit:?}");
    let (lag, delivered, committed) =
        behind.expect("no scrape showed the quick turns as lag behind the slow one");
    assert!(
        committed == 1.0 && delivered <= 5.0,
        "behind the slow turn the committed offset stands at its offset (1) and few turns are \
         delivered and unfinished, while the broker-side lag counts every uncommitted record: \
         lag {lag}, partition_lag {delivered}, committed {committed}"
    );
    let count = |family: &str| {
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{family} ")))
            .and_then(|v| v.trim().parse::<f64>().ok())
    };
    let bucket = |family: &str, le: &str| series_value(&metrics, family, &format!("le=\"{le}\""));
    assert_eq!(
        count("turnstile_turn_age_seconds_count"),
        Some(TOTAL as f64),
        "every committed turn has an age:\n{metrics}"
    );
    // The slow conversation's three turns are older than 2.5 s when committed (the first took
    // 5 s, the next two waited for it), though only the first took long to process.
    assert_eq!(
        bucket("turnstile_turn_age_seconds_bucket", "2.5"),
        Some((OTHERS + 1) as f64),
        "only the quick conversations' turns are younger than 2.5 s:\n{metrics}"
    );
    assert!(
        bucket("turnstile_turn_duration_seconds_bucket", "2.5")
            .is_some_and(|n| n >= (TOTAL - 1) as f64),
        "the queued turns were quick to process (turn duration starts at dequeue):\n{metrics}"
    );
    assert_eq!(
        bucket("turnstile_turn_age_seconds_bucket", "600"),
        Some(TOTAL as f64),
        "the age buckets reach 10 minutes:\n{metrics}"
    );
    assert_eq!(
        count("turnstile_partition_buffer_capacity_records"),
        Some(1500.0),
        "the buffer cap is exported as configured:\n{metrics}"
    );
    eprintln!(
        "io5 lag and turn age: {:?} (lag {lag} behind the slow turn, partition_lag {delivered})",
        started.elapsed()
    );
}

/// One series of a Prometheus scrape: the value of the line `family{labels}` (labels as
/// written by the exporter, e.g. `reason="invalid_json"`), if there is one.
fn series_value(metrics: &str, family: &str, labels: &str) -> Option<f64> {
    let prefix = format!("{family}{{{labels}}} ");
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
}

/// ST-4, in Cassandra: rows planted directly in the checkpoint table, then a turn for each
/// conversation through Kafka, all on one partition.
/// (a) An undecodable checkpoint: the turn is dead-lettered `checkpoint_undecodable`, counted
///     (`turnstile_dead_letters_total` and `turnstile_checkpoint_decode_failures_total`), the row
///     is left byte for byte, and the neighbours after it on the same partition are answered.
/// (b) A seed-era checkpoint (no schema_version, history `{role, content}`, a seed-shaped
///     active_transaction with no id, agent or times): `PED-1001` fills the order id and the reply
///     asks for confirmation; the stored row is now schema_version 2 with the id the migration
///     derives and agent `retail`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn st4_planted_undecodable_and_seed_era_checkpoints() {
    use turnstile::store::cql::{write_timestamp, StoredRow, PHASE_TURN_END};

    let started = Instant::now();
    let fx = fixture("st4", 1).await;
    out_of_scope_by_default(&fx.model, Duration::ZERO);
    let (bad, seed, neighbour) = (
        fx.session("st4-bad"),
        fx.session("st4-seed"),
        fx.session("st4-ok"),
    );
    let garbage: &[u8] = b"{\"schema_version\": 2, \"history\": 7";
    let seed_era = json!({
        "active_transaction": {
            "tool": "retail_order_cancel",
            "status": "COLLECTING_PARAMETERS",
            "arguments": {},
            "missing_parameters": ["order_id"],
            "confirmation_required": true,
            "confirmation_received": false
        },
        "last_transaction": {},
        "transaction_status": "COLLECTING_PARAMETERS",
        "missing_parameters": ["order_id"],
        "history": [
            {"role": "user", "content": "I want to cancel my order"},
            {"role": "assistant", "content": "Which order?"}
        ]
    })
    .to_string()
    .into_bytes();
    let store = connect_store(&fx.keyspace).await;
    for (session, bytes) in [(&bad, garbage), (&seed, seed_era.as_slice())] {
        let row = StoredRow {
            state: bytes.to_vec(),
            in_flight: None,
            applied: None,
            outbox: None,
            epoch: 0,
        };
        // Epoch 0, offset 0: older than any write of the worker that will own the partition.
        let ts = write_timestamp(0, 0, PHASE_TURN_END).expect("timestamp");
        store
            .save_row(&Identity::new("t1", AGENT, session), &row, ts)
            .await
            .unwrap_or_else(|e| panic!("plant the checkpoint of {session}: {e}"));
    }

    let listen = format!("127.0.0.1:{}", free_port());
    let mut child = fx.spawn_child(&fx.instance("st4"), &[("TURNSTILE_LISTEN", listen.clone())]);
    let base = format!("http://{listen}");
    wait_http(
        &format!("{base}/readyz"),
        200,
        Duration::from_secs(60),
        &child,
    )
    .await;
    let (bad_turn, seed_turn, ok_turn) = (
        format!("{bad}-1"),
        format!("{seed}-1"),
        format!("{neighbour}-1"),
    );
    // One partition: the dead-lettered turn comes first, its neighbours after it.
    let bad_at = fx.send_text("t1", &bad, &bad_turn, "hello").await;
    fx.send_text("t1", &neighbour, &ok_turn, "hello").await;
    fx.send_text("t1", &seed, &seed_turn, "PED-1001").await;

    let mut reader = fx.reader();
    let (replies, dead) = (fx.topics.replies.clone(), fx.topics.dead_letters.clone());
    wait_for(&mut reader, "the dead letter and both replies", |seen| {
        on(seen, &dead).count() >= 1
            && !for_turn(seen, &replies, &ok_turn).is_empty()
            && !for_turn(seen, &replies, &seed_turn).is_empty()
    });
    settle(&mut reader);
    let (status, metrics) = http_get(&format!("{base}/metrics"))
        .await
        .unwrap_or_else(|e| panic!("GET /metrics: {e}"));
    assert_eq!(status, 200);
    let exit = child.terminate(Duration::from_secs(60));
    assert!(
        exit.is_some_and(|s| s.success()),
        "the worker stops cleanly: {exit:?}; log:\n{}",
        child.log_text()
    );
    assert_no_duplicates(&reader);

    // (a) dead letter, metric, log; the row untouched; nothing else lost.
    let letters: Vec<&ReadMessage> = on(&reader.seen, &dead).collect();
    assert_eq!(
        letters.len(),
        1,
        "one dead letter: {}",
        summary(&reader.seen)
    );
    let letter = &letters[0].payload;
    assert_valid(&validator("dead_letter"), "dead_letter", letter);
    assert_eq!(letter["reason"], "checkpoint_undecodable", "{letter:#}");
    assert_eq!(
        (
            &letter["original"]["partition"],
            &letter["original"]["offset"]
        ),
        (&json!(bad_at.0), &json!(bad_at.1)),
        "the dead letter is the planted conversation's turn: {letter:#}"
    );
    assert!(for_turn(&reader.seen, &replies, &bad_turn).is_empty());
    assert_eq!(
        series_value(
            &metrics,
            "turnstile_dead_letters_total",
            "reason=\"checkpoint_undecodable\""
        ),
        Some(1.0),
        "ST-4: the dead letter is counted by reason:\n{metrics}"
    );
    assert_eq!(
        series_value(
            &metrics,
            "turnstile_checkpoint_decode_failures_total",
            "reason=\"invalid_json\""
        ),
        Some(1.0),
        "ST-4: the undecodable checkpoint is counted by reason:\n{metrics}"
    );
    assert!(
        child.log_text().contains("checkpoint_undecodable"),
        "ST-4: the log reports it"
    );
    let bad_row = store
        .load_row(&Identity::new("t1", AGENT, &bad))
        .await
        .expect("load the planted row")
        .expect("the planted row is still there");
    assert_eq!(
        bad_row.state, garbage,
        "ST-4: never replaced, left for inspection"
    );
    assert_eq!(
        for_turn(&reader.seen, &replies, &ok_turn).len(),
        1,
        "the neighbour on the same partition is answered"
    );

    // (b) the seed-era checkpoint migrated and continued.
    let reply = &for_turn(&reader.seen, &replies, &seed_turn)[0].payload;
    assert_eq!(
        reply["transaction_status"], "AWAITING_CONFIRMATION",
        "{reply}"
    );
    let text = reply["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("PED-1001") && text.to_lowercase().contains("confirm"),
        "the reply asks to confirm the order: {text}"
    );
    let row = store
        .load_row(&Identity::new("t1", AGENT, &seed))
        .await
        .expect("load the migrated row")
        .expect("the migrated row");
    let stored: Value = serde_json::from_slice(&row.state).expect("the stored row is JSON");
    let tx = &stored["active_transaction"];
    assert_eq!(stored["schema_version"], 2, "{stored:#}");
    let migrated_id = turnstile::domain::state::decode(&seed_era)
        .expect("the seed-era bytes decode")
        .active_transaction
        .map(|t| t.id)
        .unwrap_or_default();
    assert_eq!(migrated_id.len(), 36, "a UUID");
    assert_eq!(
        tx["id"],
        json!(migrated_id),
        "EV-4: the id derived from the stored bytes"
    );
    assert_eq!(tx["agent"], "retail", "{stored:#}");
    assert_eq!(tx["status"], "AWAITING_CONFIRMATION", "{stored:#}");
    assert_eq!(tx["arguments"], json!({"order_id": "PED-1001"}));
    assert_eq!(stored["applied_turn_ids"], json!([seed_turn]));
    eprintln!("st4 planted checkpoints: {:?}", started.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_failure_log_line_names_its_turn() {
    // An operator reading a fallback in the logs must find the conversation: the line carries the
    // turn's span (topic, partition, offset, tenant, turn id).
    let fx = fixture("logturn", 1).await;
    let session = fx.session("fails");
    let turn_id = format!("{session}-1");
    fx.model
        .set_turn_script(&turn_id, &script(json!({"classifier": "error"})));
    let mut reader = fx.reader();
    let mut worker = fx.spawn_child(&fx.instance("logturn-a"), &[]);
    fx.send_text("t1", &session, &turn_id, "what's the weather like?")
        .await;
    let replies = fx.topics.replies.clone();
    wait_for(&mut reader, "the reply", |seen| {
        !for_turn(seen, &replies, &turn_id).is_empty()
    });
    let log = worker.log_text();
    worker.kill();
    let line = log
        .lines()
        .find(|l| l.contains("Model call failed"))
        .unwrap_or_else(|| panic!("no model failure logged:\n{log}"));
    let entry: Value = serde_json::from_str(line).expect("JSON log line");
    assert_eq!(entry["span"]["turn_id"], json!(turn_id), "{line}");
    assert_eq!(entry["span"]["tenant_id"], json!("t1"), "{line}");
    assert!(entry["span"]["offset"].is_number(), "{line}");
    assert_eq!(entry["fields"]["skill"], json!("classifier"), "{line}");
}
