//! The worker phases: `turnstile run` as a child process, driven by the load generator
//! (`worker`, `baseline`), or started on a backlog (`backlog`).

use std::path::PathBuf;
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::producer::FutureRecord;

use turnstile::message::Topics;
use turnstile::testkit::cql::contact as cql_contact;
use turnstile::testkit::worker_process::{self, http_get, WorkerEnv};

use crate::args::{Args, DecisionModel};
use crate::io::PhaseIo;
use crate::measure::{
    cpu_seconds, decisions_breakdown, health, machine_cpu, metric_sum, metric_sum_where,
    model_calls_per_turn, sample, save_metrics, status_kb, task_switches,
};
use crate::reader::Reader;
use crate::report::{fill_load, Row};
use crate::servers::{manifest, new_topics, Fixture};
use crate::workload::{bus, drive, tag, AGENT, TENANT};

struct Worker {
    child: Child,
    listen: String,
}

impl Worker {
    fn spawn(
        args: &Args,
        fx: &Fixture,
        phase: &str,
        per_partition: usize,
        topics: &Topics,
    ) -> Result<Worker, String> {
        let listen = format!("127.0.0.1:{}", worker_process::free_port()?);
        let log = fx
            .log_dir
            .join(format!("{phase}-{}.log", bus::unique_suffix()));
        let suffix = bus::unique_suffix();
        let profiles = match args.decision_model {
            DecisionModel::Scripted => "config/profiles.example.yaml",
            DecisionModel::Embeddings => "config/profiles.embeddings.yaml",
        };
        let mut env = WorkerEnv {
            // Per-turn info logs are CPU the benchmark would charge to the engine.
            log_filter: "warn".into(),
            config: manifest("config/agents.example.yaml"),
            profiles: manifest(profiles),
            brokers: bus::brokers(),
            group_id: format!("bench-{phase}-{suffix}"),
            topics: topics.clone(),
            keyspace: fx.keyspace.clone(),
            cql_contact: cql_contact(),
            // Also with embeddings: a chat call would land on the test server and be counted.
            model_base_url: fx.model.base_url(),
            tools_base_url: fx.tools.base_url(),
            session_timeout_ms: 10_000,
            drain_budget_ms: 3_000,
            commit_interval_ms: args.commit_interval_ms,
        }
        .vars()?;
        for (k, v) in [
            ("TURNSTILE_INSTANCE_ID", format!("bench-{phase}-{suffix}")),
            (
                "TURNSTILE_MAX_IN_FLIGHT_PER_PARTITION",
                per_partition.to_string(),
            ),
            ("TURNSTILE_MAX_IN_FLIGHT", args.max_in_flight.to_string()),
            ("TURNSTILE_LISTEN", listen.clone()),
        ] {
            env.push((k.to_owned(), v));
        }
        if let Some(e) = &fx.embeddings {
            env.push(("TURNSTILE_EMBEDDINGS_BASE_URL".into(), e.base_url.clone()));
            // The examples' vectors from disk: a phase would otherwise start by re-embedding
            // them all on the one-thread server.
            env.push((
                "TURNSTILE_EMBEDDINGS_CACHE_DIR".into(),
                manifest(".cache/embeddings").display().to_string(),
            ));
        }
        let bin = args
            .worker_bin
            .clone()
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_turnstile")));
        let child = worker_process::spawn(&bin, &env, &log, &format!("bench phase {phase}"))
            .map_err(|e| {
                format!("{e} (cargo bench builds it; or `cargo build --release --bin turnstile`)")
            })?;
        Ok(Worker { child, listen })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn metrics(&self) -> String {
        http_get(&self.listen, "/metrics")
            .map(|(_, b)| b)
            .unwrap_or_default()
    }

    /// Until `/readyz` answers 200 and every partition is assigned.
    async fn wait_ready(&mut self, partitions: i32) -> Result<(), String> {
        let until = Instant::now() + Duration::from_secs(120);
        while Instant::now() < until {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("worker exited during start-up: {status}"));
            }
            let listen = self.listen.clone();
            let (ready, metrics) = tokio::task::spawn_blocking(move || {
                (
                    http_get(&listen, "/readyz").map(|x| x.0),
                    http_get(&listen, "/metrics").map(|x| x.1),
                )
            })
            .await
            .unwrap_or((None, None));
            let assigned = metrics
                .map(|m| metric_sum(&m, "turnstile_partitions_assigned"))
                .unwrap_or(0.0);
            if ready == Some(200) && assigned >= f64::from(partitions) {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        Err("worker not ready within 120 s".into())
    }

    fn stop(mut self) {
        worker_process::terminate(&mut self.child, Duration::from_secs(20));
    }
}

impl Drop for Worker {
    /// A failed phase must not leave a worker consuming in the background.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            worker_process::kill(&mut self.child);
        }
    }
}

pub async fn worker_phase(
    args: &Args,
    fx: &Fixture,
    phase: &str,
    per_partition: usize,
) -> Result<Row, String> {
    let topics = new_topics(phase, args.partitions).await?;
    let reader = Reader::start(&topics)?;
    let mut worker = Worker::spawn(args, fx, phase, per_partition, &topics)?;
    worker.wait_ready(args.partitions).await?;
    fx.model.clear_requests();
    let executions_before = fx.tools.executions().len();
    let calls_before = fx.tools.calls().len();
    let cpu0 = cpu_seconds(worker.pid(), fx.ticks).unwrap_or(0.0);
    let bench0 = cpu_seconds(std::process::id(), fx.ticks).unwrap_or(0.0);
    let switches0 = task_switches(worker.pid());
    let machine0 = machine_cpu();
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample(worker.pid(), worker.listen.clone(), stop.clone());
    eprintln!(
        "[{phase}] worker ready (pid {}, metrics http://{}/metrics); driving {} conversations",
        worker.pid(),
        worker.listen,
        args.conversations
    );
    let load = drive(
        args,
        phase,
        &topics.inbound,
        &fx.producer,
        &reader,
        &fx.model,
    )
    .await;
    let cpu1 = cpu_seconds(worker.pid(), fx.ticks).unwrap_or(cpu0);
    let bench1 = cpu_seconds(std::process::id(), fx.ticks).unwrap_or(bench0);
    let switches1 = task_switches(worker.pid());
    let machine1 = machine_cpu();
    stop.store(true, Ordering::Relaxed);
    let samples = sampler.join().unwrap_or_default();
    let metrics = worker.metrics();
    let hwm = status_kb(worker.pid(), "VmHWM:");
    let seen = reader.stop();
    let (unmatched, dead) = (seen.unmatched, seen.dead_letters);
    worker.stop();

    let mut row = Row {
        phase: phase.into(),
        in_flight_cap: args.in_flight_cap(per_partition),
        ..Row::default()
    };
    let answered_by_kind = load.answered_by_kind.clone();
    fill_load(&mut row, load);
    let worker_turns = metric_sum(&metrics, "turnstile_turns_total").max(1.0);
    row.cpu_us_per_turn = Some((cpu1 - cpu0) * 1e6 / worker_turns);
    row.bench_cpu_us_per_turn = Some((bench1 - bench0) * 1e6 / (row.turns.max(1) as f64));
    row.peak_rss_mb = hwm.map(|k| k as f64 / 1024.0);
    let model_calls = metric_sum(&metrics, "turnstile_model_requests_total");
    row.model_calls_per_turn = Some(model_calls_per_turn(args, &metrics, worker_turns));
    row.settled_without_model = Some(metric_sum(
        &metrics,
        "turnstile_turns_settled_without_model_total",
    ));
    row.reads_per_turn = Some(
        metric_sum(&metrics, "turnstile_checkpoint_load_duration_seconds_count") / worker_turns,
    );
    row.writes_per_turn = Some(
        metric_sum(&metrics, "turnstile_checkpoint_save_duration_seconds_count") / worker_turns,
    );
    row.max_in_flight_seen = Some(samples.max_in_flight);
    let requests = fx.model.requests();
    fx.model.clear_requests();
    match args.decision_model {
        DecisionModel::Scripted => {
            row.typed_turn_model_calls = Some(
                requests
                    .iter()
                    .filter(|r| r.turn_id.as_deref().is_some_and(|t| t.ends_with("-typed")))
                    .count() as u64,
            );
            let active = args.conversations.min(row.in_flight_cap) as f64;
            let w = args.model_latency_ms as f64 / 1000.0 * (model_calls / worker_turns);
            row.little_bound = (w > 0.0).then(|| active / w);
        }
        // No fixed model latency, so no Little's-law bound: the embeddings server's queue is
        // part of what is measured.
        DecisionModel::Embeddings => {
            row.chat_requests = Some(requests.len() as u64);
            row.embeddings_decisions = Some(metric_sum_where(
                &metrics,
                "turnstile_decisions_total",
                &[("component", "embeddings")],
            ));
            row.decisions = Some(decisions_breakdown(&metrics));
        }
    }
    let tool_calls = fx.tools.calls();
    let mut io = PhaseIo::collect(
        args,
        &answered_by_kind,
        &requests,
        &tool_calls[calls_before.min(tool_calls.len())..],
        &seen.outputs,
    );
    io.loads_per_turn = row.reads_per_turn.unwrap_or(0.0);
    io.saves_per_turn = row.writes_per_turn.unwrap_or(0.0);
    row.io = Some(io);
    let executions = fx.tools.executions();
    row.tool_executions = Some(executions.len() - executions_before);
    let mut by_tool: std::collections::BTreeMap<&str, usize> = Default::default();
    for e in &executions[executions_before..] {
        *by_tool.entry(e.tool.as_str()).or_default() += 1;
    }
    row.dead_letters = dead;
    let contention = contention(
        switches0.zip(switches1),
        machine0.zip(machine1),
        worker_turns,
    );
    row.notes = format!(
        "worker turns {worker_turns:.0}; dead letters {dead}; outputs matched to no waiting turn {unmatched}; executions by tool {by_tool:?}; {contention}bench process (load generator + reader + test servers) CPU {:.0} µs/turn; {}",
        row.bench_cpu_us_per_turn.unwrap_or(0.0),
        health(&metrics)
    );
    save_metrics(&fx.log_dir, phase, &metrics);
    Ok(row)
}

/// Task switches per turn and how busy the machine was over the load: what the CPU figure was
/// measured under (docs/benchmarks.md, "Method").
fn contention(
    switches: Option<((u64, u64), (u64, u64))>,
    machine: Option<((u64, u64), (u64, u64))>,
    turns: f64,
) -> String {
    let mut out = String::new();
    if let Some(((v0, i0), (v1, i1))) = switches {
        out += &format!(
            "worker task switches per turn {:.2} voluntary, {:.2} involuntary; ",
            v1.saturating_sub(v0) as f64 / turns,
            i1.saturating_sub(i0) as f64 / turns
        );
    }
    if let Some(((b0, t0), (b1, t1))) = machine {
        let total = t1.saturating_sub(t0);
        if total > 0 {
            let busy = b1.saturating_sub(b0) as f64 * 100.0 / total as f64;
            out += &format!("machine CPU busy {busy:.0} % over the load; ");
        }
    }
    out
}

pub async fn backlog_phase(args: &Args, fx: &Fixture) -> Result<Row, String> {
    let phase = "backlog";
    let topics = new_topics(phase, args.partitions).await?;
    let suffix = bus::unique_suffix();
    eprintln!(
        "[backlog] producing {} inbound turns",
        args.backlog_messages
    );
    let started = Instant::now();
    let mut pending = Vec::with_capacity(10_000);
    for i in 0..args.backlog_messages {
        let session = format!("backlog-{suffix}-c{i}");
        let key = format!("{TENANT}/{AGENT}/{session}");
        let id = format!("{session}-0");
        let text = if args.distinct_texts {
            format!("cancel my order [{}]", tag(i))
        } else {
            "cancel my order".to_owned()
        };
        let payload = bus::turn_json(&session, &id, &text);
        let p = fx.producer.clone();
        let topic = topics.inbound.clone();
        pending.push(tokio::spawn(async move {
            p.send(
                FutureRecord::to(&topic).key(&key).payload(&payload),
                Duration::from_secs(60),
            )
            .await
            .is_ok()
        }));
        if pending.len() >= 10_000 {
            for t in pending.drain(..) {
                let _ = t.await;
            }
        }
    }
    for t in pending.drain(..) {
        let _ = t.await;
    }
    eprintln!(
        "[backlog] produced in {:.1} s; starting the worker",
        started.elapsed().as_secs_f64()
    );
    let mut worker = Worker::spawn(args, fx, phase, args.per_partition, &topics)?;
    worker.wait_ready(args.partitions).await?;
    let cpu0 = cpu_seconds(worker.pid(), fx.ticks).unwrap_or(0.0);
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample(worker.pid(), worker.listen.clone(), stop.clone());
    tokio::time::sleep(Duration::from_secs(args.backlog_secs)).await;
    let cpu1 = cpu_seconds(worker.pid(), fx.ticks).unwrap_or(cpu0);
    stop.store(true, Ordering::Relaxed);
    let samples = sampler.join().unwrap_or_default();
    let metrics = worker.metrics();
    let hwm = status_kb(worker.pid(), "VmHWM:");
    worker.stop();
    fx.model.clear_requests();
    save_metrics(&fx.log_dir, phase, &metrics);
    let turns = metric_sum(&metrics, "turnstile_turns_total");
    let rss = &samples.rss_kb;
    let half = rss.len() / 2;
    let mean = |s: &[(f64, u64)]| {
        s.iter().map(|x| x.1 as f64).sum::<f64>() / (s.len().max(1) as f64) / 1024.0
    };
    let row = Row {
        phase: phase.into(),
        in_flight_cap: args.in_flight_cap(args.per_partition),
        turns: turns as u64,
        sent: args.backlog_messages as u64,
        seconds: args.backlog_secs as f64,
        turns_per_s: turns / args.backlog_secs as f64,
        p50_ms: f64::NAN,
        p95_ms: f64::NAN,
        p99_ms: f64::NAN,
        cpu_us_per_turn: Some((cpu1 - cpu0) * 1e6 / turns.max(1.0)),
        peak_rss_mb: hwm.map(|k| k as f64 / 1024.0),
        model_calls_per_turn: Some(model_calls_per_turn(args, &metrics, turns)),
        max_in_flight_seen: Some(samples.max_in_flight),
        decisions: (args.decision_model == DecisionModel::Embeddings)
            .then(|| decisions_breakdown(&metrics)),
        notes: format!(
            "{} inbound waiting at start; lag first/last sample {:.0}/{:.0}; mean RSS first half {:.1} MB, second half {:.1} MB; {}",
            args.backlog_messages,
            samples.lag.first().copied().unwrap_or(f64::NAN),
            samples.lag.last().copied().unwrap_or(f64::NAN),
            mean(&rss[..half]),
            mean(&rss[half..]),
            health(&metrics),
        ),
        ..Row::default()
    };
    Ok(row)
}
