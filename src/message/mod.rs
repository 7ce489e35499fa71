//! Wire messages: inbound turn decoding (IO-3), replies and CloudEvents (IO-2), dead-letter records.
//!
//! Every format has a JSON Schema under `schemas/` and a serde type here that mirrors it
//! (`deny_unknown_fields`); `tests/schemas.rs` keeps the two in step. `docs/messages.md` is the
//! reader's guide: topics, keys, headers, output ids and what to do about each dead letter.
//!
//! Nothing here reads a clock or panics on input: the worker passes `now_ms`, and every
//! malformed record becomes a [`Rejection`] it can dead-letter and commit past.

mod dead_letter;
mod inbound;
mod outbound;
mod rejection;
mod wire;

pub use dead_letter::{
    encode_dead_letter, DeadLetterMessage, DeadLetterReason, DeadLetterSchema, OriginalRecord,
    Rejection, DEAD_LETTER_KEY_CAP, DEAD_LETTER_PAYLOAD_CAP, MAX_DETAIL_CHARS,
};
pub use inbound::{
    decode_turn, ActionMessage, DecodeLimits, InboundRecord, TurnMessage, TurnSchema,
    DEFAULT_MAX_PAYLOAD_BYTES, MAX_ID_CHARS, MAX_METADATA_ENTRIES, MAX_TEXT_CHARS,
};
pub use outbound::{
    encode_outputs, CloudEvent, DataContentType, ReplyMessage, ReplySchema, SpecVersion,
};
pub use wire::format_rfc3339_ms;

use serde::{Deserialize, Serialize};

use crate::domain::effect::EventType;

/// Kafka header carrying [`Output::output_id`] on every output, so a reader can deduplicate.
pub const HEADER_OUTPUT_ID: &str = "output_id";
/// Kafka header carrying the inbound `turn_id` on replies and events, and on the dead letters of
/// records that decoded as a turn (`checkpoint_undecodable`, `engine_error`).
pub const HEADER_TURN_ID: &str = "turn_id";
/// Kafka header carrying [`Output::content_type`].
pub const HEADER_CONTENT_TYPE: &str = "content-type";

/// `content-type` of replies and dead letters.
pub const CONTENT_TYPE_JSON: &str = "application/json";
/// `content-type` of events: the CloudEvents Kafka binding's structured mode.
pub const CONTENT_TYPE_CLOUDEVENTS: &str = "application/cloudevents+json; charset=UTF-8";

/// Which outbound topic a message goes to (also a bounded metric label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OutputTopic {
    Replies,
    Events,
    DeadLetters,
}

impl OutputTopic {
    pub fn as_str(self) -> &'static str {
        match self {
            OutputTopic::Replies => "replies",
            OutputTopic::Events => "events",
            OutputTopic::DeadLetters => "dead_letters",
        }
    }
}

/// The topic names the worker reads and writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topics {
    pub inbound: String,
    pub replies: String,
    pub events: String,
    pub dead_letters: String,
}

impl Default for Topics {
    fn default() -> Self {
        Topics {
            inbound: "turnstile.turns.v1".into(),
            replies: "turnstile.replies.v1".into(),
            events: "turnstile.events.v1".into(),
            dead_letters: "turnstile.dead-letters.v1".into(),
        }
    }
}

impl Topics {
    /// The configured name of an outbound topic.
    pub fn name(&self, topic: OutputTopic) -> &str {
        match topic {
            OutputTopic::Replies => &self.replies,
            OutputTopic::Events => &self.events,
            OutputTopic::DeadLetters => &self.dead_letters,
        }
    }
}

/// What an output is. Its wire name ([`OutputKind::wire_name`]) is what the checkpoint's outbox
/// stores; the kind decides the topic, so a reply cannot be sent to the events topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "&'static str", try_from = "String")]
pub enum OutputKind {
    Reply,
    Event(EventType),
    DeadLetter,
}

impl OutputKind {
    pub fn wire_name(self) -> &'static str {
        match self {
            OutputKind::Reply => "reply",
            OutputKind::Event(t) => t.as_str(),
            OutputKind::DeadLetter => "dead_letter",
        }
    }

    /// Every kind, replies first, then events in the schema's order, then dead letters.
    pub fn all() -> impl Iterator<Item = OutputKind> {
        std::iter::once(OutputKind::Reply)
            .chain(EventType::ALL.map(OutputKind::Event))
            .chain(std::iter::once(OutputKind::DeadLetter))
    }

    pub fn from_wire_name(name: &str) -> Option<OutputKind> {
        OutputKind::all().find(|k| k.wire_name() == name)
    }

    pub fn topic(self) -> OutputTopic {
        match self {
            OutputKind::Reply => OutputTopic::Replies,
            OutputKind::Event(_) => OutputTopic::Events,
            OutputKind::DeadLetter => OutputTopic::DeadLetters,
        }
    }
}

impl From<OutputKind> for &'static str {
    fn from(kind: OutputKind) -> &'static str {
        kind.wire_name()
    }
}

impl TryFrom<String> for OutputKind {
    type Error = String;

    fn try_from(name: String) -> Result<OutputKind, String> {
        OutputKind::from_wire_name(&name).ok_or_else(|| {
            format!("unknown output kind `{name}`: not reply, dead_letter or an event type")
        })
    }
}

/// One message ready to produce. The worker sets the headers from it: [`HEADER_OUTPUT_ID`] =
/// `output_id`, [`HEADER_CONTENT_TYPE`] = [`Output::content_type`], and [`HEADER_TURN_ID`] = the
/// turn's id on replies and events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// Also decides the topic ([`Output::topic`]).
    pub kind: OutputKind,
    /// The conversation identity key (`tenant/agent/session`), so a conversation's outputs keep
    /// their order in one output partition; a dead letter keeps the original record's key.
    pub key: String,
    pub payload: Vec<u8>,
    /// Deterministic (UUIDv5): a republish of the same turn or record carries the same id (EV-1).
    pub output_id: String,
}

impl Output {
    pub fn topic(&self) -> OutputTopic {
        self.kind.topic()
    }

    pub fn content_type(&self) -> &'static str {
        match self.topic() {
            OutputTopic::Events => CONTENT_TYPE_CLOUDEVENTS,
            OutputTopic::Replies | OutputTopic::DeadLetters => CONTENT_TYPE_JSON,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The outbox stores kinds by wire name: every kind reads back as itself, and the names are
    /// the ones rows already hold.
    #[test]
    fn every_output_kind_round_trips_through_its_wire_name() {
        let names: Vec<&str> = OutputKind::all().map(OutputKind::wire_name).collect();
        assert_eq!(names.len(), 11);
        assert_eq!(names[0], "reply");
        assert_eq!(names[1], "transaction.state.inconsistent");
        assert_eq!(names[10], "dead_letter");
        for kind in OutputKind::all() {
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{}\"", kind.wire_name()));
            assert_eq!(serde_json::from_str::<OutputKind>(&json).unwrap(), kind);
        }
        assert!(serde_json::from_str::<OutputKind>("\"transaction.unknown\"").is_err());
    }

    #[test]
    fn every_event_type_round_trips_through_its_wire_name() {
        for t in EventType::ALL {
            let json = serde_json::to_string(&t).unwrap();
            assert_eq!(json, format!("\"{}\"", t.as_str()));
            assert_eq!(serde_json::from_str::<EventType>(&json).unwrap(), t);
        }
        let err = serde_json::from_str::<EventType>("\"x\"").unwrap_err();
        assert!(err.to_string().contains("transaction.started"), "{err}");
    }
}
