//! Partition leases (IO-4): `acquire_epoch`, one lightweight transaction per assignment, whose
//! epoch fences every checkpoint write of the partition's turns.

use super::*;
use crate::store::retrying::retried_briefly;

/// Compare-and-set rounds before `acquire_epoch` gives up: only reached under heavy contention.
pub(super) const LEASE_ATTEMPTS: usize = 32;

impl ScyllaCheckpointStore {
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
                Err(e) if retried_briefly(&e) => last_error = Some(e),
                Err(e) => return Err(e),
            }
            if let Some(pause) = pauses.next() {
                tokio::time::sleep(pause).await;
            }
        }
        Err(last_error.unwrap_or_else(|| {
            StoreError::unavailable(format!(
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
            .map_err(refused("lease read"))?
            .maybe_first_row::<(Option<i64>,)>()
            .map_err(refused("lease read"))?
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
                    return Err(StoreError::rejected(format!(
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
}

/// The `[applied]` column every conditional statement returns first.
pub(super) fn lwt_applied(result: QueryResult) -> Result<bool, StoreError> {
    let rows = result
        .into_rows_result()
        .map_err(refused("lease write result"))?;
    let row = rows
        .maybe_first_row::<Row>()
        .map_err(refused("lease write result"))?;
    row.and_then(|r| r.columns.into_iter().next().flatten())
        .and_then(|v| v.as_boolean())
        .ok_or_else(|| StoreError::rejected("lease write returned no [applied] column"))
}
