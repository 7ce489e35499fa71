//! The small traits the pipeline needs from the outside world; one adapter per technology.

use std::future::Future;

use crate::domain::decision::{
    ClassifierDecision, InterpreterDecision, ModelAnswer, PreValidationResult, RouterDecision,
    ToolResult,
};
use crate::domain::effect::{ClassifierRequest, InterpreterRequest, RouterRequest, ToolRequest};
use crate::domain::turn::Identity;

/// Which turn a call belongs to: adapters put it in request headers and evidence.
#[derive(Debug, Clone, Copy)]
pub struct CallContext<'a> {
    pub turn_id: &'a str,
    /// The turn's own time, for adapters that have no clock of their own (scripted ones).
    pub turn_at_ms: i64,
    /// A router call started before the engine asked for it (`ROUTER_SPECULATIVE`).
    pub speculative: bool,
}

/// Model-backed decisions: the session-control classifier, the router and the interpreter.
/// Every failure is an answer (`ModelFailure`), never an error: the engine owns the fallback.
pub trait DecisionModel {
    fn classify(
        &self,
        request: &ClassifierRequest,
        ctx: CallContext<'_>,
    ) -> impl Future<Output = ModelAnswer<ClassifierDecision>> + Send;
    fn route(
        &self,
        request: &RouterRequest,
        ctx: CallContext<'_>,
    ) -> impl Future<Output = ModelAnswer<RouterDecision>> + Send;
    fn interpret(
        &self,
        request: &InterpreterRequest,
        ctx: CallContext<'_>,
    ) -> impl Future<Output = ModelAnswer<InterpreterDecision>> + Send;
}

/// Domain tool endpoints: pre-validation and execution, both carrying the idempotency key.
pub trait ToolGateway {
    fn pre_validate(
        &self,
        request: &ToolRequest,
        ctx: CallContext<'_>,
    ) -> impl Future<Output = PreValidationResult> + Send;
    fn execute(
        &self,
        request: &ToolRequest,
        ctx: CallContext<'_>,
    ) -> impl Future<Output = ToolResult> + Send;
}

/// One conversation's checkpoint row, as every store adapter keeps it (ST-3).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CheckpointRecord {
    /// The encoded [`AgentState`](crate::domain::state::AgentState).
    pub state: Vec<u8>,
    /// While a turn is between its write-ahead (LC-4) and its end: that turn's recorded answers.
    pub in_flight: Option<Vec<u8>>,
    /// Inbound `(partition, offset)` of the last applied turn.
    pub applied: Option<(i32, i64)>,
    /// The outputs of applied turns whose Kafka commit is not known yet (`pipeline::outbox`).
    pub outbox: Option<Vec<u8>>,
    /// Lease epoch of the writer of the latest cells (IO-4).
    pub epoch: i64,
}

/// What orders and fences one write (IO-4): the writer's partition lease epoch and the inbound
/// offset of the turn it belongs to. A write with a lower `(epoch, offset, phase)` never replaces a
/// higher one, whatever order the writes arrive in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fence {
    pub epoch: i64,
    pub offset: i64,
}

/// The partition lease a turn runs under (IO-4): its inbound partition and the epoch this worker
/// took for it. A store that keeps rows in memory uses one only under the lease it was saved under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    pub partition: i32,
    pub epoch: i64,
}

/// How a failed call may be retried: the one classification every retry layer asks for, so a
/// layer's policy is written in terms of it and two layers cannot disagree about one error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RetryClass {
    /// Transient (an outage, a timeout, overload): the same call may succeed in a moment.
    Retryable,
    /// This call can never succeed (a fenced write, a record the process cannot handle): give
    /// it up and go on with the others.
    Poison,
    /// Nothing of its kind succeeds until an operator or a restart changes something (schema,
    /// configuration, credentials, a fenced producer).
    Fatal,
}

/// The error underneath a store failure, kept with its type for `source()`; the port names no
/// adapter's error types.
pub type StoreCause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why the store failed, classified for the caller ([`StoreError::retry_class`]). The message
/// includes the cause's, so a log line of the error alone says what happened.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("checkpoint store unavailable: {}", detail(.what, .cause))]
    Unavailable {
        what: String,
        #[source]
        cause: Option<StoreCause>,
    },
    #[error("checkpoint write fenced: a newer owner holds this conversation")]
    Fenced,
    /// The store answered but refused the request (bad schema, missing keyspace, invalid value,
    /// an out-of-range fencing timestamp): repeating the same request cannot succeed until an
    /// operator fixes the cause.
    #[error("checkpoint store rejected the request: {}", detail(.what, .cause))]
    Rejected {
        what: String,
        #[source]
        cause: Option<StoreCause>,
    },
}

fn detail(what: &str, cause: &Option<StoreCause>) -> String {
    match cause {
        None => what.to_owned(),
        Some(c) if what.is_empty() => c.to_string(),
        Some(c) => format!("{what}: {c}"),
    }
}

impl StoreError {
    pub fn unavailable(what: impl Into<String>) -> Self {
        StoreError::Unavailable {
            what: what.into(),
            cause: None,
        }
    }

    pub fn rejected(what: impl Into<String>) -> Self {
        StoreError::Rejected {
            what: what.into(),
            cause: None,
        }
    }

    /// The same failure with the error underneath it (a fence has none).
    pub fn caused_by(mut self, error: impl Into<StoreCause>) -> Self {
        if let StoreError::Unavailable { cause, .. } | StoreError::Rejected { cause, .. } =
            &mut self
        {
            *cause = Some(error.into());
        }
        self
    }

    /// `Unavailable` is transient; a fence is final for this write only; a refusal needs an
    /// operator.
    pub fn retry_class(&self) -> RetryClass {
        match self {
            StoreError::Unavailable { .. } => RetryClass::Retryable,
            StoreError::Fenced => RetryClass::Poison,
            StoreError::Rejected { .. } => RetryClass::Fatal,
        }
    }
}

/// Checkpoints by conversation identity (ST-3) and partition leases (IO-4): everything a turn
/// reads and writes outside Kafka. Adapters do not retry; `store::RetryingStore` is the one
/// retry layer.
pub trait CheckpointStore {
    fn load(
        &self,
        identity: &Identity,
    ) -> impl Future<Output = Result<Option<CheckpointRecord>, StoreError>> + Send;
    /// The load that starts a turn running under `lease`. A store that keeps the rows this worker
    /// saved (`store::CachingCheckpointStore`) may answer from them; the others read (this
    /// default). Decorators forward it, so a cache behind them still sees the lease.
    fn load_leased(
        &self,
        identity: &Identity,
        lease: Lease,
    ) -> impl Future<Output = Result<Option<CheckpointRecord>, StoreError>> + Send {
        let _ = lease;
        self.load(identity)
    }
    /// The LC-4 write-ahead (phase 0): state, in-flight turn and epoch only; the applied offset
    /// and the outbox stay as they are.
    fn save_write_ahead(
        &self,
        identity: &Identity,
        record: &CheckpointRecord,
        fence: Fence,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;
    /// The end of a turn (phase 1): every column.
    fn save_turn(
        &self,
        identity: &Identity,
        record: &CheckpointRecord,
        fence: Fence,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;
    /// Keeps the turn's decision record (issue 26, `pipeline::record`) under `fence`, and drops
    /// the records `row.expired` names. Stores that keep no records accept it and do nothing
    /// (this default); those that do forward it to their [`DecisionRecordStore`].
    fn record_decision(
        &self,
        identity: &Identity,
        row: &DecisionRow,
        fence: Fence,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = (identity, row, fence);
        async { Ok(()) }
    }
    /// Takes the next lease epoch of `(topic, partition)`: once per partition assignment.
    /// Concurrent acquirers get distinct, increasing epochs.
    fn acquire_epoch(
        &self,
        topic: &str,
        partition: i32,
        owner: &str,
    ) -> impl Future<Output = Result<i64, StoreError>> + Send;
}

/// A store borrowed is the same store: a decorator can wrap one it does not own (the scenario
/// runner's store outlives the in-process workers and their caches).
impl<S: CheckpointStore> CheckpointStore for &S {
    fn load(
        &self,
        identity: &Identity,
    ) -> impl Future<Output = Result<Option<CheckpointRecord>, StoreError>> + Send {
        S::load(self, identity)
    }
    fn load_leased(
        &self,
        identity: &Identity,
        lease: Lease,
    ) -> impl Future<Output = Result<Option<CheckpointRecord>, StoreError>> + Send {
        S::load_leased(self, identity, lease)
    }
    fn save_write_ahead(
        &self,
        identity: &Identity,
        record: &CheckpointRecord,
        fence: Fence,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        S::save_write_ahead(self, identity, record, fence)
    }
    fn save_turn(
        &self,
        identity: &Identity,
        record: &CheckpointRecord,
        fence: Fence,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        S::save_turn(self, identity, record, fence)
    }
    fn record_decision(
        &self,
        identity: &Identity,
        row: &DecisionRow,
        fence: Fence,
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        S::record_decision(self, identity, row, fence)
    }
    fn acquire_epoch(
        &self,
        topic: &str,
        partition: i32,
        owner: &str,
    ) -> impl Future<Output = Result<i64, StoreError>> + Send {
        S::acquire_epoch(self, topic, partition, owner)
    }
}

/// One turn's decision record as a store keeps it: opaque bytes (`pipeline::record` encodes and
/// decodes them) under the conversation identity and the turn id, so a turn decided again after
/// a crash replaces its own record instead of adding a second one.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DecisionRow {
    pub turn_id: String,
    pub record: Vec<u8>,
    /// Turn ids whose records leave the conversation's window with this write (the bound).
    pub expired: Vec<String>,
}

/// Decision records by conversation (issue 26): written once per applied turn, read by
/// `turnstile replay` and `turnstile export`. Same TTL and fencing as the checkpoints.
pub trait DecisionRecordStore {
    /// Writes `row.record` under `(identity, row.turn_id)` and deletes `row.expired`, fenced
    /// like the turn's checkpoint save (a zombie writer's record loses to the owner's).
    fn save_decision(
        &self,
        identity: &Identity,
        row: &DecisionRow,
        fence: Fence,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;
    /// Every record kept for the conversation, in no particular order (`expired` empty).
    fn load_decisions(
        &self,
        identity: &Identity,
    ) -> impl Future<Output = Result<Vec<DecisionRow>, StoreError>> + Send;
    /// Up to `limit` conversations that have records, in the store's order (token order in
    /// CQL: spread over tenants and time, not the newest first): `replay --sample`.
    fn list_conversations(
        &self,
        limit: usize,
    ) -> impl Future<Output = Result<Vec<Identity>, StoreError>> + Send;
}
