//! The consumer thread: polls Kafka (cooperative-sticky, manual offsets), forwards records to the
//! coordinator, applies pause/resume, and runs rebalance callbacks. A revocation blocks here
//! until the coordinator has drained and committed the revoked partitions (or the budget ends),
//! so the partitions are released only after their finished turns are committed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::message::Message;
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use tokio::sync::mpsc;

use crate::worker::offsets::PartitionOffsets;

/// A fetched record, owned.
#[derive(Debug, Clone)]
pub struct FetchedRecord {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub payload: Option<Vec<u8>>,
    pub timestamp_ms: Option<i64>,
}

impl FetchedRecord {
    pub fn size(&self) -> usize {
        self.key.as_ref().map_or(0, Vec::len) + self.payload.as_ref().map_or(0, Vec::len) + 64
    }
}

/// What the consumer thread tells the coordinator.
#[derive(Debug)]
pub enum ConsumerEvent {
    Assigned {
        partition: i32,
        offsets: PartitionOffsets,
    },
    Revoked {
        partitions: Vec<i32>,
        done: std_mpsc::SyncSender<()>,
    },
    Record(FetchedRecord),
    /// A rebalance completed with no new partition for this member (more members than
    /// partitions, or nothing moved): it is in the group all the same (`/readyz`).
    Joined,
}

/// What the coordinator asks of the consumer thread.
#[derive(Debug)]
pub enum ConsumerCommand {
    Pause(Vec<i32>),
    Resume(Vec<i32>),
}

/// The broker's offsets of one inbound partition, from librdkafka's statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watermarks {
    /// The high watermark: one past the last record written (KEDA's "latest offset").
    pub high: i64,
    /// The low watermark: the first record still on the broker (where `earliest` starts).
    pub low: i64,
}

/// Rebalance callbacks, run on the consumer thread.
pub struct WorkerContext {
    topic: String,
    events: mpsc::UnboundedSender<ConsumerEvent>,
    drain_budget: Duration,
    pub assigned: AtomicUsize,
    /// The held partitions' watermarks, refreshed by [`watermark_loop`]; the coordinator reads
    /// them (its own handle) to report the broker-side lag against the committed offsets.
    pub watermarks: SharedWatermarks,
}

/// The held partitions' last watermarks, shared by the consumer's refresh loop and the
/// coordinator, which needs nothing else of the consumer.
pub type SharedWatermarks = std::sync::Arc<Mutex<HashMap<i32, Watermarks>>>;

impl ClientContext for WorkerContext {}

impl ConsumerContext for WorkerContext {
    fn pre_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Revoke(tpl) = rebalance {
            let partitions = partitions_of(tpl, &self.topic);
            if partitions.is_empty() {
                return;
            }
            tracing::info!(topic = %self.topic, partitions = ?partitions, "Partitions revoked; draining.");
            let (done, wait) = std_mpsc::sync_channel(1);
            if self
                .events
                .send(ConsumerEvent::Revoked {
                    partitions: partitions.clone(),
                    done,
                })
                .is_ok()
            {
                // The coordinator answers after drain + commit; the budget bounds it, plus a
                // margin for the final commit.
                let waited = wait.recv_timeout(self.drain_budget + Duration::from_secs(5));
                if waited.is_err() {
                    tracing::warn!(topic = %self.topic, partitions = ?partitions, "Revocation drain did not finish in time; releasing anyway.");
                }
            }
            self.assigned.fetch_sub(
                partitions.len().min(self.assigned.load(Ordering::Relaxed)),
                Ordering::Relaxed,
            );
        }
    }

    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(tpl) = rebalance {
            let partitions = partitions_of(tpl, &self.topic);
            if partitions.is_empty() {
                let _ = self.events.send(ConsumerEvent::Joined);
                return;
            }
            let committed = consumer.committed_offsets((*tpl).clone(), Duration::from_secs(10));
            for p in &partitions {
                let (offset, metadata) = committed
                    .as_ref()
                    .ok()
                    .and_then(|c| c.find_partition(&self.topic, *p))
                    .map(|e| match e.offset() {
                        Offset::Offset(o) => (o, e.metadata().to_owned()),
                        _ => (-1, String::new()),
                    })
                    .unwrap_or((-1, String::new()));
                let offsets = if offset >= 0 {
                    PartitionOffsets::from_commit(offset, &metadata)
                } else {
                    // Nothing committed yet: the first delivered offset sets the mark.
                    PartitionOffsets::from_commit(-1, "")
                };
                let _ = self.events.send(ConsumerEvent::Assigned {
                    partition: *p,
                    offsets,
                });
            }
            self.assigned.fetch_add(partitions.len(), Ordering::Relaxed);
            tracing::info!(topic = %self.topic, partitions = ?partitions, "Partitions assigned.");
        }
    }
}

fn partitions_of(tpl: &TopicPartitionList, topic: &str) -> Vec<i32> {
    tpl.elements_for_topic(topic)
        .iter()
        .map(|e| e.partition())
        .collect()
}

pub type WorkerConsumer = BaseConsumer<WorkerContext>;

pub fn context(
    topic: &str,
    events: mpsc::UnboundedSender<ConsumerEvent>,
    drain_budget: Duration,
) -> WorkerContext {
    WorkerContext {
        topic: topic.to_owned(),
        events,
        drain_budget,
        assigned: AtomicUsize::new(0),
        watermarks: SharedWatermarks::default(),
    }
}

/// Polls until `stop` is set; then unsubscribes (which revokes through the same callbacks).
pub fn poll_loop(
    consumer: Arc<WorkerConsumer>,
    topic: String,
    events: mpsc::UnboundedSender<ConsumerEvent>,
    commands: std_mpsc::Receiver<ConsumerCommand>,
    stop: Arc<AtomicBool>,
    buffered_bytes: Arc<AtomicUsize>,
    max_buffered_bytes: usize,
) {
    let mut globally_paused = false;
    while !stop.load(Ordering::Relaxed) {
        while let Ok(cmd) = commands.try_recv() {
            let (ps, pause) = match cmd {
                ConsumerCommand::Pause(ps) => (ps, true),
                ConsumerCommand::Resume(ps) => (ps, false),
            };
            let mut tpl = TopicPartitionList::new();
            for p in ps {
                tpl.add_partition(&topic, p);
            }
            let result = if pause {
                consumer.pause(&tpl)
            } else {
                consumer.resume(&tpl)
            };
            if let Err(e) = result {
                tracing::debug!(error = %e, "Pause/resume of a partition no longer assigned.");
            }
        }
        // Bounded prefetch memory: pause everything above the cap, resume below half of it.
        let bytes = buffered_bytes.load(Ordering::Relaxed);
        if !globally_paused && bytes > max_buffered_bytes {
            if let Ok(a) = consumer.assignment() {
                let _ = consumer.pause(&a);
                globally_paused = true;
            }
        } else if globally_paused && bytes < max_buffered_bytes / 2 {
            if let Ok(a) = consumer.assignment() {
                let _ = consumer.resume(&a);
                globally_paused = false;
            }
        }
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                let record = FetchedRecord {
                    partition: m.partition(),
                    offset: m.offset(),
                    key: m.key().map(<[u8]>::to_vec),
                    payload: m.payload().map(<[u8]>::to_vec),
                    timestamp_ms: m.timestamp().to_millis(),
                };
                buffered_bytes.fetch_add(record.size(), Ordering::Relaxed);
                if events.send(ConsumerEvent::Record(record)).is_err() {
                    break;
                }
            }
            Some(Err(e)) => tracing::warn!(error = %e, "Kafka consumer error."),
            None => {}
        }
    }
    consumer.unsubscribe();
    // Let the revocation callback run for a final drain.
    for _ in 0..20 {
        if consumer.poll(Duration::from_millis(50)).is_none()
            && consumer
                .assignment()
                .map(|a| a.count() == 0)
                .unwrap_or(true)
        {
            break;
        }
    }
}

/// Refreshes the watermarks of the held partitions every `interval` until `stop` is set, on a
/// thread of its own: one ListOffsets round trip per partition, never on the poll or commit path.
///
/// Not librdkafka's statistics: their `consumer_lag` subtracts offsets this consumer committed,
/// and the worker commits through its transactional producer (`send_offsets_to_transaction`),
/// which the consumer never learns of; and their `hi_offset` comes from fetch responses, so it
/// freezes while a partition is paused at its buffer cap, exactly when the lag matters.
pub fn watermark_loop(
    consumer: Arc<WorkerConsumer>,
    topic: String,
    stop: Arc<AtomicBool>,
    interval: Duration,
) {
    const SLICE: Duration = Duration::from_millis(100);
    while !stop.load(Ordering::Relaxed) {
        let held = consumer
            .assignment()
            .map(|a| partitions_of(&a, &topic))
            .unwrap_or_default();
        let previous = consumer
            .context()
            .watermarks
            .lock()
            .map(|w| w.clone())
            .unwrap_or_default();
        let mut fresh = HashMap::with_capacity(held.len());
        for p in held {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            match consumer.fetch_watermarks(&topic, p, Duration::from_secs(5)) {
                Ok((low, high)) => {
                    fresh.insert(p, Watermarks { high, low });
                }
                // Keep the last known value: a broker hiccup should not zero the lag.
                Err(e) => {
                    tracing::debug!(partition = p, error = %e, "Cannot read the watermarks.");
                    if let Some(w) = previous.get(&p) {
                        fresh.insert(p, *w);
                    }
                }
            }
        }
        if let Ok(mut w) = consumer.context().watermarks.lock() {
            *w = fresh;
        }
        let mut waited = Duration::ZERO;
        while waited < interval && !stop.load(Ordering::Relaxed) {
            std::thread::sleep(SLICE.min(interval - waited));
            waited += SLICE;
        }
    }
}
