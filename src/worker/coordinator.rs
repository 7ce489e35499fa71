//! The coordinator: the worker's one `select!` loop. It turns what happens (consumer events,
//! finished turns, lease epochs, the committer's reports, ticks, shutdown) into inputs of the
//! partition state machine ([`Partitions`]) with the time, and carries out the commands it
//! answers: start a turn task, take a lease, pause or resume a partition, hand a transaction to
//! the committer, answer a revocation, steer the checkpoint cache, publish gauges. It decides
//! nothing about partitions itself.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use metrics::{counter, gauge, histogram};
use tokio::sync::mpsc;

use super::committer::broker_lag;
use super::consumer::{ConsumerCommand, ConsumerEvent, SharedWatermarks};
use super::partitions::{CacheCommand, Command, Finished, Input, Lag, Partitions, Start};
use super::turn::{process_record, Shared};
use super::{Health, WorkerConfig};
use crate::clock;
use crate::ports::{CheckpointStore, DecisionModel, StoreError, ToolGateway};
use crate::telemetry;

/// How often the loop wakes with nothing to do: revocation and drain budgets, gauges.
const TICK: Duration = Duration::from_millis(100);

type EpochReport = (i32, Result<i64, StoreError>);

pub(super) struct Coordinator<M, T, S> {
    pub(super) config: WorkerConfig,
    pub(super) shared: Arc<Shared<M, T, S>>,
    pub(super) machine: Partitions,
    pub(super) commit_tx: std_mpsc::Sender<super::partitions::Transaction>,
    pub(super) cmd_tx: std_mpsc::Sender<ConsumerCommand>,
    pub(super) buffered_bytes: Arc<AtomicUsize>,
    pub(super) health: Arc<Health>,
    /// The watermarks the consumer's thread reads (the broker-side lag); nothing else of the
    /// consumer, so the loop runs in tests with no Kafka.
    pub(super) watermarks: SharedWatermarks,
    /// Revocations the consumer thread waits on, by the id the machine answers.
    pub(super) revocations: HashMap<u64, std_mpsc::SyncSender<()>>,
    pub(super) next_revocation: u64,
}

/// The channels the turn and lease tasks report on.
struct Returns {
    done_tx: mpsc::UnboundedSender<Finished>,
    epoch_tx: mpsc::UnboundedSender<EpochReport>,
}

impl<M, T, S> Coordinator<M, T, S>
where
    M: DecisionModel + Send + Sync + 'static,
    T: ToolGateway + Send + Sync + 'static,
    S: CheckpointStore + Send + Sync + 'static,
{
    /// The loop: until `shutdown`, then until the machine has drained and flushed (or the
    /// consumer is gone). Pending revocations are answered on the way out.
    pub(super) async fn run(
        &mut self,
        events_rx: &mut mpsc::UnboundedReceiver<ConsumerEvent>,
        reports_rx: &mut mpsc::UnboundedReceiver<Input>,
        shutdown: impl std::future::Future<Output = ()>,
    ) {
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<Finished>();
        let (epoch_tx, mut epoch_rx) = mpsc::unbounded_channel::<EpochReport>();
        let returns = Returns { done_tx, epoch_tx };
        let mut tick = tokio::time::interval(TICK);
        // Wakes when the next transaction is due (every commit interval).
        let commit_due = tokio::time::sleep(Duration::ZERO);
        tokio::pin!(commit_due, shutdown);
        let mut armed: Option<Instant> = None;
        let mut stopping = false;
        while !self.machine.stopped() {
            let input = tokio::select! {
                ev = events_rx.recv() => match ev {
                    Some(ev) => match self.on_event(ev) {
                        Some(input) => input,
                        None => continue,
                    },
                    None => break,
                },
                Some(f) = done_rx.recv() => self.on_finished(f),
                Some((p, epoch)) = epoch_rx.recv() => self.on_epoch(p, epoch),
                Some(report) = reports_rx.recv() => report,
                _ = tick.tick() => Input::Tick,
                _ = &mut commit_due, if armed.is_some() => {
                    armed = None;
                    Input::Tick
                }
                _ = &mut shutdown, if !stopping => {
                    tracing::info!("Shutdown requested; draining in-flight turns.");
                    stopping = true;
                    Input::Shutdown
                }
            };
            let commands = self.machine.on(input, clock::monotonic());
            for command in commands {
                self.carry_out(command, &returns);
            }
            let due = self.machine.next_commit_at();
            if due != armed {
                armed = due;
                if let Some(at) = due {
                    commit_due
                        .as_mut()
                        .reset(tokio::time::Instant::from_std(at));
                }
            }
        }
        for (_, done) in self.revocations.drain() {
            let _ = done.send(());
        }
    }

    /// A consumer event as the machine's input (`None`: nothing for it).
    fn on_event(&mut self, ev: ConsumerEvent) -> Option<Input> {
        match ev {
            ConsumerEvent::Assigned { partition, offsets } => {
                self.health.joined.store(true, Ordering::Relaxed);
                self.health.publish();
                Some(Input::Assigned { partition, offsets })
            }
            ConsumerEvent::Revoked { partitions, done } => {
                self.next_revocation += 1;
                let id = self.next_revocation;
                self.revocations.insert(id, done);
                Some(Input::Revoked { partitions, id })
            }
            ConsumerEvent::Joined => {
                self.health.joined.store(true, Ordering::Relaxed);
                self.health.publish();
                None
            }
            ConsumerEvent::Record(record) => Some(Input::Record(record)),
        }
    }

    fn on_epoch(&mut self, partition: i32, epoch: Result<i64, StoreError>) -> Input {
        match epoch {
            Ok(e) => {
                self.health.store_ok.store(true, Ordering::Relaxed);
                self.health.publish();
                tracing::info!(partition, epoch = e, "Partition lease taken.");
                Input::Epoch {
                    partition,
                    epoch: Some(e),
                }
            }
            Err(err) => {
                self.health.store_ok.store(false, Ordering::Relaxed);
                self.health.publish();
                tracing::warn!(partition, error = %err, "Cannot take the partition lease; retrying.");
                Input::Epoch {
                    partition,
                    epoch: None,
                }
            }
        }
    }

    fn on_finished(&mut self, f: Finished) -> Input {
        counter!(telemetry::TURNS_TOTAL, "outcome" => f.outcome).increment(1);
        if f.fenced {
            counter!(telemetry::FENCED_WRITES_TOTAL).increment(1);
        }
        Input::Finished(f)
    }

    fn carry_out(&mut self, command: Command, returns: &Returns) {
        match command {
            Command::Start(start) => self.start(start, &returns.done_tx),
            Command::AcquireEpoch { partition, after } => {
                self.acquire_epoch(partition, after, &returns.epoch_tx);
            }
            Command::Pause(ps) => {
                let _ = self.cmd_tx.send(ConsumerCommand::Pause(ps));
            }
            Command::Resume(ps) => {
                let _ = self.cmd_tx.send(ConsumerCommand::Resume(ps));
            }
            Command::ReleaseBytes(size) => release_bytes(&self.buffered_bytes, size),
            Command::Dropped { partition, records } => tracing::info!(
                partition,
                dropped = records,
                "Dropped buffered records of a revoked or stopping partition."
            ),
            Command::Commit(transaction) => {
                let _ = self.commit_tx.send(transaction);
            }
            Command::AnswerRevocation(id) => {
                if let Some(done) = self.revocations.remove(&id) {
                    let _ = done.send(());
                }
            }
            Command::Cache(order) => self.steer_cache(order),
            Command::Gauges {
                in_flight,
                partitions,
            } => {
                gauge!(telemetry::TURNS_IN_FLIGHT).set(in_flight as f64);
                gauge!(telemetry::PARTITIONS_ASSIGNED).set(partitions as f64);
                self.health
                    .assigned_partitions
                    .store(partitions, Ordering::Relaxed);
                self.health.publish();
            }
            Command::Lag(lines) => self.record_lag(&lines),
            Command::ClearLag(p) => {
                gauge!(telemetry::PARTITION_LAG, "partition" => p.to_string()).set(0.0);
                gauge!(telemetry::CONSUMER_LAG_RECORDS, "partition" => p.to_string()).set(0.0);
            }
            Command::Stop => {}
        }
    }

    fn steer_cache(&self, order: CacheCommand) {
        let cache = &self.shared.cache;
        match order {
            CacheCommand::Forget(p, why) => cache.forget_partition(p, why),
            CacheCommand::Suspend => cache.suspend(),
            CacheCommand::Resume => cache.resume(),
            CacheCommand::InFlight(n, max) => cache.set_in_flight(n, max),
        }
    }

    /// A turn's task: its bytes leave the fetch buffer, the pipeline runs, its end is reported.
    fn start(&self, start: Start, done_tx: &mpsc::UnboundedSender<Finished>) {
        release_bytes(&self.buffered_bytes, start.record.size());
        let shared = self.shared.clone();
        let tx = done_tx.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let finished = process_record(&shared, start).await;
            histogram!(telemetry::TURN_DURATION_SECONDS).record(started.elapsed().as_secs_f64());
            let _ = tx.send(finished);
        });
    }

    fn acquire_epoch(
        &self,
        partition: i32,
        after: Duration,
        epoch_tx: &mpsc::UnboundedSender<EpochReport>,
    ) {
        let shared = self.shared.clone();
        let tx = epoch_tx.clone();
        let topic = self.config.topics.inbound.clone();
        let owner = self.config.instance_id.clone();
        tokio::spawn(async move {
            if !after.is_zero() {
                tokio::time::sleep(after).await;
            }
            let r = shared.store.acquire_epoch(&topic, partition, &owner).await;
            let _ = tx.send((partition, r));
        });
    }

    /// Per held partition: `turnstile_partition_lag` (delivered, unfinished records), the
    /// committed offset, and the broker-side lag against the last watermarks read.
    fn record_lag(&self, lines: &[Lag]) {
        let watermarks = self
            .watermarks
            .lock()
            .map(|w| w.clone())
            .unwrap_or_default();
        for line in lines {
            let label = line.partition.to_string();
            gauge!(telemetry::PARTITION_LAG, "partition" => label.clone())
                .set(line.in_progress as f64);
            gauge!(telemetry::CONSUMER_COMMITTED_OFFSET, "partition" => label.clone())
                .set(line.committed as f64);
            if let Some(w) = watermarks.get(&line.partition) {
                gauge!(telemetry::CONSUMER_LAG_RECORDS, "partition" => label).set(broker_lag(
                    w.high,
                    w.low,
                    line.committed,
                )
                    as f64);
            }
        }
    }
}

fn release_bytes(buffered: &AtomicUsize, size: usize) {
    let _ = buffered.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
        Some(b.saturating_sub(size))
    });
}

#[cfg(test)]
mod tests {
    //! The loop with no Kafka: consumer events in, the committer's hand-over out, paused time.

    use std::collections::BTreeMap;
    use std::path::Path;

    use super::super::consumer::FetchedRecord;
    use super::super::offsets::PartitionOffsets;
    use super::super::partitions::Transaction;
    use super::super::{limits, shared_services, Services};
    use super::*;
    use crate::domain::catalog::Settings;
    use crate::model::scripted::{ModelScript, ScriptedModel};
    use crate::store::{CheckpointCache, InMemoryCheckpointStore};
    use crate::tool::ScriptedTools;

    type Loop = Coordinator<ScriptedModel, ScriptedTools, InMemoryCheckpointStore>;

    /// A coordinator over the in-memory store, a model with no answers (every turn falls back)
    /// and no tools; the receiver gets what it hands to the committer.
    fn coordinator(config: WorkerConfig) -> (Loop, std_mpsc::Receiver<Transaction>) {
        let catalog = crate::config::agents::load_catalog(Path::new("config/agents.example.yaml"))
            .expect("the example configuration");
        let services = Services {
            catalog: Arc::new(catalog),
            settings: Arc::new(Settings::default()),
            model: ScriptedModel::new(ModelScript::default()),
            tools: ScriptedTools::new(BTreeMap::new()),
            store: InMemoryCheckpointStore::new(),
        };
        let health = Arc::new(Health::default());
        let cache = Arc::new(CheckpointCache::new(1 << 20));
        let shared = shared_services(&config, services, cache, &health);
        let (commit_tx, commit_rx) = std_mpsc::channel();
        let (cmd_tx, _) = std_mpsc::channel();
        let coordinator = Coordinator {
            machine: Partitions::new(limits(&config), clock::monotonic()),
            config,
            shared,
            commit_tx,
            cmd_tx,
            buffered_bytes: Arc::new(AtomicUsize::new(0)),
            health,
            watermarks: SharedWatermarks::default(),
            revocations: HashMap::new(),
            next_revocation: 0,
        };
        (coordinator, commit_rx)
    }

    fn record(offset: i64, text: &str) -> FetchedRecord {
        let payload = serde_json::json!({
            "turn_id": format!("u{offset}"), "tenant_id": "t1", "agent_id": "retail-bot",
            "session_id": "s1", "locale": "en", "channel": "test", "text": text,
        });
        FetchedRecord {
            partition: 0,
            offset,
            key: Some(b"t1/retail-bot/s1".to_vec()),
            payload: serde_json::to_vec(&payload).ok(),
            timestamp_ms: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_finished_turn_is_handed_over_when_the_commit_interval_is_due_and_shutdown_drains() {
        let config = WorkerConfig {
            commit_interval: Duration::from_secs(5),
            ..WorkerConfig::default()
        };
        let (mut coordinator, commit_rx) = coordinator(config);
        let (events_tx, mut events_rx) = mpsc::unbounded_channel();
        let (reports_tx, mut reports_rx) = mpsc::unbounded_channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let running = tokio::spawn(async move {
            let shutdown = async {
                let _ = stop_rx.await;
            };
            coordinator
                .run(&mut events_rx, &mut reports_rx, shutdown)
                .await;
            coordinator
        });
        let offsets = PartitionOffsets::from_commit(-1, "");
        events_tx
            .send(ConsumerEvent::Assigned {
                partition: 0,
                offsets,
            })
            .expect("the loop runs");
        events_tx
            .send(ConsumerEvent::Record(record(0, "hi")))
            .expect("the loop runs");

        // The lease is taken and the turn runs at once; the transaction waits for the interval.
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(
            commit_rx.try_recv().is_err(),
            "handed over before it was due"
        );
        tokio::time::sleep(Duration::from_secs(4)).await;
        let transaction = commit_rx.try_recv().expect("handed over once due");
        assert_eq!(transaction.turns.len(), 1);
        assert_eq!(transaction.turns[0].offset, 0);
        assert!(!transaction.turns[0].outputs.is_empty(), "the turn's reply");
        assert_eq!(
            transaction
                .offsets
                .iter()
                .map(|o| (o.partition, o.offset))
                .collect::<Vec<_>>(),
            [(0, 1)],
            "the next offset to read"
        );

        // Shutdown drains: the loop ends only once the transaction in flight has ended.
        stop_tx.send(()).expect("the loop runs");
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(
            !running.is_finished(),
            "stopped with a transaction in flight"
        );
        reports_tx
            .send(Input::TransactionEnded {
                transaction,
                committed: true,
            })
            .expect("the loop runs");
        let coordinator = tokio::time::timeout(Duration::from_secs(60), running)
            .await
            .expect("the loop stops")
            .expect("no panic");
        assert!(coordinator.machine.stopped());
    }
}
