//! The wire formats (IO-2, IO-3): the JSON Schemas under `schemas/`, their examples, the serde
//! types of `turnstile::message`, real messages encoded from engine outcomes, dead letters of
//! hostile records, and property tests that the decoder never panics and agrees with the schema.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use jsonschema::Validator;
use proptest::prelude::*;
use serde_json::{json, Value};
use turnstile::config::agents::{load_catalog, parse_catalog};
use turnstile::domain::catalog::{Catalog, Settings};
use turnstile::domain::decision::{
    ClassifierDecision, ModelFailure, PreValidationResult, RouterDecision, SessionControl,
};
use turnstile::domain::effect::{Answer, Event, EventType, Request, RouteDecision, TurnOutcome};
use turnstile::domain::engine::{single_attempt_result, Engine, Step};
use turnstile::domain::locale::Locale;
use turnstile::domain::state::AgentState;
use turnstile::domain::transaction::TransactionStatus;
use turnstile::domain::turn::{ChannelAction, Identity, Turn, TurnInput};
use turnstile::message::{
    decode_turn, encode_dead_letter, encode_outputs, CloudEvent, DeadLetterMessage,
    DeadLetterReason, DecodeLimits, InboundRecord, Output, OutputTopic, Rejection, ReplyMessage,
    Topics, TurnMessage, CONTENT_TYPE_CLOUDEVENTS, CONTENT_TYPE_JSON, DEAD_LETTER_PAYLOAD_CAP,
    MAX_DETAIL_CHARS,
};

// ---------------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------------

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

struct Schemas {
    turn: Validator,
    reply: Validator,
    event: Validator,
    dead_letter: Validator,
}

impl Schemas {
    fn by_name(&self, name: &str) -> &Validator {
        match name {
            "turn" => &self.turn,
            "reply" => &self.reply,
            "event" => &self.event,
            "dead_letter" => &self.dead_letter,
            other => panic!("no schema named {other}"),
        }
    }

    fn for_topic(&self, topic: OutputTopic) -> &Validator {
        match topic {
            OutputTopic::Replies => &self.reply,
            OutputTopic::Events => &self.event,
            OutputTopic::DeadLetters => &self.dead_letter,
        }
    }
}

/// Draft 2020-12 with `format` asserted: `date-time` is part of the contract, not an annotation.
fn schemas() -> &'static Schemas {
    static SCHEMAS: OnceLock<Schemas> = OnceLock::new();
    SCHEMAS.get_or_init(|| {
        let load = |name: &str| {
            let path = root().join(format!("schemas/{name}.v1.json"));
            let text = std::fs::read_to_string(&path).expect("schema file");
            let schema: Value = serde_json::from_str(&text).expect("schema is JSON");
            jsonschema::draft202012::meta::validate(&schema)
                .unwrap_or_else(|e| panic!("{name}: not a valid 2020-12 schema: {e}"));
            jsonschema::draft202012::options()
                .should_validate_formats(true)
                .build(&schema)
                .unwrap_or_else(|e| panic!("{name}: {e}"))
        };
        Schemas {
            turn: load("turn"),
            reply: load("reply"),
            event: load("event"),
            dead_letter: load("dead_letter"),
        }
    })
}

fn schema_errors(v: &Validator, instance: &Value) -> Vec<String> {
    v.iter_errors(instance)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

fn example_catalog() -> &'static Catalog {
    static CATALOG: OnceLock<Catalog> = OnceLock::new();
    CATALOG.get_or_init(|| {
        load_catalog(&root().join("config/agents.example.yaml")).expect("example config")
    })
}

/// An assistant that serves only tenant `acme` (no `*` rule).
fn acme_catalog() -> Catalog {
    let yaml = r#"
assistants:
  acme-bot:
    default_locale: pt-BR
    tenants:
      - {tenant: acme, tools: "*"}
    agents:
      retail: {description: Orders placed by the customer.}
    parameters:
      order_id: {type: id, pattern: "PED-[0-9]{4,}", example: PED-1001}
    tools:
      retail_order_tracking:
        agent: retail
        description: Where an order is.
        parameters: [order_id]
"#;
    parse_catalog(yaml, "inline").expect("inline catalog")
}

fn record<'a>(key: Option<&'a [u8]>, payload: Option<&'a [u8]>) -> InboundRecord<'a> {
    InboundRecord {
        topic: "turnstile.turns.v1",
        partition: 2,
        offset: 417,
        key,
        payload,
        timestamp_ms: Some(1_767_272_400_000),
    }
}

/// Decodes `body` keyed by its own identity (or `x/y/z` when the body has none).
fn decode_keyed(body: &[u8], catalog: &Catalog) -> Result<Turn, Rejection> {
    let key = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| {
            Some(format!(
                "{}/{}/{}",
                v.get("tenant_id")?.as_str()?,
                v.get("agent_id")?.as_str()?,
                v.get("session_id")?.as_str()?
            ))
        })
        .unwrap_or_else(|| "x/y/z".into());
    decode_turn(
        &record(Some(key.as_bytes()), Some(body)),
        &DecodeLimits::default(),
        catalog,
    )
}

fn examples(kind: &str) -> Vec<(String, PathBuf)> {
    let dir = root().join("schemas/examples").join(kind);
    let mut out: Vec<(String, PathBuf)> = std::fs::read_dir(&dir)
        .expect("examples directory")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let file = p.file_name().unwrap().to_string_lossy().into_owned();
            let schema = file.split('.').next().unwrap().to_owned();
            (schema, p)
        })
        .collect();
    out.sort();
    out
}

fn name(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

// ---------------------------------------------------------------------------------------------
// Examples: schema and decoder agree
// ---------------------------------------------------------------------------------------------

// IO-2, IO-3: every valid example validates against its schema, decodes with the serde type,
// and re-encodes to the same JSON (the type carries every field the schema has).
#[test]
fn valid_examples_validate_decode_and_round_trip() {
    let all = examples("valid");
    for kind in ["turn", "reply", "event", "dead_letter"] {
        assert!(
            all.iter().filter(|(s, _)| s == kind).count() >= 2,
            "at least two valid examples of {kind}"
        );
    }
    for (schema, path) in all {
        let bytes = std::fs::read(&path).unwrap();
        let value: Value = serde_json::from_slice(&bytes).unwrap();
        let errors = schema_errors(schemas().by_name(&schema), &value);
        assert!(errors.is_empty(), "{}: {errors:?}", name(&path));
        let round_trip = match schema.as_str() {
            "turn" => {
                let turn = decode_keyed(&bytes, example_catalog())
                    .unwrap_or_else(|r| panic!("{}: {r}", name(&path)));
                assert_eq!(turn.turn_id, value["turn_id"]);
                serde_json::to_value(TurnMessage::from_json(&bytes).unwrap()).unwrap()
            }
            "reply" => serde_json::to_value(ReplyMessage::from_json(&bytes).unwrap()).unwrap(),
            "event" => serde_json::to_value(CloudEvent::from_json(&bytes).unwrap()).unwrap(),
            "dead_letter" => {
                serde_json::to_value(DeadLetterMessage::from_json(&bytes).unwrap()).unwrap()
            }
            other => panic!("{}: unknown schema prefix {other}", name(&path)),
        };
        assert_eq!(round_trip, value, "{}", name(&path));
    }
}

// IO-3: every invalid example fails the schema AND the decoder, as a schema violation (they are
// all well-formed JSON, so neither `undecodable` nor `invalid_utf8`).
#[test]
fn invalid_examples_fail_schema_and_decoder() {
    let all = examples("invalid");
    for kind in ["turn", "reply", "event", "dead_letter"] {
        assert!(
            all.iter().filter(|(s, _)| s == kind).count() >= 5,
            "at least five invalid examples of {kind}"
        );
    }
    for (schema, path) in all {
        let bytes = std::fs::read(&path).unwrap();
        let value: Value = serde_json::from_slice(&bytes).expect("invalid examples are JSON");
        assert!(
            !schemas().by_name(&schema).is_valid(&value),
            "{}: the schema accepts it",
            name(&path)
        );
        let rejection = match schema.as_str() {
            "turn" => decode_keyed(&bytes, example_catalog()).err(),
            "reply" => ReplyMessage::from_json(&bytes).err(),
            "event" => CloudEvent::from_json(&bytes).err(),
            "dead_letter" => DeadLetterMessage::from_json(&bytes).err(),
            other => panic!("{}: unknown schema prefix {other}", name(&path)),
        };
        let rejection =
            rejection.unwrap_or_else(|| panic!("{}: the decoder accepts it", name(&path)));
        assert_eq!(
            rejection.reason,
            DeadLetterReason::SchemaViolation,
            "{}: {}",
            name(&path),
            rejection.detail
        );
        assert!(
            !rejection.detail.is_empty() && rejection.detail.chars().count() <= MAX_DETAIL_CHARS
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Decoding: the turn's fields
// ---------------------------------------------------------------------------------------------

// IO-1: text, action, locale and time come from the body; time prefers received_at.
#[test]
fn decoded_turn_takes_time_locale_and_input_from_the_body() {
    let body = json!({
        "turn_id": "u1", "tenant_id": "t1", "agent_id": "retail-bot", "session_id": "s1",
        "text": "cancel PED-1001", "locale": "pt-BR",
        "sent_at": "2026-01-01T09:59:00-03:00", "received_at": "2026-01-01T13:00:00.250Z"
    })
    .to_string();
    let turn = decode_keyed(body.as_bytes(), example_catalog()).unwrap();
    assert_eq!(turn.identity, Identity::new("t1", "retail-bot", "s1"));
    assert_eq!(turn.input, TurnInput::Text("cancel PED-1001".into()));
    assert_eq!(turn.locale, Locale::PtBr);
    assert_eq!(turn.at_ms, 1_767_272_400_250, "received_at wins");

    let body = json!({
        "turn_id": "u2", "tenant_id": "t1", "agent_id": "retail-bot", "session_id": "s1",
        "action": {"type": "decline"}, "sent_at": "2026-01-01T10:00:00-03:00"
    })
    .to_string();
    let turn = decode_keyed(body.as_bytes(), example_catalog()).unwrap();
    assert_eq!(turn.input, TurnInput::Action(ChannelAction::Decline));
    assert_eq!(turn.locale, Locale::En, "absent: the assistant's default");
    assert_eq!(turn.at_ms, 1_767_272_400_000, "else sent_at");
}

// ST-6 depends on turn time: without body times the record timestamp is used, else 0.
#[test]
fn turn_time_falls_back_to_record_timestamp_then_zero() {
    let body =
        br#"{"turn_id":"u","tenant_id":"acme","agent_id":"acme-bot","session_id":"s","text":"oi"}"#;
    let catalog = acme_catalog();
    let decode = |ts: Option<i64>| {
        let r = InboundRecord {
            timestamp_ms: ts,
            ..record(Some(b"acme/acme-bot/s"), Some(body))
        };
        decode_turn(&r, &DecodeLimits::default(), &catalog).unwrap()
    };
    assert_eq!(decode(Some(1_234)).at_ms, 1_234);
    assert_eq!(decode(None).at_ms, 0);
    assert_eq!(decode(Some(-1)).at_ms, 0, "Kafka's -1 means no timestamp");
    assert_eq!(
        decode(None).locale,
        Locale::PtBr,
        "no locale in the body: the assistant's default_locale"
    );
}

// ---------------------------------------------------------------------------------------------
// Hostile inputs: each maps to its reason, and its dead letter is valid
// ---------------------------------------------------------------------------------------------

fn good_body() -> Value {
    json!({"turn_id": "u1", "tenant_id": "acme", "agent_id": "acme-bot", "session_id": "s1", "text": "oi"})
}

fn with(field: &str, value: Value) -> Vec<u8> {
    let mut body = good_body();
    body[field] = value;
    body.to_string().into_bytes()
}

/// Checks the dead letter of a rejected record: schema-valid, lossless copy, deterministic id.
fn assert_dead_letter(rec: &InboundRecord<'_>, rejection: &Rejection) -> DeadLetterMessage {
    let out = encode_dead_letter(rec, rejection, 1_767_272_400_500);
    assert_eq!(out.topic(), OutputTopic::DeadLetters);
    assert_eq!(out.kind.wire_name(), "dead_letter");
    assert_eq!(out.content_type(), CONTENT_TYPE_JSON);
    let value: Value = serde_json::from_slice(&out.payload).unwrap();
    let errors = schema_errors(&schemas().dead_letter, &value);
    assert!(errors.is_empty(), "{errors:?}");
    let dl = DeadLetterMessage::from_json(&out.payload).unwrap();
    assert_eq!(dl.output_id, out.output_id);
    assert_eq!(dl.reason, rejection.reason);
    assert_eq!(dl.created_at, "2026-01-01T13:00:00.500Z");
    assert_eq!(dl.original.topic, rec.topic);
    assert_eq!(dl.original.partition, rec.partition);
    assert_eq!(dl.original.offset, rec.offset);
    assert_eq!(dl.original.timestamp_ms, rec.timestamp_ms);
    let payload = rec.payload.unwrap_or_default();
    assert_eq!(dl.original.payload_size, payload.len() as u64);
    if let Some(copy) = &dl.original.payload_base64 {
        let copy = BASE64.decode(copy).unwrap();
        let kept = payload.len().min(DEAD_LETTER_PAYLOAD_CAP);
        assert_eq!(copy, payload[..kept], "the copy is the original's prefix");
        assert_eq!(dl.original.truncated, kept < payload.len());
    } else {
        assert!(rec.payload.is_none(), "null only for a tombstone");
    }
    match rec.key {
        Some(k) => {
            let copy = dl.original.key_base64.as_deref().unwrap();
            assert_eq!(BASE64.decode(copy).unwrap(), k);
            assert_eq!(out.key, String::from_utf8_lossy(k));
        }
        None => assert!(dl.original.key.is_none() && dl.original.key_base64.is_none()),
    }
    let again = encode_dead_letter(rec, rejection, 9_999_999_999_999);
    assert_eq!(
        again.output_id, out.output_id,
        "EV-1: the same record, the same id"
    );
    dl
}

fn reject(key: Option<&[u8]>, payload: Option<&[u8]>) -> DeadLetterReason {
    let catalog = acme_catalog();
    let rec = record(key, payload);
    let rejection = decode_turn(&rec, &DecodeLimits::default(), &catalog)
        .expect_err("a hostile record is rejected");
    assert!(!rejection.detail.is_empty() && rejection.detail.chars().count() <= MAX_DETAIL_CHARS);
    assert_dead_letter(&rec, &rejection);
    rejection.reason
}

const KEY: &[u8] = b"acme/acme-bot/s1";

// IO-3: the good body is accepted, so each case below fails for its own reason only.
#[test]
fn the_baseline_body_is_accepted() {
    let body = good_body().to_string();
    let rec = record(Some(KEY), Some(body.as_bytes()));
    let turn = decode_turn(&rec, &DecodeLimits::default(), &acme_catalog()).unwrap();
    assert_eq!(turn.identity.key().as_bytes(), KEY);
}

// IO-3: not JSON.
#[test]
fn malformed_json_is_undecodable() {
    for body in [
        &b"{\"turn_id\": \"u1\", "[..],
        b"hello",
        b"{\"turn_id\":\"u1\"} trailing",
        b"{\"unknown\": 1, broken",
        b"{\"text\": \"\\ud800\"}",
        b"\xef\xbb\xbf{}",
    ] {
        assert_eq!(
            reject(Some(KEY), Some(body)),
            DeadLetterReason::Undecodable,
            "{}",
            String::from_utf8_lossy(body)
        );
    }
    let deep = "[".repeat(10_000);
    assert_eq!(
        reject(Some(KEY), Some(deep.as_bytes())),
        DeadLetterReason::Undecodable,
        "nesting past serde_json's recursion limit is refused, not a stack overflow"
    );
}

// IO-3: a tombstone (no payload) and an empty payload.
#[test]
fn empty_payload_and_tombstone_are_undecodable() {
    assert_eq!(reject(Some(KEY), None), DeadLetterReason::Undecodable);
    assert_eq!(reject(Some(KEY), Some(b"")), DeadLetterReason::Undecodable);
    assert_eq!(reject(None, None), DeadLetterReason::Undecodable);
}

// IO-3: wrong types, unknown fields, both/neither of text and action, bad locale and timestamps.
#[test]
fn schema_violations_are_named() {
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("text is a number", with("text", json!(5))),
        ("turn_id is null", with("turn_id", Value::Null)),
        ("tenant_id is an array", with("tenant_id", json!(["acme"]))),
        ("unknown field", with("user", json!("ana"))),
        (
            "both text and action",
            with("action", json!({"type": "confirm"})),
        ),
        ("bad action", with("action", json!({"type": "yes"}))),
        ("locale fr", with("locale", json!("fr"))),
        ("locale null", with("locale", Value::Null)),
        ("timestamp words", with("received_at", json!("yesterday"))),
        ("timestamp epoch", with("sent_at", json!(1_767_272_400))),
        (
            "timestamp month 13",
            with("sent_at", json!("2026-13-01T00:00:00Z")),
        ),
        ("metadata number", with("metadata", json!({"n": 1}))),
        ("text too long", with("text", json!("a".repeat(4001)))),
        ("session with slash", with("session_id", json!("s/1"))),
        ("not an object", b"[1, 2]".to_vec()),
        ("a string", b"\"hi\"".to_vec()),
    ];
    for (what, body) in cases {
        assert_eq!(
            reject(Some(KEY), Some(&body)),
            DeadLetterReason::SchemaViolation,
            "{what}"
        );
    }
    let mut neither = good_body();
    neither.as_object_mut().unwrap().remove("text");
    assert_eq!(
        reject(Some(KEY), Some(neither.to_string().as_bytes())),
        DeadLetterReason::SchemaViolation,
        "neither text nor action"
    );
}

// IO-3: the detail names the problem and the fix.
#[test]
fn rejection_details_name_the_field_and_the_fix() {
    let catalog = acme_catalog();
    let body = with("text", json!(5));
    let r = decode_turn(
        &record(Some(KEY), Some(&body)),
        &DecodeLimits::default(),
        &catalog,
    )
    .unwrap_err();
    assert!(
        r.detail.contains("`text`") && r.detail.contains("schemas/turn.v1.json"),
        "{}",
        r.detail
    );
    let body = with("user", json!("ana"));
    let r = decode_turn(
        &record(Some(KEY), Some(&body)),
        &DecodeLimits::default(),
        &catalog,
    )
    .unwrap_err();
    assert!(r.detail.contains("unknown field `user`"), "{}", r.detail);
    let body = with("action", json!({"type": "confirm"}));
    let r = decode_turn(
        &record(Some(KEY), Some(&body)),
        &DecodeLimits::default(),
        &catalog,
    )
    .unwrap_err();
    assert!(r.detail.contains("exactly one"), "{}", r.detail);
}

// IO-3: a payload over the cap is refused before parsing; its dead letter keeps a capped copy.
#[test]
fn huge_payload_is_oversized_and_its_copy_truncated() {
    let text = "a".repeat(300 * 1024);
    let body = with("text", json!(text));
    assert!(body.len() > DEAD_LETTER_PAYLOAD_CAP);
    let catalog = acme_catalog();
    let rec = record(Some(KEY), Some(&body));
    let r = decode_turn(&rec, &DecodeLimits::default(), &catalog).unwrap_err();
    assert_eq!(r.reason, DeadLetterReason::Oversized);
    let dl = assert_dead_letter(&rec, &r);
    assert!(dl.original.truncated);
    assert!(
        encode_dead_letter(&rec, &r, 0).payload.len() < 1_000_000,
        "a dead letter fits Kafka's default 1 MB message limit"
    );
    // Just over a small configured cap: still oversized, though well-formed.
    let small = DecodeLimits {
        max_payload_bytes: 32,
    };
    let body = good_body().to_string();
    let r = decode_turn(&record(Some(KEY), Some(body.as_bytes())), &small, &catalog).unwrap_err();
    assert_eq!(r.reason, DeadLetterReason::Oversized);
}

// IO-3: invalid UTF-8 in the payload.
#[test]
fn invalid_utf8_is_named() {
    let mut body = good_body().to_string().into_bytes();
    let at = body.len() - 3;
    body[at] = 0xff;
    assert_eq!(
        reject(Some(KEY), Some(&body)),
        DeadLetterReason::InvalidUtf8
    );
    assert_eq!(
        reject(Some(KEY), Some(b"\xc3\x28")),
        DeadLetterReason::InvalidUtf8
    );
}

// IO-3: an agent_id that names no assistant.
#[test]
fn unknown_agent_is_named() {
    let body = with("agent_id", json!("ghost-bot"));
    assert_eq!(
        reject(Some(b"acme/ghost-bot/s1"), Some(&body)),
        DeadLetterReason::UnknownAgent
    );
}

// IO-3, ST-3: a tenant the assistant does not serve (no "*" rule) never reaches the engine.
#[test]
fn unknown_tenant_is_named() {
    let body = with("tenant_id", json!("globex"));
    assert_eq!(
        reject(Some(b"globex/acme-bot/s1"), Some(&body)),
        DeadLetterReason::UnknownTenant
    );
}

// IO-1, IO-3: the Kafka key must be exactly the body's identity.
#[test]
fn key_body_mismatch_is_named() {
    let body = good_body().to_string();
    for key in [
        &b"acme/acme-bot/s2"[..],
        b"ACME/acme-bot/s1",
        b"acme/acme-bot/s1 ",
        b"acme/acme-bot",
        b"",
        b"\xff\xfe",
    ] {
        assert_eq!(
            reject(Some(key), Some(body.as_bytes())),
            DeadLetterReason::KeyMismatch,
            "{key:?}"
        );
    }
    assert_eq!(
        reject(None, Some(body.as_bytes())),
        DeadLetterReason::KeyMismatch,
        "a keyless turn could land in any partition"
    );
}

// IO-3: reasons set by the worker (checkpoint, engine) dead-letter the same way, with a detail
// bounded even when the worker builds the Rejection by hand.
#[test]
fn worker_reasons_encode_and_detail_is_bounded() {
    let body = good_body().to_string();
    let rec = record(Some(KEY), Some(body.as_bytes()));
    for reason in [
        DeadLetterReason::CheckpointUndecodable,
        DeadLetterReason::EngineError,
    ] {
        let rejection = Rejection {
            reason,
            detail: "é".repeat(5_000),
        };
        let dl = assert_dead_letter(&rec, &rejection);
        assert_eq!(dl.detail.chars().count(), MAX_DETAIL_CHARS);
    }
    assert_eq!(
        Rejection::new(DeadLetterReason::EngineError, "x".repeat(600))
            .detail
            .chars()
            .count(),
        MAX_DETAIL_CHARS
    );
}

// The metric label of each reason is its wire value (schema enum).
#[test]
fn reason_labels_match_the_schema_enum() {
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("schemas/dead_letter.v1.json")).unwrap(),
    )
    .unwrap();
    let wire: Vec<&str> = schema["properties"]["reason"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let ours: Vec<&str> = DeadLetterReason::ALL.iter().map(|r| r.as_str()).collect();
    assert_eq!(wire, ours);
    for r in DeadLetterReason::ALL {
        assert_eq!(serde_json::to_value(r).unwrap(), r.as_str());
    }
}

// ---------------------------------------------------------------------------------------------
// Outputs of real engine turns
// ---------------------------------------------------------------------------------------------

/// Runs one turn through the engine, answering every request as a cooperative world would:
/// the classifier routes, the router picks `retail_order_cancel`, the tool is eligible and works.
fn run_turn(state: &AgentState, turn: &Turn) -> TurnOutcome {
    let catalog = example_catalog();
    let settings = Settings::default();
    let engine = Engine::new(catalog, &settings);
    let mut answers = Vec::new();
    loop {
        match engine.step(state, turn, &answers).expect("engine step") {
            Step::Done(outcome) => return *outcome,
            Step::Need(request) => answers.push(match request {
                Request::Classify(_) => Answer::Classifier(Ok(ClassifierDecision {
                    decision: SessionControl::Route,
                    confidence: 0.99,
                })),
                Request::Route(_) => Answer::Router(Ok(RouterDecision::Route {
                    agent: "retail".into(),
                    intent: Some("retail_order_cancel".into()),
                    confidence: 0.99,
                    arguments: BTreeMap::new(),
                })),
                Request::Interpret(_) => Answer::Interpreter(Err(ModelFailure::Error)),
                Request::PreValidate(_) => Answer::PreValidation(PreValidationResult {
                    eligible: true,
                    reason: None,
                    code: None,
                    data: json!({}),
                    at_ms: turn.at_ms,
                }),
                Request::PersistExecuting(_) => Answer::Persisted,
                Request::Execute(r) => Answer::Tool(single_attempt_result(
                    &r.idempotency_key,
                    true,
                    false,
                    json!({"cancelled": true}),
                    None,
                    turn.at_ms,
                )),
            }),
        }
    }
}

fn turn(id: &str, input: TurnInput, at_ms: i64) -> Turn {
    Turn {
        turn_id: id.into(),
        identity: Identity::new("t1", "retail-bot", "5511999990000"),
        input,
        locale: Locale::En,
        at_ms,
    }
}

/// Every output of a turn: schema-valid, readable by its serde type, consistent with the turn.
fn check_outputs(turn: &Turn, outcome: &TurnOutcome, outputs: &[Output]) {
    let key = turn.identity.key();
    let texts: Vec<&str> = outcome
        .replies
        .iter()
        .map(String::as_str)
        .filter(|t| !t.is_empty())
        .collect();
    let has_reply = !texts.is_empty();
    assert_eq!(outputs.len(), usize::from(has_reply) + outcome.events.len());
    for out in outputs {
        let value: Value = serde_json::from_slice(&out.payload).unwrap();
        let errors = schema_errors(schemas().for_topic(out.topic()), &value);
        assert!(
            errors.is_empty(),
            "{}: {errors:?}\n{value:#}",
            out.kind.wire_name()
        );
        assert_eq!(out.key, key, "IO-1: outputs keyed by the identity");
    }
    let mut rest = outputs;
    if has_reply {
        let reply = ReplyMessage::from_json(&outputs[0].payload).unwrap();
        assert_eq!(outputs[0].topic(), OutputTopic::Replies);
        assert_eq!(outputs[0].kind.wire_name(), "reply");
        assert_eq!(outputs[0].content_type(), CONTENT_TYPE_JSON);
        assert_eq!(reply.output_id, outputs[0].output_id);
        assert_eq!(reply.text, texts.join("\n"));
        assert_eq!(reply.turn_id, turn.turn_id);
        assert_eq!(reply.locale, turn.locale);
        assert_eq!(reply.route, outcome.route.as_ref().map(|r| r.route.clone()));
        assert_eq!(reply.transaction_status, outcome.state.transaction_status);
        rest = &outputs[1..];
    }
    for (out, event) in rest.iter().zip(&outcome.events) {
        let ce = CloudEvent::from_json(&out.payload).unwrap();
        assert_eq!(out.topic(), OutputTopic::Events);
        assert_eq!(out.content_type(), CONTENT_TYPE_CLOUDEVENTS);
        assert_eq!(out.kind.wire_name(), event.kind.as_str());
        assert_eq!(ce.kind, event.kind, "the engine's order is kept");
        assert_eq!(ce.id, out.output_id);
        assert_eq!(ce.subject, key);
        assert_eq!(ce.source, "turnstile/retail-bot");
        assert_eq!(ce.turnid, turn.turn_id);
        assert_eq!(Value::Object(ce.data), event.data);
    }
}

// IO-2, EV-1: a whole conversation (start, fill, pre-validate, confirm, execute, handoff,
// hand-back, handoff again, end)
// through the real engine: every reply and event validates, and ids are stable across re-runs
// and clocks but distinct across turns.
#[test]
fn engine_outputs_validate_and_ids_are_deterministic() {
    let script = [
        turn(
            "u1",
            TurnInput::Text("I want to cancel my order".into()),
            1_000,
        ),
        turn("u2", TurnInput::Text("PED-1001".into()), 2_000),
        turn("u3", TurnInput::Action(ChannelAction::Confirm), 3_000),
        turn("u4", TurnInput::Text("cancel my order".into()), 4_000),
        turn("u5", TurnInput::Action(ChannelAction::Handoff), 5_000),
        turn("u6", TurnInput::Action(ChannelAction::Handback), 6_000),
        turn("u7", TurnInput::Action(ChannelAction::Handoff), 7_000),
        turn("u8", TurnInput::Action(ChannelAction::End), 8_000),
    ];
    let mut state = AgentState::default();
    let mut seen_ids = std::collections::BTreeSet::new();
    let mut seen_kinds = std::collections::BTreeSet::new();
    for t in &script {
        let outcome = run_turn(&state, t);
        let outputs = encode_outputs(t, &outcome, 1_767_272_400_000 + t.at_ms);
        check_outputs(t, &outcome, &outputs);
        let replayed = encode_outputs(t, &run_turn(&state, t), 1_900_000_000_000);
        let ids = |o: &[Output]| o.iter().map(|o| o.output_id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&outputs), ids(&replayed), "EV-1: same turn, same ids");
        for o in &outputs {
            assert!(
                seen_ids.insert(o.output_id.clone()),
                "ids differ across turns"
            );
            seen_kinds.insert(o.kind.wire_name());
        }
        state = outcome.state;
    }
    for kind in [
        "reply",
        "transaction.started",
        "transaction.completed",
        "session.human_handoff.requested",
        "session.handback.completed",
        "session.end.requested",
        "transaction.cancelled",
    ] {
        assert!(
            seen_kinds.contains(kind),
            "the script covers {kind}: {seen_kinds:?}"
        );
    }
}

// ST-5 through the engine: the inconsistent-state event validates too.
#[test]
fn inconsistent_state_event_validates() {
    let state = AgentState {
        transaction_status: Some(TransactionStatus::CollectingParameters),
        ..Default::default()
    };
    let t = turn("u9", TurnInput::Action(ChannelAction::Confirm), 1_000);
    let outcome = run_turn(&state, &t);
    assert_eq!(outcome.events[0].kind, EventType::StateInconsistent);
    check_outputs(&t, &outcome, &encode_outputs(&t, &outcome, 0));
}

fn hand_outcome(replies: Vec<String>, events: Vec<Event>) -> TurnOutcome {
    TurnOutcome {
        state: AgentState::default(),
        duplicate: false,
        replies,
        events,
        route: Some(RouteDecision {
            route: "retail".into(),
            intent: None,
            handoff: false,
            session_control: None,
        }),
        executed: vec![],
        fallbacks: vec![],
        inconsistencies: vec![],
        transitions: vec![],
        settled_without_model: None,
        results: vec![],
        handback: None,
    }
}

// IO-2, Events: all nine contract types encode to schema-valid CloudEvents, in the given order;
// a turn with no text publishes no reply, and event ids do not depend on the reply's presence.
#[test]
fn every_event_type_encodes_and_reply_absence_keeps_event_ids() {
    let kinds = EventType::ALL;
    let events: Vec<Event> = kinds
        .iter()
        .map(|k| Event {
            kind: *k,
            data: json!({"transaction": {"status": "X"}}),
        })
        .collect();
    let t = Turn {
        identity: Identity::new("tenant ç", "bot one", "s"),
        ..turn("u1", TurnInput::Text("hi".into()), 0)
    };
    let with_reply = hand_outcome(vec!["a".into(), String::new(), "b".into()], events.clone());
    let outputs = encode_outputs(&t, &with_reply, 0);
    assert_eq!(outputs.len(), 10);
    let reply = ReplyMessage::from_json(&outputs[0].payload).unwrap();
    assert_eq!(
        reply.text, "a\nb",
        "empty texts are skipped, the rest joined"
    );
    for out in &outputs {
        let value: Value = serde_json::from_slice(&out.payload).unwrap();
        assert!(
            schemas().for_topic(out.topic()).is_valid(&value),
            "{value:#}"
        );
    }
    let ce = CloudEvent::from_json(&outputs[1].payload).unwrap();
    assert_eq!(
        ce.source, "turnstile/bot%20one",
        "source is a URI reference"
    );
    assert_eq!(ce.agentid, "bot one");

    let silent = hand_outcome(vec![String::new()], events);
    let silent_outputs = encode_outputs(&t, &silent, 0);
    assert_eq!(silent_outputs.len(), 9, "no text, no reply");
    assert!(silent_outputs
        .iter()
        .all(|o| o.topic() == OutputTopic::Events));
    let event_ids = |o: &[Output]| {
        o.iter()
            .filter(|o| o.topic() == OutputTopic::Events)
            .map(|o| o.output_id.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(event_ids(&outputs), event_ids(&silent_outputs));
    let kinds_out: Vec<&str> = silent_outputs.iter().map(|o| o.kind.wire_name()).collect();
    let kinds_in: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
    assert_eq!(kinds_out, kinds_in);
}

// EV-1: a duplicate turn publishes nothing.
#[test]
fn duplicate_turn_has_no_outputs() {
    let mut outcome = hand_outcome(vec!["hi".into()], vec![]);
    outcome.duplicate = true;
    let t = turn("u1", TurnInput::Text("hi".into()), 0);
    assert!(encode_outputs(&t, &outcome, 0).is_empty());
}

// The default topic names are the documented ones.
#[test]
fn default_topics_are_the_documented_names() {
    let t = Topics::default();
    assert_eq!(t.inbound, "turnstile.turns.v1");
    assert_eq!(t.name(OutputTopic::Replies), "turnstile.replies.v1");
    assert_eq!(t.name(OutputTopic::Events), "turnstile.events.v1");
    assert_eq!(
        t.name(OutputTopic::DeadLetters),
        "turnstile.dead-letters.v1"
    );
}

// ---------------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------------

/// An optional field's value: absent, or one of a few valid and invalid shapes. Invalid values
/// are rare enough that several percent of the bodies are entirely valid, so both directions of
/// the agreement property are exercised.
fn field(valid: Vec<Value>, invalid: Vec<Value>) -> impl Strategy<Value = Option<Value>> {
    weighted_field(4, valid, invalid)
}

/// A required field's value: seldom absent.
fn required(valid: Vec<Value>, invalid: Vec<Value>) -> impl Strategy<Value = Option<Value>> {
    weighted_field(1, valid, invalid)
}

fn weighted_field(
    absent: u32,
    valid: Vec<Value>,
    invalid: Vec<Value>,
) -> impl Strategy<Value = Option<Value>> {
    let valid = proptest::sample::select(valid);
    let invalid = proptest::sample::select(invalid);
    prop_oneof![
        absent => Just(None),
        12 => valid.prop_map(Some),
        1 => invalid.prop_map(Some),
    ]
}

fn id_values() -> (Vec<Value>, Vec<Value>) {
    (
        vec![
            json!("t1"),
            json!("a"),
            json!("ç ü 東"),
            json!("x".repeat(128)),
        ],
        vec![
            json!(""),
            json!("a/b"),
            json!("x".repeat(129)),
            json!(7),
            Value::Null,
            json!(["t1"]),
        ],
    )
}

fn time_values() -> (Vec<Value>, Vec<Value>) {
    (
        vec![
            json!("2026-01-01T00:00:00Z"),
            json!("2026-01-01t00:00:00.123456789z"),
            json!("2026-02-28T23:59:59-03:00"),
            json!("2016-12-31T23:59:60Z"),
            json!("0001-01-01T00:00:00+14:00"),
        ],
        vec![
            json!("2026-01-01 00:00:00Z"),
            json!("2026-01-01T00:00:00"),
            json!("2026-02-30T00:00:00Z"),
            json!("2026-01-01T24:00:00Z"),
            json!("2026-01-01T00:00:00+24:00"),
            json!("2026-01-01T00:00:00.Z"),
            json!("1767225600"),
            json!(1_767_225_600),
            Value::Null,
        ],
    )
}

/// Turn-shaped objects mixing valid and invalid fields, and whether to add an unknown field.
fn turn_like() -> impl Strategy<Value = Value> {
    let (ids, bad_ids) = id_values();
    let (times, bad_times) = time_values();
    let parts = (
        required(
            vec![json!("u-1"), json!("ü".repeat(128))],
            vec![json!(""), json!("u".repeat(129)), json!(1)],
        ),
        required(ids.clone(), bad_ids.clone()),
        required(ids.clone(), bad_ids.clone()),
        required(ids, bad_ids),
        field(
            vec![json!(""), json!("hello"), json!("ã".repeat(4000))],
            vec![
                json!("a".repeat(4001)),
                json!(5),
                Value::Null,
                json!({"t": "x"}),
            ],
        ),
        field(
            vec![json!({"type": "confirm"}), json!({"type": "end"})],
            vec![
                json!({"type": "yes"}),
                json!({}),
                json!({"type": "confirm", "x": 1}),
                json!("confirm"),
            ],
        ),
        field(
            vec![json!("en"), json!("pt-BR")],
            vec![json!("pt-br"), json!("fr"), Value::Null, json!(1)],
        ),
        field(times.clone(), bad_times.clone()),
        field(times, bad_times),
        field(
            vec![
                json!({}),
                json!({"a": "b"}),
                Value::Object((0..32).map(|i| (format!("k{i}"), json!("v"))).collect()),
            ],
            vec![
                json!({"a": 1}),
                Value::Object((0..33).map(|i| (format!("k{i}"), json!("v"))).collect()),
                json!(["a"]),
            ],
        ),
        field(
            vec![json!("turnstile.turn.v1")],
            vec![json!("turnstile.turn.v2"), Value::Null],
        ),
        (
            field(vec![json!("whatsapp")], vec![json!(3)]),
            prop::bool::weighted(0.1),
        ),
    );
    parts.prop_map(
        |(
            turn_id,
            tenant,
            agent,
            session,
            text,
            action,
            locale,
            sent,
            received,
            meta,
            tag,
            (channel, extra),
        )| {
            let mut m = serde_json::Map::new();
            for (k, v) in [
                ("turn_id", turn_id),
                ("tenant_id", tenant),
                ("agent_id", agent),
                ("session_id", session),
                ("text", text),
                ("action", action),
                ("locale", locale),
                ("sent_at", sent),
                ("received_at", received),
                ("metadata", meta),
                ("schema", tag),
                ("channel", channel),
            ] {
                if let Some(v) = v {
                    m.insert(k.to_owned(), v);
                }
            }
            if extra {
                m.insert("extra".into(), json!(true));
            }
            Value::Object(m)
        },
    )
}

/// Every assistant id the generator may produce, serving every tenant, so that for a
/// schema-valid body only the schema decides.
fn permissive_catalog() -> &'static Catalog {
    static CATALOG: OnceLock<Catalog> = OnceLock::new();
    CATALOG.get_or_init(|| {
        let mut yaml = String::from("assistants:\n");
        for id in ["t1", "a", "ç ü 東", &"x".repeat(128)] {
            yaml.push_str(&format!(
                "  {id:?}:\n    tenants:\n      - {{tenant: \"*\", tools: \"*\"}}\n    agents:\n      retail: {{description: Orders.}}\n    tools:\n      track:\n        agent: retail\n        description: Track.\n        parameters: []\n"
            ));
        }
        parse_catalog(&yaml, "inline").expect("permissive catalog")
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    // IO-3: arbitrary bytes, with or without a key, under any limit: a Turn or a Rejection,
    // never a panic; a rejection's dead letter is always schema-valid.
    #[test]
    fn decode_never_panics_on_arbitrary_bytes(
        payload in proptest::collection::vec(any::<u8>(), 0..512),
        key in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..64)),
        limit in 0usize..1024,
        ts in proptest::option::of(any::<i64>()),
        tombstone in prop::bool::weighted(0.05),
    ) {
        let rec = InboundRecord {
            topic: "turnstile.turns.v1",
            partition: 0,
            offset: 1,
            key: key.as_deref(),
            payload: if tombstone { None } else { Some(&payload) },
            timestamp_ms: ts,
        };
        let limits = DecodeLimits { max_payload_bytes: limit };
        if let Err(r) = decode_turn(&rec, &limits, example_catalog()) {
            prop_assert!(r.detail.chars().count() <= MAX_DETAIL_CHARS);
            let out = encode_dead_letter(&rec, &r, any_now(ts));
            let v: Value = serde_json::from_slice(&out.payload).unwrap();
            prop_assert!(schemas().dead_letter.is_valid(&v));
        }
    }

    // IO-3: JSON-ish text (braces, quotes, escapes, field names of the schema) never panics.
    #[test]
    fn decode_never_panics_on_json_ish_text(
        text in r#"\{("(turn_id|tenant_id|agent_id|session_id|text|action|type|locale|sent_at|metadata)"|[\[\]{}:,"\\ ]|-?[0-9.eE+]{1,6}|\\u[0-9a-fA-F]{4}|true|null|[a-zé/]{0,4}){0,40}\}?"#,
    ) {
        let rec = record(Some(b"t1/retail-bot/s"), Some(text.as_bytes()));
        let _ = decode_turn(&rec, &DecodeLimits::default(), example_catalog());
    }

    // IO-2/IO-3: on turn-shaped JSON the decoder rejects as a schema violation exactly what the
    // schema rejects (keyed by its own identity, with a catalog serving everything).
    #[test]
    fn decoder_agrees_with_the_schema(body in turn_like()) {
        let bytes = body.to_string().into_bytes();
        let schema_ok = schemas().turn.is_valid(&body);
        let decoded = decode_keyed(&bytes, permissive_catalog());
        let decoder_ok = !matches!(
            &decoded,
            Err(r) if r.reason == DeadLetterReason::SchemaViolation
        );
        prop_assert_eq!(
            schema_ok,
            decoder_ok,
            "body {} schema errors {:?} decoder {:?}",
            body,
            schema_errors(&schemas().turn, &body),
            decoded
        );
        if schema_ok {
            prop_assert!(decoded.is_ok(), "{:?}", decoded);
        }
    }
}

fn any_now(ts: Option<i64>) -> i64 {
    ts.unwrap_or(0)
}

// Guards the agreement property against passing trivially: the generator yields both
// schema-valid and schema-invalid bodies in useful numbers.
#[test]
fn turn_generator_covers_valid_and_invalid_bodies() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = turn_like();
    let total = 2_000;
    let valid = (0..total)
        .filter(|_| {
            let body = strategy.new_tree(&mut runner).unwrap().current();
            schemas().turn.is_valid(&body)
        })
        .count();
    assert!(
        valid * 20 >= total && valid * 2 <= total,
        "{valid} of {total} valid"
    );
}
