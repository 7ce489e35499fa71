//! The committer thread: runs the Kafka transactions the partition state machine
//! (`worker::partitions`) hands it, one at a time — the finished turns' outputs and the offsets
//! that cover them, with their commit metadata (EOS) — and reports how each ended. It holds no
//! bookkeeping of its own: which offsets and outputs go in a transaction, the committed marks and
//! the checkpoint cache's suspension are the state machine's.

use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use metrics::{counter, histogram};
use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::mpsc;

use crate::message::{Output, Topics, HEADER_CONTENT_TYPE, HEADER_OUTPUT_ID, HEADER_TURN_ID};
use crate::ports::RetryClass;
use crate::telemetry;
use crate::worker::consumer::WorkerConsumer;
use crate::worker::partitions::{Input, Transaction};

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
            Err(e)
                if kafka_retry_class(&e) == RetryClass::Retryable && Instant::now() < deadline =>
            {
                producer.poll(Duration::from_millis(10));
            }
            Err(e) => return Err(e),
        }
    }
}

/// A transactional producer's error by librdkafka's own flags: fatal (the producer is fenced or
/// misconfigured: only a new one can go on), retriable (the same call again), or else abortable
/// (this transaction can never commit: abort it, its turns go in a later one).
pub fn kafka_retry_class(e: &KafkaError) -> RetryClass {
    match e {
        KafkaError::Transaction(te) if te.is_fatal() => RetryClass::Fatal,
        KafkaError::Transaction(te) if te.is_retriable() => RetryClass::Retryable,
        _ => RetryClass::Poison,
    }
}

/// Why the committer stopped for good: the process must restart (crash-only).
#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    #[error("Kafka producer failed fatally (fenced or misconfigured): {0}")]
    Fatal(#[source] KafkaError),
}

impl CommitError {
    pub fn retry_class(&self) -> RetryClass {
        match self {
            CommitError::Fatal(_) => RetryClass::Fatal,
        }
    }
}

pub struct Committer {
    producer: BaseProducer,
    consumer: Arc<WorkerConsumer>,
    topics: Topics,
    #[cfg(feature = "harness")]
    fault: super::fault::HoldTransaction,
}

impl Committer {
    pub fn new(producer: BaseProducer, consumer: Arc<WorkerConsumer>, topics: Topics) -> Self {
        Committer {
            producer,
            consumer,
            topics,
            #[cfg(feature = "harness")]
            fault: super::fault::HoldTransaction::new(None),
        }
    }

    /// The scale-down measurement's fault hook (`TURNSTILE_FAULT_HOLD_TRANSACTION_FILE`).
    #[cfg(feature = "harness")]
    pub(super) fn with_hold_file(mut self, file: Option<std::path::PathBuf>) -> Self {
        self.fault = super::fault::HoldTransaction::new(file);
        self
    }

    /// Runs each transaction it is given and reports it ([`Input::TransactionFailed`] as soon as
    /// one fails, before its abort; [`Input::TransactionEnded`] once it committed or was
    /// aborted), until the channel closes; serves the producer's events meanwhile.
    pub fn run(
        self,
        transactions: std_mpsc::Receiver<Transaction>,
        reports: mpsc::UnboundedSender<Input>,
    ) -> Result<(), CommitError> {
        loop {
            match transactions.recv_timeout(Duration::from_millis(100)) {
                Ok(transaction) => {
                    let committed = self.commit(&transaction, &reports)?;
                    let _ = reports.send(Input::TransactionEnded {
                        transaction,
                        committed,
                    });
                }
                Err(std_mpsc::RecvTimeoutError::Timeout) => {}
                Err(std_mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
            }
            self.producer.poll(Duration::ZERO);
        }
    }

    /// One transaction: every output of its turns, then the offsets with their metadata.
    /// Returns false when it was aborted (its turns go in a later one).
    fn commit(
        &self,
        transaction: &Transaction,
        reports: &mpsc::UnboundedSender<Input>,
    ) -> Result<bool, CommitError> {
        let mut tpl = TopicPartitionList::new();
        for o in &transaction.offsets {
            if let Err(e) = tpl.add_partition_offset(
                &self.topics.inbound,
                o.partition,
                Offset::Offset(o.offset),
            ) {
                tracing::warn!(error = %e, partition = o.partition, "Cannot add offset to commit.");
                continue;
            }
            if let Some(mut elem) = tpl.find_partition(&self.topics.inbound, o.partition) {
                elem.set_metadata(o.metadata.clone());
            }
        }
        let started = Instant::now();
        let committed = match self.transact(&tpl, transaction) {
            Ok(()) => {
                // The turns' ages: from their records' timestamps to now, their commit.
                let now_ms = crate::clock::now_ms();
                let age = histogram!(telemetry::TURN_AGE_SECONDS);
                for turn in &transaction.turns {
                    if let Some(secs) = turn_age_seconds(now_ms, turn.record_timestamp_ms) {
                        age.record(secs);
                    }
                }
                true
            }
            Err(e) => {
                counter!(telemetry::COMMIT_FAILURES_TOTAL).increment(1);
                // This worker may have lost its partitions without being told: the checkpoint
                // cache is suspended at once (the state machine's answer to this report).
                let _ = reports.send(Input::TransactionFailed);
                self.abort_failed(e)?;
                false
            }
        };
        // A failed commit's time includes its abort: a slow abort shows on the same panel.
        histogram!(telemetry::COMMIT_DURATION_SECONDS).record(started.elapsed().as_secs_f64());
        Ok(committed)
    }

    /// After a failed transaction: stop for good when it is fatal, else abort it (in slices).
    fn abort_failed(&self, e: KafkaError) -> Result<(), CommitError> {
        if kafka_retry_class(&e) == RetryClass::Fatal {
            return Err(CommitError::Fatal(e));
        }
        tracing::warn!(error = %e, "Kafka transaction failed; aborting and retrying.");
        let aborting = Instant::now();
        let aborted = abort_transaction(&self.producer, ABORT_BUDGET);
        let abort_ms = aborting.elapsed().as_millis() as u64;
        match aborted {
            Ok(()) => tracing::info!(abort_ms, "Kafka transaction aborted."),
            Err(abort) => {
                if kafka_retry_class(&abort) == RetryClass::Fatal {
                    return Err(CommitError::Fatal(abort));
                }
                // The next commit's begin fails while the abort is pending and lands here
                // again, which resumes the abort.
                tracing::warn!(error = %abort, abort_ms, "Abort failed.");
            }
        }
        Ok(())
    }

    fn transact(
        &self,
        offsets: &TopicPartitionList,
        transaction: &Transaction,
    ) -> Result<(), KafkaError> {
        self.producer.begin_transaction()?;
        for turn in &transaction.turns {
            for out in &turn.outputs {
                self.send(out, &turn.turn_id)?;
            }
        }
        #[cfg(feature = "harness")]
        if !transaction.turns.is_empty() {
            self.fault.hold_if_armed(&self.producer);
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
        let topic = self.topics.name(out.topic());
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
