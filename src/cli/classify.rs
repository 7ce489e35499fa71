//! `turnstile classify`: asks the session-control classifier about one message, through the real
//! HTTP adapter, and shows what the engine would do with the answer (SC-1, SC-2, SC-8).
//!
//! stdout, one JSON object per line:
//! 1. the decision: the model's `{"decision", "confidence"}` when accepted, else the fallback
//!    `{"decision": "ROUTE", "confidence": null}`;
//! 2. `{"latency_ms": N}`;
//! 3. `{"fallback": "none" | "low_confidence" | "invalid_json" | "timeout" | "error"}`.
//!
//! A fallback also prints one line on stderr naming its cause. Exit codes: 0 accepted, 3 fallback,
//! 64 configuration or usage error.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::config::agents::load_catalog;
use crate::config::profiles::load_profiles;
use crate::config::settings::settings_from_env;
use crate::config::skills::SkillProfiles;
use crate::config::ConfigErrors;
use crate::domain::catalog::{Catalog, Settings};
use crate::domain::decision::ClassifierDecision;
use crate::domain::effect::{ClassifierRequest, TransactionSummary};
use crate::domain::locale::Locale;
use crate::domain::state::{HistoryEntry, Speaker};
use crate::model::http::{OpenAiCompatibleModel, RawAnswer};
use crate::ports::CallContext;

pub const EXIT_ACCEPTED: u8 = 0;
pub const EXIT_FALLBACK: u8 = 3;
pub use super::EXIT_CONFIG;

/// Classify one message with the session-control model.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Model profiles file.
    #[arg(long, default_value = "config/profiles.example.yaml")]
    pub profiles: PathBuf,
    /// Profile to use [default: ROUTE_STICKINESS_LLM_PROFILE, else route_continuity].
    #[arg(long)]
    pub profile: Option<String>,
    /// Base URL of the chat-completions API (overrides the profile's base_url).
    #[arg(long)]
    pub base_url: Option<String>,
    /// Agents configuration (checks --active-agent names a configured domain agent).
    #[arg(long, default_value = "config/agents.example.yaml")]
    pub config: PathBuf,
    /// The domain agent handling the conversation.
    #[arg(long)]
    pub active_agent: Option<String>,
    /// The transaction in flight, as JSON:
    /// {"agent","tool","status","arguments":{},"missing_parameters":[]}.
    #[arg(long)]
    pub active_transaction: Option<String>,
    /// Previous turns, oldest first, as JSON: [{"user": "...", "assistant": "..."}].
    #[arg(long)]
    pub history: Option<String>,
    /// Previous turns the model sees at most [default: ROUTE_STICKINESS_HISTORY_TURNS].
    #[arg(long)]
    pub history_turns: Option<usize>,
    /// Locale of the message (en | pt-BR).
    #[arg(long, default_value = "en")]
    pub locale: String,
    /// The customer's message.
    pub message: String,
}

/// The first stdout line; a struct so `decision` prints first.
#[derive(Serialize)]
struct Decision {
    decision: &'static str,
    confidence: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HistoryTurnArg {
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    assistant: Option<String>,
}

fn config_error(message: impl std::fmt::Display) -> u8 {
    eprintln!("turnstile classify: {message}");
    EXIT_CONFIG
}

/// Runs the command; returns the process exit code.
pub async fn run(args: Args) -> u8 {
    let env = |k: &str| std::env::var(k).ok();
    let settings = match classifier_settings(&args, env) {
        Ok(s) => s,
        Err(e) => return config_error(format!("invalid settings:\n{e}")),
    };
    let profiles = match load_profiles(&args.profiles) {
        Ok(p) => p,
        Err(e) => return config_error(format!("invalid profiles:\n{e}")),
    };
    // Only the classifier is called: an empty catalog keeps router/interpreter profiles (and
    // their keys) out of it.
    let skills = match SkillProfiles::resolve(&Catalog::default(), &settings, &profiles) {
        Ok(s) => s,
        Err(e) => {
            return config_error(format!(
                "profile `{}` is not defined in {} (fix: pass --profile with one of: {})",
                e.profile,
                args.profiles.display(),
                e.known
            ))
        }
    };
    let catalog = match load_catalog(&args.config) {
        Ok(c) => c,
        Err(e) => return config_error(format!("invalid configuration:\n{e}")),
    };
    let request = match classifier_request(&args, &catalog, &settings) {
        Ok(r) => r,
        Err(e) => return config_error(e),
    };
    let model = match OpenAiCompatibleModel::from_skills(
        Arc::new(Catalog::default()),
        Arc::new(settings.clone()),
        &skills,
        env,
    ) {
        Ok(m) => m,
        Err(e) => return config_error(e),
    };
    let model = match &args.base_url {
        Some(url) => model.with_base_url_override(url),
        None => model,
    };
    if let Err(e) = model.check_endpoints() {
        return config_error(e);
    }
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    let turn_id = format!("classify-{now_ms}");
    let ctx = CallContext {
        turn_id: &turn_id,
        turn_at_ms: now_ms,
        speculative: false,
    };
    let raw = model.classify_raw(&request, ctx).await;
    let threshold = settings.route_stickiness_confidence_threshold;
    let latency_ms = u64::try_from(raw.latency.as_millis()).unwrap_or(u64::MAX);
    let (decision, fallback, cause) = verdict(&raw, threshold);
    println!(
        "{}",
        serde_json::to_string(&decision).unwrap_or_else(|_| "{}".into())
    );
    println!("{}", json!({ "latency_ms": latency_ms }));
    println!("{}", json!({ "fallback": fallback }));
    if fallback == "none" {
        return EXIT_ACCEPTED;
    }
    eprintln!(
        "turnstile classify: fallback to ROUTE ({fallback}): {}",
        cause.unwrap_or_else(|| "no usable answer".into())
    );
    EXIT_FALLBACK
}

/// The session-control settings of the environment, with the arguments' profile and history
/// length, and stickiness on: this command exists to call the classifier, whatever
/// ENABLE_ROUTE_STICKINESS says.
fn classifier_settings(
    args: &Args,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Settings, ConfigErrors> {
    let mut settings = settings_from_env(env)?;
    if let Some(p) = &args.profile {
        settings.route_stickiness_llm_profile = p.clone();
    }
    settings.enable_route_stickiness = true;
    if let Some(n) = args.history_turns {
        settings.route_stickiness_history_turns = n;
    }
    Ok(settings)
}

/// The classifier request the arguments describe: the message, its locale, the active agent or
/// transaction (which must exist in the configuration) and the last history turns.
fn classifier_request(
    args: &Args,
    catalog: &Catalog,
    settings: &Settings,
) -> Result<ClassifierRequest, String> {
    let locale = match serde_json::from_value::<Locale>(json!(args.locale)) {
        Ok(l) => l,
        Err(_) => return Err(format!("--locale `{}`: use en or pt-BR", args.locale)),
    };
    let active_transaction = match args.active_transaction.as_deref() {
        None => None,
        Some(text) => match serde_json::from_str::<TransactionSummary>(text) {
            Ok(t) => Some(t),
            Err(e) => return Err(format!("--active-transaction is not a transaction summary: {e} (fix: {{\"agent\":\"retail\",\"tool\":\"retail_order_cancel\",\"status\":\"COLLECTING_PARAMETERS\",\"arguments\":{{}},\"missing_parameters\":[\"order_id\"]}})")),
        },
    };
    let active_agent = args
        .active_agent
        .clone()
        .or_else(|| active_transaction.as_ref().map(|t| t.agent.clone()));
    if let Some(agent) = &active_agent {
        if !catalog
            .assistants
            .values()
            .any(|a| a.agents.contains_key(agent))
        {
            return Err(format!(
                "--active-agent `{agent}` is not a domain agent of {}",
                args.config.display()
            ));
        }
    }
    let history = match args.history.as_deref() {
        None => Vec::new(),
        Some(text) => match serde_json::from_str::<Vec<HistoryTurnArg>>(text) {
            Ok(turns) => history_entries(turns, settings.route_stickiness_history_turns),
            Err(e) => {
                return Err(format!(
                    "--history is not a list of turns: {e} (fix: [{{\"user\":\"...\",\"assistant\":\"...\"}}])"
                ))
            }
        },
    };
    Ok(ClassifierRequest {
        message: args.message.clone(),
        assistant: String::new(),
        locale,
        history,
        active_agent,
        active_transaction,
    })
}
/// SC-2: the same acceptance rule as the engine ("not below the threshold"): the decision shown,
/// the fallback reason (`none` when accepted) and why it fell back.
fn verdict(
    raw: &RawAnswer<ClassifierDecision>,
    threshold: f64,
) -> (Decision, &'static str, Option<String>) {
    let fallback_decision = Decision {
        decision: "ROUTE",
        confidence: None,
    };
    match &raw.answer {
        Ok(d) if (0.0..=1.0).contains(&d.confidence) && d.confidence >= threshold => (
            Decision {
                decision: d.decision.as_str(),
                confidence: Some(d.confidence),
            },
            "none",
            None,
        ),
        Ok(d) => (
            fallback_decision,
            "low_confidence",
            Some(format!(
                "the model answered {} with confidence {} below the threshold {threshold}",
                d.decision.as_str(),
                d.confidence
            )),
        ),
        Err(f) => (fallback_decision, f.as_str(), raw.cause.clone()),
    }
}

/// The last `max_turns` turns as history lines (SC-8).
fn history_entries(turns: Vec<HistoryTurnArg>, max_turns: usize) -> Vec<HistoryEntry> {
    let skip = turns.len().saturating_sub(max_turns);
    turns
        .into_iter()
        .enumerate()
        .skip(skip)
        .flat_map(|(i, t)| {
            let turn_id = format!("history-{i}");
            [(Speaker::User, t.user), (Speaker::Assistant, t.assistant)]
                .into_iter()
                .filter_map(move |(role, text)| {
                    text.map(|text| HistoryEntry {
                        role,
                        text,
                        turn_id: turn_id.clone(),
                        at_ms: 0,
                    })
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // SC-8: only the last N turns are passed on.
    #[test]
    fn history_keeps_the_last_turns() {
        let turns = (0..4)
            .map(|i| HistoryTurnArg {
                user: Some(format!("u{i}")),
                assistant: Some(format!("a{i}")),
            })
            .collect();
        let entries = history_entries(turns, 2);
        let texts: Vec<_> = entries.iter().map(|e| e.text.as_str()).collect();
        assert_eq!(texts, ["u2", "a2", "u3", "a3"]);
    }
}
