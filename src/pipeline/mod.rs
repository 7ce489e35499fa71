//! One inbound record through the whole flow: decode → load → (republish, fence) → decide →
//! save state + outbox → the outputs to publish. The Kafka worker and the in-process scenario
//! runner both call [`handle_record`] / [`apply_turn`] against the [`CheckpointStore`] port, so the
//! outbox, republish, fencing and dead-letter decisions are the same code in both; the worker
//! only adds Kafka (publish + commit) around it.
//!
//! | module | what it is |
//! |---|---|
//! | [`decide`] | the engine loop: each request performed through the ports, the LC-4 write-ahead |
//! | [`outbox`] | outputs kept in the checkpoint until their commit is known (republish, EV-1) |
//!
//! A turn loads its checkpoint under its partition lease ([`CheckpointStore::load_leased`]): the
//! worker's store answers from the rows it saved under that lease when it can
//! ([`crate::store::cache`]); the pipeline does not know whether it did.

pub mod decide;
pub mod outbox;
mod recording;

use metrics::counter;

use crate::clock::now_ms;
use crate::domain::catalog::Catalog;
use crate::domain::decision::Skill;
use crate::domain::effect::{Answer, TurnOutcome};
use crate::domain::engine::{Engine, EngineError};
use crate::domain::state::{self, AgentState, DecodeStateError};
use crate::domain::turn::Turn;
use crate::message::{
    decode_turn, encode_dead_letter, encode_outputs, DeadLetterReason, DecodeLimits, InboundRecord,
    Output, Rejection,
};
use crate::ports::{
    CheckpointRecord, CheckpointStore, DecisionModel, Fence, Lease, RetryClass, StoreError,
    ToolGateway,
};
use crate::record;
use crate::store::fencing::{write_timestamp, PHASE_TURN_END};
use crate::telemetry;

pub use decide::{decide_turn, InFlightTurn, TurnStart};
use outbox::{from_outbox, to_outbox, OutboxEntry};

/// Why a turn could not be processed.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// ST-4: the stored checkpoint cannot be decoded; it is reported, never replaced.
    #[error("stored checkpoint cannot be decoded: {0}")]
    Checkpoint(#[from] DecodeStateError),
    #[error("stored in-flight turn cannot be decoded: {0}")]
    InFlight(#[source] serde_json::Error),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Engine(#[from] EngineError),
}

impl PipelineError {
    /// A record whose checkpoint or turn cannot be handled is `Poison` (dead-lettered, the
    /// partition goes on); a store failure is the store's class.
    pub fn retry_class(&self) -> RetryClass {
        match self {
            PipelineError::Checkpoint(_)
            | PipelineError::InFlight(_)
            | PipelineError::Engine(_) => RetryClass::Poison,
            PipelineError::Store(e) => e.retry_class(),
        }
    }
}

/// What deciding a turn did.
#[derive(Debug, Clone)]
pub struct ProcessedTurn {
    pub outcome: TurnOutcome,
    /// Model components actually called for this turn (replayed answers excluded).
    pub model_calls: Vec<Skill>,
    /// True when the turn resumed from a write-ahead record (crash recovery).
    pub recovered: bool,
    /// Every answer the engine consumed, in order (recorded ones included): the decision record.
    pub answers: Vec<Answer>,
}

/// Where a record sits in its input stream and under which partition lease it runs.
#[derive(Debug, Clone, Copy)]
pub struct Position<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub offset: i64,
    /// The partition's lease epoch (IO-4): a row written under a higher one fences this turn.
    pub epoch: i64,
    /// Offsets of this partition below it are committed: their outbox entries can go.
    pub committed_mark: i64,
}

impl Position<'_> {
    pub fn fence(&self) -> Fence {
        Fence {
            epoch: self.epoch,
            offset: self.offset,
        }
    }

    pub fn lease(&self) -> Lease {
        Lease {
            partition: self.partition,
            epoch: self.epoch,
        }
    }
}

/// The ports one turn calls: its checkpoint store, decision model and tool gateway.
pub struct Ports<'a, S, M, T> {
    pub store: &'a S,
    pub model: &'a M,
    pub tools: &'a T,
}

// By hand: derived, they would require the ports themselves to be `Copy`.
impl<S, M, T> Clone for Ports<'_, S, M, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S, M, T> Copy for Ports<'_, S, M, T> {}

/// How a turn ended in [`apply_turn`].
#[derive(Debug)]
pub enum TurnResult {
    /// Decided and saved (state + outbox); `outputs` are to be published. A duplicate turn
    /// (EV-1) is here too, with no outputs and nothing saved.
    Processed {
        processed: Box<ProcessedTurn>,
        outputs: Vec<Output>,
    },
    /// The same record again after its save (its commit was never known): the stored outputs,
    /// byte for byte.
    Republished { outputs: Vec<Output> },
    /// A newer owner wrote this conversation: this worker lost the partition; report nothing.
    Fenced,
}

/// Loads (under the turn's lease), decides and saves one turn at `at` (see the module doc).
pub async fn apply_turn<S, M, T>(
    engine: &Engine<'_>,
    ports: Ports<'_, S, M, T>,
    turn: &Turn,
    at: Position<'_>,
) -> Result<TurnResult, PipelineError>
where
    S: CheckpointStore,
    M: DecisionModel,
    T: ToolGateway,
{
    // Boxed: the adapters' futures are large; a parked turn holds only the one it awaits.
    let row = Box::pin(ports.store.load_leased(&turn.identity, at.lease())).await?;
    if row.as_ref().is_some_and(|r| r.epoch > at.epoch) {
        tracing::warn!(
            epoch = at.epoch,
            "Fenced: a newer owner holds this conversation (IO-4)."
        );
        return Ok(TurnResult::Fenced);
    }
    let mut outbox = outbox::decode(row.as_ref().and_then(|r| r.outbox.as_deref()));
    // The same record again (its offset was never committed, e.g. a crash after the save):
    // republish its stored outputs. The same turn id at another offset is a duplicate turn and
    // falls through to the engine, which changes and emits nothing (EV-1).
    if let Some(entry) = outbox.iter().find(|e| {
        e.turn_id == turn.turn_id
            && e.topic == at.topic
            && e.partition == at.partition
            && e.offset == at.offset
    }) {
        let outputs = entry.outputs.iter().filter_map(from_outbox).collect();
        return Ok(TurnResult::Republished { outputs });
    }
    // Entries the committed offsets have passed are not needed again; pruned now, a turn parked
    // on a model call does not hold them.
    outbox.retain(|e| {
        e.topic == at.topic && e.partition == at.partition && e.offset >= at.committed_mark
    });
    let before = match &row {
        None => recording::empty_digest(),
        Some(r) => record::digest(&r.state),
    };
    let (state, in_flight) = match &row {
        None => (AgentState::default(), None),
        Some(r) => decode_record(&r.state, r.in_flight.as_deref())?,
    };
    // The stored bytes are decoded; a turn parked on a model call should not hold them too.
    drop(row);
    let fence = at.fence();
    // Scoped: the start state ends here, not after the engine's awaits (a moved-from local
    // keeps its slot in the future until its scope ends).
    let (deciding, base) = {
        let start = TurnStart::new(state, in_flight, &turn.turn_id);
        let base = recording::Base::of(&start, before);
        let deciding = Box::pin(decide_turn(engine, ports, turn, start, fence));
        (deciding, base)
    };
    // Boxed once decided: the outcome (its state and replies) is held across the save's await,
    // and inline it would size every turn's future for that await, parked ones too.
    let processed = Box::new(deciding.await?);
    telemetry::record_outcome(&processed.outcome);
    if let Some(handback) = processed.outcome.handback {
        // SC-11: hand-backs are rare and operator-driven; one line each, in the turn's span.
        tracing::info!(
            handback = handback.as_str(),
            "Hand-back action applied (SC-11)."
        );
    }
    if processed.outcome.duplicate {
        return Ok(TurnResult::Processed {
            processed,
            outputs: Vec::new(),
        });
    }
    let ended = Ended {
        processed,
        outbox,
        base,
    };
    // Boxed: the record and save awaits would otherwise size every parked turn's future.
    Box::pin(finish_turn(engine, ports.store, turn, at, ended)).await
}

/// A decided turn on its way to the store.
struct Ended {
    processed: Box<ProcessedTurn>,
    outbox: Vec<OutboxEntry>,
    base: recording::Base,
}

/// The end of a decided turn: its outputs into the outbox, its decision record kept, the state
/// and outbox saved.
async fn finish_turn<S: CheckpointStore>(
    engine: &Engine<'_>,
    store: &S,
    turn: &Turn,
    at: Position<'_>,
    ended: Ended,
) -> Result<TurnResult, PipelineError> {
    let Ended {
        processed,
        mut outbox,
        base,
    } = ended;
    let fence = at.fence();
    let outputs = encode_outputs(turn, &processed.outcome, now_ms());
    outbox.push(OutboxEntry {
        topic: at.topic.to_owned(),
        partition: at.partition,
        offset: at.offset,
        turn_id: turn.turn_id.clone(),
        outputs: outputs.iter().map(to_outbox).collect(),
    });
    let state_bytes = state::encode(&processed.outcome.state);
    // Before the save: a saved turn is never decided again (a redelivery republishes it), so
    // this is the only chance to keep its record (docs/decisions.md, "Decision records").
    let row = recording::row(engine, turn, &at, base, &processed, &state_bytes);
    recording::keep(store, &turn.identity, row, fence).await?;
    let record = CheckpointRecord {
        state: state_bytes,
        in_flight: None,
        applied: Some((at.partition, at.offset)),
        outbox: Some(serde_json::to_vec(&outbox).unwrap_or_default()),
        epoch: at.epoch,
    };
    Box::pin(store.save_turn(&turn.identity, &record, fence)).await?;
    Ok(TurnResult::Processed { processed, outputs })
}

/// How one record ended in [`handle_record`]; `as_str` is the `outcome` metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    Applied,
    Duplicate,
    Republished,
    Fenced,
    DeadLettered(DeadLetterReason),
}

impl Disposition {
    pub fn as_str(self) -> &'static str {
        match self {
            Disposition::Applied => "applied",
            Disposition::Duplicate => "duplicate",
            Disposition::Republished => "republished",
            Disposition::Fenced => "fenced",
            Disposition::DeadLettered(_) => "dead_lettered",
        }
    }
}

/// What [`handle_record`] decided for one record.
#[derive(Debug)]
pub struct Handled {
    pub disposition: Disposition,
    /// Empty when the record could not be decoded.
    pub turn_id: String,
    /// To publish with the record's offset, in one transaction.
    pub outputs: Vec<Output>,
    /// The decided turn, when the engine ran.
    pub processed: Option<Box<ProcessedTurn>>,
}

/// Everything the pipeline needs besides the ports.
#[derive(Debug, Clone, Copy)]
pub struct Rules<'a> {
    pub engine: Engine<'a>,
    pub catalog: &'a Catalog,
    pub limits: &'a DecodeLimits,
}

/// One inbound record end to end: decode (IO-3) → [`apply_turn`] → the outputs to publish, or a
/// dead letter for a record that can never be processed (undecodable record or checkpoint,
/// ST-4; an engine refusal). Every line logged inside names the turn: the caller's span gets
/// `tenant_id` and `turn_id` as soon as they are known.
///
/// `Err` only for a store failure other than fencing, which cannot happen behind
/// [`crate::store::RetryingStore`] (it retries without limit): a store outage never
/// dead-letters a turn.
pub async fn handle_record<S, M, T>(
    rules: Rules<'_>,
    ports: Ports<'_, S, M, T>,
    record: &InboundRecord<'_>,
    epoch: i64,
    committed_mark: i64,
) -> Result<Handled, StoreError>
where
    S: CheckpointStore,
    M: DecisionModel,
    T: ToolGateway,
{
    let dead_letter = |turn_id: String, rejection: Rejection| {
        let reason = rejection.reason;
        counter!(telemetry::DEAD_LETTERS_TOTAL, "reason" => reason.as_str()).increment(1);
        tracing::warn!(reason = reason.as_str(), detail = %rejection.detail, "Turn dead-lettered.");
        Handled {
            disposition: Disposition::DeadLettered(reason),
            turn_id,
            outputs: vec![encode_dead_letter(record, &rejection, now_ms())],
            processed: None,
        }
    };
    let engine_error = |turn_id: String, detail: String| {
        let reason = DeadLetterReason::EngineError;
        dead_letter(turn_id, Rejection { reason, detail })
    };
    let turn = match decode_turn(record, rules.limits, rules.catalog) {
        Ok(t) => t,
        Err(rejection) => return Ok(dead_letter(String::new(), rejection)),
    };
    let span = tracing::Span::current();
    span.record("tenant_id", turn.identity.tenant_id.as_str());
    span.record("turn_id", turn.turn_id.as_str());
    let turn_id = turn.turn_id.clone();
    // Checked before any write: past the bit budget, fencing would be unsound (and the store
    // would refuse every write of this record, forever).
    if let Err(e) = write_timestamp(epoch, record.offset, PHASE_TURN_END) {
        return Ok(engine_error(turn_id, e.to_string()));
    }
    let at = Position {
        topic: record.topic,
        partition: record.partition,
        offset: record.offset,
        epoch,
        committed_mark,
    };
    let result = apply_turn(&rules.engine, ports, &turn, at).await;
    let (disposition, outputs, processed) = match result {
        Ok(TurnResult::Processed { processed, outputs }) => {
            let disposition = if processed.outcome.duplicate {
                Disposition::Duplicate
            } else {
                Disposition::Applied
            };
            (disposition, outputs, Some(processed))
        }
        Ok(TurnResult::Republished { outputs }) => (Disposition::Republished, outputs, None),
        Ok(TurnResult::Fenced) | Err(PipelineError::Store(StoreError::Fenced)) => {
            (Disposition::Fenced, Vec::new(), None)
        }
        Err(PipelineError::Store(e)) => return Err(e),
        Err(e @ (PipelineError::Checkpoint(_) | PipelineError::InFlight(_))) => {
            // ST-4: reported, never replaced by an empty state; the row is untouched.
            let reason = match &e {
                PipelineError::Checkpoint(d) => d.reason(),
                _ => "in_flight_undecodable",
            };
            counter!(telemetry::CHECKPOINT_DECODE_FAILURES_TOTAL, "reason" => reason).increment(1);
            let rejection = Rejection {
                reason: DeadLetterReason::CheckpointUndecodable,
                detail: format!(
                    "{e}; the stored checkpoint was left untouched for inspection (turnstile inspect)"
                ),
            };
            return Ok(dead_letter(turn_id, rejection));
        }
        Err(e @ PipelineError::Engine(_)) => return Ok(engine_error(turn_id, e.to_string())),
    };
    Ok(Handled {
        disposition,
        turn_id,
        outputs,
        processed,
    })
}

/// Delivers `turn` as the next record of one partition under the stored epoch: the stream the
/// tests, `turnstile eval` and the chaos checker play serially, with no Kafka. A turn that
/// crashed after its write-ahead is re-delivered at the same offset, as Kafka would.
pub async fn process_turn<S, M, T>(
    engine: &Engine<'_>,
    store: &S,
    model: &M,
    tools: &T,
    turn: &Turn,
) -> Result<ProcessedTurn, PipelineError>
where
    S: CheckpointStore,
    M: DecisionModel,
    T: ToolGateway,
{
    let row = store.load(&turn.identity).await?;
    let (offset, epoch) = match &row {
        Some(r) => (r.applied.map_or(0, |(_, o)| o + 1), r.epoch),
        None => (0, 0),
    };
    let at = Position {
        topic: SERIAL_TOPIC,
        partition: 0,
        offset,
        epoch,
        committed_mark: offset,
    };
    let ports = Ports {
        store,
        model,
        tools,
    };
    match apply_turn(engine, ports, turn, at).await? {
        TurnResult::Processed { processed, .. } => Ok(*processed),
        // Unreachable by construction (a new offset is never in the outbox; the epoch is the
        // stored one), but named rather than assumed.
        TurnResult::Republished { .. } | TurnResult::Fenced => {
            Err(PipelineError::Store(StoreError::rejected(format!(
                "offset {offset} of the serial stream was already applied or fenced"
            ))))
        }
    }
}

/// The topic name [`process_turn`] records in the outbox.
pub const SERIAL_TOPIC: &str = "serial";

/// Loads the conversation's checkpoint and decodes it (ST-4).
pub async fn load_state<S: CheckpointStore>(
    store: &S,
    turn: &Turn,
) -> Result<(AgentState, Option<InFlightTurn>), PipelineError> {
    match store.load(&turn.identity).await? {
        None => Ok((AgentState::default(), None)),
        Some(record) => decode_record(&record.state, record.in_flight.as_deref()),
    }
}

/// Decodes stored checkpoint bytes: the state (migrated, ST-4) and any in-flight turn.
pub fn decode_record(
    state_bytes: &[u8],
    in_flight: Option<&[u8]>,
) -> Result<(AgentState, Option<InFlightTurn>), PipelineError> {
    let state = state::decode(state_bytes)?;
    let in_flight = match in_flight {
        Some(bytes) => {
            Some(serde_json::from_slice::<InFlightTurn>(bytes).map_err(PipelineError::InFlight)?)
        }
        None => None,
    };
    Ok((state, in_flight))
}
