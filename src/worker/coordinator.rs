//! The coordinator: partition assignment and revocation, lease epochs, key-ordered dispatch of
//! records to turn tasks, bounded in flight, and the hand-over of finished turns to the committer.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use metrics::{counter, gauge, histogram};
use tokio::sync::{mpsc, Semaphore};

use super::committer::{CommitCommand, CommittedMarks};
use super::consumer::{ConsumerCommand, ConsumerEvent, FetchedRecord};
use super::dispatch::KeyedQueue;
#[cfg(feature = "harness")]
use super::fault;
use super::offsets::PartitionOffsets;
use super::turn::process_record;
use super::{Health, WorkerConfig};
use crate::domain::catalog::{Catalog, Settings};
use crate::message::{DecodeLimits, Output, Topics};
use crate::pipeline::cache::{CheckpointCache, Invalidation};
use crate::ports::{CheckpointStore, DecisionModel, StoreError, ToolGateway};
use crate::store::RetryingStore;
use crate::telemetry;

/// How one record ended.
pub(super) struct Finished {
    pub(super) partition: i32,
    pub(super) offset: i64,
    pub(super) key: String,
    pub(super) turn_id: String,
    pub(super) outputs: Vec<Output>,
    /// The inbound record's Kafka timestamp: the start of `turnstile_turn_age_seconds`.
    pub(super) record_timestamp_ms: Option<i64>,
    /// Lost the partition to a newer owner mid-turn: report nothing (IO-4).
    pub(super) fenced: bool,
    pub(super) outcome: &'static str,
}

pub(super) struct PartitionState {
    pub(super) queue: KeyedQueue<FetchedRecord>,
    pub(super) offsets: PartitionOffsets,
    pub(super) epoch: Option<i64>,
    pub(super) paused: bool,
    pub(super) revoking: bool,
}

pub(super) struct Revocation {
    pub(super) partitions: Vec<i32>,
    pub(super) done: std_mpsc::SyncSender<()>,
    pub(super) deadline: Instant,
}

pub(super) struct Shared<M, T, S> {
    pub(super) catalog: Arc<Catalog>,
    pub(super) settings: Arc<Settings>,
    pub(super) model: M,
    pub(super) tools: T,
    pub(super) store: RetryingStore<S>,
    pub(super) topics: Topics,
    pub(super) limits: DecodeLimits,
    pub(super) cache: Arc<CheckpointCache>,
    #[cfg(feature = "harness")]
    pub(super) fault: fault::AbortAfterSaves,
}

pub(super) struct Coordinator<M, T, S> {
    pub(super) config: WorkerConfig,
    pub(super) shared: Arc<Shared<M, T, S>>,
    pub(super) partitions: BTreeMap<i32, PartitionState>,
    pub(super) revocations: Vec<Revocation>,
    pub(super) permits: Arc<Semaphore>,
    pub(super) in_flight: HashMap<i32, usize>,
    pub(super) commit_tx: std_mpsc::Sender<CommitCommand>,
    pub(super) cmd_tx: std_mpsc::Sender<ConsumerCommand>,
    pub(super) buffered_bytes: Arc<AtomicUsize>,
    pub(super) marks: CommittedMarks,
    pub(super) health: Arc<Health>,
}

impl<M, T, S> Coordinator<M, T, S>
where
    M: DecisionModel + Send + Sync + 'static,
    T: ToolGateway + Send + Sync + 'static,
    S: CheckpointStore + Send + Sync + 'static,
{
    pub(super) fn on_event(
        &mut self,
        ev: ConsumerEvent,
        epoch_tx: &mpsc::UnboundedSender<(i32, Result<i64, StoreError>)>,
    ) {
        match ev {
            ConsumerEvent::Assigned { partition, offsets } => {
                self.health.joined.store(true, Ordering::Relaxed);
                self.health.publish();
                let _ = self
                    .commit_tx
                    .send(CommitCommand::Assign(partition, offsets.clone()));
                self.partitions.insert(
                    partition,
                    PartitionState {
                        queue: KeyedQueue::new(self.config.max_in_flight_per_partition),
                        offsets,
                        epoch: None,
                        paused: false,
                        revoking: false,
                    },
                );
                self.acquire_epoch(partition, epoch_tx);
                self.gauges();
            }
            ConsumerEvent::Revoked { partitions, done } => {
                for p in &partitions {
                    if let Some(st) = self.partitions.get_mut(p) {
                        st.revoking = true;
                        let dropped = st.queue.drain_unstarted();
                        if dropped > 0 {
                            tracing::info!(
                                partition = p,
                                dropped,
                                "Dropped buffered records of a revoked partition."
                            );
                        }
                    }
                }
                self.revocations.push(Revocation {
                    partitions,
                    done,
                    deadline: Instant::now() + self.config.drain_budget,
                });
                self.finish_revocations();
            }
            ConsumerEvent::Joined => {
                self.health.joined.store(true, Ordering::Relaxed);
                self.health.publish();
            }
            ConsumerEvent::Record(record) => self.on_record(record),
        }
    }

    /// A fetched record: queued behind its key, unless its partition is gone or revoking, or
    /// the previous owner already completed it; pauses the partition when its buffer is full.
    fn on_record(&mut self, record: FetchedRecord) {
        let size = record.size();
        let Some(st) = self.partitions.get_mut(&record.partition) else {
            self.release_bytes(size);
            return;
        };
        if st.revoking {
            self.release_bytes(size);
            return;
        }
        let _ = self
            .commit_tx
            .send(CommitCommand::Delivered(record.partition, record.offset));
        if st.offsets.is_completed(record.offset) {
            // The previous owner committed this turn's outputs already.
            let _ = self.commit_tx.send(CommitCommand::Completed {
                partition: record.partition,
                offset: record.offset,
                turn_id: String::new(),
                outputs: Vec::new(),
                // Not this owner's turn: its age was counted when it was committed.
                record_timestamp_ms: None,
            });
            self.release_bytes(size);
            return;
        }
        let key = record
            .key
            .as_deref()
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .unwrap_or_default();
        let partition = record.partition;
        st.queue.push(key, record);
        if !st.paused && st.queue.buffered() >= self.config.max_buffered_per_partition {
            st.paused = true;
            let _ = self.cmd_tx.send(ConsumerCommand::Pause(vec![partition]));
        }
    }

    fn acquire_epoch(
        &self,
        partition: i32,
        epoch_tx: &mpsc::UnboundedSender<(i32, Result<i64, StoreError>)>,
    ) {
        let shared = self.shared.clone();
        let tx = epoch_tx.clone();
        let topic = self.config.topics.inbound.clone();
        let owner = self.config.instance_id.clone();
        tokio::spawn(async move {
            let r = shared.store.acquire_epoch(&topic, partition, &owner).await;
            let _ = tx.send((partition, r));
        });
    }

    pub(super) fn on_epoch(
        &mut self,
        partition: i32,
        epoch: Result<i64, StoreError>,
        epoch_tx: &mpsc::UnboundedSender<(i32, Result<i64, StoreError>)>,
    ) {
        match epoch {
            Ok(e) => {
                self.health.store_ok.store(true, Ordering::Relaxed);
                self.health.publish();
                if let Some(st) = self.partitions.get_mut(&partition) {
                    tracing::info!(partition, epoch = e, "Partition lease taken.");
                    st.epoch = Some(e);
                }
            }
            Err(err) => {
                self.health.store_ok.store(false, Ordering::Relaxed);
                self.health.publish();
                tracing::warn!(partition, error = %err, "Cannot take the partition lease; retrying.");
                if self.partitions.contains_key(&partition) {
                    let tx = epoch_tx.clone();
                    let shared = self.shared.clone();
                    let topic = self.config.topics.inbound.clone();
                    let owner = self.config.instance_id.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        let r = shared.store.acquire_epoch(&topic, partition, &owner).await;
                        let _ = tx.send((partition, r));
                    });
                }
            }
        }
    }

    pub(super) fn on_finished(&mut self, f: Finished) {
        if let Some(n) = self.in_flight.get_mut(&f.partition) {
            *n = n.saturating_sub(1);
        }
        if let Some(st) = self.partitions.get_mut(&f.partition) {
            st.queue.finish(&f.key);
            if st.paused && st.queue.buffered() < self.config.max_buffered_per_partition / 2 {
                st.paused = false;
                let _ = self.cmd_tx.send(ConsumerCommand::Resume(vec![f.partition]));
            }
        }
        counter!(telemetry::TURNS_TOTAL, "outcome" => f.outcome).increment(1);
        if f.fenced {
            counter!(telemetry::FENCED_WRITES_TOTAL).increment(1);
            // A newer owner wrote this partition: none of its cached rows can be trusted.
            self.shared
                .cache
                .forget_partition(f.partition, Invalidation::Fenced);
        } else if self.partitions.contains_key(&f.partition) {
            let _ = self.commit_tx.send(CommitCommand::Completed {
                partition: f.partition,
                offset: f.offset,
                turn_id: f.turn_id,
                outputs: f.outputs,
                record_timestamp_ms: f.record_timestamp_ms,
            });
        }
        self.finish_revocations();
        self.gauges();
    }

    pub(super) fn on_tick(&mut self) {
        self.finish_revocations();
        self.gauges();
    }

    /// Answers revocations whose partitions have no turn running (or whose budget ran out),
    /// after committing what finished.
    fn finish_revocations(&mut self) {
        let now = Instant::now();
        let mut i = 0;
        while i < self.revocations.len() {
            let r = &self.revocations[i];
            let idle = r
                .partitions
                .iter()
                .all(|p| self.in_flight.get(p).copied().unwrap_or(0) == 0);
            if !(idle || now >= r.deadline) {
                i += 1;
                continue;
            }
            let r = self.revocations.swap_remove(i);
            let (ack_tx, ack_rx) = std_mpsc::sync_channel(1);
            let _ = self.commit_tx.send(CommitCommand::Flush(ack_tx));
            let _ = self
                .commit_tx
                .send(CommitCommand::Revoke(r.partitions.clone()));
            for p in &r.partitions {
                self.partitions.remove(p);
                self.in_flight.remove(p);
                self.shared
                    .cache
                    .forget_partition(*p, Invalidation::Revoked);
            }
            let done = r.done;
            // The flush answer arrives from the committer thread; hand it to the consumer's wait.
            std::thread::spawn(move || {
                let _ = ack_rx.recv_timeout(Duration::from_secs(30));
                let _ = done.send(());
            });
        }
    }

    pub(super) fn stop_dispatching(&mut self) {
        let all: Vec<i32> = self.partitions.keys().copied().collect();
        for st in self.partitions.values_mut() {
            let dropped = st.queue.drain_unstarted();
            let _ = dropped;
        }
        let _ = self.cmd_tx.send(ConsumerCommand::Pause(all));
    }

    fn release_bytes(&self, size: usize) {
        let _ = self
            .buffered_bytes
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                Some(b.saturating_sub(size))
            });
    }

    fn gauges(&self) {
        let running: usize = self.in_flight.values().sum();
        self.shared
            .cache
            .set_in_flight(running, self.config.max_in_flight);
        gauge!(telemetry::TURNS_IN_FLIGHT).set(running as f64);
        gauge!(telemetry::PARTITIONS_ASSIGNED).set(self.partitions.len() as f64);
        self.health
            .assigned_partitions
            .store(self.partitions.len(), Ordering::Relaxed);
        self.health.publish();
    }

    /// Starts every record allowed to run: key-ordered, bounded per partition and process.
    pub(super) fn dispatch(&mut self, done_tx: &mpsc::UnboundedSender<Finished>) {
        let partitions: Vec<i32> = self.partitions.keys().copied().collect();
        for p in partitions {
            while let Some(st) = self.partitions.get_mut(&p) {
                if st.revoking {
                    break;
                }
                let Some(epoch) = st.epoch else { break };
                let Ok(permit) = self.permits.clone().try_acquire_owned() else {
                    return;
                };
                let Some((key, record)) = st.queue.next_to_run() else {
                    break;
                };
                let size = record.size();
                *self.in_flight.entry(p).or_default() += 1;
                let committed = self
                    .marks
                    .lock()
                    .ok()
                    .and_then(|m| m.get(&p).copied())
                    .unwrap_or(-1);
                let shared = self.shared.clone();
                let tx = done_tx.clone();
                let bytes = self.buffered_bytes.clone();
                tokio::spawn(async move {
                    let _ = bytes.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                        Some(b.saturating_sub(size))
                    });
                    let started = Instant::now();
                    let finished = process_record(&shared, record, key, epoch, committed).await;
                    histogram!(telemetry::TURN_DURATION_SECONDS)
                        .record(started.elapsed().as_secs_f64());
                    drop(permit);
                    let _ = tx.send(finished);
                });
            }
        }
    }
}
