//! The raw phase: what the I/O of the worker's turns costs without the worker. The same load
//! generator and reader, and a loop in this process doing per inbound turn what the worker's
//! turn does on the wire, in the same order: a checkpoint load, the turn's chat completions to
//! the model test server and tool webhooks to the tool test server (the LC-4 write-ahead before
//! an execution), the end-of-turn save with the outbox, and the reply and events produced in a
//! Kafka transaction (one per commit interval, with the consumed offsets). Which calls a turn
//! makes is [`workload::plan`](crate::workload::plan); the run compares them with the worker's
//! (`io::mismatches`). No engine, no prompt rendering, no answer parsing: worker ÷ raw is the
//! worker's own overhead.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::{Header, Message, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};
use serde_json::{json, Value};
use tokio::sync::Semaphore;

use turnstile::domain::decision::Skill;
use turnstile::domain::turn::Identity;
use turnstile::message::{HEADER_CONTENT_TYPE, HEADER_OUTPUT_ID, HEADER_TURN_ID};
use turnstile::model::prompt::{CLASSIFIER_PROMPT, INTERPRETER_PROMPT, ROUTER_PROMPT};
use turnstile::ports::{CheckpointRecord, CheckpointStore, Fence};
use turnstile::store::cql::ScyllaCheckpointStore;
use turnstile::store::CheckpointCache;
use turnstile::testkit::cql::config as cql_config;
use turnstile::worker::WorkerConfig;

use crate::args::{Args, DecisionModel};
use crate::io::PhaseIo;
use crate::measure::cpu_seconds;
use crate::reader::Reader;
use crate::report::{fill_load, Row};
use crate::servers::{manifest, new_topics, Fixture};
use crate::workload::{bus, drive, parse_turn_id, plan, Step, AGENT, TOOL};

/// History entries the raw state keeps (the worker's state grows with the conversation too).
const HISTORY: usize = 20;

/// One output of a turn, as the committer produces it.
struct Output {
    topic: OutputTopic,
    output_id: String,
    payload: Vec<u8>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum OutputTopic {
    Replies,
    Events,
}

/// A finished turn, for the committer.
struct Done {
    key: String,
    turn_id: String,
    partition: i32,
    offset: i64,
    outputs: Vec<Output>,
}

/// What every turn task shares.
struct Loop {
    args: Args,
    store: ScyllaCheckpointStore,
    http: Http,
    /// As the worker's: a conversation's next turn reads the row saved here, not the store.
    cache: CheckpointCache,
    turns: AtomicU64,
    loads: AtomicU64,
    saves: AtomicU64,
    errors: AtomicU64,
}

pub async fn raw_phase(args: &Args, fx: &Fixture) -> Result<Row, String> {
    let phase = "raw";
    let topics = new_topics(phase, args.partitions).await?;
    let reader = Reader::start(&topics)?;
    let defaults = WorkerConfig::default();
    let store = ScyllaCheckpointStore::connect(&cql_config(&fx.keyspace))
        .await
        .map_err(|e| format!("connect store: {e}"))?
        .with_max_concurrency(defaults.store_max_concurrency);
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

    // Committer: one transaction per commit interval with the outputs and the offsets.
    let (done_tx, done_rx) = std::sync::mpsc::channel::<Done>();
    let stop = Arc::new(AtomicBool::new(false));
    let interval = Duration::from_millis(
        args.commit_interval_ms
            .unwrap_or(defaults.commit_interval.as_millis() as u64),
    );
    let committer = {
        let (stop, consumer, topics) = (stop.clone(), consumer.clone(), topics.clone());
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
                for done in &batch {
                    for out in &done.outputs {
                        let (topic, content_type) = match out.topic {
                            OutputTopic::Replies => (&topics.replies, "application/json"),
                            OutputTopic::Events => (&topics.events, "application/cloudevents+json"),
                        };
                        let headers = OwnedHeaders::new()
                            .insert(Header {
                                key: HEADER_OUTPUT_ID,
                                value: Some(out.output_id.as_bytes()),
                            })
                            .insert(Header {
                                key: HEADER_TURN_ID,
                                value: Some(done.turn_id.as_bytes()),
                            })
                            .insert(Header {
                                key: HEADER_CONTENT_TYPE,
                                value: Some(content_type.as_bytes()),
                            });
                        let mut record = BaseRecord::to(topic)
                            .key(done.key.as_str())
                            .payload(out.payload.as_slice())
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
                    }
                    let e = offsets.entry(done.partition).or_insert(done.offset);
                    *e = (*e).max(done.offset);
                }
                let mut tpl = TopicPartitionList::new();
                for (p, o) in offsets {
                    tpl.add_partition_offset(&topics.inbound, p, Offset::Offset(o + 1))
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
    let cap = args.in_flight_cap(args.per_partition);
    let permits = Arc::new(Semaphore::new(cap));
    let shared = Arc::new(Loop {
        args: args.clone(),
        store,
        http: Http::new(args, fx, &defaults)?,
        cache: CheckpointCache::new(defaults.checkpoint_cache_bytes),
        turns: AtomicU64::new(0),
        loads: AtomicU64::new(0),
        saves: AtomicU64::new(0),
        errors: AtomicU64::new(0),
    });
    let pump = {
        let (consumer, permits, shared) = (consumer.clone(), permits.clone(), shared.clone());
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
                let (shared, done) = (shared.clone(), done_tx.clone());
                tokio::spawn(async move {
                    let _permit = permit;
                    let finished = shared.turn(key, &payload, partition, offset).await;
                    let _ = done.send(finished);
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
    fx.model.clear_requests();
    let calls_before = fx.tools.calls().len();
    let executions_before = fx.tools.executions().len();
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
    let seen = reader.stop();
    let requests = fx.model.requests();
    fx.model.clear_requests();
    let tool_calls = fx.tools.calls();
    let executions = fx.tools.executions().len() - executions_before;

    let processed = shared.turns.load(Ordering::Relaxed).max(1) as f64;
    let mut row = Row {
        phase: phase.into(),
        in_flight_cap: cap,
        reads_per_turn: Some(shared.loads.load(Ordering::Relaxed) as f64 / processed),
        writes_per_turn: Some(shared.saves.load(Ordering::Relaxed) as f64 / processed),
        tool_executions: Some(executions),
        dead_letters: seen.dead_letters,
        ..Row::default()
    };
    let answered_by_kind = load.answered_by_kind.clone();
    fill_load(&mut row, load);
    let mut io = PhaseIo::collect(
        args,
        &answered_by_kind,
        &requests,
        &tool_calls[calls_before.min(tool_calls.len())..],
        &seen.outputs,
    );
    io.loads_per_turn = row.reads_per_turn.unwrap_or(0.0);
    io.saves_per_turn = row.writes_per_turn.unwrap_or(0.0);
    let turns = row.turns.max(1) as f64;
    row.bench_cpu_us_per_turn = Some((cpu1 - cpu0) * 1e6 / turns);
    row.model_calls_per_turn = Some(match args.decision_model {
        DecisionModel::Scripted => requests.len() as f64 / turns,
        DecisionModel::Embeddings => {
            let n = shared.http.embeddings_calls.load(Ordering::Relaxed);
            io.embeddings_calls = Some(n);
            n as f64 / turns
        }
    });
    row.chat_requests =
        (args.decision_model == DecisionModel::Embeddings).then_some(requests.len() as u64);
    row.io = Some(io);
    row.notes = format!(
        "turns processed {processed:.0}; store or HTTP errors {}; committer {}; bench process (drivers + loop + test servers) CPU {:.0} µs/turn; unmatched {}",
        shared.errors.load(Ordering::Relaxed),
        match committed {
            Ok(Ok(())) => "ok".to_owned(),
            Ok(Err(e)) => format!("failed: {e}"),
            Err(_) => "panicked".to_owned(),
        },
        (cpu1 - cpu0) * 1e6 / turns,
        seen.unmatched,
    );
    Ok(row)
}

impl Loop {
    /// One inbound turn: load, the plan's calls in order, save, outputs for the committer.
    async fn turn(&self, key: String, payload: &[u8], partition: i32, offset: i64) -> Done {
        let turn: Value = serde_json::from_slice(payload).unwrap_or(Value::Null);
        let turn_id = turn["turn_id"].as_str().unwrap_or_default().to_owned();
        let text = turn["text"].as_str().unwrap_or_default().to_owned();
        let mut parts = key.splitn(3, '/');
        let id = Identity::new(
            parts.next().unwrap_or_default(),
            parts.next().unwrap_or_default(),
            parts.next().unwrap_or_default(),
        );
        let (c, t) = parse_turn_id(&turn_id).unwrap_or_default();
        let plan = plan(&self.args, c, t);
        let fence = Fence { epoch: 1, offset };

        self.turns.fetch_add(1, Ordering::Relaxed);
        let loaded = match self.cache.take(&id, partition, fence.epoch) {
            Some(row) => Ok(Some(row)),
            None => {
                self.loads.fetch_add(1, Ordering::Relaxed);
                self.store.load(&id).await
            }
        };
        let mut history: Vec<Value> = match &loaded {
            Ok(Some(row)) => serde_json::from_slice::<Value>(&row.state)
                .ok()
                .and_then(|s| s.get("history").and_then(Value::as_array).cloned())
                .unwrap_or_default(),
            Ok(None) => Vec::new(),
            Err(_) => {
                self.errors.fetch_add(1, Ordering::Relaxed);
                Vec::new()
            }
        };
        history.push(json!({"role": "user", "text": text, "turn_id": turn_id, "at_ms": 0}));
        let mut answers: Vec<Value> = Vec::new();
        for step in plan.steps {
            let ok = match step {
                Step::Model(skill) => {
                    let answer = self.http.model(*skill, &turn_id, &text, &history).await;
                    answers.push(json!({ skill.as_str(): answer }));
                    true
                }
                Step::PreValidate | Step::Execute => {
                    let answer = self
                        .http
                        .tool(*step == Step::Execute, &id, &turn_id, plan.order_id)
                        .await;
                    let ok = answer.is_some();
                    answers.push(json!({"tool": answer}));
                    ok
                }
                Step::WriteAhead => {
                    let in_flight = json!({"turn_id": turn_id, "base": {"history": history}, "answers": answers});
                    let record = CheckpointRecord {
                        state: state(&history),
                        in_flight: Some(in_flight.to_string().into_bytes()),
                        epoch: fence.epoch,
                        ..CheckpointRecord::default()
                    };
                    self.saves.fetch_add(1, Ordering::Relaxed);
                    self.store
                        .save_write_ahead(&id, &record, fence)
                        .await
                        .is_ok()
                }
            };
            if !ok {
                self.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        let reply_text = "Your order cancellation is on its way.";
        history
            .push(json!({"role": "assistant", "text": reply_text, "turn_id": turn_id, "at_ms": 0}));
        let start = history.len().saturating_sub(HISTORY);
        history.drain(..start);
        let outputs = outputs(&id, &key, &turn_id, reply_text, plan.events);
        let outbox: Vec<Value> = outputs
            .iter()
            .map(|o| {
                json!({
                    "topic": if o.topic == OutputTopic::Events { "events" } else { "replies" },
                    "output_id": o.output_id,
                    "payload": serde_json::from_slice::<Value>(&o.payload).unwrap_or(Value::Null),
                })
            })
            .collect();
        let record = CheckpointRecord {
            state: state(&history),
            in_flight: None,
            applied: Some((partition, offset)),
            outbox: Some(Value::Array(outbox).to_string().into_bytes()),
            epoch: fence.epoch,
        };
        self.saves.fetch_add(1, Ordering::Relaxed);
        match self.store.save_turn(&id, &record, fence).await {
            Ok(()) => self.cache.keep(&id, partition, fence.epoch, &record),
            Err(_) => {
                self.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        Done {
            key,
            turn_id,
            partition,
            offset,
            outputs,
        }
    }
}

/// The raw state: the conversation's history and its transaction (a fraction of the worker's
/// encoded `AgentState`, growing the same way).
fn state(history: &[Value]) -> Vec<u8> {
    json!({
        "history": history,
        "transaction": {"tool": TOOL, "status": "collecting", "arguments": {"order_id": "PED-1001"}},
    })
    .to_string()
    .into_bytes()
}

/// A reply shaped like the worker's `ReplyMessage`, and `events` CloudEvents.
fn outputs(id: &Identity, key: &str, turn_id: &str, text: &str, events: u32) -> Vec<Output> {
    let mut out = vec![Output {
        topic: OutputTopic::Replies,
        output_id: format!("{turn_id}-0"),
        payload: json!({
            "schema": "turnstile.reply.v1",
            "output_id": format!("{turn_id}-0"),
            "turn_id": turn_id,
            "tenant_id": id.tenant_id,
            "agent_id": id.agent_id,
            "session_id": id.session_id,
            "text": text,
            "locale": "en",
            "route": "retail",
            "transaction_status": "collecting",
            "intent": TOOL,
            "handoff": false,
            "session_control": null,
            "created_at": "2026-01-01T00:00:00Z",
        })
        .to_string()
        .into_bytes(),
    }];
    for i in 0..events as usize {
        let output_id = format!("{turn_id}-{}", i + 1);
        out.push(Output {
            topic: OutputTopic::Events,
            payload: json!({
                "specversion": "1.0",
                "id": output_id,
                "source": format!("turnstile/{}", id.agent_id),
                "type": "turnstile.transaction.updated",
                "subject": key,
                "time": "2026-01-01T00:00:00Z",
                "datacontenttype": "application/json",
                "data": {"tool": TOOL, "status": "collecting", "transaction_id": format!("{turn_id}-tx")},
                "tenantid": id.tenant_id,
                "agentid": id.agent_id,
                "sessionid": id.session_id,
                "turnid": turn_id,
            })
            .to_string()
            .into_bytes(),
            output_id,
        });
    }
    out
}

/// The raw loop's HTTP clients: reqwest like the worker's adapters, one pool for the model and
/// one for the tools, the model calls capped like the worker's (`model_max_concurrency`).
struct Http {
    model: reqwest::Client,
    tools: reqwest::Client,
    chat_url: String,
    tools_url: String,
    decision_model: DecisionModel,
    embeddings_url: Option<String>,
    model_slots: Semaphore,
    embeddings_slots: Semaphore,
    /// Texts embedded in this phase: the worker keeps the vectors of the last 512.
    embedded: Mutex<HashSet<String>>,
    embeddings_calls: AtomicU64,
    /// The router's view of the assistant (agents and their tools), as the worker's prompt
    /// renders it from the agents file.
    catalog: Value,
}

impl Http {
    fn new(args: &Args, fx: &Fixture, defaults: &WorkerConfig) -> Result<Http, String> {
        let client = |timeout: Duration| {
            reqwest::Client::builder()
                .timeout(timeout)
                .pool_idle_timeout(Duration::from_secs(60))
                .build()
                .map_err(|e| format!("http client: {e}"))
        };
        Ok(Http {
            model: client(Duration::from_secs(10))?,
            tools: client(Duration::from_secs(10))?,
            chat_url: format!("{}/chat/completions", fx.model.base_url()),
            tools_url: format!("{}/tools/{TOOL}", fx.tools.base_url()),
            decision_model: args.decision_model,
            embeddings_url: fx
                .embeddings
                .as_ref()
                .map(|e| format!("{}/embeddings", e.base_url.trim_end_matches('/'))),
            model_slots: Semaphore::new(defaults.model_max_concurrency.max(1)),
            embeddings_slots: Semaphore::new(defaults.embeddings_max_concurrency.max(1)),
            embedded: Mutex::default(),
            embeddings_calls: AtomicU64::new(0),
            catalog: catalog(),
        })
    }

    /// One model decision: a chat completion (scripted), or the turn's embeddings call.
    async fn model(&self, skill: Skill, turn_id: &str, text: &str, history: &[Value]) -> Value {
        if self.decision_model == DecisionModel::Embeddings {
            return self.embed(text).await;
        }
        let (prompt, max_tokens, input) = match skill {
            Skill::Classifier => (
                CLASSIFIER_PROMPT,
                80,
                json!({
                    "message": text,
                    "locale": "en",
                    // One line per previous message, as the worker's classifier sees them.
                    "history": history
                        .iter()
                        .map(|h| json!({ h["role"].as_str().unwrap_or("user"): h["text"] }))
                        .collect::<Vec<_>>(),
                    "active_agent": null,
                    "active_transaction": null,
                }),
            ),
            Skill::Router => (
                ROUTER_PROMPT,
                300,
                json!({"message": text, "locale": "en", "agents": self.catalog, "active_agent": null, "active_transaction": null}),
            ),
            Skill::Interpreter => (
                INTERPRETER_PROMPT,
                200,
                json!({
                    "message": text,
                    "locale": "en",
                    "transaction": {"tool": TOOL, "status": "collecting", "arguments": {}, "missing": ["order_id"]},
                    "parameters": [{"name": "order_id", "type": "id", "example": "PED-1001"}],
                }),
            ),
        };
        let body = json!({
            "model": "openai.gpt-4.1-mini",
            "messages": [
                {"role": "system", "content": prompt.trim_end()},
                {"role": "user", "content": input.to_string()},
            ],
            "temperature": 0.0,
            "max_tokens": max_tokens,
        });
        let Ok(_slot) = self.model_slots.acquire().await else {
            return Value::Null;
        };
        let sent = self
            .model
            .post(&self.chat_url)
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .header("X-Turnstile-Skill", skill.as_str())
            .header("X-Turnstile-Turn-Id", turn_id)
            .body(body.to_string())
            .send()
            .await;
        match sent {
            Ok(r) => r
                .bytes()
                .await
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
                .unwrap_or(Value::Null),
            Err(_) => Value::Null,
        }
    }

    /// The worker embeds a text once (its cache), one text per call.
    async fn embed(&self, text: &str) -> Value {
        let Some(url) = &self.embeddings_url else {
            return Value::Null;
        };
        if !self
            .embedded
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(text.to_owned())
        {
            return Value::Null;
        }
        let Ok(_slot) = self.embeddings_slots.acquire().await else {
            return Value::Null;
        };
        self.embeddings_calls.fetch_add(1, Ordering::Relaxed);
        let body = json!({"model": "e5-query", "input": [text]});
        match self
            .model
            .post(url)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
        {
            Ok(r) => {
                let _ = r.bytes().await;
                json!({"embedded": true})
            }
            Err(_) => Value::Null,
        }
    }

    /// A pre-validation or an execution of the bench's tool; `None` when it failed.
    async fn tool(
        &self,
        execute: bool,
        id: &Identity,
        turn_id: &str,
        order_id: &str,
    ) -> Option<Value> {
        let (url, action) = if execute {
            (self.tools_url.clone(), "execute")
        } else {
            (format!("{}/pre-validate", self.tools_url), "pre_validate")
        };
        let transaction_id = format!("{turn_id}-tx");
        let body = json!({
            "action": action,
            "tool": TOOL,
            "arguments": {"order_id": order_id},
            "identity": {
                "tenant_id": id.tenant_id,
                "agent_id": id.agent_id,
                "session_id": id.session_id,
            },
            "transaction_id": transaction_id,
        });
        let mut request = self
            .tools
            .post(url)
            .header("content-type", "application/json")
            .header("X-Turnstile-Turn-Id", turn_id);
        if execute {
            request = request.header("Idempotency-Key", format!("{transaction_id}-1"));
        }
        let answer = request.body(body.to_string()).send().await.ok()?;
        if !answer.status().is_success() {
            return None;
        }
        let bytes = answer.bytes().await.ok()?;
        Some(serde_json::from_slice(&bytes).unwrap_or(Value::Null))
    }
}

/// The router prompt's catalog of the bench's assistant, read from the agents file: each agent
/// with its description and its tools (name, description, parameters).
fn catalog() -> Value {
    let path = manifest("config/agents.example.yaml");
    let yaml: serde_yaml_ng::Value = std::fs::read_to_string(&path)
        .ok()
        .and_then(|s| serde_yaml_ng::from_str(&s).ok())
        .unwrap_or_default();
    let json: Value = serde_json::to_value(&yaml).unwrap_or(Value::Null);
    let assistant = &json["assistants"][AGENT];
    let empty = serde_json::Map::new();
    let tools = assistant["tools"].as_object().unwrap_or(&empty);
    let parameters = &assistant["parameters"];
    let agents = assistant["agents"].as_object().unwrap_or(&empty);
    let agents: Vec<Value> = agents
        .iter()
        .map(|(name, agent)| {
            let tools: Vec<Value> = tools
                .iter()
                .filter(|(_, t)| t["agent"].as_str() == Some(name))
                .map(|(tool, t)| {
                    let params = |key: &str, required: bool| -> Vec<Value> {
                        t[key]
                            .as_array()
                            .map(|ps| {
                                ps.iter()
                                    .filter_map(Value::as_str)
                                    .map(|p| {
                                        json!({
                                            "name": p,
                                            "type": parameters[p]["type"],
                                            "required": required,
                                        })
                                    })
                                    .collect()
                            })
                            .unwrap_or_default()
                    };
                    let mut ps = params("parameters", true);
                    ps.extend(params("optional_parameters", false));
                    json!({"name": tool, "description": t["description"], "parameters": ps})
                })
                .collect();
            json!({"name": name, "description": agent["description"], "tools": tools})
        })
        .collect();
    Value::Array(agents)
}
