//! Inbound turns (IO-1, IO-3): a Kafka record in, a [`Turn`] or a [`Rejection`] out.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::domain::catalog::Catalog;
use crate::domain::locale::Locale;
use crate::domain::turn::{ChannelAction, Identity, Turn, TurnInput};
use crate::message::rejection::{DeadLetterReason, Rejection};
use crate::message::wire::{
    check_identity_part, check_length, check_time, parse_json, present, truncate_chars,
};

/// Default for [`DecodeLimits::max_payload_bytes`]: a 4000-character text in the worst UTF-8
/// case plus metadata fits with room to spare.
pub const DEFAULT_MAX_PAYLOAD_BYTES: usize = 64 * 1024;
/// `turn_id`, `tenant_id`, `agent_id`, `session_id`: at most this many characters.
pub const MAX_ID_CHARS: usize = 128;
/// `text`: at most this many characters.
pub const MAX_TEXT_CHARS: usize = 4000;
/// `metadata`: at most this many entries.
pub const MAX_METADATA_ENTRIES: usize = 32;

const SCHEMA_FILE: &str = "schemas/turn.v1.json";

/// One consumed Kafka record, borrowed from the consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InboundRecord<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub offset: i64,
    pub key: Option<&'a [u8]>,
    /// `None` is a tombstone.
    pub payload: Option<&'a [u8]>,
    /// The record's timestamp; `None` (or a negative value, Kafka's "no timestamp") when absent.
    pub timestamp_ms: Option<i64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeLimits {
    /// A larger payload is dead-lettered as `oversized` before it is parsed.
    pub max_payload_bytes: usize,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        DecodeLimits {
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
        }
    }
}

/// `"schema": "turnstile.turn.v1"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TurnSchema {
    #[serde(rename = "turnstile.turn.v1")]
    V1,
}

/// The inbound turn as on the wire (`schemas/turn.v1.json`). Optional fields may be absent but
/// never `null`, as in the schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnMessage {
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub schema: Option<TurnSchema>,
    pub turn_id: String,
    pub tenant_id: String,
    pub agent_id: String,
    pub session_id: String,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub text: Option<String>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub action: Option<ActionMessage>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub locale: Option<Locale>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub channel: Option<String>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub sent_at: Option<String>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub received_at: Option<String>,
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub metadata: Option<BTreeMap<String, String>>,
}

/// `"action": {"type": "confirm"}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActionMessage {
    #[serde(rename = "type")]
    pub kind: ChannelAction,
}

impl TurnMessage {
    /// Parses and checks a turn against `schemas/turn.v1.json` (no catalog or key checks).
    pub fn from_json(bytes: &[u8]) -> Result<TurnMessage, Rejection> {
        let message: TurnMessage = parse_json(bytes, SCHEMA_FILE)?;
        message
            .check()
            .map_err(|e| Rejection::new(DeadLetterReason::SchemaViolation, e))?;
        Ok(message)
    }

    /// What the schema says that serde's types cannot: lengths, the key separator, exactly one
    /// of text and action, entry count, date-times.
    fn check(&self) -> Result<(), String> {
        check_length("turn_id", &self.turn_id, 1, MAX_ID_CHARS)?;
        check_identity_part("tenant_id", &self.tenant_id, MAX_ID_CHARS)?;
        check_identity_part("agent_id", &self.agent_id, MAX_ID_CHARS)?;
        check_identity_part("session_id", &self.session_id, MAX_ID_CHARS)?;
        match (&self.text, &self.action) {
            (Some(text), None) => check_length("text", text, 0, MAX_TEXT_CHARS)?,
            (None, Some(_)) => {}
            (Some(_), Some(_)) => {
                return Err("both `text` and `action` are set; send exactly one of them".into())
            }
            (None, None) => {
                return Err("neither `text` nor `action` is set; send exactly one of them".into())
            }
        }
        if let Some(metadata) = &self.metadata {
            if metadata.len() > MAX_METADATA_ENTRIES {
                return Err(format!(
                    "`metadata` has {} entries, more than the {MAX_METADATA_ENTRIES} allowed; \
                     send fewer",
                    metadata.len()
                ));
            }
        }
        if let Some(at) = &self.sent_at {
            check_time("sent_at", at)?;
        }
        if let Some(at) = &self.received_at {
            check_time("received_at", at)?;
        }
        Ok(())
    }

    pub fn identity(&self) -> Identity {
        Identity::new(&self.tenant_id, &self.agent_id, &self.session_id)
    }
}

/// IO-3: decodes one inbound record into a [`Turn`], or says why it must be dead-lettered.
///
/// Checks, in this order (the first failure is reported): a payload at all (a tombstone is
/// `undecodable`), size (`oversized`, before any parsing), UTF-8, JSON, the schema, the Kafka key
/// against the body's identity (`key_mismatch`: compared byte for byte, checked before the
/// catalog because a mis-keyed turn may sit in the wrong partition, IO-1), the assistant
/// (`unknown_agent`), the tenant (`unknown_tenant`).
///
/// The turn's locale is the message's, else the assistant's `default_locale`. Its time (`at_ms`)
/// is `received_at`, else `sent_at`, else the record timestamp (when not negative), else 0.
/// Never panics.
pub fn decode_turn(
    record: &InboundRecord<'_>,
    limits: &DecodeLimits,
    catalog: &Catalog,
) -> Result<Turn, Rejection> {
    let payload =
        match record.payload {
            Some(p) if !p.is_empty() => p,
            _ => return Err(Rejection::new(
                DeadLetterReason::Undecodable,
                "empty payload (tombstone); turn topics are not compacted, so produce one JSON \
                 turn per record and never a null value",
            )),
        };
    if payload.len() > limits.max_payload_bytes {
        return Err(Rejection::new(
            DeadLetterReason::Oversized,
            format!(
                "payload has {} bytes, more than the {} allowed; keep text within \
                 {MAX_TEXT_CHARS} characters and metadata small",
                payload.len(),
                limits.max_payload_bytes
            ),
        ));
    }
    let message = TurnMessage::from_json(payload)?;
    let identity = message.identity();
    check_key(record.key, &identity)?;
    let Some(assistant) = catalog.assistant(&message.agent_id) else {
        return Err(Rejection::new(
            DeadLetterReason::UnknownAgent,
            format!(
                "agent_id \"{}\" is not an assistant of the agents file; add it there and \
                 redeploy, or stop routing this channel here",
                message.agent_id
            ),
        ));
    };
    if !assistant.serves(&message.tenant_id) {
        return Err(Rejection::new(
            DeadLetterReason::UnknownTenant,
            format!(
                "assistant \"{}\" does not serve tenant \"{}\"; add a tenants rule for it in the \
                 agents file, or stop sending this tenant's turns to it",
                message.agent_id, message.tenant_id
            ),
        ));
    }
    // `check` guaranteed exactly one of text and action, so the action arm is always taken when
    // text is absent; the default only keeps this total without a panic.
    let input = match (message.text, message.action) {
        (Some(text), _) => TurnInput::Text(text),
        (None, Some(action)) => TurnInput::Action(action.kind),
        (None, None) => TurnInput::Text(String::new()),
    };
    let at_ms = turn_time(
        message.received_at.as_deref(),
        message.sent_at.as_deref(),
        record.timestamp_ms,
    );
    Ok(Turn {
        turn_id: message.turn_id,
        identity,
        input,
        locale: message.locale.unwrap_or(assistant.default_locale),
        at_ms,
    })
}

/// The channel's receipt time is the best measure of "when the customer spoke" for session
/// expiry (ST-6): it is one clock for every turn of a conversation, unlike the device's
/// `sent_at`. The Kafka timestamp is the last resort (it may be the broker's append time).
fn turn_time(received_at: Option<&str>, sent_at: Option<&str>, record_ms: Option<i64>) -> i64 {
    received_at
        .or(sent_at)
        .and_then(crate::message::wire::parse_rfc3339_ms)
        .or(record_ms.filter(|ms| *ms >= 0))
        .unwrap_or(0)
}

fn check_key(key: Option<&[u8]>, identity: &Identity) -> Result<(), Rejection> {
    let expected = identity.key();
    let found = match key {
        Some(k) if k == expected.as_bytes() => return Ok(()),
        None => "the record has no key".to_owned(),
        Some(k) => match std::str::from_utf8(k) {
            Ok(text) => format!(
                "Kafka key \"{}\" is not the body's identity",
                truncate_chars(text, 100)
            ),
            Err(_) => "the Kafka key is not UTF-8".to_owned(),
        },
    };
    Err(Rejection::new(
        DeadLetterReason::KeyMismatch,
        format!(
            "{found}; key every turn by exactly its tenant_id/agent_id/session_id \"{expected}\", \
             so a conversation stays in one partition (IO-1)"
        ),
    ))
}
