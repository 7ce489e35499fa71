//! What one end-to-end run shares (the model and tool servers, the store, the producer, one
//! worker per distinct config and settings), how it plays a scenario turn by turn, and how it
//! reads each turn back from Kafka, the store and the servers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::FutureProducer;
use serde_json::{Map, Value};
use tokio::runtime::Runtime;

use super::outputs::{
    dead_letter_of, events_of, repeated_output_id, replies_of, text_field, Outputs,
};
use super::worker::Worker;
use super::{
    COMMIT_INTERVAL_MS, COMMIT_PROBE_EVERY, DRAIN_BUDGET_MS, INBOUND_PARTITIONS, KEYSPACE,
    LOG_ROOT, NO_REPLY_GRACE, PROFILES, SESSION_TIMEOUT_MS, TOPIC_PREFIX, TURN_TIMEOUT,
};
use crate::config::agents::load_catalog;
use crate::config::settings::{apply_overrides, SETTING_NAMES};
use crate::domain::catalog::Settings;
use crate::domain::decision::Skill;
use crate::domain::state::AgentState;
use crate::domain::turn::Identity;
use crate::message::{format_rfc3339_ms, Topics};
use crate::pipeline::decode_record;
use crate::scenario::format::{Scenario, TurnInputSpec};
use crate::scenario::runner::{check_turn, TurnView, DEFAULT_CONFIG, SCENARIO_EPOCH_MS};
use crate::store::cql::ScyllaCheckpointStore;
use crate::testkit::bus;
use crate::testkit::model_server::ModelServer;
use crate::testkit::tool_server::{ToolAction, ToolServer};
use crate::testkit::worker_process::{self, WorkerEnv};

/// Everything one run shares.
pub(super) struct Run {
    pub(super) id: String,
    brokers: String,
    contact: String,
    store: ScyllaCheckpointStore,
    model: ModelServer,
    tools: Option<ToolServer>,
    producer: FutureProducer,
    pub(super) log_dir: PathBuf,
    /// The binary the workers run (see [`worker_process::snapshot_binary`]).
    exe: PathBuf,
    /// Agents config path → its load error, so a bad config fails its scenarios like in process.
    configs: BTreeMap<String, Option<String>>,
    /// (config, canonical settings) → index into `workers`.
    keys: BTreeMap<(String, String), usize>,
    workers: Vec<Worker>,
    /// Turns that published no reply (done by the committed offset instead): every engine path
    /// is meant to answer, so these are reported.
    pub(super) without_reply: Vec<String>,
    /// Last, so it is dropped last: the servers and the store session run on it.
    rt: Runtime,
}

impl Run {
    pub(super) fn start() -> Result<Run, String> {
        let id = bus::unique_suffix();
        let brokers = bus::brokers();
        let contact = crate::testkit::cql::contact();
        let rt = crate::testkit::runtime()?;
        check_kafka(&brokers)?;
        let store = rt
            .block_on(crate::testkit::cql::migrated_store(&contact, KEYSPACE))
            .map_err(|e| {
                format!(
                    "the CQL store at {contact} is unreachable or refused the keyspace \
                     {KEYSPACE}: {e} (run `bash scripts/services.sh up`)"
                )
            })?;
        let (model, tools) = crate::testkit::start_servers(&rt)?;
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
    pub(super) fn worker_for(
        &mut self,
        scenario: &Scenario,
    ) -> Result<Result<usize, String>, String> {
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
            .map_err(|e| setup(e.to_string()))?;
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
    pub(super) fn play(
        &mut self,
        scenario: &Scenario,
        index: usize,
        w: usize,
    ) -> Result<(), String> {
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
    pub(super) fn finish(&mut self, all_passed: bool) {
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
