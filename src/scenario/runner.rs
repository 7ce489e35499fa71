//! Runs scenario files in process: the real engine and pipeline, a scripted model, scripted
//! tools and an in-memory store that keeps nothing but checkpoint rows across a `restart`.
//!
//! Turns go through [`apply_turn`], the worker's own path, as records of one partition: each
//! delivery at the next offset, under the partition lease the in-process worker took (a
//! `restart` takes a new one), so the outbox, republish and fencing decisions run here too.
//! `redeliver` delivers the record twice more: at the same offset before its commit (the
//! stored outputs must be republished byte for byte) and at a new offset, as a channel adapter
//! retrying would (EV-1: nothing changes, nothing is emitted).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Value};

use crate::config::{agents::load_catalog, settings::apply_overrides};
use crate::domain::catalog::{Catalog, Settings};
use crate::domain::decision::Skill;
use crate::domain::engine::Engine;
use crate::domain::state::AgentState;
use crate::domain::turn::Turn;
use crate::message::Output;
use crate::model::ScriptedModel;
use crate::pipeline::{apply_turn, PipelineError, Ports, Position, ProcessedTurn, TurnResult};
use crate::ports::CheckpointStore;
use crate::scenario::format::{load_scenario, Scenario, ScenarioTurn};
use crate::scenario::matcher;
use crate::store::{CachingCheckpointStore, CheckpointCache, InMemoryCheckpointStore};
use crate::tool::ScriptedTools;

/// The scenario clock starts here (2026-01-01T00:00:00Z); each turn adds its `after`.
pub const SCENARIO_EPOCH_MS: i64 = 1_767_225_600_000;

/// The inbound topic name the runner's records carry (in the outbox and fencing).
pub const SCENARIO_TOPIC: &str = "scenario.turns";

/// The config a scenario uses when it names none.
pub const DEFAULT_CONFIG: &str = "config/agents.example.yaml";

/// One scenario's verdict.
#[derive(Debug, Clone, PartialEq)]
pub struct ScenarioResult {
    pub file: String,
    pub name: String,
    /// None when it passed; else where and why it failed.
    pub failure: Option<String>,
}

impl ScenarioResult {
    /// The verdict of a file that does not load as a scenario: failed, named after the file.
    pub fn unloadable(file: &Path, error: impl std::fmt::Display) -> ScenarioResult {
        ScenarioResult {
            file: file.display().to_string(),
            name: file
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
            failure: Some(error.to_string()),
        }
    }
}

/// All verdicts of a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunReport {
    pub results: Vec<ScenarioResult>,
}

impl RunReport {
    pub fn passed(&self) -> usize {
        self.results.iter().filter(|r| r.failure.is_none()).count()
    }

    pub fn failed(&self) -> usize {
        self.results.len() - self.passed()
    }

    /// A line per scenario, failure details indented, and the closing `N passed, M failed`.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for r in &self.results {
            match &r.failure {
                None => out.push_str(&format!("ok   {} ({})\n", r.name, r.file)),
                Some(why) => {
                    out.push_str(&format!("FAIL {} ({})\n", r.name, r.file));
                    for line in why.lines() {
                        out.push_str(&format!("     {line}\n"));
                    }
                }
            }
        }
        out.push_str(&format!(
            "{} passed, {} failed\n",
            self.passed(),
            self.failed()
        ));
        out
    }
}

/// Every `.yaml`/`.yml` file under the given files or folders, sorted, folders recursively.
pub fn collect_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            walk(p, &mut files).map_err(|e| format!("{}: cannot read folder: {e}", p.display()))?;
        } else if p.is_file() {
            files.push(p.clone());
        } else {
            return Err(format!("{}: no such file or folder", p.display()));
        }
    }
    Ok(files)
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            walk(&p, files)?;
        } else if matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")) {
            files.push(p);
        }
    }
    Ok(())
}

/// Runs every scenario under `paths`; `config` paths resolve from the current directory.
pub fn run_paths(paths: &[PathBuf]) -> Result<RunReport, String> {
    let files = collect_files(paths)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    let mut catalogs: BTreeMap<String, Result<Catalog, String>> = BTreeMap::new();
    let mut report = RunReport::default();
    for file in files {
        let result = match load_scenario(&file) {
            Err(e) => ScenarioResult::unloadable(&file, e),
            Ok(scenario) => {
                let store = InMemoryCheckpointStore::new();
                let failure = runtime
                    .block_on(run_scenario(&scenario, &mut catalogs, &store))
                    .err();
                ScenarioResult {
                    file: scenario.file.clone(),
                    name: scenario.name.clone(),
                    failure,
                }
            }
        };
        report.results.push(result);
    }
    Ok(report)
}

/// The in-process worker: everything a `restart` drops. Only the store outlives it.
struct InProcessWorker {
    catalog: Catalog,
    settings: Settings,
    /// As the Kafka worker's: each turn after a conversation's first reads the row this worker
    /// saved; a restart starts with none.
    cache: Arc<CheckpointCache>,
}

impl InProcessWorker {
    /// A worker that has just started: its cache is empty.
    fn start(catalog: Catalog, settings: Settings) -> InProcessWorker {
        InProcessWorker {
            catalog,
            settings,
            cache: Arc::new(CheckpointCache::new(SCENARIO_CACHE_BYTES)),
        }
    }
}

/// Ample for one conversation: every turn after the first is read from the cache.
const SCENARIO_CACHE_BYTES: usize = 1 << 20;

/// The partition lease a (new) in-process worker takes before its first turn (IO-4).
async fn take_lease(store: &InMemoryCheckpointStore) -> Result<i64, String> {
    store
        .acquire_epoch(SCENARIO_TOPIC, 0, "scenario-runner")
        .await
        .map_err(|e| format!("partition lease: {e}"))
}

/// Plays `scenario` into `store`, which keeps its checkpoints and decision records (replay's
/// tests run every scenario and replay what it stored). `Err`: the scenario's failure.
pub async fn play_into(scenario: &Scenario, store: &InMemoryCheckpointStore) -> Result<(), String> {
    run_scenario(scenario, &mut BTreeMap::new(), store).await
}

/// The settings `scenario` runs with: the defaults with its `settings:` applied.
pub fn settings_of(scenario: &Scenario) -> Result<Settings, String> {
    apply_overrides(&Settings::default(), &scenario.settings, &scenario.file)
        .map_err(|e| format!("settings: {e}"))
}

async fn run_scenario(
    scenario: &Scenario,
    catalogs: &mut BTreeMap<String, Result<Catalog, String>>,
    store: &InMemoryCheckpointStore,
) -> Result<(), String> {
    let config = scenario
        .config
        .clone()
        .unwrap_or_else(|| DEFAULT_CONFIG.into());
    let load = |catalogs: &mut BTreeMap<String, Result<Catalog, String>>| {
        catalogs
            .entry(config.clone())
            .or_insert_with(|| load_catalog(Path::new(&config)).map_err(|e| e.to_string()))
            .clone()
            .map_err(|e| format!("config: {e}"))
    };
    let settings = settings_of(scenario)?;
    let mut worker = InProcessWorker::start(load(catalogs)?, settings.clone());
    let mut epoch = take_lease(store).await?;
    let mut next_offset = 0_i64;
    let mut clock = SCENARIO_EPOCH_MS;
    for (i, spec) in scenario.turns.iter().enumerate() {
        let n = i + 1;
        clock += spec.after_ms;
        if spec.restart {
            drop(worker);
            worker = InProcessWorker::start(load(catalogs)?, settings.clone());
            epoch = take_lease(store).await?;
        }
        let turn = Turn {
            turn_id: format!("turn-{n}"),
            identity: scenario.identity.clone(),
            input: spec.input.to_input(),
            locale: spec.locale,
            at_ms: clock,
        };
        let engine = Engine::new(&worker.catalog, &worker.settings);
        let model = ScriptedModel::new(spec.model.clone());
        let tools = ScriptedTools::new(spec.tools.clone());
        let deliver = |offset: i64| Position {
            topic: SCENARIO_TOPIC,
            partition: 0,
            offset,
            epoch,
            committed_mark: offset,
        };
        // As the worker delivers a record: through the pipeline, with this worker's cache.
        let cached = CachingCheckpointStore::new(store, worker.cache.clone());
        let apply = |at| {
            let ports = Ports {
                store: &cached,
                model: &model,
                tools: &tools,
            };
            apply_turn(&engine, ports, &turn, at)
        };
        let at = deliver(next_offset);
        next_offset += 1;
        let (processed, outputs) = match apply(at).await.map_err(|e| format!("turn {n}: {e}"))? {
            TurnResult::Processed { processed, outputs } => (processed, outputs),
            other => {
                return Err(format!(
                    "turn {n}: delivered at a new offset under the current lease, yet {other:?}"
                ))
            }
        };
        check_turn(spec, &TurnView::of(&processed)).map_err(|e| format!("turn {n}, {e}"))?;
        if spec.redeliver {
            let again = deliver(next_offset);
            next_offset += 1;
            check_redelivery(n, &apply, at, again, &outputs, store, &turn).await?;
        }
    }
    Ok(())
}

/// A redelivered turn changes nothing (EV-1): the same record again before its commit is
/// republished from the outbox byte for byte, and the same turn id in a new record (at
/// `again_at`) is a duplicate with no outputs, no tool call and the stored state unchanged.
async fn check_redelivery<F, Fut>(
    n: usize,
    apply: &F,
    at: Position<'static>,
    again_at: Position<'static>,
    outputs: &[Output],
    store: &InMemoryCheckpointStore,
    turn: &Turn,
) -> Result<(), String>
where
    F: Fn(Position<'static>) -> Fut,
    Fut: std::future::Future<Output = Result<TurnResult, PipelineError>>,
{
    let before = store.get(&turn.identity);
    // The same record before its commit: republished from the outbox, byte for byte.
    match apply(at).await {
        Ok(TurnResult::Republished { outputs: again }) if again == outputs => {}
        Ok(TurnResult::Processed { ref processed, .. })
            if processed.outcome.duplicate && outputs.is_empty() => {}
        other => {
            return Err(format!(
                "turn {n}, redeliver at the same offset: expected the stored outputs \
                 republished unchanged (EV-1), got {other:?}"
            ))
        }
    }
    // The same turn id in a new record: a duplicate that changes nothing (EV-1).
    let again = match apply(again_at)
        .await
        .map_err(|e| format!("turn {n} (redelivered): {e}"))?
    {
        TurnResult::Processed { processed, outputs } if outputs.is_empty() => processed,
        other => {
            return Err(format!(
                "turn {n}, redeliver: the second delivery produced outputs (EV-1): {other:?}"
            ))
        }
    };
    let o = &again.outcome;
    if !o.duplicate
        || !o.replies.is_empty()
        || !o.events.is_empty()
        || !o.executed.is_empty()
        || store.get(&turn.identity) != before
    {
        return Err(format!(
            "turn {n}, redeliver: the second delivery changed something (EV-1): \
             replies {:?}, events {:?}, tool calls {}",
            o.replies,
            o.events.iter().map(|e| e.kind.as_str()).collect::<Vec<_>>(),
            o.executed.len()
        ));
    }
    Ok(())
}

/// What one turn did, as the checks see it: taken from the engine's outcome in process, or read
/// back from Kafka, the store and the test servers end to end, so both runners share one checker.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TurnView {
    /// The conversation state after the turn (the stored checkpoint).
    pub state: AgentState,
    /// Every reply text of the turn, in order.
    pub replies: Vec<String>,
    /// CloudEvents types emitted by the turn, in order.
    pub events: Vec<String>,
    /// The agent or global node the turn was routed to; `None` when it was not routed.
    pub route: Option<String>,
    /// Tool executions, one per idempotency key: `(tool, arguments)`.
    pub tool_calls: Vec<(String, Value)>,
    /// Model components consulted (duplicates allowed; compared as a set).
    pub model_calls: Vec<Skill>,
}

impl TurnView {
    /// The view of a turn the engine processed in this process.
    pub fn of(processed: &ProcessedTurn) -> TurnView {
        let outcome = &processed.outcome;
        TurnView {
            state: outcome.state.clone(),
            replies: outcome.replies.clone(),
            events: outcome
                .events
                .iter()
                .map(|e| e.kind.as_str().to_owned())
                .collect(),
            route: outcome.route.as_ref().map(|r| r.route.clone()),
            tool_calls: outcome
                .executed
                .iter()
                .map(|t| (t.tool.clone(), json!(t.arguments)))
                .collect(),
            model_calls: processed.model_calls.clone(),
        }
    }
}

/// Checks every `expect` key of a turn against what the turn did.
pub fn check_turn(spec: &ScenarioTurn, view: &TurnView) -> Result<(), String> {
    for (key, expected) in &spec.expect {
        let result = match key.as_str() {
            "reply_contains" => {
                let needle = expected.as_str().unwrap_or_default().to_lowercase();
                let text = view.replies.join("\n");
                if text.to_lowercase().contains(&needle) {
                    Ok(())
                } else {
                    Err(format!(
                        "expected the reply to contain {expected}, got {text:?}"
                    ))
                }
            }
            "missing_parameters" | "model_calls" => {
                let actual = match key.as_str() {
                    "missing_parameters" => json!(view.state.missing_parameters),
                    _ => json!(view
                        .model_calls
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()),
                };
                let dedupe = key == "model_calls";
                matcher::check(&sorted(expected, dedupe), &sorted(&actual, dedupe))
            }
            other => matcher::check(expected, &actual_of(other, view)),
        };
        result.map_err(|e| format!("key {key}: {e}"))?;
    }
    Ok(())
}

fn sorted(v: &Value, dedupe: bool) -> Value {
    let mut items: Vec<String> = v
        .as_array()
        .into_iter()
        .flatten()
        .map(|x| {
            x.as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| x.to_string())
        })
        .collect();
    items.sort();
    if dedupe {
        items.dedup();
    }
    json!(items)
}

fn actual_of(key: &str, view: &TurnView) -> Value {
    let state = &view.state;
    match key {
        "transaction_status" => json!(state.transaction_status),
        "active_transaction" => json!(state.active_transaction),
        "last_transaction" => json!(state.last_transaction),
        "next_state" => json!(state.next_state),
        "active_agent" => json!(state.active_agent),
        "human_handoff_requested" => json!(state.human_handoff_requested),
        "session_ended" => json!(state.session_ended),
        "route" => json!(view.route),
        "events" => json!(view.events),
        "tool_calls" => json!(view
            .tool_calls
            .iter()
            .map(|(tool, arguments)| json!({"tool": tool, "arguments": arguments}))
            .collect::<Vec<_>>()),
        _ => Value::Null,
    }
}
