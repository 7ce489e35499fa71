//! `turnstile scenarios --e2e`: plays the scenario files through the real worker. Kafka in, Kafka
//! out, checkpoints in the CQL store, the scripted model and tools served over real HTTP; only the
//! broker and the store must already run (`bash scripts/services.sh up`).
//!
//! Per run: one suffix that every topic, group, instance id, session id and turn id carries,
//! one shared keyspace ([`KEYSPACE`], unique session ids keep runs apart), one model server and
//! one tool server (scripts keyed by the unique turn ids), and one worker child process per
//! distinct (`config`, `settings`) pair, with its own topics and consumer group.
//!
//! A turn is done when its reply is visible to a `read_committed` reader (or, for a turn without
//! reply text, when the worker's group has committed past it). Then its events are read back
//! from Kafka, its state from the store, its model and tool calls from the servers, and the same
//! checker as the in-process runner ([`check_turn`]) judges them.

// Test harness, never in a release build: declared behind `#[cfg(feature = "harness")]`.
// Ungating it fails `cargo check --lib --bins` (no features; scripts/test.sh) here.
#[cfg(not(feature = "harness"))]
compile_error!(
    "src/scenario/e2e.rs is test harness: keep its `mod` line behind #[cfg(feature = \"harness\")]"
);

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::FutureProducer;
use rdkafka::{Offset, TopicPartitionList};
use serde_json::{Map, Value};
use tokio::runtime::Runtime;

use crate::config::agents::load_catalog;
use crate::config::settings::{apply_overrides, SETTING_NAMES};
use crate::domain::catalog::Settings;
use crate::domain::decision::Skill;
use crate::domain::state::AgentState;
use crate::domain::turn::Identity;
use crate::message::{format_rfc3339_ms, Topics};
use crate::pipeline::decode_record;
use crate::scenario::format::{load_scenario, Scenario, TurnInputSpec};
use crate::scenario::runner::{
    check_turn, collect_files, RunReport, ScenarioResult, TurnView, DEFAULT_CONFIG,
    SCENARIO_EPOCH_MS,
};
use crate::store::cql::{CqlConfig, ScyllaCheckpointStore};
use crate::testkit::bus::{self, ReadMessage};
use crate::testkit::model_server::ModelServer;
use crate::testkit::tool_server::{ToolAction, ToolServer};
use crate::testkit::worker_process::{self, WorkerEnv};

/// The keyspace every run shares; session ids carry the run suffix, so runs never meet.
pub const KEYSPACE: &str = "turnstile_e2e";
/// Topic names start with this, then the run suffix: `turnstile-e2e.<run>.w<n>.turns`.
pub const TOPIC_PREFIX: &str = "turnstile-e2e";
/// The profiles every worker loads; the model base URL is overridden to the model server.
pub const PROFILES: &str = "config/profiles.example.yaml";
/// Worker logs go to `<LOG_ROOT>/<run>/worker-<n>.log`.
pub const LOG_ROOT: &str = "target/e2e";

/// How long one turn (or one redelivery) may take before the scenario fails.
const TURN_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a worker may take from spawn to `/readyz` answering 200.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// After a turn is done, how long the reader may take to read everything appended to the output
/// topics up to then (the turn's events are in its reply's transaction, but the commit markers
/// land on each partition separately, so they may become readable a little later).
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(10);
/// After the group committed past a turn that showed no reply yet, how long to keep looking.
const NO_REPLY_GRACE: Duration = Duration::from_secs(1);
/// How often the worker group's committed offsets are asked for while waiting.
const COMMIT_PROBE_EVERY: Duration = Duration::from_millis(250);
/// How long a stopping worker gets between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);
const INBOUND_PARTITIONS: i32 = 4;
/// The smallest session timeout the worker accepts: a SIGKILLed member is evicted soonest, and
/// static membership lets its successor take the partitions back without waiting for that.
const SESSION_TIMEOUT_MS: u64 = 6000;
/// Must stay below the session timeout (the worker validates it).
const DRAIN_BUDGET_MS: u64 = 2000;
/// A short batch interval: each turn waits for one commit before its reply is visible.
const COMMIT_INTERVAL_MS: u64 = 20;
const LOG_TAIL_LINES: usize = 30;

/// Runs every scenario under `paths` through real workers. `Err` is a setup problem (services
/// unreachable, servers or topics not created): the caller exits 64.
pub fn run_paths(paths: &[PathBuf]) -> Result<RunReport, String> {
    let files = collect_files(paths)?;
    let mut loaded: Vec<Result<Scenario, ScenarioResult>> = Vec::with_capacity(files.len());
    for file in &files {
        loaded.push(load_scenario(file).map_err(|e| {
            ScenarioResult {
                file: file.display().to_string(),
                name: file
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                failure: Some(e.to_string()),
            }
        }));
    }
    let started = Instant::now();
    let mut run = Run::start()?;
    eprintln!(
        "turnstile scenarios --e2e: run {} ({} files); worker logs under {}",
        run.id,
        files.len(),
        run.log_dir.display()
    );
    // Every worker a scenario will need is started up front, so their start-ups overlap.
    let mut plans: Vec<Result<usize, String>> = Vec::with_capacity(loaded.len());
    for scenario in &loaded {
        plans.push(match scenario {
            Ok(scenario) => run.worker_for(scenario)?,
            // Never used: a scenario that did not load already has its verdict.
            Err(_) => Err(String::new()),
        });
    }
    let mut report = RunReport::default();
    for (index, (scenario, plan)) in loaded.into_iter().zip(plans).enumerate() {
        let result = match scenario {
            Err(failed) => failed,
            Ok(scenario) => {
                let failure = match plan {
                    Err(why) => Some(why),
                    Ok(w) => run.play(&scenario, index + 1, w).err(),
                };
                ScenarioResult {
                    file: scenario.file.clone(),
                    name: scenario.name.clone(),
                    failure,
                }
            }
        };
        report.results.push(result);
    }
    run.finish(report.failed() == 0);
    if !run.without_reply.is_empty() {
        eprintln!(
            "turnstile scenarios --e2e: {} turn(s) published no reply: {}",
            run.without_reply.len(),
            run.without_reply.join(", ")
        );
    }
    eprintln!(
        "turnstile scenarios --e2e: run {} took {:.1} s",
        run.id,
        started.elapsed().as_secs_f64()
    );
    Ok(report)
}

/// Everything one run shares.
struct Run {
    id: String,
    brokers: String,
    contact: String,
    store: ScyllaCheckpointStore,
    model: ModelServer,
    tools: Option<ToolServer>,
    producer: FutureProducer,
    log_dir: PathBuf,
    /// The binary the workers run (see [`worker_process::snapshot_binary`]).
    exe: PathBuf,
    /// Agents config path → its load error, so a bad config fails its scenarios like in process.
    configs: BTreeMap<String, Option<String>>,
    /// (config, canonical settings) → index into `workers`.
    keys: BTreeMap<(String, String), usize>,
    workers: Vec<Worker>,
    /// Turns that published no reply (done by the committed offset instead): every engine path
    /// is meant to answer, so these are reported.
    without_reply: Vec<String>,
    /// Last, so it is dropped last: the servers and the store session run on it.
    rt: Runtime,
}

impl Run {
    fn start() -> Result<Run, String> {
        let id = bus::unique_suffix();
        let brokers = bus::brokers();
        let contact = crate::testkit::cql::contact();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the async runtime: {e}"))?;
        check_kafka(&brokers)?;
        let cql = CqlConfig {
            contact_points: contact.split(',').map(|s| s.trim().to_owned()).collect(),
            keyspace: KEYSPACE.into(),
            ..CqlConfig::default()
        };
        let store = rt
            .block_on(async {
                ScyllaCheckpointStore::migrate(&cql).await?;
                ScyllaCheckpointStore::connect(&cql).await
            })
            .map_err(|e| {
                format!(
                    "the CQL store at {contact} is unreachable or refused the keyspace \
                     {KEYSPACE}: {e} (run `bash scripts/services.sh up`)"
                )
            })?;
        let model = rt
            .block_on(ModelServer::try_start())
            .map_err(|e| format!("cannot start the model test server: {e}"))?;
        let tools = rt
            .block_on(ToolServer::start())
            .map_err(|e| format!("cannot start the tool test server: {e}"))?;
        let producer = {
            let _runtime = rt.enter();
            bus::turn_producer(&brokers)?
        };
        let log_dir = Path::new(LOG_ROOT).join(&id);
        std::fs::create_dir_all(&log_dir)
            .map_err(|e| format!("cannot create {}: {e}", log_dir.display()))?;
        let exe = worker_process::snapshot_binary(&log_dir)?;
        Ok(Run {
            id,
            brokers,
            contact,
            store,
            model,
            tools: Some(tools),
            producer,
            log_dir,
            exe,
            configs: BTreeMap::new(),
            keys: BTreeMap::new(),
            workers: Vec::new(),
            without_reply: Vec::new(),
            rt,
        })
    }

    /// The worker for this scenario's config and settings, started on first need. The inner
    /// `Err` fails the scenario with the same words as the in-process runner; the outer one is a
    /// setup error (topics or the process could not be created).
    fn worker_for(&mut self, scenario: &Scenario) -> Result<Result<usize, String>, String> {
        let config = scenario
            .config
            .clone()
            .unwrap_or_else(|| DEFAULT_CONFIG.into());
        let load_error = self.configs.entry(config.clone()).or_insert_with(|| {
            load_catalog(Path::new(&config))
                .err()
                .map(|e| e.to_string())
        });
        if let Some(e) = load_error {
            return Ok(Err(format!("config: {e}")));
        }
        if let Err(e) = apply_overrides(&Settings::default(), &scenario.settings, &scenario.file) {
            return Ok(Err(format!("settings: {e}")));
        }
        let canonical = Value::Object(scenario.settings.clone()).to_string();
        let key = (config.clone(), canonical);
        if let Some(&w) = self.keys.get(&key) {
            return Ok(Ok(w));
        }
        let n = self.workers.len() + 1;
        let topics = Topics {
            inbound: format!("{TOPIC_PREFIX}.{}.w{n}.turns", self.id),
            replies: format!("{TOPIC_PREFIX}.{}.w{n}.replies", self.id),
            events: format!("{TOPIC_PREFIX}.{}.w{n}.events", self.id),
            dead_letters: format!("{TOPIC_PREFIX}.{}.w{n}.dead-letters", self.id),
        };
        let setup = |e: String| format!("worker {n}: {e}");
        self.rt
            .block_on(bus::create_topics(
                &self.brokers,
                &topics,
                INBOUND_PARTITIONS,
            ))
            .map_err(setup)?;
        let reader = Outputs::new(
            &self.brokers,
            &[&topics.replies, &topics.events, &topics.dead_letters],
        )
        .map_err(setup)?;
        let group_id = format!("{TOPIC_PREFIX}-{}-w{n}", self.id);
        // read_uncommitted so that watermarks are high watermarks, not last stable offsets.
        let offsets: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &self.brokers)
            .set("group.id", &group_id)
            .set("enable.auto.commit", "false")
            .set("isolation.level", "read_uncommitted")
            .create()
            .map_err(|e| setup(format!("offsets probe: {e}")))?;
        let env = self.worker_env(&config, &scenario.settings, &topics, &group_id, n)?;
        let mut worker = Worker {
            n,
            exe: self.exe.clone(),
            env,
            topics,
            child: None,
            port: 0,
            log_path: self.log_dir.join(format!("worker-{n}.log")),
            reader,
            offsets,
            ready: false,
        };
        worker.spawn().map_err(setup)?;
        self.workers.push(worker);
        self.keys.insert(key, n - 1);
        Ok(Ok(n - 1))
    }

    /// The child's whole environment: the run's Kafka names and servers, then the scenario's
    /// settings by their environment names (values as the environment spells them).
    fn worker_env(
        &self,
        config: &str,
        settings: &Map<String, Value>,
        topics: &Topics,
        group_id: &str,
        n: usize,
    ) -> Result<Vec<(String, String)>, String> {
        let shared = WorkerEnv {
            log_filter: std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
            config: PathBuf::from(config),
            profiles: PathBuf::from(PROFILES),
            brokers: self.brokers.clone(),
            group_id: group_id.to_owned(),
            topics: topics.clone(),
            keyspace: KEYSPACE.to_owned(),
            cql_contact: self.contact.clone(),
            model_base_url: self.model.base_url(),
            tools_base_url: self
                .tools
                .as_ref()
                .map(ToolServer::base_url)
                .unwrap_or_default(),
            session_timeout_ms: SESSION_TIMEOUT_MS,
            drain_budget_ms: DRAIN_BUDGET_MS,
            commit_interval_ms: Some(COMMIT_INTERVAL_MS),
        };
        let mut env = shared.vars()?;
        // The same instance id across restarts: static membership hands the partitions
        // straight back, and the transactional id fences the killed incarnation.
        env.push((
            "TURNSTILE_INSTANCE_ID".into(),
            format!("e2e-{}-w{n}", self.id),
        ));
        for (name, value) in settings {
            // `apply_overrides` accepted the block, so every name is known; null means "the
            // default", which an unset variable gives.
            let text = match value {
                Value::Null => continue,
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            if SETTING_NAMES.contains(&name.as_str()) {
                env.push((name.clone(), text));
            }
        }
        Ok(env)
    }

    /// Plays one scenario on worker `w`; `Err` says which turn failed and why.
    fn play(&mut self, scenario: &Scenario, index: usize, w: usize) -> Result<(), String> {
        let identity = Identity::new(
            &scenario.identity.tenant_id,
            &scenario.identity.agent_id,
            &format!("{}-{}-{index}", scenario.identity.session_id, self.id),
        );
        self.ready(w)?;
        let mut clock = SCENARIO_EPOCH_MS;
        for (i, spec) in scenario.turns.iter().enumerate() {
            let n = i + 1;
            clock += spec.after_ms;
            if spec.restart {
                self.restart(w)
                    .map_err(|e| format!("turn {n}, restart: {e}"))?;
            }
            let turn_id = format!("e2e-{}-{index}-{n}", self.id);
            // Scripts before the turn exists: the worker may call the model at once.
            self.model.set_turn_script(&turn_id, &spec.model);
            if let Some(tools) = &self.tools {
                tools.set_turn_script(&turn_id, &spec.tools);
            }
            let (text, action) = match &spec.input {
                TurnInputSpec::Text(t) => (Some(t.as_str()), None),
                TurnInputSpec::Action(a) => (None, Some(a.as_str())),
            };
            let payload = bus::turn_json(
                &identity.tenant_id,
                &identity.agent_id,
                &identity.session_id,
                &turn_id,
                text,
                action,
                spec.locale.tag(),
                Some(&format_rfc3339_ms(clock)),
            );
            let at = self
                .produce(w, &identity, &payload)
                .map_err(|e| format!("turn {n}: {e}"))?;
            self.await_turn(w, &turn_id, at, true)
                .map_err(|e| format!("turn {n}: {e}"))?;
            let view = self
                .view(w, &identity, &turn_id)
                .map_err(|e| format!("turn {n}: {e}"))?;
            if view.replies.is_empty() {
                self.without_reply
                    .push(format!("{} turn {n}", scenario.file));
            }
            check_turn(spec, &view).map_err(|e| format!("turn {n}, {e}"))?;
            if spec.redeliver {
                self.redeliver(w, &identity, &turn_id, &payload, &view)
                    .map_err(|e| format!("turn {n}, redeliver: {e}"))?;
            }
        }
        Ok(())
    }

    fn produce(&self, w: usize, identity: &Identity, payload: &[u8]) -> Result<(i32, i64), String> {
        let topic = self.workers[w].topics.inbound.clone();
        self.rt.block_on(bus::produce(
            &self.producer,
            &topic,
            &identity.key(),
            payload,
        ))
    }

    /// Waits until `turn_id`'s reply is visible to a `read_committed` reader; with
    /// `reply_expected` false (a redelivery), until the group committed past `at` instead.
    fn await_turn(
        &mut self,
        w: usize,
        turn_id: &str,
        at: (i32, i64),
        reply_expected: bool,
    ) -> Result<(), String> {
        let started = Instant::now();
        let mut last_probe: Option<Instant> = None;
        let mut committed_since: Option<Instant> = None;
        loop {
            let worker = &mut self.workers[w];
            if reply_expected && !replies_of(&worker.reader.seen, turn_id).is_empty() {
                break;
            }
            if let Some(dead) = dead_letter_of(&worker.reader.seen, &worker.topics, at) {
                return Err(format!("the worker dead-lettered the turn: {dead}"));
            }
            if let Some(exited) = worker.exited() {
                worker.ready = false;
                return Err(format!(
                    "the worker exited ({}) while the turn was pending{}",
                    exited.text,
                    worker.log_tail()
                ));
            }
            if committed_since.is_none()
                && last_probe.is_none_or(|t| t.elapsed() >= COMMIT_PROBE_EVERY)
            {
                last_probe = Some(Instant::now());
                if worker.committed(at.0).is_some_and(|c| c > at.1) {
                    committed_since = Some(Instant::now());
                }
            }
            if let Some(since) = committed_since {
                // Outputs commit in the offset's transaction: once the offset shows, a reply
                // would show too, given one more fetch.
                if !reply_expected || since.elapsed() >= NO_REPLY_GRACE {
                    break;
                }
            }
            if started.elapsed() >= TURN_TIMEOUT {
                return Err(format!(
                    "timed out after {} s: no reply with turn_id {turn_id} on {} (inbound \
                     partition {}, offset {}) was visible to a read_committed reader, and the \
                     worker's group did not commit past it{}",
                    TURN_TIMEOUT.as_secs(),
                    worker.topics.replies,
                    at.0,
                    at.1,
                    worker.log_tail()
                ));
            }
            worker.reader.poll_for(Duration::from_millis(50));
        }
        self.workers[w].catch_up();
        Ok(())
    }

    /// What the turn did, read back from Kafka, the store and the test servers.
    fn view(&self, w: usize, identity: &Identity, turn_id: &str) -> Result<TurnView, String> {
        let seen = &self.workers[w].reader.seen;
        let replies = replies_of(seen, turn_id);
        let events = events_of(seen, turn_id);
        for list in [&replies, &events] {
            if let Some(id) = repeated_output_id(list) {
                return Err(format!(
                    "output {id} is visible twice to a read_committed reader (EV-1: each \
                     output exactly once)"
                ));
            }
        }
        Ok(TurnView {
            state: self.state(identity)?,
            replies: replies
                .iter()
                .map(|m| text_field(&m.payload, "text"))
                .collect(),
            events: events
                .iter()
                .map(|m| text_field(&m.payload, "type"))
                .collect(),
            route: replies
                .first()
                .and_then(|m| m.payload.get("route"))
                .and_then(Value::as_str)
                .map(str::to_owned),
            tool_calls: self.tool_calls(turn_id),
            model_calls: self.model_calls(turn_id),
        })
    }

    /// Delivers the same turn again and checks that nothing changed (EV-1).
    fn redeliver(
        &mut self,
        w: usize,
        identity: &Identity,
        turn_id: &str,
        payload: &[u8],
        first: &TurnView,
    ) -> Result<(), String> {
        let before_calls = self.execute_calls(turn_id);
        let at = self.produce(w, identity, payload)?;
        self.await_turn(w, turn_id, at, false)?;
        let after = self.view(w, identity, turn_id)?;
        let new_replies = &after.replies[first.replies.len().min(after.replies.len())..];
        let new_events = &after.events[first.events.len().min(after.events.len())..];
        let new_calls = self.execute_calls(turn_id).saturating_sub(before_calls);
        let state_changed = after.state != first.state;
        if !new_replies.is_empty() || !new_events.is_empty() || new_calls > 0 || state_changed {
            return Err(format!(
                "the second delivery changed something (EV-1): replies {new_replies:?}, events \
                 {new_events:?}, tool calls {new_calls}{}",
                if state_changed {
                    ", and the stored state"
                } else {
                    ""
                }
            ));
        }
        Ok(())
    }

    fn state(&self, identity: &Identity) -> Result<AgentState, String> {
        let row = self
            .rt
            .block_on(self.store.load_row(identity))
            .map_err(|e| format!("cannot read the checkpoint of {}: {e}", identity.key()))?;
        match row {
            None => Ok(AgentState::default()),
            Some(row) => decode_record(&row.state, row.in_flight.as_deref())
                .map(|(state, _)| state)
                .map_err(|e| {
                    format!(
                        "the stored checkpoint of {} does not decode: {e}",
                        identity.key()
                    )
                }),
        }
    }

    /// Executions of the turn, one per idempotency key in first-call order, retries included
    /// (a retryable failure decides nothing at the server but is still one execution).
    fn tool_calls(&self, turn_id: &str) -> Vec<(String, Value)> {
        let Some(tools) = &self.tools else {
            return Vec::new();
        };
        let mut keys: Vec<Option<String>> = Vec::new();
        let mut calls = Vec::new();
        for call in tools.calls() {
            if call.turn_id.as_deref() != Some(turn_id) || call.action != ToolAction::Execute {
                continue;
            }
            if keys.contains(&call.idempotency_key) {
                continue;
            }
            keys.push(call.idempotency_key.clone());
            let arguments = call.body.get("arguments").cloned().unwrap_or(Value::Null);
            calls.push((call.tool, arguments));
        }
        calls
    }

    /// Every execution request of the turn (attempts too): a redelivery must add none.
    fn execute_calls(&self, turn_id: &str) -> usize {
        self.tools.as_ref().map_or(0, |tools| {
            tools
                .calls()
                .iter()
                .filter(|c| {
                    c.turn_id.as_deref() == Some(turn_id) && c.action == ToolAction::Execute
                })
                .count()
        })
    }

    fn model_calls(&self, turn_id: &str) -> Vec<Skill> {
        self.model
            .requests()
            .iter()
            .filter(|r| r.turn_id.as_deref() == Some(turn_id))
            .filter_map(|r| match r.skill.as_deref() {
                Some("classifier") => Some(Skill::Classifier),
                Some("router") => Some(Skill::Router),
                Some("interpreter") => Some(Skill::Interpreter),
                _ => None,
            })
            .collect()
    }

    /// Makes sure worker `w` runs and answers `/readyz` (respawning it after a crash).
    fn ready(&mut self, w: usize) -> Result<(), String> {
        let worker = &mut self.workers[w];
        if worker.ready && worker.exited().is_none() {
            return Ok(());
        }
        if worker.exited().is_some() {
            worker.spawn()?;
        }
        worker.wait_ready()
    }

    /// SIGKILL, then a new process with the same identity: only Kafka and the store survive.
    fn restart(&mut self, w: usize) -> Result<(), String> {
        let worker = &mut self.workers[w];
        worker.kill();
        worker.spawn()?;
        worker.wait_ready()
    }

    /// Stops every worker and server; deletes the run's topics when everything passed (a failed
    /// run keeps them, with the logs, for inspection).
    fn finish(&mut self, all_passed: bool) {
        for worker in &mut self.workers {
            worker.stop();
        }
        // The snapshot is only for this run; removing it frees a replaced binary's disk space.
        let _ = std::fs::remove_file(&self.exe);
        self.rt.block_on(self.model.shutdown());
        if let Some(tools) = self.tools.take() {
            self.rt.block_on(tools.shutdown());
        }
        if all_passed && !self.workers.is_empty() {
            let names: Vec<String> = self
                .workers
                .iter()
                .flat_map(|w| {
                    let t = &w.topics;
                    [
                        t.inbound.clone(),
                        t.replies.clone(),
                        t.events.clone(),
                        t.dead_letters.clone(),
                    ]
                })
                .collect();
            if let Err(e) = self.rt.block_on(delete_topics(&self.brokers, &names)) {
                eprintln!("turnstile scenarios --e2e: could not delete the run's topics: {e}");
            }
        }
    }
}

/// One worker child process and what the runner keeps to watch it.
struct Worker {
    n: usize,
    exe: PathBuf,
    env: Vec<(String, String)>,
    topics: Topics,
    child: Option<Child>,
    port: u16,
    log_path: PathBuf,
    reader: Outputs,
    /// A consumer in the worker's group that never subscribes: it only reads committed offsets
    /// and watermarks.
    offsets: BaseConsumer,
    ready: bool,
}

impl Worker {
    /// Starts `turnstile run` with the worker's environment on a free loopback port.
    fn spawn(&mut self) -> Result<(), String> {
        let port = worker_process::free_port()?;
        let mut env = self.env.clone();
        env.push(("TURNSTILE_LISTEN".into(), format!("127.0.0.1:{port}")));
        let banner = format!("e2e runner: starting worker {} on port {port}", self.n);
        self.child = Some(worker_process::spawn(
            &self.exe,
            &env,
            &self.log_path,
            &banner,
        )?);
        self.port = port;
        self.ready = false;
        Ok(())
    }

    /// Polls `/readyz` until 200 (group joined, store and broker reachable).
    fn wait_ready(&mut self) -> Result<(), String> {
        let started = Instant::now();
        let mut respawns = 0;
        loop {
            if let Some(exited) = self.exited() {
                // The port picked may have been taken in between; one more try then.
                if exited.code == Some(64) && respawns < 2 && self.log_mentions("TURNSTILE_LISTEN")
                {
                    respawns += 1;
                    self.spawn()?;
                    continue;
                }
                return Err(format!(
                    "worker {} exited ({}) before it was ready{}",
                    self.n,
                    exited.text,
                    self.log_tail()
                ));
            }
            if worker_process::readyz(self.port) {
                self.ready = true;
                return Ok(());
            }
            if started.elapsed() >= READY_TIMEOUT {
                return Err(format!(
                    "worker {} was not ready (/readyz on 127.0.0.1:{}) within {} s{}",
                    self.n,
                    self.port,
                    READY_TIMEOUT.as_secs(),
                    self.log_tail()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// How the child ended, when it has.
    fn exited(&mut self) -> Option<Exited> {
        match self.child.as_mut().map(Child::try_wait) {
            Some(Ok(Some(status))) => Some(Exited {
                code: status.code(),
                text: status.to_string(),
            }),
            // No child, or it cannot be asked: treat it as gone so the caller respawns.
            None => Some(Exited {
                code: None,
                text: "not running".into(),
            }),
            Some(Err(e)) => Some(Exited {
                code: None,
                text: format!("cannot be asked: {e}"),
            }),
            Some(Ok(None)) => None,
        }
    }

    /// SIGKILL and reap.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            worker_process::kill(&mut child);
        }
        self.ready = false;
    }

    /// SIGTERM, so the worker drains and leaves its group; SIGKILL if it does not stop in time.
    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            worker_process::terminate(&mut child, STOP_GRACE);
        }
    }

    /// The group's committed offset of inbound `partition` (the next offset to process).
    fn committed(&self, partition: i32) -> Option<i64> {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition(&self.topics.inbound, partition);
        let committed = self
            .offsets
            .committed_offsets(tpl, Duration::from_secs(5))
            .ok()?;
        let element = committed.find_partition(&self.topics.inbound, partition)?;
        match element.offset() {
            Offset::Offset(o) => Some(o),
            _ => None,
        }
    }

    /// Reads the output topics up to their current high watermarks: everything the worker has
    /// appended so far that is committed (or aborted) is then seen (or skipped).
    fn catch_up(&mut self) {
        let mut marks = Vec::new();
        for (topic, partition) in &self.reader.partitions {
            if let Ok((_, high)) =
                self.offsets
                    .fetch_watermarks(topic, *partition, Duration::from_secs(5))
            {
                marks.push((topic.clone(), *partition, high));
            }
        }
        let started = Instant::now();
        while !self.reader.caught_up(&marks) && started.elapsed() < CATCH_UP_TIMEOUT {
            self.reader.poll_for(Duration::from_millis(20));
        }
    }

    fn log_text(&self) -> String {
        let mut text = String::new();
        if let Ok(mut f) = File::open(&self.log_path) {
            let _ = f.read_to_string(&mut text);
        }
        text
    }

    fn log_mentions(&self, needle: &str) -> bool {
        self.log_text()
            .rsplit("----- e2e runner:")
            .next()
            .is_some_and(|last| last.contains(needle))
    }

    /// The last lines of the worker's log, for a failure message.
    fn log_tail(&self) -> String {
        let text = self.log_text();
        let lines: Vec<&str> = text.lines().collect();
        let tail = &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..];
        let mut out = format!("\nlast lines of {}:", self.log_path.display());
        for line in tail {
            let short: String = line.chars().take(400).collect();
            out.push_str("\n  ");
            out.push_str(&short);
        }
        out
    }
}

/// How a worker process ended.
struct Exited {
    code: Option<i32>,
    text: String,
}

impl Drop for Worker {
    /// A runner that returns early must not leave workers behind.
    fn drop(&mut self) {
        self.kill();
    }
}

/// The worker's output topics read from the beginning with `read_committed`, as a downstream
/// reader sees them. Like `testkit::bus::OutputReader`, plus the reader's positions, so the
/// runner knows when it has read up to a watermark instead of guessing with a sleep.
struct Outputs {
    consumer: BaseConsumer,
    partitions: Vec<(String, i32)>,
    seen: Vec<ReadMessage>,
}

impl Outputs {
    fn new(brokers: &str, topics: &[&str]) -> Result<Outputs, String> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", brokers)
            .set("group.id", format!("reader-{}", bus::unique_suffix()))
            .set("isolation.level", "read_committed")
            .set("enable.auto.commit", "false")
            .set("enable.partition.eof", "false")
            .set("fetch.wait.max.ms", "50")
            .create()
            .map_err(|e| format!("reader: {e}"))?;
        let mut tpl = TopicPartitionList::new();
        let mut partitions = Vec::new();
        for t in topics {
            for p in settled_partitions(&consumer, t)? {
                tpl.add_partition_offset(t, p, Offset::Beginning)
                    .map_err(|e| e.to_string())?;
                partitions.push(((*t).to_owned(), p));
            }
        }
        consumer.assign(&tpl).map_err(|e| format!("assign: {e}"))?;
        Ok(Outputs {
            consumer,
            partitions,
            seen: Vec::new(),
        })
    }

    fn poll_for(&mut self, budget: Duration) {
        let until = Instant::now() + budget;
        while Instant::now() < until {
            let Some(Ok(m)) = self.consumer.poll(Duration::from_millis(20)) else {
                continue;
            };
            self.seen.push(ReadMessage::from_record(&m));
        }
    }

    /// True when the position of every partition in `marks` reached its mark. librdkafka moves
    /// the position over commit and abort markers too, so a high watermark is reachable.
    fn caught_up(&self, marks: &[(String, i32, i64)]) -> bool {
        let Ok(positions) = self.consumer.position() else {
            return false;
        };
        marks.iter().all(|(topic, partition, mark)| {
            match positions
                .find_partition(topic, *partition)
                .map(|e| e.offset())
            {
                Some(Offset::Offset(at)) => at >= *mark,
                // Nothing read yet: caught up only with an empty partition.
                _ => *mark <= 0,
            }
        })
    }
}

/// The partitions of a topic created a moment ago, once the broker reports all of them with a
/// leader: metadata asked for too early can list none, and a reader assigned to none would
/// never see an output.
fn settled_partitions(consumer: &BaseConsumer, topic: &str) -> Result<Vec<i32>, String> {
    let started = Instant::now();
    loop {
        let meta = consumer
            .fetch_metadata(Some(topic), Duration::from_secs(10))
            .map_err(|e| format!("metadata of {topic}: {e}"))?;
        let settled = meta
            .topics()
            .iter()
            .find(|t| t.name() == topic)
            .and_then(|t| {
                let ok = t.error().is_none()
                    && !t.partitions().is_empty()
                    && t.partitions()
                        .iter()
                        .all(|p| p.error().is_none() && p.leader() >= 0);
                ok.then(|| t.partitions().iter().map(|p| p.id()).collect())
            });
        if let Some(ids) = settled {
            return Ok(ids);
        }
        if started.elapsed() >= Duration::from_secs(30) {
            return Err(format!(
                "topic {topic} has no partitions with a leader 30 s after it was created"
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Is the broker there at all? A metadata round trip, so the error is clear before anything
/// else is created.
fn check_kafka(brokers: &str) -> Result<(), String> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .create()
        .map_err(|e| format!("Kafka client: {e}"))?;
    consumer
        .fetch_metadata(None, Duration::from_secs(10))
        .map(|_| ())
        .map_err(|e| {
            format!("Kafka at {brokers} is unreachable: {e} (run `bash scripts/services.sh up`)")
        })
}

async fn delete_topics(brokers: &str, names: &[String]) -> Result<(), String> {
    use rdkafka::admin::{AdminClient, AdminOptions};
    use rdkafka::client::DefaultClientContext;
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .create()
        .map_err(|e| format!("admin client: {e}"))?;
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    admin
        .delete_topics(&refs, &AdminOptions::new())
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

fn replies_of<'a>(seen: &'a [ReadMessage], turn_id: &str) -> Vec<&'a ReadMessage> {
    let mut list: Vec<&ReadMessage> = seen
        .iter()
        .filter(|m| {
            m.topic.ends_with(".replies")
                && m.payload.get("turn_id").and_then(Value::as_str) == Some(turn_id)
        })
        .collect();
    list.sort_by_key(|m| (m.partition, m.offset));
    list
}

/// The turn's CloudEvents (extension `turnid`), in the order they were published: one key, so
/// one partition, so offset order.
fn events_of<'a>(seen: &'a [ReadMessage], turn_id: &str) -> Vec<&'a ReadMessage> {
    let mut list: Vec<&ReadMessage> = seen
        .iter()
        .filter(|m| {
            m.topic.ends_with(".events")
                && m.payload.get("turnid").and_then(Value::as_str) == Some(turn_id)
        })
        .collect();
    list.sort_by_key(|m| (m.partition, m.offset));
    list
}

fn repeated_output_id(list: &[&ReadMessage]) -> Option<String> {
    let mut ids: Vec<&str> = list.iter().filter_map(|m| m.output_id.as_deref()).collect();
    ids.sort_unstable();
    ids.windows(2)
        .find(|pair| pair[0] == pair[1])
        .map(|pair| pair[0].to_owned())
}

/// The dead letter of the inbound record at `at`, described in one line.
fn dead_letter_of(seen: &[ReadMessage], topics: &Topics, at: (i32, i64)) -> Option<String> {
    seen.iter()
        .filter(|m| m.topic == topics.dead_letters)
        .find(|m| {
            let original = m.payload.get("original");
            let field = |k: &str| original.and_then(|o| o.get(k)).and_then(Value::as_i64);
            field("partition") == Some(i64::from(at.0)) && field("offset") == Some(at.1)
        })
        .map(|m| {
            format!(
                "{}: {}",
                text_field(&m.payload, "reason"),
                text_field(&m.payload, "detail")
            )
        })
}

fn text_field(payload: &Value, key: &str) -> String {
    payload
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn message(topic: &str, partition: i32, offset: i64, payload: Value, id: &str) -> ReadMessage {
        ReadMessage {
            topic: topic.into(),
            partition,
            offset,
            key: String::new(),
            payload,
            output_id: Some(id.into()),
            turn_id: None,
        }
    }

    #[test]
    fn events_and_replies_of_one_turn_in_offset_order() {
        let seen = vec![
            message("x.events", 1, 7, json!({"turnid": "t1", "type": "b"}), "2"),
            message("x.events", 1, 5, json!({"turnid": "t1", "type": "a"}), "1"),
            message("x.events", 1, 6, json!({"turnid": "t2", "type": "c"}), "3"),
            message(
                "x.replies",
                0,
                3,
                json!({"turn_id": "t1", "text": "hi"}),
                "4",
            ),
        ];
        let types: Vec<String> = events_of(&seen, "t1")
            .iter()
            .map(|m| text_field(&m.payload, "type"))
            .collect();
        assert_eq!(types, ["a", "b"]);
        assert_eq!(replies_of(&seen, "t1").len(), 1);
        assert!(replies_of(&seen, "t2").is_empty());
        assert_eq!(repeated_output_id(&events_of(&seen, "t1")), None);
    }

    #[test]
    fn a_repeated_output_id_is_found() {
        let seen = vec![
            message("x.replies", 0, 3, json!({"turn_id": "t1"}), "same"),
            message("x.replies", 0, 4, json!({"turn_id": "t1"}), "same"),
        ];
        assert_eq!(
            repeated_output_id(&replies_of(&seen, "t1")),
            Some("same".into())
        );
    }

    #[test]
    fn dead_letters_match_their_original_record() {
        let topics = Topics {
            dead_letters: "dl".into(),
            ..Topics::default()
        };
        let dl = json!({"reason": "schema_violation", "detail": "bad", "original": {"partition": 2, "offset": 9}});
        let seen = vec![message("dl", 0, 0, dl, "d")];
        assert_eq!(
            dead_letter_of(&seen, &topics, (2, 9)).as_deref(),
            Some("schema_violation: bad")
        );
        assert_eq!(dead_letter_of(&seen, &topics, (2, 8)), None);
    }
}
