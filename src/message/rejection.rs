//! Why a record is not applied ([`Rejection`], [`DeadLetterReason`]): what every decoder returns,
//! so the decoders (`inbound`, `wire`) and the dead-letter encoder depend on this module and not
//! on each other.

use serde::{Deserialize, Serialize};

/// `detail` is cut to this many characters: it goes into logs and the dead-letter record, and
/// must stay readable and bounded whatever the input was.
pub const MAX_DETAIL_CHARS: usize = 512;
/// Why a record went to the dead-letter topic. [`DeadLetterReason::as_str`] is the wire value and
/// the `reason` label of `turnstile_dead_letters_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeadLetterReason {
    /// Not JSON (or an empty payload / tombstone).
    Undecodable,
    InvalidUtf8,
    /// JSON, but not a `turnstile.turn.v1` message.
    SchemaViolation,
    /// Larger than `DecodeLimits::max_payload_bytes`.
    Oversized,
    /// `agent_id` names no assistant of the agents file.
    UnknownAgent,
    /// The assistant does not serve `tenant_id`.
    UnknownTenant,
    /// The Kafka key is not the body's `tenant/agent/session`.
    KeyMismatch,
    /// The conversation's stored checkpoint cannot be decoded (ST-4); set by the worker.
    CheckpointUndecodable,
    /// The engine reported an error for this turn; set by the worker.
    EngineError,
}

impl DeadLetterReason {
    pub const ALL: [DeadLetterReason; 9] = [
        DeadLetterReason::Undecodable,
        DeadLetterReason::InvalidUtf8,
        DeadLetterReason::SchemaViolation,
        DeadLetterReason::Oversized,
        DeadLetterReason::UnknownAgent,
        DeadLetterReason::UnknownTenant,
        DeadLetterReason::KeyMismatch,
        DeadLetterReason::CheckpointUndecodable,
        DeadLetterReason::EngineError,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DeadLetterReason::Undecodable => "undecodable",
            DeadLetterReason::InvalidUtf8 => "invalid_utf8",
            DeadLetterReason::SchemaViolation => "schema_violation",
            DeadLetterReason::Oversized => "oversized",
            DeadLetterReason::UnknownAgent => "unknown_agent",
            DeadLetterReason::UnknownTenant => "unknown_tenant",
            DeadLetterReason::KeyMismatch => "key_mismatch",
            DeadLetterReason::CheckpointUndecodable => "checkpoint_undecodable",
            DeadLetterReason::EngineError => "engine_error",
        }
    }
}

impl std::fmt::Display for DeadLetterReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A record the worker will not apply: the reason, and a detail naming the problem and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}: {detail}")]
pub struct Rejection {
    pub reason: DeadLetterReason,
    /// At most [`MAX_DETAIL_CHARS`] characters when built with [`Rejection::new`].
    pub detail: String,
}

impl Rejection {
    pub fn new(reason: DeadLetterReason, detail: impl Into<String>) -> Rejection {
        Rejection {
            reason,
            detail: truncate_chars(&detail.into(), MAX_DETAIL_CHARS),
        }
    }
}

/// The first `max` characters of `text`, ending in `…` when something was cut.
pub(crate) fn truncate_chars(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    if max == 0 {
        return String::new();
    }
    let mut out: String = text.chars().take(max - 1).collect();
    out.push('…');
    out
}
