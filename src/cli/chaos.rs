//! `turnstile chaos`: the fault harness. Runs each fault scenario against real workers (child
//! processes of this binary), then the independent checker; exit 0 only when every scenario's
//! checker passed and the run did real work, 1 when one failed, 64 when the services or the
//! setup are unavailable.

// Test harness, never in a release build: declared behind `#[cfg(feature = "harness")]`.
// Ungating it fails `cargo check --lib --bins` (no features; scripts/test.sh) here.
#[cfg(not(feature = "harness"))]
compile_error!(
    "src/cli/chaos.rs is test harness: keep its `mod` line behind #[cfg(feature = \"harness\")]"
);

use std::time::Instant;

use crate::chaos::faults::{render_table, run_fault, scale_down, Fault, Plan};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FaultArg {
    Sigkill,
    Rebalance,
    KafkaRestart,
    CassandraRestart,
    ModelFaults,
    #[value(name = "tool-503")]
    Tool503,
    Hostile,
    /// Measurement, not in `all`: 3 workers, two SIGTERMed at once (scale 3 → 1).
    ScaleDown,
    /// Measurement, not in `all`: 3 workers, one SIGKILLed with a transaction open.
    KillInTransaction,
    All,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Which fault to inject (`all`: every one, the broker and store restarts last).
    #[arg(long, value_enum, default_value = "sigkill")]
    pub fault: FaultArg,
    /// The CI form: tens of conversations, hundreds of turns, a few kills (minutes).
    #[arg(long, conflicts_with = "long")]
    pub short: bool,
    /// The long form: hundreds of conversations, thousands of turns, 50 kills.
    #[arg(long)]
    pub long: bool,
    /// Conversations (sessions) in the workload.
    #[arg(long)]
    pub conversations: Option<usize>,
    /// Valid turns in total.
    #[arg(long)]
    pub turns: Option<usize>,
    /// Kill cycles of the sigkill fault.
    #[arg(long)]
    pub cycles: Option<usize>,
    /// Hostile records of the hostile fault.
    #[arg(long)]
    pub hostile: Option<usize>,
    /// Workers at the peak of the rebalance fault (1 → peak → 1).
    #[arg(long)]
    pub peak_workers: Option<usize>,
    /// Seconds the broker or store stays down in kafka-restart / cassandra-restart (0: a plain
    /// restart); production goes on through the outage.
    #[arg(long, default_value_t = 0)]
    pub outage_secs: u64,
    /// Seed of the workload and the fault schedule.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// How long the model test server holds each answer (default: 200 for scale-down and
    /// kill-in-transaction, so turns are in flight at the signal; 0 otherwise).
    #[arg(long)]
    pub model_latency_ms: Option<u64>,
    /// Extra worker environment, `NAME=VALUE`, repeatable (e.g.
    /// `TURNSTILE_SESSION_TIMEOUT_MS=10000`); over the harness's own.
    #[arg(long = "worker-env", value_parser = parse_env)]
    pub worker_env: Vec<(String, String)>,
}

fn parse_env(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .filter(|(k, _)| !k.is_empty())
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("`{s}` is not NAME=VALUE"))
}

/// The run's plan: the preset (`--long`, `--short` or the default), then the explicit counts.
fn plan(args: &Args) -> Plan {
    let mut plan = if args.long {
        Plan {
            conversations: 300,
            turns: 6_000,
            cycles: 50,
            hostile: 10_000,
            peak_workers: 3,
            outage_secs: args.outage_secs,
            seed: args.seed,
            model_latency_ms: 0,
            worker_env: Vec::new(),
        }
    } else if args.short {
        Plan {
            conversations: 40,
            turns: 400,
            cycles: 5,
            hostile: 500,
            peak_workers: 2,
            outage_secs: args.outage_secs,
            seed: args.seed,
            model_latency_ms: 0,
            worker_env: Vec::new(),
        }
    } else {
        Plan {
            conversations: 100,
            turns: 2_000,
            cycles: 10,
            hostile: 2_000,
            peak_workers: 3,
            outage_secs: args.outage_secs,
            seed: args.seed,
            model_latency_ms: 0,
            worker_env: Vec::new(),
        }
    };
    let measures = matches!(
        args.fault,
        FaultArg::ScaleDown | FaultArg::KillInTransaction
    );
    if measures {
        scale_down::default_plan(
            &mut plan,
            args.turns.is_some(),
            args.conversations.is_some(),
        );
    }
    plan.model_latency_ms = args
        .model_latency_ms
        .unwrap_or(if measures { 200 } else { 0 });
    plan.worker_env = args.worker_env.clone();
    plan.conversations = args.conversations.unwrap_or(plan.conversations).max(1);
    plan.turns = args.turns.unwrap_or(plan.turns).max(1);
    plan.cycles = args.cycles.unwrap_or(plan.cycles);
    plan.hostile = args.hostile.unwrap_or(plan.hostile);
    plan.peak_workers = args.peak_workers.unwrap_or(plan.peak_workers).max(2);
    plan
}

pub fn run(args: Args) -> u8 {
    let plan = plan(&args);
    let faults: Vec<Fault> = match args.fault {
        FaultArg::All => Fault::ALL.to_vec(),
        FaultArg::Sigkill => vec![Fault::Sigkill],
        FaultArg::Rebalance => vec![Fault::Rebalance],
        FaultArg::KafkaRestart => vec![Fault::KafkaRestart],
        FaultArg::CassandraRestart => vec![Fault::CassandraRestart],
        FaultArg::ModelFaults => vec![Fault::ModelFaults],
        FaultArg::Tool503 => vec![Fault::Tool503],
        FaultArg::Hostile => vec![Fault::Hostile],
        FaultArg::ScaleDown => vec![Fault::ScaleDown],
        FaultArg::KillInTransaction => vec![Fault::KillInTransaction],
    };
    let started = Instant::now();
    let mut reports = Vec::new();
    for fault in faults {
        match run_fault(fault, &plan) {
            Ok(report) => {
                if !report.passed() {
                    eprintln!(
                        "turnstile chaos: {} FAILED (logs in {}):\n{}",
                        fault.name(),
                        report.log_dir.display(),
                        report.check.render_findings(10)
                    );
                }
                reports.push(report);
            }
            Err(e) => {
                eprintln!("turnstile chaos: {}: setup failed: {e}", fault.name());
                print!("{}", render_table(&reports));
                return 64;
            }
        }
    }
    print!("{}", render_table(&reports));
    for r in &reports {
        if let Some(stall) = &r.stall {
            print!("{}", stall.render(r.fault));
        }
    }
    println!(
        "seed {}, {} conversations, {} turns; total wall {:.0} s",
        plan.seed,
        plan.conversations,
        plan.turns,
        started.elapsed().as_secs_f64()
    );
    if reports.iter().all(|r| r.passed()) {
        0
    } else {
        1
    }
}
