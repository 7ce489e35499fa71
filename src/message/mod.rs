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

/// One message ready to produce. The worker sets the headers from it: [`HEADER_OUTPUT_ID`] =
/// `output_id`, [`HEADER_CONTENT_TYPE`] = [`Output::content_type`], and [`HEADER_TURN_ID`] = the
/// turn's id on replies and events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    pub topic: OutputTopic,
    /// The conversation identity key (`tenant/agent/session`), so a conversation's outputs keep
    /// their order in one output partition; a dead letter keeps the original record's key.
    pub key: String,
    pub payload: Vec<u8>,
    /// Deterministic (UUIDv5): a republish of the same turn or record carries the same id (EV-1).
    pub output_id: String,
    /// `"reply"`, the event type (`"transaction.started"`, …) or `"dead_letter"`: a metric label.
    pub kind: &'static str,
}

impl Output {
    pub fn content_type(&self) -> &'static str {
        match self.topic {
            OutputTopic::Events => CONTENT_TYPE_CLOUDEVENTS,
            OutputTopic::Replies | OutputTopic::DeadLetters => CONTENT_TYPE_JSON,
        }
    }
}
