//! Checkpoints this worker saved, kept in memory so a conversation's next turn on the same
//! partition lease skips the store read (`docs/store.md`, "The checkpoint cache"):
//! [`CheckpointCache`] holds them, [`CachingCheckpointStore`] puts it in front of a store.
//!
//! Why it is sound: while a worker holds a partition's lease (IO-4), its turn-end writes are the
//! newest of every conversation on that partition, so the row it just wrote is the row a load
//! would return. An entry is therefore used only under the lease epoch and partition it was
//! written under, and only the turn-end write of a completed turn is kept. Everything else
//! leaves the entry out, so the next turn reads the store:
//! - a turn takes its entry out when it starts (its leased load) and puts its own row back only
//!   after its save succeeded: a write-ahead, a failed or fenced save, a dead letter, a republish
//!   or a crash leave no entry behind. Every write drops the entry before it goes to the store,
//!   so whatever the order of calls, a load after a write reads what the store holds;
//! - a revoked or fenced partition forgets its entries ([`CheckpointCache::forget_partition`]);
//! - a failed Kafka transaction empties the cache and refuses new entries until a transaction
//!   succeeds again ([`CheckpointCache::suspend`]): a worker that lost its group membership
//!   without being told (a zombie) fails every commit, so it reads the store, where the new
//!   owner's rows fence it.
//!
//! A load with no lease (inspection, the serial stream) reads the store and leaves the entries
//! alone: it starts no turn.
//!
//! Bounded by bytes; the oldest entries go first. Entries are taken out on use and put back at
//! the end of the turn, so insertion order is also recency order. The budget gives way to turns
//! in flight ([`CheckpointCache::set_in_flight`]): memory sized for the in-flight cap is never
//! taken by cached rows while that many turns run.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use metrics::{counter, gauge};

use crate::domain::turn::Identity;
use crate::ports::{CheckpointRecord, CheckpointStore, DecisionRow, Fence, Lease, StoreError};
use crate::telemetry;

/// How long a peak of turns in flight keeps the budget down: turns arrive in waves (a slow
/// model answers a burst together), and the rows cached between two waves must not be there
/// when the next wave parks.
const PEAK_HOLD: Duration = Duration::from_secs(60);

/// Per-entry bookkeeping beyond the row's own bytes (map slot, queue slot, strings' headers).
const ENTRY_OVERHEAD_BYTES: usize = 256;

/// Why entries were dropped: the `reason` label of `turnstile_checkpoint_cache_invalidations_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Invalidation {
    /// The partition was revoked (its next owner writes under a newer epoch).
    Revoked,
    /// A newer owner's row fenced a turn of the partition.
    Fenced,
    /// A Kafka transaction failed: this worker may no longer own its partitions.
    CommitFailed,
}

impl Invalidation {
    pub fn as_str(self) -> &'static str {
        match self {
            Invalidation::Revoked => "revoked",
            Invalidation::Fenced => "fenced",
            Invalidation::CommitFailed => "commit_failed",
        }
    }
}

struct Cached {
    seq: u64,
    partition: i32,
    epoch: i64,
    bytes: usize,
    record: CheckpointRecord,
}

#[derive(Default)]
struct Entries {
    map: HashMap<Identity, Cached>,
    /// Insertion order; an item whose `seq` no longer matches its map entry is stale.
    order: VecDeque<(u64, Identity)>,
    bytes: usize,
    next_seq: u64,
    suspended: bool,
    /// The budget after giving way to turns in flight (`set_in_flight`).
    budget: usize,
    /// The most turns in flight seen since `peak_at`; it decays after [`PEAK_HOLD`].
    peak_in_flight: usize,
    peak_at: Option<Instant>,
}

impl Entries {
    fn remove(&mut self, identity: &Identity) -> Option<Cached> {
        let cached = self.map.remove(identity)?;
        self.bytes -= cached.bytes;
        Some(cached)
    }

    fn evict_to(&mut self, budget: usize) {
        while self.bytes > budget {
            let Some((seq, identity)) = self.order.pop_front() else {
                break;
            };
            if self.map.get(&identity).is_some_and(|c| c.seq == seq) {
                self.remove(&identity);
            }
        }
        // Taken entries leave stale queue items; drop them before they outnumber live ones.
        if self.order.len() > 2 * self.map.len() + 1024 {
            let map = &self.map;
            self.order
                .retain(|(seq, id)| map.get(id).is_some_and(|c| c.seq == *seq));
        }
    }

    fn clear(&mut self) {
        self.map.clear();
        self.order.clear();
        self.bytes = 0;
    }
}

/// The checkpoint rows this worker wrote last, by conversation (see the module doc).
pub struct CheckpointCache {
    budget_bytes: usize,
    entries: Mutex<Entries>,
}

impl std::fmt::Debug for CheckpointCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckpointCache")
            .field("budget_bytes", &self.budget_bytes)
            .finish_non_exhaustive()
    }
}

impl CheckpointCache {
    /// A cache holding at most `budget_bytes` of rows (0 turns it off).
    pub fn new(budget_bytes: usize) -> Self {
        CheckpointCache {
            budget_bytes,
            entries: Mutex::new(Entries {
                budget: budget_bytes,
                ..Entries::default()
            }),
        }
    }

    /// Shrinks the budget in proportion as the turns in flight approach `max_in_flight`: parked
    /// turns and cached rows share the memory a worker is sized for, and the turns come first
    /// (at the cap, nothing is cached). The highest count of the last [`PEAK_HOLD`] counts, so
    /// the budget drops at once and comes back only after a minute without such a peak. Evicts
    /// down to the new budget at once.
    pub fn set_in_flight(&self, in_flight: usize, max_in_flight: usize) {
        self.set_in_flight_at(in_flight, max_in_flight, Instant::now());
    }

    fn set_in_flight_at(&self, in_flight: usize, max_in_flight: usize, now: Instant) {
        if self.budget_bytes == 0 {
            return;
        }
        let mut entries = self.lock();
        let expired = entries
            .peak_at
            .is_none_or(|at| now.saturating_duration_since(at) >= PEAK_HOLD);
        if in_flight >= entries.peak_in_flight || expired {
            entries.peak_in_flight = in_flight;
            entries.peak_at = Some(now);
        }
        let free = max_in_flight.saturating_sub(entries.peak_in_flight) as u128;
        let budget = (self.budget_bytes as u128 * free / max_in_flight.max(1) as u128) as usize;
        entries.budget = budget;
        if entries.bytes > budget {
            entries.evict_to(budget);
            gauge!(telemetry::CHECKPOINT_CACHE_BYTES).set(entries.bytes as f64);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        // A panic while holding the lock cannot leave a half-updated entry that matters: the
        // worst case is a wrong byte count, so recover the guard rather than poison every turn.
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes out the row this worker saved for `identity` under `partition`'s lease `epoch`, if
    /// any; the caller puts its own row back with [`Self::keep`] once its save succeeded. An
    /// entry of another partition or epoch is dropped: only the store can say what it holds.
    pub fn take(
        &self,
        identity: &Identity,
        partition: i32,
        epoch: i64,
    ) -> Option<CheckpointRecord> {
        if self.budget_bytes == 0 {
            return None;
        }
        let mut entries = self.lock();
        let cached = entries.remove(identity);
        let hit = cached.filter(|c| c.partition == partition && c.epoch == epoch);
        let result = if hit.is_some() { "hit" } else { "miss" };
        counter!(telemetry::CHECKPOINT_CACHE_LOOKUPS_TOTAL, "result" => result).increment(1);
        gauge!(telemetry::CHECKPOINT_CACHE_BYTES).set(entries.bytes as f64);
        hit.map(|c| c.record)
    }

    /// Keeps a copy of `record`, just saved as the end of a turn under `partition`'s lease
    /// `epoch` (copied only when it is kept).
    pub fn keep(&self, identity: &Identity, partition: i32, epoch: i64, record: &CheckpointRecord) {
        if self.budget_bytes == 0 || record.in_flight.is_some() {
            return;
        }
        let bytes = ENTRY_OVERHEAD_BYTES
            + record.state.len()
            + record.outbox.as_ref().map_or(0, Vec::len)
            + 2 * (identity.tenant_id.len() + identity.agent_id.len() + identity.session_id.len());
        if bytes > self.budget_bytes {
            return;
        }
        let mut entries = self.lock();
        if entries.suspended {
            return;
        }
        entries.remove(identity);
        let seq = entries.next_seq;
        entries.next_seq += 1;
        entries.order.push_back((seq, identity.clone()));
        entries.map.insert(
            identity.clone(),
            Cached {
                seq,
                partition,
                epoch,
                bytes,
                record: record.clone(),
            },
        );
        entries.bytes += bytes;
        let budget = entries.budget;
        entries.evict_to(budget);
        gauge!(telemetry::CHECKPOINT_CACHE_BYTES).set(entries.bytes as f64);
    }

    /// Drops `identity`'s entry, if any, uncounted: a write of the conversation is on its way to
    /// the store, which alone knows the row until a turn-end save puts one back.
    pub fn discard(&self, identity: &Identity) {
        if self.budget_bytes == 0 {
            return;
        }
        let mut entries = self.lock();
        if entries.remove(identity).is_some() {
            gauge!(telemetry::CHECKPOINT_CACHE_BYTES).set(entries.bytes as f64);
        }
    }

    /// Drops every entry of `partition`.
    pub fn forget_partition(&self, partition: i32, why: Invalidation) {
        let mut entries = self.lock();
        let before = entries.map.len();
        let mut freed = 0;
        entries.map.retain(|_, c| {
            let keep = c.partition != partition;
            if !keep {
                freed += c.bytes;
            }
            keep
        });
        entries.bytes -= freed;
        let dropped = before - entries.map.len();
        let budget = entries.budget;
        entries.evict_to(budget);
        if dropped > 0 {
            counter!(telemetry::CHECKPOINT_CACHE_INVALIDATIONS_TOTAL, "reason" => why.as_str())
                .increment(dropped as u64);
        }
        gauge!(telemetry::CHECKPOINT_CACHE_BYTES).set(entries.bytes as f64);
    }

    /// Empties the cache and refuses entries until [`Self::resume`]: a failed Kafka
    /// transaction means this worker may have lost its partitions without being told.
    pub fn suspend(&self) {
        let mut entries = self.lock();
        let dropped = entries.map.len();
        entries.clear();
        entries.suspended = true;
        if dropped > 0 {
            counter!(
                telemetry::CHECKPOINT_CACHE_INVALIDATIONS_TOTAL,
                "reason" => Invalidation::CommitFailed.as_str()
            )
            .increment(dropped as u64);
        }
        gauge!(telemetry::CHECKPOINT_CACHE_BYTES).set(0.0);
    }

    /// A Kafka transaction succeeded: this worker still owns its partitions.
    pub fn resume(&self) {
        self.lock().suspended = false;
    }

    /// Entries held now.
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the entries are counted as (rows plus bookkeeping).
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }
}

/// A [`CheckpointStore`] that answers a turn's load from the rows this worker saved under the
/// same lease ([`CheckpointCache`], shared with whoever steers it) and reads `inner` otherwise;
/// every write goes to `inner`. The worker puts it in front of its retry layer, so a hit waits
/// for nothing and a retried read is one lookup.
pub struct CachingCheckpointStore<S> {
    inner: S,
    cache: Arc<CheckpointCache>,
}

impl<S> CachingCheckpointStore<S> {
    pub fn new(inner: S, cache: Arc<CheckpointCache>) -> Self {
        CachingCheckpointStore { inner, cache }
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    pub fn cache(&self) -> &Arc<CheckpointCache> {
        &self.cache
    }
}

impl<S: CheckpointStore + Sync> CheckpointStore for CachingCheckpointStore<S> {
    /// Starts no turn (inspection, the serial stream): the store's row, the entries left alone.
    async fn load(&self, identity: &Identity) -> Result<Option<CheckpointRecord>, StoreError> {
        self.inner.load(identity).await
    }

    /// Takes the entry out (the turn owns it now) and answers with it when it was saved under
    /// `lease`; the turn's span says where its checkpoint came from.
    async fn load_leased(
        &self,
        identity: &Identity,
        lease: Lease,
    ) -> Result<Option<CheckpointRecord>, StoreError> {
        let cached = self.cache.take(identity, lease.partition, lease.epoch);
        tracing::Span::current().record(
            "checkpoint",
            if cached.is_some() { "cached" } else { "stored" },
        );
        match cached {
            Some(row) => Ok(Some(row)),
            None => self.inner.load_leased(identity, lease).await,
        }
    }

    async fn save_write_ahead(
        &self,
        identity: &Identity,
        record: &CheckpointRecord,
        fence: Fence,
    ) -> Result<(), StoreError> {
        // A turn's load took the entry out already; a write on any other path must not leave
        // an older row to be served after it.
        self.cache.discard(identity);
        self.inner.save_write_ahead(identity, record, fence).await
    }

    /// Keeps the row once the store took it, under the partition it applies (`applied`) and
    /// the epoch it is fenced by; a failed save leaves no entry (it may have landed or not).
    async fn save_turn(
        &self,
        identity: &Identity,
        record: &CheckpointRecord,
        fence: Fence,
    ) -> Result<(), StoreError> {
        self.cache.discard(identity);
        self.inner.save_turn(identity, record, fence).await?;
        if let Some((partition, _)) = record.applied {
            self.cache.keep(identity, partition, fence.epoch, record);
        }
        Ok(())
    }

    async fn record_decision(
        &self,
        identity: &Identity,
        row: &DecisionRow,
        fence: Fence,
    ) -> Result<(), StoreError> {
        self.inner.record_decision(identity, row, fence).await
    }

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

    fn id(session: &str) -> Identity {
        Identity::new("t1", "a1", session)
    }

    fn row(state: &str, epoch: i64) -> CheckpointRecord {
        CheckpointRecord {
            state: state.as_bytes().to_vec(),
            in_flight: None,
            applied: Some((3, 7)),
            outbox: Some(b"[]".to_vec()),
            epoch,
        }
    }

    #[test]
    fn a_row_comes_back_once_under_its_own_partition_and_epoch() {
        let cache = CheckpointCache::new(1 << 20);
        cache.keep(&id("s"), 3, 5, &row("a", 5));
        assert_eq!(cache.take(&id("s"), 3, 5), Some(row("a", 5)));
        assert_eq!(
            cache.take(&id("s"), 3, 5),
            None,
            "taken out: the turn owns it"
        );
        assert!(cache.is_empty() && cache.bytes() == 0);
    }

    #[test]
    fn another_epoch_or_partition_misses_and_drops_the_entry() {
        let cache = CheckpointCache::new(1 << 20);
        cache.keep(&id("s"), 3, 5, &row("a", 5));
        assert_eq!(cache.take(&id("s"), 3, 6), None, "a re-acquired lease");
        assert_eq!(
            cache.take(&id("s"), 3, 5),
            None,
            "dropped, not kept for later"
        );
        cache.keep(&id("s"), 3, 5, &row("a", 5));
        assert_eq!(cache.take(&id("s"), 4, 5), None, "the key moved partition");
        assert!(cache.is_empty());
    }

    #[test]
    fn write_ahead_rows_are_never_kept() {
        let cache = CheckpointCache::new(1 << 20);
        let mut r = row("a", 5);
        r.in_flight = Some(b"{}".to_vec());
        cache.keep(&id("s"), 3, 5, &r);
        assert!(cache.is_empty());
    }

    #[test]
    fn forget_partition_drops_only_that_partition() {
        let cache = CheckpointCache::new(1 << 20);
        cache.keep(&id("s1"), 1, 5, &row("a", 5));
        cache.keep(&id("s2"), 2, 5, &row("b", 5));
        cache.forget_partition(1, Invalidation::Revoked);
        assert_eq!(cache.take(&id("s1"), 1, 5), None);
        assert_eq!(cache.take(&id("s2"), 2, 5), Some(row("b", 5)));
        assert_eq!(cache.bytes(), 0);
    }

    #[test]
    fn a_suspended_cache_is_empty_and_keeps_nothing_until_resumed() {
        let cache = CheckpointCache::new(1 << 20);
        cache.keep(&id("s1"), 1, 5, &row("a", 5));
        cache.suspend();
        assert!(cache.is_empty());
        cache.keep(&id("s1"), 1, 5, &row("a", 5));
        assert_eq!(cache.take(&id("s1"), 1, 5), None, "kept while suspended");
        cache.resume();
        cache.keep(&id("s1"), 1, 5, &row("a", 5));
        assert_eq!(cache.take(&id("s1"), 1, 5), Some(row("a", 5)));
    }

    #[test]
    fn the_byte_budget_evicts_the_oldest_first() {
        let one = ENTRY_OVERHEAD_BYTES + 100 + 2 + 2 * (2 + 2 + 2);
        let cache = CheckpointCache::new(3 * one);
        for s in ["s1", "s2", "s3"] {
            cache.keep(&id(s), 0, 1, &row(&"x".repeat(100), 1));
        }
        assert_eq!((cache.len(), cache.bytes()), (3, 3 * one));
        // s1 used again: it is now the newest.
        let r = cache.take(&id("s1"), 0, 1).expect("s1 cached");
        cache.keep(&id("s1"), 0, 1, &r);
        cache.keep(&id("s4"), 0, 1, &row(&"x".repeat(100), 1));
        assert_eq!(cache.len(), 3);
        assert!(cache.take(&id("s2"), 0, 1).is_none(), "the oldest went");
        for s in ["s1", "s3", "s4"] {
            assert!(cache.take(&id(s), 0, 1).is_some(), "{s} stays");
        }
        assert_eq!(cache.bytes(), 0);
    }

    #[test]
    fn a_zero_budget_turns_it_off_and_an_oversized_row_is_not_kept() {
        let off = CheckpointCache::new(0);
        off.keep(&id("s"), 0, 1, &row("a", 1));
        assert_eq!(off.take(&id("s"), 0, 1), None);
        let small = CheckpointCache::new(ENTRY_OVERHEAD_BYTES + 10);
        small.keep(&id("s"), 0, 1, &row(&"x".repeat(100), 1));
        assert!(small.is_empty());
    }

    #[test]
    fn turns_in_flight_take_the_budget_first() {
        let one = ENTRY_OVERHEAD_BYTES + 100 + 2 + 2 * (2 + 2 + 2);
        let cache = CheckpointCache::new(4 * one);
        for s in ["s1", "s2", "s3", "s4"] {
            cache.keep(&id(s), 0, 1, &row(&"x".repeat(100), 1));
        }
        let t0 = Instant::now();
        cache.set_in_flight_at(50, 100, t0);
        assert_eq!(cache.len(), 2, "half the turns in flight: half the budget");
        assert!(cache.take(&id("s1"), 0, 1).is_none(), "the oldest went");
        cache.set_in_flight_at(100, 100, t0 + Duration::from_secs(1));
        assert!(cache.is_empty(), "at the cap nothing is cached");
        cache.keep(&id("s5"), 0, 1, &row(&"x".repeat(100), 1));
        assert!(cache.is_empty());
        // The wave has passed, but the peak holds the budget down for a while.
        cache.set_in_flight_at(0, 100, t0 + Duration::from_secs(30));
        cache.keep(&id("s5"), 0, 1, &row(&"x".repeat(100), 1));
        assert!(cache.is_empty(), "the peak of 30 s ago still counts");
        cache.set_in_flight_at(0, 100, t0 + Duration::from_secs(62));
        cache.keep(&id("s5"), 0, 1, &row(&"x".repeat(100), 1));
        assert_eq!(cache.len(), 1, "a minute after the peak the budget is back");
    }

    #[test]
    fn stale_queue_items_do_not_grow_without_bound() {
        let cache = CheckpointCache::new(1 << 30);
        for _ in 0..10_000 {
            cache.keep(&id("s"), 0, 1, &row("a", 1));
            let r = cache.take(&id("s"), 0, 1).expect("hit");
            cache.keep(&id("s"), 0, 1, &r);
        }
        let entries = cache.lock();
        assert!(entries.order.len() <= 2 * entries.map.len() + 1024);
    }

    const LEASE: Lease = Lease {
        partition: 3,
        epoch: 5,
    };

    fn caching() -> CachingCheckpointStore<InMemoryCheckpointStore> {
        let cache = Arc::new(CheckpointCache::new(1 << 20));
        CachingCheckpointStore::new(InMemoryCheckpointStore::new(), cache)
    }

    /// The end of a completed turn at `offset` of partition 3 under epoch 5.
    async fn save(
        store: &CachingCheckpointStore<InMemoryCheckpointStore>,
        state: &str,
        offset: i64,
    ) {
        let record = CheckpointRecord {
            applied: Some((LEASE.partition, offset)),
            ..row(state, LEASE.epoch)
        };
        let fence = Fence {
            epoch: LEASE.epoch,
            offset,
        };
        store
            .save_turn(&id("s"), &record, fence)
            .await
            .expect("saved");
    }

    /// Plants a row behind the cache's back, so a load that reads the store says `store`.
    fn plant(store: &CachingCheckpointStore<InMemoryCheckpointStore>) {
        store.inner().put(&id("s"), row("store", LEASE.epoch));
    }

    async fn leased(
        store: &CachingCheckpointStore<InMemoryCheckpointStore>,
        lease: Lease,
    ) -> String {
        let row = store.load_leased(&id("s"), lease).await.unwrap().unwrap();
        String::from_utf8(row.state).unwrap()
    }

    #[tokio::test]
    async fn a_saved_turn_is_served_from_the_cache_under_its_own_lease_only() {
        let store = caching();
        save(&store, "ours", 10).await;
        plant(&store);
        assert_eq!(leased(&store, LEASE).await, "ours", "from the cache");
        assert_eq!(
            leased(&store, LEASE).await,
            "store",
            "taken out by that turn"
        );

        save(&store, "ours", 11).await;
        plant(&store);
        let plain = store.load(&id("s")).await.unwrap().unwrap();
        assert_eq!(
            plain.state, b"store",
            "a load with no lease reads the store"
        );
        assert_eq!(leased(&store, LEASE).await, "ours", "and leaves the entry");

        let other_epoch = Lease { epoch: 6, ..LEASE };
        let other_partition = Lease {
            partition: 4,
            ..LEASE
        };
        for (offset, other) in [(12, other_epoch), (13, other_partition)] {
            save(&store, "ours", offset).await;
            plant(&store);
            assert_eq!(leased(&store, other).await, "store", "{other:?}");
            assert_eq!(leased(&store, LEASE).await, "store", "dropped by {other:?}");
        }
    }

    #[tokio::test]
    async fn a_write_ahead_or_a_failed_save_leaves_no_entry() {
        let store = caching();
        save(&store, "ours", 10).await;
        let ahead = CheckpointRecord {
            in_flight: Some(b"answers".to_vec()),
            ..row("executing", LEASE.epoch)
        };
        let fence = Fence {
            epoch: LEASE.epoch,
            offset: 11,
        };
        store
            .save_write_ahead(&id("s"), &ahead, fence)
            .await
            .unwrap();
        assert!(store.cache().is_empty());
        let row_now = store.load_leased(&id("s"), LEASE).await.unwrap().unwrap();
        assert_eq!(
            row_now.state, b"executing",
            "the write-ahead row, from the store"
        );
        assert!(row_now.in_flight.is_some());

        save(&store, "ours", 12).await;
        plant(&store);
        // Refused by the store: the fencing timestamp has no room for a negative offset.
        let refused = Fence {
            epoch: LEASE.epoch,
            offset: -1,
        };
        let failed = store
            .save_turn(&id("s"), &row("lost", LEASE.epoch), refused)
            .await;
        assert!(failed.is_err(), "{failed:?}");
        assert!(store.cache().is_empty());
        assert_eq!(leased(&store, LEASE).await, "store");
    }
}
