//! Measurement: CPU and memory of a process from `/proc`, the worker's Prometheus scrape, and
//! a once-a-second sampler of a running worker.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use turnstile::domain::decision::Skill;
use turnstile::testkit::worker_process::http_get;

use crate::args::{Args, DecisionModel};
use crate::servers::unix_secs;

pub fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// utime + stime of a process, in seconds.
pub fn cpu_seconds(pid: u32, ticks: f64) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    Some((utime + stime) / ticks)
}

/// Task switches of every thread of a process so far: (voluntary, involuntary). Involuntary ones
/// are preemptions: many per turn mean the worker shared its cores with the services and the load
/// generator, which makes its CPU per turn higher and noisier (caches and TLB refilled each time).
pub fn task_switches(pid: u32) -> Option<(u64, u64)> {
    let mut total = (0, 0);
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
    {
        let Ok(status) = std::fs::read_to_string(task.path().join("status")) else {
            continue; // the thread ended between the listing and the read
        };
        total.0 += status_value(&status, "voluntary_ctxt_switches:").unwrap_or(0);
        total.1 += status_value(&status, "nonvoluntary_ctxt_switches:").unwrap_or(0);
    }
    Some(total)
}

/// The machine's CPU time so far from `/proc/stat`, in ticks: (busy, total). Busy is everything
/// but idle and I/O wait, so busy ÷ total over a phase is how loaded the cores were.
pub fn machine_cpu() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<u64> = stat
        .lines()
        .next()?
        .strip_prefix("cpu ")?
        .split_whitespace()
        .filter_map(|v| v.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is already inside user).
    let total: u64 = fields.iter().take(8).sum();
    let idle = fields.get(3)? + fields.get(4)?;
    Some((total - idle, total))
}

/// A `/proc/<pid>/status` field in kB (VmHWM, VmRSS).
pub fn status_kb(pid: u32, field: &str) -> Option<u64> {
    status_value(
        &std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?,
        field,
    )
}

/// The number after `field` in a `/proc` status text (`VmHWM:  1234 kB`, `voluntary_ctxt_switches:  7`).
fn status_value(status: &str, field: &str) -> Option<u64> {
    status
        .lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Sum of every series of one metric family sample (`name` or `name{...}`).
pub fn metric_sum(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|r| r.starts_with('{') || r.starts_with(' '))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>()
        // An empty sum is -0.0, which would print as "-0".
        + 0.0
}

/// Sum of the series of `name` whose labels include every `key="value"` of `labels`.
pub fn metric_sum_where(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    text.lines()
        .filter_map(|l| l.strip_prefix(name)?.strip_prefix('{'))
        .filter_map(|rest| rest.split_once('}'))
        .filter(|(set, _)| {
            labels
                .iter()
                .all(|(k, v)| set.split(',').any(|kv| kv == format!("{k}=\"{v}\"")))
        })
        .filter_map(|(_, value)| value.trim().parse::<f64>().ok())
        .sum::<f64>()
        + 0.0
}

/// `turnstile_decisions_total` by skill and component, as `classifier 1200 embeddings / 3
/// fallback; …` (a component with no decision is left out).
pub fn decisions_breakdown(metrics: &str) -> String {
    let mut parts = Vec::new();
    for skill in [Skill::Classifier, Skill::Router, Skill::Interpreter] {
        let by: Vec<String> = ["embeddings", "llm", "fallback"]
            .iter()
            .filter_map(|c| {
                let n = metric_sum_where(
                    metrics,
                    "turnstile_decisions_total",
                    &[("skill", skill.as_str()), ("component", c)],
                );
                (n > 0.0).then(|| format!("{n:.0} {c}"))
            })
            .collect();
        if !by.is_empty() {
            parts.push(format!("{} {}", skill.as_str(), by.join(" / ")));
        }
    }
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join("; ")
    }
}

/// What the `model calls/turn` column shows: the test server's calls (scripted, one per
/// decision), or every `turnstile_decisions_total` (embeddings, whose calls have no metric;
/// one embeddings call serves a turn's classifier and router alike).
pub fn model_calls_per_turn(args: &Args, metrics: &str, turns: f64) -> f64 {
    let calls = match args.decision_model {
        DecisionModel::Scripted => metric_sum(metrics, "turnstile_model_requests_total"),
        DecisionModel::Embeddings => metric_sum(metrics, "turnstile_decisions_total"),
    };
    calls / turns.max(1.0)
}

/// Mean seconds of a histogram (all series summed), as `12 ms`.
pub fn mean_ms(metrics: &str, name: &str) -> String {
    let count = metric_sum(metrics, &format!("{name}_count"));
    if count == 0.0 {
        return "–".into();
    }
    format!(
        "{:.0} ms",
        1000.0 * metric_sum(metrics, &format!("{name}_sum")) / count
    )
}

/// Where a turn's time went and whether the services misbehaved during the phase (a run with
/// store errors or commit failures measured an outage, not the worker).
pub fn health(metrics: &str) -> String {
    format!(
        "mean turn {}, checkpoint load {}, save {}, model call {}, tool call {}, commit {}; checkpoint errors {:.0}, model fallbacks {:.0}, commit failures {:.0}",
        mean_ms(metrics, "turnstile_turn_duration_seconds"),
        mean_ms(metrics, "turnstile_checkpoint_load_duration_seconds"),
        mean_ms(metrics, "turnstile_checkpoint_save_duration_seconds"),
        mean_ms(metrics, "turnstile_model_request_duration_seconds"),
        mean_ms(metrics, "turnstile_tool_call_duration_seconds"),
        mean_ms(metrics, "turnstile_commit_duration_seconds"),
        metric_sum(metrics, "turnstile_checkpoint_errors_total"),
        metric_sum(metrics, "turnstile_model_fallbacks_total"),
        metric_sum(metrics, "turnstile_commit_failures_total"),
    )
}

/// Keeps the worker's last scrape next to its log, for diagnosis.
pub fn save_metrics(dir: &Path, phase: &str, metrics: &str) {
    let path = dir.join(format!("{phase}-{}.metrics.txt", unix_secs()));
    if std::fs::write(&path, metrics).is_ok() {
        eprintln!("[{phase}] worker metrics saved to {}", path.display());
    }
}

/// Samples a worker's RSS and in-flight gauge once a second until stopped.
pub fn sample(pid: u32, listen: String, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Samples> {
    std::thread::spawn(move || {
        let mut s = Samples::default();
        let start = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            if let Some(rss) = status_kb(pid, "VmRSS:") {
                s.rss_kb.push((start.elapsed().as_secs_f64(), rss));
            }
            if let Some((_, m)) = http_get(&listen, "/metrics") {
                let f = metric_sum(&m, "turnstile_turns_in_flight");
                s.max_in_flight = s.max_in_flight.max(f);
                s.lag.push(metric_sum(&m, "turnstile_partition_lag"));
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        s
    })
}

#[derive(Default)]
pub struct Samples {
    pub rss_kb: Vec<(f64, u64)>,
    pub max_in_flight: f64,
    pub lag: Vec<f64>,
}
