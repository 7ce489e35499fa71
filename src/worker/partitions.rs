//! The worker's partition bookkeeping as one pure state machine: [`Partitions::on`] takes an
//! [`Input`] and the time, and returns the [`Command`]s to carry out. No I/O, no tokio, no clock:
//! the coordinator (`worker::coordinator`) feeds it consumer events, finished turns, lease epochs,
//! ticks and the committer's reports, and carries out what it answers (start a turn, pause a
//! partition, run a Kafka transaction, answer a revocation, steer the checkpoint cache, publish
//! gauges). The committer only runs the transactions it is given and reports how they ended.
//!
//! It holds the one copy of each fact: per assigned partition the key-ordered queue
//! ([`KeyedQueue`]), the offsets ([`PartitionOffsets`]), the lease epoch, the turns running, the
//! finished turns whose outputs wait for a transaction, the offset this owner committed last;
//! and for the process the turns running, the revocations being drained, the transaction in
//! flight and the drain at shutdown.
//!
//! Invariants (tested below, the second two by a property test):
//! - a partition's offsets are committed only up to its low-water mark, so never past a delivered
//!   offset whose turn has not finished, and a turn's outputs go in the same transaction as an
//!   offset that covers them (below the mark, or in the commit metadata);
//! - at most one turn of a key runs at once within a partition's assignment (a turn still
//!   running when its partition was taken away after the drain budget is fenced by the next
//!   owner's lease epoch, IO-4);
//! - at most `max_in_flight` turns run in the process, `max_in_flight_per_partition` per
//!   partition; one transaction is in flight at a time;
//! - a revocation is answered only after the revoked partitions' turns finished (or the drain
//!   budget ran out) and a transaction started after that ended (or the flush timeout passed).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::consumer::FetchedRecord;
use super::dispatch::KeyedQueue;
use super::offsets::PartitionOffsets;
use crate::store::cache::Invalidation;

mod protocol;
pub use protocol::{
    CacheCommand, Command, Completion, Finished, Input, Lag, Limits, OffsetCommit, Start,
    Transaction,
};

/// How long a flush (a revocation's, the shutdown's) waits for its transaction to be reported
/// before it is answered anyway.
pub const FLUSH_TIMEOUT: Duration = Duration::from_secs(30);

/// How long after a failed lease acquisition it is tried again.
pub const EPOCH_RETRY: Duration = Duration::from_secs(1);

struct Partition {
    generation: u64,
    queue: KeyedQueue<FetchedRecord>,
    offsets: PartitionOffsets,
    epoch: Option<i64>,
    paused: bool,
    revoking: bool,
    /// Drained (or out of budget) after a revocation: waits for its flush, takes nothing.
    released: bool,
    running: usize,
    pending: Vec<Completion>,
    /// The committed offset it was assigned with (-1: none).
    assigned_at: i64,
    /// The offset this owner committed last.
    committed: Option<i64>,
}

struct Revocation {
    id: u64,
    partitions: Vec<i32>,
    deadline: Instant,
}

#[derive(Debug)]
enum Waiter {
    Revocation { id: u64, partitions: Vec<i32> },
    Shutdown,
}

struct Flush {
    waiter: Waiter,
    /// The transaction it waits for; `None` until one starts.
    transaction: Option<u64>,
    deadline: Instant,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Running,
    Draining { since: Instant },
    Flushing,
    Stopped,
}

/// The partition bookkeeping (see the module doc).
pub struct Partitions {
    limits: Limits,
    partitions: BTreeMap<i32, Partition>,
    /// Turns running in the process, of any assignment.
    running: usize,
    generations: u64,
    revocations: Vec<Revocation>,
    flushes: Vec<Flush>,
    in_transaction: Option<u64>,
    transactions: u64,
    last_commit: Instant,
    phase: Phase,
}

impl Partitions {
    pub fn new(limits: Limits, now: Instant) -> Self {
        Partitions {
            limits,
            partitions: BTreeMap::new(),
            running: 0,
            generations: 0,
            revocations: Vec::new(),
            flushes: Vec::new(),
            in_transaction: None,
            transactions: 0,
            last_commit: now,
            phase: Phase::Running,
        }
    }

    /// Takes one input at `now`; returns what to do, in order.
    pub fn on(&mut self, input: Input, now: Instant) -> Vec<Command> {
        let mut out = Vec::new();
        match input {
            Input::Assigned { partition, offsets } => self.assigned(partition, offsets, &mut out),
            Input::Revoked { partitions, id } => self.revoked(partitions, id, now, &mut out),
            Input::Record(record) => self.record(record, &mut out),
            Input::Epoch { partition, epoch } => self.epoch(partition, epoch, &mut out),
            Input::Finished(f) => self.finished(f, &mut out),
            Input::Tick => self.gauges(&mut out),
            Input::Shutdown => self.shutdown(now, &mut out),
            Input::TransactionFailed => out.push(Command::Cache(CacheCommand::Suspend)),
            Input::TransactionEnded {
                transaction,
                committed,
            } => self.transaction_ended(transaction, committed, now, &mut out),
        }
        self.settle(now, &mut out);
        out
    }

    /// Turns running in the process.
    pub fn running(&self) -> usize {
        self.running
    }

    /// Partitions held (assigned, not yet released by a revocation).
    pub fn held(&self) -> usize {
        self.partitions.values().filter(|p| !p.released).count()
    }

    /// When the next transaction is due (`None` while one is in flight): the coordinator wakes
    /// then with a [`Input::Tick`].
    pub fn next_commit_at(&self) -> Option<Instant> {
        self.in_transaction
            .is_none()
            .then(|| self.last_commit + self.limits.commit_interval)
    }

    /// Whether shutdown's drain and flush are over.
    pub fn stopped(&self) -> bool {
        self.phase == Phase::Stopped
    }

    /// What every input ends with: revocations and the drain that are due, a transaction when
    /// one is due, the turns allowed to start.
    fn settle(&mut self, now: Instant, out: &mut Vec<Command>) {
        self.finish_revocations(now, out);
        if let Phase::Draining { since } = self.phase {
            if self.running == 0 || now >= since + self.limits.drain_budget {
                self.phase = Phase::Flushing;
                self.flushes.push(Flush {
                    waiter: Waiter::Shutdown,
                    transaction: None,
                    deadline: now + FLUSH_TIMEOUT,
                });
            }
        }
        self.expire_flushes(now, out);
        self.commit_if_due(now, out);
        if self.phase == Phase::Running {
            self.dispatch(out);
        }
    }

    fn assigned(&mut self, partition: i32, offsets: PartitionOffsets, out: &mut Vec<Command>) {
        self.generations += 1;
        self.partitions.insert(
            partition,
            Partition {
                generation: self.generations,
                queue: KeyedQueue::new(self.limits.max_in_flight_per_partition),
                // Before any delivery the mark is the committed offset (or -1).
                assigned_at: offsets.low_water_mark(),
                offsets,
                epoch: None,
                paused: false,
                revoking: false,
                released: false,
                running: 0,
                pending: Vec::new(),
                committed: None,
            },
        );
        out.push(Command::AcquireEpoch {
            partition,
            after: Duration::ZERO,
        });
        self.gauges(out);
    }

    fn revoked(&mut self, partitions: Vec<i32>, id: u64, now: Instant, out: &mut Vec<Command>) {
        for p in &partitions {
            if let Some(st) = self.partitions.get_mut(p) {
                st.revoking = true;
                drop_unstarted(*p, st, out);
            }
        }
        self.revocations.push(Revocation {
            id,
            partitions,
            deadline: now + self.limits.drain_budget,
        });
    }

    /// A fetched record: queued behind its key, unless its partition is gone or revoking, or
    /// the previous owner already completed it; pauses the partition when its buffer is full.
    fn record(&mut self, record: FetchedRecord, out: &mut Vec<Command>) {
        let size = record.size();
        let Some(st) = self
            .partitions
            .get_mut(&record.partition)
            .filter(|st| !st.revoking && !st.released)
        else {
            out.push(Command::ReleaseBytes(size));
            return;
        };
        st.offsets.deliver(record.offset);
        if st.offsets.is_completed(record.offset) {
            // The previous owner committed this turn's outputs already.
            st.offsets.complete(record.offset);
            out.push(Command::ReleaseBytes(size));
            return;
        }
        let key = record
            .key
            .as_deref()
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .unwrap_or_default();
        let partition = record.partition;
        st.queue.push(key, record);
        if !st.paused && st.queue.buffered() >= self.limits.max_buffered_per_partition {
            st.paused = true;
            out.push(Command::Pause(vec![partition]));
        }
    }

    fn epoch(&mut self, partition: i32, epoch: Option<i64>, out: &mut Vec<Command>) {
        let Some(st) = self.partitions.get_mut(&partition) else {
            return;
        };
        match epoch {
            Some(e) => st.epoch = Some(e),
            None => out.push(Command::AcquireEpoch {
                partition,
                after: EPOCH_RETRY,
            }),
        }
    }

    fn finished(&mut self, f: Finished, out: &mut Vec<Command>) {
        self.running = self.running.saturating_sub(1);
        if f.fenced {
            // A newer owner wrote this partition: none of its cached rows can be trusted.
            out.push(Command::Cache(CacheCommand::Forget(
                f.partition,
                Invalidation::Fenced,
            )));
        }
        let half = self.limits.max_buffered_per_partition / 2;
        if let Some(st) = self
            .partitions
            .get_mut(&f.partition)
            .filter(|st| st.generation == f.generation)
        {
            st.running = st.running.saturating_sub(1);
            st.queue.finish(&f.key);
            if st.paused && st.queue.buffered() < half {
                st.paused = false;
                out.push(Command::Resume(vec![f.partition]));
            }
            if !f.fenced && !st.released {
                st.offsets.complete(f.offset);
                st.pending.push(Completion {
                    partition: f.partition,
                    generation: f.generation,
                    offset: f.offset,
                    turn_id: f.turn_id,
                    outputs: f.outputs,
                    record_timestamp_ms: f.record_timestamp_ms,
                });
            }
        }
        self.gauges(out);
    }

    fn shutdown(&mut self, now: Instant, out: &mut Vec<Command>) {
        if self.phase != Phase::Running {
            return;
        }
        self.phase = Phase::Draining { since: now };
        for (p, st) in &mut self.partitions {
            drop_unstarted(*p, st, out);
        }
        out.push(Command::Pause(self.partitions.keys().copied().collect()));
    }

    /// Revocations whose partitions have no turn running, or whose budget ran out: released
    /// (their cached rows forgotten), then flushed.
    fn finish_revocations(&mut self, now: Instant, out: &mut Vec<Command>) {
        let mut i = 0;
        while i < self.revocations.len() {
            let r = &self.revocations[i];
            let idle = r.partitions.iter().all(|p| {
                self.partitions
                    .get(p)
                    .is_none_or(|st| st.running == 0 || st.released)
            });
            if !(idle || now >= r.deadline) {
                i += 1;
                continue;
            }
            let r = self.revocations.swap_remove(i);
            for p in &r.partitions {
                if let Some(st) = self.partitions.get_mut(p) {
                    st.released = true;
                }
                out.push(Command::Cache(CacheCommand::Forget(
                    *p,
                    Invalidation::Revoked,
                )));
            }
            self.flushes.push(Flush {
                waiter: Waiter::Revocation {
                    id: r.id,
                    partitions: r.partitions,
                },
                transaction: None,
                deadline: now + FLUSH_TIMEOUT,
            });
            self.gauges(out);
        }
    }

    /// Starts a transaction when one is due (every commit interval) or a flush waits for one;
    /// a flush with nothing to commit is answered at once.
    fn commit_if_due(&mut self, now: Instant, out: &mut Vec<Command>) {
        if self.in_transaction.is_some() {
            return;
        }
        let waiting = self.flushes.iter().any(|f| f.transaction.is_none());
        let due = now >= self.last_commit + self.limits.commit_interval;
        if !(waiting || due) {
            return;
        }
        match self.transaction() {
            Some(t) => {
                self.in_transaction = Some(t.id);
                for f in &mut self.flushes {
                    f.transaction.get_or_insert(t.id);
                }
                out.push(Command::Commit(t));
            }
            None => {
                self.last_commit = now;
                let answered: Vec<Flush> = self.flushes.drain(..).collect();
                for f in answered {
                    self.answer(f.waiter, out);
                }
                // Every interval, committed or not: a stalled partition (nothing finishes, so
                // nothing commits) still shows its growing backlog.
                out.push(Command::Lag(self.lag()));
            }
        }
    }

    /// What is committable now: per partition the low-water mark with its metadata, and the
    /// finished turns that offset covers.
    fn transaction(&mut self) -> Option<Transaction> {
        let mut offsets = Vec::new();
        let mut turns = Vec::new();
        for (p, st) in &mut self.partitions {
            let mark = st.offsets.low_water_mark();
            if mark < 0 {
                continue;
            }
            let (metadata, included) = st.offsets.commit_metadata();
            let moved = st.committed != Some(mark);
            let publishable = st
                .pending
                .iter()
                .any(|c| c.offset < mark || included.binary_search(&c.offset).is_ok());
            if !moved && !publishable && metadata.is_empty() {
                continue;
            }
            let (ride, wait): (Vec<Completion>, Vec<Completion>) = std::mem::take(&mut st.pending)
                .into_iter()
                .partition(|c| c.offset < mark || included.binary_search(&c.offset).is_ok());
            st.pending = wait;
            turns.extend(ride);
            offsets.push(OffsetCommit {
                partition: *p,
                generation: st.generation,
                offset: mark,
                metadata,
            });
        }
        if offsets.is_empty() {
            return None;
        }
        self.transactions += 1;
        Some(Transaction {
            id: self.transactions,
            offsets,
            turns,
        })
    }

    fn transaction_ended(
        &mut self,
        transaction: Transaction,
        committed: bool,
        now: Instant,
        out: &mut Vec<Command>,
    ) {
        if self.in_transaction == Some(transaction.id) {
            self.in_transaction = None;
        }
        self.last_commit = now;
        if committed {
            out.push(Command::Cache(CacheCommand::Resume));
            for o in &transaction.offsets {
                if let Some(st) = self.current(o.partition, o.generation) {
                    st.committed = Some(o.offset);
                }
            }
        } else {
            // Published again by the next transaction, ahead of what finished since (a key's
            // replies stay in order).
            let mut by_partition: BTreeMap<i32, Vec<Completion>> = BTreeMap::new();
            for c in transaction.turns {
                by_partition.entry(c.partition).or_default().push(c);
            }
            for (p, mut back) in by_partition {
                let generation = back[0].generation;
                if let Some(st) = self.current(p, generation) {
                    back.append(&mut st.pending);
                    st.pending = back;
                }
            }
        }
        let (answered, rest): (Vec<Flush>, Vec<Flush>) = self
            .flushes
            .drain(..)
            .partition(|f| f.transaction == Some(transaction.id));
        self.flushes = rest;
        for f in answered {
            self.answer(f.waiter, out);
        }
        out.push(Command::Lag(self.lag()));
    }

    /// Flushes whose transaction was not reported within [`FLUSH_TIMEOUT`] are answered anyway.
    fn expire_flushes(&mut self, now: Instant, out: &mut Vec<Command>) {
        if self.flushes.iter().all(|f| now < f.deadline) {
            return;
        }
        let (expired, rest): (Vec<Flush>, Vec<Flush>) =
            self.flushes.drain(..).partition(|f| now >= f.deadline);
        self.flushes = rest;
        for f in expired {
            self.answer(f.waiter, out);
        }
    }

    fn answer(&mut self, waiter: Waiter, out: &mut Vec<Command>) {
        match waiter {
            Waiter::Revocation { id, partitions } => {
                for p in partitions {
                    if self.partitions.get(&p).is_some_and(|st| st.released) {
                        self.partitions.remove(&p);
                    }
                    // The new owner reports this partition now; a frozen last value here would
                    // be counted twice in a sum over workers.
                    out.push(Command::ClearLag(p));
                }
                out.push(Command::AnswerRevocation(id));
                self.gauges(out);
            }
            Waiter::Shutdown => {
                self.phase = Phase::Stopped;
                out.push(Command::Stop);
            }
        }
    }

    /// Starts every record allowed to run: key-ordered, bounded per partition and process.
    fn dispatch(&mut self, out: &mut Vec<Command>) {
        for (p, st) in &mut self.partitions {
            if st.revoking || st.released {
                continue;
            }
            let Some(epoch) = st.epoch else { continue };
            while self.running < self.limits.max_in_flight {
                let Some((key, record)) = st.queue.next_to_run() else {
                    break;
                };
                self.running += 1;
                st.running += 1;
                out.push(Command::Start(Start {
                    partition: *p,
                    generation: st.generation,
                    key,
                    record,
                    epoch,
                    committed_mark: st.committed.unwrap_or(-1),
                }));
            }
        }
    }

    fn current(&mut self, partition: i32, generation: u64) -> Option<&mut Partition> {
        self.partitions
            .get_mut(&partition)
            .filter(|st| st.generation == generation)
    }

    fn gauges(&self, out: &mut Vec<Command>) {
        out.push(Command::Cache(CacheCommand::InFlight(
            self.running,
            self.limits.max_in_flight,
        )));
        out.push(Command::Gauges {
            in_flight: self.running,
            partitions: self.held(),
        });
    }

    fn lag(&self) -> Vec<Lag> {
        self.partitions
            .iter()
            .map(|(p, st)| Lag {
                partition: *p,
                in_progress: st.offsets.in_progress(),
                committed: st.committed.unwrap_or(st.assigned_at),
            })
            .collect()
    }
}

/// Drops a partition's unstarted records (a revoked or stopping partition's buffer is never
/// processed); their bytes are released.
fn drop_unstarted(partition: i32, st: &mut Partition, out: &mut Vec<Command>) {
    let dropped = st.queue.take_unstarted();
    if dropped.is_empty() {
        return;
    }
    let bytes: usize = dropped.iter().map(FetchedRecord::size).sum();
    out.push(Command::ReleaseBytes(bytes));
    out.push(Command::Dropped {
        partition,
        records: dropped.len(),
    });
}

#[cfg(test)]
mod tests;
