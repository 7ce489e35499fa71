//! The `turnstile` command line: thin wiring, meaningful exit codes.

// Issue 27: no function over 80 lines (threshold: clippy.toml), as in src/lib.rs.
#![cfg_attr(not(test), warn(clippy::too_many_lines))]

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mimalloc: its per-thread heaps serve the many short-lived per-turn buffers freed across runtime
/// threads without glibc malloc's arena contention and chunk consolidation.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use turnstile::cli::EXIT_CONFIG;

#[derive(Parser)]
#[command(
    name = "turnstile",
    version,
    about = "Kafka-native worker for multi-turn customer-service transactions"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the streaming worker: Kafka in, CQL checkpoints, models and tools over HTTP, replies
    /// and events out (exit 64 bad configuration, 69 store unreachable, 70 fatal Kafka error).
    Run(turnstile::cli::run::Args),
    /// Run conversation scenario files (or folders of them) against the engine.
    Scenarios {
        /// Scenario files or folders.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Play them through the real worker (Kafka, the CQL store, model and tools over HTTP);
        /// needs the broker and the store running (`bash scripts/services.sh up`).
        #[cfg(feature = "harness")]
        #[arg(long)]
        e2e: bool,
        /// Through the real worker: not in this build (the end-to-end runner is test harness,
        /// only in builds with `cargo build --features harness`); exits 64 saying so.
        #[cfg(not(feature = "harness"))]
        #[arg(long)]
        e2e: bool,
    },
    /// Load and validate the agents configuration (and optionally a profiles file).
    CheckConfig {
        /// Agents configuration file.
        #[arg(long, default_value = "config/agents.example.yaml")]
        config: PathBuf,
        /// Model profiles file.
        #[arg(long)]
        profiles: Option<PathBuf>,
    },
    /// Create the checkpoint keyspace and tables (idempotent; run on every deploy).
    Migrate(turnstile::cli::migrate::Args),
    /// Re-run a stored conversation from its decision records: the same outputs turn by turn
    /// (exit 0), a difference (exit 1); --config re-decides with another configuration,
    /// --sample N over many conversations (64 bad input, 69 store unreachable).
    Replay(turnstile::cli::replay::Args),
    /// Write a stored conversation as a scenario or a conversation-set line, sensitive values
    /// masked (64 bad input or no records, 69 store unreachable, 73 output not writable).
    Export(turnstile::cli::export::Args),
    /// Print the stored checkpoint of one conversation as JSON.
    Inspect(turnstile::cli::inspect::Args),
    /// Ask the session-control classifier about one message over HTTP (exit 0 accepted,
    /// 3 fallback, 64 configuration error).
    Classify(turnstile::cli::classify::Args),
    /// Fault harness: break real workers on purpose (SIGKILL, rebalances, broker and store
    /// restarts, model and tool faults, hostile input), then prove no turn was lost or duplicated
    /// (exit 0 pass, 1 a check failed or the run did no real work, 64 setup failed).
    /// Only in builds with `--features harness`.
    #[cfg(feature = "harness")]
    Chaos(turnstile::cli::chaos::Args),
    /// Evaluate decisions on real utterances (exit 0 when it ran, 64 when it could not).
    #[command(subcommand)]
    Eval(turnstile::cli::eval::Command),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Scenarios { paths, e2e } => match run_scenarios(&paths, e2e) {
            Ok(report) => {
                print!("{}", report.render());
                if report.failed() == 0 {
                    ExitCode::SUCCESS
                } else {
                    ExitCode::from(1)
                }
            }
            Err(e) => {
                eprintln!("turnstile scenarios: {e}");
                ExitCode::from(EXIT_CONFIG)
            }
        },
        Command::CheckConfig { config, profiles } => {
            let catalog = match turnstile::config::agents::load_catalog(&config) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("turnstile: invalid configuration:\n{e}");
                    return ExitCode::from(EXIT_CONFIG);
                }
            };
            let settings =
                match turnstile::config::settings::settings_from_env(|k| std::env::var(k).ok()) {
                    Ok(s) => s,
                    Err(e) => {
                        eprintln!("turnstile: invalid settings:\n{e}");
                        return ExitCode::from(EXIT_CONFIG);
                    }
                };
            if let Some(p) = profiles {
                let checked = turnstile::config::profiles::load_profiles(&p).and_then(|profiles| {
                    turnstile::config::profiles::check_profile_references(
                        &catalog,
                        &config.display().to_string(),
                        &settings,
                        &profiles,
                    )
                });
                if let Err(e) = checked {
                    eprintln!("turnstile: invalid profiles:\n{e}");
                    return ExitCode::from(EXIT_CONFIG);
                }
            }
            println!("configuration ok: {}", config.display());
            ExitCode::SUCCESS
        }
        Command::Run(args) => block_on_exit(turnstile::cli::run::run(args)),
        Command::Migrate(args) => block_on_exit(turnstile::cli::migrate::run(args)),
        Command::Inspect(args) => block_on_exit(turnstile::cli::inspect::run(args)),
        Command::Replay(args) => block_on_exit(turnstile::cli::replay::run(args)),
        Command::Export(args) => block_on_exit(turnstile::cli::export::run(args)),
        Command::Classify(args) => block_on_exit(turnstile::cli::classify::run(args)),
        #[cfg(feature = "harness")]
        Command::Chaos(args) => ExitCode::from(turnstile::cli::chaos::run(args)),
        Command::Eval(command) => ExitCode::from(turnstile::cli::eval::run(command)),
    }
}

/// `turnstile scenarios`: in process, or (`--e2e`, feature `harness`) through the real worker.
#[cfg(feature = "harness")]
fn run_scenarios(paths: &[PathBuf], e2e: bool) -> Result<turnstile::scenario::RunReport, String> {
    if e2e {
        turnstile::scenario::e2e::run_paths(paths)
    } else {
        turnstile::scenario::run_paths(paths)
    }
}

/// What `scenarios --e2e` says in a build without the harness (exit 64).
#[cfg(not(feature = "harness"))]
const E2E_NOT_BUILT: &str = "--e2e is not in this build: the end-to-end runner is part of the \
     test harness, which release builds leave out. Rebuild with the feature \
     (`cargo build --features harness --bin turnstile`), or drop --e2e to run the scenarios \
     in process.";

/// `turnstile scenarios` in a build without the test harness: in process only. `--e2e` is kept
/// as a flag so that an operator who asks for it is told what is missing and how to get it,
/// rather than clap's bare "unexpected argument".
#[cfg(not(feature = "harness"))]
fn run_scenarios(paths: &[PathBuf], e2e: bool) -> Result<turnstile::scenario::RunReport, String> {
    if e2e {
        return Err(E2E_NOT_BUILT.to_owned());
    }
    turnstile::scenario::run_paths(paths)
}

/// Runs an async subcommand to completion: the CQL driver needs a tokio runtime, which the
/// synchronous subcommands never pay for.
fn block_on_exit(command: impl std::future::Future<Output = u8>) -> ExitCode {
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => ExitCode::from(rt.block_on(command)),
        Err(e) => {
            eprintln!("turnstile: cannot start the async runtime: {e}");
            ExitCode::from(70)
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    /// A release build (no `harness` feature) has no `chaos` subcommand, and `scenarios --e2e`
    /// names the rebuild that brings it; with the feature both are there.
    #[test]
    fn the_harness_commands_exist_only_with_the_feature() {
        let chaos = Cli::try_parse_from(["turnstile", "chaos", "--short"]);
        let e2e = Cli::try_parse_from(["turnstile", "scenarios", "--e2e", "tests/scenarios"]);
        assert!(e2e.is_ok(), "--e2e is a flag in every build");
        #[cfg(feature = "harness")]
        assert!(chaos.is_ok(), "chaos is a subcommand with the harness");
        #[cfg(not(feature = "harness"))]
        {
            assert!(
                chaos.is_err(),
                "chaos is not a subcommand without the harness"
            );
            let err = run_scenarios(&[PathBuf::from("tests/scenarios")], true)
                .expect_err("--e2e fails without the harness");
            assert!(err.contains("--features harness"), "{err}");
        }
    }
}
