//! The committer thread: publishes finished turns' outputs and commits their offsets in one
//! Kafka transaction (EOS), batched every commit interval. Outputs of turns above the low-water
//! mark are published only when their offsets fit in the commit metadata, so a restarted owner
//! knows exactly which turns' outputs are already committed.

use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use metrics::{counter, gauge, histogram};
use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};

use crate::message::{
    Output, OutputTopic, Topics, HEADER_CONTENT_TYPE, HEADER_OUTPUT_ID, HEADER_TURN_ID,
};
use crate::pipeline::CheckpointCache;
use crate::telemetry;
use crate::worker::consumer::WorkerConsumer;
use crate::worker::offsets::PartitionOffsets;

/// How long one failed transaction's abort may take before the committer goes back to its
/// commands (a pending abort resumes on the next commit).
const ABORT_BUDGET: Duration = Duration::from_secs(30);

/// Aborts the open transaction of a `BaseProducer`, serving its delivery reports meanwhile.
///
/// librdkafka's abort purges the unsent messages and then waits until no message is
/// outstanding, delivery reports included; with the event API (which rdkafka uses) it does not
/// serve those reports itself, and `BaseProducer::abort_transaction` does not poll. So one long
/// abort call with messages in the transaction always runs out its whole timeout and fails, and
/// the committer (with revocations waiting on it) stalls that long. A timed-out abort is
/// retriable and resumes, so abort in short slices and poll between them.
pub fn abort_transaction(producer: &BaseProducer, budget: Duration) -> Result<(), KafkaError> {
    const SLICE: Duration = Duration::from_millis(100);
    let deadline = Instant::now() + budget;
    loop {
        match producer.abort_transaction(SLICE) {
            Ok(()) => return Ok(()),
            Err(KafkaError::Transaction(te)) if te.is_retriable() && Instant::now() < deadline => {
                producer.poll(Duration::from_millis(10));
            }
            Err(e) => return Err(e),
        }
    }
}

/// What the coordinator tells the committer, in partition order.
#[derive(Debug)]
pub enum CommitCommand {
    Assign(i32, PartitionOffsets),
    Delivered(i32, i64),
    /// A turn finished; its outputs are to be published with its offset.
    Completed {
        partition: i32,
        offset: i64,
        turn_id: String,
        outputs: Vec<Output>,
        /// The inbound record's timestamp; `None` for a turn a previous owner finished.
        record_timestamp_ms: Option<i64>,
    },
    /// Commit now (revocation, shutdown); answers when done.
    Flush(std_mpsc::SyncSender<bool>),
    Revoke(Vec<i32>),
}

/// Offsets committed so far, by partition: the worker prunes outboxes below them.
pub type CommittedMarks = Arc<Mutex<HashMap<i32, i64>>>;

/// Why the committer stopped for good: the process must restart (crash-only).
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    #[error("Kafka producer failed fatally (fenced or misconfigured): {0}")]
    Fatal(String),
}

struct Pending {
    offset: i64,
    turn_id: String,
    outputs: Vec<Output>,
    record_timestamp_ms: Option<i64>,
}

pub struct Committer {
    producer: BaseProducer,
    consumer: Arc<WorkerConsumer>,
    topics: Topics,
    trackers: BTreeMap<i32, PartitionOffsets>,
    pending: BTreeMap<i32, Vec<Pending>>,
    last_committed: BTreeMap<i32, i64>,
    /// The committed offset each held partition was assigned with (-1: none), until this
    /// owner commits one of its own (`last_committed`).
    assigned_at: BTreeMap<i32, i64>,
    marks: CommittedMarks,
    /// Suspended while transactions fail (a zombie fails them all), resumed on success.
    cache: Arc<CheckpointCache>,
}

impl Committer {
    pub fn new(
        producer: BaseProducer,
        consumer: Arc<WorkerConsumer>,
        topics: Topics,
        marks: CommittedMarks,
        cache: Arc<CheckpointCache>,
    ) -> Self {
        Committer {
            producer,
            consumer,
            topics,
            trackers: BTreeMap::new(),
            pending: BTreeMap::new(),
            last_committed: BTreeMap::new(),
            assigned_at: BTreeMap::new(),
            marks,
            cache,
        }
    }

    /// Runs until the command channel closes; commits every `interval`.
    pub fn run(
        mut self,
        commands: std_mpsc::Receiver<CommitCommand>,
        interval: Duration,
    ) -> Result<(), CommitError> {
        let mut last = Instant::now();
        loop {
            let wait = interval.saturating_sub(last.elapsed());
            match commands.recv_timeout(wait) {
                Ok(cmd) => {
                    if let Some(ack) = self.apply(cmd) {
                        let ok = self.commit()?;
                        let _ = ack.send(ok);
                        self.record_lag();
                        last = Instant::now();
                    }
                }
                Err(std_mpsc::RecvTimeoutError::Timeout) => {}
                Err(std_mpsc::RecvTimeoutError::Disconnected) => {
                    self.commit()?;
                    return Ok(());
                }
            }
            if last.elapsed() >= interval {
                self.commit()?;
                // Every interval, committed or not: a stalled partition (nothing finishes, so
                // nothing commits) still shows its growing backlog.
                self.record_lag();
                last = Instant::now();
            }
            self.producer.poll(Duration::ZERO);
        }
    }

    fn apply(&mut self, cmd: CommitCommand) -> Option<std_mpsc::SyncSender<bool>> {
        match cmd {
            CommitCommand::Assign(p, offsets) => {
                // Before any delivery the mark is the committed offset (or -1).
                self.assigned_at.insert(p, offsets.low_water_mark());
                self.trackers.insert(p, offsets);
                self.pending.remove(&p);
                self.last_committed.remove(&p);
            }
            CommitCommand::Delivered(p, o) => {
                if let Some(t) = self.trackers.get_mut(&p) {
                    t.deliver(o);
                }
            }
            CommitCommand::Completed {
                partition,
                offset,
                turn_id,
                outputs,
                record_timestamp_ms,
            } => {
                if let Some(t) = self.trackers.get_mut(&partition) {
                    t.complete(offset);
                    self.pending.entry(partition).or_default().push(Pending {
                        offset,
                        turn_id,
                        outputs,
                        record_timestamp_ms,
                    });
                }
            }
            CommitCommand::Flush(ack) => return Some(ack),
            CommitCommand::Revoke(ps) => {
                for p in ps {
                    // The new owner reports this partition now; a frozen last value here would
                    // be counted twice in a sum over workers.
                    gauge!(telemetry::PARTITION_LAG, "partition" => p.to_string()).set(0.0);
                    gauge!(telemetry::CONSUMER_LAG_RECORDS, "partition" => p.to_string()).set(0.0);
                    self.assigned_at.remove(&p);
                    self.trackers.remove(&p);
                    self.pending.remove(&p);
                    self.last_committed.remove(&p);
                    if let Ok(mut m) = self.marks.lock() {
                        m.remove(&p);
                    }
                }
            }
        }
        None
    }

    /// Per held partition: `turnstile_partition_lag` (delivered, unfinished records), the
    /// committed offset, and the broker-side lag against the last watermarks read.
    fn record_lag(&self) {
        let watermarks = self
            .consumer
            .context()
            .watermarks
            .lock()
            .map(|w| w.clone())
            .unwrap_or_default();
        for (p, t) in &self.trackers {
            let label = p.to_string();
            gauge!(telemetry::PARTITION_LAG, "partition" => label.clone())
                .set(t.in_progress() as f64);
            let committed = self
                .last_committed
                .get(p)
                .or_else(|| self.assigned_at.get(p))
                .copied()
                .unwrap_or(-1);
            gauge!(telemetry::CONSUMER_COMMITTED_OFFSET, "partition" => label.clone())
                .set(committed as f64);
            if let Some(w) = watermarks.get(p) {
                gauge!(telemetry::CONSUMER_LAG_RECORDS, "partition" => label)
                    .set(broker_lag(w.high, w.low, committed) as f64);
            }
        }
    }

    /// After a committed transaction: the cache trusted again, the turns' ages recorded, the
    /// published outputs dropped, the committed offsets remembered.
    fn on_committed(&mut self, tpl: &TopicPartitionList, batch: Vec<(i32, usize)>) {
        self.cache.resume();
        // Drop what was published; remember the marks.
        let now_ms = unix_millis();
        let age = histogram!(telemetry::TURN_AGE_SECONDS);
        for (p, i) in &batch {
            let stamp = self.pending.get(p).and_then(|l| l.get(*i));
            if let Some(secs) = stamp.and_then(|e| turn_age_seconds(now_ms, e.record_timestamp_ms))
            {
                age.record(secs);
            }
        }
        let mut by_partition: BTreeMap<i32, Vec<usize>> = BTreeMap::new();
        for (p, i) in batch {
            by_partition.entry(p).or_default().push(i);
        }
        for (p, mut idx) in by_partition {
            idx.sort_unstable_by(|a, b| b.cmp(a));
            if let Some(list) = self.pending.get_mut(&p) {
                for i in idx {
                    list.swap_remove(i);
                }
            }
        }
        for elem in tpl.elements() {
            if let Offset::Offset(o) = elem.offset() {
                self.last_committed.insert(elem.partition(), o);
                if let Ok(mut m) = self.marks.lock() {
                    m.insert(elem.partition(), o);
                }
            }
        }
    }

    /// One transaction: every publishable output, then the offsets with their metadata.
    /// Returns false when the transaction was aborted (it is retried on the next tick).
    fn commit(&mut self) -> Result<bool, CommitError> {
        let mut tpl = TopicPartitionList::new();
        let mut batch: Vec<(i32, usize)> = Vec::new();
        for (p, tracker) in &self.trackers {
            let mark = tracker.low_water_mark();
            if mark < 0 {
                continue;
            }
            let (metadata, included) = tracker.commit_metadata();
            let publishable: Vec<usize> = self
                .pending
                .get(p)
                .map(|list| {
                    list.iter()
                        .enumerate()
                        .filter(|(_, e)| e.offset < mark || included.contains(&e.offset))
                        .map(|(i, _)| i)
                        .collect()
                })
                .unwrap_or_default();
            let moved = self.last_committed.get(p) != Some(&mark);
            if !moved && publishable.is_empty() && metadata.is_empty() {
                continue;
            }
            batch.extend(publishable.into_iter().map(|i| (*p, i)));
            if let Err(e) = tpl.add_partition_offset(&self.topics.inbound, *p, Offset::Offset(mark))
            {
                tracing::warn!(error = %e, partition = p, "Cannot add offset to commit.");
                continue;
            }
            if let Some(mut elem) = tpl.find_partition(&self.topics.inbound, *p) {
                elem.set_metadata(metadata);
            }
        }
        if tpl.count() == 0 {
            return Ok(true);
        }
        let started = Instant::now();
        let result = self.transact(&tpl, &batch);
        let committed = match result {
            Ok(()) => {
                self.on_committed(&tpl, batch);
                true
            }
            Err(e) => {
                counter!(telemetry::COMMIT_FAILURES_TOTAL).increment(1);
                // This worker may have lost its partitions without being told: read the store,
                // where a new owner's rows fence its turns, until a transaction succeeds.
                self.cache.suspend();
                if let KafkaError::Transaction(ref te) = e {
                    if te.is_fatal() {
                        return Err(CommitError::Fatal(e.to_string()));
                    }
                }
                tracing::warn!(error = %e, "Kafka transaction failed; aborting and retrying.");
                let aborting = Instant::now();
                let aborted = abort_transaction(&self.producer, ABORT_BUDGET);
                let abort_ms = aborting.elapsed().as_millis() as u64;
                match aborted {
                    Ok(()) => tracing::info!(abort_ms, "Kafka transaction aborted."),
                    Err(abort) => {
                        if matches!(&abort, KafkaError::Transaction(te) if te.is_fatal()) {
                            return Err(CommitError::Fatal(abort.to_string()));
                        }
                        // The next commit's begin fails while the abort is pending and lands
                        // here again, which resumes the abort.
                        tracing::warn!(error = %abort, abort_ms, "Abort failed.");
                    }
                }
                false
            }
        };
        // A failed commit's time includes its abort: a slow abort shows on the same panel.
        histogram!(telemetry::COMMIT_DURATION_SECONDS).record(started.elapsed().as_secs_f64());
        Ok(committed)
    }

    fn transact(
        &self,
        offsets: &TopicPartitionList,
        batch: &[(i32, usize)],
    ) -> Result<(), KafkaError> {
        self.producer.begin_transaction()?;
        for (p, i) in batch {
            let Some(entry) = self.pending.get(p).and_then(|l| l.get(*i)) else {
                continue;
            };
            for out in &entry.outputs {
                self.send(out, &entry.turn_id)?;
            }
        }
        let group = self
            .consumer
            .group_metadata()
            .ok_or_else(|| KafkaError::Global(rdkafka::types::RDKafkaErrorCode::State))?;
        self.producer
            .send_offsets_to_transaction(offsets, &group, Duration::from_secs(30))?;
        self.producer.commit_transaction(Duration::from_secs(30))
    }

    fn send(&self, out: &Output, turn_id: &str) -> Result<(), KafkaError> {
        let topic = match out.topic {
            OutputTopic::Replies => &self.topics.replies,
            OutputTopic::Events => &self.topics.events,
            OutputTopic::DeadLetters => &self.topics.dead_letters,
        };
        let mut headers = OwnedHeaders::new().insert(Header {
            key: HEADER_OUTPUT_ID,
            value: Some(out.output_id.as_bytes()),
        });
        // A dead letter of an undecodable record has no turn id: no empty header then.
        if !turn_id.is_empty() {
            headers = headers.insert(Header {
                key: HEADER_TURN_ID,
                value: Some(turn_id.as_bytes()),
            });
        }
        // Events are CloudEvents JSON, the rest plain JSON (docs/messages.md, "Topics").
        let headers = headers.insert(Header {
            key: HEADER_CONTENT_TYPE,
            value: Some(out.content_type().as_bytes()),
        });
        let mut record = BaseRecord::to(topic)
            .key(out.key.as_bytes())
            .payload(out.payload.as_slice())
            .headers(headers);
        loop {
            match self.producer.send(record) {
                Ok(()) => return Ok(()),
                Err((
                    KafkaError::MessageProduction(rdkafka::types::RDKafkaErrorCode::QueueFull),
                    r,
                )) => {
                    record = r;
                    self.producer.poll(Duration::from_millis(10));
                }
                Err((e, _)) => return Err(e),
            }
        }
    }
}

/// Broker-side lag of a partition: records between the high watermark and the committed offset
/// (KEDA's figure). With nothing committed the worker starts at the low watermark
/// (`auto.offset.reset=earliest`), so that is where its lag starts too. Never negative: the
/// watermarks are read every few seconds, the committed offset is current.
pub fn broker_lag(high: i64, low: i64, committed: i64) -> i64 {
    let from = if committed >= 0 { committed } else { low };
    (high - from).max(0)
}

/// Seconds from the inbound record's Kafka timestamp to `now_ms` (its outputs' commit): what
/// the customer waited, time queued in Kafka included. `None` without a timestamp (Kafka's -1);
/// a record stamped ahead of this clock (skew) counts as 0.
pub fn turn_age_seconds(now_ms: i64, record_timestamp_ms: Option<i64>) -> Option<f64> {
    let stamp = record_timestamp_ms.filter(|t| *t >= 0)?;
    Some((now_ms - stamp).max(0) as f64 / 1000.0)
}

fn unix_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_lag_counts_from_the_committed_offset_or_the_start() {
        assert_eq!(broker_lag(1_000, 0, 990), 10);
        assert_eq!(broker_lag(1_000, 0, 1_000), 0);
        // Nothing committed: everything still on the broker is lag (offset reset earliest).
        assert_eq!(broker_lag(1_000, 400, -1), 600);
        // A committed offset newer than the last watermarks read is no negative lag.
        assert_eq!(broker_lag(1_000, 0, 1_005), 0);
    }

    #[test]
    fn turn_age_runs_from_the_record_timestamp() {
        assert_eq!(turn_age_seconds(10_500, Some(10_000)), Some(0.5));
        assert_eq!(turn_age_seconds(310_000, Some(10_000)), Some(300.0));
        assert_eq!(turn_age_seconds(10_000, None), None);
        assert_eq!(turn_age_seconds(10_000, Some(-1)), None);
        assert_eq!(turn_age_seconds(10_000, Some(12_000)), Some(0.0));
    }
}
