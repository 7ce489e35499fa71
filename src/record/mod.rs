//! Decision records (issue 26): for every applied turn, what the engine consumed (the inbound
//! turn, each model and tool answer in order, the configuration version) and a summary of what it
//! produced, kept with the conversation (`ports::DecisionRecordStore`) so the turn can be re-run
//! exactly, with no model or tool call ([`replay`]), or turned into a test ([`export`]).
//!
//! A record does not hold the state the turn started from: it holds that state's digest
//! (`before`), and the state after the turn's (`outputs.after`). A conversation replays from an
//! empty state through its records in order, each record's `before` equal to the previous one's
//! `after`. Only once a conversation is longer than the window of kept records (64 turns) does a
//! record carry its base state too (`base`), so the oldest kept records stay replayable.
//!
//! | module | what it is |
//! |---|---|
//! | [`replay`] | re-running records through the engine: exactly, or with a new configuration |
//! | [`export`] | a conversation's records as a scenario file or a conversation-set line |

pub mod export;
pub mod replay;

use serde::{Deserialize, Serialize};

use crate::domain::catalog::Settings;
use crate::domain::effect::{Answer, EventType, TurnOutcome};
use crate::domain::state::{self, AgentState, APPLIED_TURN_IDS_MAX};
use crate::domain::transaction::TransactionStatus;
use crate::domain::turn::Turn;
use crate::eval::conversations::fnv1a64;
use crate::ports::DecisionRow;

/// The record layout's version; a reader refuses a newer one.
pub const RECORD_VERSION: u32 = 1;
/// A record larger than this keeps its summary only (`oversized`), not its answers: one turn's
/// tool result cannot grow a conversation's records without bound.
pub const RECORD_MAX_BYTES: usize = 16 * 1024;
/// At most this many records per conversation: a turn's record leaves when the turn leaves the
/// state's applied turn ids (EV-1's window).
pub const RECORDS_PER_CONVERSATION: usize = APPLIED_TURN_IDS_MAX;

/// One applied turn, as replay and export need it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecord {
    pub v: u32,
    pub turn: Turn,
    /// Inbound partition and offset: the order of a conversation's turns.
    pub partition: i32,
    pub offset: i64,
    /// The configuration version the turn was decided under ([`config_version`]).
    pub config: String,
    /// The session-control settings that differ from the defaults, by their environment names
    /// (`config::settings::overrides_of`): replay decides under the same ones.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub settings: serde_json::Map<String, serde_json::Value>,
    /// Digest of the encoded state the turn started from ([`digest`]).
    pub before: String,
    /// The state the turn started from, kept only once the conversation outgrew the window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<AgentState>,
    /// Every answer the engine consumed, in order (the LC-4 answer log of the whole turn).
    pub answers: Vec<Answer>,
    /// True when the answers were left out because the record was over [`RECORD_MAX_BYTES`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub oversized: bool,
    pub outputs: RecordedOutputs,
}

/// What the turn produced: a readable summary and the digests replay compares.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedOutputs {
    pub replies: Vec<String>,
    pub events: Vec<EventType>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<TransactionStatus>,
    /// Tools executed this turn, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub executed: Vec<String>,
    /// Digest of replies, events (with their data), route and executions ([`outcome_digest`]).
    pub digest: String,
    /// Digest of the encoded state after the turn.
    pub after: String,
}

impl RecordedOutputs {
    /// The summary of `outcome`, whose state encodes to `state_bytes`.
    pub fn of(outcome: &TurnOutcome, state_bytes: &[u8]) -> RecordedOutputs {
        RecordedOutputs {
            replies: outcome.replies.clone(),
            events: outcome.events.iter().map(|e| e.kind).collect(),
            route: outcome.route.as_ref().map(|r| r.route.clone()),
            status: outcome.state.transaction_status,
            executed: outcome.executed.iter().map(|e| e.tool.clone()).collect(),
            digest: outcome_digest(outcome),
            after: digest(state_bytes),
        }
    }
}

/// Why stored record bytes cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("decision record of turn {turn_id} is not valid: {detail}")]
    Undecodable { turn_id: String, detail: String },
    #[error(
        "decision record of turn {turn_id} has version {found}, newer than this release's \
         {RECORD_VERSION}: use a newer turnstile"
    )]
    FromTheFuture { turn_id: String, found: u32 },
}

/// FNV-1a 64 of `bytes`, as 16 hex digits.
pub fn digest(bytes: &[u8]) -> String {
    format!("{:016x}", fnv1a64(bytes))
}

/// The settings `record` was decided under: the defaults with the record's settings applied,
/// `base`'s configuration version kept. (The replaying process's own environment does not
/// count: a turn replays under the settings it ran with.)
pub fn settings_of(base: &Settings, record: &DecisionRecord) -> Settings {
    let mut settings = crate::config::settings::apply_overrides(
        &Settings::default(),
        &record.settings,
        "decision record",
    )
    .unwrap_or_default();
    settings.config_version = base.config_version.clone();
    settings
}

/// The digest of the empty state a conversation starts from.
pub fn empty_state_digest() -> String {
    digest(&state::encode(&AgentState::default()))
}

/// The configuration version: a content hash of the agents file and the profiles file, as read.
/// Any change (a moved example, a reworded message, a comment) gives a new version.
pub fn config_version(agents: &[u8], profiles: &[u8]) -> String {
    let mut bytes = Vec::with_capacity(agents.len() + profiles.len() + 1);
    bytes.extend_from_slice(agents);
    bytes.push(0);
    bytes.extend_from_slice(profiles);
    digest(&bytes)
}

/// [`config_version`] of the agents and profiles files at these paths.
pub fn config_version_of_files(
    agents: &std::path::Path,
    profiles: &std::path::Path,
) -> Result<String, String> {
    let read = |p: &std::path::Path| {
        std::fs::read(p).map_err(|e| format!("cannot read {}: {e}", p.display()))
    };
    Ok(config_version(&read(agents)?, &read(profiles)?))
}

/// The digest of what a turn publishes: replies, events with their data, route, executions.
pub fn outcome_digest(outcome: &TurnOutcome) -> String {
    #[derive(Serialize)]
    struct Published<'a> {
        replies: &'a [String],
        events: &'a [crate::domain::effect::Event],
        route: &'a Option<crate::domain::effect::RouteDecision>,
        executed: &'a [crate::domain::effect::ExecutedTool],
    }
    let published = Published {
        replies: &outcome.replies,
        events: &outcome.events,
        route: &outcome.route,
        executed: &outcome.executed,
    };
    digest(&serde_json::to_vec(&published).unwrap_or_default())
}

/// Whether a turn starting from `base` must carry it: the conversation has filled the window,
/// so the records before this one start leaving.
pub fn needs_base(base: &AgentState) -> bool {
    base.applied_turn_ids.len() >= RECORDS_PER_CONVERSATION
}

/// Encodes `record` for the store; over [`RECORD_MAX_BYTES`], without its answers.
pub fn encode(record: &mut DecisionRecord) -> Vec<u8> {
    let bytes = serde_json::to_vec(&*record).unwrap_or_default();
    if bytes.len() <= RECORD_MAX_BYTES {
        return bytes;
    }
    record.answers.clear();
    record.base = None;
    record.oversized = true;
    serde_json::to_vec(&*record).unwrap_or_default()
}

/// Decodes one stored record.
pub fn decode(row: &DecisionRow) -> Result<DecisionRecord, RecordError> {
    #[derive(Deserialize)]
    struct Version {
        v: u32,
    }
    let undecodable = |e: serde_json::Error| RecordError::Undecodable {
        turn_id: row.turn_id.clone(),
        detail: e.to_string(),
    };
    let version: Version = serde_json::from_slice(&row.record).map_err(undecodable)?;
    if version.v > RECORD_VERSION {
        return Err(RecordError::FromTheFuture {
            turn_id: row.turn_id.clone(),
            found: version.v,
        });
    }
    serde_json::from_slice(&row.record).map_err(undecodable)
}

/// Decodes a conversation's stored records and puts them in the order they were applied
/// (inbound partition, then offset).
pub fn decode_all(rows: &[DecisionRow]) -> Result<Vec<DecisionRecord>, RecordError> {
    let mut records = rows.iter().map(decode).collect::<Result<Vec<_>, _>>()?;
    records.sort_by_key(|r| (r.partition, r.offset));
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::turn::{Identity, TurnInput};

    fn record() -> DecisionRecord {
        DecisionRecord {
            v: RECORD_VERSION,
            turn: Turn {
                turn_id: "t-1".into(),
                identity: Identity::new("t", "a", "s"),
                input: TurnInput::Text("hello".into()),
                locale: crate::domain::locale::Locale::En,
                at_ms: 1,
            },
            partition: 0,
            offset: 3,
            config: "c".into(),
            settings: serde_json::Map::new(),
            before: empty_state_digest(),
            base: None,
            answers: vec![Answer::Persisted],
            oversized: false,
            outputs: RecordedOutputs {
                replies: vec!["hi".into()],
                events: Vec::new(),
                route: None,
                status: None,
                executed: Vec::new(),
                digest: "d".into(),
                after: "a".into(),
            },
        }
    }

    #[test]
    fn a_record_round_trips_and_a_newer_one_is_refused() {
        let mut r = record();
        let bytes = encode(&mut r);
        let row = DecisionRow {
            turn_id: "t-1".into(),
            record: bytes,
            expired: Vec::new(),
        };
        assert_eq!(decode(&row), Ok(record()));
        let newer = DecisionRow {
            record: br#"{"v": 99}"#.to_vec(),
            ..row
        };
        assert!(matches!(
            decode(&newer),
            Err(RecordError::FromTheFuture { found: 99, .. })
        ));
    }

    #[test]
    fn an_oversized_record_keeps_its_summary_only() {
        let mut r = record();
        r.turn.input = TurnInput::Text("x".repeat(RECORD_MAX_BYTES));
        let bytes = encode(&mut r);
        assert!(r.oversized && r.answers.is_empty());
        assert!(bytes.len() > RECORD_MAX_BYTES, "the turn itself is kept");
        let mut small = record();
        encode(&mut small);
        assert!(!small.oversized);
        assert_eq!(small.answers, vec![Answer::Persisted]);
    }

    #[test]
    fn config_version_changes_with_either_file() {
        let v = config_version(b"agents", b"profiles");
        assert_eq!(v.len(), 16);
        assert_ne!(v, config_version(b"agents2", b"profiles"));
        assert_ne!(v, config_version(b"agents", b"profiles2"));
        assert_ne!(config_version(b"ab", b"c"), config_version(b"a", b"bc"));
    }
}
