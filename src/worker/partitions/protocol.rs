//! The partition state machine's vocabulary: what it is told ([`Input`]), what it asks
//! ([`Command`]) and what those carry.

use std::time::Duration;

use crate::message::Output;
use crate::store::cache::Invalidation;
use crate::worker::consumer::FetchedRecord;
use crate::worker::offsets::PartitionOffsets;

/// The bounds and budgets the machine applies (from `WorkerConfig`).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_in_flight: usize,
    pub max_in_flight_per_partition: usize,
    pub max_buffered_per_partition: usize,
    pub commit_interval: Duration,
    pub drain_budget: Duration,
}

/// How one turn ended, as its task reports it.
#[derive(Debug)]
pub struct Finished {
    pub partition: i32,
    /// The assignment the turn was started under ([`Start::generation`]).
    pub generation: u64,
    pub offset: i64,
    pub key: String,
    pub turn_id: String,
    pub outputs: Vec<Output>,
    /// The inbound record's Kafka timestamp: the start of `turnstile_turn_age_seconds`.
    pub record_timestamp_ms: Option<i64>,
    /// Lost the partition to a newer owner mid-turn: report nothing (IO-4).
    pub fenced: bool,
    pub outcome: &'static str,
}

/// A finished turn whose outputs wait for (or ride in) a transaction.
#[derive(Debug)]
pub struct Completion {
    pub partition: i32,
    pub(super) generation: u64,
    pub offset: i64,
    pub turn_id: String,
    pub outputs: Vec<Output>,
    pub record_timestamp_ms: Option<i64>,
}

/// One partition's offset in a transaction, with its commit metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetCommit {
    pub partition: i32,
    pub(super) generation: u64,
    pub offset: i64,
    pub metadata: String,
}

/// What one Kafka transaction publishes and commits. The committer hands it back in
/// [`Input::TransactionEnded`].
#[derive(Debug)]
pub struct Transaction {
    pub id: u64,
    pub offsets: Vec<OffsetCommit>,
    /// In partition order, and per partition in the order the turns finished.
    pub turns: Vec<Completion>,
}

/// A turn to start now.
#[derive(Debug)]
pub struct Start {
    pub partition: i32,
    /// Which assignment of the partition the turn belongs to: a finish of an older one does not
    /// touch the current one's queue.
    pub generation: u64,
    pub key: String,
    pub record: FetchedRecord,
    pub epoch: i64,
    /// Offsets below it are committed (-1: none by this owner yet): outbox entries can go.
    pub committed_mark: i64,
}

/// One held partition's figures for the lag gauges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lag {
    pub partition: i32,
    /// Delivered records not finished (`turnstile_partition_lag`).
    pub in_progress: usize,
    /// The last committed offset, this owner's or the one it was assigned with (-1: none).
    pub committed: i64,
}

/// What the machine is told.
#[derive(Debug)]
pub enum Input {
    Assigned {
        partition: i32,
        offsets: PartitionOffsets,
    },
    /// The consumer waits until [`Command::AnswerRevocation`] with the same `id`.
    Revoked {
        partitions: Vec<i32>,
        id: u64,
    },
    Record(FetchedRecord),
    /// A lease acquisition ended (`None`: it failed).
    Epoch {
        partition: i32,
        epoch: Option<i64>,
    },
    Finished(Finished),
    /// Nothing happened; time passed.
    Tick,
    /// Stop taking turns, drain those running, flush, then [`Command::Stop`].
    Shutdown,
    /// The transaction in flight failed; the committer is aborting it.
    TransactionFailed,
    /// The transaction in flight ended, committed or aborted.
    TransactionEnded {
        transaction: Transaction,
        committed: bool,
    },
}

/// The checkpoint cache's orders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheCommand {
    Forget(i32, Invalidation),
    /// Empty it and refuse new entries: a transaction failed (a zombie fails them all).
    Suspend,
    /// A transaction committed: trusted again.
    Resume,
    /// Turns in flight out of the limit: the budget gives way to them.
    InFlight(usize, usize),
}

/// What the machine asks to be done.
#[derive(Debug)]
pub enum Command {
    Start(Start),
    AcquireEpoch {
        partition: i32,
        after: Duration,
    },
    Pause(Vec<i32>),
    Resume(Vec<i32>),
    /// Fetched bytes no longer buffered (dropped or started).
    ReleaseBytes(usize),
    /// Unstarted records of a revoked or stopping partition dropped (logged).
    Dropped {
        partition: i32,
        records: usize,
    },
    Commit(Transaction),
    AnswerRevocation(u64),
    Cache(CacheCommand),
    Gauges {
        in_flight: usize,
        partitions: usize,
    },
    Lag(Vec<Lag>),
    /// The partition is no longer held: its lag gauges go to 0.
    ClearLag(i32),
    /// Drained and flushed: the worker may stop.
    Stop,
}
