//! The fault scenarios: each one starts its own topics, a model server and a tool server, runs
//! `turnstile run` workers as child processes of this binary, produces a multi-turn workload
//! (optionally interleaved with hostile records), injects its fault while the workers run, waits
//! until every record is answered (or progress stops), and hands everything to the
//! [`super::checker`].
//!
//! Every decision is deterministic from the turn: the model server answers each turn from a
//! per-turn script (recorded here and handed to the checker's serial replay), the tool server
//! answers every execution with its default result.
//!
//! The parts: [`workload`] (the generated traffic: scripted turns, model faults, hostile records)
//! and [`harness`] (one run's topics, servers, store and worker processes, and the evidence it
//! hands the checker).

mod harness;
pub mod scale_down;
mod workload;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use self::harness::Harness;
use super::checker::CheckReport;
use super::Rng;
use crate::clock::now_ms;
use crate::testkit::tool_server::ToolAction;

pub const KEYSPACE: &str = "turnstile_chaos";
/// The agents file the run's config is derived from: the same, but the assistant serves only the
/// run's tenant, so hostile records from another tenant are `unknown_tenant`.
pub const CONFIG: &str = "config/agents.example.yaml";
const SERVE_ALL: &str = r#"- {tenant: "*", tools: "*"}"#;
pub const PROFILES: &str = "config/profiles.example.yaml";
pub const LOG_ROOT: &str = "target/chaos";
const TENANT: &str = "acme";
const AGENT: &str = "retail-bot";
const INBOUND_PARTITIONS: i32 = 6;
const EPOCH_MS: i64 = 1_767_225_600_000;
/// How long the run may go without a new answer before the harness stops waiting.
const STALL_TIMEOUT: Duration = Duration::from_secs(120);

/// The fault a scenario injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    Sigkill,
    Rebalance,
    KafkaRestart,
    CassandraRestart,
    ModelFaults,
    Tool503,
    Hostile,
    /// The scale-down measurement: 3 workers, SIGTERM to two at once (`scale_down`).
    ScaleDown,
    /// The scale-down measurement: 3 workers, SIGKILL of one with a transaction open.
    KillInTransaction,
}

impl Fault {
    pub const ALL: [Fault; 7] = [
        Fault::Sigkill,
        Fault::Rebalance,
        Fault::ModelFaults,
        Fault::Tool503,
        Fault::Hostile,
        // The two that disturb everyone sharing the services go last.
        Fault::KafkaRestart,
        Fault::CassandraRestart,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Fault::Sigkill => "sigkill",
            Fault::Rebalance => "rebalance",
            Fault::KafkaRestart => "kafka-restart",
            Fault::CassandraRestart => "cassandra-restart",
            Fault::ModelFaults => "model-faults",
            Fault::Tool503 => "tool-503",
            Fault::Hostile => "hostile",
            Fault::ScaleDown => "scale-down",
            Fault::KillInTransaction => "kill-in-transaction",
        }
    }

    /// The scale-down measurements: three workers at the production timings, stall figures.
    pub fn measures_scale_down(self) -> bool {
        matches!(self, Fault::ScaleDown | Fault::KillInTransaction)
    }
}

/// The size of one scenario.
#[derive(Debug, Clone)]
pub struct Plan {
    pub conversations: usize,
    /// Valid turns in total (rounded up to whole rounds of every conversation).
    pub turns: usize,
    /// Kill cycles (sigkill), scale steps are fixed (rebalance).
    pub cycles: usize,
    /// Hostile records interleaved with the valid turns (every scenario may carry some; the
    /// `hostile` one carries this many).
    pub hostile: usize,
    /// Workers at the peak of the rebalance scenario (1 → peak → 1).
    pub peak_workers: usize,
    /// How long the broker or store stays down in the restart faults (0: a plain restart).
    pub outage_secs: u64,
    pub seed: u64,
    /// How long the model test server holds every scripted answer.
    pub model_latency_ms: u64,
    /// Extra worker environment (`--worker-env K=V`), over the harness's.
    pub worker_env: Vec<(String, String)>,
}

/// What one scenario did and what the checker found.
#[derive(Debug, Clone)]
pub struct FaultReport {
    pub fault: Fault,
    pub run_id: String,
    pub produced_valid: usize,
    pub produced_hostile: usize,
    pub model_faulted_turns: usize,
    pub tool_bursts: usize,
    /// Requests the model server received (0 means no turn ever reached a model).
    pub model_requests: usize,
    pub kills: usize,
    pub restarts: usize,
    /// Restart faults: from the service answering again to the first turn answered after it.
    pub resumed_after: Option<Duration>,
    pub wall: Duration,
    pub check: CheckReport,
    pub min_replies: usize,
    pub min_executions: usize,
    pub log_dir: PathBuf,
    /// The scale-down measurements' figures.
    pub stall: Option<scale_down::Stall>,
}

impl FaultReport {
    pub fn passed(&self) -> bool {
        self.check.passed(self.min_replies, self.min_executions) && self.model_requests > 0
    }

    /// What was injected besides kills and restarts, in words.
    pub fn injected(&self) -> String {
        match self.fault {
            Fault::ModelFaults => format!("{} turns with model faults", self.model_faulted_turns),
            Fault::Tool503 => format!("{} bursts of 2×503", self.tool_bursts),
            Fault::Hostile => format!("{} hostile records", self.produced_hostile),
            Fault::Sigkill => format!("{} kills", self.kills),
            Fault::Rebalance => "1 → peak → 1".into(),
            Fault::ScaleDown => "3 → 1 (SIGTERM)".into(),
            Fault::KillInTransaction => "SIGKILL 1 of 3, transaction open".into(),
            Fault::KafkaRestart | Fault::CassandraRestart => {
                let what = if self.fault == Fault::KafkaRestart {
                    "broker"
                } else {
                    "store"
                };
                let resumed = self
                    .resumed_after
                    .map(|t| {
                        format!(
                            ", next turn answered {:.1} s after it was back",
                            t.as_secs_f64()
                        )
                    })
                    .unwrap_or_default();
                format!("{what} restart{resumed}")
            }
        }
    }

    /// Why the run did no real work, if it did not.
    pub fn no_real_work(&self) -> Option<String> {
        if self.model_requests == 0 {
            return Some("the model server received no request".into());
        }
        self.check.real_work(self.min_replies, self.min_executions)
    }
}

/// What the fault injection did, for the report.
#[derive(Default)]
struct Injected {
    kills: usize,
    restarts: usize,
    tool_bursts: usize,
    /// After a service restart: how long until the next turn was answered.
    resumed_after: Option<Duration>,
    /// The scale-down measurements: the signal and its moment.
    signal: Option<scale_down::Signal>,
}

/// Runs one scenario end to end. `Err` is a setup problem (services unreachable).
pub fn run_fault(fault: Fault, plan: &Plan) -> Result<FaultReport, String> {
    let started = Instant::now();
    let mut h = Harness::start(fault, plan)?;
    eprintln!(
        "turnstile chaos: {} (run {}): {} conversations, {} turns, {} hostile; logs in {}",
        fault.name(),
        h.id,
        plan.conversations,
        h.workload.valid,
        h.workload.hostile.len(),
        h.log_dir.display()
    );
    let mut rng = Rng::new(plan.seed ^ 0x9e37_79b9_7f4a_7c15);
    h.spawn(0, None)?;
    if fault.measures_scale_down() {
        scale_down::start_workers(&mut h, fault)?;
    }
    let planned = match fault {
        Fault::Sigkill => Duration::from_millis(2_500 * plan.cycles as u64),
        Fault::Rebalance => Duration::from_secs(45),
        Fault::Tool503 | Fault::ScaleDown | Fault::KillInTransaction => Duration::from_secs(60),
        // Production goes on through the whole outage and 30 s past it: an outage under load.
        _ => Duration::from_secs(30 + plan.outage_secs),
    };
    h.start_producing(planned, fault.measures_scale_down());
    let mut injected = Injected::default();
    match fault {
        Fault::Sigkill => inject_kills(&mut h, plan, &mut rng, &mut injected)?,
        Fault::Rebalance => inject_rebalance(&mut h, plan, &mut injected)?,
        Fault::KafkaRestart | Fault::CassandraRestart => {
            inject_restart(&mut h, fault, plan, &mut rng, &mut injected)?;
        }
        Fault::Tool503 => inject_tool_bursts(&h, &mut rng, &mut injected),
        Fault::ScaleDown | Fault::KillInTransaction => {
            scale_down::inject(&mut h, fault, &mut injected)?;
        }
        Fault::ModelFaults | Fault::Hostile => {}
    }
    // Whatever happened, one healthy worker finishes the work.
    if !h.alive(0) {
        h.kill(0);
        h.spawn(0, None)?;
    }
    h.wait_until_answered();
    Ok(h.finish(fault, started, &injected))
}

/// `plan.cycles` kills of worker 0, each followed by a restart.
fn inject_kills(
    h: &mut Harness,
    plan: &Plan,
    rng: &mut Rng,
    injected: &mut Injected,
) -> Result<(), String> {
    for cycle in 0..plan.cycles {
        // Odd cycles abort right after a checkpoint save, before its commit (the
        // narrowest window); even ones SIGKILL at a random moment.
        if cycle % 2 == 1 {
            h.kill(0);
            let n = 1 + rng.below(30);
            h.spawn(0, Some(n))?;
            let until = Instant::now() + Duration::from_secs(20);
            while Instant::now() < until && h.alive(0) {
                std::thread::sleep(Duration::from_millis(50));
            }
            injected.kills += 1;
            h.kill(0);
            h.spawn(0, None)?;
        } else {
            std::thread::sleep(Duration::from_millis(500 + rng.below(3_500) as u64));
            h.kill(0);
            injected.kills += 1;
            h.spawn(0, None)?;
        }
        eprintln!("  cycle {}/{}: killed", cycle + 1, plan.cycles);
    }
    Ok(())
}

/// Scales the group from one worker to `plan.peak_workers` and back.
fn inject_rebalance(h: &mut Harness, plan: &Plan, injected: &mut Injected) -> Result<(), String> {
    std::thread::sleep(Duration::from_secs(8));
    for w in 1..plan.peak_workers.max(2) {
        h.spawn(w, None)?;
    }
    eprintln!("  scaled 1 -> {}", plan.peak_workers.max(2));
    std::thread::sleep(Duration::from_secs(15));
    for w in 1..plan.peak_workers.max(2) {
        h.stop(w);
    }
    eprintln!("  scaled {} -> 1", plan.peak_workers.max(2));
    injected.restarts += 2;
    Ok(())
}

/// Takes Kafka or Cassandra down for `plan.outage_secs` and measures how long the next answer
/// takes once it is back.
fn inject_restart(
    h: &mut Harness,
    fault: Fault,
    plan: &Plan,
    rng: &mut Rng,
    injected: &mut Injected,
) -> Result<(), String> {
    std::thread::sleep(Duration::from_secs(5 + rng.below(10) as u64));
    let which = if fault == Fault::KafkaRestart {
        "kafka"
    } else {
        "cassandra"
    };
    eprintln!("  restarting {which} (down {} s)", plan.outage_secs);
    let down = plan.outage_secs.to_string();
    let status = Command::new("bash")
        .args([
            "scripts/services.sh",
            "restart",
            "--down-secs",
            &down,
            which,
        ])
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("scripts/services.sh restart {which}: {e}"))?;
    if !status.success() {
        return Err(format!("scripts/services.sh restart {which}: {status}"));
    }
    injected.restarts += 1;
    injected.resumed_after = h.time_to_next_answer(Duration::from_secs(300));
    if let Some(t) = injected.resumed_after {
        eprintln!(
            "  {which} back; the next turn was answered {:.1} s later",
            t.as_secs_f64()
        );
    }
    Ok(())
}

/// Bursts of two 503s, fewer than the gateway's three attempts. A new burst on a tool only once
/// the last one was consumed more than 2 s ago (longer than the retry backoff), so no execution
/// ever sees three in a row: every execution still happens, and the serial replay (tools always
/// succeed) stays the right reference.
fn inject_tool_bursts(h: &Harness, rng: &mut Rng, injected: &mut Injected) {
    let mut bursts: HashMap<&str, usize> = HashMap::new();
    // Until the last record is produced, so bursts hit the whole run.
    while !h.producing_done.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(100 + rng.below(400) as u64));
        let tool = if rng.below(2) == 0 {
            "retail_order_cancel"
        } else {
            "billing_show_bill"
        };
        let calls = h.tools.calls();
        let failed: Vec<i64> = calls
            .iter()
            .filter(|c| c.tool == tool && c.action == ToolAction::Execute && c.status == Some(503))
            .map(|c| c.at_ms)
            .collect();
        let done = bursts.get(tool).copied().unwrap_or(0);
        let quiet = failed
            .iter()
            .max()
            .is_none_or(|last| now_ms() - last > 2_000);
        if failed.len() >= done * 2 && quiet {
            h.tools.fail_next(tool, 2, 503);
            *bursts.entry(tool).or_default() += 1;
            injected.tool_bursts += 1;
        }
    }
}

/// The summary table of some reports, one row per fault.
pub fn render_table(reports: &[FaultReport]) -> String {
    let mut out = String::from(
        "| fault | turns | hostile | replies | events | dead letters | tool execs | duplicates | lost | orphans | not dead-lettered | state mismatches | tool mismatches | reply-set mismatches | kills/restarts | faults injected | wall | verdict |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in reports {
        let c = &r.check;
        let verdict = if r.passed() {
            "PASS".to_owned()
        } else if let Some(why) = r.no_real_work() {
            format!("FAIL ({why})")
        } else {
            "FAIL".to_owned()
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {}/{} | {} | {:.0} s | {} |\n",
            r.fault.name(),
            r.produced_valid,
            r.produced_hostile,
            c.replies,
            c.events,
            c.dead_letters,
            c.tool_executions,
            c.duplicates.len(),
            c.lost.len() + c.valid_dead_lettered.len(),
            c.orphans.len(),
            c.not_dead_lettered.len(),
            c.state_mismatches.len(),
            c.tool_mismatches.len(),
            c.output_mismatches.len(),
            r.kills,
            r.restarts,
            r.injected(),
            r.wall.as_secs_f64(),
            verdict
        ));
    }
    out
}
