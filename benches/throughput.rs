//! Throughput and cost of the real worker (issue 5, part 1): `turnstile run` as a child process
//! against the real Kafka and Cassandra of `scripts/services.sh`, the OpenAI-compatible test
//! server answering after a configurable latency (or, with `--decision-model embeddings`, the
//! embedding decision model calling the real embeddings server), and the tool test server.
//!
//! Run (services up first: `bash scripts/services.sh up`):
//!
//! ```text
//! cargo bench --bench throughput -- --model-latency-ms 200 --conversations 1000 --partitions 12
//! cargo bench --bench throughput -- --decision-model embeddings --distinct-texts --conversations 50
//! ```
//!
//! Phases (`--phases`, comma-separated, run in this order):
//! - `worker`: the worker with the in-flight caps given (`--max-in-flight-per-partition`,
//!   `--max-in-flight`);
//! - `baseline`: the same worker, same inputs, partition-serial
//!   (`TURNSTILE_MAX_IN_FLIGHT_PER_PARTITION=1`, what a plain consumer loop does);
//! - `raw`: no engine and no model: the same drivers, and a loop in this process doing a
//!   checkpoint read + write (`load_row`/`save_row`) and a transactional reply produce per message
//!   at the worker's concurrency cap: the ceiling the worker is compared with;
//! - `backlog`: `--backlog-messages` inbound turns produced before the worker starts, then the
//!   worker's RSS sampled while it works the backlog down (bounded memory under backlog).
//!
//! Load: each conversation is a task sending one turn, waiting for its reply as a
//! `read_committed` reader sees it, then sending the next (paced like a person). Scripts cycle
//! through collect (`cancel my order`: classifier + router), typed fill (`PED-1001`: no model),
//! confirm + execute (`yes`: no model, the tool runs); every `--interrupt-every`-th conversation
//! interrupts the collection with `where is my order PED-1002?` (meant for the router → order
//! tracking; its order number fills the pending cancellation instead, typed parameters beating
//! routing).
//!
//! Each phase has its own topics, consumer group and session ids; the run migrates one keyspace
//! (`turnstile_bench_<secs>_<random>`) and drops it at the end. Results: a Markdown table printed
//! and written to `target/bench/throughput-<timestamp>.md`; worker logs in `target/bench/logs/`.

use std::collections::HashMap;
use std::fmt::Write as _;

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, StreamConsumer};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{
    BaseRecord, DefaultProducerContext, FutureProducer, FutureRecord, Producer, ThreadedProducer,
};
use rdkafka::{Offset, TopicPartitionList};
use serde_json::{json, Map, Value};
use tokio::sync::{oneshot, Semaphore};

use turnstile::domain::decision::Skill;
use turnstile::domain::turn::Identity;
use turnstile::message::{Topics, HEADER_TURN_ID};
use turnstile::model::scripted::Scripted;
use turnstile::model::ModelScript;
use turnstile::store::cql::{write_timestamp, ScyllaCheckpointStore, StoredRow};
use turnstile::testkit::cql::{config as cql_config, contact as cql_contact};
use turnstile::testkit::model_server::{Behaviour, ModelServer};
use turnstile::testkit::tool_server::ToolServer;
use turnstile::testkit::worker_process::{self, http_get, WorkerEnv};

const TENANT: &str = "bench";
const AGENT: &str = "retail-bot";
const HELP: &str = "\
cargo bench --bench throughput -- [options]

  --decision-model M            who decides the turns that need a model (default scripted):
                                  scripted    the OpenAI-compatible model test server, answering
                                              after --model-latency-ms
                                  embeddings  the embedding decision model
                                              (config/profiles.embeddings.yaml) calling the
                                              embeddings server at EMBEDDINGS_BASE_URL (default
                                              http://127.0.0.1:8000/v1), examples cached in
                                              .cache/embeddings; --model-latency-ms is ignored
  --distinct-texts              a unique tag on every model-decided text (`cancel my order
                                [bcdf]`): the worker keeps the vectors of the last 512 texts it
                                embedded, so without this a repeated text costs no embeddings call
  --model-latency-ms N          model test server latency per call (default 200; scripted only)
  --conversations N             concurrent conversations (default 1000)
  --turns N                     turns per conversation (default 12)
  --partitions N                inbound topic partitions (default 12)
  --max-in-flight-per-partition N   worker cap (default 256, the worker default)
  --max-in-flight N             worker process cap (default 10000)
  --commit-interval-ms N        worker commit interval (default: the worker's, 50)
  --interrupt-every N           every N-th conversation interrupts (default 4; 0 = never)
  --phases LIST                 worker,baseline,raw,backlog (default worker,baseline,raw)
  --phase-secs N                cap on one phase's load (default 60)
  --reply-timeout-secs N        a turn without a reply after this counts as timed out (30)
  --backlog-messages N          backlog phase: inbound turns waiting (default 100000)
  --backlog-secs N              backlog phase: how long RSS is sampled (default 40)
  --out PATH                    results file (default target/bench/throughput-<ts>.md)
  --worker-bin PATH             run this turnstile binary instead of the one cargo built (A/B a
                                change against a saved build, alternating runs on one machine)

Needs Kafka at KAFKA_BROKERS (127.0.0.1:9092), Cassandra at CQL_CONTACT (127.0.0.1:9042) and,
for --decision-model embeddings, the embeddings server: bash scripts/services.sh up";

/// Who decides the turns a typed parser or the recogniser cannot settle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DecisionModel {
    /// The chat profiles, pointed at the in-process model test server.
    Scripted,
    /// `config/profiles.embeddings.yaml`: the real embeddings server, whose own latency counts.
    Embeddings,
}

impl DecisionModel {
    fn as_str(self) -> &'static str {
        match self {
            DecisionModel::Scripted => "scripted",
            DecisionModel::Embeddings => "embeddings",
        }
    }
}

#[derive(Debug, Clone)]
struct Args {
    decision_model: DecisionModel,
    distinct_texts: bool,
    model_latency_ms: u64,
    conversations: usize,
    turns: usize,
    partitions: i32,
    per_partition: usize,
    max_in_flight: usize,
    commit_interval_ms: Option<u64>,
    interrupt_every: usize,
    phases: Vec<String>,
    phase_secs: u64,
    reply_timeout_secs: u64,
    backlog_messages: usize,
    backlog_secs: u64,
    out: Option<PathBuf>,
    worker_bin: Option<PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        decision_model: DecisionModel::Scripted,
        distinct_texts: false,
        model_latency_ms: 200,
        conversations: 1000,
        turns: 12,
        partitions: 12,
        per_partition: 256,
        max_in_flight: 10_000,
        commit_interval_ms: None,
        interrupt_every: 4,
        phases: vec!["worker".into(), "baseline".into(), "raw".into()],
        phase_secs: 60,
        reply_timeout_secs: 30,
        backlog_messages: 100_000,
        backlog_secs: 40,
        out: None,
        worker_bin: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        // `cargo bench` appends `--bench`; libtest filters are not used here.
        if flag == "--bench" {
            continue;
        }
        if flag == "--help" || flag == "-h" {
            println!("{HELP}");
            std::process::exit(0);
        }
        if flag == "--distinct-texts" {
            a.distinct_texts = true;
            continue;
        }
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        fn num<T: std::str::FromStr>(flag: &str, v: String) -> Result<T, String> {
            v.parse()
                .map_err(|_| format!("{flag}: `{v}` is not a number"))
        }
        match flag.as_str() {
            "--decision-model" => {
                a.decision_model = match value()?.as_str() {
                    "scripted" => DecisionModel::Scripted,
                    "embeddings" => DecisionModel::Embeddings,
                    v => {
                        return Err(format!(
                            "--decision-model: `{v}` is neither scripted nor embeddings"
                        ))
                    }
                }
            }
            "--model-latency-ms" => a.model_latency_ms = num(&flag, value()?)?,
            "--conversations" => a.conversations = num(&flag, value()?)?,
            "--turns" => a.turns = num(&flag, value()?)?,
            "--partitions" => a.partitions = num(&flag, value()?)?,
            "--max-in-flight-per-partition" => a.per_partition = num(&flag, value()?)?,
            "--max-in-flight" => a.max_in_flight = num(&flag, value()?)?,
            "--commit-interval-ms" => a.commit_interval_ms = Some(num(&flag, value()?)?),
            "--interrupt-every" => a.interrupt_every = num(&flag, value()?)?,
            "--phases" => {
                a.phases = value()?
                    .split(',')
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty())
                    .collect();
                for p in &a.phases {
                    if !["worker", "baseline", "raw", "backlog"].contains(&p.as_str()) {
                        return Err(format!("--phases: unknown phase `{p}`"));
                    }
                }
            }
            "--phase-secs" => a.phase_secs = num(&flag, value()?)?,
            "--reply-timeout-secs" => a.reply_timeout_secs = num(&flag, value()?)?,
            "--backlog-messages" => a.backlog_messages = num(&flag, value()?)?,
            "--backlog-secs" => a.backlog_secs = num(&flag, value()?)?,
            "--out" => a.out = Some(PathBuf::from(value()?)),
            "--worker-bin" => a.worker_bin = Some(PathBuf::from(value()?)),
            other => return Err(format!("unknown option `{other}`\n\n{HELP}")),
        }
    }
    if a.conversations == 0 || a.turns == 0 || a.partitions < 1 || a.per_partition == 0 {
        return Err("conversations, turns, partitions and caps must be at least 1".into());
    }
    Ok(a)
}

fn main() {
    // `cargo test --all-targets` runs bench binaries without `--bench`: test mode runs the short
    // form (CI), which checks what the harness proves besides speed — every turn answered, none
    // dead-lettered, no model call on typed turns — and never judges timing.
    let short = !std::env::args().any(|a| a == "--bench");
    let args = if short {
        short_form()
    } else {
        match parse_args() {
            Ok(a) => a,
            Err(e) => {
                eprintln!("throughput: {e}");
                std::process::exit(2);
            }
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    match rt.block_on(run(args.clone())) {
        Err(e) => {
            eprintln!("throughput: {e}");
            std::process::exit(1);
        }
        Ok(rows) if short => {
            if let Err(problems) = check_short_form(&args, &rows) {
                for p in &problems {
                    eprintln!("throughput short form: {p}");
                }
                std::process::exit(1);
            }
            eprintln!("throughput short form: every phase answered every turn");
        }
        Ok(_) => {}
    }
}

/// The CI form: small, every phase, a slow-ish model so the worker has turns in flight.
fn short_form() -> Args {
    Args {
        decision_model: DecisionModel::Scripted,
        distinct_texts: false,
        model_latency_ms: 20,
        conversations: 24,
        turns: 6,
        partitions: 3,
        per_partition: 256,
        max_in_flight: 10_000,
        commit_interval_ms: None,
        interrupt_every: 4,
        phases: vec!["worker".into(), "baseline".into(), "raw".into()],
        phase_secs: 120,
        reply_timeout_secs: 60,
        backlog_messages: 0,
        backlog_secs: 0,
        out: Some(manifest("target/bench/throughput-short.md")),
        worker_bin: None,
    }
}

/// What the short form must show; a harness whose phases did no real work fails here.
fn check_short_form(args: &Args, rows: &[Row]) -> Result<(), Vec<String>> {
    let expected = (args.conversations * args.turns) as u64;
    let mut problems = Vec::new();
    for phase in &args.phases {
        let Some(r) = rows.iter().find(|r| &r.phase == phase) else {
            problems.push(format!("phase `{phase}` produced no result"));
            continue;
        };
        if r.sent != expected || r.turns != expected || r.timeouts != 0 {
            problems.push(format!(
                "phase `{phase}`: {} of {expected} turns sent, {} answered, {} timed out",
                r.sent, r.turns, r.timeouts
            ));
        }
        if r.dead_letters != 0 {
            problems.push(format!(
                "phase `{phase}`: {} turns dead-lettered",
                r.dead_letters
            ));
        }
        if phase != "raw" {
            problems.extend(
                model_problems(args, r)
                    .into_iter()
                    .map(|p| format!("phase `{phase}`: {p}")),
            );
            if r.cpu_us_per_turn.is_none_or(|c| c <= 0.0) || r.peak_rss_mb.is_none() {
                problems.push(format!("phase `{phase}`: worker CPU or RSS not measured"));
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// What a worker phase must show about its decisions, whatever its size or timing: no model
/// call on a turn a typed parser settles, and the decisions coming from the model asked for.
fn model_problems(args: &Args, r: &Row) -> Vec<String> {
    let mut problems = Vec::new();
    match args.decision_model {
        DecisionModel::Scripted => {
            if r.typed_turn_model_calls != Some(0) {
                problems.push(format!(
                    "model calls on typed turns: {:?}",
                    r.typed_turn_model_calls
                ));
            }
        }
        DecisionModel::Embeddings => {
            // Embeddings calls carry no turn id, so typed turns are checked by count: each one
            // settled by its parser adds one to `settled without a model`. Necessary, not
            // sufficient (the interrupting conversations' untyped fills settle there too).
            let settled = r.settled_without_model.unwrap_or(0.0);
            if settled < r.typed_answered as f64 {
                problems.push(format!(
                    "{settled:.0} turns settled without a model, fewer than the {} typed turns answered (a typed fill goes to the model when the turn that opened its transaction fell back: see the fallbacks)",
                    r.typed_answered
                ));
            }
            if r.embeddings_decisions.is_none_or(|n| n <= 0.0) {
                problems.push("no decision by the embeddings model".into());
            }
            if r.chat_requests != Some(0) {
                problems.push(format!(
                    "calls to the chat model test server: {:?}",
                    r.chat_requests
                ));
            }
        }
    }
    problems
}

// ---------------------------------------------------------------------------------------------
// Shared fixtures
// ---------------------------------------------------------------------------------------------

/// Kafka helpers: the project's `testkit::bus`, plus the bench's turn shape.
mod bus {
    pub use turnstile::testkit::bus::{brokers, create_topics, unique_suffix, unique_topics};

    /// The inbound JSON of a text turn of the bench's tenant and assistant.
    pub fn turn_json(session: &str, turn_id: &str, text: &str) -> Vec<u8> {
        turnstile::testkit::bus::turn_json(
            super::TENANT,
            super::AGENT,
            session,
            turn_id,
            Some(text),
            None,
            "en",
            None,
        )
    }
}

fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn manifest(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(p)
}

fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// utime + stime of a process, in seconds.
fn cpu_seconds(pid: u32, ticks: f64) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) / ticks)
}

/// A `/proc/<pid>/status` field in kB (VmHWM, VmRSS).
fn status_kb(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Sum of every series of one metric family sample (`name` or `name{...}`).
fn metric_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|r| r.starts_with('{') || r.starts_with(' '))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>()
        // An empty sum is -0.0, which would print as "-0".
        + 0.0
}

/// Sum of the series of `name` whose labels include every `key="value"` of `labels`.
fn metric_sum_where(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter_map(|l| l.strip_prefix(name)?.strip_prefix('{'))
        .filter_map(|rest| rest.split_once('}'))
        .filter(|(set, _)| {
            labels
                .iter()
                .all(|(k, v)| set.split(',').any(|kv| kv == format!("{k}=\"{v}\"")))
        })
        .filter_map(|(_, value)| value.trim().parse::<f64>().ok())
        .sum::<f64>()
        + 0.0
}

/// `turnstile_decisions_total` by skill and component, as `classifier 1200 embeddings / 3
/// fallback; …` (a component with no decision is left out).
fn decisions_breakdown(metrics: &str) -> String {
    let mut parts = Vec::new();
    for skill in [Skill::Classifier, Skill::Router, Skill::Interpreter] {
        let by: Vec<String> = ["embeddings", "llm", "fallback"]
            .iter()
            .filter_map(|c| {
                let n = metric_sum_where(
                    metrics,
                    "turnstile_decisions_total",
                    &[("skill", skill.as_str()), ("component", c)],
                );
                (n > 0.0).then(|| format!("{n:.0} {c}"))
            })
            .collect();
        if !by.is_empty() {
            parts.push(format!("{} {}", skill.as_str(), by.join(" / ")));
        }
    }
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join("; ")
    }
}

// ---------------------------------------------------------------------------------------------
// Reply reader: turn id → arrival time, as a read_committed reader sees it
// ---------------------------------------------------------------------------------------------

type Waiters = Arc<Mutex<HashMap<String, oneshot::Sender<Instant>>>>;

struct Reader {
    waiters: Waiters,
    stop: Arc<AtomicBool>,
    unmatched: Arc<AtomicU64>,
    dead: Arc<AtomicU64>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Reader {
    /// Reads `replies` and `dead_letters` (a dead-lettered turn has no reply, but is answered).
    fn start(brokers: &str, replies: &str, dead_letters: &str) -> Result<Arc<Reader>, String> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", brokers)
            .set("group.id", format!("bench-reader-{}", bus::unique_suffix()))
            .set("isolation.level", "read_committed")
            .set("enable.auto.commit", "false")
            .set("fetch.wait.max.ms", "5")
            .create()
            .map_err(|e| format!("reader: {e}"))?;
        let mut tpl = TopicPartitionList::new();
        for topic in [replies, dead_letters] {
            let meta = consumer
                .fetch_metadata(Some(topic), Duration::from_secs(10))
                .map_err(|e| format!("metadata of {topic}: {e}"))?;
            for t in meta.topics() {
                for p in t.partitions() {
                    tpl.add_partition_offset(topic, p.id(), Offset::Beginning)
                        .map_err(|e| e.to_string())?;
                }
            }
        }
        let dead_topic = dead_letters.to_owned();
        consumer.assign(&tpl).map_err(|e| format!("assign: {e}"))?;
        let waiters: Waiters = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let unmatched = Arc::new(AtomicU64::new(0));
        let dead = Arc::new(AtomicU64::new(0));
        let (w, s, u, d) = (
            waiters.clone(),
            stop.clone(),
            unmatched.clone(),
            dead.clone(),
        );
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let Some(Ok(m)) = consumer.poll(Duration::from_millis(20)) else {
                    continue;
                };
                let at = Instant::now();
                if m.topic() == dead_topic {
                    d.fetch_add(1, Ordering::Relaxed);
                }
                let turn_id = m.headers().and_then(|h| {
                    h.iter()
                        .find(|x| x.key == HEADER_TURN_ID)
                        .and_then(|x| x.value)
                        .map(|v| String::from_utf8_lossy(v).into_owned())
                });
                let waiter =
                    turn_id.and_then(|t| w.lock().unwrap_or_else(|e| e.into_inner()).remove(&t));
                match waiter {
                    Some(tx) => {
                        let _ = tx.send(at);
                    }
                    None => {
                        u.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        });
        Ok(Arc::new(Reader {
            waiters,
            stop,
            unmatched,
            dead,
            thread: Mutex::new(Some(thread)),
        }))
    }

    fn expect(&self, turn_id: &str) -> oneshot::Receiver<Instant> {
        let (tx, rx) = oneshot::channel();
        self.waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(turn_id.to_owned(), tx);
        rx
    }

    fn forget(&self, turn_id: &str) {
        self.waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(turn_id);
    }

    /// Stops reading; (replies matched to no waiting turn, dead letters).
    fn stop(&self) -> (u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = thread {
            let _ = t.join();
        }
        (
            self.unmatched.load(Ordering::Relaxed),
            self.dead.load(Ordering::Relaxed),
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Conversation scripts and the load generator
// ---------------------------------------------------------------------------------------------

/// One turn of a conversation's script.
struct ScriptTurn {
    text: String,
    /// A typed parser or the recogniser settles it (its turn id ends in `-typed`).
    typed: bool,
    /// The per-turn model script (the interrupt), if any.
    script: Option<ModelScript>,
}

/// Turn `t` of conversation `c`.
fn script_turn(args: &Args, c: usize, t: usize) -> ScriptTurn {
    let (text, typed, decided, script) = script_text(args, c, t);
    let text = if decided && args.distinct_texts {
        format!("{text} [{}]", tag(c * args.turns + t))
    } else {
        text.to_owned()
    };
    ScriptTurn {
        text,
        typed,
        script,
    }
}

/// A short tag unique to `n`, of consonants only so that it spells no word that would sway a
/// decision; four letters (160,000 tags) before a fifth.
fn tag(mut n: usize) -> String {
    const LETTERS: &[u8] = b"bcdfghjklmnpqrstvwxz";
    let mut out = Vec::new();
    while out.len() < 4 || n > 0 {
        out.push(LETTERS[n % LETTERS.len()]);
        n /= LETTERS.len();
    }
    String::from_utf8(out).unwrap_or_default()
}

/// The text of turn `t` of conversation `c`, whether a typed parser should settle it, whether
/// the scripted load has a model decide it (`--distinct-texts` tags those), and the per-turn
/// model script (the interrupt), if any.
fn script_text(args: &Args, c: usize, t: usize) -> (&'static str, bool, bool, Option<ModelScript>) {
    let interrupting =
        args.interrupt_every > 0 && c % args.interrupt_every == args.interrupt_every - 1;
    if interrupting {
        match t % 4 {
            0 => ("cancel my order", false, true, None),
            1 => {
                let mut router = Map::new();
                router.insert("agent".into(), json!("retail"));
                router.insert("intent".into(), json!("retail_order_tracking"));
                router.insert("confidence".into(), json!(0.95));
                router.insert("arguments".into(), json!({"order_id": "PED-1002"}));
                let script = ModelScript {
                    router: Some(Scripted::Answer(router)),
                    ..ModelScript::default()
                };
                ("where is my order PED-1002?", false, true, Some(script))
            }
            2 => ("PED-1001", false, false, None),
            _ => ("yes", false, false, None),
        }
    } else {
        match t % 3 {
            0 => ("cancel my order", false, true, None),
            1 => ("PED-1001", true, false, None),
            _ => ("yes", true, false, None),
        }
    }
}

#[derive(Default)]
struct Load {
    sent: u64,
    latencies_us: Vec<u64>,
    typed_answered: u64,
    timeouts: u64,
    first_send: Option<Instant>,
    last_reply: Option<Instant>,
}

impl Load {
    fn merge(&mut self, other: Load) {
        self.sent += other.sent;
        self.latencies_us.extend(other.latencies_us);
        self.typed_answered += other.typed_answered;
        self.timeouts += other.timeouts;
        self.first_send = match (self.first_send, other.first_send) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.last_reply = self.last_reply.max(other.last_reply);
    }
}

/// Drives every conversation to its last turn or to `deadline`; typed turns end in `-typed`.
async fn drive(
    args: &Args,
    phase: &str,
    topic: &str,
    producer: &FutureProducer,
    reader: &Arc<Reader>,
    model: &ModelServer,
) -> Load {
    let suffix = bus::unique_suffix();
    let deadline = Instant::now() + Duration::from_secs(args.phase_secs);
    let reply_timeout = Duration::from_secs(args.reply_timeout_secs);
    let mut tasks = Vec::new();
    let args = Arc::new(args.clone());
    for c in 0..args.conversations {
        let (args, producer, topic, reader) = (
            args.clone(),
            producer.clone(),
            topic.to_owned(),
            reader.clone(),
        );
        let session = format!("{phase}-{suffix}-c{c}");
        let key = format!("{TENANT}/{AGENT}/{session}");
        let model_scripts: Vec<(String, ModelScript)> = (0..args.turns)
            .filter_map(|t| {
                let turn = script_turn(&args, c, t);
                turn.script.map(|s| (turn_id(&session, t, turn.typed), s))
            })
            .collect();
        for (id, s) in &model_scripts {
            model.set_turn_script(id, s);
        }
        tasks.push(tokio::spawn(async move {
            let mut load = Load::default();
            for t in 0..args.turns {
                if Instant::now() >= deadline {
                    break;
                }
                let turn = script_turn(&args, c, t);
                let id = turn_id(&session, t, turn.typed);
                let payload = bus::turn_json(&session, &id, &turn.text);
                let rx = reader.expect(&id);
                let sent = Instant::now();
                load.first_send.get_or_insert(sent);
                load.sent += 1;
                let produced = producer
                    .send(
                        FutureRecord::to(&topic).key(&key).payload(&payload),
                        Duration::from_secs(30),
                    )
                    .await;
                if produced.is_err() {
                    reader.forget(&id);
                    load.timeouts += 1;
                    break;
                }
                let until = (sent + reply_timeout).min(deadline + Duration::from_secs(5));
                match tokio::time::timeout_at(until.into(), rx).await {
                    Ok(Ok(at)) => {
                        load.latencies_us
                            .push(at.saturating_duration_since(sent).as_micros() as u64);
                        load.last_reply = load.last_reply.max(Some(at));
                        load.typed_answered += u64::from(turn.typed);
                    }
                    _ => {
                        reader.forget(&id);
                        load.timeouts += 1;
                        break;
                    }
                }
            }
            load
        }));
    }
    let mut total = Load::default();
    for t in tasks {
        if let Ok(l) = t.await {
            total.merge(l);
        }
    }
    total
}

fn turn_id(session: &str, t: usize, typed: bool) -> String {
    if typed {
        format!("{session}-{t}-typed")
    } else {
        format!("{session}-{t}")
    }
}

// ---------------------------------------------------------------------------------------------
// The worker as a child process
// ---------------------------------------------------------------------------------------------

struct Worker {
    child: Child,
    listen: String,
}

impl Worker {
    fn spawn(
        args: &Args,
        fx: &Fixture,
        phase: &str,
        per_partition: usize,
        topics: &Topics,
    ) -> Result<Worker, String> {
        let listen = format!("127.0.0.1:{}", worker_process::free_port()?);
        let log = fx
            .log_dir
            .join(format!("{phase}-{}.log", bus::unique_suffix()));
        let suffix = bus::unique_suffix();
        let profiles = match args.decision_model {
            DecisionModel::Scripted => "config/profiles.example.yaml",
            DecisionModel::Embeddings => "config/profiles.embeddings.yaml",
        };
        let mut env = WorkerEnv {
            // Per-turn info logs are CPU the benchmark would charge to the engine.
            log_filter: "warn".into(),
            config: manifest("config/agents.example.yaml"),
            profiles: manifest(profiles),
            brokers: bus::brokers(),
            group_id: format!("bench-{phase}-{suffix}"),
            topics: topics.clone(),
            keyspace: fx.keyspace.clone(),
            cql_contact: cql_contact(),
            // Also with embeddings: a chat call would land on the test server and be counted.
            model_base_url: fx.model.base_url(),
            tools_base_url: fx.tools.base_url(),
            session_timeout_ms: 10_000,
            drain_budget_ms: 3_000,
            commit_interval_ms: args.commit_interval_ms,
        }
        .vars()?;
        for (k, v) in [
            ("TURNSTILE_INSTANCE_ID", format!("bench-{phase}-{suffix}")),
            (
                "TURNSTILE_MAX_IN_FLIGHT_PER_PARTITION",
                per_partition.to_string(),
            ),
            ("TURNSTILE_MAX_IN_FLIGHT", args.max_in_flight.to_string()),
            ("TURNSTILE_LISTEN", listen.clone()),
        ] {
            env.push((k.to_owned(), v));
        }
        if let Some(e) = &fx.embeddings {
            env.push(("TURNSTILE_EMBEDDINGS_BASE_URL".into(), e.base_url.clone()));
            // The examples' vectors from disk: a phase would otherwise start by re-embedding
            // them all on the one-thread server.
            env.push((
                "TURNSTILE_EMBEDDINGS_CACHE_DIR".into(),
                manifest(".cache/embeddings").display().to_string(),
            ));
        }
        let bin = args
            .worker_bin
            .clone()
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_turnstile")));
        let child = worker_process::spawn(&bin, &env, &log, &format!("bench phase {phase}"))
            .map_err(|e| {
                format!("{e} (cargo bench builds it; or `cargo build --release --bin turnstile`)")
            })?;
        Ok(Worker { child, listen })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn metrics(&self) -> String {
        http_get(&self.listen, "/metrics")
            .map(|(_, b)| b)
            .unwrap_or_default()
    }

    /// Until `/readyz` answers 200 and every partition is assigned.
    async fn wait_ready(&mut self, partitions: i32) -> Result<(), String> {
        let until = Instant::now() + Duration::from_secs(120);
        while Instant::now() < until {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("worker exited during start-up: {status}"));
            }
            let listen = self.listen.clone();
            let (ready, metrics) = tokio::task::spawn_blocking(move || {
                (
                    http_get(&listen, "/readyz").map(|x| x.0),
                    http_get(&listen, "/metrics").map(|x| x.1),
                )
            })
            .await
            .unwrap_or((None, None));
            let assigned = metrics
                .map(|m| metric_sum(&m, "turnstile_partitions_assigned"))
                .unwrap_or(0.0);
            if ready == Some(200) && assigned >= f64::from(partitions) {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        Err("worker not ready within 120 s".into())
    }

    fn stop(mut self) {
        worker_process::terminate(&mut self.child, Duration::from_secs(20));
    }
}

impl Drop for Worker {
    /// A failed phase must not leave a worker consuming in the background.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            worker_process::kill(&mut self.child);
        }
    }
}

/// Samples a worker's RSS and in-flight gauge once a second until stopped.
fn sample(pid: u32, listen: String, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Samples> {
    std::thread::spawn(move || {
        let mut s = Samples::default();
        let start = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            if let Some(rss) = status_kb(pid, "VmRSS:") {
                s.rss_kb.push((start.elapsed().as_secs_f64(), rss));
            }
            if let Some((_, m)) = http_get(&listen, "/metrics") {
                let f = metric_sum(&m, "turnstile_turns_in_flight");
                s.max_in_flight = s.max_in_flight.max(f);
                s.lag.push(metric_sum(&m, "turnstile_partition_lag"));
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        s
    })
}

#[derive(Default)]
struct Samples {
    rss_kb: Vec<(f64, u64)>,
    max_in_flight: f64,
    lag: Vec<f64>,
}

// ---------------------------------------------------------------------------------------------
// Results
// ---------------------------------------------------------------------------------------------

#[derive(Default, Clone)]
struct Row {
    phase: String,
    in_flight_cap: usize,
    turns: u64,
    sent: u64,
    timeouts: u64,
    seconds: f64,
    turns_per_s: f64,
    p50_ms: f64,
    p95_ms: f64,
    p99_ms: f64,
    cpu_us_per_turn: Option<f64>,
    peak_rss_mb: Option<f64>,
    /// Scripted: model test server calls per turn; embeddings: decisions per turn.
    model_calls_per_turn: Option<f64>,
    typed_turn_model_calls: Option<u64>,
    typed_answered: u64,
    settled_without_model: Option<f64>,
    /// Embeddings mode: the decisions the embeddings model made, by skill, and the calls that
    /// reached the chat test server anyway (there must be none).
    embeddings_decisions: Option<f64>,
    decisions: Option<String>,
    chat_requests: Option<u64>,
    reads_per_turn: Option<f64>,
    writes_per_turn: Option<f64>,
    max_in_flight_seen: Option<f64>,
    tool_executions: Option<usize>,
    little_bound: Option<f64>,
    dead_letters: u64,
    notes: String,
}

fn percentile(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)] as f64 / 1000.0
}

fn fill_load(row: &mut Row, mut load: Load) {
    load.latencies_us.sort_unstable();
    row.turns = load.latencies_us.len() as u64;
    row.sent = load.sent;
    row.typed_answered = load.typed_answered;
    row.timeouts = load.timeouts;
    row.seconds = match (load.first_send, load.last_reply) {
        (Some(a), Some(b)) => b.saturating_duration_since(a).as_secs_f64(),
        _ => 0.0,
    };
    row.turns_per_s = if row.seconds > 0.0 {
        row.turns as f64 / row.seconds
    } else {
        0.0
    };
    row.p50_ms = percentile(&load.latencies_us, 0.50);
    row.p95_ms = percentile(&load.latencies_us, 0.95);
    row.p99_ms = percentile(&load.latencies_us, 0.99);
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("–".into(), |x| format!("{x:.digits$}"))
}

// ---------------------------------------------------------------------------------------------
// Phases
// ---------------------------------------------------------------------------------------------

struct Fixture {
    keyspace: String,
    /// `Some` with `--decision-model embeddings`.
    embeddings: Option<EmbeddingsServer>,
    model: ModelServer,
    tools: ToolServer,
    producer: FutureProducer,
    log_dir: PathBuf,
    ticks: f64,
}

/// The embeddings server the worker calls, and its latency measured before the load.
struct EmbeddingsServer {
    base_url: String,
    /// Median of sequential single-text calls on one connection, with nothing else queued.
    idle_ms: f64,
}

/// Reaches the embeddings server (a run against a stopped one would only measure fallbacks)
/// and measures its idle latency per call: one text per call, as the worker sends per turn.
async fn probe_embeddings(base_url: &str) -> Result<EmbeddingsServer, String> {
    let url = format!("{}/embeddings", base_url.trim_end_matches('/'));
    let http = reqwest::Client::new();
    let mut ms = Vec::new();
    for i in 0..11 {
        let body = json!({"model": "e5-query", "input": [format!("cancel my order [{}]", tag(i))]});
        let started = Instant::now();
        let answer = http
            .post(&url)
            .header("content-type", "application/json")
            .body(body.to_string())
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .map_err(|e| {
                format!("embeddings server at {url} is unreachable ({e}); run bash scripts/services.sh up")
            })?;
        let status = answer.status();
        let _ = answer.bytes().await;
        if !status.is_success() {
            return Err(format!("embeddings server at {url}: status {status}"));
        }
        // The first call opens the connection.
        if i > 0 {
            ms.push(started.elapsed().as_secs_f64() * 1000.0);
        }
    }
    ms.sort_by(f64::total_cmp);
    Ok(EmbeddingsServer {
        base_url: base_url.to_owned(),
        idle_ms: ms[ms.len() / 2],
    })
}

async fn new_topics(phase: &str, partitions: i32) -> Result<Topics, String> {
    let topics = bus::unique_topics(&format!("bench-{phase}"));
    bus::create_topics(&bus::brokers(), &topics, partitions).await?;
    Ok(topics)
}

async fn worker_phase(
    args: &Args,
    fx: &Fixture,
    phase: &str,
    per_partition: usize,
) -> Result<Row, String> {
    let topics = new_topics(phase, args.partitions).await?;
    let reader = Reader::start(&bus::brokers(), &topics.replies, &topics.dead_letters)?;
    let mut worker = Worker::spawn(args, fx, phase, per_partition, &topics)?;
    worker.wait_ready(args.partitions).await?;
    fx.model.clear_requests();
    let executions_before = fx.tools.executions().len();
    let cpu0 = cpu_seconds(worker.pid(), fx.ticks).unwrap_or(0.0);
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample(worker.pid(), worker.listen.clone(), stop.clone());
    eprintln!(
        "[{phase}] worker ready (pid {}, metrics http://{}/metrics); driving {} conversations",
        worker.pid(),
        worker.listen,
        args.conversations
    );
    let load = drive(
        args,
        phase,
        &topics.inbound,
        &fx.producer,
        &reader,
        &fx.model,
    )
    .await;
    let cpu1 = cpu_seconds(worker.pid(), fx.ticks).unwrap_or(cpu0);
    stop.store(true, Ordering::Relaxed);
    let samples = sampler.join().unwrap_or_default();
    let metrics = worker.metrics();
    let hwm = status_kb(worker.pid(), "VmHWM:");
    let (unmatched, dead) = reader.stop();
    worker.stop();

    let mut row = Row {
        phase: phase.into(),
        in_flight_cap: args
            .max_in_flight
            .min(per_partition * args.partitions as usize),
        ..Row::default()
    };
    fill_load(&mut row, load);
    let worker_turns = metric_sum(&metrics, "turnstile_turns_total").max(1.0);
    row.cpu_us_per_turn = Some((cpu1 - cpu0) * 1e6 / worker_turns);
    row.peak_rss_mb = hwm.map(|k| k as f64 / 1024.0);
    let model_calls = metric_sum(&metrics, "turnstile_model_requests_total");
    row.model_calls_per_turn = Some(model_calls_per_turn(args, &metrics, worker_turns));
    row.settled_without_model = Some(metric_sum(
        &metrics,
        "turnstile_turns_settled_without_model_total",
    ));
    row.reads_per_turn = Some(
        metric_sum(&metrics, "turnstile_checkpoint_load_duration_seconds_count") / worker_turns,
    );
    row.writes_per_turn = Some(
        metric_sum(&metrics, "turnstile_checkpoint_save_duration_seconds_count") / worker_turns,
    );
    row.max_in_flight_seen = Some(samples.max_in_flight);
    let requests = fx.model.requests();
    fx.model.clear_requests();
    match args.decision_model {
        DecisionModel::Scripted => {
            row.typed_turn_model_calls = Some(
                requests
                    .iter()
                    .filter(|r| r.turn_id.as_deref().is_some_and(|t| t.ends_with("-typed")))
                    .count() as u64,
            );
            let active = args.conversations.min(row.in_flight_cap) as f64;
            let w = args.model_latency_ms as f64 / 1000.0 * (model_calls / worker_turns);
            row.little_bound = (w > 0.0).then(|| active / w);
        }
        // No fixed model latency, so no Little's-law bound: the embeddings server's queue is
        // part of what is measured.
        DecisionModel::Embeddings => {
            row.chat_requests = Some(requests.len() as u64);
            row.embeddings_decisions = Some(metric_sum_where(
                &metrics,
                "turnstile_decisions_total",
                &[("component", "embeddings")],
            ));
            row.decisions = Some(decisions_breakdown(&metrics));
        }
    }
    let executions = fx.tools.executions();
    row.tool_executions = Some(executions.len() - executions_before);
    let mut by_tool: std::collections::BTreeMap<&str, usize> = Default::default();
    for e in &executions[executions_before..] {
        *by_tool.entry(e.tool.as_str()).or_default() += 1;
    }
    row.dead_letters = dead;
    row.notes = format!(
        "worker turns {worker_turns:.0}; dead letters {dead}; outputs matched to no waiting turn {unmatched}; executions by tool {by_tool:?}; {}",
        health(&metrics)
    );
    save_metrics(&fx.log_dir, phase, &metrics);
    Ok(row)
}

/// What the `model calls/turn` column shows: the test server's calls (scripted, one per
/// decision), or every `turnstile_decisions_total` (embeddings, whose calls have no metric;
/// one embeddings call serves a turn's classifier and router alike).
fn model_calls_per_turn(args: &Args, metrics: &str, turns: f64) -> f64 {
    let calls = match args.decision_model {
        DecisionModel::Scripted => metric_sum(metrics, "turnstile_model_requests_total"),
        DecisionModel::Embeddings => metric_sum(metrics, "turnstile_decisions_total"),
    };
    calls / turns.max(1.0)
}

/// Mean seconds of a histogram (all series summed), as `12 ms`.
fn mean_ms(metrics: &str, name: &str) -> String {
    let count = metric_sum(metrics, &format!("{name}_count"));
    if count == 0.0 {
        return "–".into();
    }
    format!(
        "{:.0} ms",
        1000.0 * metric_sum(metrics, &format!("{name}_sum")) / count
    )
}

/// Where a turn's time went and whether the services misbehaved during the phase (a run with
/// store errors or commit failures measured an outage, not the worker).
fn health(metrics: &str) -> String {
    format!(
        "mean turn {}, checkpoint load {}, save {}, model call {}, tool call {}, commit {}; checkpoint errors {:.0}, model fallbacks {:.0}, commit failures {:.0}",
        mean_ms(metrics, "turnstile_turn_duration_seconds"),
        mean_ms(metrics, "turnstile_checkpoint_load_duration_seconds"),
        mean_ms(metrics, "turnstile_checkpoint_save_duration_seconds"),
        mean_ms(metrics, "turnstile_model_request_duration_seconds"),
        mean_ms(metrics, "turnstile_tool_call_duration_seconds"),
        mean_ms(metrics, "turnstile_commit_duration_seconds"),
        metric_sum(metrics, "turnstile_checkpoint_errors_total"),
        metric_sum(metrics, "turnstile_model_fallbacks_total"),
        metric_sum(metrics, "turnstile_commit_failures_total"),
    )
}

/// Keeps the worker's last scrape next to its log, for diagnosis.
fn save_metrics(dir: &Path, phase: &str, metrics: &str) {
    let path = dir.join(format!("{phase}-{}.metrics.txt", unix_secs()));
    if std::fs::write(&path, metrics).is_ok() {
        eprintln!("[{phase}] worker metrics saved to {}", path.display());
    }
}

/// The ceiling: the same drivers, no engine: read + write + transactional produce per message.
async fn raw_phase(args: &Args, fx: &Fixture) -> Result<Row, String> {
    let phase = "raw";
    let topics = new_topics(phase, args.partitions).await?;
    let reader = Reader::start(&bus::brokers(), &topics.replies, &topics.dead_letters)?;
    let store = Arc::new(
        ScyllaCheckpointStore::connect(&cql_config(&fx.keyspace))
            .await
            .map_err(|e| format!("connect store: {e}"))?,
    );
    let group = format!("bench-raw-{}", bus::unique_suffix());
    let consumer: Arc<StreamConsumer> = Arc::new(
        ClientConfig::new()
            .set("bootstrap.servers", bus::brokers())
            .set("group.id", &group)
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "earliest")
            .set("fetch.wait.max.ms", "5")
            .create()
            .map_err(|e| format!("raw consumer: {e}"))?,
    );
    consumer
        .subscribe(&[&topics.inbound])
        .map_err(|e| format!("subscribe: {e}"))?;
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", bus::brokers())
        .set(
            "transactional.id",
            format!("bench-raw-{}", bus::unique_suffix()),
        )
        .set("linger.ms", "1")
        .create()
        .map_err(|e| format!("raw producer: {e}"))?;
    let producer = tokio::task::spawn_blocking(move || {
        producer
            .init_transactions(Duration::from_secs(60))
            .map(|()| producer)
    })
    .await
    .map_err(|e| e.to_string())?
    .map_err(|e| format!("init transactions: {e}"))?;

    // Committer: one transaction per commit interval with the replies and the offsets.
    let (done_tx, done_rx) = std::sync::mpsc::channel::<(String, String, i32, i64)>();
    let stop = Arc::new(AtomicBool::new(false));
    let interval = Duration::from_millis(args.commit_interval_ms.unwrap_or(50));
    let committer = {
        let (stop, consumer, replies, inbound) = (
            stop.clone(),
            consumer.clone(),
            topics.replies.clone(),
            topics.inbound.clone(),
        );
        std::thread::spawn(move || -> Result<(), String> {
            while !stop.load(Ordering::Relaxed) {
                let first = match done_rx.recv_timeout(Duration::from_millis(100)) {
                    Ok(x) => x,
                    Err(_) => continue,
                };
                producer.begin_transaction().map_err(|e| e.to_string())?;
                let until = Instant::now() + interval;
                let mut batch = vec![first];
                while let Some(left) = until.checked_duration_since(Instant::now()) {
                    match done_rx.recv_timeout(left) {
                        Ok(x) => batch.push(x),
                        Err(_) => break,
                    }
                }
                let mut offsets: HashMap<i32, i64> = HashMap::new();
                for (key, turn_id, p, o) in &batch {
                    let payload = format!(r#"{{"turn_id":"{turn_id}","text":"ok"}}"#);
                    let headers = OwnedHeaders::new().insert(Header {
                        key: HEADER_TURN_ID,
                        value: Some(turn_id.as_bytes()),
                    });
                    let mut record = BaseRecord::to(&replies)
                        .key(key.as_str())
                        .payload(payload.as_str())
                        .headers(headers);
                    loop {
                        match producer.send(record) {
                            Ok(()) => break,
                            Err((_, r)) => {
                                record = r;
                                std::thread::sleep(Duration::from_millis(1));
                            }
                        }
                    }
                    let e = offsets.entry(*p).or_insert(*o);
                    *e = (*e).max(*o);
                }
                let mut tpl = TopicPartitionList::new();
                for (p, o) in offsets {
                    tpl.add_partition_offset(&inbound, p, Offset::Offset(o + 1))
                        .map_err(|e| e.to_string())?;
                }
                let meta = consumer
                    .group_metadata()
                    .ok_or("no consumer group metadata")?;
                producer
                    .send_offsets_to_transaction(&tpl, &meta, Duration::from_secs(30))
                    .map_err(|e| e.to_string())?;
                producer
                    .commit_transaction(Duration::from_secs(30))
                    .map_err(|e| e.to_string())?;
            }
            Ok(())
        })
    };

    // Consumer loop: one task per message, at most the worker's concurrency cap at once.
    let cap = args
        .max_in_flight
        .min(args.per_partition * args.partitions as usize);
    let permits = Arc::new(Semaphore::new(cap));
    let errors = Arc::new(AtomicU64::new(0));
    let pump = {
        let (consumer, store, permits, errors) = (
            consumer.clone(),
            store.clone(),
            permits.clone(),
            errors.clone(),
        );
        tokio::spawn(async move {
            loop {
                let Ok(m) = consumer.recv().await else {
                    continue;
                };
                let (partition, offset) = (m.partition(), m.offset());
                let key = m
                    .key()
                    .map(|k| String::from_utf8_lossy(k).into_owned())
                    .unwrap_or_default();
                let payload = m.payload().map(<[u8]>::to_vec).unwrap_or_default();
                drop(m);
                let Ok(permit) = permits.clone().acquire_owned().await else {
                    return;
                };
                let (store, done, errors) = (store.clone(), done_tx.clone(), errors.clone());
                tokio::spawn(async move {
                    let _permit = permit;
                    let turn: Value = serde_json::from_slice(&payload).unwrap_or(Value::Null);
                    let turn_id = turn["turn_id"].as_str().unwrap_or_default().to_owned();
                    let mut parts = key.splitn(3, '/');
                    let id = Identity::new(
                        parts.next().unwrap_or_default(),
                        parts.next().unwrap_or_default(),
                        parts.next().unwrap_or_default(),
                    );
                    let loaded = store.load_row(&id).await;
                    let row = StoredRow {
                        state: payload,
                        in_flight: None,
                        applied: Some((partition, offset)),
                        outbox: None,
                        epoch: 1,
                    };
                    let saved = match write_timestamp(1, offset, 1) {
                        Ok(ts) => store.save_row(&id, &row, ts).await,
                        Err(e) => Err(e),
                    };
                    if loaded.is_err() || saved.is_err() {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                    let _ = done.send((key, turn_id, partition, offset));
                });
            }
        })
    };
    let until = Instant::now() + Duration::from_secs(60);
    while consumer.assignment().map_or(0, |a| a.count()) < args.partitions as usize {
        if Instant::now() > until {
            return Err("raw loop: partitions not assigned within 60 s".into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!(
        "[raw] loop ready; driving {} conversations",
        args.conversations
    );
    let cpu0 = cpu_seconds(std::process::id(), fx.ticks).unwrap_or(0.0);
    let load = drive(
        args,
        phase,
        &topics.inbound,
        &fx.producer,
        &reader,
        &fx.model,
    )
    .await;
    let cpu1 = cpu_seconds(std::process::id(), fx.ticks).unwrap_or(cpu0);
    pump.abort();
    stop.store(true, Ordering::Relaxed);
    let committed = tokio::task::spawn_blocking(move || committer.join())
        .await
        .map_err(|e| e.to_string())?;
    let (unmatched, _) = reader.stop();
    fx.model.clear_requests();
    let mut row = Row {
        phase: phase.into(),
        in_flight_cap: cap,
        reads_per_turn: Some(1.0),
        writes_per_turn: Some(1.0),
        model_calls_per_turn: Some(0.0),
        ..Row::default()
    };
    fill_load(&mut row, load);
    row.notes = format!(
        "store errors {}; committer {}; bench process (drivers + loop + test servers) CPU {:.0} µs/turn; unmatched {unmatched}",
        errors.load(Ordering::Relaxed),
        match committed {
            Ok(Ok(())) => "ok".to_owned(),
            Ok(Err(e)) => format!("failed: {e}"),
            Err(_) => "panicked".to_owned(),
        },
        (cpu1 - cpu0) * 1e6 / (row.turns.max(1) as f64),
    );
    Ok(row)
}

/// Bounded memory under backlog: `--backlog-messages` turns wait before the worker starts.
async fn backlog_phase(args: &Args, fx: &Fixture) -> Result<Row, String> {
    let phase = "backlog";
    let topics = new_topics(phase, args.partitions).await?;
    let suffix = bus::unique_suffix();
    eprintln!(
        "[backlog] producing {} inbound turns",
        args.backlog_messages
    );
    let started = Instant::now();
    let mut pending = Vec::with_capacity(10_000);
    for i in 0..args.backlog_messages {
        let session = format!("backlog-{suffix}-c{i}");
        let key = format!("{TENANT}/{AGENT}/{session}");
        let id = format!("{session}-0");
        let text = if args.distinct_texts {
            format!("cancel my order [{}]", tag(i))
        } else {
            "cancel my order".to_owned()
        };
        let payload = bus::turn_json(&session, &id, &text);
        let p = fx.producer.clone();
        let topic = topics.inbound.clone();
        pending.push(tokio::spawn(async move {
            p.send(
                FutureRecord::to(&topic).key(&key).payload(&payload),
                Duration::from_secs(60),
            )
            .await
            .is_ok()
        }));
        if pending.len() >= 10_000 {
            for t in pending.drain(..) {
                let _ = t.await;
            }
        }
    }
    for t in pending.drain(..) {
        let _ = t.await;
    }
    eprintln!(
        "[backlog] produced in {:.1} s; starting the worker",
        started.elapsed().as_secs_f64()
    );
    let mut worker = Worker::spawn(args, fx, phase, args.per_partition, &topics)?;
    worker.wait_ready(args.partitions).await?;
    let cpu0 = cpu_seconds(worker.pid(), fx.ticks).unwrap_or(0.0);
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample(worker.pid(), worker.listen.clone(), stop.clone());
    tokio::time::sleep(Duration::from_secs(args.backlog_secs)).await;
    let cpu1 = cpu_seconds(worker.pid(), fx.ticks).unwrap_or(cpu0);
    stop.store(true, Ordering::Relaxed);
    let samples = sampler.join().unwrap_or_default();
    let metrics = worker.metrics();
    let hwm = status_kb(worker.pid(), "VmHWM:");
    worker.stop();
    fx.model.clear_requests();
    save_metrics(&fx.log_dir, phase, &metrics);
    let turns = metric_sum(&metrics, "turnstile_turns_total");
    let rss = &samples.rss_kb;
    let half = rss.len() / 2;
    let mean = |s: &[(f64, u64)]| {
        s.iter().map(|x| x.1 as f64).sum::<f64>() / (s.len().max(1) as f64) / 1024.0
    };
    let row = Row {
        phase: phase.into(),
        in_flight_cap: args
            .max_in_flight
            .min(args.per_partition * args.partitions as usize),
        turns: turns as u64,
        sent: args.backlog_messages as u64,
        seconds: args.backlog_secs as f64,
        turns_per_s: turns / args.backlog_secs as f64,
        p50_ms: f64::NAN,
        p95_ms: f64::NAN,
        p99_ms: f64::NAN,
        cpu_us_per_turn: Some((cpu1 - cpu0) * 1e6 / turns.max(1.0)),
        peak_rss_mb: hwm.map(|k| k as f64 / 1024.0),
        model_calls_per_turn: Some(model_calls_per_turn(args, &metrics, turns)),
        max_in_flight_seen: Some(samples.max_in_flight),
        decisions: (args.decision_model == DecisionModel::Embeddings)
            .then(|| decisions_breakdown(&metrics)),
        notes: format!(
            "{} inbound waiting at start; lag first/last sample {:.0}/{:.0}; mean RSS first half {:.1} MB, second half {:.1} MB; {}",
            args.backlog_messages,
            samples.lag.first().copied().unwrap_or(f64::NAN),
            samples.lag.last().copied().unwrap_or(f64::NAN),
            mean(&rss[..half]),
            mean(&rss[half..]),
            health(&metrics),
        ),
        ..Row::default()
    };
    Ok(row)
}

// ---------------------------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------------------------

async fn run(args: Args) -> Result<Vec<Row>, String> {
    for (what, addr) in [("Kafka", bus::brokers()), ("Cassandra", cql_contact())] {
        let first = addr.split(',').next().unwrap_or_default().trim().to_owned();
        let a: std::net::SocketAddr = first
            .parse()
            .map_err(|e| format!("{what} address {first}: {e}"))?;
        TcpStream::connect_timeout(&a, Duration::from_secs(3)).map_err(|e| {
            format!("{what} at {first} is unreachable ({e}); run bash scripts/services.sh up")
        })?;
    }
    let embeddings = match args.decision_model {
        DecisionModel::Scripted => None,
        DecisionModel::Embeddings => {
            let url = std::env::var("EMBEDDINGS_BASE_URL")
                .ok()
                .filter(|u| !u.trim().is_empty())
                .unwrap_or_else(|| "http://127.0.0.1:8000/v1".into());
            let server = probe_embeddings(&url).await?;
            eprintln!(
                "embeddings server {url}: {:.1} ms per call when idle",
                server.idle_ms
            );
            Some(server)
        }
    };
    let bench_dir = manifest("target/bench");
    let log_dir = bench_dir.join("logs");
    std::fs::create_dir_all(&log_dir).map_err(|e| e.to_string())?;
    let keyspace = format!(
        "turnstile_bench_{}_{}",
        unix_secs(),
        bus::unique_suffix()
            .chars()
            .rev()
            .take(6)
            .collect::<String>()
    );
    eprintln!("migrating keyspace {keyspace}");
    ScyllaCheckpointStore::migrate(&cql_config(&keyspace))
        .await
        .map_err(|e| format!("migrate {keyspace}: {e}"))?;

    let model = ModelServer::start().await;
    let latency = Duration::from_millis(args.model_latency_ms);
    model.set_default(
        Skill::Classifier,
        Behaviour::answer(json!({"decision": "ROUTE", "confidence": 0.97})).with_latency(latency),
    );
    model.set_default(
        Skill::Router,
        Behaviour::answer(
            json!({"agent": "retail", "intent": "retail_order_cancel", "confidence": 0.95}),
        )
        .with_latency(latency),
    );
    model.set_default(
        Skill::Interpreter,
        Behaviour::answer(json!({"act": "confirm", "confidence": 0.95})).with_latency(latency),
    );
    let tools = ToolServer::start()
        .await
        .map_err(|e| format!("tool server: {e}"))?;
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bus::brokers())
        .set("enable.idempotence", "true")
        .set("linger.ms", "1")
        .set("queue.buffering.max.messages", "1000000")
        .create()
        .map_err(|e| format!("producer: {e}"))?;
    let fx = Fixture {
        keyspace: keyspace.clone(),
        embeddings,
        model,
        tools,
        producer,
        log_dir,
        ticks: clock_ticks(),
    };

    let mut rows: Vec<Row> = Vec::new();
    let mut failures = Vec::new();
    for phase in &args.phases {
        eprintln!("[{phase}] starting");
        let result = match phase.as_str() {
            "worker" => worker_phase(&args, &fx, "worker", args.per_partition).await,
            "baseline" => worker_phase(&args, &fx, "baseline", 1).await,
            "raw" => raw_phase(&args, &fx).await,
            _ => backlog_phase(&args, &fx).await,
        };
        match result {
            Ok(r) => {
                eprintln!(
                    "[{phase}] {} turns in {:.1} s = {:.1} turns/s, p50 {:.0} ms",
                    r.turns, r.seconds, r.turns_per_s, r.p50_ms
                );
                rows.push(r);
            }
            Err(e) => {
                eprintln!("[{phase}] FAILED: {e}");
                failures.push(format!("{phase}: {e}"));
            }
        }
    }

    if let Ok(store) = ScyllaCheckpointStore::connect(&cql_config(&keyspace)).await {
        let _ = store
            .session()
            .query_unpaged(format!("DROP KEYSPACE IF EXISTS {keyspace}"), ())
            .await;
    }

    let report = render(&args, &fx, &rows, &failures);
    println!("{report}");
    let path = args
        .out
        .clone()
        .unwrap_or_else(|| bench_dir.join(format!("throughput-{}.md", unix_secs())));
    std::fs::write(&path, &report).map_err(|e| format!("{}: {e}", path.display()))?;
    eprintln!("results written to {}", path.display());
    if failures.is_empty() {
        Ok(rows)
    } else {
        Err(format!("{} phase(s) failed", failures.len()))
    }
}

fn render(args: &Args, fx: &Fixture, rows: &[Row], failures: &[String]) -> String {
    let mut s = String::new();
    let now = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    let _ = writeln!(s, "## Throughput run {now}\n");
    // The model latency is left out where it plays no part, so the line reproduces the run
    // without suggesting it does.
    let mut model = format!("--decision-model {}", args.decision_model.as_str());
    if args.decision_model == DecisionModel::Scripted {
        let _ = write!(model, " --model-latency-ms {}", args.model_latency_ms);
    }
    let distinct = if args.distinct_texts {
        " --distinct-texts"
    } else {
        ""
    };
    let _ = writeln!(
        s,
        "Command: `cargo bench --bench throughput -- {model}{distinct} --conversations {} --turns {} --partitions {} --max-in-flight-per-partition {} --max-in-flight {} --interrupt-every {} --phases {} --phase-secs {}`\n",
        args.conversations,
        args.turns,
        args.partitions,
        args.per_partition,
        args.max_in_flight,
        args.interrupt_every,
        args.phases.join(","),
        args.phase_secs,
    );
    if let Some(bin) = &args.worker_bin {
        let _ = writeln!(s, "Worker binary: `{}` (`--worker-bin`).\n", bin.display());
    }
    match &fx.embeddings {
        None => {
            let _ = writeln!(
                s,
                "Decision model: scripted (`config/profiles.example.yaml`, the model test server answering after {} ms).\n",
                args.model_latency_ms
            );
        }
        Some(e) => {
            let _ = writeln!(
                s,
                "Decision model: embeddings (`config/profiles.embeddings.yaml`, server {}, {:.1} ms per call when idle, examples cached in `.cache/embeddings`); texts {}.\n",
                e.base_url,
                e.idle_ms,
                if args.distinct_texts {
                    "distinct (every model-decided text tagged, so each such turn costs an embeddings call)"
                } else {
                    "repeated (the worker's cache of the last 512 embedded texts answers all but the first of each)"
                },
            );
        }
    }
    let _ = writeln!(
        s,
        "Machine: {} cores (`nproc`), Kafka + Cassandra + load generator + test servers on the same host; load average at the end: {}.\n",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        std::fs::read_to_string("/proc/loadavg")
            .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .unwrap_or_default(),
    );
    let baseline = rows
        .iter()
        .find(|r| r.phase == "baseline")
        .map(|r| r.turns_per_s);
    let raw = rows
        .iter()
        .find(|r| r.phase == "raw")
        .map(|r| r.turns_per_s);
    let calls = match args.decision_model {
        DecisionModel::Scripted => "model calls/turn",
        DecisionModel::Embeddings => "model decisions/turn",
    };
    let _ = writeln!(
        s,
        "| phase | in-flight cap | turns | turns/s | p50 ms | p95 ms | p99 ms | worker CPU µs/turn | peak RSS MB | {calls} | store reads/turn | store writes/turn | × baseline | % Little bound | % raw loop |"
    );
    let _ = writeln!(
        s,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for r in rows {
        let ratio = |base: Option<f64>| base.filter(|b| *b > 0.0).map(|b| r.turns_per_s / b);
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.1} | {:.0} | {:.0} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.phase,
            r.in_flight_cap,
            r.turns,
            r.turns_per_s,
            r.p50_ms,
            r.p95_ms,
            r.p99_ms,
            opt(r.cpu_us_per_turn, 0),
            opt(r.peak_rss_mb, 1),
            opt(r.model_calls_per_turn, 2),
            opt(r.reads_per_turn, 2),
            opt(r.writes_per_turn, 2),
            if r.phase == "baseline" { "1.0".into() } else { opt(ratio(baseline), 1) },
            opt(r.little_bound.map(|b| 100.0 * r.turns_per_s / b), 0),
            if r.phase == "raw" { "100".into() } else { opt(ratio(raw).map(|x| x * 100.0), 0) },
        );
    }
    let _ = writeln!(s);
    for r in rows {
        let model = match args.decision_model {
            DecisionModel::Scripted => format!(
                "model calls on typed turns {}",
                r.typed_turn_model_calls
                    .map_or("–".into(), |n| n.to_string())
            ),
            DecisionModel::Embeddings => format!(
                "typed turns answered {}; decisions (`turnstile_decisions_total`) {}; calls to the chat test server {}",
                r.typed_answered,
                r.decisions.as_deref().unwrap_or("–"),
                r.chat_requests.map_or("–".into(), |n| n.to_string()),
            ),
        };
        let checks = if r.phase == "worker" || r.phase == "baseline" {
            let problems = model_problems(args, r);
            if problems.is_empty() {
                " Decision checks: ok.".to_owned()
            } else {
                format!(" **Decision checks failed**: {}.", problems.join("; "))
            }
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "- **{}**: {} sent, {} answered, {} timed out or cut by the phase cap, over {:.1} s; peak turns in flight (sampled 1/s) {}; turns settled without a model call {}; {model}; tool executions {}; Little's-law bound {} turns/s. {}{checks}",
            r.phase,
            r.sent,
            r.turns,
            r.timeouts,
            r.seconds,
            opt(r.max_in_flight_seen, 0),
            opt(r.settled_without_model, 0),
            r.tool_executions.map_or("–".into(), |n| n.to_string()),
            opt(r.little_bound, 0),
            r.notes,
        );
    }
    let _ = writeln!(
        s,
        "\nLittle's-law bound = min(in-flight cap, conversations) ÷ (model latency × model calls per turn measured in that phase): the rate if every turn in flight only waited for its model calls, in sequence (none with the embeddings model, whose latency is the server's queue). Reply latency: inbound produce → reply visible to a `read_committed` reader. Worker CPU: utime+stime of the worker process from load start to load end ÷ turns the worker counted. Peak RSS: VmHWM of the worker process (whole life)."
    );
    for f in failures {
        let _ = writeln!(s, "\n**FAILED** {f}");
    }
    s
}
