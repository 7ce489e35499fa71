//! `turnstile eval conversations`: whole conversations through the worker's turn path, the
//! configured model and the tool webhooks (see [`crate::eval::conversations`]) — in process, or
//! with `--through-kafka` against a running worker ([`super::eval_conversations_kafka`]).
//!
//! Exit codes: 0 when it ran (whatever its figures); 1 when it ran and a floor given
//! (`--min-turn-accuracy`, `--min-conversation-success`, `--max-unsafe`) was not met; 64 when
//! the data cannot be played (a malformed line, a name the configuration lacks, an empty file)
//! or the configuration, settings or profiles are invalid (as every command); 69 when the
//! decision model cannot be built because its service is unavailable (the embeddings server,
//! as `turnstile run`), or, through Kafka, when the brokers, the worker's topics or its
//! checkpoint store are unavailable. A tool service that is down is not an error: its turns fail
//! as the worker's would. Through Kafka, a worker that does not answer is not an error either:
//! each turn it leaves unanswered fails ("no reply within N s") and counts in the figures.

use std::path::PathBuf;
use std::sync::Arc;

use crate::config::agents::load_agents_file;
use crate::config::profiles::{check_profile_references, load_profiles};
use crate::config::settings::settings_from_env;
use crate::domain::catalog::Catalog;
use crate::domain::engine::Engine;
use crate::eval::conversations::format::check_unique_ids;
use crate::eval::conversations::{
    parse_conversations, Conversation, Floors, InProcess, Part, Played, Player, Report,
};
use crate::model::configured::{ConfiguredModel, ConfiguredModelError};
use crate::model::embedding::EmbeddingModelError;
use crate::tool::HttpToolGateway;

use super::eval_conversations_kafka::{self as through_kafka, KafkaArgs};
use super::model_args::{ModelArgs, ModelConcurrency};
use super::run::EXIT_UNAVAILABLE;
use super::tool_args::ToolArgs;
use super::EXIT_CONFIG;

/// Exit code of a run whose figures miss a floor given on the command line.
pub const EXIT_FLOOR_NOT_MET: u8 = 1;

#[derive(Debug, Clone, clap::Args)]
pub struct ConversationsArgs {
    /// Conversation sets, JSONL (docs/conversations.md).
    #[arg(required = true)]
    pub data: Vec<PathBuf>,
    /// Agents configuration.
    #[arg(long)]
    pub config: PathBuf,
    /// Model profiles file.
    #[arg(long, default_value = "config/profiles.embeddings.yaml")]
    pub profiles: PathBuf,
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub tools: ToolArgs,
    #[command(flatten)]
    pub kafka: KafkaArgs,
    /// Which conversations: `test` = FNV-1a 64 of the id mod 3 == 0, `dev` = the rest.
    #[arg(long, default_value = "all", value_parser = ["all", "dev", "test"])]
    pub part: String,
    /// Print one JSON object instead of the text report.
    #[arg(long)]
    pub json: bool,
    /// Exit 1 when the strict turn accuracy is below this (0..1).
    #[arg(long)]
    pub min_turn_accuracy: Option<f64>,
    /// Exit 1 when the strict conversation success is below this (0..1).
    #[arg(long)]
    pub min_conversation_success: Option<f64>,
    /// Exit 1 when more turns than this are unsafe.
    #[arg(long)]
    pub max_unsafe: Option<usize>,
}

fn fail(code: u8, message: &str) -> u8 {
    eprintln!("turnstile eval conversations: {message}");
    code
}

/// What both ways of playing need: the configuration and the data.
struct Base {
    catalog: Arc<Catalog>,
    settings: Arc<crate::domain::catalog::Settings>,
    tool_http: crate::config::tool_http::ToolHttpSettings,
    conversations: Vec<Conversation>,
}

pub async fn run(args: ConversationsArgs) -> u8 {
    let part = Part::parse(&args.part).unwrap_or(Part::All);
    let base = match base(&args, part) {
        Ok(b) => b,
        Err(code) => return code,
    };
    // The wall clock only names this run's sessions (kept apart from earlier runs' at the tool
    // service and, through Kafka, in the worker's store); the turns' own times are fixed
    // (play::EVAL_EPOCH_MS).
    let session_prefix = format!("eval-{}", crate::clock::now_ms());
    let played = if args.kafka.through_kafka {
        through_kafka::play(
            &args.kafka,
            &base.catalog,
            &base.conversations,
            session_prefix,
        )
        .await
    } else {
        play_in_process(&args, &base, session_prefix).await
    };
    let played = match played {
        Ok(p) => p,
        Err(code) => return code,
    };
    let calls = played.model_calls.clone();
    let mut report = Report::new(part.as_str(), &played.conversations, calls);
    if args.kafka.through_kafka {
        report.mode = "kafka".to_owned();
    }
    finish(&args, report, &played)
}

/// Prints the report and names each floor not met; the exit code.
fn finish(args: &ConversationsArgs, mut report: Report, played: &Played<'_>) -> u8 {
    let floors = Floors {
        min_turn_accuracy: args.min_turn_accuracy,
        min_conversation_success: args.min_conversation_success,
        max_unsafe: args.max_unsafe,
    };
    report.floors_unmet = floors.unmet(&report);
    if args.json {
        match serde_json::to_string(&report) {
            Ok(json) => println!("{json}"),
            Err(e) => return fail(70, &format!("cannot encode the report: {e}")),
        }
    } else {
        print!("{}", report.render(&played.conversations));
    }
    for unmet in &report.floors_unmet {
        eprintln!("turnstile eval conversations: floor not met: {unmet}");
    }
    if report.floors_unmet.is_empty() {
        0
    } else {
        EXIT_FLOOR_NOT_MET
    }
}

/// Configuration, settings and data, or the exit code of what failed (already reported).
fn base(args: &ConversationsArgs, part: Part) -> Result<Base, u8> {
    let env = |k: &str| std::env::var(k).ok();
    let config_error = |m: String| fail(EXIT_CONFIG, &m);
    let file = load_agents_file(&args.config)
        .map_err(|e| config_error(format!("invalid configuration:\n{e}")))?;
    let settings = Arc::new(
        settings_from_env(env).map_err(|e| config_error(format!("invalid settings:\n{e}")))?,
    );
    let conversations =
        read_data(&args.data, &file.catalog, part).map_err(|m| fail(EXIT_CONFIG, &m))?;
    Ok(Base {
        catalog: Arc::new(file.catalog),
        settings,
        tool_http: file.tool_http,
        conversations,
    })
}

/// Plays in process with the model and tools built here, or the exit code of what failed.
async fn play_in_process<'c>(
    args: &ConversationsArgs,
    base: &'c Base,
    session_prefix: String,
) -> Result<Played<'c>, u8> {
    let (model, tools) = model_and_tools(args, base).await?;
    let player = Player {
        catalog: &base.catalog,
        transport: InProcess {
            engine: Engine::new(&base.catalog, &base.settings),
            model: &model,
            tools: &tools,
        },
        session_prefix,
        concurrency: 1,
    };
    Ok(player.play_all(&base.conversations).await)
}

/// Profiles, model and tools of an in-process run, or the exit code of what failed.
async fn model_and_tools(
    args: &ConversationsArgs,
    base: &Base,
) -> Result<(ConfiguredModel, HttpToolGateway), u8> {
    let env = |k: &str| std::env::var(k).ok();
    let config_error = |m: String| fail(EXIT_CONFIG, &m);
    let catalog = &base.catalog;
    let profiles = load_profiles(&args.profiles)
        .and_then(|p| {
            let config = args.config.display().to_string();
            check_profile_references(catalog, &config, &base.settings, &p).map(|()| p)
        })
        .map_err(|e| config_error(format!("invalid profiles:\n{e}")))?;
    let model = args
        .model
        .build_model(
            catalog,
            &base.settings,
            Arc::new(profiles),
            &env,
            ModelConcurrency::default(),
        )
        .await
        .map_err(|e| match e {
            ConfiguredModelError::Embeddings(EmbeddingModelError::Index(e)) => fail(
                EXIT_UNAVAILABLE,
                &format!("cannot build the decision model: {e}"),
            ),
            e => config_error(format!("cannot build the decision model: {e}")),
        })?;
    model.check_endpoints().map_err(|e| {
        config_error(format!(
            "{e} (fix: set base_url in the profiles file, or TURNSTILE_MODEL_BASE_URL)"
        ))
    })?;
    let tools = args
        .tools
        .build_gateway(catalog, base.tool_http)
        .map_err(|e| config_error(format!("invalid tool endpoints: {e}")))?;
    Ok((model, tools))
}

/// Every file read and checked, ids unique over all of them, then the part kept.
fn read_data(
    paths: &[PathBuf],
    catalog: &Catalog,
    part: Part,
) -> Result<Vec<Conversation>, String> {
    let mut all = Vec::new();
    for path in paths {
        let label = path.display().to_string();
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("cannot read {label}: {e}"))?;
        all.extend(parse_conversations(&text, &label, catalog).map_err(|e| e.to_string())?);
    }
    check_unique_ids(&all).map_err(|e| e.to_string())?;
    let read = all.len();
    all.retain(|c| part.contains(&c.id));
    if all.is_empty() {
        return Err(format!(
            "the {} part holds none of the {read} conversations read (fix: --part all, or more data)",
            part.as_str()
        ));
    }
    Ok(all)
}
