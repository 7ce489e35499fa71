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

mod config;
mod decisions;
mod errors;
mod lease;
mod schema;
mod session;
mod tls;

pub use config::{CqlConfig, CqlCredentials, PASSWORD_VAR, USERNAME_VAR};
use errors::*;
use session::*;
pub use tls::{
    CqlTls, TLS_CA_FILE_VAR, TLS_CERT_FILE_VAR, TLS_KEY_FILE_VAR, TLS_VERIFY_HOSTNAME_VAR,
};

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
use crate::ports::{
    CheckpointRecord, CheckpointStore, DecisionRecordStore, DecisionRow, Fence, StoreError,
};
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
    decisions: decisions::DecisionStatements,
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

/// The partition-lease statements: the LOCAL_SERIAL read, and the conditional insert and update
/// (compare-and-set on the epoch).
async fn prepare_lease_statements(
    session: &Session,
    ks: &str,
    write: Consistency,
) -> Result<(PreparedStatement, PreparedStatement, PreparedStatement), StoreError> {
    // LOCAL_SERIAL read: it completes any in-progress Paxos round first, so the CAS below
    // starts from the latest committed epoch rather than a stale replica's.
    let lease_read = prepare(
        session,
        format!("SELECT epoch FROM {ks}.partition_leases WHERE topic = ? AND partition = ?"),
        Consistency::LocalSerial,
        true,
    )
    .await?;
    // Conditional writes are never marked idempotent: a timed-out CAS may have applied. The
    // acquire loop re-reads instead of repeating the statement.
    let mut lease_insert = prepare(
        session,
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
        session,
        format!(
            "UPDATE {ks}.partition_leases SET epoch = ?, owner = ?, acquired_at = ? \
             WHERE topic = ? AND partition = ? IF epoch = ?"
        ),
        write,
        false,
    )
    .await?;
    lease_update.set_serial_consistency(Some(SerialConsistency::LocalSerial));
    Ok((lease_read, lease_insert, lease_update))
}

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
        let (lease_read, lease_insert, lease_update) =
            prepare_lease_statements(&session, ks, write).await?;
        // system.local lives on the coordinator itself: ONE answers "is this node serving CQL".
        let ping = prepare(
            &session,
            "SELECT release_version FROM system.local".to_owned(),
            Consistency::One,
            true,
        )
        .await?;
        let decisions = decisions::DecisionStatements::prepare(&session, cfg).await?;
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
            decisions,
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

    async fn record_decision(
        &self,
        identity: &Identity,
        row: &DecisionRow,
        fence: Fence,
    ) -> Result<(), StoreError> {
        self.save_decision(identity, row, fence).await
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
        return Err(StoreError::rejected(format!(
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
        .map_err(refused("checkpoint read"))?;
    let Some((state, in_flight, partition, offset, outbox, epoch)) = rows
        .maybe_first_row::<LoadedColumns>()
        .map_err(refused("checkpoint read"))?
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
