//! Decision records (issue 26) in process: every scenario of the project plays through the
//! worker's turn path into the in-memory store, and its records replay exactly (0 differences,
//! no model or tool); a tampered record or another configuration shows the turns that change;
//! an exported scenario passes in the scenario runner as exported, with sensitive values masked.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use turnstile::config::agents::load_catalog;
use turnstile::domain::catalog::Catalog;
use turnstile::domain::decision::{
    ClassifierDecision, InterpreterDecision, ModelAnswer, ModelFailure, RouterDecision,
};
use turnstile::domain::effect::{Answer, ClassifierRequest, InterpreterRequest, RouterRequest};
use turnstile::domain::engine::Engine;
use turnstile::model::ScriptedModel;
use turnstile::ports::{CallContext, DecisionModel, DecisionRecordStore};
use turnstile::record::replay::{redecide, replay_exact, Verdict};
use turnstile::record::{decode_all, export, DecisionRecord};
use turnstile::scenario::runner::{play_into, settings_of};
use turnstile::scenario::{load_scenario, run_paths, Scenario};
use turnstile::store::InMemoryCheckpointStore;

const CONFIG: &str = "config/agents.example.yaml";

fn scenario_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in ["tests/scenarios", "tests/conformance/examples"] {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "yaml") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

fn catalog_of(scenario: &Scenario) -> Catalog {
    let config = scenario.config.clone().unwrap_or_else(|| CONFIG.into());
    load_catalog(Path::new(&config)).unwrap()
}

/// Plays `scenario` into a fresh store and returns its records, in order.
async fn played(scenario: &Scenario) -> (InMemoryCheckpointStore, Vec<DecisionRecord>) {
    let store = InMemoryCheckpointStore::new();
    play_into(scenario, &store)
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", scenario.file));
    let rows = store.load_decisions(&scenario.identity).await.unwrap();
    (store, decode_all(&rows).unwrap())
}

/// The model of a replay that must not call one.
#[derive(Default)]
struct NoModel {
    calls: AtomicUsize,
}

impl DecisionModel for NoModel {
    async fn classify(
        &self,
        _: &ClassifierRequest,
        _: CallContext<'_>,
    ) -> ModelAnswer<ClassifierDecision> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Err(ModelFailure::Error)
    }
    async fn route(&self, _: &RouterRequest, _: CallContext<'_>) -> ModelAnswer<RouterDecision> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Err(ModelFailure::Error)
    }
    async fn interpret(
        &self,
        _: &InterpreterRequest,
        _: CallContext<'_>,
    ) -> ModelAnswer<InterpreterDecision> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Err(ModelFailure::Error)
    }
}

/// Target: replay reproduces every conversation of the scenario runs exactly. Also measures the
/// stored bytes per turn (docs/operations.md quotes the figure this prints).
#[tokio::test]
async fn every_scenario_replays_exactly_from_its_records() {
    let (mut turns, mut bytes, mut largest) = (0usize, 0usize, 0usize);
    for file in scenario_files() {
        let scenario = load_scenario(&file).unwrap();
        let (store, records) = played(&scenario).await;
        let catalog = catalog_of(&scenario);
        // The defaults, whatever the scenario's `settings:`: each record carries the settings
        // its turn ran with (SESSION_TTL, stickiness off, …) and replays under them.
        let settings = turnstile::domain::catalog::Settings::default();
        let engine = Engine::new(&catalog, &settings);
        let report = replay_exact(&engine, &records);
        let name = file.display();
        assert!(!report.turns.is_empty(), "{name}: no records kept");
        for t in &report.turns {
            assert_eq!(t.verdict, Verdict::Same, "{name}:\n{}", report.render());
        }
        for row in store.load_decisions(&scenario.identity).await.unwrap() {
            bytes += row.record.len();
            largest = largest.max(row.record.len());
        }
        turns += report.turns.len();
    }
    let mean = bytes / turns;
    eprintln!("decision records: {turns} turns, mean {mean} B, largest {largest} B per turn");
    assert!(mean <= 2048, "mean record {mean} B is over the 2 KB target");
}

/// A scenario of the example domain with a sensitive value (the address change's CEP and
/// number), a pre-validation and an execution.
const ADDRESS: &str = r#"
name: address change, then a cancellation
identity: {tenant_id: t1, agent_id: retail-bot, session_id: s-export}
turns:
  - user: i want to change where my order PED-1001 goes
    model:
      classifier: {decision: ROUTE, confidence: 0.97}
      router: {agent: retail, intent: retail_address_change, confidence: 0.95, arguments: {order_id: PED-1001}}
  - user: zip 01310-100, number 200
  - user: "yes"
    tools:
      retail_address_change: {ok: true, data: {eta: "2 days"}}
  - user: cancel my order PED-2002
    after: 10m
    model:
      classifier: {decision: ROUTE, confidence: 0.96}
      router: {agent: retail, intent: retail_order_cancel, confidence: 0.95, arguments: {order_id: PED-2002}}
  - user: "yes"
    tools:
      retail_order_cancel.pre_validation: {eligible: true}
      retail_order_cancel: {ok: false, retryable: false, error: already shipped, code: already_shipped}
"#;

async fn address_records() -> (Scenario, Vec<DecisionRecord>) {
    let scenario = turnstile::scenario::format::parse_scenario(ADDRESS, "address.yaml").unwrap();
    let (_, records) = played(&scenario).await;
    assert_eq!(records.len(), 5);
    (scenario, records)
}

#[tokio::test]
async fn a_tampered_record_is_reported_as_a_difference_at_its_turn() {
    let (scenario, mut records) = address_records().await;
    let catalog = catalog_of(&scenario);
    let settings = settings_of(&scenario).unwrap();
    let engine = Engine::new(&catalog, &settings);
    assert_eq!(replay_exact(&engine, &records).differences(), 0);

    // The tool's recorded answer of turn 3 now says it failed.
    let answer = records[2]
        .answers
        .iter_mut()
        .find_map(|a| match a {
            Answer::Tool(t) => Some(t),
            _ => None,
        })
        .expect("turn 3 executed the tool");
    answer.outcome = turnstile::domain::transaction::AttemptOutcome::Failure;
    answer.error = Some("refused".into());
    let report = replay_exact(&engine, &records);
    let rendered = report.render();
    assert!(report.differences() >= 1, "{rendered}");
    assert!(
        matches!(report.turns[2].verdict, Verdict::Changed(_)),
        "{rendered}"
    );
    assert_eq!(report.turns[1].verdict, Verdict::Same, "{rendered}");
    assert!(rendered.contains("turn 3"), "{rendered}");
    assert!(rendered.contains("transaction status"), "{rendered}");

    // A record missing from the middle: the turn after it cannot be started.
    let (_, mut records) = address_records().await;
    records.remove(1);
    let report = replay_exact(&engine, &records);
    assert!(matches!(report.turns[1].verdict, Verdict::Skipped(_)));
}

/// A live model as the scenario scripted it, turn by turn (`turn-N` is the N-th turn).
struct ScenarioModel<'a> {
    scenario: &'a Scenario,
    calls: AtomicUsize,
}

impl ScenarioModel<'_> {
    fn of_turn(&self, ctx: CallContext<'_>) -> ScriptedModel {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let n: usize = ctx.turn_id.trim_start_matches("turn-").parse().unwrap();
        ScriptedModel::new(self.scenario.turns[n - 1].model.clone())
    }
}

impl DecisionModel for ScenarioModel<'_> {
    async fn classify(
        &self,
        r: &ClassifierRequest,
        ctx: CallContext<'_>,
    ) -> ModelAnswer<ClassifierDecision> {
        self.of_turn(ctx).classify(r, ctx).await
    }
    async fn route(&self, r: &RouterRequest, ctx: CallContext<'_>) -> ModelAnswer<RouterDecision> {
        self.of_turn(ctx).route(r, ctx).await
    }
    async fn interpret(
        &self,
        r: &InterpreterRequest,
        ctx: CallContext<'_>,
    ) -> ModelAnswer<InterpreterDecision> {
        self.of_turn(ctx).interpret(r, ctx).await
    }
}

/// Target: against an unchanged configuration, `replay --config` reports 0 changes with no
/// model call; against a changed one it lists exactly the turns whose decision changed.
#[tokio::test]
async fn redeciding_lists_exactly_the_turns_a_configuration_changes() {
    let (scenario, mut records) = address_records().await;
    let catalog = catalog_of(&scenario);
    let mut settings = settings_of(&scenario).unwrap();
    settings.config_version = "v1".into();
    for r in &mut records {
        r.config = "v1".into();
    }
    let model = NoModel::default();
    let engine = Engine::new(&catalog, &settings);
    let same = redecide(&engine, &model, &records).await;
    assert_eq!(same.differences(), 0, "{}", same.render());
    assert_eq!(model.calls.load(Ordering::SeqCst), 0);

    // The new configuration: the address change needs no confirmation. Turn 2 now executes,
    // and no tool answer was recorded for that: the conversation diverges there. Turn 1 is
    // unchanged, turns 3 to 5 are not judged, turn 2 is the one listed.
    let mut new_catalog = catalog.clone();
    let assistant = new_catalog.assistants.get_mut("retail-bot").unwrap();
    assistant
        .tools
        .get_mut("retail_address_change")
        .unwrap()
        .confirmation = false;
    let mut new_settings = settings.clone();
    new_settings.config_version = "v2".into();
    let engine = Engine::new(&new_catalog, &new_settings);
    let model = ScenarioModel {
        scenario: &scenario,
        calls: AtomicUsize::new(0),
    };
    let report = redecide(&engine, &model, &records).await;
    let rendered = report.render();
    assert_eq!(report.turns[0].verdict, Verdict::Same, "{rendered}");
    assert!(
        matches!(&report.turns[1].verdict, Verdict::Diverged(why) if why.contains("retail_address_change")),
        "{rendered}"
    );
    assert!(report.turns[2..]
        .iter()
        .all(|t| matches!(t.verdict, Verdict::Skipped(_))));
    assert_eq!(report.differences(), 1, "{rendered}");
    assert!(
        model.calls.load(Ordering::SeqCst) > 0,
        "a changed configuration asks the model"
    );
}

/// Target: an exported scenario passes in the scenario runner as exported; the sensitive
/// values (CEP, house number) are masked and the export says so.
#[tokio::test]
async fn an_exported_scenario_passes_as_exported_with_sensitive_values_masked() {
    let (scenario, records) = address_records().await;
    let catalog = catalog_of(&scenario);
    let settings = settings_of(&scenario).unwrap();
    let engine = Engine::new(&catalog, &settings);
    let assistant = catalog.assistant("retail-bot").unwrap();
    let exported = export::scenario(&engine, assistant, &records, CONFIG).unwrap();
    let text = &exported.text;
    assert!(!text.contains("01310"), "the CEP is masked:\n{text}");
    assert!(text.contains("zip 55555-552, number 551"), "{text}");
    assert!(!text.contains("number 200"), "{text}");
    assert!(
        text.contains("PED-1001"),
        "order ids are not sensitive:\n{text}"
    );
    assert!(
        exported
            .notes
            .iter()
            .any(|n| n.contains("house_number, zip_code")),
        "{:?}",
        exported.notes
    );
    assert!(text.starts_with("# Exported by `turnstile export`"));

    let dir = std::env::temp_dir().join(format!("turnstile-export-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("exported.yaml");
    std::fs::write(&file, text).unwrap();
    let report = tokio::task::spawn_blocking(move || run_paths(&[file]))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(report.failed(), 0, "{}\n{text}", report.render());
    assert_eq!(report.passed(), 1);

    // The conversation-set line: outcome classes, the same masking.
    let line = export::conversation(&engine, assistant, &records).unwrap();
    let value: serde_json::Value = serde_json::from_str(line.text.trim()).unwrap();
    let outcomes: Vec<&str> = value["turns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["expect"]["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(
        outcomes,
        [
            "asks_parameter",
            "asks_confirmation",
            "executed",
            "asks_confirmation",
            "answered_other"
        ]
    );
    assert!(!line.text.contains("01310"), "{}", line.text);
}

/// Every scenario of the project, exported from its records, passes in the runner as exported
/// (the export's expectations are what happened, its scripts what the model and tools said).
#[tokio::test]
async fn every_scenario_exports_to_a_scenario_that_passes() {
    let dir = std::env::temp_dir().join(format!("turnstile-export-all-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut files = Vec::new();
    for file in scenario_files() {
        let scenario = load_scenario(&file).unwrap();
        let (_, records) = played(&scenario).await;
        let catalog = catalog_of(&scenario);
        let settings = settings_of(&scenario).unwrap();
        let engine = Engine::new(&catalog, &settings);
        let assistant = catalog.assistant(&scenario.identity.agent_id).unwrap();
        let config = scenario.config.clone().unwrap_or_else(|| CONFIG.into());
        let exported = export::scenario(&engine, assistant, &records, &config)
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let out = dir.join(file.file_name().unwrap());
        std::fs::write(&out, exported.text).unwrap();
        files.push(out);
    }
    let report = tokio::task::spawn_blocking(move || run_paths(&files))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(report.failed(), 0, "{}", report.render());
}

/// The bound: a conversation keeps at most 64 records (a turn's record leaves with its id from
/// the state's applied turn ids). Once the window is full each record carries its base state,
/// so the newest records still replay; the older kept ones say why they cannot.
#[tokio::test]
async fn a_long_conversation_keeps_64_records_and_replays_those_with_a_base() {
    use turnstile::domain::turn::{ChannelAction, Identity, Turn, TurnInput};
    use turnstile::tool::ScriptedTools;
    let catalog = load_catalog(Path::new(CONFIG)).unwrap();
    let settings = turnstile::domain::catalog::Settings::default();
    let engine = Engine::new(&catalog, &settings);
    let store = InMemoryCheckpointStore::new();
    let identity = Identity::new("t1", "retail-bot", "s-long");
    let (model, tools) = (NoModel::default(), ScriptedTools::default());
    for n in 1..=70 {
        // A hand-back with no handoff pending: applied and recorded, no model, no reply.
        let turn = Turn {
            turn_id: format!("turn-{n}"),
            identity: identity.clone(),
            input: TurnInput::Action(ChannelAction::Handback),
            locale: turnstile::domain::locale::Locale::En,
            at_ms: 1_000 * n,
        };
        turnstile::pipeline::process_turn(&engine, &store, &model, &tools, &turn)
            .await
            .unwrap();
    }
    let rows = store.load_decisions(&identity).await.unwrap();
    assert_eq!(rows.len(), 64);
    let records = decode_all(&rows).unwrap();
    assert_eq!(records[0].turn.turn_id, "turn-7");
    let report = replay_exact(&engine, &records);
    let same = report
        .turns
        .iter()
        .filter(|t| t.verdict == Verdict::Same)
        .count();
    let skipped = report
        .turns
        .iter()
        .filter(|t| matches!(t.verdict, Verdict::Skipped(_)))
        .count();
    assert_eq!((same, skipped, report.differences()), (6, 58, 0));
    assert!(report
        .render()
        .contains("turn 1 turn-7: skipped (the turns before it were not kept"));
}

/// What keeping a record costs, measured (printed, never asserted: no timing in pass/fail
/// tests): the CPU spent building and encoding every scenario turn's record, against playing the
/// same scenarios through the worker's turn path (in-memory store, records included; the agents
/// file's loading taken out). A debug build, one thread; `docs/operations.md` quotes the share
/// with this command.
#[tokio::test]
async fn record_building_cost_is_measured_against_the_turn_path() {
    use std::time::{Duration, Instant};
    use turnstile::domain::state;
    use turnstile::record::replay::trace_all;
    use turnstile::record::{digest, RecordedOutputs};
    let (mut path, mut building, mut turns) = (Duration::ZERO, Duration::ZERO, 0);
    for file in scenario_files() {
        let scenario = load_scenario(&file).unwrap();
        let started = Instant::now();
        let (_, records) = played(&scenario).await;
        path += started.elapsed();
        // The runner loads the agents file for each scenario: not turn work, taken out.
        let started = Instant::now();
        let catalog = catalog_of(&scenario);
        path = path.saturating_sub(started.elapsed());
        let settings = settings_of(&scenario).unwrap();
        let engine = Engine::new(&catalog, &settings);
        for ((before, exchanges, outcome), record) in trace_all(&engine, &records)
            .unwrap()
            .into_iter()
            .zip(&records)
        {
            // The save encodes both states anyway; the record adds digests, summary, encoding.
            let (before_bytes, after_bytes) =
                (state::encode(&before), state::encode(&outcome.state));
            let answers: Vec<Answer> = exchanges.into_iter().map(|(_, a)| a).collect();
            let started = Instant::now();
            let mut rebuilt = record.clone();
            rebuilt.before = digest(&before_bytes);
            rebuilt.answers = answers.clone();
            rebuilt.outputs = RecordedOutputs::of(&outcome, &after_bytes);
            std::hint::black_box(turnstile::record::encode(&mut rebuilt));
            building += started.elapsed();
            turns += 1;
        }
    }
    let share = 100.0 * building.as_secs_f64() / path.as_secs_f64();
    eprintln!(
        "record cost: {turns} turns, turn path {:.1} µs/turn (record included), record {:.1} µs/turn, {share:.1} %",
        path.as_secs_f64() * 1e6 / turns as f64,
        building.as_secs_f64() * 1e6 / turns as f64,
    );
}
