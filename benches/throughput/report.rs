//! Results: one row per phase, the ratios between phases, the Markdown report, and the checks
//! of the short form.

use std::fmt::Write as _;

use crate::args::{Args, DecisionModel};
use crate::io::{self, PhaseIo};
use crate::servers::Fixture;
use crate::workload::Load;

#[derive(Default, Clone)]
pub struct Row {
    pub phase: String,
    pub in_flight_cap: usize,
    pub turns: u64,
    pub sent: u64,
    pub timeouts: u64,
    pub seconds: f64,
    pub turns_per_s: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub cpu_us_per_turn: Option<f64>,
    /// CPU of the bench process itself per turn: the load generator, the reader and the test
    /// servers in every phase, plus the loop's own drivers in `raw`.
    pub bench_cpu_us_per_turn: Option<f64>,
    pub peak_rss_mb: Option<f64>,
    /// Scripted: model test server calls per turn; embeddings: decisions per turn.
    pub model_calls_per_turn: Option<f64>,
    pub typed_turn_model_calls: Option<u64>,
    pub typed_answered: u64,
    pub settled_without_model: Option<f64>,
    /// Embeddings mode: the decisions the embeddings model made, by skill, and the calls that
    /// reached the chat test server anyway (there must be none).
    pub embeddings_decisions: Option<f64>,
    pub decisions: Option<String>,
    pub chat_requests: Option<u64>,
    pub reads_per_turn: Option<f64>,
    pub writes_per_turn: Option<f64>,
    pub max_in_flight_seen: Option<f64>,
    pub tool_executions: Option<usize>,
    pub little_bound: Option<f64>,
    pub dead_letters: u64,
    pub notes: String,
    /// The I/O per turn (worker phases and raw).
    pub io: Option<PhaseIo>,
}

pub fn percentile(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)] as f64 / 1000.0
}

pub fn fill_load(row: &mut Row, mut load: Load) {
    load.latencies_us.sort_unstable();
    row.turns = load.latencies_us.len() as u64;
    row.sent = load.sent;
    row.typed_answered = load.typed_answered;
    row.timeouts = load.timeouts;
    row.seconds = match (load.first_send, load.last_reply) {
        (Some(a), Some(b)) => b.saturating_duration_since(a).as_secs_f64(),
        _ => 0.0,
    };
    row.turns_per_s = if row.seconds > 0.0 {
        row.turns as f64 / row.seconds
    } else {
        0.0
    };
    row.p50_ms = percentile(&load.latencies_us, 0.50);
    row.p95_ms = percentile(&load.latencies_us, 0.95);
    row.p99_ms = percentile(&load.latencies_us, 0.99);
}

pub fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("–".into(), |x| format!("{x:.digits$}"))
}

pub fn render(args: &Args, fx: &Fixture, rows: &[Row], failures: &[String]) -> String {
    let mut s = String::new();
    let now = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    let _ = writeln!(s, "## Throughput run {now}\n");
    // The model latency is left out where it plays no part, so the line reproduces the run
    // without suggesting it does.
    let mut model = format!("--decision-model {}", args.decision_model.as_str());
    if args.decision_model == DecisionModel::Scripted {
        let _ = write!(model, " --model-latency-ms {}", args.model_latency_ms);
    }
    let distinct = if args.distinct_texts {
        " --distinct-texts"
    } else {
        ""
    };
    let _ = writeln!(
        s,
        "Command: `cargo bench --features harness --bench throughput -- {model}{distinct} --conversations {} --turns {} --partitions {} --max-in-flight-per-partition {} --max-in-flight {} --interrupt-every {} --phases {} --phase-secs {}`\n",
        args.conversations,
        args.turns,
        args.partitions,
        args.per_partition,
        args.max_in_flight,
        args.interrupt_every,
        args.phases.join(","),
        args.phase_secs,
    );
    if let Some(bin) = &args.worker_bin {
        let _ = writeln!(s, "Worker binary: `{}` (`--worker-bin`).\n", bin.display());
    }
    match &fx.embeddings {
        None => {
            let _ = writeln!(
                s,
                "Decision model: scripted (`config/profiles.example.yaml`, the model test server answering after {} ms).\n",
                args.model_latency_ms
            );
        }
        Some(e) => {
            let _ = writeln!(
                s,
                "Decision model: embeddings (`config/profiles.embeddings.yaml`, server {}, {:.1} ms per call when idle, examples cached in `.cache/embeddings`); texts {}.\n",
                e.base_url,
                e.idle_ms,
                if args.distinct_texts {
                    "distinct (every model-decided text tagged, so each such turn costs an embeddings call)"
                } else {
                    "repeated (the worker's cache of the last 512 embedded texts answers all but the first of each)"
                },
            );
        }
    }
    let _ = writeln!(
        s,
        "Machine: {} cores (`nproc`), Kafka + Cassandra + load generator + test servers on the same host; load average at the end: {}.\n",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        std::fs::read_to_string("/proc/loadavg")
            .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .unwrap_or_default(),
    );
    let baseline = rows
        .iter()
        .find(|r| r.phase == "baseline")
        .map(|r| r.turns_per_s);
    let raw = rows
        .iter()
        .find(|r| r.phase == "raw")
        .map(|r| r.turns_per_s);
    let calls = match args.decision_model {
        DecisionModel::Scripted => "model calls/turn",
        DecisionModel::Embeddings => "model decisions/turn",
    };
    let _ = writeln!(
        s,
        "| phase | in-flight cap | turns | turns/s | p50 ms | p95 ms | p99 ms | worker CPU µs/turn | peak RSS MB | {calls} | store reads/turn | store writes/turn | × baseline | % Little bound | % raw loop |"
    );
    let _ = writeln!(
        s,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for r in rows {
        let ratio = |base: Option<f64>| base.filter(|b| *b > 0.0).map(|b| r.turns_per_s / b);
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.1} | {:.0} | {:.0} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.phase,
            r.in_flight_cap,
            r.turns,
            r.turns_per_s,
            r.p50_ms,
            r.p95_ms,
            r.p99_ms,
            opt(r.cpu_us_per_turn, 0),
            opt(r.peak_rss_mb, 1),
            opt(r.model_calls_per_turn, 2),
            opt(r.reads_per_turn, 2),
            opt(r.writes_per_turn, 2),
            if r.phase == "baseline" { "1.0".into() } else { opt(ratio(baseline), 1) },
            opt(r.little_bound.map(|b| 100.0 * r.turns_per_s / b), 0),
            if r.phase == "raw" { "100".into() } else { opt(ratio(raw).map(|x| x * 100.0), 0) },
        );
    }
    let _ = writeln!(s);
    for r in rows {
        let model = match args.decision_model {
            DecisionModel::Scripted => format!(
                "model calls on typed turns {}",
                r.typed_turn_model_calls
                    .map_or("–".into(), |n| n.to_string())
            ),
            DecisionModel::Embeddings => format!(
                "typed turns answered {}; decisions (`turnstile_decisions_total`) {}; calls to the chat test server {}",
                r.typed_answered,
                r.decisions.as_deref().unwrap_or("–"),
                r.chat_requests.map_or("–".into(), |n| n.to_string()),
            ),
        };
        let checks = if r.phase == "worker" || r.phase == "baseline" {
            let problems = model_problems(args, r);
            if problems.is_empty() {
                " Decision checks: ok.".to_owned()
            } else {
                format!(" **Decision checks failed**: {}.", problems.join("; "))
            }
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "- **{}**: {} sent, {} answered, {} timed out or cut by the phase cap, over {:.1} s; peak turns in flight (sampled 1/s) {}; turns settled without a model call {}; {model}; tool executions {}; Little's-law bound {} turns/s. {}{checks}",
            r.phase,
            r.sent,
            r.turns,
            r.timeouts,
            r.seconds,
            opt(r.max_in_flight_seen, 0),
            opt(r.settled_without_model, 0),
            r.tool_executions.map_or("–".into(), |n| n.to_string()),
            opt(r.little_bound, 0),
            r.notes,
        );
    }
    let _ = writeln!(
        s,
        "\nLittle's-law bound = min(in-flight cap, conversations) ÷ (model latency × model calls per turn measured in that phase): the rate if every turn in flight only waited for its model calls, in sequence (none with the embeddings model, whose latency is the server's queue). Reply latency: inbound produce → reply visible to a `read_committed` reader. Worker CPU: utime+stime of the worker process from load start to load end ÷ turns the worker counted. Peak RSS: VmHWM of the worker process (whole life)."
    );
    let phases: Vec<(&str, &PhaseIo)> = rows
        .iter()
        .filter_map(|r| r.io.as_ref().map(|io| (r.phase.as_str(), io)))
        .collect();
    if !phases.is_empty() {
        let _ = writeln!(
            s,
            "\n### I/O per turn\n\nThe raw loop makes the worker's I/O without the worker: per turn the same chat completions to the model test server, tool webhooks to the tool test server, checkpoint load, write-ahead and save, and outputs in a Kafka transaction. Counted the same way in every phase (test servers by turn id header, outputs by the reply reader); per answered turn of each kind.\n"
        );
        let _ = write!(s, "{}", io::table(&phases));
        let _ = writeln!(s);
        for (phase, io) in &phases {
            let _ = writeln!(s, "- {phase}: {}", io.summary());
        }
        match raw_vs_worker(rows) {
            None => {}
            Some((reference, problems)) if problems.is_empty() => {
                let _ = writeln!(
                    s,
                    "\nRaw loop vs {reference}: the same I/O per turn (every kind within 0.05 calls per turn, or 5 %)."
                );
            }
            Some((reference, problems)) => {
                let _ = writeln!(
                    s,
                    "\n**Raw loop vs {reference}: the I/O per turn differs** (raw is no fair ceiling for this run): {}.",
                    problems.join("; ")
                );
            }
        }
    }
    if let Some(line) = raw_loop_cpu(rows) {
        let _ = writeln!(s, "\n{line}");
    }
    for f in failures {
        let _ = writeln!(s, "\n**FAILED** {f}");
    }
    s
}

/// What the short form must show; a harness whose phases did no real work fails here.
pub fn check_short_form(args: &Args, rows: &[Row]) -> Result<(), Vec<String>> {
    let expected = (args.conversations * args.turns) as u64;
    let mut problems = Vec::new();
    for phase in &args.phases {
        let Some(r) = rows.iter().find(|r| &r.phase == phase) else {
            problems.push(format!("phase `{phase}` produced no result"));
            continue;
        };
        if r.sent != expected || r.turns != expected || r.timeouts != 0 {
            problems.push(format!(
                "phase `{phase}`: {} of {expected} turns sent, {} answered, {} timed out",
                r.sent, r.turns, r.timeouts
            ));
        }
        if r.dead_letters != 0 {
            problems.push(format!(
                "phase `{phase}`: {} turns dead-lettered",
                r.dead_letters
            ));
        }
        if phase != "raw" {
            problems.extend(
                model_problems(args, r)
                    .into_iter()
                    .map(|p| format!("phase `{phase}`: {p}")),
            );
            if r.cpu_us_per_turn.is_none_or(|c| c <= 0.0) || r.peak_rss_mb.is_none() {
                problems.push(format!("phase `{phase}`: worker CPU or RSS not measured"));
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// What a worker phase must show about its decisions, whatever its size or timing: no model
/// call on a turn a typed parser settles, and the decisions coming from the model asked for.
pub fn model_problems(args: &Args, r: &Row) -> Vec<String> {
    let mut problems = Vec::new();
    match args.decision_model {
        DecisionModel::Scripted => {
            if r.typed_turn_model_calls != Some(0) {
                problems.push(format!(
                    "model calls on typed turns: {:?}",
                    r.typed_turn_model_calls
                ));
            }
        }
        DecisionModel::Embeddings => {
            // Embeddings calls carry no turn id, so typed turns are checked by count: each one
            // settled by its parser adds one to `settled without a model`. Necessary, not
            // sufficient (the interrupting conversations' untyped fills settle there too).
            let settled = r.settled_without_model.unwrap_or(0.0);
            if settled < r.typed_answered as f64 {
                problems.push(format!(
                    "{settled:.0} turns settled without a model, fewer than the {} typed turns answered (a typed fill goes to the model when the turn that opened its transaction fell back: see the fallbacks)",
                    r.typed_answered
                ));
            }
            if r.embeddings_decisions.is_none_or(|n| n <= 0.0) {
                problems.push("no decision by the embeddings model".into());
            }
            if r.chat_requests != Some(0) {
                problems.push(format!(
                    "calls to the chat model test server: {:?}",
                    r.chat_requests
                ));
            }
        }
    }
    problems
}

/// The raw phase's I/O against the worker's (or the baseline's, without a worker phase): the
/// phase compared with, and where they part. `None` without both.
pub fn raw_vs_worker(rows: &[Row]) -> Option<(String, Vec<String>)> {
    let raw = rows.iter().find(|r| r.phase == "raw")?.io.as_ref()?;
    let reference = ["worker", "baseline"]
        .iter()
        .find_map(|p| rows.iter().find(|r| r.phase == *p && r.io.is_some()))?;
    let worker = reference.io.as_ref()?;
    Some((reference.phase.clone(), io::mismatches(worker, raw)))
}

/// The raw loop's own CPU next to the worker's: the raw loop runs in the bench process beside the
/// load generator, reader and test servers, which the worker phase runs too (serving the same
/// calls per turn), so the bench process's CPU in `raw` minus its CPU in `worker` is the loop's
/// drivers and loop. A plain client making the worker's I/O with the same drivers — what that
/// I/O costs done simply, not a lower bound.
fn raw_loop_cpu(rows: &[Row]) -> Option<String> {
    let worker = rows.iter().find(|r| r.phase == "worker")?;
    let raw = rows.iter().find(|r| r.phase == "raw")?;
    let own = raw.bench_cpu_us_per_turn? - worker.bench_cpu_us_per_turn?;
    let cpu = worker.cpu_us_per_turn?;
    Some(format!(
        "CPU of the I/O made plainly: the raw loop's own CPU (bench process in `raw` minus bench process in `worker`) {own:.0} µs/turn; the worker {cpu:.0} µs/turn, {:.2}× that.",
        cpu / own.max(1.0)
    ))
}
