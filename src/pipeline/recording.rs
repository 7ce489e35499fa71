//! Keeping a turn's decision record (issue 26, [`crate::record`]): built from the decided turn
//! just before its checkpoint save, measured (`turnstile_decision_record_bytes`, the turn's
//! `decision_record_bytes` log field) and written through the store port. A record that cannot be
//! written is counted and logged, and the turn goes on: records serve replay and tests, never the
//! customer's answer. Its content is never logged (it carries the customer's message).

use std::sync::LazyLock;

use metrics::{counter, histogram};

use super::{PipelineError, Position, ProcessedTurn, TurnStart};
use crate::domain::engine::Engine;
use crate::domain::state::{self, AgentState, SharedList};
use crate::domain::turn::{Identity, Turn};
use crate::ports::{CheckpointStore, DecisionRow, Fence, StoreError};
use crate::record::{self, DecisionRecord, RecordedOutputs, RECORD_VERSION};
use crate::telemetry::{DECISION_RECORDS_TOTAL, DECISION_RECORD_BYTES};

static EMPTY: LazyLock<String> = LazyLock::new(record::empty_state_digest);

/// The digest of the empty state (computed once).
pub(super) fn empty_digest() -> String {
    EMPTY.clone()
}

/// What the record needs of the state a turn started from, taken before the engine runs.
pub(super) struct Base {
    digest: String,
    applied: SharedList<String>,
    /// The state itself, only when the conversation filled the window ([`record::needs_base`]);
    /// boxed, as it is held across the engine's awaits.
    state: Option<Box<AgentState>>,
}

impl Base {
    /// `stored` is the digest of the loaded checkpoint's state bytes: the base unless the turn
    /// resumes from its write-ahead, whose base is the in-flight one.
    pub(super) fn of(start: &TurnStart, stored: String) -> Base {
        let digest = if start.recovered {
            record::digest(&state::encode(&start.base))
        } else {
            stored
        };
        Base {
            digest,
            applied: start.base.applied_turn_ids.clone(),
            state: record::needs_base(&start.base).then(|| Box::new(start.base.clone())),
        }
    }
}

/// The turn's record as a store row: encoded, with the turn ids that leave the window.
pub(super) fn row(
    engine: &Engine<'_>,
    turn: &Turn,
    at: &Position<'_>,
    base: Base,
    processed: &ProcessedTurn,
    state_bytes: &[u8],
) -> DecisionRow {
    let after = &processed.outcome.state.applied_turn_ids;
    let expired = base
        .applied
        .iter()
        .filter(|id| !after.iter().any(|a| a == *id))
        .cloned()
        .collect();
    let mut decision = DecisionRecord {
        v: RECORD_VERSION,
        turn: turn.clone(),
        partition: at.partition,
        offset: at.offset,
        config: engine.settings().config_version.clone(),
        settings: crate::config::settings::overrides_of(engine.settings()),
        before: base.digest,
        base: base.state.map(|b| *b),
        answers: processed.answers.clone(),
        oversized: false,
        outputs: RecordedOutputs::of(&processed.outcome, state_bytes),
    };
    let bytes = record::encode(&mut decision);
    if decision.oversized {
        counter!(DECISION_RECORDS_TOTAL, "outcome" => "oversized").increment(1);
        tracing::warn!(
            decision_record_bytes = bytes.len(),
            "Decision record over its bound: kept without its answers (not replayable)."
        );
    }
    DecisionRow {
        turn_id: turn.turn_id.clone(),
        record: bytes,
        expired,
    }
}

/// Writes the record; only a fence is the turn's concern (a newer owner holds the
/// conversation), anything else is counted and logged.
pub(super) async fn keep<S: CheckpointStore>(
    store: &S,
    identity: &Identity,
    row: DecisionRow,
    fence: Fence,
) -> Result<(), PipelineError> {
    let bytes = row.record.len();
    histogram!(DECISION_RECORD_BYTES).record(bytes as f64);
    tracing::Span::current().record("decision_record_bytes", bytes);
    match Box::pin(store.record_decision(identity, &row, fence)).await {
        Ok(()) => {
            counter!(DECISION_RECORDS_TOTAL, "outcome" => "saved").increment(1);
            Ok(())
        }
        Err(StoreError::Fenced) => Err(PipelineError::Store(StoreError::Fenced)),
        Err(e) => {
            counter!(DECISION_RECORDS_TOTAL, "outcome" => "failed").increment(1);
            tracing::warn!(error = %e, "Decision record not kept; the turn goes on.");
            Ok(())
        }
    }
}
