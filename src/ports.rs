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

/// What a checkpoint row holds: the encoded state and, while a turn is between its write-ahead
/// (LC-4) and its end, that turn's recorded answers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CheckpointRecord {
    pub state: Vec<u8>,
    pub in_flight: Option<Vec<u8>>,
}

/// Why the store failed, classified for the caller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("checkpoint store unavailable: {0}")]
    Unavailable(String),
    #[error("checkpoint write fenced: a newer owner holds this conversation")]
    Fenced,
    /// The store answered but refused the request (bad schema, missing keyspace, invalid value,
    /// an out-of-range fencing timestamp): repeating it cannot succeed, so it is not retryable.
    #[error("checkpoint store rejected the request: {0}")]
    Rejected(String),
}

impl StoreError {
    /// Only a transient outage is worth retrying; fencing and rejections are final.
    pub fn is_retryable(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
    }
}

/// Checkpoints by conversation identity (ST-3).
pub trait CheckpointStore {
    fn load(
        &self,
        identity: &Identity,
    ) -> impl Future<Output = Result<Option<CheckpointRecord>, StoreError>> + Send;
    fn save(
        &self,
        identity: &Identity,
        record: CheckpointRecord,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;
}
