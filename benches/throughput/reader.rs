//! The reply reader: turn id → arrival time of its reply as a `read_committed` reader sees it,
//! and how many outputs (replies, events) each turn published.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::oneshot;

use turnstile::message::{Topics, HEADER_TURN_ID};

use crate::workload::bus;

type Waiters = Arc<Mutex<HashMap<String, oneshot::Sender<Instant>>>>;

/// Replies and events one turn published (committed), by turn id.
pub type Outputs = HashMap<String, (u32, u32)>;

pub struct Reader {
    waiters: Waiters,
    stop: Arc<AtomicBool>,
    unmatched: Arc<AtomicU64>,
    dead: Arc<AtomicU64>,
    outputs: Arc<Mutex<Outputs>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// What the reader saw when stopped.
pub struct Seen {
    /// Replies and dead letters matched to no waiting turn.
    pub unmatched: u64,
    pub dead_letters: u64,
    pub outputs: Outputs,
}

impl Reader {
    /// Reads `replies`, `events` and `dead_letters` (a dead-lettered turn has no reply, but is
    /// answered; events only count).
    pub fn start(topics: &Topics) -> Result<Arc<Reader>, String> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", bus::brokers())
            .set("group.id", format!("bench-reader-{}", bus::unique_suffix()))
            .set("isolation.level", "read_committed")
            .set("enable.auto.commit", "false")
            .set("fetch.wait.max.ms", "5")
            .create()
            .map_err(|e| format!("reader: {e}"))?;
        let mut tpl = TopicPartitionList::new();
        for topic in [&topics.replies, &topics.events, &topics.dead_letters] {
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
        let dead_topic = topics.dead_letters.clone();
        let events_topic = topics.events.clone();
        consumer.assign(&tpl).map_err(|e| format!("assign: {e}"))?;
        let waiters: Waiters = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let unmatched = Arc::new(AtomicU64::new(0));
        let dead = Arc::new(AtomicU64::new(0));
        let outputs: Arc<Mutex<Outputs>> = Arc::default();
        let (w, s, u, d, o) = (
            waiters.clone(),
            stop.clone(),
            unmatched.clone(),
            dead.clone(),
            outputs.clone(),
        );
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let Some(Ok(m)) = consumer.poll(Duration::from_millis(20)) else {
                    continue;
                };
                let at = Instant::now();
                let turn_id = m.headers().and_then(|h| {
                    h.iter()
                        .find(|x| x.key == HEADER_TURN_ID)
                        .and_then(|x| x.value)
                        .map(|v| String::from_utf8_lossy(v).into_owned())
                });
                let is_event = m.topic() == events_topic;
                if let Some(t) = &turn_id {
                    let mut outputs = o.lock().unwrap_or_else(|e| e.into_inner());
                    let entry = outputs.entry(t.clone()).or_default();
                    if is_event {
                        entry.1 += 1;
                    } else if m.topic() != dead_topic {
                        entry.0 += 1;
                    }
                }
                if is_event {
                    continue;
                }
                if m.topic() == dead_topic {
                    d.fetch_add(1, Ordering::Relaxed);
                }
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
            outputs,
            thread: Mutex::new(Some(thread)),
        }))
    }

    pub fn expect(&self, turn_id: &str) -> oneshot::Receiver<Instant> {
        let (tx, rx) = oneshot::channel();
        self.waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(turn_id.to_owned(), tx);
        rx
    }

    pub fn forget(&self, turn_id: &str) {
        self.waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(turn_id);
    }

    /// Stops reading (outputs committed after the last reply are counted only if they arrived
    /// before: a turn's outputs share one transaction, so they arrive together).
    pub fn stop(&self) -> Seen {
        self.stop.store(true, Ordering::Relaxed);
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = thread {
            let _ = t.join();
        }
        Seen {
            unmatched: self.unmatched.load(Ordering::Relaxed),
            dead_letters: self.dead.load(Ordering::Relaxed),
            outputs: std::mem::take(&mut self.outputs.lock().unwrap_or_else(|e| e.into_inner())),
        }
    }
}
