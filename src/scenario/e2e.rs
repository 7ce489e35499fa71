//! `turnstile scenarios --e2e`: plays the scenario files through the real worker. Kafka in, Kafka
//! out, checkpoints in the CQL store, the scripted model and tools served over real HTTP; only the
//! broker and the store must already run (`bash scripts/services.sh up`).
//!
//! Per run: one suffix that every topic, group, instance id, session id and turn id carries,
//! one shared keyspace ([`KEYSPACE`], unique session ids keep runs apart), one model server and
//! one tool server (scripts keyed by the unique turn ids), and one worker child process per
//! distinct (`config`, `settings`) pair, with its own topics and consumer group.
//!
//! A turn is done when its reply is visible to a `read_committed` reader (or, for a turn without
//! reply text, when the worker's group has committed past it). Then its events are read back
//! from Kafka, its state from the store, its model and tool calls from the servers, and the same
//! checker as the in-process runner ([`check_turn`](crate::scenario::runner::check_turn)) judges
//! them.
//!
//! The parts: [`run`] (what one run shares: servers, store, producer, and one worker per
//! config and settings; playing a scenario and reading each turn back), [`worker`] (one
//! `turnstile run` child process and its readiness, offsets and log) and [`outputs`] (the
//! worker's output topics as a `read_committed` reader sees them, sorted by turn).

// Test harness, never in a release build: declared behind `#[cfg(feature = "harness")]`.
// Ungating it fails `cargo check --lib --bins` (no features; scripts/test.sh) here.
#[cfg(not(feature = "harness"))]
compile_error!(
    "src/scenario/e2e.rs is test harness: keep its `mod` line behind #[cfg(feature = \"harness\")]"
);

mod outputs;
mod run;
mod worker;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use self::run::Run;
use crate::scenario::format::{load_scenario, Scenario};
use crate::scenario::runner::{collect_files, RunReport, ScenarioResult};

/// The keyspace every run shares; session ids carry the run suffix, so runs never meet.
pub const KEYSPACE: &str = "turnstile_e2e";
/// Topic names start with this, then the run suffix: `turnstile-e2e.<run>.w<n>.turns`.
pub const TOPIC_PREFIX: &str = "turnstile-e2e";
/// The profiles every worker loads; the model base URL is overridden to the model server.
pub const PROFILES: &str = "config/profiles.example.yaml";
/// Worker logs go to `<LOG_ROOT>/<run>/worker-<n>.log`.
pub const LOG_ROOT: &str = "target/e2e";

/// How long one turn (or one redelivery) may take before the scenario fails.
const TURN_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a worker may take from spawn to `/readyz` answering 200.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// After a turn is done, how long the reader may take to read everything appended to the output
/// topics up to then (the turn's events are in its reply's transaction, but the commit markers
/// land on each partition separately, so they may become readable a little later).
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(10);
/// After the group committed past a turn that showed no reply yet, how long to keep looking.
const NO_REPLY_GRACE: Duration = Duration::from_secs(1);
/// How often the worker group's committed offsets are asked for while waiting.
const COMMIT_PROBE_EVERY: Duration = Duration::from_millis(250);
/// How long a stopping worker gets between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);
const INBOUND_PARTITIONS: i32 = 4;
/// The smallest session timeout the worker accepts: a SIGKILLed member is evicted soonest, and
/// static membership lets its successor take the partitions back without waiting for that.
const SESSION_TIMEOUT_MS: u64 = 6000;
/// Must stay below the session timeout (the worker validates it).
const DRAIN_BUDGET_MS: u64 = 2000;
/// A short batch interval: each turn waits for one commit before its reply is visible.
const COMMIT_INTERVAL_MS: u64 = 20;
const LOG_TAIL_LINES: usize = 30;

/// Runs every scenario under `paths` through real workers. `Err` is a setup problem (services
/// unreachable, servers or topics not created): the caller exits 64.
pub fn run_paths(paths: &[PathBuf]) -> Result<RunReport, String> {
    let files = collect_files(paths)?;
    let mut loaded: Vec<Result<Scenario, ScenarioResult>> = Vec::with_capacity(files.len());
    for file in &files {
        loaded.push(load_scenario(file).map_err(|e| ScenarioResult::unloadable(file, e)));
    }
    let started = Instant::now();
    let mut run = Run::start()?;
    eprintln!(
        "turnstile scenarios --e2e: run {} ({} files); worker logs under {}",
        run.id,
        files.len(),
        run.log_dir.display()
    );
    // Every worker a scenario will need is started up front, so their start-ups overlap.
    let mut plans: Vec<Result<usize, String>> = Vec::with_capacity(loaded.len());
    for scenario in &loaded {
        plans.push(match scenario {
            Ok(scenario) => run.worker_for(scenario)?,
            // Never used: a scenario that did not load already has its verdict.
            Err(_) => Err(String::new()),
        });
    }
    let mut report = RunReport::default();
    for (index, (scenario, plan)) in loaded.into_iter().zip(plans).enumerate() {
        let result = match scenario {
            Err(failed) => failed,
            Ok(scenario) => {
                let failure = match plan {
                    Err(why) => Some(why),
                    Ok(w) => run.play(&scenario, index + 1, w).err(),
                };
                ScenarioResult {
                    file: scenario.file.clone(),
                    name: scenario.name.clone(),
                    failure,
                }
            }
        };
        report.results.push(result);
    }
    run.finish(report.failed() == 0);
    if !run.without_reply.is_empty() {
        eprintln!(
            "turnstile scenarios --e2e: {} turn(s) published no reply: {}",
            run.without_reply.len(),
            run.without_reply.join(", ")
        );
    }
    eprintln!(
        "turnstile scenarios --e2e: run {} took {:.1} s",
        run.id,
        started.elapsed().as_secs_f64()
    );
    Ok(report)
}
