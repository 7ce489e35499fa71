//! The fault scenarios: each one starts its own topics, a model server and a tool server, runs
//! `turnstile run` workers as child processes of this binary, produces a multi-turn workload
//! (optionally interleaved with hostile records), injects its fault while the workers run, waits
//! until every record is answered (or progress stops), and hands everything to the
//! [`super::checker`].
//!
//! Every decision is deterministic from the turn: the model server answers each turn from a
//! per-turn script (recorded here and handed to the checker's serial replay), the tool server
//! answers every execution with its default result.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::FutureRecord;
use rdkafka::{Offset, TopicPartitionList};
use serde_json::{json, Value};
use tokio::runtime::Runtime;

use super::checker::{self, CheckReport, Evidence, InboundCopy};
use super::Rng;
use crate::config::agents::load_catalog;
use crate::config::settings::settings_from_env;
use crate::domain::turn::Identity;
use crate::message::{DecodeLimits, Topics};
use crate::model::scripted::ModelScript;
use crate::pipeline::decode_record;
use crate::store::cql::{CqlConfig, ScyllaCheckpointStore};
use crate::testkit::bus::{self, OutputReader};
use crate::testkit::model_server::ModelServer;
use crate::testkit::tool_server::{ToolAction, ToolServer};
use crate::testkit::worker_process::{self, WorkerEnv};

pub const KEYSPACE: &str = "turnstile_chaos";
/// The agents file the run's config is derived from: the same, but the assistant serves only the
/// run's tenant, so hostile records from another tenant are `unknown_tenant`.
pub const CONFIG: &str = "config/agents.example.yaml";
const SERVE_ALL: &str = r#"- {tenant: "*", tools: "*"}"#;
pub const PROFILES: &str = "config/profiles.example.yaml";
pub const LOG_ROOT: &str = "target/chaos";
const TENANT: &str = "acme";
const AGENT: &str = "retail-bot";
const INBOUND_PARTITIONS: i32 = 6;
const EPOCH_MS: i64 = 1_767_225_600_000;
/// How long the run may go without a new answer before the harness stops waiting.
const STALL_TIMEOUT: Duration = Duration::from_secs(120);

/// The fault a scenario injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    Sigkill,
    Rebalance,
    KafkaRestart,
    CassandraRestart,
    ModelFaults,
    Tool503,
    Hostile,
}

impl Fault {
    pub const ALL: [Fault; 7] = [
        Fault::Sigkill,
        Fault::Rebalance,
        Fault::ModelFaults,
        Fault::Tool503,
        Fault::Hostile,
        // The two that disturb everyone sharing the services go last.
        Fault::KafkaRestart,
        Fault::CassandraRestart,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Fault::Sigkill => "sigkill",
            Fault::Rebalance => "rebalance",
            Fault::KafkaRestart => "kafka-restart",
            Fault::CassandraRestart => "cassandra-restart",
            Fault::ModelFaults => "model-faults",
            Fault::Tool503 => "tool-503",
            Fault::Hostile => "hostile",
        }
    }
}

/// The size of one scenario.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub conversations: usize,
    /// Valid turns in total (rounded up to whole rounds of every conversation).
    pub turns: usize,
    /// Kill cycles (sigkill), scale steps are fixed (rebalance).
    pub cycles: usize,
    /// Hostile records interleaved with the valid turns (every scenario may carry some; the
    /// `hostile` one carries this many).
    pub hostile: usize,
    /// Workers at the peak of the rebalance scenario (1 → peak → 1).
    pub peak_workers: usize,
    /// How long the broker or store stays down in the restart faults (0: a plain restart).
    pub outage_secs: u64,
    pub seed: u64,
}

/// What one scenario did and what the checker found.
#[derive(Debug, Clone)]
pub struct FaultReport {
    pub fault: Fault,
    pub run_id: String,
    pub produced_valid: usize,
    pub produced_hostile: usize,
    pub model_faulted_turns: usize,
    pub tool_bursts: usize,
    /// Requests the model server received (0 means no turn ever reached a model).
    pub model_requests: usize,
    pub kills: usize,
    pub restarts: usize,
    /// Restart faults: from the service answering again to the first turn answered after it.
    pub resumed_after: Option<Duration>,
    pub wall: Duration,
    pub check: CheckReport,
    pub min_replies: usize,
    pub min_executions: usize,
    pub log_dir: PathBuf,
}

impl FaultReport {
    pub fn passed(&self) -> bool {
        self.check.passed(self.min_replies, self.min_executions) && self.model_requests > 0
    }

    /// What was injected besides kills and restarts, in words.
    pub fn injected(&self) -> String {
        match self.fault {
            Fault::ModelFaults => format!("{} turns with model faults", self.model_faulted_turns),
            Fault::Tool503 => format!("{} bursts of 2×503", self.tool_bursts),
            Fault::Hostile => format!("{} hostile records", self.produced_hostile),
            Fault::Sigkill => format!("{} kills", self.kills),
            Fault::Rebalance => "1 → peak → 1".into(),
            Fault::KafkaRestart | Fault::CassandraRestart => {
                let what = if self.fault == Fault::KafkaRestart {
                    "broker"
                } else {
                    "store"
                };
                let resumed = self
                    .resumed_after
                    .map(|t| {
                        format!(
                            ", next turn answered {:.1} s after it was back",
                            t.as_secs_f64()
                        )
                    })
                    .unwrap_or_default();
                format!("{what} restart{resumed}")
            }
        }
    }

    /// Why the run did no real work, if it did not.
    pub fn no_real_work(&self) -> Option<String> {
        if self.model_requests == 0 {
            return Some("the model server received no request".into());
        }
        self.check.real_work(self.min_replies, self.min_executions)
    }
}

/// Runs one scenario end to end. `Err` is a setup problem (services unreachable).
pub fn run_fault(fault: Fault, plan: &Plan) -> Result<FaultReport, String> {
    let started = Instant::now();
    let mut h = Harness::start(fault, plan)?;
    eprintln!(
        "turnstile chaos: {} (run {}): {} conversations, {} turns, {} hostile; logs in {}",
        fault.name(),
        h.id,
        plan.conversations,
        h.workload.valid,
        h.workload.hostile.len(),
        h.log_dir.display()
    );
    let mut rng = Rng::new(plan.seed ^ 0x9e37_79b9_7f4a_7c15);
    let mut kills = 0;
    let mut restarts = 0;
    let mut tool_bursts = 0;
    h.spawn(0, None)?;
    let planned = match fault {
        Fault::Sigkill => Duration::from_millis(2_500 * plan.cycles as u64),
        Fault::Rebalance => Duration::from_secs(45),
        Fault::Tool503 => Duration::from_secs(60),
        // Production goes on through the whole outage and 30 s past it: an outage under load.
        _ => Duration::from_secs(30 + plan.outage_secs),
    };
    let mut resumed_after = None;
    h.start_producing(planned);
    match fault {
        Fault::Sigkill => {
            for cycle in 0..plan.cycles {
                // Odd cycles abort right after a checkpoint save, before its commit (the
                // narrowest window); even ones SIGKILL at a random moment.
                if cycle % 2 == 1 {
                    h.kill(0);
                    let n = 1 + rng.below(30);
                    h.spawn(0, Some(n))?;
                    let until = Instant::now() + Duration::from_secs(20);
                    while Instant::now() < until && h.alive(0) {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    kills += 1;
                    h.kill(0);
                    h.spawn(0, None)?;
                } else {
                    std::thread::sleep(Duration::from_millis(500 + rng.below(3_500) as u64));
                    h.kill(0);
                    kills += 1;
                    h.spawn(0, None)?;
                }
                eprintln!("  cycle {}/{}: killed", cycle + 1, plan.cycles);
            }
        }
        Fault::Rebalance => {
            std::thread::sleep(Duration::from_secs(8));
            for w in 1..plan.peak_workers.max(2) {
                h.spawn(w, None)?;
            }
            eprintln!("  scaled 1 -> {}", plan.peak_workers.max(2));
            std::thread::sleep(Duration::from_secs(15));
            for w in 1..plan.peak_workers.max(2) {
                h.stop(w);
            }
            eprintln!("  scaled {} -> 1", plan.peak_workers.max(2));
            restarts += 2;
        }
        Fault::KafkaRestart | Fault::CassandraRestart => {
            std::thread::sleep(Duration::from_secs(5 + rng.below(10) as u64));
            let which = if fault == Fault::KafkaRestart {
                "kafka"
            } else {
                "cassandra"
            };
            eprintln!("  restarting {which} (down {} s)", plan.outage_secs);
            let down = plan.outage_secs.to_string();
            let status = Command::new("bash")
                .args([
                    "scripts/services.sh",
                    "restart",
                    "--down-secs",
                    &down,
                    which,
                ])
                .stdout(Stdio::null())
                .status()
                .map_err(|e| format!("scripts/services.sh restart {which}: {e}"))?;
            if !status.success() {
                return Err(format!("scripts/services.sh restart {which}: {status}"));
            }
            restarts += 1;
            resumed_after = h.time_to_next_answer(Duration::from_secs(300));
            if let Some(t) = resumed_after {
                eprintln!(
                    "  {which} back; the next turn was answered {:.1} s later",
                    t.as_secs_f64()
                );
            }
        }
        Fault::Tool503 => {
            // Bursts of two 503s, fewer than the gateway's three attempts. A new burst on a tool
            // only once the last one was consumed more than 2 s ago (longer than the retry
            // backoff), so no execution ever sees three in a row: every execution still happens,
            // and the serial replay (tools always succeed) stays the right reference.
            let mut injected: HashMap<&str, usize> = HashMap::new();
            // Until the last record is produced, so bursts hit the whole run.
            while !h.producing_done.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(100 + rng.below(400) as u64));
                let tool = if rng.below(2) == 0 {
                    "retail_order_cancel"
                } else {
                    "billing_show_bill"
                };
                let calls = h.tools.calls();
                let failed: Vec<i64> = calls
                    .iter()
                    .filter(|c| {
                        c.tool == tool && c.action == ToolAction::Execute && c.status == Some(503)
                    })
                    .map(|c| c.at_ms)
                    .collect();
                let done = injected.get(tool).copied().unwrap_or(0);
                let quiet = failed
                    .iter()
                    .max()
                    .is_none_or(|last| now_ms() - last > 2_000);
                if failed.len() >= done * 2 && quiet {
                    h.tools.fail_next(tool, 2, 503);
                    *injected.entry(tool).or_default() += 1;
                    tool_bursts += 1;
                }
            }
        }
        Fault::ModelFaults | Fault::Hostile => {}
    }
    // Whatever happened, one healthy worker finishes the work.
    if !h.alive(0) {
        h.kill(0);
        h.spawn(0, None)?;
    }
    h.wait_until_answered();
    let mut report = h.finish(fault, plan, started, kills, restarts, tool_bursts);
    report.resumed_after = resumed_after;
    Ok(report)
}

/// A record to produce: key and payload, either absent.
type RawRecord = (Option<Vec<u8>>, Option<Vec<u8>>);

/// The generated traffic.
struct Workload {
    /// (key, payload) in production order; hostile records interleaved.
    records: Vec<RawRecord>,
    valid: usize,
    hostile: Vec<usize>,
    scripts: HashMap<String, ModelScript>,
    model_faulted: usize,
    identities: Vec<Identity>,
    rounds: usize,
}

fn script(v: Value) -> ModelScript {
    serde_json::from_value(v).unwrap_or_default()
}

impl Workload {
    fn generate(fault: Fault, plan: &Plan, run: &str) -> Workload {
        let mut rng = Rng::new(plan.seed);
        let conversations = plan.conversations.max(1);
        let rounds = plan.turns.div_ceil(conversations).max(1);
        let identities: Vec<Identity> = (0..conversations)
            .map(|c| Identity {
                tenant_id: TENANT.into(),
                agent_id: AGENT.into(),
                session_id: format!("chaos-{run}-{c}"),
            })
            .collect();
        let hostile_total = if fault == Fault::Hostile {
            plan.hostile
        } else {
            0
        };
        let valid_total = rounds * conversations;
        let mut records = Vec::with_capacity(valid_total + hostile_total);
        let mut hostile = Vec::new();
        let mut scripts = HashMap::new();
        let mut model_faulted = 0;
        let mut burst_left = 0;
        for round in 0..rounds {
            for (c, id) in identities.iter().enumerate() {
                let turn_id = format!("t-{run}-{c}-{round}");
                let (text, mut s) = match round % 4 {
                    0 => (
                        "cancel my order".to_owned(),
                        script(json!({
                            "classifier": {"decision": "ROUTE", "confidence": 0.96},
                            "router": {"agent": "retail", "intent": "retail_order_cancel", "confidence": 0.95}
                        })),
                    ),
                    1 => (format!("PED-{}", 1000 + c), ModelScript::default()),
                    2 => ("yes".to_owned(), ModelScript::default()),
                    _ => (
                        "show my bill".to_owned(),
                        script(json!({
                            "classifier": {"decision": "ROUTE", "confidence": 0.96},
                            "router": {"agent": "billing", "intent": "billing_show_bill", "confidence": 0.95}
                        })),
                    ),
                };
                if fault == Fault::ModelFaults && s.classifier.is_some() {
                    if burst_left == 0 && rng.below(10) == 0 {
                        burst_left = 1 + rng.below(8);
                    }
                    if burst_left > 0 {
                        burst_left -= 1;
                        model_faulted += 1;
                        // Timeouts are slow (the profile's timeout per attempt): fewer of them.
                        let word = match rng.below(10) {
                            0 => "timeout",
                            1..=5 => "error",
                            _ => "invalid_json",
                        };
                        s = if rng.below(2) == 0 {
                            script(json!({"classifier": word}))
                        } else {
                            script(json!({
                                "classifier": {"decision": "ROUTE", "confidence": 0.96},
                                "router": word
                            }))
                        };
                    }
                }
                let at = bus_time(EPOCH_MS + (round as i64) * 1_000 + c as i64);
                let payload = bus::turn_json(
                    TENANT,
                    AGENT,
                    &id.session_id,
                    &turn_id,
                    Some(&text),
                    None,
                    "en",
                    Some(&at),
                );
                scripts.insert(turn_id, s);
                records.push((Some(id.key().into_bytes()), Some(payload)));
                // Hostile records, spread evenly, on the keys of real conversations.
                let due = hostile_total * records.len() / (valid_total + hostile_total).max(1);
                while hostile.len() < hostile_total && hostile.len() <= due {
                    let victim = &identities[rng.below(conversations)];
                    hostile.push(records.len());
                    records.push(hostile_record(&mut rng, victim, run, hostile.len()));
                }
            }
        }
        while hostile.len() < hostile_total {
            let victim = &identities[rng.below(conversations)];
            hostile.push(records.len());
            records.push(hostile_record(&mut rng, victim, run, hostile.len()));
        }
        Workload {
            records,
            valid: valid_total,
            hostile,
            scripts,
            model_faulted,
            identities,
            rounds,
        }
    }
}

use crate::clock::now_ms;

fn bus_time(ms: i64) -> String {
    crate::message::format_rfc3339_ms(ms)
}

/// One record the worker must refuse: malformed JSON, wrong types, a huge payload, invalid
/// UTF-8, an unknown assistant, a key that is not the body's identity, a tombstone, a missing
/// field, an unknown schema version.
fn hostile_record(rng: &mut Rng, victim: &Identity, run: &str, n: usize) -> RawRecord {
    let key = Some(victim.key().into_bytes());
    let body = |v: Value| Some(serde_json::to_vec(&v).unwrap_or_default());
    let base = || {
        json!({
            "turn_id": format!("h-{run}-{n}"),
            "tenant_id": victim.tenant_id,
            "agent_id": victim.agent_id,
            "session_id": victim.session_id,
            "locale": "en",
            "text": "cancel my order",
        })
    };
    match rng.below(22) {
        0..=2 => (key, Some(b"{\"turn_id\": \"x\", \"text\": ".to_vec())),
        3..=5 => {
            let mut v = base();
            v["turn_id"] = json!(12345);
            v["text"] = json!(["not", "text"]);
            (key, body(v))
        }
        6 => {
            let mut v = base();
            v["text"] = json!("x".repeat(70_000));
            (key, body(v))
        }
        7..=9 => {
            let mut bytes = serde_json::to_vec(&base()).unwrap_or_default();
            let at = bytes.len() / 2;
            bytes.splice(at..at, [0xff, 0xfe, 0xc3]);
            (key, Some(bytes))
        }
        10..=12 => {
            let mut v = base();
            v["agent_id"] = json!("no-such-assistant");
            let k = format!(
                "{}/no-such-assistant/{}",
                victim.tenant_id, victim.session_id
            );
            (Some(k.into_bytes()), body(v))
        }
        13..=15 => {
            let k = format!("{}/{}/someone-else", victim.tenant_id, victim.agent_id);
            (Some(k.into_bytes()), body(base()))
        }
        16 => (key, None),
        17 => {
            let mut v = base();
            if let Some(o) = v.as_object_mut() {
                o.remove("session_id");
            }
            (key, body(v))
        }
        18 => {
            let mut v = base();
            v["schema"] = json!("turnstile.turn.v9");
            (key, body(v))
        }
        19 | 20 => {
            let mut v = base();
            v["tenant_id"] = json!("evil-corp");
            let k = format!("evil-corp/{}/{}", victim.agent_id, victim.session_id);
            (Some(k.into_bytes()), body(v))
        }
        _ => (key, Some(vec![0x00, 0x01, 0x02, 0x80, 0x81])),
    }
}

struct Worker {
    child: Option<Child>,
    instance: String,
}

struct Harness {
    id: String,
    brokers: String,
    topics: Topics,
    group_id: String,
    exe: PathBuf,
    log_dir: PathBuf,
    env: Vec<(String, String)>,
    workers: Vec<Worker>,
    workload: Arc<Workload>,
    model: ModelServer,
    tools: ToolServer,
    store: ScyllaCheckpointStore,
    producing_done: Arc<AtomicBool>,
    produced: Arc<AtomicUsize>,
    produce_error: Arc<std::sync::Mutex<Option<String>>>,
    reader: OutputReader,
    catalog: crate::domain::catalog::Catalog,
    /// A failed run keeps its topics for inspection.
    keep_topics: bool,
    /// Last: the servers and the store session run on it.
    rt: Runtime,
}

impl Harness {
    fn start(fault: Fault, plan: &Plan) -> Result<Harness, String> {
        let id = bus::unique_suffix();
        let brokers = bus::brokers();
        let contact = crate::testkit::cql::contact();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the async runtime: {e}"))?;
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
                format!("the CQL store at {contact} is unreachable: {e} (run `bash scripts/services.sh up`)")
            })?;
        let topics = Topics {
            inbound: format!("turnstile-chaos.{id}.turns"),
            replies: format!("turnstile-chaos.{id}.replies"),
            events: format!("turnstile-chaos.{id}.events"),
            dead_letters: format!("turnstile-chaos.{id}.dead-letters"),
        };
        rt.block_on(bus::create_topics(&brokers, &topics, INBOUND_PARTITIONS))?;
        let model = rt
            .block_on(ModelServer::try_start())
            .map_err(|e| format!("cannot start the model test server: {e}"))?;
        let tools = rt
            .block_on(ToolServer::start())
            .map_err(|e| format!("cannot start the tool test server: {e}"))?;
        // Longer than every profile's timeout, so a scripted timeout is a timeout.
        model.set_timeout_delay(Duration::from_secs(10));
        let workload = Workload::generate(fault, plan, &id);
        for (turn_id, s) in &workload.scripts {
            model.set_turn_script(turn_id, s);
        }
        let log_dir = Path::new(LOG_ROOT).join(format!("{}-{id}", fault.name()));
        std::fs::create_dir_all(&log_dir)
            .map_err(|e| format!("cannot create {}: {e}", log_dir.display()))?;
        let exe = worker_process::snapshot_binary(&log_dir)?;
        let example = std::fs::read_to_string(CONFIG).map_err(|e| format!("{CONFIG}: {e}"))?;
        if !example.contains(SERVE_ALL) {
            return Err(format!("{CONFIG} has no `{SERVE_ALL}` rule to restrict"));
        }
        let config_path = log_dir.join("agents.yaml");
        std::fs::write(
            &config_path,
            example.replace(
                SERVE_ALL,
                &format!(r#"- {{tenant: "{TENANT}", tools: "*"}}"#),
            ),
        )
        .map_err(|e| format!("{}: {e}", config_path.display()))?;
        let catalog =
            load_catalog(&config_path).map_err(|e| format!("{}: {e}", config_path.display()))?;
        let group_id = format!("turnstile-chaos-{id}");
        let env = WorkerEnv {
            log_filter: std::env::var("RUST_LOG")
                .unwrap_or_else(|_| "warn,turnstile::worker::consumer=info".into()),
            config: config_path.clone(),
            profiles: PathBuf::from(PROFILES),
            brokers: brokers.clone(),
            group_id: group_id.clone(),
            topics: topics.clone(),
            keyspace: KEYSPACE.to_owned(),
            cql_contact: contact.clone(),
            model_base_url: model.base_url(),
            tools_base_url: tools.base_url(),
            session_timeout_ms: 6000,
            drain_budget_ms: 2000,
            commit_interval_ms: Some(50),
        }
        .vars()?;
        let reader = OutputReader::new(
            &brokers,
            &[&topics.replies, &topics.events, &topics.dead_letters],
        )?;
        Ok(Harness {
            workers: Vec::new(),
            workload: Arc::new(workload),
            producing_done: Arc::new(AtomicBool::new(false)),
            produced: Arc::new(AtomicUsize::new(0)),
            produce_error: Arc::new(std::sync::Mutex::new(None)),
            id,
            brokers,
            topics,
            group_id,
            exe,
            log_dir,
            env,
            model,
            tools,
            store,
            reader,
            catalog,
            keep_topics: false,
            rt,
        })
    }

    /// Produces the workload in rounds spread over `over`, in the background.
    fn start_producing(&self, over: Duration) {
        let workload = self.workload.clone();
        let brokers = self.brokers.clone();
        let topic = self.topics.inbound.clone();
        let done = self.producing_done.clone();
        let produced = self.produced.clone();
        let error = self.produce_error.clone();
        self.rt.spawn(async move {
            let producer = match bus::turn_producer(&brokers) {
                Ok(p) => p,
                Err(e) => {
                    *error.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                    done.store(true, Ordering::SeqCst);
                    return;
                }
            };
            let batches = workload.rounds.max(1);
            let per_batch = workload.records.len().div_ceil(batches);
            let pause = over / batches as u32;
            for chunk in workload.records.chunks(per_batch.max(1)) {
                let mut pending = Vec::with_capacity(chunk.len());
                for (key, payload) in chunk {
                    let mut record: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(&topic);
                    if let Some(k) = key {
                        record = record.key(k.as_slice());
                    }
                    if let Some(p) = payload {
                        record = record.payload(p.as_slice());
                    }
                    pending.push(producer.send(record, Duration::from_secs(300)));
                }
                for r in futures_join(pending).await {
                    match r {
                        Ok(_) => {
                            produced.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(e) => {
                            *error.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                        }
                    }
                }
                tokio::time::sleep(pause).await;
            }
            done.store(true, Ordering::SeqCst);
        });
    }

    fn spawn(&mut self, w: usize, abort_after_saves: Option<usize>) -> Result<(), String> {
        while self.workers.len() <= w {
            let n = self.workers.len();
            self.workers.push(Worker {
                child: None,
                instance: format!("chaos-{}-w{n}", self.id),
            });
        }
        let port = worker_process::free_port()?;
        let log_path = self.log_dir.join(format!("worker-{w}.log"));
        let mut env = self.env.clone();
        env.push(("TURNSTILE_LISTEN".into(), format!("127.0.0.1:{port}")));
        env.push((
            "TURNSTILE_INSTANCE_ID".into(),
            self.workers[w].instance.clone(),
        ));
        if let Some(n) = abort_after_saves {
            env.push(("TURNSTILE_FAULT_ABORT_AFTER_SAVES".into(), n.to_string()));
        }
        let banner = format!(
            "chaos: starting worker {w} on port {port} (abort after saves: {abort_after_saves:?})"
        );
        let child = worker_process::spawn(&self.exe, &env, &log_path, &banner)?;
        self.workers[w].child = Some(child);
        Ok(())
    }

    fn alive(&mut self, w: usize) -> bool {
        match self.workers.get_mut(w).and_then(|x| x.child.as_mut()) {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// SIGKILL and reap.
    fn kill(&mut self, w: usize) {
        if let Some(mut child) = self.workers.get_mut(w).and_then(|x| x.child.take()) {
            worker_process::kill(&mut child);
        }
    }

    /// SIGTERM (drain, leave the group), SIGKILL after 15 s.
    fn stop(&mut self, w: usize) {
        if let Some(mut child) = self.workers.get_mut(w).and_then(|x| x.child.take()) {
            worker_process::terminate(&mut child, Duration::from_secs(15));
        }
    }

    /// Distinct inbound records answered so far: turns with a reply, records with a dead letter.
    fn answered(&self) -> usize {
        let mut turns = std::collections::HashSet::new();
        let mut dead = std::collections::HashSet::new();
        for m in &self.reader.seen {
            if m.topic == self.topics.dead_letters {
                let original = m.payload.get("original");
                let field = |k: &str| original.and_then(|o| o.get(k)).and_then(Value::as_i64);
                dead.insert((field("partition"), field("offset")));
            } else if m.topic == self.topics.replies {
                if let Some(t) = m.turn_id.as_deref() {
                    turns.insert(t.to_owned());
                }
            }
        }
        turns.len() + dead.len()
    }

    /// How long until one more record is answered than now (`None` past `limit`).
    fn time_to_next_answer(&mut self, limit: Duration) -> Option<Duration> {
        let from = Instant::now();
        let before = self.answered();
        while from.elapsed() < limit {
            self.reader.poll_for(Duration::from_millis(100));
            if self.answered() > before {
                return Some(from.elapsed());
            }
        }
        None
    }

    /// Waits until every produced record is answered, or nothing new arrives for a while; keeps
    /// a crashed worker 0 running (a worker that exits on its own is restarted, and counted).
    fn wait_until_answered(&mut self) {
        let total = self.workload.records.len();
        let mut last = 0;
        let mut last_change = Instant::now();
        loop {
            self.reader.poll_for(Duration::from_millis(500));
            let n = self.answered();
            if n != last {
                last = n;
                last_change = Instant::now();
            }
            let done = self.producing_done.load(Ordering::SeqCst);
            if done && n >= total {
                break;
            }
            if last_change.elapsed() > STALL_TIMEOUT {
                eprintln!(
                    "  no progress for {} s ({n}/{total} answered); checking what there is",
                    STALL_TIMEOUT.as_secs()
                );
                break;
            }
            if !self.alive(0) {
                eprintln!("  worker 0 exited on its own; restarting it");
                self.kill(0);
                if let Err(e) = self.spawn(0, None) {
                    eprintln!("  {e}");
                    break;
                }
            }
        }
    }

    fn finish(
        mut self,
        fault: Fault,
        plan: &Plan,
        started: Instant,
        kills: usize,
        restarts: usize,
        tool_bursts: usize,
    ) -> FaultReport {
        for w in 0..self.workers.len() {
            self.stop(w);
        }
        // Read the outputs until nothing new arrives for 3 s.
        let mut quiet = Instant::now();
        while quiet.elapsed() < Duration::from_secs(3) {
            if self.reader.poll_for(Duration::from_millis(500)) > 0 {
                quiet = Instant::now();
            }
        }
        let inbound = read_inbound(&self.brokers, &self.topics.inbound).unwrap_or_else(|e| {
            eprintln!("  cannot read the inbound topic: {e}");
            Vec::new()
        });
        if let Some(e) = self
            .produce_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
        {
            eprintln!("  a produce failed: {e}");
        }
        let mut states = HashMap::new();
        for id in &self.workload.identities {
            let row = self.rt.block_on(self.store.load_row(id));
            let state = match row {
                Ok(Some(r)) => decode_record(&r.state, r.in_flight.as_deref())
                    .ok()
                    .map(|(s, _)| s),
                _ => None,
            };
            states.insert(id.key(), state);
        }
        let catalog = self.catalog.clone();
        let settings = settings_from_env(|_| None).unwrap_or_default();
        let executions = self.tools.executions();
        let evidence = Evidence {
            inbound_topic: &self.topics.inbound,
            replies_topic: &self.topics.replies,
            events_topic: &self.topics.events,
            dead_letters_topic: &self.topics.dead_letters,
            inbound: &inbound,
            outputs: &self.reader.seen,
            executions: &executions,
            states: &states,
            model_scripts: &self.workload.scripts,
            limits: DecodeLimits::default(),
            catalog: &catalog,
            settings: &settings,
        };
        let mut check = self.rt.block_on(checker::check(&evidence));
        let valid = self.workload.valid;
        // The generator knows what it produced: the decoder must agree on both counts.
        if check.valid_turns != valid {
            check.lost.push(format!(
                "the inbound topic holds {} valid turns, the workload produced {valid}",
                check.valid_turns
            ));
        }
        if check.refused_records != self.workload.hostile.len() {
            check.not_dead_lettered.push(format!(
                "the decoder refuses {} inbound records, the workload produced {} hostile ones",
                check.refused_records,
                self.workload.hostile.len()
            ));
        }
        let assignments = (0..self.workers.len())
            .map(|w| {
                let text = std::fs::read_to_string(self.log_dir.join(format!("worker-{w}.log")))
                    .unwrap_or_default();
                text.matches("Partitions assigned").count()
            })
            .collect::<Vec<_>>();
        eprintln!("  partition assignments per worker (from the logs): {assignments:?}");
        if !check.dead_letter_reasons.is_empty() {
            eprintln!("  dead letters by reason: {:?}", check.dead_letter_reasons);
        }
        // Real work: every valid turn answered; tools executed about twice per four turns (fewer
        // when model faults stop some transactions from starting).
        let min_executions = if fault == Fault::ModelFaults {
            valid / 8
        } else {
            valid / 4
        };
        let _ = plan;
        self.keep_topics = !check.passed(valid, min_executions.max(1));
        FaultReport {
            fault,
            run_id: self.id.clone(),
            produced_valid: valid,
            produced_hostile: self.workload.hostile.len(),
            model_faulted_turns: self.workload.model_faulted,
            tool_bursts,
            model_requests: self.model.requests().len(),
            kills,
            restarts,
            resumed_after: None,
            wall: started.elapsed(),
            check,
            min_replies: valid,
            min_executions: min_executions.max(1),
            log_dir: self.log_dir.clone(),
        }
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        for w in 0..self.workers.len() {
            self.kill(w);
        }
        // The binary's hard link would keep an old build alive on disk after the next one.
        let _ = std::fs::remove_file(&self.exe);
        if self.keep_topics {
            eprintln!(
                "  topics kept for inspection: {}, {}, {}, {}",
                self.topics.inbound,
                self.topics.replies,
                self.topics.events,
                self.topics.dead_letters
            );
            return;
        }
        let names = [
            self.topics.inbound.clone(),
            self.topics.replies.clone(),
            self.topics.events.clone(),
            self.topics.dead_letters.clone(),
        ];
        let brokers = self.brokers.clone();
        self.rt.block_on(async move {
            let admin: Result<
                rdkafka::admin::AdminClient<rdkafka::client::DefaultClientContext>,
                _,
            > = ClientConfig::new()
                .set("bootstrap.servers", &brokers)
                .create();
            if let Ok(admin) = admin {
                let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                let _ = admin
                    .delete_topics(&refs, &rdkafka::admin::AdminOptions::new())
                    .await;
            }
        });
        let _ = self.group_id.len();
    }
}

async fn futures_join<T>(futures: Vec<T>) -> Vec<Result<(), String>>
where
    T: std::future::Future<Output = rdkafka::producer::future_producer::OwnedDeliveryResult>,
{
    let mut out = Vec::with_capacity(futures.len());
    for f in futures {
        out.push(f.await.map(|_| ()).map_err(|(e, _)| e.to_string()));
    }
    out
}

/// Every record of the inbound topic, from the beginning to the high watermark.
fn read_inbound(brokers: &str, topic: &str) -> Result<Vec<InboundCopy>, String> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set(
            "group.id",
            format!("chaos-inbound-{}", bus::unique_suffix()),
        )
        .set("enable.auto.commit", "false")
        .set("fetch.message.max.bytes", "2097152")
        .create()
        .map_err(|e| e.to_string())?;
    let meta = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .map_err(|e| e.to_string())?;
    let mut tpl = TopicPartitionList::new();
    let mut highs = HashMap::new();
    for t in meta.topics() {
        for p in t.partitions() {
            let (_, high) = consumer
                .fetch_watermarks(topic, p.id(), Duration::from_secs(10))
                .map_err(|e| e.to_string())?;
            highs.insert(p.id(), high);
            tpl.add_partition_offset(topic, p.id(), Offset::Beginning)
                .map_err(|e| e.to_string())?;
        }
    }
    consumer.assign(&tpl).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    let mut next: HashMap<i32, i64> = HashMap::new();
    let until = Instant::now() + Duration::from_secs(120);
    while Instant::now() < until
        && highs
            .iter()
            .any(|(p, h)| next.get(p).copied().unwrap_or(0) < *h)
    {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            next.insert(m.partition(), m.offset() + 1);
            out.push(InboundCopy {
                partition: m.partition(),
                offset: m.offset(),
                key: m.key().map(<[u8]>::to_vec),
                payload: m.payload().map(<[u8]>::to_vec),
                timestamp_ms: m.timestamp().to_millis(),
            });
        }
    }
    Ok(out)
}

/// The summary table of some reports, one row per fault.
pub fn render_table(reports: &[FaultReport]) -> String {
    let mut out = String::from(
        "| fault | turns | hostile | replies | events | dead letters | tool execs | duplicates | lost | orphans | not dead-lettered | state mismatches | tool mismatches | reply-set mismatches | kills/restarts | faults injected | wall | verdict |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in reports {
        let c = &r.check;
        let verdict = if r.passed() {
            "PASS".to_owned()
        } else if let Some(why) = r.no_real_work() {
            format!("FAIL ({why})")
        } else {
            "FAIL".to_owned()
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {}/{} | {} | {:.0} s | {} |\n",
            r.fault.name(),
            r.produced_valid,
            r.produced_hostile,
            c.replies,
            c.events,
            c.dead_letters,
            c.tool_executions,
            c.duplicates.len(),
            c.lost.len() + c.valid_dead_lettered.len(),
            c.orphans.len(),
            c.not_dead_lettered.len(),
            c.state_mismatches.len(),
            c.tool_mismatches.len(),
            c.output_mismatches.len(),
            r.kills,
            r.restarts,
            r.injected(),
            r.wall.as_secs_f64(),
            verdict
        ));
    }
    out
}
