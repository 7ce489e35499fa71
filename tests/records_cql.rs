//! Decision records through the CQL store (issue 26) against a real Cassandra node, and the
//! `turnstile replay` / `turnstile export` commands on them, run as the operator runs them (the
//! built binary). A conversation is played through the pipeline into this run's own keyspace
//! (`turnstile_test_<unix secs>_<random>`, as tests/store_cql.rs; stale ones are dropped there).
//! Start the node with `bash scripts/services.sh up`; `CQL_CONTACT` overrides the address.
//! An unreachable node fails the test, never skips it.
#![cfg(feature = "harness")]

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::path::Path;
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use turnstile::config::agents::load_catalog;
use turnstile::domain::effect::Answer;
use turnstile::domain::engine::Engine;
use turnstile::domain::turn::{Identity, Turn};
use turnstile::model::ScriptedModel;
use turnstile::pipeline::process_turn;
use turnstile::ports::{DecisionRecordStore, DecisionRow, Fence};
use turnstile::record::{config_version_of_files, decode_all, RECORDS_PER_CONVERSATION};
use turnstile::scenario::format::parse_scenario;
use turnstile::scenario::runner::settings_of;
use turnstile::store::cql::ScyllaCheckpointStore;
use turnstile::testkit::cql::{config, contact};
use turnstile::tool::ScriptedTools;

const AGENTS: &str = "config/agents.example.yaml";
const PROFILES: &str = "config/profiles.example.yaml";

fn random_u32() -> u32 {
    let mut h = RandomState::new().build_hasher();
    h.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos(),
    );
    h.finish() as u32
}

/// A keyspace of this run's own, migrated, and the store connected to it.
async fn fresh_keyspace() -> (String, ScyllaCheckpointStore) {
    let keyspace = format!(
        "turnstile_test_{}_{:08x}",
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs(),
        random_u32()
    );
    let cfg = config(&keyspace);
    if let Err(e) = ScyllaCheckpointStore::migrate(&cfg).await {
        panic!(
            "cannot migrate on Cassandra at {}: {e}; start it with `bash scripts/services.sh up`",
            contact()
        );
    }
    let store = ScyllaCheckpointStore::connect(&cfg).await.unwrap();
    (keyspace, store)
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

const CONVERSATION: &str = r#"
name: address change, then a cancellation that fails
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
    model:
      classifier: {decision: ROUTE, confidence: 0.96}
      router: {agent: retail, intent: retail_order_cancel, confidence: 0.95, arguments: {order_id: PED-2002}}
  - user: "yes"
    tools:
      retail_order_cancel.pre_validation: {eligible: true}
      retail_order_cancel: {ok: false, retryable: false, error: already shipped, code: already_shipped}
"#;

/// `turnstile ARGS` against this run's keyspace: (exit code, stdout, stderr).
fn turnstile(keyspace: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_turnstile"))
        .args(args)
        .args(["--keyspace", keyspace, "--contact", &contact()])
        .env_remove("TURNSTILE_CONFIG")
        .env_remove("TURNSTILE_PROFILES")
        .output()
        .expect("the turnstile binary runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Plays the conversation through the pipeline into the CQL store.
async fn play(store: &ScyllaCheckpointStore, identity: &Identity) {
    let mut scenario = parse_scenario(CONVERSATION, "records_cql").unwrap();
    scenario.identity = identity.clone();
    let catalog = load_catalog(Path::new(AGENTS)).unwrap();
    let mut settings = settings_of(&scenario).unwrap();
    settings.config_version =
        config_version_of_files(Path::new(AGENTS), Path::new(PROFILES)).unwrap();
    let engine = Engine::new(&catalog, &settings);
    let start = now_ms() - 60_000;
    for (i, spec) in scenario.turns.iter().enumerate() {
        let turn = Turn {
            turn_id: format!("turn-{}", i + 1),
            identity: identity.clone(),
            input: spec.input.to_input(),
            locale: spec.locale,
            at_ms: start + 1000 * i as i64,
        };
        let model = ScriptedModel::new(spec.model.clone());
        let tools = ScriptedTools::new(spec.tools.clone());
        process_turn(&engine, store, &model, &tools, &turn)
            .await
            .unwrap_or_else(|e| panic!("turn {}: {e}", i + 1));
    }
}

#[tokio::test]
async fn records_in_cql_replay_exactly_export_as_a_passing_scenario_and_show_tampering() {
    let (keyspace, store) = fresh_keyspace().await;
    let identity = Identity::new("t1", "retail-bot", &format!("s-{:08x}", random_u32()));
    play(&store, &identity).await;

    let rows = store.load_decisions(&identity).await.unwrap();
    assert_eq!(rows.len(), 5, "one record per applied turn");
    let largest = rows.iter().map(|r| r.record.len()).max().unwrap();
    assert!(largest <= 2048, "a record of {largest} B");
    let records = decode_all(&rows).unwrap();
    let ids: Vec<&str> = records.iter().map(|r| r.turn.turn_id.as_str()).collect();
    assert_eq!(ids, ["turn-1", "turn-2", "turn-3", "turn-4", "turn-5"]);
    assert_eq!(
        store.list_conversations(1000).await.unwrap(),
        vec![identity.clone()]
    );

    let (t, a, s) = (
        &identity.tenant_id,
        &identity.agent_id,
        &identity.session_id,
    );
    // Exact replay: no difference, exit 0.
    let (code, out, err) = turnstile(&keyspace, &["replay", t, a, s]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("5 turns, 0 differ, 0 model calls"), "{out}");
    assert!(out.contains("turn 3 turn-3: same"), "{out}");
    assert!(
        err.is_empty(),
        "the configuration is the one recorded: {err}"
    );

    // The unchanged configuration through --config: 0 changes, no model call.
    let (code, out, err) = turnstile(&keyspace, &["replay", t, a, s, "--config", AGENTS]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("5 turns, 0 changed, 0 model calls"), "{out}");

    // The offline canary over the store: every conversation since an hour ago.
    let (code, out, err) = turnstile(&keyspace, &["replay", "--sample", "10", "--since", "1h"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("0 of 1 conversations changed"), "{out}");
    assert!(
        out.contains("executed"),
        "the share per recorded outcome: {out}"
    );

    // Export as a scenario, then run it: it passes as exported; the CEP is masked.
    let dir = std::env::temp_dir().join(format!("turnstile-records-cql-{}", random_u32()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("exported.yaml");
    let file_arg = file.display().to_string();
    let (code, out, err) = turnstile(
        &keyspace,
        &["export", t, a, s, "--as", "scenario", "--out", &file_arg],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains("personal data masked"), "{err}");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains("01310"), "{text}");
    let scenarios = Command::new(env!("CARGO_BIN_EXE_turnstile"))
        .args(["scenarios", &file_arg])
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&scenarios.stdout);
    assert!(scenarios.status.success(), "{report}\n{text}");
    assert!(report.contains("1 passed, 0 failed"), "{report}");
    // Never over an existing file.
    let (code, _, err) = turnstile(
        &keyspace,
        &["export", t, a, s, "--as", "scenario", "--out", &file_arg],
    );
    assert_eq!(code, 73, "{err}");
    let (code, out, _) = turnstile(&keyspace, &["export", t, a, s, "--as", "conversation"]);
    assert_eq!(code, 0);
    let line: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(line["turns"][2]["expect"]["outcome"], "executed");

    // Tampering: turn 3's tool answer now says it failed; replay shows turn 3 changed, exit 1.
    let mut tampered = records[2].clone();
    for answer in &mut tampered.answers {
        if let Answer::Tool(result) = answer {
            result.outcome = turnstile::domain::transaction::AttemptOutcome::Failure;
            result.error = Some("refused".into());
        }
    }
    let row = DecisionRow {
        turn_id: "turn-3".into(),
        record: serde_json::to_vec(&tampered).unwrap(),
        expired: Vec::new(),
    };
    store
        .save_decision(
            &identity,
            &row,
            Fence {
                epoch: 1,
                offset: 0,
            },
        )
        .await
        .unwrap();
    let (code, out, err) = turnstile(&keyspace, &["replay", t, a, s]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("turn 3 turn-3: CHANGED"), "{out}");
    assert!(out.contains("turn 2 turn-2: same"), "{out}");

    // A conversation with no records, bad input: 64; an unreachable store: 69.
    let (code, _, err) = turnstile(&keyspace, &["replay", t, a, "no-such-session"]);
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("no decision records"), "{err}");
    let out = Command::new(env!("CARGO_BIN_EXE_turnstile"))
        .args(["replay", t, a, s, "--contact", "127.0.0.1:1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(69));

    // The bound: a write that expires turn 1 deletes its record (fenced like the others).
    let mut latest = rows.iter().find(|r| r.turn_id == "turn-5").unwrap().clone();
    latest.expired = vec!["turn-1".into()];
    store
        .save_decision(
            &identity,
            &latest,
            Fence {
                epoch: 1,
                offset: 1,
            },
        )
        .await
        .unwrap();
    let kept = store.load_decisions(&identity).await.unwrap();
    assert_eq!(kept.len(), 4);
    assert!(kept.len() <= RECORDS_PER_CONVERSATION);
}

/// Target: `replay --config` against a configuration that moves one example lists exactly the
/// conversations (and turns) whose decision changed. The decision model is the embeddings one
/// (`config/profiles.embeddings.yaml`, the server `scripts/services.sh up` starts on
/// 127.0.0.1:8000; `EMBEDDINGS_BASE_URL` overrides it), live in the worker and in the replay.
/// The oracle is independent of the replay: each conversation played afresh under the new
/// configuration; a fitted head may move other decisions than the moved example's, and replay
/// must list exactly those that moved.
#[tokio::test]
async fn redeciding_with_a_moved_example_lists_the_conversations_it_changes() {
    use std::sync::Arc;
    use turnstile::cli::model_args::{ModelArgs, ModelConcurrency};
    use turnstile::config::profiles::load_profiles;
    use turnstile::domain::catalog::{Catalog, Settings};
    use turnstile::model::configured::ConfiguredModel;
    use turnstile::record::RecordedOutputs;
    use turnstile::store::InMemoryCheckpointStore;
    const EMBEDDING_PROFILES: &str = "config/profiles.embeddings.yaml";
    let embeddings = std::env::var("EMBEDDINGS_BASE_URL")
        .unwrap_or_else(|_| "http://127.0.0.1:8000/v1".to_owned());
    let cache = ".cache/embeddings";
    let (keyspace, store) = fresh_keyspace().await;
    let run = random_u32();

    // The new configuration: "where is my order?" moved from the tracking examples to the
    // cancellation's.
    let text = std::fs::read_to_string(AGENTS).unwrap();
    let example = "            - where is my order?\n";
    let anchor = "            - cancel my purchase\n";
    assert!(text.contains(example) && text.contains(anchor));
    let moved = text
        .replacen(example, "", 1)
        .replacen(anchor, &format!("{anchor}{example}"), 1);
    let dir = std::env::temp_dir().join(format!("turnstile-records-moved-{run:08x}"));
    std::fs::create_dir_all(&dir).unwrap();
    let new_agents = dir.join("agents.moved.yaml");
    std::fs::write(&new_agents, moved).unwrap();
    // The embeddings profiles with a generous timeout: a call timing out on a loaded machine
    // would be a fallback, a decision that differs for the wrong reason.
    let profiles_text = std::fs::read_to_string(EMBEDDING_PROFILES).unwrap();
    assert!(profiles_text.contains("timeout_seconds: 2\n"));
    let patient = dir.join("profiles.patient.yaml");
    std::fs::write(
        &patient,
        profiles_text.replace("timeout_seconds: 2\n", "timeout_seconds: 60\n"),
    )
    .unwrap();
    let patient_arg = patient.display().to_string();

    let build = |agents: std::path::PathBuf| {
        let embeddings = embeddings.clone();
        let patient = patient.clone();
        async move {
            let catalog = Arc::new(load_catalog(&agents).unwrap());
            let settings = Arc::new(Settings {
                config_version: config_version_of_files(&agents, &patient).unwrap(),
                ..Settings::default()
            });
            let profiles = Arc::new(load_profiles(&patient).unwrap());
            let model = ModelArgs {
                model_base_url: None,
                embeddings_base_url: Some(embeddings.clone()),
                embeddings_cache_dir: Some(cache.into()),
            }
            .build_model(
                &catalog,
                &settings,
                profiles,
                &|_: &str| None,
                ModelConcurrency::default(),
            )
            .await
            .unwrap_or_else(|e| panic!("embeddings at {embeddings}: {e} (scripts/services.sh up)"));
            (catalog, settings, model)
        }
    };
    let before: (Arc<Catalog>, Arc<Settings>, ConfiguredModel) = build(AGENTS.into()).await;
    // Built here first, so the replays below load its fitted examples from the cache.
    let after = build(new_agents.clone()).await;
    let tools = ScriptedTools::default();
    let texts = [
        ("track", "where is my order?"),
        ("cancel", "cancel my purchase"),
        ("bill", "show me my bill"),
    ];
    let mut changed_by_oracle = Vec::new();
    let mut conversations = Vec::new();
    for (label, text) in texts {
        let identity = Identity::new("t1", "retail-bot", &format!("{label}-{run:08x}"));
        let turn = Turn {
            turn_id: "turn-1".into(),
            identity: identity.clone(),
            input: turnstile::domain::turn::TurnInput::Text(text.into()),
            locale: turnstile::domain::locale::Locale::En,
            at_ms: now_ms(),
        };
        let engine = Engine::new(&before.0, &before.1);
        let old = process_turn(&engine, &store, &before.2, &tools, &turn)
            .await
            .unwrap();
        let engine = Engine::new(&after.0, &after.1);
        let fresh = InMemoryCheckpointStore::new();
        let new = process_turn(&engine, &fresh, &after.2, &tools, &turn)
            .await
            .unwrap();
        let summary = |o: &turnstile::domain::effect::TurnOutcome| {
            let mut s = RecordedOutputs::of(o, b"");
            (s.digest, s.after) = (String::new(), String::new());
            s
        };
        if summary(&old.outcome) != summary(&new.outcome) {
            changed_by_oracle.push(identity.key());
        }
        conversations.push(identity);
    }
    eprintln!("decided differently under the moved example: {changed_by_oracle:?}");
    assert!(
        changed_by_oracle.contains(&conversations[0].key()),
        "the moved example's own message is decided differently: {changed_by_oracle:?}"
    );

    let new_agents = new_agents.display().to_string();
    let replay = |what: &[&str]| {
        let mut args = vec!["replay"];
        args.extend(what);
        args.extend([
            "--current-profiles",
            &patient_arg,
            "--config",
            &new_agents,
            "--profiles",
            &patient_arg,
            "--embeddings-base-url",
            &embeddings,
            "--embeddings-cache-dir",
            cache,
        ]);
        turnstile(&keyspace, &args)
    };
    for identity in &conversations {
        let (code, out, err) = replay(&["t1", "retail-bot", &identity.session_id]);
        let changed = changed_by_oracle.contains(&identity.key());
        assert_eq!(
            code,
            if changed { 1 } else { 0 },
            "{}: {out}{err}",
            identity.key()
        );
        let line = if changed {
            "turn 1 turn-1: CHANGED"
        } else {
            "turn 1 turn-1: same"
        };
        assert!(out.contains(line), "{out}");
    }
    let (code, out, err) = replay(&["--sample", "100"]);
    assert_eq!(code, 1, "{out}{err}");
    let listed: Vec<String> = out
        .lines()
        .filter_map(|l| l.strip_prefix("changed: "))
        .map(|l| l.trim_end_matches(" from turn 1").to_owned())
        .collect();
    let mut expected = changed_by_oracle.clone();
    expected.sort();
    let mut listed_sorted = listed.clone();
    listed_sorted.sort();
    assert_eq!(listed_sorted, expected, "{out}");
    assert!(
        out.contains(&format!("{} of 3 conversations changed", expected.len())),
        "{out}"
    );
}
