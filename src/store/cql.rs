//! `ScyllaCheckpointStore`: checkpoints and partition leases in ScyllaDB (or Apache Cassandra)
//! over CQL, with the worker's fencing contract (IO-4). See `docs/store.md`.
//!
//! # Fencing
//!
//! Every checkpoint write carries the fencing timestamp of [`crate::store::fencing`] as
//! `USING TIMESTAMP`. The epoch comes from [`ScyllaCheckpointStore::acquire_epoch`], one
//! lightweight transaction per partition assignment, so no per-turn Paxos round is needed.
//!
//! A given `(epoch, offset, phase)` must always be written with the same values: on equal
//! timestamps the store keeps the larger value, not the later one. Retries satisfy this (same
//! statement, same timestamp, same values), which is what makes them safe.
//!
//! # Retries
//!
//! None here: a failed call returns its classified [`StoreError`] at once, and
//! [`crate::store::RetryingStore`] is the one layer that retries (`docs/store.md`).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use backon::{BackoffBuilder, ExponentialBuilder, Retryable};
use metrics::{counter, gauge, histogram};
use scylla::client::execution_profile::ExecutionProfile;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use scylla::errors::{
    DbError, ExecutionError, NewSessionError, PrepareError, RequestAttemptError,
    SchemaAgreementError,
};
use scylla::policies::load_balancing::DefaultPolicy;
use scylla::response::query_result::QueryResult;
use scylla::statement::prepared::PreparedStatement;
use scylla::statement::unprepared::Statement;
use scylla::statement::{Consistency, SerialConsistency};
use scylla::value::{CqlTimestamp, Row};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::fencing::fence_timestamp;
pub use super::fencing::{
    write_timestamp, EPOCH_LIMIT, OFFSET_LIMIT, PHASE_OUTBOX_PRUNE, PHASE_TURN_END,
    PHASE_WRITE_AHEAD,
};
use crate::domain::turn::Identity;
use crate::ports::{CheckpointRecord, CheckpointStore, Fence, StoreError};
use crate::telemetry::{
    Waiting, CHECKPOINT_ERRORS_TOTAL, CHECKPOINT_LOAD_DURATION_SECONDS,
    CHECKPOINT_REQUESTS_WAITING, CHECKPOINT_SAVE_DURATION_SECONDS,
};

/// Where the local test node listens (`scripts/services.sh up`).
pub const DEFAULT_CONTACT: &str = "127.0.0.1:9042";
pub const DEFAULT_KEYSPACE: &str = "turnstile";
/// Far longer than `SESSION_TTL` (30 minutes), so retention never ends an active conversation (ST-6).
pub const DEFAULT_RETENTION_DAYS: u32 = 30;
/// Right for one local node only; production passes NetworkTopologyStrategy with RF 3.
pub const DEFAULT_REPLICATION: &str = "{'class': 'SimpleStrategy', 'replication_factor': 1}";
pub const DEFAULT_REQUEST_TIMEOUT_MS: u64 = 2_000;

/// Cassandra's largest TTL is 20 years; retention beyond that would be refused at migrate time.
const MAX_RETENTION_DAYS: u32 = 20 * 365;
/// DDL waits for schema agreement server-side, which takes seconds on a busy node.
const DDL_TIMEOUT: Duration = Duration::from_secs(30);
/// Compare-and-set rounds before `acquire_epoch` gives up: only reached under heavy contention.
const LEASE_ATTEMPTS: usize = 32;

/// The schema, applied in order by [`ScyllaCheckpointStore::migrate`]. Embedded so the binary
/// migrates without the source tree.
const MIGRATIONS: &[(&str, &str)] = &[
    (
        "001_keyspace.cql",
        include_str!("../../schemas/cql/001_keyspace.cql"),
    ),
    (
        "002_checkpoints.cql",
        include_str!("../../schemas/cql/002_checkpoints.cql"),
    ),
    (
        "003_partition_leases.cql",
        include_str!("../../schemas/cql/003_partition_leases.cql"),
    ),
    (
        "004_checkpoints_retention.cql",
        include_str!("../../schemas/cql/004_checkpoints_retention.cql"),
    ),
];

/// Connection and schema settings for the CQL store.
#[derive(Debug, Clone)]
pub struct CqlConfig {
    /// `host:port` of one or more nodes; the driver discovers the rest of the cluster.
    pub contact_points: Vec<String>,
    pub keyspace: String,
    /// Datacenter whose replicas are preferred (and the only ones used: no DC failover, so
    /// LOCAL_QUORUM means what it says). `None` on a single-DC cluster.
    pub local_dc: Option<String>,
    /// Client-side timeout of one request attempt.
    pub request_timeout_ms: u64,
    /// Row retention (table `default_time_to_live`), applied at migrate time.
    pub retention_days: u32,
    /// CQL replication map for `CREATE KEYSPACE`, applied at migrate time.
    pub replication: String,
    /// Names of the environment variables holding credentials, so secrets never sit in config.
    pub username_env: Option<String>,
    pub password_env: Option<String>,
    pub read_consistency: Consistency,
    pub write_consistency: Consistency,
}

impl Default for CqlConfig {
    fn default() -> Self {
        CqlConfig {
            contact_points: vec![DEFAULT_CONTACT.to_owned()],
            keyspace: DEFAULT_KEYSPACE.to_owned(),
            local_dc: None,
            request_timeout_ms: DEFAULT_REQUEST_TIMEOUT_MS,
            retention_days: DEFAULT_RETENTION_DAYS,
            replication: DEFAULT_REPLICATION.to_owned(),
            username_env: None,
            password_env: None,
            read_consistency: Consistency::LocalQuorum,
            write_consistency: Consistency::LocalQuorum,
        }
    }
}

/// Variables of the store's credentials (password authentication), read by `run`, `migrate` and
/// `inspect`: the values stay in the environment (a Kubernetes Secret), never in arguments.
pub const USERNAME_VAR: &str = "TURNSTILE_CQL_USERNAME";
pub const PASSWORD_VAR: &str = "TURNSTILE_CQL_PASSWORD";

impl CqlConfig {
    /// Password authentication when `TURNSTILE_CQL_USERNAME` is set (with
    /// `TURNSTILE_CQL_PASSWORD`); `env` is the process environment in production.
    pub fn with_credentials_from(mut self, env: impl Fn(&str) -> Option<String>) -> Self {
        if env(USERNAME_VAR).is_some_and(|u| !u.is_empty()) {
            self.username_env = Some(USERNAME_VAR.to_owned());
            self.password_env = Some(PASSWORD_VAR.to_owned());
        }
        self
    }

    /// Checks what ends up spliced into CQL text (keyspace, replication), since identifiers and
    /// DDL options cannot be bound as values.
    pub fn validate(&self) -> Result<(), StoreError> {
        let ks = &self.keyspace;
        if ks.is_empty()
            || ks.len() > 48
            || !ks.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(StoreError::Rejected(format!(
                "keyspace {ks:?} must be 1-48 characters of [A-Za-z0-9_]"
            )));
        }
        let r = self.replication.trim();
        if !(r.starts_with('{') && r.ends_with('}')) || r.contains(';') || r.contains("--") {
            return Err(StoreError::Rejected(format!(
                "replication {r:?} must be one CQL map literal, e.g. {DEFAULT_REPLICATION}"
            )));
        }
        if !(1..=MAX_RETENTION_DAYS).contains(&self.retention_days) {
            return Err(StoreError::Rejected(format!(
                "retention_days {} must be 1..={MAX_RETENTION_DAYS} (and far above SESSION_TTL)",
                self.retention_days
            )));
        }
        if self.contact_points.is_empty() {
            return Err(StoreError::Rejected("no contact points".into()));
        }
        if self.request_timeout_ms == 0 {
            return Err(StoreError::Rejected(
                "request_timeout_ms must be > 0".into(),
            ));
        }
        Ok(())
    }

    fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.request_timeout_ms)
    }

    fn retention_seconds(&self) -> u64 {
        u64::from(self.retention_days) * 86_400
    }
}

/// The row as this adapter's callers (inspection, tests) have long named it.
pub type StoredRow = CheckpointRecord;

/// Checkpoints and partition leases over one driver session. Statements are prepared once at
/// [`connect`](Self::connect); the session is shared by every partition the worker owns.
pub struct ScyllaCheckpointStore {
    session: Session,
    keyspace: String,
    load: PreparedStatement,
    save_row: PreparedStatement,
    save_state: PreparedStatement,
    lease_read: PreparedStatement,
    lease_insert: PreparedStatement,
    lease_update: PreparedStatement,
    ping: PreparedStatement,
    /// Checkpoint requests allowed at once ([`Self::with_max_concurrency`]); `None` = unbounded.
    slots: Option<Arc<Semaphore>>,
    slot_count: usize,
}

impl std::fmt::Debug for ScyllaCheckpointStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScyllaCheckpointStore")
            .field("keyspace", &self.keyspace)
            .finish_non_exhaustive()
    }
}

type LoadedColumns = (
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Option<i32>,
    Option<i64>,
    Option<Vec<u8>>,
    Option<i64>,
);

impl ScyllaCheckpointStore {
    /// Connects and prepares every statement. Fails with `Rejected` when the schema is missing
    /// (run `turnstile migrate`) and with `Unavailable` when no node answers.
    pub async fn connect(cfg: &CqlConfig) -> Result<Self, StoreError> {
        cfg.validate()?;
        let session = build_session(cfg).await?;
        let ks = &cfg.keyspace;
        let read = cfg.read_consistency;
        let write = cfg.write_consistency;
        let load = prepare(
            &session,
            format!(
                "SELECT state, in_flight, applied_partition, applied_offset, outbox, epoch \
                 FROM {ks}.checkpoints WHERE tenant_id = ? AND agent_id = ? AND session_id = ?"
            ),
            read,
            true,
        )
        .await?;
        // Writes bind every column they own, nulls included: a null clears the cell with the same
        // fencing timestamp, so a stale write-ahead record cannot reappear.
        let save_row = prepare(
            &session,
            format!(
                "UPDATE {ks}.checkpoints USING TIMESTAMP ? SET state = ?, in_flight = ?, \
                 applied_partition = ?, applied_offset = ?, outbox = ?, epoch = ?, updated_at = ? \
                 WHERE tenant_id = ? AND agent_id = ? AND session_id = ?"
            ),
            write,
            true,
        )
        .await?;
        let save_state = prepare(
            &session,
            format!(
                "UPDATE {ks}.checkpoints USING TIMESTAMP ? SET state = ?, in_flight = ?, \
                 epoch = ?, updated_at = ? \
                 WHERE tenant_id = ? AND agent_id = ? AND session_id = ?"
            ),
            write,
            true,
        )
        .await?;
        // LOCAL_SERIAL read: it completes any in-progress Paxos round first, so the CAS below
        // starts from the latest committed epoch rather than a stale replica's.
        let lease_read = prepare(
            &session,
            format!("SELECT epoch FROM {ks}.partition_leases WHERE topic = ? AND partition = ?"),
            Consistency::LocalSerial,
            true,
        )
        .await?;
        // Conditional writes are never marked idempotent: a timed-out CAS may have applied. The
        // acquire loop re-reads instead of repeating the statement.
        let mut lease_insert = prepare(
            &session,
            format!(
                "INSERT INTO {ks}.partition_leases (topic, partition, epoch, owner, acquired_at) \
                 VALUES (?, ?, ?, ?, ?) IF NOT EXISTS"
            ),
            write,
            false,
        )
        .await?;
        lease_insert.set_serial_consistency(Some(SerialConsistency::LocalSerial));
        let mut lease_update = prepare(
            &session,
            format!(
                "UPDATE {ks}.partition_leases SET epoch = ?, owner = ?, acquired_at = ? \
                 WHERE topic = ? AND partition = ? IF epoch = ?"
            ),
            write,
            false,
        )
        .await?;
        lease_update.set_serial_consistency(Some(SerialConsistency::LocalSerial));
        // system.local lives on the coordinator itself: ONE answers "is this node serving CQL".
        let ping = prepare(
            &session,
            "SELECT release_version FROM system.local".to_owned(),
            Consistency::One,
            true,
        )
        .await?;
        Ok(ScyllaCheckpointStore {
            session,
            keyspace: cfg.keyspace.clone(),
            load,
            save_row,
            save_state,
            lease_read,
            lease_insert,
            lease_update,
            ping,
            slots: None,
            slot_count: 0,
        })
    }

    /// At most `n` checkpoint reads and writes at once; the others wait for a slot
    /// (`turnstile_checkpoint_requests_waiting`) before their duration is measured. When the
    /// store slows down, unbounded requests pile up in the driver, each holding its serialised
    /// frame (a whole checkpoint and outbox for a write) and timing out together.
    pub fn with_max_concurrency(mut self, n: usize) -> Self {
        self.slot_count = n.max(1);
        self.slots = Some(Arc::new(Semaphore::new(self.slot_count)));
        self
    }

    /// Checkpoint requests holding a slot now (0 without a cap).
    pub fn requests_in_progress(&self) -> usize {
        self.slots.as_ref().map_or(0, |s| {
            let total = self.slot_count;
            total - s.available_permits()
        })
    }

    async fn slot(&self) -> Option<OwnedSemaphorePermit> {
        let slots = self.slots.as_ref()?;
        let _waiting = Waiting::start(gauge!(CHECKPOINT_REQUESTS_WAITING));
        slots.clone().acquire_owned().await.ok()
    }

    /// Creates the keyspace and tables from `schemas/cql/*.cql`, in order, waiting for schema
    /// agreement after each statement. Idempotent: safe to run on every deploy.
    pub async fn migrate(cfg: &CqlConfig) -> Result<(), StoreError> {
        cfg.validate()?;
        let session = build_session(cfg).await?;
        for (name, template) in MIGRATIONS {
            let text = render(template, cfg)?;
            for stmt in split_statements(&text) {
                let mut statement = Statement::new(stmt.clone());
                statement.set_request_timeout(Some(DDL_TIMEOUT.max(cfg.request_timeout())));
                // IF NOT EXISTS / ALTER to a fixed value: repeating it converges.
                statement.set_is_idempotent(true);
                let session = &session;
                with_retries("migrate", || {
                    let statement = statement.clone();
                    async move {
                        session
                            .query_unpaged(statement, ())
                            .await
                            .map_err(classify_execution)?;
                        session
                            .await_schema_agreement()
                            .await
                            .map_err(classify_schema_agreement)?;
                        Ok(())
                    }
                })
                .await
                .map_err(|e| match e {
                    StoreError::Rejected(m) => StoreError::Rejected(format!("{name}: {m}")),
                    other => other,
                })?;
            }
            tracing::info!(file = name, keyspace = %cfg.keyspace, "cql migration applied");
        }
        Ok(())
    }

    /// The keyspace this store reads and writes.
    pub fn keyspace(&self) -> &str {
        &self.keyspace
    }

    /// The driver session, for diagnostics (`inspect`, tests). Checkpoint writes must go through
    /// [`save_row`](Self::save_row) so they carry a fencing timestamp.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Reads one conversation's row (ST-3: addressed by the full identity).
    pub async fn load_row(&self, id: &Identity) -> Result<Option<StoredRow>, StoreError> {
        let _slot = self.slot().await;
        let started = Instant::now();
        let result = match self
            .session
            .execute_unpaged(&self.load, (&id.tenant_id, &id.agent_id, &id.session_id))
            .await
        {
            Ok(result) => decode_row(result),
            Err(e) => Err(classify_execution(e)),
        };
        observe("load", CHECKPOINT_LOAD_DURATION_SECONDS, started, &result);
        result
    }

    /// Writes every column of the row with fencing timestamp `ts` ([`write_timestamp`]).
    ///
    /// `ts` must carry `row.epoch` in its epoch bits: the epoch column is how a reader learns that a
    /// newer owner wrote the row, so the two must agree.
    pub async fn save_row(
        &self,
        id: &Identity,
        row: &StoredRow,
        ts: i64,
    ) -> Result<(), StoreError> {
        let _slot = self.slot().await;
        let started = Instant::now();
        let result = self.save_row_inner(id, row, ts).await;
        observe("save", CHECKPOINT_SAVE_DURATION_SECONDS, started, &result);
        result
    }

    async fn save_row_inner(
        &self,
        id: &Identity,
        row: &StoredRow,
        ts: i64,
    ) -> Result<(), StoreError> {
        check_timestamp_epoch(ts, row.epoch)?;
        let updated_at = now_timestamp();
        let (applied_partition, applied_offset) = match row.applied {
            Some((p, o)) => (Some(p), Some(o)),
            None => (None, None),
        };
        self.session
            .execute_unpaged(
                &self.save_row,
                (
                    ts,
                    &row.state,
                    &row.in_flight,
                    applied_partition,
                    applied_offset,
                    &row.outbox,
                    row.epoch,
                    updated_at,
                    &id.tenant_id,
                    &id.agent_id,
                    &id.session_id,
                ),
            )
            .await
            .map_err(classify_execution)?;
        Ok(())
    }

    /// Writes only state, in-flight, epoch and updated_at; applied offset and outbox stay as they
    /// are (the LC-4 write-ahead must not disturb the end-of-turn bookkeeping).
    async fn save_state(
        &self,
        id: &Identity,
        record: &CheckpointRecord,
        epoch: i64,
        ts: i64,
    ) -> Result<(), StoreError> {
        let _slot = self.slot().await;
        let started = Instant::now();
        let result = async {
            check_timestamp_epoch(ts, epoch)?;
            let updated_at = now_timestamp();
            self.session
                .execute_unpaged(
                    &self.save_state,
                    (
                        ts,
                        &record.state,
                        &record.in_flight,
                        epoch,
                        updated_at,
                        &id.tenant_id,
                        &id.agent_id,
                        &id.session_id,
                    ),
                )
                .await
                .map_err(classify_execution)?;
            Ok(())
        }
        .await;
        observe("save", CHECKPOINT_SAVE_DURATION_SECONDS, started, &result);
        result
    }

    /// Takes the next lease epoch of `(topic, partition)` by compare-and-set: once per partition
    /// assignment, never per turn. Concurrent acquirers get distinct, increasing epochs.
    pub async fn acquire_epoch(
        &self,
        topic: &str,
        partition: i32,
        owner: &str,
    ) -> Result<i64, StoreError> {
        let result = self.acquire_epoch_inner(topic, partition, owner).await;
        if result.is_err() {
            counter!(CHECKPOINT_ERRORS_TOTAL, "op" => "acquire_epoch").increment(1);
        }
        result
    }

    async fn acquire_epoch_inner(
        &self,
        topic: &str,
        partition: i32,
        owner: &str,
    ) -> Result<i64, StoreError> {
        // Jittered pauses between lost rounds spread contending acquirers apart.
        let mut pauses = ExponentialBuilder::new()
            .with_min_delay(Duration::from_millis(5))
            .with_max_delay(Duration::from_millis(200))
            .with_jitter()
            .without_max_times()
            .build();
        let mut last_error = None;
        for _ in 0..LEASE_ATTEMPTS {
            match self.try_acquire(topic, partition, owner).await {
                Ok(Some(epoch)) => {
                    tracing::info!(
                        topic,
                        partition,
                        owner,
                        epoch,
                        "partition lease epoch acquired"
                    );
                    return Ok(epoch);
                }
                // Another acquirer won this round: read again and bid above it.
                Ok(None) => {}
                // A timed-out CAS may or may not have applied; re-reading settles it, because
                // the next round bids above whatever is committed.
                Err(e) if e.is_retryable() => last_error = Some(e),
                Err(e) => return Err(e),
            }
            if let Some(pause) = pauses.next() {
                tokio::time::sleep(pause).await;
            }
        }
        Err(last_error.unwrap_or_else(|| {
            StoreError::Unavailable(format!(
                "lease of {topic}/{partition} still contended after {LEASE_ATTEMPTS} rounds"
            ))
        }))
    }

    /// One compare-and-set round: `Some(epoch)` when this call's write applied.
    async fn try_acquire(
        &self,
        topic: &str,
        partition: i32,
        owner: &str,
    ) -> Result<Option<i64>, StoreError> {
        let current = self
            .session
            .execute_unpaged(&self.lease_read, (topic, partition))
            .await
            .map_err(classify_execution)?
            .into_rows_result()
            .map_err(|e| StoreError::Rejected(format!("lease read: {e}")))?
            .maybe_first_row::<(Option<i64>,)>()
            .map_err(|e| StoreError::Rejected(format!("lease read: {e}")))?
            .and_then(|(epoch,)| epoch);
        let now = now_timestamp();
        let (next, result) = match current {
            None => {
                let result = self
                    .session
                    .execute_unpaged(&self.lease_insert, (topic, partition, 1_i64, owner, now))
                    .await;
                (1, result)
            }
            Some(epoch) => {
                let next = epoch + 1;
                if next >= EPOCH_LIMIT {
                    return Err(StoreError::Rejected(format!(
                        "lease epoch of {topic}/{partition} reached 2^23: fencing timestamps \
                         would overflow; see docs/store.md"
                    )));
                }
                let result = self
                    .session
                    .execute_unpaged(
                        &self.lease_update,
                        (next, owner, now, topic, partition, epoch),
                    )
                    .await;
                (next, result)
            }
        };
        let applied = lwt_applied(result.map_err(classify_execution)?)?;
        Ok(applied.then_some(next))
    }

    /// One cheap round trip for `/readyz`. Not retried: readiness should report the present.
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.session
            .execute_unpaged(&self.ping, ())
            .await
            .map_err(classify_execution)?;
        Ok(())
    }
}

impl CheckpointStore for ScyllaCheckpointStore {
    async fn load(&self, identity: &Identity) -> Result<Option<CheckpointRecord>, StoreError> {
        self.load_row(identity).await
    }

    async fn save_write_ahead(
        &self,
        identity: &Identity,
        record: &CheckpointRecord,
        fence: Fence,
    ) -> Result<(), StoreError> {
        let ts = fence_timestamp(fence, PHASE_WRITE_AHEAD)?;
        self.save_state(identity, record, fence.epoch, ts).await
    }

    async fn save_turn(
        &self,
        identity: &Identity,
        record: &CheckpointRecord,
        fence: Fence,
    ) -> Result<(), StoreError> {
        let ts = fence_timestamp(fence, PHASE_TURN_END)?;
        self.save_row(identity, record, ts).await
    }

    async fn acquire_epoch(
        &self,
        topic: &str,
        partition: i32,
        owner: &str,
    ) -> Result<i64, StoreError> {
        ScyllaCheckpointStore::acquire_epoch(self, topic, partition, owner).await
    }
}

async fn build_session(cfg: &CqlConfig) -> Result<Session, StoreError> {
    let mut policy = DefaultPolicy::builder().token_aware(true);
    if let Some(dc) = &cfg.local_dc {
        policy = policy
            .prefer_datacenter(dc.clone())
            .permit_dc_failover(false);
    }
    let profile = ExecutionProfile::builder()
        .request_timeout(Some(cfg.request_timeout()))
        .consistency(cfg.write_consistency)
        .serial_consistency(Some(SerialConsistency::LocalSerial))
        .load_balancing_policy(policy.build())
        .build();
    let mut builder = SessionBuilder::new()
        .known_nodes(&cfg.contact_points)
        .connection_timeout(cfg.request_timeout())
        .default_execution_profile_handle(profile.into_handle());
    if let Some(user_env) = &cfg.username_env {
        let user = env_credential(user_env)?;
        let password = match &cfg.password_env {
            Some(p) => env_credential(p)?,
            None => String::new(),
        };
        builder = builder.user(user, password);
    }
    // A node that just started answers OPTIONS before it serves queries: retry briefly.
    let builder = &builder;
    with_retries("connect", || async {
        builder
            .build()
            .await
            .map_err(|e| classify_new_session(e, cfg))
    })
    .await
}

fn env_credential(name: &str) -> Result<String, StoreError> {
    std::env::var(name).map_err(|_| {
        StoreError::Rejected(format!("credential environment variable {name} is not set"))
    })
}

async fn prepare(
    session: &Session,
    text: String,
    consistency: Consistency,
    idempotent: bool,
) -> Result<PreparedStatement, StoreError> {
    let mut prepared = with_retries("prepare", || async {
        session
            .prepare(text.as_str())
            .await
            .map_err(|e| classify_prepare(&e))
    })
    .await
    .map_err(|e| match e {
        StoreError::Rejected(m) => StoreError::Rejected(format!(
            "{m} (is the schema migrated? run `turnstile migrate`)"
        )),
        other => other,
    })?;
    prepared.set_consistency(consistency);
    prepared.set_is_idempotent(idempotent);
    Ok(prepared)
}

/// Bounded, jittered exponential retries of an idempotent operation on transient errors only:
/// 50 ms doubling to 800 ms, at most 4 retries and 2 s of total pause.
async fn with_retries<T, F, Fut>(op: &'static str, f: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, StoreError>>,
{
    f.retry(
        ExponentialBuilder::new()
            .with_min_delay(Duration::from_millis(50))
            .with_max_delay(Duration::from_millis(800))
            .with_max_times(4)
            .with_total_delay(Some(Duration::from_secs(2)))
            .with_jitter(),
    )
    .when(StoreError::is_retryable)
    .notify(|e, pause| tracing::warn!(op, error = %e, ?pause, "checkpoint store retry"))
    .await
}

fn observe<T>(
    op: &'static str,
    metric: &'static str,
    started: Instant,
    result: &Result<T, StoreError>,
) {
    histogram!(metric).record(started.elapsed().as_secs_f64());
    if result.is_err() {
        counter!(CHECKPOINT_ERRORS_TOTAL, "op" => op).increment(1);
    }
}

fn check_timestamp_epoch(ts: i64, epoch: i64) -> Result<(), StoreError> {
    if ts < 0 || ts >> 40 != epoch {
        return Err(StoreError::Rejected(format!(
            "write timestamp {ts} does not carry epoch {epoch}; build it with write_timestamp"
        )));
    }
    Ok(())
}

fn now_timestamp() -> CqlTimestamp {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    CqlTimestamp(ms)
}

fn decode_row(result: QueryResult) -> Result<Option<StoredRow>, StoreError> {
    let rows = result
        .into_rows_result()
        .map_err(|e| StoreError::Rejected(format!("checkpoint read: {e}")))?;
    let Some((state, in_flight, partition, offset, outbox, epoch)) = rows
        .maybe_first_row::<LoadedColumns>()
        .map_err(|e| StoreError::Rejected(format!("checkpoint read: {e}")))?
    else {
        return Ok(None);
    };
    Ok(Some(StoredRow {
        // Every write sets state, so a null one means a damaged row: empty bytes fail to decode
        // and the pipeline reports it (ST-4) instead of starting over with an empty state.
        state: state.unwrap_or_default(),
        in_flight,
        applied: partition.zip(offset),
        outbox,
        epoch: epoch.unwrap_or(0),
    }))
}

/// The `[applied]` column every conditional statement returns first.
fn lwt_applied(result: QueryResult) -> Result<bool, StoreError> {
    let rows = result
        .into_rows_result()
        .map_err(|e| StoreError::Rejected(format!("lease write result: {e}")))?;
    let row = rows
        .maybe_first_row::<Row>()
        .map_err(|e| StoreError::Rejected(format!("lease write result: {e}")))?;
    row.and_then(|r| r.columns.into_iter().next().flatten())
        .and_then(|v| v.as_boolean())
        .ok_or_else(|| StoreError::Rejected("lease write returned no [applied] column".into()))
}

fn render(template: &str, cfg: &CqlConfig) -> Result<String, StoreError> {
    let text = template
        .replace("{{keyspace}}", &cfg.keyspace)
        .replace("{{replication}}", cfg.replication.trim())
        .replace(
            "{{default_time_to_live}}",
            &cfg.retention_seconds().to_string(),
        );
    if split_statements(&text).iter().any(|s| s.contains("{{")) {
        return Err(StoreError::Rejected(
            "schema template has an unknown placeholder".into(),
        ));
    }
    Ok(text)
}

/// Splits a CQL script on `;`, dropping `--` comments; quotes are respected so a `;` or `--`
/// inside a string literal stays part of the statement.
fn split_statements(script: &str) -> Vec<String> {
    let mut statements = Vec::new();
    let mut current = String::new();
    for line in script.lines() {
        let mut in_quote = false;
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\'' => {
                    in_quote = !in_quote;
                    current.push(c);
                }
                '-' if !in_quote && chars.peek() == Some(&'-') => break,
                ';' if !in_quote => {
                    let stmt = current.trim().to_owned();
                    if !stmt.is_empty() {
                        statements.push(stmt);
                    }
                    current.clear();
                }
                _ => current.push(c),
            }
        }
        current.push('\n');
    }
    let rest = current.trim();
    if !rest.is_empty() {
        statements.push(rest.to_owned());
    }
    statements
}

/// Transient (worth retrying, `Unavailable`) versus final (`Rejected`).
fn classify_execution(e: ExecutionError) -> StoreError {
    let transient = match &e {
        ExecutionError::RequestTimeout(_)
        | ExecutionError::EmptyPlan
        | ExecutionError::ConnectionPoolError(_)
        | ExecutionError::SchemaAgreementError(_)
        | ExecutionError::MetadataError(_)
        | ExecutionError::UseKeyspaceError(_) => true,
        ExecutionError::LastAttemptError(attempt) => attempt_is_transient(attempt),
        ExecutionError::PrepareError(p) => prepare_is_transient(p),
        _ => false,
    };
    wrap(transient, e.to_string())
}

fn classify_prepare(e: &PrepareError) -> StoreError {
    wrap(prepare_is_transient(e), e.to_string())
}

fn classify_schema_agreement(e: SchemaAgreementError) -> StoreError {
    // Disagreement or a timeout while nodes converge is the normal transient case for DDL.
    StoreError::Unavailable(format!("schema agreement: {e}"))
}

fn classify_new_session(e: NewSessionError, cfg: &CqlConfig) -> StoreError {
    let contacts = cfg.contact_points.join(",");
    match e {
        NewSessionError::EmptyKnownNodesList | NewSessionError::IllegalConfig(_) => {
            StoreError::Rejected(format!("cannot connect to {contacts}: {e}"))
        }
        other => StoreError::Unavailable(format!("cannot connect to {contacts}: {other}")),
    }
}

fn prepare_is_transient(e: &PrepareError) -> bool {
    match e {
        PrepareError::ConnectionPoolError(_) => true,
        PrepareError::AllAttemptsFailed { first_attempt } => attempt_is_transient(first_attempt),
        _ => false,
    }
}

fn attempt_is_transient(e: &RequestAttemptError) -> bool {
    match e {
        RequestAttemptError::BrokenConnectionError(_)
        | RequestAttemptError::UnableToAllocStreamId => true,
        RequestAttemptError::DbError(db, _) => matches!(
            db,
            DbError::Unavailable { .. }
                | DbError::Overloaded
                | DbError::IsBootstrapping
                | DbError::ReadTimeout { .. }
                | DbError::WriteTimeout { .. }
                | DbError::ReadFailure { .. }
                | DbError::WriteFailure { .. }
                | DbError::ServerError
                | DbError::RateLimitReached { .. }
                | DbError::TruncateError
        ),
        _ => false,
    }
}

fn wrap(transient: bool, message: String) -> StoreError {
    if transient {
        StoreError::Unavailable(message)
    } else {
        StoreError::Rejected(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_come_from_the_environment_only_when_a_username_is_set() {
        let none = CqlConfig::default().with_credentials_from(|_| None);
        assert_eq!((none.username_env, none.password_env), (None, None));
        let empty = CqlConfig::default().with_credentials_from(|_| Some(String::new()));
        assert_eq!(empty.username_env, None);
        let set = CqlConfig::default()
            .with_credentials_from(|k| (k == USERNAME_VAR).then(|| "turnstile".to_owned()));
        assert_eq!(set.username_env.as_deref(), Some("TURNSTILE_CQL_USERNAME"));
        assert_eq!(set.password_env.as_deref(), Some("TURNSTILE_CQL_PASSWORD"));
    }

    #[test]
    fn splits_statements_and_drops_comments() {
        let script =
            "-- a; b\nCREATE X (a int, -- c;\n b text) WITH comment = 'x; -- y';\n\nALTER Y;";
        let stmts = split_statements(script);
        assert_eq!(stmts.len(), 2);
        assert!(stmts[0].contains("'x; -- y'"));
        assert!(!stmts[0].contains("c;"));
        assert_eq!(stmts[1], "ALTER Y");
    }

    #[test]
    fn renders_every_placeholder() {
        let cfg = CqlConfig::default();
        for (name, template) in MIGRATIONS {
            let text = render(template, &cfg).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(!text.contains("{{"), "{name}");
        }
    }

    #[test]
    fn rejects_unsafe_keyspace_and_replication() {
        let bad_ks = CqlConfig {
            keyspace: "t; DROP KEYSPACE x".into(),
            ..CqlConfig::default()
        };
        assert!(bad_ks.validate().is_err());
        let bad_repl = CqlConfig {
            replication: "{'class':'SimpleStrategy'}; DROP TABLE x".into(),
            ..CqlConfig::default()
        };
        assert!(bad_repl.validate().is_err());
        assert!(CqlConfig::default().validate().is_ok());
    }
}
