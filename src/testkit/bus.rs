//! Kafka helpers for tests, the end-to-end runner and the harnesses: unique names, topic
//! creation, producing turns, and reading outputs the way a downstream reader does
//! (`read_committed`). Loopback brokers only.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::TopicPartitionList;
use serde_json::Value;

use crate::message::Topics;

/// The broker the services script starts, unless `KAFKA_BROKERS` says otherwise.
pub fn brokers() -> String {
    std::env::var("KAFKA_BROKERS").unwrap_or_else(|_| "127.0.0.1:9092".into())
}

/// A suffix unique to this process and moment, for topics, groups, keyspaces and sessions. The
/// counter keeps two calls within the same clock tick apart.
pub fn unique_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{:x}{:x}{}",
        std::process::id(),
        nanos % 0xffff_ffff_ffff,
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Topic names with a unique suffix, so runs never share data.
pub fn unique_topics(prefix: &str) -> Topics {
    let s = unique_suffix();
    Topics {
        inbound: format!("{prefix}.{s}.turns"),
        replies: format!("{prefix}.{s}.replies"),
        events: format!("{prefix}.{s}.events"),
        dead_letters: format!("{prefix}.{s}.dead-letters"),
    }
}

pub use crate::worker::topics::create_topics;

/// An idempotent producer of inbound turns.
pub fn turn_producer(brokers: &str) -> Result<FutureProducer, String> {
    ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("enable.idempotence", "true")
        .set("linger.ms", "1")
        .create()
        .map_err(|e| format!("producer: {e}"))
}

/// Produces one inbound message; returns its partition and offset.
pub async fn produce(
    producer: &FutureProducer,
    topic: &str,
    key: &str,
    payload: &[u8],
) -> Result<(i32, i64), String> {
    producer
        .send(
            FutureRecord::to(topic).key(key).payload(payload),
            Duration::from_secs(30),
        )
        .await
        .map(|d| (d.partition, d.offset))
        .map_err(|(e, _)| format!("produce to {topic}: {e}"))
}

/// The inbound JSON of a text turn or a structured action (schemas/turn.v1.json).
#[allow(clippy::too_many_arguments)]
pub fn turn_json(
    tenant: &str,
    agent: &str,
    session: &str,
    turn_id: &str,
    text: Option<&str>,
    action: Option<&str>,
    locale: &str,
    received_at_rfc3339: Option<&str>,
) -> Vec<u8> {
    let mut v = serde_json::json!({
        "turn_id": turn_id,
        "tenant_id": tenant,
        "agent_id": agent,
        "session_id": session,
        "locale": locale,
        "channel": "test",
    });
    if let Some(t) = text {
        v["text"] = Value::from(t);
    }
    if let Some(a) = action {
        v["action"] = serde_json::json!({"type": a});
    }
    if let Some(at) = received_at_rfc3339 {
        v["received_at"] = Value::from(at);
    }
    serde_json::to_vec(&v).unwrap_or_default()
}

/// One output as a downstream reader sees it.
#[derive(Debug, Clone)]
pub struct ReadMessage {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub key: String,
    pub payload: Value,
    pub output_id: Option<String>,
    pub turn_id: Option<String>,
    /// The record's Kafka timestamp (the worker's producer stamps CreateTime when it sends).
    pub timestamp_ms: Option<i64>,
}

impl ReadMessage {
    /// Decodes a consumed record: key and headers as text, the payload as JSON (null if not).
    pub fn from_record<M: Message>(m: &M) -> ReadMessage {
        let header = |name: &str| {
            m.headers().and_then(|h| {
                h.iter()
                    .find(|x| x.key == name)
                    .and_then(|x| x.value)
                    .map(|v| String::from_utf8_lossy(v).into_owned())
            })
        };
        ReadMessage {
            topic: m.topic().to_owned(),
            partition: m.partition(),
            offset: m.offset(),
            key: m
                .key()
                .map(|k| String::from_utf8_lossy(k).into_owned())
                .unwrap_or_default(),
            payload: m
                .payload()
                .and_then(|p| serde_json::from_slice(p).ok())
                .unwrap_or(Value::Null),
            output_id: header(crate::message::HEADER_OUTPUT_ID),
            turn_id: header(crate::message::HEADER_TURN_ID),
            timestamp_ms: m.timestamp().to_millis(),
        }
    }
}

/// Reads every partition of some topics from the beginning with `read_committed`.
pub struct OutputReader {
    consumer: BaseConsumer,
    pub seen: Vec<ReadMessage>,
    /// When each of `seen` was polled (wall-clock ms, same index): when it became visible to
    /// this `read_committed` reader, give or take one poll.
    pub arrived_ms: Vec<i64>,
}

impl OutputReader {
    pub fn new(brokers: &str, topics: &[&str]) -> Result<OutputReader, String> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", brokers)
            .set("group.id", format!("reader-{}", unique_suffix()))
            .set("isolation.level", "read_committed")
            .set("enable.auto.commit", "false")
            .set("enable.partition.eof", "false")
            .create()
            .map_err(|e| format!("reader: {e}"))?;
        let mut tpl = TopicPartitionList::new();
        for t in topics {
            let meta = consumer
                .fetch_metadata(Some(t), Duration::from_secs(10))
                .map_err(|e| format!("metadata of {t}: {e}"))?;
            for topic in meta.topics() {
                for p in topic.partitions() {
                    tpl.add_partition_offset(t, p.id(), rdkafka::Offset::Beginning)
                        .map_err(|e| e.to_string())?;
                }
            }
        }
        consumer.assign(&tpl).map_err(|e| format!("assign: {e}"))?;
        Ok(OutputReader {
            consumer,
            seen: Vec::new(),
            arrived_ms: Vec::new(),
        })
    }

    /// Polls for up to `budget`, appending to `seen`; returns how many arrived.
    pub fn poll_for(&mut self, budget: Duration) -> usize {
        let until = Instant::now() + budget;
        let before = self.seen.len();
        while Instant::now() < until {
            if let Some(Ok(m)) = self.consumer.poll(Duration::from_millis(50)) {
                self.seen.push(ReadMessage::from_record(&m));
                self.arrived_ms.push(crate::clock::now_ms());
            }
        }
        self.seen.len() - before
    }

    /// Polls until `pred` holds for something seen, or `timeout`.
    pub fn wait_until(&mut self, timeout: Duration, pred: impl Fn(&[ReadMessage]) -> bool) -> bool {
        let until = Instant::now() + timeout;
        while Instant::now() < until {
            if pred(&self.seen) {
                return true;
            }
            self.poll_for(Duration::from_millis(100));
        }
        pred(&self.seen)
    }

    /// Output ids seen more than once (a duplicate reply or event).
    pub fn duplicate_output_ids(&self) -> Vec<String> {
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for m in &self.seen {
            if let Some(id) = &m.output_id {
                *counts.entry(id).or_default() += 1;
            }
        }
        counts
            .into_iter()
            .filter(|(_, n)| *n > 1)
            .map(|(id, _)| id.to_owned())
            .collect()
    }
}
