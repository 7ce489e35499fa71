//! `turnstile export TENANT AGENT SESSION --as scenario|conversation`: a stored conversation as
//! a scenario file (docs/scenarios.md) or a conversation-set line (docs/conversations.md), from
//! its decision records (issue 26), ready to edit into the expected behaviour and commit as a
//! test. The values of sensitive parameters are masked, and the export says so on stderr.
//! Written to standard output, or to `--out FILE` (never over an existing file).
//!
//! Exit codes: 0 exported, 64 bad arguments, configuration or records (none kept, not
//! replayable), 69 store unreachable or unusable, 73 the output file cannot be written.

use std::io::Write as _;
use std::path::PathBuf;

use crate::domain::engine::Engine;
use crate::domain::turn::Identity;
use crate::record::export::{self, ExportError, Exported};

use super::replay::{connect, load_config, records_of, CurrentConfigArgs, StoreArgs};
pub use super::EXIT_CONFIG;

pub const EXIT_OK: u8 = 0;
/// sysexits' EX_CANTCREAT.
pub const EXIT_CANNOT_WRITE: u8 = 73;

/// What to export a conversation as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A scenario file: model answers scripted from the records, expectations what happened.
    Scenario,
    /// A conversation-set line (JSONL): each turn's outcome class.
    Conversation,
}

/// Export a stored conversation as a scenario or a conversation-set line.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    pub tenant: String,
    pub agent: String,
    pub session: String,
    /// The format to write.
    #[arg(long = "as", value_enum)]
    pub format: Format,
    /// Write here instead of standard output (refused if the file exists).
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub current: CurrentConfigArgs,
    #[command(flatten)]
    pub store: StoreArgs,
}

pub async fn run(args: Args) -> u8 {
    let loaded = match load_config(&args.current.current_config, &args.current.current_profiles) {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let identity = Identity::new(&args.tenant, &args.agent, &args.session);
    let Some(assistant) = loaded.catalog.assistant(&identity.agent_id) else {
        return fail(&ExportError::UnknownAssistant(identity.agent_id.clone()).to_string());
    };
    let store = match connect("export", &args.store).await {
        Ok(s) => s,
        Err(code) => return code,
    };
    let records = match records_of("export", &store, &identity).await {
        Ok(r) => r,
        Err(code) => return code,
    };
    let engine = Engine::new(&loaded.catalog, &loaded.settings);
    let config = args.current.current_config.display().to_string();
    let exported = match args.format {
        Format::Scenario => export::scenario(&engine, assistant, &records, &config),
        Format::Conversation => export::conversation(&engine, assistant, &records),
    };
    match exported {
        Ok(e) => write(&e, args.out.as_ref()),
        Err(e) => fail(&e.to_string()),
    }
}

fn fail(e: &str) -> u8 {
    eprintln!("turnstile export: {e}");
    EXIT_CONFIG
}

fn write(exported: &Exported, out: Option<&PathBuf>) -> u8 {
    for note in &exported.notes {
        eprintln!("turnstile export: {note}");
    }
    let Some(path) = out else {
        print!("{}", exported.text);
        return EXIT_OK;
    };
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path);
    let written = file.and_then(|mut f| f.write_all(exported.text.as_bytes()));
    match written {
        Ok(()) => {
            eprintln!("turnstile export: wrote {}", path.display());
            EXIT_OK
        }
        Err(e) => {
            eprintln!(
                "turnstile export: cannot write {}: {e} (fix: a new file name; an existing file \
                 is never replaced)",
                path.display()
            );
            EXIT_CANNOT_WRITE
        }
    }
}
