//! `turnstile replay TENANT AGENT SESSION`: re-runs a stored conversation through the engine
//! from its decision records (issue 26) and shows, turn by turn, that the same outputs come out.
//! `--config NEW_AGENTS [--profiles NEW]` re-decides every turn with another configuration
//! (model calls allowed, tools never called) and lists the turns whose decision changes;
//! `--sample N --since T` does that for many conversations and prints the changed share per
//! outcome. Personal data (the customer's messages) is printed only by this command, on demand.
//!
//! Exit codes: 0 the same outputs, 1 a difference (or a divergence), 64 bad arguments,
//! configuration or records (none kept, undecodable), 69 store unreachable or unusable.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::agents::load_agents_file;
use crate::config::profiles::{load_profiles, Profiles};
use crate::config::settings::settings_from_env;
use crate::domain::catalog::{Catalog, Settings};
use crate::domain::engine::Engine;
use crate::domain::turn::Identity;
use crate::model::configured::ConfiguredModel;
use crate::ports::{DecisionRecordStore, StoreError};
use crate::record::replay::{redecide, replay_exact, ConversationReport, SampleReport};
use crate::record::{config_version_of_files, decode_all, DecisionRecord};
use crate::store::cql::{CqlConfig, ScyllaCheckpointStore, DEFAULT_KEYSPACE};

use super::migrate::split_contacts;
use super::model_args::{ModelArgs, ModelConcurrency};
pub use super::EXIT_CONFIG;

pub const EXIT_SAME: u8 = 0;
pub const EXIT_DIFFERENT: u8 = 1;
pub const EXIT_UNAVAILABLE: u8 = 69;

/// Where the records are: the store's connection settings.
#[derive(Debug, Clone, clap::Args)]
pub struct StoreArgs {
    /// CQL contact point(s), comma-separated.
    #[arg(long, env = "TURNSTILE_CQL_CONTACT", default_value = crate::store::cql::DEFAULT_CONTACT)]
    pub contact: String,
    /// Keyspace holding the checkpoints and decision records.
    #[arg(long, env = "TURNSTILE_KEYSPACE", default_value = DEFAULT_KEYSPACE)]
    pub keyspace: String,
}

/// The configuration the records were decided under (the worker's own, by default).
#[derive(Debug, Clone, clap::Args)]
pub struct CurrentConfigArgs {
    /// The agents file the conversation was decided with.
    #[arg(
        long,
        env = "TURNSTILE_CONFIG",
        default_value = "config/agents.example.yaml"
    )]
    pub current_config: PathBuf,
    /// The profiles file the conversation was decided with.
    #[arg(
        long,
        env = "TURNSTILE_PROFILES",
        default_value = "config/profiles.example.yaml"
    )]
    pub current_profiles: PathBuf,
}

/// Re-run a stored conversation from its decision records.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The conversation: tenant, agent and session ids (not with --sample).
    #[arg(required_unless_present = "sample", num_args = 3, value_names = ["TENANT", "AGENT", "SESSION"])]
    pub conversation: Vec<String>,
    #[command(flatten)]
    pub current: CurrentConfigArgs,
    /// Re-decide every turn with this agents file (model calls allowed, tools answered from
    /// the records) and list the turns whose decision changes.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The profiles file of --config (default: --current-profiles).
    #[arg(long, requires = "config")]
    pub profiles: Option<PathBuf>,
    /// Replay up to N conversations from the store and print the changed share per outcome.
    #[arg(long, value_name = "N")]
    pub sample: Option<usize>,
    /// With --sample: only conversations with a turn at or after T (RFC 3339, or an age such
    /// as 24h or 7d).
    #[arg(long, value_name = "T", requires = "sample")]
    pub since: Option<String>,
    #[command(flatten)]
    pub store: StoreArgs,
    #[command(flatten)]
    pub model: ModelArgs,
}

/// A configuration as replay uses it: catalog, settings (with the version), profiles.
pub struct Loaded {
    pub catalog: Arc<Catalog>,
    pub settings: Arc<Settings>,
    pub profiles: Arc<Profiles>,
}

/// Loads an agents file and a profiles file; settings from the environment, as the worker.
pub fn load_config(agents: &Path, profiles: &Path) -> Result<Loaded, String> {
    let file = load_agents_file(agents).map_err(|e| e.to_string())?;
    let profiles_file = load_profiles(profiles).map_err(|e| e.to_string())?;
    let env = |k: &str| std::env::var(k).ok();
    let mut settings = settings_from_env(env).map_err(|e| e.to_string())?;
    settings.config_version = config_version_of_files(agents, profiles)?;
    Ok(Loaded {
        catalog: Arc::new(file.catalog),
        settings: Arc::new(settings),
        profiles: Arc::new(profiles_file),
    })
}

/// Connects to the store of `args`; `Err`: the exit code, after saying why.
pub async fn connect(command: &str, args: &StoreArgs) -> Result<ScyllaCheckpointStore, u8> {
    let cfg = CqlConfig {
        contact_points: split_contacts(&args.contact),
        keyspace: args.keyspace.clone(),
        ..CqlConfig::default()
    }
    .with_security_from(|k| std::env::var(k).ok())
    .map_err(|e| {
        eprintln!("turnstile {command}: {e}");
        EXIT_CONFIG
    })?;
    if let Err(e) = cfg.validate() {
        eprintln!("turnstile {command}: {e}");
        return Err(EXIT_CONFIG);
    }
    ScyllaCheckpointStore::connect(&cfg)
        .await
        .map_err(|e| store_failed(command, &e))
}

/// Says why the store cannot be used; always [`EXIT_UNAVAILABLE`].
pub fn store_failed(command: &str, e: &StoreError) -> u8 {
    eprintln!(
        "turnstile {command}: {e} (fix: start the store or pass --contact / --keyspace; a \
         missing decision_records table needs `turnstile migrate`)"
    );
    EXIT_UNAVAILABLE
}

/// A conversation's records, decoded and in order; `Err`: the exit code, after saying why.
pub async fn records_of<S: DecisionRecordStore>(
    command: &str,
    store: &S,
    identity: &Identity,
) -> Result<Vec<DecisionRecord>, u8> {
    let rows = store
        .load_decisions(identity)
        .await
        .map_err(|e| store_failed(command, &e))?;
    if rows.is_empty() {
        eprintln!(
            "turnstile {command}: no decision records are kept for {} (fix: check the ids; \
             records expire with the checkpoint's retention, and turns applied before this \
             release have none)",
            identity.key()
        );
        return Err(EXIT_CONFIG);
    }
    decode_all(&rows).map_err(|e| {
        eprintln!("turnstile {command}: {e}");
        EXIT_CONFIG
    })
}

pub async fn run(args: Args) -> u8 {
    let current = match load_config(&args.current.current_config, &args.current.current_profiles) {
        Ok(c) => c,
        Err(e) => return config_error(&e),
    };
    let new = match &args.config {
        None => None,
        Some(agents) => {
            let profiles = args
                .profiles
                .as_deref()
                .unwrap_or(&args.current.current_profiles);
            match load_config(agents, profiles) {
                Ok(c) => Some(c),
                Err(e) => return config_error(&e),
            }
        }
    };
    let since = match args.since.as_deref().map(parse_since).transpose() {
        Ok(s) => s,
        Err(e) => return config_error(&e),
    };
    let store = match connect("replay", &args.store).await {
        Ok(s) => s,
        Err(code) => return code,
    };
    let replayer = Replayer {
        current: &current,
        new: new.as_ref(),
        model_args: &args.model,
        model: None,
    };
    match args.sample {
        Some(n) => replay_sample(replayer, &store, n, since).await,
        None => {
            let c = &args.conversation;
            let identity = Identity::new(&c[0], &c[1], &c[2]);
            replay_one(replayer, &store, &identity).await
        }
    }
}

fn config_error(e: &str) -> u8 {
    eprintln!("turnstile replay: {e}");
    EXIT_CONFIG
}

/// `--since`: an RFC 3339 time, or an age (`24h`, `7d`) before now; milliseconds.
fn parse_since(text: &str) -> Result<i64, String> {
    if let Some(age) = crate::scenario::format::parse_duration_ms(&text.into()) {
        return Ok(crate::clock::now_ms() - age);
    }
    time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
        .map(|t| (t.unix_timestamp_nanos() / 1_000_000) as i64)
        .map_err(|_| {
            format!("--since {text}: not a time (use RFC 3339, e.g. 2026-12-01T00:00:00Z, or an age such as 24h or 7d)")
        })
}

/// What replays a conversation: exactly under the current configuration, or re-deciding
/// under the new one with its model, built on first need.
struct Replayer<'a> {
    current: &'a Loaded,
    new: Option<&'a Loaded>,
    model_args: &'a ModelArgs,
    model: Option<ConfiguredModel>,
}

impl Replayer<'_> {
    async fn replay(&mut self, records: &[DecisionRecord]) -> Result<ConversationReport, u8> {
        let Some(new) = self.new else {
            let engine = Engine::new(&self.current.catalog, &self.current.settings);
            return Ok(replay_exact(&engine, records));
        };
        let engine = Engine::new(&new.catalog, &new.settings);
        let version = &new.settings.config_version;
        if records.iter().all(|r| r.config == *version) {
            // Unchanged configuration: the recorded answers, no model built or called.
            return Ok(replay_exact(&engine, records));
        }
        if self.model.is_none() {
            self.model = Some(self.build_model(new).await?);
        }
        let model = self.model.as_ref().ok_or(EXIT_CONFIG)?;
        Ok(redecide(&engine, model, records).await)
    }

    async fn build_model(&self, new: &Loaded) -> Result<ConfiguredModel, u8> {
        let env = |k: &str| std::env::var(k).ok();
        self.model_args
            .build_model(
                &new.catalog,
                &new.settings,
                new.profiles.clone(),
                &env,
                ModelConcurrency::default(),
            )
            .await
            .map_err(|e| config_error(&format!("the model of --config: {e}")))
    }

    /// Says when the records were decided under another configuration than the one replayed.
    fn warn_versions(&self, records: &[DecisionRecord]) {
        if self.new.is_some() {
            return;
        }
        let version = &self.current.settings.config_version;
        if let Some(r) = records.iter().find(|r| r.config != *version) {
            eprintln!(
                "turnstile replay: turn {} was decided under configuration {}, and \
                 --current-config/--current-profiles are {version}: differences may come from \
                 the configuration (pass the files it ran with)",
                r.turn.turn_id, r.config
            );
        }
    }
}

async fn replay_one<S: DecisionRecordStore>(
    mut replayer: Replayer<'_>,
    store: &S,
    identity: &Identity,
) -> u8 {
    let records = match records_of("replay", store, identity).await {
        Ok(r) => r,
        Err(code) => return code,
    };
    replayer.warn_versions(&records);
    let report = match replayer.replay(&records).await {
        Ok(r) => r,
        Err(code) => return code,
    };
    print!("{}", report.render());
    let differences = report.differences();
    let verb = if replayer.new.is_some() {
        "changed"
    } else {
        "differ"
    };
    println!(
        "{} turns, {differences} {verb}, {} model calls",
        report.turns.len(),
        report.model_calls()
    );
    if differences > 0 {
        EXIT_DIFFERENT
    } else {
        EXIT_SAME
    }
}

/// Upper bound of conversations a `--since` sample scans for its N.
const SAMPLE_SCAN_FACTOR: usize = 20;

async fn replay_sample<S: DecisionRecordStore>(
    mut replayer: Replayer<'_>,
    store: &S,
    n: usize,
    since: Option<i64>,
) -> u8 {
    let scan = n.saturating_mul(if since.is_some() {
        SAMPLE_SCAN_FACTOR
    } else {
        1
    });
    let ids = match store.list_conversations(scan).await {
        Ok(ids) => ids,
        Err(e) => return store_failed("replay", &e),
    };
    let mut sample = SampleReport::default();
    for identity in ids {
        if sample.conversations >= n {
            break;
        }
        let Ok(records) = records_of("replay", store, &identity).await else {
            continue;
        };
        if since.is_some_and(|t| records.iter().all(|r| r.turn.at_ms < t)) {
            continue;
        }
        match replayer.replay(&records).await {
            Ok(report) => sample.add(&identity.key(), &report),
            Err(code) => return code,
        }
    }
    print!("{}", sample.render());
    if sample.changed_conversations > 0 {
        EXIT_DIFFERENT
    } else {
        EXIT_SAME
    }
}
