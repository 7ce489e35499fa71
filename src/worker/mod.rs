//! The streaming worker: Kafka in, checkpoints in the CQL store, models and tools over HTTP,
//! replies and events out through a transactional producer — exactly once per turn.
//!
//! Threads: the consumer thread polls and runs rebalance callbacks; the committer thread owns
//! the transactional producer; the coordinator task runs one `select!` loop that feeds the
//! partition state machine ([`partitions`]: every partition fact, one copy) and carries out its
//! commands — dispatching records key-ordered (one turn per conversation at a time, many
//! conversations at once), each turn as its own task.
//! Per turn: `pipeline::handle_record` (decode → load → fenced? republish? → decide, with the
//! LC-4 write-ahead → save state + outbox), then the committer publishes the outputs with the
//! consumed offset in one Kafka transaction the state machine composed.
//!
//! | module | what it is |
//! |---|---|
//! | [`partitions`] | the pure state machine, `on(input, now) -> commands`: queues per key, offsets, epochs, turns running, revocations, committed marks, transactions, the drain (`docs/reliability.md`) |
//! | [`coordinator`] | the `select!` loop: events, finished turns, epochs and commit reports in; the machine's commands carried out |
//! | `turn` | one record's task: the pipeline inside the turn's span |
//! | [`committer`] | the transactional producer thread: runs the transactions it is given, reports them |
//! | [`consumer`] | the consumer thread: polling, rebalance callbacks, pause/resume |
//! | [`dispatch`], [`offsets`] | per-key queues; contiguous committable offsets (the machine's parts) |
//! | `kafka_clients` | librdkafka settings of the consumer and the producer |
//! | [`config`] | the `TURNSTILE_*` settings |
//! | [`listener`] | `/metrics`, `/healthz`, `/readyz` |
//! | [`topics`] | topic creation (`TURNSTILE_CREATE_TOPICS`) |

pub mod committer;
pub mod config;
pub mod consumer;
pub mod coordinator;
pub mod dispatch;
#[cfg(feature = "harness")]
mod fault;
mod kafka_clients;
pub mod listener;
pub mod offsets;
pub mod partitions;
pub mod topics;
mod turn;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::Duration;

use metrics::gauge;
use rdkafka::consumer::Consumer;
use rdkafka::producer::{BaseProducer, Producer};
use tokio::sync::mpsc;

use crate::domain::catalog::{Catalog, Settings};
use crate::message::DecodeLimits;
use crate::ports::{CheckpointStore, DecisionModel, RetryClass, ToolGateway};
use crate::store::{CachingCheckpointStore, CheckpointCache, RetryingStore};
use crate::telemetry;

use committer::Committer;
pub use config::WorkerConfig;
use consumer::{ConsumerCommand, ConsumerEvent};
use coordinator::Coordinator;
use kafka_clients::{consumer_config, producer_config};
use partitions::{Input, Limits, Partitions, Transaction};
use turn::Shared;

/// What the worker needs besides Kafka: the decision inputs and the adapters.
pub struct Services<M, T, S> {
    pub catalog: Arc<Catalog>,
    pub settings: Arc<Settings>,
    pub model: M,
    pub tools: T,
    /// Wrapped in the one retry layer ([`RetryingStore`]) by [`run`], which wires its
    /// availability to readiness, and that in the checkpoint cache ([`CachingCheckpointStore`]).
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
    #[error("Kafka client setup failed: {what}: {source}")]
    Kafka {
        what: &'static str,
        #[source]
        source: rdkafka::error::KafkaError,
    },
    #[error("Kafka client setup failed: {0}")]
    Topics(#[from] topics::CreateTopicsError),
    #[error("Kafka client setup failed: init_transactions did not return: {0}")]
    Init(#[source] tokio::task::JoinError),
    #[error("cannot start the {name} thread: {source}")]
    Thread {
        name: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Commit(#[from] committer::CommitError),
}

impl WorkerError {
    /// The process restarts either way; `Retryable` says a restart alone may be enough (the
    /// broker was unreachable), `Fatal` that something must change first.
    pub fn retry_class(&self) -> RetryClass {
        match self {
            WorkerError::Kafka { source, .. } => match committer::kafka_retry_class(source) {
                RetryClass::Retryable => RetryClass::Retryable,
                RetryClass::Poison | RetryClass::Fatal => RetryClass::Fatal,
            },
            WorkerError::Topics(e) => e.retry_class(),
            WorkerError::Init(_) | WorkerError::Thread { .. } => RetryClass::Fatal,
            WorkerError::Commit(e) => e.retry_class(),
        }
    }
}

fn kafka(what: &'static str) -> impl FnOnce(rdkafka::error::KafkaError) -> WorkerError {
    move |source| WorkerError::Kafka { what, source }
}

fn thread(name: &'static str) -> impl FnOnce(std::io::Error) -> WorkerError {
    move |source| WorkerError::Thread { name, source }
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
    announce_start(&config);
    let (events_tx, mut events_rx) = mpsc::unbounded_channel();
    let (consumer, producer) = kafka_clients(&config, events_tx.clone()).await?;
    health.broker_ok.store(true, Ordering::Relaxed);
    health.publish();

    let cache = Arc::new(CheckpointCache::new(config.checkpoint_cache_bytes));
    let (commit_tx, commit_rx) = std_mpsc::channel::<Transaction>();
    let (reports_tx, mut reports_rx) = mpsc::unbounded_channel::<Input>();
    let committer = Committer::new(producer, consumer.clone(), config.topics.clone());
    #[cfg(feature = "harness")]
    let committer = committer.with_hold_file(config.fault_hold_transaction_file.clone());
    let committer_thread = std::thread::Builder::new()
        .name("turnstile-committer".into())
        .spawn(move || committer.run(commit_rx, reports_tx))
        .map_err(thread("committer"))?;

    let (cmd_tx, cmd_rx) = std_mpsc::channel::<ConsumerCommand>();
    let stop = Arc::new(AtomicBool::new(false));
    let buffered_bytes = Arc::new(AtomicUsize::new(0));
    let (consumer_thread, watermark_thread) = spawn_polling(
        &consumer,
        &config,
        events_tx,
        cmd_rx,
        &stop,
        &buffered_bytes,
    )?;

    let shared = shared_services(&config, services, cache, &health);
    let mut coordinator = Coordinator {
        machine: Partitions::new(limits(&config), crate::clock::monotonic()),
        config,
        shared,
        commit_tx,
        cmd_tx,
        buffered_bytes,
        health: health.clone(),
        watermarks: consumer.context().watermarks.clone(),
        revocations: HashMap::new(),
        next_revocation: 0,
    };
    // Drains and commits what finished before it returns; then leave the group (the
    // revocation callback is answered at once).
    coordinator
        .run(&mut events_rx, &mut reports_rx, shutdown)
        .await;
    stop.store(true, Ordering::Relaxed);
    let answer_revocations = tokio::spawn(async move {
        while let Some(ev) = events_rx.recv().await {
            if let ConsumerEvent::Revoked { done, .. } = ev {
                let _ = done.send(());
            }
        }
    });
    let _ = tokio::task::spawn_blocking(move || consumer_thread.join()).await;
    let _ = tokio::task::spawn_blocking(move || watermark_thread.join()).await;
    answer_revocations.abort();
    drop(coordinator);
    match tokio::task::spawn_blocking(move || committer_thread.join()).await {
        Ok(Ok(result)) => result?,
        _ => tracing::warn!("Committer thread ended abnormally."),
    }
    tracing::info!("Worker stopped.");
    Ok(())
}

/// What every turn task shares: the services (the store wrapped in the one retry layer, its
/// availability wired to readiness) behind the checkpoint cache, the topics, the decode limits,
/// and the coordinator's handle on that cache.
fn shared_services<M, T, S>(
    config: &WorkerConfig,
    services: Services<M, T, S>,
    cache: Arc<CheckpointCache>,
    health: &Arc<Health>,
) -> Arc<Shared<M, T, S>>
where
    M: DecisionModel + Send + Sync + 'static,
    T: ToolGateway + Send + Sync + 'static,
    S: CheckpointStore + Send + Sync + 'static,
{
    let store_health = health.clone();
    let store = RetryingStore::new(services.store).on_availability(Arc::new(move |ok| {
        store_health.store_ok.store(ok, Ordering::Relaxed);
        store_health.publish();
    }));
    Arc::new(Shared {
        catalog: services.catalog,
        settings: services.settings,
        model: services.model,
        tools: services.tools,
        store: CachingCheckpointStore::new(store, cache.clone()),
        topics: config.topics.clone(),
        limits: DecodeLimits {
            max_payload_bytes: config.max_payload_bytes,
        },
        cache,
        #[cfg(feature = "harness")]
        fault: fault::AbortAfterSaves::new(config.fault_abort_after_saves),
    })
}

/// The start-up gauges and log line, and the alerted series at 0.
fn announce_start(config: &WorkerConfig) {
    telemetry::record_in_flight_limits(config.max_in_flight, config.max_in_flight_per_partition);
    telemetry::record_buffer_capacity(config.max_buffered_per_partition);
    tracing::info!(
        drain_budget_ms = config.drain_budget.as_millis() as u64,
        transaction_timeout_ms = config.transaction_timeout.as_millis() as u64,
        kafka_security_protocol = config
            .kafka_overrides
            .iter()
            .find(|(k, _)| k == "security.protocol")
            .map_or("PLAINTEXT", |(_, v)| v.as_str()),
        "Worker starting."
    );
    telemetry::register_alerted_series();
}

/// The Kafka side: topics created when asked, the consumer subscribed (its rebalance events go
/// to `events_tx`), the transactional producer initialised.
async fn kafka_clients(
    config: &WorkerConfig,
    events_tx: mpsc::UnboundedSender<ConsumerEvent>,
) -> Result<(Arc<consumer::WorkerConsumer>, BaseProducer), WorkerError> {
    if let Some(partitions) = config.create_topics {
        topics::create_topics_with(
            &config.brokers,
            &config.kafka_overrides,
            &config.topics,
            partitions,
        )
        .await?;
    }
    let context = consumer::context(&config.topics.inbound, events_tx, config.drain_budget);
    let consumer: Arc<consumer::WorkerConsumer> = Arc::new(
        consumer_config(config)
            .create_with_context(context)
            .map_err(kafka("consumer"))?,
    );
    consumer
        .subscribe(&[&config.topics.inbound])
        .map_err(kafka("subscribe"))?;
    let producer: BaseProducer = producer_config(config)
        .create()
        .map_err(kafka("producer"))?;
    let producer = tokio::task::spawn_blocking(move || {
        producer
            .init_transactions(Duration::from_secs(60))
            .map(|()| producer)
    })
    .await
    .map_err(WorkerError::Init)?
    .map_err(kafka("init_transactions"))?;
    Ok((consumer, producer))
}

/// The consumer's poll loop and the broker-side lag's watermark loop, each on a thread of its
/// own (librdkafka's calls block); both stop when `stop` is set.
fn spawn_polling(
    consumer: &Arc<consumer::WorkerConsumer>,
    config: &WorkerConfig,
    events_tx: mpsc::UnboundedSender<ConsumerEvent>,
    cmd_rx: std_mpsc::Receiver<ConsumerCommand>,
    stop: &Arc<AtomicBool>,
    buffered_bytes: &Arc<AtomicUsize>,
) -> Result<(std::thread::JoinHandle<()>, std::thread::JoinHandle<()>), WorkerError> {
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
            .map_err(thread("consumer"))?
    };

    // The broker-side lag's watermarks, on a thread of its own (a broker round trip each).
    let watermark_thread = {
        let (consumer, topic, stop) = (
            consumer.clone(),
            config.topics.inbound.clone(),
            stop.clone(),
        );
        let interval = config.lag_interval;
        std::thread::Builder::new()
            .name("turnstile-watermarks".into())
            .spawn(move || consumer::watermark_loop(consumer, topic, stop, interval))
            .map_err(thread("watermarks"))?
    };
    Ok((consumer_thread, watermark_thread))
}

/// The bounds and budgets the partition state machine applies.
fn limits(config: &WorkerConfig) -> Limits {
    Limits {
        max_in_flight: config.max_in_flight,
        max_in_flight_per_partition: config.max_in_flight_per_partition,
        max_buffered_per_partition: config.max_buffered_per_partition,
        commit_interval: config.commit_interval,
        drain_budget: config.drain_budget,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
