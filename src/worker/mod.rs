//! The streaming worker: Kafka in, checkpoints in the CQL store, models and tools over HTTP,
//! replies and events out through a transactional producer — exactly once per turn.
//!
//! Threads: the consumer thread polls and runs rebalance callbacks; the committer thread owns
//! the transactional producer; the coordinator task dispatches records key-ordered (one turn per
//! conversation at a time, many conversations at once) and each turn runs as its own task.
//! Per turn: decode → load → (republish from the outbox if this turn was already applied) →
//! decide (write-ahead before a tool, LC-4) → save state + outbox → publish with the offsets.

pub mod committer;
pub mod config;
pub mod consumer;
pub mod dispatch;
#[cfg(feature = "harness")]
mod fault;
pub mod listener;
pub mod offsets;
pub mod topics;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use metrics::{counter, gauge, histogram};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::Consumer;
use rdkafka::producer::{BaseProducer, Producer};
use tokio::sync::{mpsc, Semaphore};

use crate::domain::catalog::{Catalog, Settings};
use crate::domain::engine::Engine;
use crate::message::{DecodeLimits, InboundRecord, Output, Topics};
use crate::pipeline::{handle_record, Disposition, Rules};
use crate::ports::{CheckpointStore, DecisionModel, StoreError, ToolGateway};
use crate::store::RetryingStore;
use crate::telemetry;

use committer::{CommitCommand, CommittedMarks, Committer};
pub use config::WorkerConfig;
use consumer::{ConsumerCommand, ConsumerEvent, FetchedRecord};
use dispatch::KeyedQueue;
use offsets::PartitionOffsets;

/// What the worker needs besides Kafka: the decision inputs and the adapters.
pub struct Services<M, T, S> {
    pub catalog: Arc<Catalog>,
    pub settings: Arc<Settings>,
    pub model: M,
    pub tools: T,
    /// Wrapped in the one retry layer ([`RetryingStore`]) by [`run`], which wires its
    /// availability to readiness.
    pub store: S,
}

/// Liveness and readiness facts for `/readyz`.
#[derive(Debug, Default)]
pub struct Health {
    pub assigned_partitions: AtomicUsize,
    pub joined: AtomicBool,
    pub store_ok: AtomicBool,
    pub broker_ok: AtomicBool,
}

impl Health {
    /// What `/readyz` answers 200 for: the consumer joined the group (or holds partitions), the
    /// checkpoint store answered and the transactional producer initialised.
    pub fn is_ready(&self) -> bool {
        let joined = self.joined.load(Ordering::Relaxed)
            || self.assigned_partitions.load(Ordering::Relaxed) > 0;
        joined && self.store_ok.load(Ordering::Relaxed) && self.broker_ok.load(Ordering::Relaxed)
    }

    /// Sets `turnstile_ready` to what `/readyz` would answer now (1 = 200, 0 = 503); called
    /// wherever a readiness fact changes, and on every coordinator tick.
    pub fn publish(&self) {
        gauge!(telemetry::READY).set(if self.is_ready() { 1.0 } else { 0.0 });
    }
}

/// Why the worker stopped.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("Kafka client setup failed: {0}")]
    Kafka(String),
    #[error(transparent)]
    Commit(#[from] committer::CommitError),
}

/// How one record ended.
struct Finished {
    partition: i32,
    offset: i64,
    key: String,
    turn_id: String,
    outputs: Vec<Output>,
    /// Lost the partition to a newer owner mid-turn: report nothing (IO-4).
    fenced: bool,
    outcome: &'static str,
}

struct PartitionState {
    queue: KeyedQueue<FetchedRecord>,
    offsets: PartitionOffsets,
    epoch: Option<i64>,
    paused: bool,
    revoking: bool,
}

struct Revocation {
    partitions: Vec<i32>,
    done: std_mpsc::SyncSender<()>,
    deadline: Instant,
}

/// Runs the worker until `shutdown` resolves; drains within the budget, commits, returns.
pub async fn run<M, T, S>(
    config: WorkerConfig,
    services: Services<M, T, S>,
    health: Arc<Health>,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), WorkerError>
where
    M: DecisionModel + Send + Sync + 'static,
    T: ToolGateway + Send + Sync + 'static,
    S: CheckpointStore + Send + Sync + 'static,
{
    telemetry::record_in_flight_limits(config.max_in_flight, config.max_in_flight_per_partition);
    telemetry::register_alerted_series();
    if let Some(partitions) = config.create_topics {
        topics::create_topics(&config.brokers, &config.topics, partitions)
            .await
            .map_err(WorkerError::Kafka)?;
    }
    let (events_tx, mut events_rx) = mpsc::unbounded_channel();
    let context = consumer::context(
        &config.topics.inbound,
        events_tx.clone(),
        config.drain_budget,
    );
    let consumer: Arc<consumer::WorkerConsumer> = Arc::new(
        consumer_config(&config)
            .create_with_context(context)
            .map_err(|e| WorkerError::Kafka(e.to_string()))?,
    );
    consumer
        .subscribe(&[&config.topics.inbound])
        .map_err(|e| WorkerError::Kafka(e.to_string()))?;
    let producer: BaseProducer = producer_config(&config)
        .create()
        .map_err(|e| WorkerError::Kafka(e.to_string()))?;
    let producer = tokio::task::spawn_blocking(move || {
        producer
            .init_transactions(Duration::from_secs(60))
            .map(|()| producer)
    })
    .await
    .map_err(|e| WorkerError::Kafka(e.to_string()))?
    .map_err(|e| WorkerError::Kafka(format!("init_transactions: {e}")))?;
    health.broker_ok.store(true, Ordering::Relaxed);
    health.publish();

    let marks: CommittedMarks = Default::default();
    let (commit_tx, commit_rx) = std_mpsc::channel::<CommitCommand>();
    let committer = Committer::new(
        producer,
        consumer.clone(),
        config.topics.clone(),
        marks.clone(),
    );
    let interval = config.commit_interval;
    let committer_thread = std::thread::Builder::new()
        .name("turnstile-committer".into())
        .spawn(move || committer.run(commit_rx, interval))
        .map_err(|e| WorkerError::Kafka(e.to_string()))?;

    let (cmd_tx, cmd_rx) = std_mpsc::channel::<ConsumerCommand>();
    let stop = Arc::new(AtomicBool::new(false));
    let buffered_bytes = Arc::new(AtomicUsize::new(0));
    let consumer_thread = {
        let (consumer, topic, stop, bytes) = (
            consumer.clone(),
            config.topics.inbound.clone(),
            stop.clone(),
            buffered_bytes.clone(),
        );
        let max = config.max_buffered_bytes;
        std::thread::Builder::new()
            .name("turnstile-consumer".into())
            .spawn(move || {
                consumer::poll_loop(consumer, topic, events_tx, cmd_rx, stop, bytes, max)
            })
            .map_err(|e| WorkerError::Kafka(e.to_string()))?
    };

    let store_health = health.clone();
    let store = RetryingStore::new(services.store).on_availability(Arc::new(move |ok| {
        store_health.store_ok.store(ok, Ordering::Relaxed);
        store_health.publish();
    }));
    let shared = Arc::new(Shared {
        catalog: services.catalog,
        settings: services.settings,
        model: services.model,
        tools: services.tools,
        store,
        topics: config.topics.clone(),
        limits: DecodeLimits {
            max_payload_bytes: config.max_payload_bytes,
        },
        #[cfg(feature = "harness")]
        fault: fault::AbortAfterSaves::new(config.fault_abort_after_saves),
    });
    let mut coordinator = Coordinator {
        config: config.clone(),
        shared,
        partitions: BTreeMap::new(),
        revocations: Vec::new(),
        permits: Arc::new(Semaphore::new(config.max_in_flight)),
        in_flight: HashMap::new(),
        commit_tx: commit_tx.clone(),
        cmd_tx,
        buffered_bytes,
        marks,
        health: health.clone(),
    };
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<Finished>();
    let (epoch_tx, mut epoch_rx) = mpsc::unbounded_channel::<(i32, Result<i64, StoreError>)>();
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    tokio::pin!(shutdown);
    let mut draining_since: Option<Instant> = None;
    loop {
        tokio::select! {
            ev = events_rx.recv() => match ev {
                Some(ev) => coordinator.on_event(ev, &epoch_tx),
                None => break,
            },
            Some(f) = done_rx.recv() => coordinator.on_finished(f),
            Some((p, epoch)) = epoch_rx.recv() => coordinator.on_epoch(p, epoch, &epoch_tx),
            _ = tick.tick() => {
                coordinator.on_tick();
                if let Some(since) = draining_since {
                    let idle = coordinator.in_flight.values().all(|n| *n == 0);
                    if idle || since.elapsed() >= config.drain_budget {
                        break;
                    }
                }
            }
            _ = &mut shutdown, if draining_since.is_none() => {
                tracing::info!("Shutdown requested; draining in-flight turns.");
                draining_since = Some(Instant::now());
                coordinator.stop_dispatching();
            }
        }
        if draining_since.is_none() {
            coordinator.dispatch(&done_tx);
        }
    }
    // Commit what finished, then leave the group (the revocation callback answers at once).
    let (ack_tx, ack_rx) = std_mpsc::sync_channel(1);
    let _ = commit_tx.send(CommitCommand::Flush(ack_tx));
    let _ = tokio::task::spawn_blocking(move || ack_rx.recv_timeout(Duration::from_secs(30))).await;
    stop.store(true, Ordering::Relaxed);
    let answer_revocations = tokio::spawn(async move {
        while let Some(ev) = events_rx.recv().await {
            if let ConsumerEvent::Revoked { done, .. } = ev {
                let _ = done.send(());
            }
        }
    });
    let _ = tokio::task::spawn_blocking(move || consumer_thread.join()).await;
    answer_revocations.abort();
    drop(coordinator);
    drop(commit_tx);
    match tokio::task::spawn_blocking(move || committer_thread.join()).await {
        Ok(Ok(result)) => result?,
        _ => tracing::warn!("Committer thread ended abnormally."),
    }
    tracing::info!("Worker stopped.");
    Ok(())
}

fn consumer_config(config: &WorkerConfig) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &config.brokers)
        .set("group.id", &config.group_id)
        .set("group.instance.id", &config.instance_id)
        .set("client.id", format!("{}-consumer", config.instance_id))
        .set("partition.assignment.strategy", "cooperative-sticky")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("isolation.level", "read_committed")
        .set(
            "session.timeout.ms",
            config.session_timeout.as_millis().to_string(),
        )
        .set(
            "heartbeat.interval.ms",
            (config.session_timeout.as_millis() / 4)
                .max(500)
                .to_string(),
        )
        .set("enable.partition.eof", "false")
        // librdkafka's own prefetch is bounded too, so memory stays bounded under any backlog.
        .set("queued.max.messages.kbytes", "16384")
        .set("fetch.max.bytes", "8388608");
    for (k, v) in &config.kafka_overrides {
        c.set(k, v);
    }
    c
}

fn producer_config(config: &WorkerConfig) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &config.brokers)
        .set("client.id", format!("{}-producer", config.instance_id))
        // Stable per instance: a restarted instance fences its previous incarnation.
        .set(
            "transactional.id",
            format!("turnstile-{}", config.instance_id),
        )
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .set("transaction.timeout.ms", "60000");
    for (k, v) in &config.kafka_overrides {
        c.set(k, v);
    }
    c
}

struct Shared<M, T, S> {
    catalog: Arc<Catalog>,
    settings: Arc<Settings>,
    model: M,
    tools: T,
    store: RetryingStore<S>,
    topics: Topics,
    limits: DecodeLimits,
    #[cfg(feature = "harness")]
    fault: fault::AbortAfterSaves,
}

struct Coordinator<M, T, S> {
    config: WorkerConfig,
    shared: Arc<Shared<M, T, S>>,
    partitions: BTreeMap<i32, PartitionState>,
    revocations: Vec<Revocation>,
    permits: Arc<Semaphore>,
    in_flight: HashMap<i32, usize>,
    commit_tx: std_mpsc::Sender<CommitCommand>,
    cmd_tx: std_mpsc::Sender<ConsumerCommand>,
    buffered_bytes: Arc<AtomicUsize>,
    marks: CommittedMarks,
    health: Arc<Health>,
}

impl<M, T, S> Coordinator<M, T, S>
where
    M: DecisionModel + Send + Sync + 'static,
    T: ToolGateway + Send + Sync + 'static,
    S: CheckpointStore + Send + Sync + 'static,
{
    fn on_event(
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
            ConsumerEvent::Record(record) => {
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

    fn on_epoch(
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

    fn on_finished(&mut self, f: Finished) {
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
        } else if self.partitions.contains_key(&f.partition) {
            let _ = self.commit_tx.send(CommitCommand::Completed {
                partition: f.partition,
                offset: f.offset,
                turn_id: f.turn_id,
                outputs: f.outputs,
            });
        }
        self.finish_revocations();
        self.gauges();
    }

    fn on_tick(&mut self) {
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
            }
            let done = r.done;
            // The flush answer arrives from the committer thread; hand it to the consumer's wait.
            std::thread::spawn(move || {
                let _ = ack_rx.recv_timeout(Duration::from_secs(30));
                let _ = done.send(());
            });
        }
    }

    fn stop_dispatching(&mut self) {
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
        gauge!(telemetry::TURNS_IN_FLIGHT).set(running as f64);
        gauge!(telemetry::PARTITIONS_ASSIGNED).set(self.partitions.len() as f64);
        self.health
            .assigned_partitions
            .store(self.partitions.len(), Ordering::Relaxed);
        self.health.publish();
    }

    /// Starts every record allowed to run: key-ordered, bounded per partition and process.
    fn dispatch(&mut self, done_tx: &mpsc::UnboundedSender<Finished>) {
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

/// Processes one record inside a span carrying its topic, partition, offset, tenant and turn id
/// (the span is attached to the future, never entered across an await), so every line logged
/// for the turn — a model fallback, a tool retry, a store wait — names the turn it belongs to.
async fn process_record<M, T, S>(
    shared: &Shared<M, T, S>,
    record: FetchedRecord,
    key: String,
    epoch: i64,
    committed_mark: i64,
) -> Finished
where
    M: DecisionModel + Send + Sync,
    T: ToolGateway + Send + Sync,
    S: CheckpointStore + Send + Sync,
{
    use tracing::Instrument;
    let span = tracing::info_span!(
        "turn",
        topic = %shared.topics.inbound,
        partition = record.partition,
        offset = record.offset,
        tenant_id = tracing::field::Empty,
        turn_id = tracing::field::Empty
    );
    Box::pin(apply_record(shared, record, key, epoch, committed_mark))
        .instrument(span)
        .await
}

/// The pipeline's [`handle_record`], and what the coordinator needs to know of its end.
async fn apply_record<M, T, S>(
    shared: &Shared<M, T, S>,
    record: FetchedRecord,
    key: String,
    epoch: i64,
    committed_mark: i64,
) -> Finished
where
    M: DecisionModel + Send + Sync,
    T: ToolGateway + Send + Sync,
    S: CheckpointStore + Send + Sync,
{
    let inbound = InboundRecord {
        topic: &shared.topics.inbound,
        partition: record.partition,
        offset: record.offset,
        key: record.key.as_deref(),
        payload: record.payload.as_deref(),
        timestamp_ms: record.timestamp_ms,
    };
    let rules = Rules {
        engine: Engine::new(&shared.catalog, &shared.settings),
        catalog: &shared.catalog,
        limits: &shared.limits,
    };
    let handled = handle_record(
        rules,
        &shared.store,
        &shared.model,
        &shared.tools,
        &inbound,
        epoch,
        committed_mark,
    )
    .await;
    let mut finished = Finished {
        partition: record.partition,
        offset: record.offset,
        key,
        turn_id: String::new(),
        outputs: Vec::new(),
        fenced: false,
        outcome: "fenced",
    };
    match handled {
        Ok(h) => {
            finished.fenced = h.disposition == Disposition::Fenced;
            finished.outcome = h.disposition.as_str();
            finished.turn_id = h.turn_id;
            finished.outputs = h.outputs;
            #[cfg(feature = "harness")]
            if h.disposition == Disposition::Applied {
                shared.fault.after_save();
            }
        }
        // Only reachable without the retry layer, which the worker always has: leave the
        // record uncommitted (redelivered to the next owner) rather than guess.
        Err(e) => {
            tracing::error!(error = %e, "Checkpoint store error escaped the retry layer; the record stays uncommitted.");
            finished.fenced = true;
        }
    }
    finished
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::http::OpenAiCompatibleModel;
    use crate::store::cql::ScyllaCheckpointStore;
    use crate::tool::http::HttpToolGateway;

    type RealShared = Shared<OpenAiCompatibleModel, HttpToolGateway, ScyllaCheckpointStore>;

    /// `turnstile_ready` follows exactly what `/readyz` answers: 0 until the group is joined (or
    /// partitions held), the store answered and the producer initialised; 0 again when the store
    /// stops answering. Rendered by the same exporter `turnstile run` installs.
    #[test]
    fn the_ready_gauge_is_exported_and_follows_readiness() {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        let health = Health::default();
        let ready_line = |text: &str| {
            text.lines()
                .find(|l| l.starts_with("turnstile_ready "))
                .map(str::to_owned)
        };
        metrics::with_local_recorder(&recorder, || {
            health.publish();
            assert!(!health.is_ready());
            assert_eq!(
                ready_line(&handle.render()).as_deref(),
                Some("turnstile_ready 0")
            );
            health.store_ok.store(true, Ordering::Relaxed);
            health.broker_ok.store(true, Ordering::Relaxed);
            health.publish();
            assert_eq!(
                ready_line(&handle.render()).as_deref(),
                Some("turnstile_ready 0"),
                "not joined and no partition: not ready"
            );
            health.assigned_partitions.store(3, Ordering::Relaxed);
            health.publish();
            assert!(health.is_ready());
            assert_eq!(
                ready_line(&handle.render()).as_deref(),
                Some("turnstile_ready 1")
            );
            health.store_ok.store(false, Ordering::Relaxed);
            health.publish();
            assert!(!health.is_ready());
            assert_eq!(
                ready_line(&handle.render()).as_deref(),
                Some("turnstile_ready 0"),
                "store lost: not ready"
            );
        });
    }

    /// The size of the future a closure would build, without building it.
    fn future_size<F, Fut>(_: F) -> usize
    where
        F: FnOnce(&'static RealShared) -> Fut,
    {
        std::mem::size_of::<Fut>()
    }

    /// Every turn in flight is a task holding this future; unboxed, the CQL driver's and the
    /// pipeline's nested futures made it 13.8 KB (138 MB at 10,000 turns in flight).
    #[test]
    fn a_turn_in_flight_holds_a_small_future() {
        let size = future_size(|shared| {
            let record = FetchedRecord {
                partition: 0,
                offset: 0,
                key: None,
                payload: None,
                timestamp_ms: None,
            };
            process_record(shared, record, String::new(), 0, 0)
        });
        assert!(
            size <= 6 * 1024,
            "process_record's future is {size} bytes: box the large awaits inside it"
        );
    }
}
