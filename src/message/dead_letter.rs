//! Dead letters (IO-3): why a record was not taken, and a bounded copy of it for replay.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::message::inbound::InboundRecord;
pub use crate::message::rejection::{DeadLetterReason, Rejection, MAX_DETAIL_CHARS};
use crate::message::wire::{
    cap, check_length, check_time, check_uuid, derive_id, format_rfc3339_ms, nullable, parse_json,
    truncate_chars,
};
use crate::message::{Output, OutputKind};

/// At most this many payload bytes are copied into a dead letter (as base64, about 350 KB), so a
/// dead letter always fits Kafka's default 1 MB message limit.
pub const DEAD_LETTER_PAYLOAD_CAP: usize = 256 * 1024;
/// At most this many key bytes are copied (a real identity key is under 1.6 KB).
pub const DEAD_LETTER_KEY_CAP: usize = 4 * 1024;

const SCHEMA_FILE: &str = "schemas/dead_letter.v1.json";

/// `"schema": "turnstile.dead_letter.v1"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DeadLetterSchema {
    #[serde(rename = "turnstile.dead_letter.v1")]
    V1,
}

/// A dead-letter record (`schemas/dead_letter.v1.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeadLetterMessage {
    pub schema: DeadLetterSchema,
    pub output_id: String,
    pub reason: DeadLetterReason,
    pub detail: String,
    pub original: OriginalRecord,
    pub created_at: String,
}

/// Where the record was and a bounded, lossless copy of its key and payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OriginalRecord {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    /// The key as text, invalid UTF-8 replaced by U+FFFD: for people and `grep`.
    #[serde(deserialize_with = "nullable")]
    pub key: Option<String>,
    /// The key's exact bytes: for replay.
    #[serde(deserialize_with = "nullable")]
    pub key_base64: Option<String>,
    pub key_truncated: bool,
    /// `None` for a tombstone (no payload), `Some("")` for an empty one.
    #[serde(deserialize_with = "nullable")]
    pub payload_base64: Option<String>,
    pub truncated: bool,
    pub payload_size: u64,
    #[serde(deserialize_with = "nullable")]
    pub timestamp_ms: Option<i64>,
}

impl DeadLetterMessage {
    /// Reads a dead letter (e.g. in a replay tool), enforcing what the schema says beyond types.
    pub fn from_json(bytes: &[u8]) -> Result<DeadLetterMessage, Rejection> {
        let message: DeadLetterMessage = parse_json(bytes, SCHEMA_FILE)?;
        let checks = check_uuid("output_id", &message.output_id)
            .and_then(|()| check_length("detail", &message.detail, 0, MAX_DETAIL_CHARS))
            .and_then(|()| check_time("created_at", &message.created_at).map(|_| ()));
        checks.map_err(|e| Rejection::new(DeadLetterReason::SchemaViolation, e))?;
        Ok(message)
    }
}

/// The dead letter of `record`. Its id is a UUIDv5 of (topic, partition, offset), so producing it
/// again after a crash yields the same id; its key is the original key, so a conversation's dead
/// letters stay in order in one partition.
pub fn encode_dead_letter(
    record: &InboundRecord<'_>,
    rejection: &Rejection,
    now_ms: i64,
) -> Output {
    let output_id = derive_id(&[
        b"dead_letter",
        record.topic.as_bytes(),
        record.partition.to_string().as_bytes(),
        record.offset.to_string().as_bytes(),
    ]);
    let key = record.key.map(|k| cap(k, DEAD_LETTER_KEY_CAP));
    let key_text = key.map(|(k, _)| String::from_utf8_lossy(k).into_owned());
    let payload = record.payload.map(|p| cap(p, DEAD_LETTER_PAYLOAD_CAP));
    let message = DeadLetterMessage {
        schema: DeadLetterSchema::V1,
        output_id: output_id.clone(),
        reason: rejection.reason,
        // Bounded again: the worker may build a Rejection by hand (engine errors).
        detail: truncate_chars(&rejection.detail, MAX_DETAIL_CHARS),
        original: OriginalRecord {
            topic: record.topic.to_owned(),
            partition: record.partition,
            offset: record.offset,
            key: key_text.clone(),
            key_base64: key.map(|(k, _)| BASE64.encode(k)),
            key_truncated: key.is_some_and(|(_, cut)| cut),
            payload_base64: payload.map(|(p, _)| BASE64.encode(p)),
            truncated: payload.is_some_and(|(_, cut)| cut),
            payload_size: record.payload.map_or(0, |p| p.len() as u64),
            timestamp_ms: record.timestamp_ms,
        },
        created_at: format_rfc3339_ms(now_ms),
    };
    Output {
        kind: OutputKind::DeadLetter,
        key: key_text.unwrap_or_default(),
        // Cannot fail: derived impls and string map keys only.
        payload: serde_json::to_vec(&message).unwrap_or_default(),
        output_id,
    }
}
