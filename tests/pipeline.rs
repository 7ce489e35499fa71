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
use turnstile::pipeline::{handle_record, Disposition, Handled, Ports, Rules};
use turnstile::ports::{
    CallContext, CheckpointRecord, CheckpointStore, DecisionModel, DecisionRecordStore,
    DecisionRow, Fence, StoreError, ToolGateway,
};
use turnstile::record::decode_all;
use turnstile::record::replay::{replay_exact, Verdict};
use turnstile::store::cache::Invalidation;
use turnstile::store::retrying::Backoff;
use turnstile::store::{
    CachingCheckpointStore, CheckpointCache, InMemoryCheckpointStore, RetryingStore,
};

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
            code: None,
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
    /// The worker's checkpoint cache, when the test plays a worker that has one: its store is
    /// then the test's behind a [`CachingCheckpointStore`].
    cache: Option<Arc<CheckpointCache>>,
}

impl World {
    fn new() -> Self {
        World {
            catalog: catalog(),
            settings: Settings::default(),
            limits: DecodeLimits::default(),
            model: CountingModel::default(),
            tools: RecordingTools::default(),
            cache: None,
        }
    }

    fn cached() -> Self {
        World {
            cache: Some(Arc::new(CheckpointCache::new(1 << 20))),
            ..World::new()
        }
    }

    async fn handle<S: CheckpointStore + Sync>(
        &self,
        store: &S,
        offset: i64,
        payload: &[u8],
        epoch: i64,
        committed_mark: i64,
    ) -> Handled {
        self.try_handle(store, offset, payload, epoch, committed_mark)
            .await
            .expect("no store error escapes")
    }

    async fn try_handle<S: CheckpointStore + Sync>(
        &self,
        store: &S,
        offset: i64,
        payload: &[u8],
        epoch: i64,
        committed_mark: i64,
    ) -> Result<Handled, StoreError> {
        match &self.cache {
            Some(cache) => {
                let store = CachingCheckpointStore::new(store, cache.clone());
                self.handle_with(&store, offset, payload, epoch, committed_mark)
                    .await
            }
            None => {
                self.handle_with(store, offset, payload, epoch, committed_mark)
                    .await
            }
        }
    }

    async fn handle_with<S: CheckpointStore>(
        &self,
        store: &S,
        offset: i64,
        payload: &[u8],
        epoch: i64,
        committed_mark: i64,
    ) -> Result<Handled, StoreError> {
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
        let ports = Ports {
            store,
            model: &self.model,
            tools: &self.tools,
        };
        handle_record(rules, ports, &record, epoch, committed_mark).await
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
        .any(|o| o.topic() == OutputTopic::Replies));
    assert!(first
        .outputs
        .iter()
        .any(|o| o.kind.wire_name() == "transaction.completed"));
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
    assert_eq!(bad.outputs[0].topic(), OutputTopic::DeadLetters);
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

/// The in-memory store, observed and faulty on demand: counts loads, fails its first
/// `load_failures` loads (a store outage), and fails the turn-end save while `fail_turn_end` is
/// set (a crash after the write-ahead, as the caller sees it).
#[derive(Default)]
struct Observed {
    inner: InMemoryCheckpointStore,
    loads: AtomicUsize,
    load_failures: AtomicUsize,
    fail_turn_end: std::sync::atomic::AtomicBool,
}

impl CheckpointStore for Observed {
    async fn load(&self, id: &Identity) -> Result<Option<CheckpointRecord>, StoreError> {
        if self
            .load_failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(StoreError::unavailable("connection refused"));
        }
        self.loads.fetch_add(1, Ordering::SeqCst);
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
        if self.fail_turn_end.load(Ordering::SeqCst) {
            return Err(StoreError::unavailable("connection reset"));
        }
        self.inner.save_turn(id, r, f).await
    }
    async fn acquire_epoch(&self, t: &str, p: i32, o: &str) -> Result<i64, StoreError> {
        self.inner.acquire_epoch(t, p, o).await
    }
    async fn record_decision(
        &self,
        id: &Identity,
        row: &DecisionRow,
        f: Fence,
    ) -> Result<(), StoreError> {
        self.inner.record_decision(id, row, f).await
    }
}

/// docs/store.md "Retries": behind the one retry layer a store outage delays the turn, never
/// dead-letters it, and readiness follows the outage.
#[tokio::test]
async fn a_store_outage_is_waited_out_never_dead_lettered() {
    let w = World::new();
    let ready = Arc::new(Mutex::new(Vec::new()));
    let seen = ready.clone();
    let store = RetryingStore::new(Observed {
        load_failures: AtomicUsize::new(12),
        ..Observed::default()
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

/// What a turn decided, as the checks compare it (outputs carry the wall clock; these do not).
fn decided(h: &Handled) -> (Disposition, Vec<String>, Vec<String>) {
    let (replies, events) = h.processed.as_ref().map_or_else(Default::default, |p| {
        (
            p.outcome.replies.iter().map(|r| format!("{r:?}")).collect(),
            p.outcome
                .events
                .iter()
                .map(|e| e.kind.as_str().to_owned())
                .collect(),
        )
    });
    (h.disposition, replies, events)
}

/// docs/store.md "The checkpoint cache": a worker with the cache decides every turn exactly as
/// one without it and stores the same rows, while reading the store only when it must: the
/// conversation's first turn, and after a republish took the entry out.
#[tokio::test]
async fn the_checkpoint_cache_changes_no_decision_and_skips_the_reads_it_may() {
    let (plain, with_cache) = (World::new(), World::cached());
    let (a, b) = (Observed::default(), Observed::default());
    let script: [(i64, &str, &str); 6] = [
        (1, "u1", "show my bill"),
        (2, "u2", "thanks"),
        (3, "u3", "show my bill"),
        // The same record again before its commit: republished, the entry taken out.
        (3, "u3", "show my bill"),
        (4, "u4", "I want to cancel my order"),
        (5, "u5", "show my bill"),
    ];
    for (offset, turn_id, text) in script {
        let x = plain
            .handle(&a, offset, &payload(turn_id, text), 1, 0)
            .await;
        let y = with_cache
            .handle(&b, offset, &payload(turn_id, text), 1, 0)
            .await;
        assert_eq!(
            decided(&x),
            decided(&y),
            "turn {turn_id} at offset {offset}"
        );
        let (ra, rb) = (a.inner.get(&identity()), b.inner.get(&identity()));
        assert_eq!(
            ra.as_ref().map(|r| (&r.state, r.applied, r.epoch)),
            rb.as_ref().map(|r| (&r.state, r.applied, r.epoch)),
            "the stored state after {turn_id}"
        );
    }
    assert_eq!(
        a.loads.load(Ordering::SeqCst),
        6,
        "without the cache: every turn"
    );
    assert_eq!(
        b.loads.load(Ordering::SeqCst),
        2,
        "with it: the first turn, and the one after the republish"
    );
    assert_eq!(
        *plain.tools.keys.lock().unwrap(),
        *with_cache.tools.keys.lock().unwrap(),
        "the same executions, with the same idempotency keys"
    );
}

/// IO-4 with the cache: a row is read from it only under the lease it was written under; a new
/// lease, a failed Kafka transaction (a worker that may have lost its group membership) and a
/// fenced partition all send the next turn to the store, where the newer owner's row is seen.
#[tokio::test]
async fn a_cached_row_is_used_only_under_the_lease_it_was_written_under() {
    let (ours, theirs) = (World::cached(), World::new());
    let store = Observed::default();
    let cache = ours.cache.as_ref().unwrap();
    let h = ours
        .handle(&store, 1, &payload("u1", "show my bill"), 1, 0)
        .await;
    assert_eq!(h.disposition, Disposition::Applied);
    assert_eq!(cache.len(), 1);
    // The partition moves to a newer owner (epoch 2), which applies the next record.
    let h = theirs
        .handle(&store, 2, &payload("u2", "show my bill"), 2, 0)
        .await;
    assert_eq!(h.disposition, Disposition::Applied);

    // Our commit fails (we were fenced out of the group): the cache is emptied and suspended,
    // so our next turn reads the store and is fenced by the newer row.
    cache.suspend();
    let h = ours
        .handle(&store, 3, &payload("u3", "show my bill"), 1, 0)
        .await;
    assert_eq!(h.disposition, Disposition::Fenced);
    assert_eq!(ours.tools.keys.lock().unwrap().len(), 1, "nothing executed");

    // The partition comes back under epoch 3: our turn starts from the newer owner's row.
    cache.resume();
    let loads = store.loads.load(Ordering::SeqCst);
    let h = ours.handle(&store, 4, &payload("u4", "thanks"), 3, 0).await;
    assert_eq!(h.disposition, Disposition::Applied);
    assert_eq!(
        store.loads.load(Ordering::SeqCst),
        loads + 1,
        "read the store"
    );
    let state = &h.processed.as_ref().unwrap().outcome.state;
    assert!(
        state.history.iter().any(|e| e.turn_id == "u2"),
        "the newer owner's turn is in the history"
    );
    assert_eq!(cache.len(), 1, "kept under epoch 3");

    // A cached row of an older epoch misses even when nothing dropped it.
    let h = theirs
        .handle(&store, 5, &payload("u5", "thanks"), 4, 0)
        .await;
    assert_eq!(h.disposition, Disposition::Applied);
    let h = ours.handle(&store, 6, &payload("u6", "thanks"), 5, 0).await;
    assert_eq!(h.disposition, Disposition::Applied);
    let state = &h.processed.as_ref().unwrap().outcome.state;
    assert!(state.history.iter().any(|e| e.turn_id == "u5"));

    // A fence seen on the partition drops its rows: the next turn reads the store.
    let h = theirs
        .handle(&store, 7, &payload("u7", "thanks"), 6, 0)
        .await;
    assert_eq!(h.disposition, Disposition::Applied);
    cache.forget_partition(0, Invalidation::Fenced);
    assert!(cache.is_empty());
    let h = ours.handle(&store, 8, &payload("u8", "thanks"), 5, 0).await;
    assert_eq!(h.disposition, Disposition::Fenced);
}

/// LC-4 with the cache: a turn whose end was never saved (the process died after the
/// write-ahead, or the save failed) is recovered from the store's write-ahead row on its
/// redelivery, not decided again from the row the cache held before it.
#[tokio::test]
async fn a_turn_that_ended_unsaved_recovers_from_the_store_not_the_cache() {
    let w = World::cached();
    let store = Observed::default();
    let h = w
        .handle(&store, 1, &payload("u1", "show my bill"), 1, 0)
        .await;
    assert_eq!(h.disposition, Disposition::Applied);
    store.fail_turn_end.store(true, Ordering::SeqCst);
    let failed = w
        .try_handle(&store, 2, &payload("u2", "show my bill"), 1, 0)
        .await;
    assert!(failed.is_err(), "the save failed: {failed:?}");
    assert!(
        store.inner.get(&identity()).unwrap().in_flight.is_some(),
        "the write-ahead row is stored"
    );
    store.fail_turn_end.store(false, Ordering::SeqCst);
    let h = w
        .handle(&store, 2, &payload("u2", "show my bill"), 1, 0)
        .await;
    assert_eq!(h.disposition, Disposition::Applied);
    assert!(
        h.processed.unwrap().recovered,
        "resumed from the write-ahead"
    );
    let keys = w.tools.keys.lock().unwrap().clone();
    assert_eq!(keys.len(), 3);
    assert_eq!(
        keys[1], keys[2],
        "the same execution, with its idempotency key"
    );
    assert_eq!(store.inner.get(&identity()).unwrap().in_flight, None);

    // Issue 26: the recovered turn's decision record replays exactly, with no model or tool
    // call: its base is the write-ahead's in-flight state, not the last saved one.
    let rows = store.inner.load_decisions(&identity()).await.unwrap();
    let mut records = decode_all(&rows).unwrap();
    records.sort_by_key(|r| r.turn.turn_id.clone());
    let turns: Vec<&str> = records.iter().map(|r| r.turn.turn_id.as_str()).collect();
    assert_eq!(turns, ["u1", "u2"], "one record per applied turn");
    let engine = Engine::new(&w.catalog, &w.settings);
    let report = replay_exact(&engine, &records);
    assert_eq!(report.turns.len(), 2);
    for t in &report.turns {
        assert_eq!(t.verdict, Verdict::Same, "{}", report.render());
    }
}
