//! Proptest-driven fuzzing of the two surfaces hostile input reaches (issue 5): inbound decoding
//! (mutations of a valid turn: flipped, inserted, deleted and truncated bytes, wrong keys) and
//! the engine step driven through `pipeline::process_turn` with arbitrary model output (any JSON
//! the model could return, any fault) and arbitrary tool results. No panic, and invariants hold.
//!
//! CI runs the default case count; `TURNSTILE_FUZZ_CASES=100000 cargo test --release --test fuzz`
//! is the long form (docs/reliability.md).

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde_json::{json, Map, Value};
use turnstile::config::agents::load_catalog;
use turnstile::domain::catalog::{Catalog, Settings};
use turnstile::domain::engine::Engine;
use turnstile::domain::locale::Locale;
use turnstile::domain::state::{self, AgentState};
use turnstile::domain::turn::{Identity, Turn, TurnInput};
use turnstile::message::{
    decode_turn, encode_dead_letter, DeadLetterMessage, DecodeLimits, InboundRecord,
};
use turnstile::model::{ModelScript, Scripted, ScriptedModel};
use turnstile::pipeline::process_turn;
use turnstile::ports::CheckpointStore;
use turnstile::store::InMemoryCheckpointStore;
use turnstile::tool::scripted::{ExecutionScript, PreValidationScript, PRE_VALIDATION_SUFFIX};
use turnstile::tool::{ScriptedTools, ToolScript};

fn cases() -> u32 {
    std::env::var("TURNSTILE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

fn catalog() -> &'static Catalog {
    static CATALOG: std::sync::OnceLock<Catalog> = std::sync::OnceLock::new();
    CATALOG.get_or_init(|| {
        load_catalog(std::path::Path::new("config/agents.example.yaml")).expect("example config")
    })
}

const KEY: &str = "acme/retail-bot/fuzz";

fn valid_body() -> Vec<u8> {
    serde_json::to_vec(&json!({
        "turn_id": "f-1",
        "tenant_id": "acme",
        "agent_id": "retail-bot",
        "session_id": "fuzz",
        "locale": "en",
        "text": "cancel my order PED-1001",
        "received_at": "2026-01-01T00:00:00.000Z",
    }))
    .expect("json")
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Insert(usize, Vec<u8>),
    Delete(usize, usize),
    Truncate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(i, b)| Mutation::Insert(i, b)),
        (any::<usize>(), 1usize..16).prop_map(|(i, n)| Mutation::Delete(i, n)),
        any::<usize>().prop_map(Mutation::Truncate),
    ]
}

fn apply(body: &mut Vec<u8>, m: &Mutation) {
    let len = body.len().max(1);
    match m {
        Mutation::Flip(i, b) => {
            if !body.is_empty() {
                body[i % len] ^= b | 1;
            }
        }
        Mutation::Insert(i, bytes) => {
            let at = i % (body.len() + 1);
            body.splice(at..at, bytes.iter().copied());
        }
        Mutation::Delete(i, n) => {
            if !body.is_empty() {
                let at = i % len;
                let end = (at + n).min(body.len());
                body.drain(at..end);
            }
        }
        Mutation::Truncate(i) => body.truncate(i % len),
    }
}

/// Any JSON a model could return: objects with the decision fields (right or wrong types), or
/// anything else.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-2.0f64..2.0).prop_map(Value::from),
        "[a-zA-Z_ 0-9é-]{0,12}".prop_map(Value::from),
        prop::sample::select(vec![
            "ROUTE",
            "CONTINUE",
            "END_SESSION",
            "HUMAN_HANDOFF",
            "retail",
            "billing",
            "retail_order_cancel",
            "billing_show_bill",
            "retail_address_change",
            "PROVIDE_VALUES",
            "CONFIRM",
            "DECLINE",
            "PED-1001",
        ])
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(2, 12, 4, |inner| {
        prop::collection::btree_map("[a-z_]{1,10}", inner, 0..4)
            .prop_map(|m| Value::Object(m.into_iter().collect()))
    })
}

fn model_entry() -> impl Strategy<Value = Option<Scripted>> {
    let field = |names: &'static [&'static str]| {
        prop::collection::vec((prop::sample::select(names.to_vec()), json_value()), 0..5)
    };
    prop_oneof![
        Just(None),
        prop::sample::select(vec!["timeout", "error", "invalid_json"])
            .prop_map(|w| { serde_json::from_value::<Scripted>(Value::from(w)).ok() }),
        field(&[
            "decision",
            "confidence",
            "agent",
            "intent",
            "arguments",
            "act",
            "values",
            "reason",
            "extra",
        ])
        .prop_map(|pairs| {
            let map: Map<String, Value> =
                pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
            Some(Scripted::Answer(map))
        }),
    ]
}

#[derive(Debug, Clone)]
struct FuzzTurn {
    text: String,
    model: ModelScript,
    tool_ok: bool,
    retryable: bool,
    eligible: bool,
    gap_s: i64,
}

fn fuzz_turn() -> impl Strategy<Value = FuzzTurn> {
    (
        prop_oneof![
            prop::sample::select(vec![
                "cancel my order",
                "PED-1001",
                "yes",
                "no",
                "show my bill",
                "I want a person",
                "bye",
                "deliver order PED-1001 to CEP 01310-100, number 45",
                "R$ 71,99",
            ])
            .prop_map(str::to_owned),
            "\\PC{0,40}",
        ],
        model_entry(),
        model_entry(),
        model_entry(),
        any::<bool>(),
        any::<bool>(),
        prop::bool::weighted(0.8),
        0i64..4_000,
    )
        .prop_map(
            |(text, c, r, i, tool_ok, retryable, eligible, gap_s)| FuzzTurn {
                text,
                model: ModelScript {
                    classifier: c,
                    router: r,
                    interpreter: i,
                },
                tool_ok,
                retryable,
                eligible,
                gap_s,
            },
        )
}

fn tools_for(t: &FuzzTurn) -> ScriptedTools {
    let mut script = BTreeMap::new();
    for tool in [
        "retail_order_cancel",
        "retail_order_tracking",
        "retail_address_change",
        "billing_contestation",
        "billing_show_bill",
    ] {
        script.insert(
            tool.to_owned(),
            ToolScript::Execution(ExecutionScript {
                ok: t.tool_ok,
                data: json!({}),
                retryable: t.retryable,
                error: (!t.tool_ok).then(|| "fuzz".to_owned()),
                code: None,
            }),
        );
        script.insert(
            format!("{tool}{PRE_VALIDATION_SUFFIX}"),
            ToolScript::PreValidation(PreValidationScript {
                eligible: t.eligible,
                reason: None,
                code: None,
                data: Value::Null,
            }),
        );
    }
    ScriptedTools::new(script)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    // IO-3: mutated valid turns under any key never panic; an accepted one is keyed by exactly its
    // identity; a refused one has a dead letter that reads back with the same reason.
    #[test]
    fn inbound_decoding_survives_mutations(
        mutations in prop::collection::vec(mutation(), 0..6),
        key_choice in 0u8..4,
        other_key in prop::collection::vec(any::<u8>(), 0..40),
    ) {
        let mut body = valid_body();
        for m in &mutations {
            apply(&mut body, m);
        }
        let key: Option<&[u8]> = match key_choice {
            0 | 1 => Some(KEY.as_bytes()),
            2 => Some(&other_key),
            _ => None,
        };
        let rec = InboundRecord {
            topic: "turns",
            partition: 3,
            offset: 42,
            key,
            payload: Some(&body),
            timestamp_ms: Some(1),
        };
        match decode_turn(&rec, &DecodeLimits::default(), catalog()) {
            Ok(turn) => {
                let expected = turn.identity.key();
                prop_assert_eq!(Some(expected.as_bytes()), key);
                prop_assert!(!turn.turn_id.is_empty());
            }
            Err(rejection) => {
                let out = encode_dead_letter(&rec, &rejection, 0);
                let back = DeadLetterMessage::from_json(&out.payload);
                prop_assert!(back.is_ok(), "{:?}", back);
                let back = back.expect("checked");
                prop_assert_eq!(back.reason, rejection.reason);
                prop_assert_eq!(back.original.offset, 42);
            }
        }
    }

    // The engine step through the pipeline with arbitrary model output and tool results: never
    // an error or a panic; each turn is applied once (a redelivery changes nothing and emits
    // nothing); the state round-trips through its encoding; an active transaction is never
    // terminal and its status is the state's.
    #[test]
    fn engine_step_survives_arbitrary_model_output(turns in prop::collection::vec(fuzz_turn(), 1..10)) {
        let rt = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
        let settings = Settings::default();
        let engine = Engine::new(catalog(), &settings);
        let store = InMemoryCheckpointStore::new();
        let identity = Identity::new("acme", "retail-bot", "fuzz");
        let mut at = 1_767_225_600_000i64;
        for (i, t) in turns.iter().enumerate() {
            at += t.gap_s * 1000;
            let turn = Turn {
                turn_id: format!("f{i}"),
                identity: identity.clone(),
                input: TurnInput::Text(t.text.clone()),
                locale: Locale::En,
                at_ms: at,
            };
            let model = ScriptedModel::new(t.model.clone());
            let tools = tools_for(t);
            let processed = rt.block_on(process_turn(&engine, &store, &model, &tools, &turn));
            prop_assert!(processed.is_ok(), "turn {i}: {:?}", processed.err());
            let processed = processed.expect("checked");
            prop_assert!(!processed.outcome.duplicate);
            let new: &AgentState = &processed.outcome.state;
            prop_assert!(new.applied_turn_ids.contains(&turn.turn_id));
            let decoded = state::decode(&state::encode(new));
            prop_assert!(decoded.as_ref().is_ok_and(|d| d == new), "state does not round-trip");
            if let Some(tx) = &new.active_transaction {
                prop_assert!(!tx.status.is_terminal());
                prop_assert_eq!(new.transaction_status, Some(tx.status));
            }
            let again = rt.block_on(process_turn(&engine, &store, &model, &tools, &turn));
            prop_assert!(again.is_ok());
            let again = again.expect("checked");
            prop_assert!(again.outcome.duplicate);
            prop_assert!(again.outcome.replies.is_empty() && again.outcome.events.is_empty());
            let stored = rt.block_on(store.load(&identity)).expect("memory store");
            let stored = stored.map(|r| state::decode(&r.state));
            prop_assert!(stored.is_some_and(|s| s.as_ref().is_ok_and(|s| s == new)));
        }
    }
}
