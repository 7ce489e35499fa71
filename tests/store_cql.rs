//! The CQL checkpoint store against a real Apache Cassandra 5.0 node (stand-in for ScyllaDB: same
//! protocol, same driver). Start it with `bash scripts/services.sh up`; `CQL_CONTACT` overrides
//! the address. Each test run migrates its own keyspace, `turnstile_test_<unix secs>_<random>`, so
//! runs never share state; keyspaces of runs older than two hours are dropped.
//!
//! An unreachable node fails the tests, never skips them.

// Needs the test harness (src/testkit, the fault hook, `chaos`, `scenarios --e2e`):
// `cargo test --features harness`; without the feature this file compiles to no tests.
#![cfg(feature = "harness")]

use std::collections::hash_map::RandomState;
use std::collections::HashSet;
use std::hash::{BuildHasher, Hasher};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use turnstile::domain::turn::Identity;
use turnstile::ports::{CheckpointRecord, CheckpointStore, Fence, RetryClass, StoreError};
use turnstile::store::cql::{
    write_timestamp, CqlConfig, ScyllaCheckpointStore, StoredRow, EPOCH_LIMIT, OFFSET_LIMIT,
    PHASE_OUTBOX_PRUNE, PHASE_TURN_END, PHASE_WRITE_AHEAD,
};
use turnstile::testkit::cql::{config, contact};

const START_HINT: &str = "start it with `bash scripts/services.sh up` (or set CQL_CONTACT)";
const STALE_KEYSPACE_SECS: u64 = 2 * 3600;

fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn random_u32() -> u32 {
    // RandomState is seeded per process from the OS: enough to keep concurrent runs apart.
    let mut h = RandomState::new().build_hasher();
    h.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish() as u32
}

/// This run's keyspace.
fn keyspace() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| format!("turnstile_test_{}_{:08x}", unix_secs(), random_u32()))
}

/// Migrates this run's keyspace once, on its own thread and runtime: tests run on separate
/// runtimes, and concurrent CREATE TABLE of one table confuses Cassandra's schema.
fn ensure_migrated() {
    static MIGRATED: OnceLock<Result<(), String>> = OnceLock::new();
    let result = MIGRATED.get_or_init(|| {
        std::thread::spawn(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            rt.block_on(async {
                ScyllaCheckpointStore::migrate(&config(keyspace()))
                    .await
                    .map_err(|e| e.to_string())?;
                drop_stale_keyspaces().await;
                Ok(())
            })
        })
        .join()
        .unwrap_or_else(|_| Err("migration thread panicked".to_owned()))
    });
    if let Err(e) = result {
        panic!(
            "cannot migrate test keyspace on Cassandra at {}: {e}; {START_HINT}",
            contact()
        );
    }
}

/// Keeps the shared node's schema small: drops test keyspaces of runs long finished.
async fn drop_stale_keyspaces() {
    let Ok(store) = ScyllaCheckpointStore::connect(&config(keyspace())).await else {
        return;
    };
    let Ok(result) = store
        .session()
        .query_unpaged("SELECT keyspace_name FROM system_schema.keyspaces", ())
        .await
    else {
        return;
    };
    let Ok(rows) = result.into_rows_result() else {
        return;
    };
    let Ok(names) = rows.rows::<(String,)>() else {
        return;
    };
    let now = unix_secs();
    for (name,) in names.flatten() {
        let Some(rest) = name.strip_prefix("turnstile_test_") else {
            continue;
        };
        let secs = rest.split('_').next().and_then(|s| s.parse::<u64>().ok());
        if secs.is_some_and(|s| s + STALE_KEYSPACE_SECS < now) {
            let _ = store
                .session()
                .query_unpaged(format!("DROP KEYSPACE IF EXISTS {name}"), ())
                .await;
        }
    }
}

async fn store() -> ScyllaCheckpointStore {
    ensure_migrated();
    match ScyllaCheckpointStore::connect(&config(keyspace())).await {
        Ok(s) => s,
        Err(e) => panic!(
            "cannot connect to Cassandra at {}: {e}; {START_HINT}",
            contact()
        ),
    }
}

/// A conversation no other test touches.
fn identity(tenant: &str, label: &str) -> Identity {
    Identity::new(tenant, "agent-1", &format!("{label}-{:08x}", random_u32()))
}

fn row(state: &str, epoch: i64) -> StoredRow {
    StoredRow {
        state: state.as_bytes().to_vec(),
        in_flight: None,
        applied: None,
        outbox: None,
        epoch,
    }
}

fn ts(epoch: i64, offset: i64, phase: u8) -> i64 {
    match write_timestamp(epoch, offset, phase) {
        Ok(ts) => ts,
        Err(e) => panic!("write_timestamp({epoch}, {offset}, {phase}): {e}"),
    }
}

fn fence(epoch: i64, offset: i64) -> Fence {
    Fence { epoch, offset }
}

async fn load(store: &ScyllaCheckpointStore, id: &Identity) -> Option<StoredRow> {
    match store.load_row(id).await {
        Ok(r) => r,
        Err(e) => panic!("load_row: {e}"),
    }
}

async fn save(store: &ScyllaCheckpointStore, id: &Identity, row: &StoredRow, ts: i64) {
    if let Err(e) = store.save_row(id, row, ts).await {
        panic!("save_row: {e}");
    }
}

#[tokio::test]
async fn migrate_is_idempotent() {
    ensure_migrated();
    // A keyspace of its own, so the first run really creates everything.
    let ks = format!("{}_m", keyspace());
    let cfg = config(&ks);
    for run in 1..=2 {
        if let Err(e) = ScyllaCheckpointStore::migrate(&cfg).await {
            panic!("migrate run {run} on {}: {e}; {START_HINT}", contact());
        }
    }
    let store = match ScyllaCheckpointStore::connect(&cfg).await {
        Ok(s) => s,
        Err(e) => panic!("connect after migrate: {e}"),
    };
    let tables = store
        .session()
        .query_unpaged(
            "SELECT table_name, default_time_to_live FROM system_schema.tables \
             WHERE keyspace_name = ?",
            (&ks,),
        )
        .await
        .expect("system_schema.tables")
        .into_rows_result()
        .expect("rows")
        .rows::<(String, i32)>()
        .expect("typed rows")
        .collect::<Result<Vec<_>, _>>()
        .expect("decoded rows");
    let mut names: Vec<&str> = tables.iter().map(|(n, _)| n.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["checkpoints", "decision_records", "partition_leases"]
    );
    // ST-6: retention (30 days by default) is far longer than SESSION_TTL (30 minutes); decision
    // records (issue 26) leave with their checkpoint.
    for table in ["checkpoints", "decision_records"] {
        let ttl = tables.iter().find(|(n, _)| n == table).map(|(_, ttl)| *ttl);
        assert_eq!(ttl, Some(30 * 86_400), "{table}");
    }
    let _ = store
        .session()
        .query_unpaged(format!("DROP KEYSPACE IF EXISTS {ks}"), ())
        .await;
}

#[tokio::test]
async fn connect_without_schema_is_rejected_with_a_hint() {
    ensure_migrated();
    let cfg = config(&format!("{}_none", keyspace()));
    match ScyllaCheckpointStore::connect(&cfg).await {
        Err(e @ StoreError::Rejected { .. }) => {
            assert!(e.to_string().contains("turnstile migrate"), "{e}");
            assert_eq!(e.retry_class(), RetryClass::Fatal);
        }
        other => panic!("expected Rejected, got {other:?}"),
    }
}

#[tokio::test]
async fn unreachable_store_is_unavailable_and_retryable() {
    // Port 1 on loopback refuses connections: the transient class, retried, then reported.
    let cfg = CqlConfig {
        contact_points: vec!["127.0.0.1:1".into()],
        request_timeout_ms: 500,
        ..CqlConfig::default()
    };
    let started = Instant::now();
    match ScyllaCheckpointStore::connect(&cfg).await {
        Err(e @ StoreError::Unavailable { .. }) => {
            assert_eq!(e.retry_class(), RetryClass::Retryable);
            // The driver's error is kept with its type, not flattened into the message.
            let cause = std::error::Error::source(&e).expect("the driver's error");
            assert!(cause.is::<scylla::errors::NewSessionError>(), "{cause:?}");
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
    // Bounded retries: a few attempts within ~2 s of pauses, not a hang.
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn save_load_round_trip() {
    let store = store().await;
    let id = identity("tenant-a", "roundtrip");
    assert_eq!(load(&store, &id).await, None, "absent row loads as None");
    let full = StoredRow {
        state: br#"{"schema_version":2}"#.to_vec(),
        in_flight: Some(b"in-flight".to_vec()),
        applied: Some((3, 41)),
        outbox: Some(br#"[{"offset":41}]"#.to_vec()),
        epoch: 7,
    };
    save(&store, &id, &full, ts(7, 41, PHASE_TURN_END)).await;
    assert_eq!(load(&store, &id).await, Some(full.clone()));

    // The port: load returns the whole row; the write-ahead writes only state, in-flight and
    // epoch (LC-4), leaving the end-of-turn bookkeeping alone.
    let record = CheckpointStore::load(&store, &id).await.expect("port load");
    assert_eq!(record, Some(full.clone()));
    let next = CheckpointRecord {
        state: b"next".to_vec(),
        in_flight: None,
        epoch: 7,
        ..Default::default()
    };
    store
        .save_write_ahead(&id, &next, fence(7, 42))
        .await
        .expect("port save");
    let stored = load(&store, &id).await.expect("row");
    assert_eq!(stored.state, next.state);
    assert_eq!(stored.in_flight, None, "a None in-flight clears the cell");
    assert_eq!(stored.applied, full.applied, "applied offset untouched");
    assert_eq!(stored.outbox, full.outbox, "outbox untouched");
}

#[tokio::test]
async fn tenants_are_isolated() {
    // ST-3: the same agent and session ids under two tenants are two rows.
    let store = store().await;
    let a = identity("tenant-a", "shared");
    let b = Identity::new("tenant-b", &a.agent_id, &a.session_id);
    save(&store, &a, &row("state of a", 1), ts(1, 10, PHASE_TURN_END)).await;
    assert_eq!(
        load(&store, &b).await,
        None,
        "tenant b cannot see tenant a's row"
    );
    save(&store, &b, &row("state of b", 1), ts(1, 10, PHASE_TURN_END)).await;
    assert_eq!(
        load(&store, &a).await.map(|r| r.state),
        Some(b"state of a".to_vec())
    );
    assert_eq!(
        load(&store, &b).await.map(|r| r.state),
        Some(b"state of b".to_vec())
    );
}

#[tokio::test]
async fn zombie_write_arriving_late_does_not_overwrite_new_owner() {
    // IO-4: the new owner (epoch 2) writes first; the zombie (epoch 1) arrives later, even with a
    // far higher offset, and loses last-write-wins on every column it writes.
    let store = store().await;
    let id = identity("tenant-a", "zombie");
    let owner = StoredRow {
        applied: Some((0, 5)),
        outbox: Some(b"[]".to_vec()),
        ..row("new owner", 2)
    };
    save(&store, &id, &owner, ts(2, 5, PHASE_WRITE_AHEAD)).await;
    let zombie = StoredRow {
        in_flight: Some(b"zombie in flight".to_vec()),
        applied: Some((0, 900)),
        outbox: Some(b"[\"zombie\"]".to_vec()),
        ..row("zombie", 1)
    };
    save(&store, &id, &zombie, ts(1, 900, PHASE_OUTBOX_PRUNE)).await;
    assert_eq!(load(&store, &id).await, Some(owner.clone()));

    // The zombie's port writes lose too; its next load shows a newer owner's epoch, which the
    // pipeline reads as fenced (tests/pipeline.rs).
    let via_port = CheckpointRecord {
        state: b"zombie via port".to_vec(),
        in_flight: Some(b"x".to_vec()),
        epoch: 1,
        ..Default::default()
    };
    store
        .save_write_ahead(&id, &via_port, fence(1, 901))
        .await
        .expect("the write is accepted, and silently loses");
    store
        .save_turn(&id, &via_port, fence(1, 901))
        .await
        .expect("the write is accepted, and silently loses");
    assert_eq!(load(&store, &id).await, Some(owner));
    let seen = CheckpointStore::load(&store, &id).await.expect("load");
    assert!(
        seen.is_some_and(|r| r.epoch > 1),
        "a newer owner is visible"
    );
}

#[tokio::test]
async fn write_ahead_then_turn_end_of_one_offset_ends_with_turn_end() {
    let store = store().await;
    let executing = CheckpointRecord {
        state: b"executing".to_vec(),
        in_flight: Some(b"answers so far".to_vec()),
        epoch: 4,
        ..Default::default()
    };

    // In order: LC-4 write-ahead (phase 0), then the end of the turn (phase 1).
    let id = identity("tenant-a", "phases");
    store
        .save_write_ahead(&id, &executing, fence(4, 77))
        .await
        .expect("write-ahead");
    let end = StoredRow {
        applied: Some((0, 77)),
        outbox: Some(b"[{\"offset\":77}]".to_vec()),
        ..row("done", 4)
    };
    save(&store, &id, &end, ts(4, 77, PHASE_TURN_END)).await;
    assert_eq!(load(&store, &id).await, Some(end.clone()));

    // Reordered (a retried write-ahead landing after the end): phase 1 still wins.
    let id = identity("tenant-a", "phases-reordered");
    save(&store, &id, &end, ts(4, 77, PHASE_TURN_END)).await;
    store
        .save_write_ahead(&id, &executing, fence(4, 77))
        .await
        .expect("late write-ahead");
    assert_eq!(load(&store, &id).await, Some(end));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_epoch_is_monotonic_and_distinct_under_concurrency() {
    let store = std::sync::Arc::new(store().await);
    let topic = format!("turns-{:08x}", random_u32());
    let mut last = 0;
    for _ in 0..3 {
        let epoch = store
            .acquire_epoch(&topic, 0, "worker-0")
            .await
            .expect("acquire");
        assert!(epoch > last, "epoch {epoch} after {last}");
        last = epoch;
    }
    assert_eq!(last, 3, "a fresh lease starts at 1 and steps by 1");

    let mut tasks = Vec::new();
    for i in 0..8 {
        let store = store.clone();
        let topic = topic.clone();
        tasks.push(tokio::spawn(async move {
            store.acquire_epoch(&topic, 0, &format!("worker-{i}")).await
        }));
    }
    let mut epochs = HashSet::new();
    for t in tasks {
        let epoch = t.await.expect("task").expect("acquire under contention");
        assert!(epoch > last, "concurrent epoch {epoch} not above {last}");
        assert!(epochs.insert(epoch), "epoch {epoch} handed out twice");
    }
    assert_eq!(epochs.len(), 8);
    // Another partition of the same topic has its own sequence.
    assert_eq!(store.acquire_epoch(&topic, 1, "worker-0").await.unwrap(), 1);
}

#[tokio::test]
async fn rows_carry_the_retention_ttl() {
    // ST-6: each write refreshes the row's TTL; it is the retention, far above SESSION_TTL.
    let store = store().await;
    let id = identity("tenant-a", "ttl");
    save(&store, &id, &row("s", 1), ts(1, 1, PHASE_TURN_END)).await;
    let (ttl,) = store
        .session()
        .query_unpaged(
            format!(
                "SELECT TTL(state) FROM {}.checkpoints \
                 WHERE tenant_id = ? AND agent_id = ? AND session_id = ?",
                store.keyspace()
            ),
            (&id.tenant_id, &id.agent_id, &id.session_id),
        )
        .await
        .expect("ttl query")
        .into_rows_result()
        .expect("rows")
        .single_row::<(Option<i32>,)>()
        .expect("one row");
    let ttl = ttl.expect("state has a TTL");
    assert!(ttl > 29 * 86_400 && ttl <= 30 * 86_400, "ttl {ttl}");
}

#[tokio::test]
async fn ping_answers() {
    let store = store().await;
    store.ping().await.expect("ping");
}

#[test]
fn write_timestamp_orders_epochs_then_offsets_then_phases() {
    // IO-4: any write of a newer epoch beats any write of an older one.
    assert!(ts(2, 0, PHASE_WRITE_AHEAD) > ts(1, OFFSET_LIMIT - 1, PHASE_OUTBOX_PRUNE));
    assert!(ts(1, 11, PHASE_WRITE_AHEAD) > ts(1, 10, PHASE_OUTBOX_PRUNE));
    assert!(ts(1, 10, PHASE_TURN_END) > ts(1, 10, PHASE_WRITE_AHEAD));
    assert!(ts(1, 10, PHASE_OUTBOX_PRUNE) > ts(1, 10, PHASE_TURN_END));
    assert_eq!(ts(1, 1, PHASE_TURN_END), (1 << 40) | (1 << 2) | 1);
    assert!(ts(EPOCH_LIMIT - 1, OFFSET_LIMIT - 1, PHASE_OUTBOX_PRUNE) > 0);
}

#[test]
fn write_timestamp_refuses_values_outside_its_bit_budget() {
    for (epoch, offset, phase) in [
        (EPOCH_LIMIT, 0, PHASE_TURN_END),
        (-1, 0, PHASE_TURN_END),
        (1, OFFSET_LIMIT, PHASE_TURN_END),
        (1, -1, PHASE_TURN_END),
        (1, 0, 3),
    ] {
        match write_timestamp(epoch, offset, phase) {
            Err(e @ StoreError::Rejected { .. }) => {
                assert_eq!(e.retry_class(), RetryClass::Fatal);
            }
            other => panic!("({epoch}, {offset}, {phase}) gave {other:?}"),
        }
    }
}

#[tokio::test]
async fn save_row_refuses_a_timestamp_of_another_epoch() {
    let store = store().await;
    let id = identity("tenant-a", "mismatch");
    let r = store
        .save_row(&id, &row("s", 2), ts(1, 1, PHASE_TURN_END))
        .await;
    assert!(matches!(r, Err(StoreError::Rejected { .. })), "{r:?}");
}

#[tokio::test]
async fn load_and_save_latency() {
    // Measured, printed, not asserted: the shared test box makes timings noisy.
    let store = store().await;
    let id = identity("tenant-a", "latency");
    let state = vec![b'x'; 2_048];
    let mut saves = Vec::with_capacity(300);
    let mut loads = Vec::with_capacity(300);
    for offset in 0..300 {
        let r = StoredRow {
            state: state.clone(),
            ..row("", 1)
        };
        let started = Instant::now();
        save(&store, &id, &r, ts(1, offset, PHASE_TURN_END)).await;
        saves.push(started.elapsed());
        let started = Instant::now();
        assert!(load(&store, &id).await.is_some());
        loads.push(started.elapsed());
    }
    saves.sort_unstable();
    loads.sort_unstable();
    let pct = |v: &[Duration], p: usize| v[(v.len() * p / 100).min(v.len() - 1)];
    println!(
        "checkpoint latency over 300 ops (2 KiB state, LOCAL_QUORUM, 1 node): \
         save p50 {:?} p99 {:?}; load p50 {:?} p99 {:?}",
        pct(&saves, 50),
        pct(&saves, 99),
        pct(&loads, 50),
        pct(&loads, 99)
    );
}

#[tokio::test]
async fn inspect_shows_the_stored_checkpoint_as_json() {
    // In-process rather than through the binary: target/debug/turnstile is shared with other
    // builds on this machine and may be a different revision while this test runs.
    use turnstile::cli::inspect;
    let store = store().await;
    let id = identity("tenant-a", "inspect");
    let args = |id: &Identity| inspect::Args {
        tenant: id.tenant_id.clone(),
        agent: id.agent_id.clone(),
        session: id.session_id.clone(),
        contact: contact(),
        keyspace: keyspace().to_owned(),
    };
    assert_eq!(inspect::run(args(&id)).await, inspect::EXIT_ABSENT);

    let state = turnstile::domain::state::AgentState::default();
    let stored = StoredRow {
        state: turnstile::domain::state::encode(&state),
        in_flight: Some(b"not json".to_vec()),
        applied: Some((2, 17)),
        outbox: Some(br#"[{"offset":17}]"#.to_vec()),
        epoch: 5,
    };
    save(&store, &id, &stored, ts(5, 17, PHASE_TURN_END)).await;
    assert_eq!(inspect::run(args(&id)).await, 0);
    let json = inspect::render(&load(&store, &id).await.expect("row"));
    let expected_state = serde_json::to_value(&state).expect("state as JSON");
    assert_eq!(json["state"], expected_state);
    assert_eq!(
        json["applied"],
        serde_json::json!({"partition": 2, "offset": 17})
    );
    assert_eq!(json["outbox"], serde_json::json!([{"offset": 17}]));
    assert_eq!(json["epoch"], 5);
    // A blob that is not JSON is shown, never hidden (ST-4).
    assert_eq!(json["in_flight"]["base64"], "bm90IGpzb24=");
}

#[tokio::test]
async fn migrate_command_exits_zero_and_69_when_unreachable() {
    use turnstile::cli::migrate;
    ensure_migrated();
    let args = |contact: String| migrate::Args {
        contact,
        keyspace: keyspace().to_owned(),
        retention_days: 30,
        replication: turnstile::store::cql::DEFAULT_REPLICATION.to_owned(),
        local_dc: None,
    };
    assert_eq!(migrate::run(args(contact())).await, migrate::EXIT_OK);
    assert_eq!(
        migrate::run(args("127.0.0.1:1".to_owned())).await,
        migrate::EXIT_UNAVAILABLE
    );
    let bad = migrate::Args {
        keyspace: "no-dashes".to_owned(),
        ..args(contact())
    };
    assert_eq!(migrate::run(bad).await, migrate::EXIT_CONFIG);
}

// Operations: with_max_concurrency bounds the requests in progress against the real store; the
// others wait and then succeed, and every write lands.
#[tokio::test]
async fn concurrency_cap_bounds_requests_in_progress() {
    let store = std::sync::Arc::new(store().await.with_max_concurrency(2));
    let ids: Vec<Identity> = (0..16)
        .map(|i| identity("t-cap", &format!("c{i}")))
        .collect();
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for (i, id) in ids.iter().cloned().enumerate() {
        let (store, peak) = (store.clone(), peak.clone());
        tasks.spawn(async move {
            let r = row(&format!("{{\"n\":{i}}}"), 1);
            let write = store.save_row(&id, &r, ts(1, i as i64, 1));
            tokio::pin!(write);
            // Sample the slots while this write is pending.
            loop {
                tokio::select! {
                    done = &mut write => { done.expect("save"); break; }
                    _ = tokio::task::yield_now() => {
                        peak.fetch_max(store.requests_in_progress(), std::sync::atomic::Ordering::SeqCst);
                    }
                }
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.expect("task");
    }
    let seen = peak.load(std::sync::atomic::Ordering::SeqCst);
    assert!(
        (1..=2).contains(&seen),
        "requests in progress peaked at {seen}"
    );
    assert_eq!(store.requests_in_progress(), 0, "every slot is given back");
    for (i, id) in ids.iter().enumerate() {
        let got = load(&store, id).await.expect("row written");
        assert_eq!(got.state, format!("{{\"n\":{i}}}").into_bytes());
    }
}

/// A row as release 0.1 wrote it (tests/data/rows-0.1: a write-ahead of a turn that crashed
/// mid-execution, with an outbox entry of the turn before) loads through the port and decodes
/// into the state and in-flight turn recovery replays (tests/pipeline.rs replays it).
#[tokio::test]
async fn rows_written_by_release_0_1_load_through_the_port() {
    let store = store().await;
    let id = identity("tenant-a", "release-0-1");
    let read = |name: &str| std::fs::read(format!("tests/data/rows-0.1/{name}")).expect("fixture");
    let outbox = br#"[{"topic":"turns","partition":0,"offset":6,"turn_id":"u1","outputs":[{"topic":"replies","key":"t1/retail-bot/s-engine","payload":{"text":"hi"},"output_id":"id-1","kind":"reply"}]}]"#;
    let old = StoredRow {
        state: read("write-ahead.state.json"),
        in_flight: Some(read("write-ahead.in_flight.json")),
        applied: Some((0, 6)),
        outbox: Some(outbox.to_vec()),
        epoch: 3,
    };
    save(&store, &id, &old, ts(3, 7, PHASE_WRITE_AHEAD)).await;
    let row = CheckpointStore::load(&store, &id)
        .await
        .expect("load")
        .expect("row");
    assert_eq!(row, old);
    let (state, in_flight) =
        turnstile::pipeline::decode_record(&row.state, row.in_flight.as_deref()).expect("decode");
    let in_flight = in_flight.expect("in-flight turn");
    assert_eq!(in_flight.turn_id, "u2");
    assert!(!in_flight.answers.is_empty());
    assert!(state.active_transaction.is_some(), "EXECUTING transaction");
    let entries = turnstile::pipeline::outbox::decode(row.outbox.as_deref());
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].outputs[0].output_id, "id-1");
}
