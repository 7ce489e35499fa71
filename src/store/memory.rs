//! `InMemoryCheckpointStore`: checkpoint rows in a map, for the engine tests and the in-process
//! scenario runner; the worker uses the CQL store. It keeps the CQL adapter's write semantics, so
//! the runner exercises the same fencing: every write carries the fencing timestamp
//! (`store::fencing`) and a column group is replaced only by a write with a timestamp at least as
//! high (last-write-wins per cell, as in Cassandra).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use super::fencing::{fence_timestamp, PHASE_TURN_END, PHASE_WRITE_AHEAD};
use crate::domain::turn::Identity;
use crate::ports::{
    CheckpointRecord, CheckpointStore, DecisionRecordStore, DecisionRow, Fence, StoreError,
};

#[derive(Debug, Clone)]
struct Row {
    record: CheckpointRecord,
    /// Timestamp of the latest write of state, in-flight turn and epoch.
    state_ts: i64,
    /// Timestamp of the latest write of the applied offset and the outbox.
    turn_ts: i64,
}

/// Holds nothing but the stored rows and leases, so dropping everything else is a real restart.
#[derive(Debug, Default)]
pub struct InMemoryCheckpointStore {
    rows: Mutex<HashMap<Identity, Row>>,
    leases: Mutex<HashMap<(String, i32), i64>>,
    /// Decision records by conversation and turn id: (write timestamp, bytes); a deleted one
    /// keeps its timestamp with no bytes (a tombstone, as in Cassandra).
    decisions: Mutex<DecisionRows>,
}

type DecisionRows = HashMap<Identity, BTreeMap<String, (i64, Option<Vec<u8>>)>>;

fn poisoned<T>(_: T) -> StoreError {
    StoreError::unavailable("in-memory store poisoned by a panicked writer")
}

impl InMemoryCheckpointStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// The stored record, for assertions.
    pub fn get(&self, identity: &Identity) -> Option<CheckpointRecord> {
        Some(self.rows.lock().ok()?.get(identity)?.record.clone())
    }

    /// Overwrites the stored record, for tests that plant old or damaged checkpoints; any later
    /// write replaces it.
    pub fn put(&self, identity: &Identity, record: CheckpointRecord) {
        if let Ok(mut rows) = self.rows.lock() {
            let row = Row {
                record,
                state_ts: i64::MIN,
                turn_ts: i64::MIN,
            };
            rows.insert(identity.clone(), row);
        }
    }

    fn write(
        &self,
        identity: &Identity,
        record: &CheckpointRecord,
        ts: i64,
        whole_row: bool,
    ) -> Result<(), StoreError> {
        let mut rows = self.rows.lock().map_err(poisoned)?;
        let row = rows.entry(identity.clone()).or_insert_with(|| Row {
            record: CheckpointRecord::default(),
            state_ts: i64::MIN,
            turn_ts: i64::MIN,
        });
        if ts >= row.state_ts {
            row.state_ts = ts;
            row.record.state = record.state.clone();
            row.record.in_flight = record.in_flight.clone();
            row.record.epoch = record.epoch;
        }
        if whole_row && ts >= row.turn_ts {
            row.turn_ts = ts;
            row.record.applied = record.applied;
            row.record.outbox = record.outbox.clone();
        }
        Ok(())
    }
}

impl CheckpointStore for InMemoryCheckpointStore {
    async fn load(&self, identity: &Identity) -> Result<Option<CheckpointRecord>, StoreError> {
        let rows = self.rows.lock().map_err(poisoned)?;
        Ok(rows.get(identity).map(|row| row.record.clone()))
    }

    async fn save_write_ahead(
        &self,
        identity: &Identity,
        record: &CheckpointRecord,
        fence: Fence,
    ) -> Result<(), StoreError> {
        let ts = fence_timestamp(fence, PHASE_WRITE_AHEAD)?;
        self.write(identity, record, ts, false)
    }

    async fn save_turn(
        &self,
        identity: &Identity,
        record: &CheckpointRecord,
        fence: Fence,
    ) -> Result<(), StoreError> {
        let ts = fence_timestamp(fence, PHASE_TURN_END)?;
        self.write(identity, record, ts, true)
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
        _owner: &str,
    ) -> Result<i64, StoreError> {
        let mut leases = self.leases.lock().map_err(poisoned)?;
        let epoch = leases.entry((topic.to_owned(), partition)).or_insert(0);
        *epoch += 1;
        Ok(*epoch)
    }
}

impl DecisionRecordStore for InMemoryCheckpointStore {
    async fn save_decision(
        &self,
        identity: &Identity,
        row: &DecisionRow,
        fence: Fence,
    ) -> Result<(), StoreError> {
        let ts = fence_timestamp(fence, PHASE_TURN_END)?;
        let mut all = self.decisions.lock().map_err(poisoned)?;
        let rows = all.entry(identity.clone()).or_default();
        let cells = std::iter::once((&row.turn_id, Some(row.record.clone())))
            .chain(row.expired.iter().map(|id| (id, None)));
        for (turn_id, bytes) in cells {
            let cell = rows.entry(turn_id.clone()).or_insert((i64::MIN, None));
            if ts >= cell.0 {
                *cell = (ts, bytes);
            }
        }
        Ok(())
    }

    async fn load_decisions(&self, identity: &Identity) -> Result<Vec<DecisionRow>, StoreError> {
        let all = self.decisions.lock().map_err(poisoned)?;
        let Some(rows) = all.get(identity) else {
            return Ok(Vec::new());
        };
        let kept = rows.iter().filter_map(|(turn_id, (_, bytes))| {
            let record = bytes.clone()?;
            Some(DecisionRow {
                turn_id: turn_id.clone(),
                record,
                expired: Vec::new(),
            })
        });
        Ok(kept.collect())
    }

    async fn list_conversations(&self, limit: usize) -> Result<Vec<Identity>, StoreError> {
        let all = self.decisions.lock().map_err(poisoned)?;
        let mut ids: Vec<Identity> = all
            .iter()
            .filter(|(_, rows)| rows.values().any(|(_, bytes)| bytes.is_some()))
            .map(|(id, _)| id.clone())
            .collect();
        ids.sort();
        ids.truncate(limit);
        Ok(ids)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(state: &str, epoch: i64) -> CheckpointRecord {
        CheckpointRecord {
            state: state.as_bytes().to_vec(),
            epoch,
            applied: Some((0, 1)),
            outbox: Some(state.as_bytes().to_vec()),
            ..Default::default()
        }
    }

    /// IO-4: a zombie's write (lower epoch) loses to the new owner's whatever the arrival order;
    /// the write-ahead leaves the applied offset and the outbox alone.
    #[tokio::test]
    async fn writes_are_fenced_by_epoch_then_offset() {
        let store = InMemoryCheckpointStore::new();
        let id = Identity::new("t", "a", "s");
        let f = |epoch, offset| Fence { epoch, offset };
        store
            .save_turn(&id, &record("new owner", 2), f(2, 5))
            .await
            .unwrap();
        store
            .save_turn(&id, &record("zombie", 1), f(1, 900))
            .await
            .unwrap();
        let row = store.load(&id).await.unwrap().unwrap();
        assert_eq!(row.state, b"new owner");
        assert_eq!(row.epoch, 2);

        let mut ahead = record("executing", 2);
        ahead.in_flight = Some(b"answers".to_vec());
        ahead.outbox = None;
        store.save_write_ahead(&id, &ahead, f(2, 6)).await.unwrap();
        let row = store.load(&id).await.unwrap().unwrap();
        assert_eq!(row.state, b"executing");
        assert_eq!(
            row.outbox.as_deref(),
            Some(&b"new owner"[..]),
            "outbox untouched"
        );
        assert_eq!(
            store.acquire_epoch("turns", 0, "w").await.unwrap(),
            1,
            "leases count per partition"
        );
        assert_eq!(store.acquire_epoch("turns", 0, "w").await.unwrap(), 2);
        assert_eq!(store.acquire_epoch("turns", 1, "w").await.unwrap(), 1);
    }

    /// Issue 26: a decision record is fenced like the checkpoint (a zombie's loses), and a write
    /// deletes the records it names as expired.
    #[tokio::test]
    async fn decision_records_are_fenced_and_expire_by_name() {
        let store = InMemoryCheckpointStore::new();
        let id = Identity::new("t", "a", "s");
        let f = |epoch, offset| Fence { epoch, offset };
        let row = |turn: &str, bytes: &str, expired: &[&str]| DecisionRow {
            turn_id: turn.into(),
            record: bytes.as_bytes().to_vec(),
            expired: expired.iter().map(|s| s.to_string()).collect(),
        };
        store
            .save_decision(&id, &row("t1", "owner", &[]), f(2, 5))
            .await
            .unwrap();
        store
            .save_decision(&id, &row("t1", "zombie", &[]), f(1, 9))
            .await
            .unwrap();
        store
            .save_decision(&id, &row("t2", "second", &["t1"]), f(2, 6))
            .await
            .unwrap();
        let kept = store.load_decisions(&id).await.unwrap();
        assert_eq!(kept, vec![row("t2", "second", &[])]);
        assert_eq!(store.list_conversations(10).await.unwrap(), vec![id]);
    }
}
