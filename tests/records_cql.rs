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
