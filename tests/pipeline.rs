//! The worker's record path (`pipeline::handle_record`) against the in-memory store: the
//! outbox, republish, fencing (IO-4), dead-letter (IO-3, ST-4) and store-outage decisions the
//! Kafka worker makes are this code; tests/worker_kafka.rs runs the same against Kafka + CQL.
//! Also: rows written by release 0.1 (`tests/data/rows-0.1/`) still load and recover (LC-4).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use turnstile::config::agents::load_catalog;
use turnstile::domain::catalog::{Catalog, Settings};
use turnstile::domain::decision::{
    ClassifierDecision, InterpreterDecision, ModelAnswer, ModelFailure, PreValidationResult,
    RouterDecision, SessionControl, ToolResult,
};
use turnstile::domain::effect::{
    ClassifierRequest, InterpreterRequest, RouterRequest, ToolRequest,
};
use turnstile::domain::engine::{single_attempt_result, Engine};
use turnstile::domain::turn::Identity;
use turnstile::message::{DeadLetterReason, DecodeLimits, InboundRecord, OutputTopic};
use turnstile::pipeline::outbox;
use turnstile::pipeline::{handle_record, Disposition, Handled, Rules};
use turnstile::ports::{
    CallContext, CheckpointRecord, CheckpointStore, DecisionModel, Fence, StoreError, ToolGateway,
};
use turnstile::store::retrying::Backoff;
use turnstile::store::{InMemoryCheckpointStore, RetryingStore};

const TOPIC: &str = "turns";

fn catalog() -> Catalog {
    load_catalog(std::path::Path::new("config/agents.example.yaml")).expect("example config")
}

fn identity() -> Identity {
    Identity::new("t1", "retail-bot", "s-engine")
}

fn payload(turn_id: &str, text: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "turn_id": turn_id, "tenant_id": "t1", "agent_id": "retail-bot",
        "session_id": "s-engine", "locale": "en", "channel": "test", "text": text,
    }))
    .unwrap()
}

/// Routes anything with "bill" to billing_show_bill (which executes at once); counts calls.
#[derive(Default)]
struct CountingModel {
    calls: AtomicUsize,
}

impl DecisionModel for CountingModel {
    async fn classify(
        &self,
        _: &ClassifierRequest,
        _: CallContext<'_>,
    ) -> ModelAnswer<ClassifierDecision> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(ClassifierDecision {
            decision: SessionControl::Route,
            confidence: 0.99,
        })
    }
    async fn route(&self, _: &RouterRequest, _: CallContext<'_>) -> ModelAnswer<RouterDecision> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(RouterDecision::Route {
            agent: "billing".into(),
            intent: Some("billing_show_bill".into()),
            confidence: 0.99,
            arguments: BTreeMap::new(),
        })
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

/// Records every execution's idempotency key.
#[derive(Default)]
struct RecordingTools {
    keys: Mutex<Vec<String>>,
}

impl ToolGateway for RecordingTools {
    async fn pre_validate(&self, _: &ToolRequest, ctx: CallContext<'_>) -> PreValidationResult {
        PreValidationResult {
            eligible: true,
            reason: None,
            data: json!(null),
            at_ms: ctx.turn_at_ms,
        }
    }
    async fn execute(&self, r: &ToolRequest, ctx: CallContext<'_>) -> ToolResult {
        self.keys.lock().unwrap().push(r.idempotency_key.clone());
        single_attempt_result(
            &r.idempotency_key,
            true,
            false,
            json!({"total": "R$ 10"}),
            None,
            ctx.turn_at_ms,
        )
    }
}

struct World {
    catalog: Catalog,
    settings: Settings,
    limits: DecodeLimits,
    model: CountingModel,
    tools: RecordingTools,
}

impl World {
    fn new() -> Self {
        World {
            catalog: catalog(),
            settings: Settings::default(),
            limits: DecodeLimits::default(),
            model: CountingModel::default(),
            tools: RecordingTools::default(),
        }
    }

    async fn handle<S: CheckpointStore>(
        &self,
        store: &S,
        offset: i64,
        payload: &[u8],
        epoch: i64,
        committed_mark: i64,
    ) -> Handled {
        let rules = Rules {
            engine: Engine::new(&self.catalog, &self.settings),
            catalog: &self.catalog,
            limits: &self.limits,
        };
        let key = identity().key();
        let record = InboundRecord {
            topic: TOPIC,
            partition: 0,
            offset,
            key: Some(key.as_bytes()),
            payload: Some(payload),
            // Seconds after the fixtures' turns (tests/data/rows-0.1), inside the session TTL.
            timestamp_ms: Some(10_000 + offset * 1_000),
        };
        handle_record(
            rules,
            store,
            &self.model,
            &self.tools,
            &record,
            epoch,
            committed_mark,
        )
        .await
        .expect("no store error escapes")
    }
}

/// EV-1: a record redelivered after its save (its commit never became known) is republished
/// from the outbox byte for byte; nothing runs again.
#[tokio::test]
async fn a_record_redelivered_after_its_save_is_republished_byte_for_byte() {
    let w = World::new();
    let store = InMemoryCheckpointStore::new();
    let first = w
        .handle(&store, 5, &payload("u1", "show my bill"), 1, 0)
        .await;
    assert_eq!(first.disposition, Disposition::Applied);
    assert_eq!(first.turn_id, "u1");
    assert!(first
        .outputs
        .iter()
        .any(|o| o.topic == OutputTopic::Replies));
    assert!(first
        .outputs
        .iter()
        .any(|o| o.kind == "transaction.completed"));
    let calls = w.model.calls.load(Ordering::SeqCst);
    let row = store.get(&identity());

    let again = w
        .handle(&store, 5, &payload("u1", "show my bill"), 1, 0)
        .await;
    assert_eq!(again.disposition, Disposition::Republished);
    assert_eq!(
        again.outputs, first.outputs,
        "same payloads, same output ids"
    );
    assert_eq!(w.tools.keys.lock().unwrap().len(), 1, "executed once");
    assert_eq!(w.model.calls.load(Ordering::SeqCst), calls, "no model call");
    assert_eq!(store.get(&identity()), row, "nothing written");

    // The same turn id in a later record (the adapter retried): a duplicate, nothing emitted.
    let dup = w
        .handle(&store, 6, &payload("u1", "show my bill"), 1, 5)
        .await;
    assert_eq!(dup.disposition, Disposition::Duplicate);
    assert!(dup.outputs.is_empty());
    assert_eq!(w.tools.keys.lock().unwrap().len(), 1);
}

/// IO-4: once a newer owner wrote the conversation, an older lease's turn reports nothing and
/// writes nothing.
#[tokio::test]
async fn a_row_of_a_newer_owner_fences_the_turn() {
    let w = World::new();
    let store = InMemoryCheckpointStore::new();
    let owner = w
        .handle(&store, 5, &payload("u1", "show my bill"), 2, 0)
        .await;
    assert_eq!(owner.disposition, Disposition::Applied);
    let row = store.get(&identity());
    let zombie = w
        .handle(&store, 6, &payload("u2", "show my bill"), 1, 0)
        .await;
    assert_eq!(zombie.disposition, Disposition::Fenced);
    assert!(zombie.outputs.is_empty());
    assert_eq!(store.get(&identity()), row);
    assert_eq!(
        w.tools.keys.lock().unwrap().len(),
        1,
        "the zombie executed nothing"
    );
}

/// The outbox keeps the turns whose commit is not known, and drops those below the mark.
#[tokio::test]
async fn the_outbox_keeps_only_turns_not_known_committed() {
    let w = World::new();
    let store = InMemoryCheckpointStore::new();
    for (offset, text) in [(1, "show my bill"), (2, "thanks"), (3, "show my bill")] {
        let turn_id = format!("u{offset}");
        let mark = if offset == 3 { 2 } else { 0 };
        let h = w
            .handle(&store, offset, &payload(&turn_id, text), 1, mark)
            .await;
        assert_eq!(h.disposition, Disposition::Applied);
    }
    let row = store.get(&identity()).unwrap();
    let kept: Vec<i64> = outbox::decode(row.outbox.as_deref())
        .iter()
        .map(|e| e.offset)
        .collect();
    assert_eq!(kept, vec![2, 3], "offset 1 is below the committed mark 2");
    assert_eq!(row.applied, Some((0, 3)));
}

/// IO-3 and ST-4: a record that can never be processed is dead-lettered with its reason; an
/// undecodable checkpoint is reported and left as it was.
#[tokio::test]
async fn records_and_checkpoints_that_cannot_be_read_are_dead_lettered() {
    let w = World::new();
    let store = InMemoryCheckpointStore::new();
    let bad = w.handle(&store, 1, b"{\"turn_id\": ", 1, 0).await;
    assert_eq!(
        bad.disposition,
        Disposition::DeadLettered(DeadLetterReason::Undecodable)
    );
    assert_eq!(bad.outputs.len(), 1);
    assert_eq!(bad.outputs[0].topic, OutputTopic::DeadLetters);
    assert_eq!(store.get(&identity()), None, "nothing stored");

    let garbage = CheckpointRecord {
        state: b"{\"schema_version\": 2, \"history\": 7".to_vec(),
        ..Default::default()
    };
    store.put(&identity(), garbage.clone());
    let h = w
        .handle(&store, 2, &payload("u2", "show my bill"), 1, 0)
        .await;
    assert_eq!(
        h.disposition,
        Disposition::DeadLettered(DeadLetterReason::CheckpointUndecodable)
    );
    assert_eq!(h.turn_id, "u2");
    assert_eq!(
        store.get(&identity()),
        Some(garbage),
        "ST-4: never replaced"
    );
    assert!(w.tools.keys.lock().unwrap().is_empty());
}

/// Fails its first `failures` loads, then delegates.
struct Outage {
    inner: InMemoryCheckpointStore,
    failures: AtomicUsize,
}

impl CheckpointStore for Outage {
    async fn load(&self, id: &Identity) -> Result<Option<CheckpointRecord>, StoreError> {
        if self
            .failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(StoreError::Unavailable("connection refused".into()));
        }
        self.inner.load(id).await
    }
    async fn save_write_ahead(
        &self,
        id: &Identity,
        r: &CheckpointRecord,
        f: Fence,
    ) -> Result<(), StoreError> {
        self.inner.save_write_ahead(id, r, f).await
    }
    async fn save_turn(
        &self,
        id: &Identity,
        r: &CheckpointRecord,
        f: Fence,
    ) -> Result<(), StoreError> {
        self.inner.save_turn(id, r, f).await
    }
    async fn acquire_epoch(&self, t: &str, p: i32, o: &str) -> Result<i64, StoreError> {
        self.inner.acquire_epoch(t, p, o).await
    }
}

/// docs/store.md "Retries": behind the one retry layer a store outage delays the turn, never
/// dead-letters it, and readiness follows the outage.
#[tokio::test]
async fn a_store_outage_is_waited_out_never_dead_lettered() {
    let w = World::new();
    let ready = Arc::new(Mutex::new(Vec::new()));
    let seen = ready.clone();
    let store = RetryingStore::new(Outage {
        inner: InMemoryCheckpointStore::new(),
        failures: AtomicUsize::new(12),
    })
    .with_backoff(Backoff {
        first: Duration::from_millis(1),
        max: Duration::from_millis(5),
    })
    .on_availability(Arc::new(move |ok| seen.lock().unwrap().push(ok)));
    let h = w
        .handle(&store, 1, &payload("u1", "show my bill"), 1, 0)
        .await;
    assert_eq!(h.disposition, Disposition::Applied);
    assert_eq!(*ready.lock().unwrap(), vec![false, true]);
    assert_eq!(w.tools.keys.lock().unwrap().len(), 1);
}

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!("tests/data/rows-0.1/{name}")).expect("fixture")
}

/// Rows written by release 0.1 (tests/data/rows-0.1/, made by that release's pipeline: a
/// completed turn, then a write-ahead for a second one that crashed mid-execution) still load,
/// and the crashed turn recovers exactly: LC-4, same idempotency key, no model asked again.
#[tokio::test]
async fn rows_written_by_release_0_1_still_load_and_recover() {
    let w = World::new();
    let store = InMemoryCheckpointStore::new();
    store.put(
        &identity(),
        CheckpointRecord {
            state: fixture("write-ahead.state.json"),
            in_flight: Some(fixture("write-ahead.in_flight.json")),
            ..Default::default()
        },
    );
    let h = w
        .handle(&store, 7, &payload("u2", "show my bill"), 1, 0)
        .await;
    assert_eq!(h.disposition, Disposition::Applied);
    let processed = h.processed.expect("processed");
    assert!(processed.recovered, "resumed from the write-ahead record");
    assert!(
        processed.model_calls.is_empty(),
        "the recorded answers were replayed"
    );
    assert_eq!(w.model.calls.load(Ordering::SeqCst), 0);
    assert_eq!(
        *w.tools.keys.lock().unwrap(),
        vec!["2cbae385-e0cd-53a6-a09c-bb3870774c1a:execute".to_owned()],
        "the key release 0.1 used before the crash"
    );
    let row = store.get(&identity()).unwrap();
    assert_eq!(row.in_flight, None, "the turn ended");

    // A completed row of release 0.1 loads too and the conversation goes on from it.
    let store = InMemoryCheckpointStore::new();
    store.put(
        &identity(),
        CheckpointRecord {
            state: fixture("completed.state.json"),
            ..Default::default()
        },
    );
    let h = w
        .handle(&store, 8, &payload("u9", "show my bill"), 1, 0)
        .await;
    assert_eq!(h.disposition, Disposition::Applied);
    let state = &h.processed.unwrap().outcome.state;
    assert!(
        state.history.iter().any(|e| e.turn_id == "u1"),
        "history kept"
    );
}
