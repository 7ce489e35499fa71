//! One fault run's moving parts: its topics, the model and tool test servers, the CQL store, the
//! `turnstile run` worker processes and the background producer; at the end, the evidence (inbound
//! copy, outputs, executions, stored states) for the checker.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::FutureRecord;
use rdkafka::{Offset, TopicPartitionList};
use serde_json::Value;
use tokio::runtime::Runtime;

use super::workload::Workload;
use super::Injected;
use super::{
    Fault, FaultReport, Plan, CONFIG, INBOUND_PARTITIONS, KEYSPACE, LOG_ROOT, PROFILES, SERVE_ALL,
    STALL_TIMEOUT, TENANT,
};
use crate::chaos::checker::{self, CheckReport, Evidence, InboundCopy};
use crate::config::agents::load_catalog;
use crate::config::settings::settings_from_env;
use crate::domain::catalog::Catalog;
use crate::message::{DecodeLimits, Topics};
use crate::pipeline::decode_record;
use crate::store::cql::ScyllaCheckpointStore;
use crate::testkit::bus::{self, OutputReader};
use crate::testkit::model_server::ModelServer;
use crate::testkit::tool_server::ToolServer;
use crate::testkit::worker_process::{self, WorkerEnv};

struct Worker {
    child: Option<Child>,
    instance: String,
    /// The operations listener's port of the current incarnation.
    port: Option<u16>,
}

pub(super) struct Harness {
    pub(super) id: String,
    brokers: String,
    topics: Topics,
    group_id: String,
    exe: PathBuf,
    pub(super) log_dir: PathBuf,
    env: Vec<(String, String)>,
    workers: Vec<Worker>,
    pub(super) workload: Arc<Workload>,
    model: ModelServer,
    pub(super) tools: ToolServer,
    store: ScyllaCheckpointStore,
    pub(super) producing_done: Arc<AtomicBool>,
    produced: Arc<AtomicUsize>,
    /// Wall-clock ms the last batch was produced (0 until then).
    produced_last_ms: Arc<AtomicI64>,
    produce_error: Arc<std::sync::Mutex<Option<String>>>,
    reader: OutputReader,
    catalog: Catalog,
    /// A failed run keeps its topics for inspection.
    keep_topics: bool,
    /// Last: the servers and the store session run on it.
    rt: Runtime,
}

impl Harness {
    pub(super) fn start(fault: Fault, plan: &Plan) -> Result<Harness, String> {
        let id = bus::unique_suffix();
        let brokers = bus::brokers();
        let contact = crate::testkit::cql::contact();
        let rt = crate::testkit::runtime()?;
        let store = rt
            .block_on(crate::testkit::cql::migrated_store(&contact, KEYSPACE))
            .map_err(|e| {
                format!(
                    "the CQL store at {contact} is unreachable: {e} (run `bash scripts/services.sh up`)"
                )
            })?;
        let topics = Topics {
            inbound: format!("turnstile-chaos.{id}.turns"),
            replies: format!("turnstile-chaos.{id}.replies"),
            events: format!("turnstile-chaos.{id}.events"),
            dead_letters: format!("turnstile-chaos.{id}.dead-letters"),
        };
        rt.block_on(bus::create_topics(&brokers, &topics, INBOUND_PARTITIONS))
            .map_err(|e| e.to_string())?;
        let (model, tools) = crate::testkit::start_servers(&rt)?;
        // Longer than every profile's timeout, so a scripted timeout is a timeout.
        model.set_timeout_delay(Duration::from_secs(10));
        model.set_answer_latency(Duration::from_millis(plan.model_latency_ms));
        let workload = Workload::generate(fault, plan, &id);
        for (turn_id, s) in &workload.scripts {
            model.set_turn_script(turn_id, s);
        }
        let log_dir = Path::new(LOG_ROOT).join(format!("{}-{id}", fault.name()));
        std::fs::create_dir_all(&log_dir)
            .map_err(|e| format!("cannot create {}: {e}", log_dir.display()))?;
        let exe = worker_process::snapshot_binary(&log_dir)?;
        let (config_path, catalog) = write_run_config(&log_dir)?;
        let group_id = format!("turnstile-chaos-{id}");
        // The scale-down measurements run at the worker's production timings.
        let (session_timeout_ms, drain_budget_ms) = match fault.measures_scale_down() {
            true => (15_000, 8_000),
            false => (6_000, 2_000),
        };
        let mut env = WorkerEnv {
            log_filter: std::env::var("RUST_LOG")
                .unwrap_or_else(|_| "warn,turnstile::worker::consumer=info".into()),
            config: config_path.clone(),
            profiles: PathBuf::from(PROFILES),
            brokers: brokers.clone(),
            group_id: group_id.clone(),
            topics: topics.clone(),
            keyspace: KEYSPACE.to_owned(),
            cql_contact: contact.clone(),
            model_base_url: model.base_url(),
            tools_base_url: tools.base_url(),
            session_timeout_ms,
            drain_budget_ms,
            commit_interval_ms: Some(50),
        }
        .vars()?;
        env.extend(plan.worker_env.iter().cloned());
        let reader = OutputReader::new(
            &brokers,
            &[&topics.replies, &topics.events, &topics.dead_letters],
        )?;
        Ok(Harness {
            workers: Vec::new(),
            workload: Arc::new(workload),
            producing_done: Arc::new(AtomicBool::new(false)),
            produced: Arc::new(AtomicUsize::new(0)),
            produced_last_ms: Arc::new(AtomicI64::new(0)),
            produce_error: Arc::new(std::sync::Mutex::new(None)),
            id,
            brokers,
            topics,
            group_id,
            exe,
            log_dir,
            env,
            model,
            tools,
            store,
            reader,
            catalog,
            keep_topics: false,
            rt,
        })
    }

    /// Produces the workload in rounds spread over `over`, in the background; `steady`: in about
    /// 20 batches a second instead (a steady stream, for the scale-down measurements).
    pub(super) fn start_producing(&self, over: Duration, steady: bool) {
        let workload = self.workload.clone();
        let brokers = self.brokers.clone();
        let topic = self.topics.inbound.clone();
        let done = self.producing_done.clone();
        let produced = self.produced.clone();
        let produced_last_ms = self.produced_last_ms.clone();
        let error = self.produce_error.clone();
        self.rt.spawn(async move {
            let producer = match bus::turn_producer(&brokers) {
                Ok(p) => p,
                Err(e) => {
                    *error.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                    done.store(true, Ordering::SeqCst);
                    return;
                }
            };
            let batches = if steady {
                (over.as_millis() as usize / 50).clamp(1, workload.records.len().max(1))
            } else {
                workload.rounds.max(1)
            };
            let per_batch = workload.records.len().div_ceil(batches);
            let pause = over / batches as u32;
            for chunk in workload.records.chunks(per_batch.max(1)) {
                let mut pending = Vec::with_capacity(chunk.len());
                for (key, payload) in chunk {
                    let mut record: FutureRecord<'_, [u8], [u8]> = FutureRecord::to(&topic);
                    if let Some(k) = key {
                        record = record.key(k.as_slice());
                    }
                    if let Some(p) = payload {
                        record = record.payload(p.as_slice());
                    }
                    pending.push(producer.send(record, Duration::from_secs(300)));
                }
                for r in futures_join(pending).await {
                    match r {
                        Ok(_) => {
                            produced.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(e) => {
                            *error.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                        }
                    }
                }
                produced_last_ms.store(crate::clock::now_ms(), Ordering::SeqCst);
                tokio::time::sleep(pause).await;
            }
            done.store(true, Ordering::SeqCst);
        });
    }

    pub(super) fn spawn(
        &mut self,
        w: usize,
        abort_after_saves: Option<usize>,
    ) -> Result<(), String> {
        self.spawn_with(w, abort_after_saves, &[])
    }

    /// [`Harness::spawn`] with extra environment for this worker.
    pub(super) fn spawn_with(
        &mut self,
        w: usize,
        abort_after_saves: Option<usize>,
        extra: &[(String, String)],
    ) -> Result<(), String> {
        while self.workers.len() <= w {
            let n = self.workers.len();
            self.workers.push(Worker {
                child: None,
                instance: format!("chaos-{}-w{n}", self.id),
                port: None,
            });
        }
        let port = worker_process::free_port()?;
        let log_path = self.log_dir.join(format!("worker-{w}.log"));
        let mut env = self.env.clone();
        env.push(("TURNSTILE_LISTEN".into(), format!("127.0.0.1:{port}")));
        env.push((
            "TURNSTILE_INSTANCE_ID".into(),
            self.workers[w].instance.clone(),
        ));
        if let Some(n) = abort_after_saves {
            env.push(("TURNSTILE_FAULT_ABORT_AFTER_SAVES".into(), n.to_string()));
        }
        env.extend(extra.iter().cloned());
        let banner = format!(
            "chaos: starting worker {w} on port {port} (abort after saves: {abort_after_saves:?})"
        );
        let child = worker_process::spawn(&self.exe, &env, &log_path, &banner)?;
        self.workers[w].child = Some(child);
        self.workers[w].port = Some(port);
        Ok(())
    }

    /// When the last inbound batch was produced, once production ended.
    fn production_end_ms(&self) -> Option<i64> {
        Some(self.produced_last_ms.load(Ordering::SeqCst)).filter(|ms| *ms > 0)
    }

    /// Worker `w` answers `/readyz` with 200.
    pub(super) fn ready(&self, w: usize) -> bool {
        self.workers
            .get(w)
            .and_then(|x| x.port)
            .is_some_and(worker_process::readyz)
    }

    /// Worker `w`'s log (all its incarnations) contains `text`.
    pub(super) fn log_contains(&self, w: usize, text: &str) -> bool {
        std::fs::read_to_string(self.log_dir.join(format!("worker-{w}.log")))
            .is_ok_and(|t| t.contains(text))
    }

    /// Reads the outputs for `d` (every arrival stamped as it is polled).
    pub(super) fn watch(&mut self, d: Duration) {
        self.reader.poll_for(d);
    }

    /// Sends SIGTERM to worker `w` without waiting.
    pub(super) fn signal_term(&self, w: usize) {
        if let Some(child) = self.workers.get(w).and_then(|x| x.child.as_ref()) {
            worker_process::signal_term(child);
        }
    }

    /// Whether worker `w` has exited (reaped and forgotten then).
    pub(super) fn reap_if_exited(&mut self, w: usize) -> bool {
        let Some(worker) = self.workers.get_mut(w) else {
            return true;
        };
        let exited = match worker.child.as_mut() {
            Some(c) => !matches!(c.try_wait(), Ok(None)),
            None => true,
        };
        if exited {
            worker.child = None;
        }
        exited
    }

    pub(super) fn alive(&mut self, w: usize) -> bool {
        match self.workers.get_mut(w).and_then(|x| x.child.as_mut()) {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// SIGKILL and reap.
    pub(super) fn kill(&mut self, w: usize) {
        if let Some(mut child) = self.workers.get_mut(w).and_then(|x| x.child.take()) {
            worker_process::kill(&mut child);
        }
    }

    /// SIGTERM (drain, leave the group), SIGKILL after 15 s.
    pub(super) fn stop(&mut self, w: usize) {
        if let Some(mut child) = self.workers.get_mut(w).and_then(|x| x.child.take()) {
            worker_process::terminate(&mut child, Duration::from_secs(15));
        }
    }

    /// Distinct inbound records answered so far: turns with a reply, records with a dead letter.
    fn answered(&self) -> usize {
        let mut turns = std::collections::HashSet::new();
        let mut dead = std::collections::HashSet::new();
        for m in &self.reader.seen {
            if m.topic == self.topics.dead_letters {
                let original = m.payload.get("original");
                let field = |k: &str| original.and_then(|o| o.get(k)).and_then(Value::as_i64);
                dead.insert((field("partition"), field("offset")));
            } else if m.topic == self.topics.replies {
                if let Some(t) = m.turn_id.as_deref() {
                    turns.insert(t.to_owned());
                }
            }
        }
        turns.len() + dead.len()
    }

    /// How long until one more record is answered than now (`None` past `limit`).
    pub(super) fn time_to_next_answer(&mut self, limit: Duration) -> Option<Duration> {
        let from = Instant::now();
        let before = self.answered();
        while from.elapsed() < limit {
            self.reader.poll_for(Duration::from_millis(100));
            if self.answered() > before {
                return Some(from.elapsed());
            }
        }
        None
    }

    /// Waits until every produced record is answered, or nothing new arrives for a while; keeps
    /// a crashed worker 0 running (a worker that exits on its own is restarted, and counted).
    pub(super) fn wait_until_answered(&mut self) {
        let total = self.workload.records.len();
        let mut last = 0;
        let mut last_change = Instant::now();
        loop {
            self.reader.poll_for(Duration::from_millis(500));
            let n = self.answered();
            if n != last {
                last = n;
                last_change = Instant::now();
            }
            let done = self.producing_done.load(Ordering::SeqCst);
            if done && n >= total {
                break;
            }
            if last_change.elapsed() > STALL_TIMEOUT {
                eprintln!(
                    "  no progress for {} s ({n}/{total} answered); checking what there is",
                    STALL_TIMEOUT.as_secs()
                );
                break;
            }
            if !self.alive(0) {
                eprintln!("  worker 0 exited on its own; restarting it");
                self.kill(0);
                if let Err(e) = self.spawn(0, None) {
                    eprintln!("  {e}");
                    break;
                }
            }
        }
    }

    /// Stops the workers, reads what they left (outputs, inbound copy, stored states) and checks
    /// it against the serial replay.
    pub(super) fn finish(
        mut self,
        fault: Fault,
        started: Instant,
        injected: &Injected,
    ) -> FaultReport {
        let production_end_ms = crate::clock::now_ms();
        self.stop_all_and_drain_outputs();
        let inbound = read_inbound(&self.brokers, &self.topics.inbound).unwrap_or_else(|e| {
            eprintln!("  cannot read the inbound topic: {e}");
            Vec::new()
        });
        if let Some(e) = self
            .produce_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
        {
            eprintln!("  a produce failed: {e}");
        }
        let stall = injected.signal.clone().map(|mut signal| {
            signal.production_end_ms = self.production_end_ms().unwrap_or(production_end_ms);
            super::scale_down::Stall::measure(
                signal,
                &self.env,
                &self.reader,
                &inbound,
                &self.topics,
            )
        });
        let states = self.stored_states();
        let catalog = self.catalog.clone();
        let settings = settings_from_env(|_| None).unwrap_or_default();
        let executions = self.tools.executions();
        let evidence = Evidence {
            inbound_topic: &self.topics.inbound,
            replies_topic: &self.topics.replies,
            events_topic: &self.topics.events,
            dead_letters_topic: &self.topics.dead_letters,
            inbound: &inbound,
            outputs: &self.reader.seen,
            executions: &executions,
            states: &states,
            model_scripts: &self.workload.scripts,
            limits: DecodeLimits::default(),
            catalog: &catalog,
            settings: &settings,
        };
        let mut check = self.rt.block_on(checker::check(&evidence));
        let valid = self.workload.valid;
        self.check_counts(&mut check);
        eprintln!(
            "  partition assignments per worker (from the logs): {:?}",
            self.assignments()
        );
        if !check.dead_letter_reasons.is_empty() {
            eprintln!("  dead letters by reason: {:?}", check.dead_letter_reasons);
        }
        // Real work: every valid turn answered; tools executed about twice per four turns (fewer
        // when model faults stop some transactions from starting).
        let min_executions = if fault == Fault::ModelFaults {
            valid / 8
        } else {
            valid / 4
        };
        self.keep_topics = !check.passed(valid, min_executions.max(1));
        FaultReport {
            fault,
            run_id: self.id.clone(),
            produced_valid: valid,
            produced_hostile: self.workload.hostile.len(),
            model_faulted_turns: self.workload.model_faulted,
            tool_bursts: injected.tool_bursts,
            model_requests: self.model.requests().len(),
            kills: injected.kills,
            restarts: injected.restarts,
            resumed_after: injected.resumed_after,
            wall: started.elapsed(),
            check,
            min_replies: valid,
            min_executions: min_executions.max(1),
            log_dir: self.log_dir.clone(),
            stall,
        }
    }

    /// Stops every worker, then reads the outputs until nothing new arrives for 3 s.
    fn stop_all_and_drain_outputs(&mut self) {
        for w in 0..self.workers.len() {
            self.stop(w);
        }
        let mut quiet = Instant::now();
        while quiet.elapsed() < Duration::from_secs(3) {
            if self.reader.poll_for(Duration::from_millis(500)) > 0 {
                quiet = Instant::now();
            }
        }
    }

    /// Every conversation's stored state (`None`: no row, or one that does not decode).
    fn stored_states(&self) -> HashMap<String, Option<crate::domain::state::AgentState>> {
        let mut states = HashMap::new();
        for id in &self.workload.identities {
            let row = self.rt.block_on(self.store.load_row(id));
            let state = match row {
                Ok(Some(r)) => decode_record(&r.state, r.in_flight.as_deref())
                    .ok()
                    .map(|(s, _)| s),
                _ => None,
            };
            states.insert(id.key(), state);
        }
        states
    }

    /// The generator knows what it produced: the decoder must agree on both counts.
    fn check_counts(&self, check: &mut CheckReport) {
        let valid = self.workload.valid;
        if check.valid_turns != valid {
            check.lost.push(format!(
                "the inbound topic holds {} valid turns, the workload produced {valid}",
                check.valid_turns
            ));
        }
        if check.refused_records != self.workload.hostile.len() {
            check.not_dead_lettered.push(format!(
                "the decoder refuses {} inbound records, the workload produced {} hostile ones",
                check.refused_records,
                self.workload.hostile.len()
            ));
        }
    }

    /// Partition assignments per worker, counted in the workers' logs.
    fn assignments(&self) -> Vec<usize> {
        (0..self.workers.len())
            .map(|w| {
                let text = std::fs::read_to_string(self.log_dir.join(format!("worker-{w}.log")))
                    .unwrap_or_default();
                text.matches("Partitions assigned").count()
            })
            .collect()
    }
}

/// Writes the run's agents file into `log_dir` ([`CONFIG`], its assistant restricted to the run's
/// tenant) and loads it.
fn write_run_config(log_dir: &Path) -> Result<(PathBuf, Catalog), String> {
    let example = std::fs::read_to_string(CONFIG).map_err(|e| format!("{CONFIG}: {e}"))?;
    if !example.contains(SERVE_ALL) {
        return Err(format!("{CONFIG} has no `{SERVE_ALL}` rule to restrict"));
    }
    let config_path = log_dir.join("agents.yaml");
    std::fs::write(
        &config_path,
        example.replace(
            SERVE_ALL,
            &format!(r#"- {{tenant: "{TENANT}", tools: "*"}}"#),
        ),
    )
    .map_err(|e| format!("{}: {e}", config_path.display()))?;
    let catalog =
        load_catalog(&config_path).map_err(|e| format!("{}: {e}", config_path.display()))?;
    Ok((config_path, catalog))
}

impl Drop for Harness {
    fn drop(&mut self) {
        for w in 0..self.workers.len() {
            self.kill(w);
        }
        // The binary's hard link would keep an old build alive on disk after the next one.
        let _ = std::fs::remove_file(&self.exe);
        if self.keep_topics {
            eprintln!(
                "  topics kept for inspection: {}, {}, {}, {}",
                self.topics.inbound,
                self.topics.replies,
                self.topics.events,
                self.topics.dead_letters
            );
            return;
        }
        let names = [
            self.topics.inbound.clone(),
            self.topics.replies.clone(),
            self.topics.events.clone(),
            self.topics.dead_letters.clone(),
        ];
        let brokers = self.brokers.clone();
        self.rt.block_on(async move {
            let admin: Result<
                rdkafka::admin::AdminClient<rdkafka::client::DefaultClientContext>,
                _,
            > = ClientConfig::new()
                .set("bootstrap.servers", &brokers)
                .create();
            if let Ok(admin) = admin {
                let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                let _ = admin
                    .delete_topics(&refs, &rdkafka::admin::AdminOptions::new())
                    .await;
            }
        });
        let _ = self.group_id.len();
    }
}

async fn futures_join<T>(futures: Vec<T>) -> Vec<Result<(), String>>
where
    T: std::future::Future<Output = rdkafka::producer::future_producer::OwnedDeliveryResult>,
{
    let mut out = Vec::with_capacity(futures.len());
    for f in futures {
        out.push(f.await.map(|_| ()).map_err(|(e, _)| e.to_string()));
    }
    out
}

/// Every record of the inbound topic, from the beginning to the high watermark.
fn read_inbound(brokers: &str, topic: &str) -> Result<Vec<InboundCopy>, String> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set(
            "group.id",
            format!("chaos-inbound-{}", bus::unique_suffix()),
        )
        .set("enable.auto.commit", "false")
        .set("fetch.message.max.bytes", "2097152")
        .create()
        .map_err(|e| e.to_string())?;
    let meta = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .map_err(|e| e.to_string())?;
    let mut tpl = TopicPartitionList::new();
    let mut highs = HashMap::new();
    for t in meta.topics() {
        for p in t.partitions() {
            let (_, high) = consumer
                .fetch_watermarks(topic, p.id(), Duration::from_secs(10))
                .map_err(|e| e.to_string())?;
            highs.insert(p.id(), high);
            tpl.add_partition_offset(topic, p.id(), Offset::Beginning)
                .map_err(|e| e.to_string())?;
        }
    }
    consumer.assign(&tpl).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    let mut next: HashMap<i32, i64> = HashMap::new();
    let until = Instant::now() + Duration::from_secs(120);
    while Instant::now() < until
        && highs
            .iter()
            .any(|(p, h)| next.get(p).copied().unwrap_or(0) < *h)
    {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            next.insert(m.partition(), m.offset() + 1);
            out.push(InboundCopy {
                partition: m.partition(),
                offset: m.offset(),
                key: m.key().map(<[u8]>::to_vec),
                payload: m.payload().map(<[u8]>::to_vec),
                timestamp_ms: m.timestamp().to_millis(),
            });
        }
    }
    Ok(out)
}
