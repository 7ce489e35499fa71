//! `InMemoryCheckpointStore`: checkpoint bytes in a map. For the pure engine tests and the
//! in-process scenario runner only; the worker uses the CQL store.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::domain::turn::Identity;
use crate::ports::{CheckpointRecord, CheckpointStore, StoreError};

/// Holds nothing but the stored bytes, so dropping everything else is a real restart.
#[derive(Debug, Default)]
pub struct InMemoryCheckpointStore {
    rows: Mutex<HashMap<Identity, CheckpointRecord>>,
}

impl InMemoryCheckpointStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// The stored record, for assertions.
    pub fn get(&self, identity: &Identity) -> Option<CheckpointRecord> {
        self.rows.lock().ok()?.get(identity).cloned()
    }

    /// Overwrites the stored record, for tests that plant old or damaged checkpoints.
    pub fn put(&self, identity: &Identity, record: CheckpointRecord) {
        if let Ok(mut rows) = self.rows.lock() {
            rows.insert(identity.clone(), record);
        }
    }
}

impl CheckpointStore for InMemoryCheckpointStore {
    async fn load(&self, identity: &Identity) -> Result<Option<CheckpointRecord>, StoreError> {
        let rows = self
            .rows
            .lock()
            .map_err(|_| StoreError::Unavailable("in-memory store poisoned".into()))?;
        Ok(rows.get(identity).cloned())
    }

    async fn save(&self, identity: &Identity, record: CheckpointRecord) -> Result<(), StoreError> {
        let mut rows = self
            .rows
            .lock()
            .map_err(|_| StoreError::Unavailable("in-memory store poisoned".into()))?;
        rows.insert(identity.clone(), record);
        Ok(())
    }
}
