//! `RetryingStore`: the one retry layer for checkpoint store calls (`docs/store.md`, "Retries").
//!
//! Policy, by [`StoreError::retry_class`]: a turn's calls wait out `Retryable` and `Fatal`
//! failures with capped, jittered exponential backoff and no attempt limit. A turn waits out a
//! store outage or an operator's fix instead of being dead-lettered (its record stays
//! uncommitted, so nothing is lost), and readiness is false from the first failed call until the
//! next call that succeeds. `Poison` (a fence: a newer owner holds the conversation) is final.
//! Calls that must not hold a turn (decision records) and the adapter's own connection and lease
//! retries repeat `Retryable` failures only ([`retried_briefly`]).
//! Each failed attempt is counted by the adapter (`turnstile_checkpoint_errors_total{op}`) and
//! logged here with the pause before the next one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};

use crate::domain::turn::Identity;
use crate::ports::{
    CheckpointRecord, CheckpointStore, DecisionRow, Fence, Lease, RetryClass, StoreError,
};

/// Attempts at a decision record write: a record is worth a blip's retry, never a turn held
/// through an outage (`pipeline::record`: a lost record is counted, the turn goes on).
pub const DECISION_RECORD_ATTEMPTS: usize = 3;

/// Whether a turn's call waits `class` out: everything but a poisoned call, which can never
/// succeed (a refusal can, once an operator fixes its cause).
pub fn turn_waits_out(class: RetryClass) -> bool {
    class != RetryClass::Poison
}

/// Whether a bounded retry (a few attempts, then the error) repeats `e`: transient failures only.
pub fn retried_briefly(e: &StoreError) -> bool {
    e.retry_class() == RetryClass::Retryable
}

/// Told `false` when the store stops answering and `true` when it answers again.
pub type AvailabilityHook = Arc<dyn Fn(bool) + Send + Sync>;

/// Pauses between attempts: first and largest.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    pub first: Duration,
    pub max: Duration,
}

impl Default for Backoff {
    /// 100 ms doubling to 10 s: quick through a blip, one attempt per ~10 s per turn in a long
    /// outage (a full partition in flight is then a few hundred calls a minute, not a storm).
    fn default() -> Self {
        Backoff {
            first: Duration::from_millis(100),
            max: Duration::from_secs(10),
        }
    }
}

/// Wraps a store adapter with the retry policy above.
pub struct RetryingStore<S> {
    inner: S,
    backoff: Backoff,
    on_availability: Option<AvailabilityHook>,
    degraded: AtomicBool,
}

impl<S> RetryingStore<S> {
    pub fn new(inner: S) -> Self {
        RetryingStore {
            inner,
            backoff: Backoff::default(),
            on_availability: None,
            degraded: AtomicBool::new(false),
        }
    }

    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// `hook(false)` on the first failure of a healthy store, `hook(true)` on the first success
    /// after failures (the worker wires readiness to it).
    pub fn on_availability(mut self, hook: AvailabilityHook) -> Self {
        self.on_availability = Some(hook);
        self
    }

    /// The wrapped adapter (for calls outside the turn path: inspection, readiness pings).
    pub fn inner(&self) -> &S {
        &self.inner
    }

    async fn retry<T, F, Fut>(&self, op: &'static str, f: F) -> Result<T, StoreError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, StoreError>>,
    {
        let policy = ExponentialBuilder::new()
            .with_min_delay(self.backoff.first)
            .with_max_delay(self.backoff.max)
            .with_jitter()
            .without_max_times();
        let result = f
            .retry(policy)
            .when(|e| turn_waits_out(e.retry_class()))
            .notify(|e, pause| {
                if !self.degraded.swap(true, Ordering::Relaxed) {
                    if let Some(hook) = &self.on_availability {
                        hook(false);
                    }
                }
                match e.retry_class() {
                    // An operator must act (schema, keyspace, permissions): say so loudly.
                    RetryClass::Fatal => tracing::error!(op, error = %e, pause_ms = pause.as_millis() as u64, "Checkpoint store refused the request; retrying until it is fixed."),
                    _ => tracing::warn!(op, error = %e, pause_ms = pause.as_millis() as u64, "Checkpoint store unavailable; retrying."),
                }
            })
            .await;
        if result.is_ok() && self.degraded.swap(false, Ordering::Relaxed) {
            tracing::info!(op, "Checkpoint store answers again.");
            if let Some(hook) = &self.on_availability {
                hook(true);
            }
        }
        result
    }
}

impl<S: CheckpointStore + Sync> CheckpointStore for RetryingStore<S> {
    async fn load(&self, identity: &Identity) -> Result<Option<CheckpointRecord>, StoreError> {
        // The adapters' futures are large; boxed, a parked turn holds only the one it awaits.
        self.retry("load", || Box::pin(self.inner.load(identity)))
            .await
    }

    async fn load_leased(
        &self,
        identity: &Identity,
        lease: Lease,
    ) -> Result<Option<CheckpointRecord>, StoreError> {
        self.retry("load", || Box::pin(self.inner.load_leased(identity, lease)))
            .await
    }

    async fn save_write_ahead(
        &self,
        identity: &Identity,
        record: &CheckpointRecord,
        fence: Fence,
    ) -> Result<(), StoreError> {
        self.retry("save", || {
            Box::pin(self.inner.save_write_ahead(identity, record, fence))
        })
        .await
    }

    async fn save_turn(
        &self,
        identity: &Identity,
        record: &CheckpointRecord,
        fence: Fence,
    ) -> Result<(), StoreError> {
        self.retry("save", || {
            Box::pin(self.inner.save_turn(identity, record, fence))
        })
        .await
    }

    /// A few quick attempts for a transient failure only (see [`DECISION_RECORD_ATTEMPTS`]);
    /// a refusal (no table: `turnstile migrate` not run) or a fence is returned at once.
    async fn record_decision(
        &self,
        identity: &Identity,
        row: &DecisionRow,
        fence: Fence,
    ) -> Result<(), StoreError> {
        let policy = ExponentialBuilder::new()
            .with_min_delay(self.backoff.first)
            .with_max_delay(self.backoff.max)
            .with_jitter()
            .with_max_times(DECISION_RECORD_ATTEMPTS - 1);
        (|| Box::pin(self.inner.record_decision(identity, row, fence)))
            .retry(policy)
            .when(retried_briefly)
            .await
    }

    /// Not retried here: the worker retries a lease on its own schedule, partition by partition.
    async fn acquire_epoch(
        &self,
        topic: &str,
        partition: i32,
        owner: &str,
    ) -> Result<i64, StoreError> {
        self.inner.acquire_epoch(topic, partition, owner).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::InMemoryCheckpointStore;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Mutex;

    /// Fails the first `failures` calls with `error`, then delegates.
    struct Flaky {
        inner: InMemoryCheckpointStore,
        failures: AtomicUsize,
        error: fn() -> StoreError,
        calls: AtomicUsize,
    }

    impl Flaky {
        fn fail(&self) -> Result<(), StoreError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let left = self.failures.load(Ordering::SeqCst);
            if left > 0 {
                self.failures.store(left - 1, Ordering::SeqCst);
                return Err((self.error)());
            }
            Ok(())
        }
    }

    impl CheckpointStore for Flaky {
        async fn load(&self, id: &Identity) -> Result<Option<CheckpointRecord>, StoreError> {
            self.fail()?;
            self.inner.load(id).await
        }
        async fn save_write_ahead(
            &self,
            id: &Identity,
            r: &CheckpointRecord,
            f: Fence,
        ) -> Result<(), StoreError> {
            self.fail()?;
            self.inner.save_write_ahead(id, r, f).await
        }
        async fn save_turn(
            &self,
            id: &Identity,
            r: &CheckpointRecord,
            f: Fence,
        ) -> Result<(), StoreError> {
            self.fail()?;
            self.inner.save_turn(id, r, f).await
        }
        async fn record_decision(
            &self,
            id: &Identity,
            row: &DecisionRow,
            f: Fence,
        ) -> Result<(), StoreError> {
            self.fail()?;
            self.inner.record_decision(id, row, f).await
        }
        async fn acquire_epoch(&self, t: &str, p: i32, o: &str) -> Result<i64, StoreError> {
            self.inner.acquire_epoch(t, p, o).await
        }
    }

    fn flaky(
        failures: usize,
        error: fn() -> StoreError,
    ) -> (RetryingStore<Flaky>, Arc<Mutex<Vec<bool>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let store = RetryingStore::new(Flaky {
            inner: InMemoryCheckpointStore::new(),
            failures: AtomicUsize::new(failures),
            error,
            calls: AtomicUsize::new(0),
        })
        .with_backoff(Backoff {
            first: Duration::from_millis(1),
            max: Duration::from_millis(4),
        })
        .on_availability(Arc::new(move |ok| log.lock().unwrap().push(ok)));
        (store, seen)
    }

    /// More failures than any bounded policy would allow: the call still succeeds, and readiness
    /// goes false once and true once.
    #[tokio::test]
    async fn an_outage_is_waited_out_with_no_attempt_limit() {
        let (store, seen) = flaky(40, || StoreError::unavailable("node down"));
        let id = Identity::new("t", "a", "s");
        let record = CheckpointRecord {
            state: b"s".to_vec(),
            ..Default::default()
        };
        let fence = Fence {
            epoch: 1,
            offset: 3,
        };
        store.save_turn(&id, &record, fence).await.unwrap();
        assert_eq!(store.inner().calls.load(Ordering::SeqCst), 41);
        assert_eq!(*seen.lock().unwrap(), vec![false, true]);
        assert_eq!(store.load(&id).await.unwrap().unwrap().state, b"s");
        assert_eq!(
            seen.lock().unwrap().len(),
            2,
            "a healthy call reports nothing"
        );
    }

    /// A refusal (schema missing, say) is retried too: the turn waits for the operator's fix.
    #[tokio::test]
    async fn a_refusal_is_retried_until_fixed() {
        let (store, seen) = flaky(3, || StoreError::rejected("unconfigured table"));
        assert!(matches!(
            store.load(&Identity::new("t", "a", "s")).await,
            Ok(None)
        ));
        assert_eq!(*seen.lock().unwrap(), vec![false, true]);
    }

    /// IO-4: fencing is final, never retried.
    #[tokio::test]
    async fn fencing_is_not_retried() {
        let (store, seen) = flaky(1, || StoreError::Fenced);
        assert!(matches!(
            store.load(&Identity::new("t", "a", "s")).await,
            Err(StoreError::Fenced)
        ));
        assert_eq!(store.inner().calls.load(Ordering::SeqCst), 1);
        assert!(seen.lock().unwrap().is_empty());
    }

    /// One answer per error: what each retry layer does with an error follows from its class
    /// alone (a turn's call waits out all but `Poison`; a decision record retries `Retryable`
    /// only), so the layers cannot drift apart again.
    #[tokio::test]
    async fn every_layer_retries_by_the_retry_class() {
        let table: [(fn() -> StoreError, RetryClass); 3] = [
            (
                || StoreError::unavailable("node down"),
                RetryClass::Retryable,
            ),
            (|| StoreError::Fenced, RetryClass::Poison),
            (|| StoreError::rejected("no such table"), RetryClass::Fatal),
        ];
        let id = Identity::new("t", "a", "s");
        let fence = Fence {
            epoch: 1,
            offset: 0,
        };
        for (error, class) in table {
            assert_eq!(error().retry_class(), class);
            let (store, _) = flaky(1, error);
            let ok = store.load(&id).await.is_ok();
            assert_eq!(ok, turn_waits_out(class), "turn path, {class:?}");
            assert_eq!(
                store.inner().calls.load(Ordering::SeqCst),
                1 + usize::from(ok)
            );

            let (store, _) = flaky(1, error);
            let row = DecisionRow::default();
            let ok = store.record_decision(&id, &row, fence).await.is_ok();
            assert_eq!(
                ok,
                class == RetryClass::Retryable,
                "decision record, {class:?}"
            );
            assert_eq!(ok, retried_briefly(&error()));
        }
    }
}
