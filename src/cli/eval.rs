//! `turnstile eval`: check decisions on real utterances before shipping a configuration.
//!
//! - `eval recogniser PATH [--split train|val|test] [--locale en] [--json] [--show-undecided]`:
//!   the PR-6 confirmation recogniser on CLINC150's `yes` / `no` / `maybe` utterances.
//!
//! - `eval decisions --config FILE [--profiles FILE] DATA.jsonl [--json]`: first turns of fresh
//!   conversations through the real engine and the configured model (see `eval::decisions`).
//!
//! - `eval conversations --config FILE [--profiles FILE] DATA.jsonl... [--part all|dev|test]
//!   [--json] [--min-turn-accuracy F] [--min-conversation-success F] [--max-unsafe N]`: whole
//!   conversations through the worker's turn path, the model and the tool webhooks (see
//!   `eval::conversations`; its own exit codes in `cli::eval_conversations`).
//!
//! - `eval clinc150 PATH [--split val|test] [--json]`: CLINC150's intents as a configuration,
//!   decided by the embeddings router, thresholds chosen on `val` (see `eval::intent_benchmark`).
//!
//! Exit codes: 0 when the evaluation ran (whatever its figures), 64 when it could not (a file
//! that cannot be read or is not in the expected format, a split that is not in it).

use std::path::PathBuf;

use std::sync::Arc;

use crate::config::agents::load_catalog;
use crate::config::profiles::{check_profile_references, load_profiles, ModelProfile};
use crate::config::settings::settings_from_env;
use crate::config::skills::SkillProfile;
use crate::domain::catalog::Catalog;
use crate::domain::decision::RouterDecision;
use crate::domain::effect::RouterRequest;
use crate::domain::locale::Locale;
use crate::eval::clinc150::Clinc150;
use crate::eval::decisions::{self, parse_examples};
use crate::eval::intent_benchmark::{self as bench, Decision};
use crate::eval::recogniser;
use crate::model::embedding::EmbeddingModel;

pub use super::eval_conversations::ConversationsArgs;
use super::model_args::{ModelArgs, ModelConcurrency};
pub use super::EXIT_CONFIG;

#[derive(Debug, Clone, clap::Subcommand)]
pub enum Command {
    /// The confirmation recogniser (PR-6) on CLINC150's yes / no / maybe utterances: polarity
    /// errors (with the utterances) and the recall of yes and no.
    Recogniser(RecogniserArgs),
    /// First turns through the real engine and the configured model, scored against
    /// expectations: accuracy overall, per expectation and per locale, confusions, time.
    Decisions(DecisionsArgs),
    /// CLINC150's 150 intents as tools of 10 agents, `train` as their examples, decided by the
    /// embeddings router: in-scope accuracy and out-of-scope recall on `val` or `test`, at a
    /// threshold chosen on `val` + `oos_val`. A benchmark: it embeds ~18,000 utterances.
    Clinc150(Clinc150Args),
    /// Whole conversations (docs/conversations.md) through the worker's turn path,
    /// the configured model and the tool webhooks: turn accuracy and conversation success
    /// (strict, lenient, 95 % CI), by locale and outcome class, unsafe turns, transcripts of
    /// the failures (exit 0 ran, 1 a floor not met, 64 data or configuration, 69 model service
    /// unavailable). With `--through-kafka`, against a running worker (69: its brokers, topics
    /// or store unavailable).
    Conversations(Box<ConversationsArgs>),
}

#[derive(Debug, Clone, clap::Args)]
pub struct Clinc150Args {
    /// CLINC150 JSON file in its own format (tests/data/clinc150/data_train_val.json, or
    /// CLINC's data_full.json, which also holds `test`).
    pub path: PathBuf,
    /// Split to report (`oos_<split>` is its out-of-scope part).
    #[arg(long, default_value = "val", value_parser = ["val", "test"])]
    pub split: String,
    /// JSON object domain → list of intent names; default: CLINC150's domains.json, built in.
    #[arg(long)]
    pub domains: Option<PathBuf>,
    /// Model profiles file.
    #[arg(long, default_value = "config/profiles.embeddings.yaml")]
    pub profiles: PathBuf,
    /// The embeddings profile that decides (the router's).
    #[arg(long, default_value = "router")]
    pub profile: String,
    /// Overrides the profile's base URL.
    #[arg(long, env = "TURNSTILE_EMBEDDINGS_BASE_URL")]
    pub embeddings_base_url: Option<String>,
    /// Cache of embedded and fitted examples: a rerun does not embed `train` again.
    #[arg(
        long,
        env = "TURNSTILE_EMBEDDINGS_CACHE_DIR",
        default_value = ".cache/embeddings"
    )]
    pub embeddings_cache_dir: PathBuf,
    /// Print one JSON object instead of the text report.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, clap::Args)]
pub struct DecisionsArgs {
    /// JSONL: {"text", "locale": "en"|"pt-BR", "expect": TOOL|out_of_scope|human_handoff|end_session}.
    pub data: PathBuf,
    /// Agents configuration.
    #[arg(long, default_value = "config/agents.example.yaml")]
    pub config: PathBuf,
    /// Model profiles file.
    #[arg(long, default_value = "config/profiles.embeddings.yaml")]
    pub profiles: PathBuf,
    /// The assistant (agent_id) the turns talk to [default: the only one configured].
    #[arg(long)]
    pub assistant: Option<String>,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Print one JSON object instead of the text report.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, clap::Args)]
pub struct RecogniserArgs {
    /// CLINC150 JSON file in its own format (e.g. tests/data/clinc150/data_train_val.json).
    pub path: PathBuf,
    /// Split to read.
    #[arg(long, default_value = "train", value_parser = ["train", "val", "test"])]
    pub split: String,
    /// Language of the utterances (CLINC150 is English). The recogniser has one lexicon for both
    /// locales, so this labels the report.
    #[arg(long, default_value = "en")]
    pub locale: String,
    /// Print one JSON object instead of the text report.
    #[arg(long)]
    pub json: bool,
    /// Also list the yes / no utterances left undecided.
    #[arg(long)]
    pub show_undecided: bool,
}

pub fn run(command: Command) -> u8 {
    let runtime = || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| {
                eprintln!("turnstile eval: cannot start the async runtime: {e}");
                70
            })
    };
    match command {
        Command::Recogniser(args) => run_recogniser(args),
        Command::Decisions(args) => {
            runtime().map_or_else(|c| c, |rt| rt.block_on(run_decisions(args)))
        }
        Command::Clinc150(args) => {
            runtime().map_or_else(|c| c, |rt| rt.block_on(run_clinc150(args)))
        }
        Command::Conversations(args) => runtime().map_or_else(
            |c| c,
            |rt| rt.block_on(super::eval_conversations::run(*args)),
        ),
    }
}

async fn run_clinc150(args: Clinc150Args) -> u8 {
    let fail = |m: String| {
        eprintln!("turnstile eval clinc150: {m}");
        EXIT_CONFIG
    };
    let report = match clinc150(&args).await {
        Ok(r) => r,
        Err(m) => return fail(m),
    };
    if args.json {
        match serde_json::to_string(&report) {
            Ok(json) => println!("{json}"),
            Err(e) => return fail(format!("cannot encode the report: {e}")),
        }
    } else {
        print!("{}", report.render());
    }
    0
}

/// The CLINC150 benchmark: a catalog generated from the training split, an embeddings model
/// fitted on it, the threshold chosen on `val`, the asked split scored. `Err`: what to print.
async fn clinc150(args: &Clinc150Args) -> Result<bench::Report, String> {
    let data = Clinc150::load(&args.path).map_err(|e| e.to_string())?;
    let domains = clinc150_domains(args.domains.as_deref())?;
    let (train, oos_train, tuning, asked) = match (
        data.split(&args.path, "train"),
        data.split(&args.path, "oos_train"),
        bench::queries(&data, &args.path, "val"),
        bench::queries(&data, &args.path, &args.split),
    ) {
        (Ok(t), Ok(o), Ok(v), Ok(a)) => (t, o, v, a),
        (Err(e), ..) | (_, Err(e), ..) | (_, _, Err(e), _) | (.., Err(e)) => {
            return Err(e.to_string())
        }
    };
    let yaml = bench::catalog_yaml(train, oos_train, &domains)?;
    let catalog = crate::config::agents::parse_catalog(&yaml, "CLINC150 configuration")
        .map(Arc::new)
        .map_err(|e| format!("the generated configuration is invalid:\n{e}"))?;
    let env = |k: &str| std::env::var(k).ok();
    let settings = settings_from_env(env).map_err(|e| format!("invalid settings:\n{e}"))?;
    let profile = embeddings_profile(args)?;
    eprintln!(
        "turnstile eval clinc150: embedding and fitting {} examples (cached in {})...",
        train.len() + oos_train.len(),
        args.embeddings_cache_dir.display()
    );
    let fit_started = std::time::Instant::now();
    let model = EmbeddingModel::build(
        &profile,
        args.embeddings_base_url.as_deref(),
        catalog.clone(),
        Some(args.embeddings_cache_dir.clone()),
        None,
        &env,
    )
    .await
    .map_err(|e| e.to_string())?;
    let fit_seconds = fit_started.elapsed().as_secs_f64();
    let decided = decide_clinc150(&model, &tuning, &asked, &args.split).await;
    let expected: Vec<&str> = asked.iter().map(|(_, i)| *i).collect();
    let (decisions, threshold) = (&decided.decisions, decided.threshold);
    let scores = bench::score(&expected, decisions, threshold);
    let router_threshold = settings.router_confidence_threshold;
    Ok(bench::Report {
        split: args.split.clone(),
        in_scope_accuracy: scores.in_scope_accuracy,
        oos_recall: scores.oos_recall,
        oos_precision: scores.oos_precision,
        ms_per_decision_mean: decided.timing.mean_ms(),
        ms_per_decision_p95: decided.timing.p95_ms(),
        cpu_ms_per_decision_mean: 1000.0 * decided.timing.cpu_seconds
            / decisions.len().max(1) as f64,
        in_scope_count: scores.in_scope_count,
        oos_count: scores.oos_count,
        fallbacks: decided.fallbacks,
        threshold,
        threshold_rule: bench::THRESHOLD_RULE,
        val: decided.val_scores,
        at_router_threshold: bench::AtThreshold {
            threshold: router_threshold,
            scores: bench::score(&expected, decisions, router_threshold),
        },
        curve: bench::curve(&expected, decisions),
        intents: catalog
            .assistant(bench::ASSISTANT)
            .map_or(0, |a| a.tools.len()),
        domains: catalog
            .assistant(bench::ASSISTANT)
            .map_or(0, |a| a.agents.len()),
        examples: train.len() + oos_train.len(),
        fit_seconds,
    })
}

/// CLINC150's intents by domain: `--domains FILE` (a JSON object domain → [intents]), or the
/// built-in table.
fn clinc150_domains(path: Option<&std::path::Path>) -> Result<bench::Domains, String> {
    let Some(p) = path else {
        return Ok(bench::builtin_domains());
    };
    std::fs::read_to_string(p)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
        .map_err(|e| {
            format!(
                "cannot read domains from {}: {e} (fix: a JSON object domain → [intents])",
                p.display()
            )
        })
}

/// The `--profile` of `--profiles`, which must be an embeddings profile.
fn embeddings_profile(args: &Clinc150Args) -> Result<ModelProfile, String> {
    let profiles = load_profiles(&args.profiles).map_err(|e| format!("invalid profiles:\n{e}"))?;
    match SkillProfile::resolve(&args.profile, || "--profile".into(), &profiles) {
        Ok(SkillProfile::Embeddings { profile, .. }) => Ok(profile),
        Ok(SkillProfile::Chat(p)) => Err(format!(
            "profile `{}` in {} is a `{}` profile; name an embeddings profile with --profile",
            args.profile,
            args.profiles.display(),
            p.provider.as_str()
        )),
        Err(_) => Err(format!(
            "profile `{}` is not in {} (fix: --profile NAME of an embeddings profile)",
            args.profile,
            args.profiles.display()
        )),
    }
}

/// The benchmark's decisions: on `val` + `oos_val` (which choose the threshold), then on the
/// asked split (the same ones when it is `val`).
struct Clinc150Decisions {
    threshold: f64,
    val_scores: bench::Scores,
    decisions: Vec<Decision>,
    timing: bench::Timing,
    fallbacks: usize,
}

async fn decide_clinc150(
    model: &EmbeddingModel,
    tuning: &[(&str, &str)],
    asked: &[(&str, &str)],
    split: &str,
) -> Clinc150Decisions {
    let decide = |text: String| route_decision(model, text);
    let progress = |label: &'static str, total: usize| {
        move |done: usize| {
            if done % 1000 == 0 || done == total {
                eprintln!("turnstile eval clinc150: {label}: {done}/{total} decided");
            }
        }
    };
    let (val_decisions, val_timing, val_fallbacks) = bench::decide_all(
        tuning,
        decide,
        process_cpu_seconds,
        &progress("val + oos_val", tuning.len()),
    )
    .await;
    let val_expected: Vec<&str> = tuning.iter().map(|(_, i)| *i).collect();
    let threshold = bench::choose_threshold(&val_expected, &val_decisions);
    let val_scores = bench::score(&val_expected, &val_decisions, threshold);
    let (decisions, timing, fallbacks) = if split == "val" {
        (val_decisions, val_timing, val_fallbacks)
    } else {
        bench::decide_all(
            asked,
            decide,
            process_cpu_seconds,
            &progress("asked split", asked.len()),
        )
        .await
    };
    Clinc150Decisions {
        threshold,
        val_scores,
        decisions,
        timing,
        fallbacks,
    }
}

/// The embeddings router's decision on one CLINC150 query (`None`: the call failed).
async fn route_decision(model: &EmbeddingModel, text: String) -> Option<Decision> {
    let request = RouterRequest {
        message: text,
        locale: Locale::En,
        assistant: bench::ASSISTANT.to_owned(),
        active_agent: None,
        active_transaction: None,
        after_cancel: false,
    };
    match model.route(&request).await {
        Ok(RouterDecision::Route {
            intent, confidence, ..
        }) => Some(Decision { intent, confidence }),
        Ok(
            RouterDecision::OutOfScope { confidence } | RouterDecision::Topic { confidence, .. },
        ) => Some(Decision {
            intent: None,
            confidence,
        }),
        Err(_) => None,
    }
}

async fn run_decisions(args: DecisionsArgs) -> u8 {
    let fail = |m: String| {
        eprintln!("turnstile eval decisions: {m}");
        EXIT_CONFIG
    };
    let env = |k: &str| std::env::var(k).ok();
    let catalog = match load_catalog(&args.config) {
        Ok(c) => Arc::new(c),
        Err(e) => return fail(format!("invalid configuration:\n{e}")),
    };
    let settings = match settings_from_env(env) {
        Ok(s) => Arc::new(s),
        Err(e) => return fail(format!("invalid settings:\n{e}")),
    };
    let profiles = match load_profiles(&args.profiles).and_then(|p| {
        check_profile_references(&catalog, &args.config.display().to_string(), &settings, &p)
            .map(|()| p)
    }) {
        Ok(p) => Arc::new(p),
        Err(e) => return fail(format!("invalid profiles:\n{e}")),
    };
    let assistant = match chosen_assistant(&args, &catalog) {
        Ok(a) => a,
        Err(e) => return fail(e),
    };
    let tools: Vec<String> = catalog
        .assistant(&assistant)
        .map(|a| a.tools.keys().cloned().collect())
        .unwrap_or_default();
    let examples = match std::fs::read_to_string(&args.data)
        .map_err(|e| format!("cannot read {}: {e}", args.data.display()))
        .and_then(|text| {
            parse_examples(&text, &tools).map_err(|e| format!("{}: {e}", args.data.display()))
        }) {
        Ok(x) => x,
        Err(e) => return fail(e),
    };
    // One decision at a time: no cap on chat or embeddings calls.
    let concurrency = ModelConcurrency::default();
    let model = match args
        .model
        .build_model(&catalog, &settings, profiles, &env, concurrency)
        .await
    {
        Ok(m) => m,
        Err(e) => return fail(e.to_string()),
    };
    match decisions::evaluate(
        &catalog,
        &settings,
        &assistant,
        &model,
        &examples,
        process_cpu_seconds,
    )
    .await
    {
        Ok(report) if args.json => match serde_json::to_string(&report) {
            Ok(json) => {
                println!("{json}");
                0
            }
            Err(e) => fail(format!("cannot encode the report: {e}")),
        },
        Ok(report) => {
            print!("{}", report.render());
            0
        }
        Err(e) => fail(e),
    }
}

/// `--assistant`, which must be configured; without it, the configuration's only assistant.
fn chosen_assistant(args: &DecisionsArgs, catalog: &Catalog) -> Result<String, String> {
    match &args.assistant {
        Some(a) if catalog.assistant(a).is_some() => Ok(a.clone()),
        Some(a) => Err(format!(
            "assistant `{a}` is not configured in {}",
            args.config.display()
        )),
        None if catalog.assistants.len() == 1 => Ok(catalog
            .assistants
            .keys()
            .next()
            .cloned()
            .unwrap_or_default()),
        None => Err("the configuration has several assistants: name one with --assistant".into()),
    }
}

/// CPU seconds of this process, all threads (Linux `/proc/self/stat` utime + stime); 0 elsewhere.
fn process_cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the command name (which may hold spaces) start at state (field 3).
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // utime and stime are fields 14 and 15, i.e. 11 and 12 after the state; USER_HZ is 100 on Linux.
    (ticks(11) + ticks(12)) / 100.0
}

fn run_recogniser(args: RecogniserArgs) -> u8 {
    let Some(locale) = Locale::parse(&args.locale) else {
        eprintln!(
            "turnstile eval recogniser: unknown locale `{}`; use `en` or `pt-BR`",
            args.locale
        );
        return EXIT_CONFIG;
    };
    let split = Clinc150::load(&args.path).and_then(|data| {
        let split = data.split(&args.path, &args.split)?;
        Ok(recogniser::evaluate(
            &args.split,
            locale.tag(),
            split.iter().map(|(t, i)| (t.as_str(), i.as_str())),
        ))
    });
    match split {
        Ok(report) if args.json => match serde_json::to_string(&report) {
            Ok(json) => {
                println!("{json}");
                0
            }
            Err(e) => {
                eprintln!("turnstile eval recogniser: cannot encode the report: {e}");
                EXIT_CONFIG
            }
        },
        Ok(report) => {
            print!("{}", report.render(args.show_undecided));
            0
        }
        Err(e) => {
            eprintln!("turnstile eval recogniser: {e}");
            EXIT_CONFIG
        }
    }
}
