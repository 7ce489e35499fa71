//! The `turnstile` command line: thin wiring, meaningful exit codes.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Exit code for bad configuration or usage (sysexits EX_USAGE / EX_CONFIG family).
const EXIT_CONFIG: u8 = 64;

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
    /// Run conversation scenario files (or folders of them) against the engine.
    Scenarios {
        /// Scenario files or folders.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Scenarios { paths } => match turnstile::scenario::run_paths(&paths) {
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
            if let Err(e) = turnstile::config::agents::load_catalog(&config) {
                eprintln!("turnstile: invalid configuration:\n{e}");
                return ExitCode::from(EXIT_CONFIG);
            }
            if let Some(p) = profiles {
                if let Err(e) = turnstile::config::profiles::load_profiles(&p) {
                    eprintln!("turnstile: invalid profiles:\n{e}");
                    return ExitCode::from(EXIT_CONFIG);
                }
            }
            if let Err(e) =
                turnstile::config::settings::settings_from_env(|k| std::env::var(k).ok())
            {
                eprintln!("turnstile: invalid settings:\n{e}");
                return ExitCode::from(EXIT_CONFIG);
            }
            println!("configuration ok: {}", config.display());
            ExitCode::SUCCESS
        }
    }
}
