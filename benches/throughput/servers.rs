//! What every phase shares: reachability of Kafka and Cassandra, the run's keyspace, the model
//! and tool test servers, the load generator's producer, and the embeddings server's probe.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::config::ClientConfig;
use rdkafka::producer::FutureProducer;
use serde_json::json;

use turnstile::domain::decision::Skill;
use turnstile::message::Topics;
use turnstile::store::cql::ScyllaCheckpointStore;
use turnstile::testkit::cql::{config as cql_config, contact as cql_contact};
use turnstile::testkit::model_server::{Behaviour, ModelServer};
use turnstile::testkit::tool_server::ToolServer;

use crate::args::{Args, DecisionModel};
use crate::measure::clock_ticks;
use crate::workload::{bus, tag};

pub fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

pub fn manifest(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(p)
}

pub struct Fixture {
    pub keyspace: String,
    /// `Some` with `--decision-model embeddings`.
    pub embeddings: Option<EmbeddingsServer>,
    pub model: ModelServer,
    pub tools: ToolServer,
    pub producer: FutureProducer,
    pub log_dir: PathBuf,
    pub ticks: f64,
}

/// The embeddings server the worker calls, and its latency measured before the load.
pub struct EmbeddingsServer {
    pub base_url: String,
    /// Median of sequential single-text calls on one connection, with nothing else queued.
    pub idle_ms: f64,
}

/// Reaches the embeddings server (a run against a stopped one would only measure fallbacks)
/// and measures its idle latency per call: one text per call, as the worker sends per turn.
pub async fn probe_embeddings(base_url: &str) -> Result<EmbeddingsServer, String> {
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

pub async fn new_topics(phase: &str, partitions: i32) -> Result<Topics, String> {
    let topics = bus::unique_topics(&format!("bench-{phase}"));
    bus::create_topics(&bus::brokers(), &topics, partitions)
        .await
        .map_err(|e| e.to_string())?;
    Ok(topics)
}

/// Checks the services, migrates the run's keyspace and starts the test servers.
pub async fn setup(args: &Args) -> Result<Fixture, String> {
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
    let log_dir = manifest("target/bench/logs");
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
        keyspace,
        embeddings,
        model,
        tools,
        producer,
        log_dir,
        ticks: clock_ticks(),
    };
    Ok(fx)
}

/// Drops the run's keyspace (best effort).
pub async fn drop_keyspace(keyspace: &str) {
    if let Ok(store) = ScyllaCheckpointStore::connect(&cql_config(keyspace)).await {
        let _ = store
            .session()
            .query_unpaged(format!("DROP KEYSPACE IF EXISTS {keyspace}"), ())
            .await;
    }
}
