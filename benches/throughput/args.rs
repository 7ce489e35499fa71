//! Command line: the options, their defaults, and the short form `cargo test` runs.

use std::path::PathBuf;

use crate::servers::manifest;

pub const HELP: &str = "\
cargo bench --features harness --bench throughput -- [options]

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
  --keep-keyspace               keep the run's keyspace (checkpoints and decision records) for
                                `turnstile replay --sample N --keyspace K`; printed at the end

Needs Kafka at KAFKA_BROKERS (127.0.0.1:9092), Cassandra at CQL_CONTACT (127.0.0.1:9042) and,
for --decision-model embeddings, the embeddings server: bash scripts/services.sh up";

/// Who decides the turns a typed parser or the recogniser cannot settle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecisionModel {
    /// The chat profiles, pointed at the in-process model test server.
    Scripted,
    /// `config/profiles.embeddings.yaml`: the real embeddings server, whose own latency counts.
    Embeddings,
}

impl DecisionModel {
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionModel::Scripted => "scripted",
            DecisionModel::Embeddings => "embeddings",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Args {
    pub decision_model: DecisionModel,
    pub distinct_texts: bool,
    pub model_latency_ms: u64,
    pub conversations: usize,
    pub turns: usize,
    pub partitions: i32,
    pub per_partition: usize,
    pub max_in_flight: usize,
    pub commit_interval_ms: Option<u64>,
    pub interrupt_every: usize,
    pub phases: Vec<String>,
    pub phase_secs: u64,
    pub reply_timeout_secs: u64,
    pub backlog_messages: usize,
    pub backlog_secs: u64,
    pub out: Option<PathBuf>,
    pub worker_bin: Option<PathBuf>,
    pub keep_keyspace: bool,
}

impl Args {
    /// The worker's concurrency cap: `per_partition` turns in each partition, at most
    /// `--max-in-flight` in the process.
    pub fn in_flight_cap(&self, per_partition: usize) -> usize {
        self.max_in_flight
            .min(per_partition * self.partitions as usize)
    }
}

pub fn parse_args() -> Result<Args, String> {
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
        keep_keyspace: false,
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
        if flag == "--keep-keyspace" {
            a.keep_keyspace = true;
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

/// The CI form: small, every phase, a slow-ish model so the worker has turns in flight.
pub fn short_form() -> Args {
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
        keep_keyspace: false,
    }
}
