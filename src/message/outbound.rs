//! Outputs of a finished turn (IO-2): one reply and the turn's events as CloudEvents.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::domain::effect::{EventType, TurnOutcome};
use crate::domain::locale::Locale;
use crate::domain::transaction::TransactionStatus;
use crate::domain::turn::{Identity, Turn};
use crate::message::inbound::MAX_ID_CHARS;
use crate::message::rejection::{DeadLetterReason, Rejection};
use crate::message::wire::{
    check_identity_part, check_length, check_time, check_uuid, derive_id, format_rfc3339_ms,
    nullable, parse_json,
};
use crate::message::{Output, OutputKind};

const REPLY_SCHEMA_FILE: &str = "schemas/reply.v1.json";
const EVENT_SCHEMA_FILE: &str = "schemas/event.v1.json";

/// `"schema": "turnstile.reply.v1"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReplySchema {
    #[serde(rename = "turnstile.reply.v1")]
    V1,
}

/// A reply (`schemas/reply.v1.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplyMessage {
    pub schema: ReplySchema,
    pub output_id: String,
    pub turn_id: String,
    pub tenant_id: String,
    pub agent_id: String,
    pub session_id: String,
    pub text: String,
    pub locale: Locale,
    #[serde(deserialize_with = "nullable")]
    pub route: Option<String>,
    #[serde(deserialize_with = "nullable")]
    pub transaction_status: Option<TransactionStatus>,
    /// SC-5/SC-6: the route decision, so a queue router needs nothing else. Optional (added in
    /// place to v1): present when the turn was routed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_control: Option<String>,
    pub created_at: String,
}

/// `"specversion": "1.0"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SpecVersion {
    #[serde(rename = "1.0")]
    V1_0,
}

/// `"datacontenttype": "application/json"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DataContentType {
    #[serde(rename = "application/json")]
    Json,
}

/// An event: a CloudEvents 1.0 structured-mode JSON document (`schemas/event.v1.json`). The
/// identity and turn travel as extension attributes (lower-case alphanumeric names, as CloudEvents
/// requires) so a router can filter without reading `data`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CloudEvent {
    pub specversion: SpecVersion,
    pub id: String,
    pub source: String,
    #[serde(rename = "type")]
    pub kind: EventType,
    pub subject: String,
    pub time: String,
    pub datacontenttype: DataContentType,
    pub data: Map<String, Value>,
    pub tenantid: String,
    pub agentid: String,
    pub sessionid: String,
    pub turnid: String,
}

impl ReplyMessage {
    /// Reads a reply, enforcing what the schema says beyond types.
    pub fn from_json(bytes: &[u8]) -> Result<ReplyMessage, Rejection> {
        let m: ReplyMessage = parse_json(bytes, REPLY_SCHEMA_FILE)?;
        let checks = check_uuid("output_id", &m.output_id)
            .and_then(|()| check_length("turn_id", &m.turn_id, 1, MAX_ID_CHARS))
            .and_then(|()| check_identity_part("tenant_id", &m.tenant_id, MAX_ID_CHARS))
            .and_then(|()| check_identity_part("agent_id", &m.agent_id, MAX_ID_CHARS))
            .and_then(|()| check_identity_part("session_id", &m.session_id, MAX_ID_CHARS))
            .and_then(|()| check_length("text", &m.text, 1, usize::MAX))
            .and_then(|()| match m.intent.as_deref() {
                Some(intent) => check_length("intent", intent, 1, usize::MAX),
                None => Ok(()),
            })
            .and_then(|()| match m.session_control.as_deref() {
                None | Some("HUMAN_HANDOFF" | "END_SESSION") => Ok(()),
                Some(other) => Err(format!(
                    "`session_control` is `{other}`; expected HUMAN_HANDOFF or END_SESSION"
                )),
            })
            .and_then(|()| check_time("created_at", &m.created_at).map(|_| ()));
        checks.map_err(|e| Rejection::new(DeadLetterReason::SchemaViolation, e))?;
        Ok(m)
    }
}

impl CloudEvent {
    /// Reads an event, enforcing what the schema says beyond types, and that `subject` and
    /// `source` agree with the extension attributes (the schema cannot compare fields).
    pub fn from_json(bytes: &[u8]) -> Result<CloudEvent, Rejection> {
        let e: CloudEvent = parse_json(bytes, EVENT_SCHEMA_FILE)?;
        let identity = Identity::new(&e.tenantid, &e.agentid, &e.sessionid);
        let checks = check_uuid("id", &e.id)
            .and_then(|()| check_identity_part("tenantid", &e.tenantid, MAX_ID_CHARS))
            .and_then(|()| check_identity_part("agentid", &e.agentid, MAX_ID_CHARS))
            .and_then(|()| check_identity_part("sessionid", &e.sessionid, MAX_ID_CHARS))
            .and_then(|()| check_length("turnid", &e.turnid, 1, MAX_ID_CHARS))
            .and_then(|()| check_time("time", &e.time).map(|_| ()))
            .and_then(|()| {
                if e.subject == identity.key() {
                    Ok(())
                } else {
                    Err("`subject` is not tenantid/agentid/sessionid".to_owned())
                }
            })
            .and_then(|()| {
                if e.source == event_source(&e.agentid) {
                    Ok(())
                } else {
                    Err("`source` is not turnstile/<agentid>".to_owned())
                }
            });
        checks.map_err(|m| Rejection::new(DeadLetterReason::SchemaViolation, m))?;
        Ok(e)
    }
}

/// Index of the reply among a turn's outputs; event `i` is `FIRST_EVENT_INDEX + i` whether or
/// not the turn has a reply, so an event's id never depends on the reply's presence.
const REPLY_INDEX: usize = 0;
const FIRST_EVENT_INDEX: usize = 1;

/// The outputs of one finished turn, in publish order: the reply (every non-empty reply text
/// joined by `\n`; none when there is no text), then each event as a CloudEvent, in the engine's
/// (the contract's) order. All are keyed by the identity key. A duplicate turn (EV-1) has none.
///
/// Ids are UUIDv5 of (tenant, agent, session, turn_id, index): re-running or republishing the
/// same turn after a crash yields the same ids, so readers can deduplicate. `now_ms` is the wall
/// clock for `created_at` / `time` only.
pub fn encode_outputs(turn: &Turn, outcome: &TurnOutcome, now_ms: i64) -> Vec<Output> {
    if outcome.duplicate {
        return Vec::new();
    }
    let identity = &turn.identity;
    let key = identity.key();
    let created_at = format_rfc3339_ms(now_ms);
    let mut outputs = Vec::with_capacity(1 + outcome.events.len());

    let texts: Vec<&str> = outcome
        .replies
        .iter()
        .map(String::as_str)
        .filter(|t| !t.is_empty())
        .collect();
    if !texts.is_empty() {
        let output_id = output_id(turn, REPLY_INDEX);
        let reply = ReplyMessage {
            schema: ReplySchema::V1,
            output_id: output_id.clone(),
            turn_id: turn.turn_id.clone(),
            tenant_id: identity.tenant_id.clone(),
            agent_id: identity.agent_id.clone(),
            session_id: identity.session_id.clone(),
            text: texts.join("\n"),
            locale: turn.locale,
            route: outcome.route.as_ref().map(|r| r.route.clone()),
            transaction_status: outcome.state.transaction_status,
            intent: outcome.route.as_ref().and_then(|r| r.intent.clone()),
            handoff: outcome.route.as_ref().map(|r| r.handoff),
            session_control: outcome
                .route
                .as_ref()
                .and_then(|r| r.session_control.clone()),
            created_at: created_at.clone(),
        };
        outputs.push(Output {
            kind: OutputKind::Reply,
            key: key.clone(),
            // Cannot fail: derived impls and string map keys only.
            payload: serde_json::to_vec(&reply).unwrap_or_default(),
            output_id,
        });
    }

    for (i, event) in outcome.events.iter().enumerate() {
        let output_id = output_id(turn, FIRST_EVENT_INDEX + i);
        let data = match &event.data {
            Value::Object(map) => map.clone(),
            // The engine always emits objects; anything else is wrapped so `data` stays an
            // object as the schema promises.
            other => Map::from_iter([("value".to_owned(), other.clone())]),
        };
        let cloud_event = CloudEvent {
            specversion: SpecVersion::V1_0,
            id: output_id.clone(),
            source: event_source(&identity.agent_id),
            kind: event.kind,
            subject: key.clone(),
            time: created_at.clone(),
            datacontenttype: DataContentType::Json,
            data,
            tenantid: identity.tenant_id.clone(),
            agentid: identity.agent_id.clone(),
            sessionid: identity.session_id.clone(),
            turnid: turn.turn_id.clone(),
        };
        outputs.push(Output {
            kind: OutputKind::Event(event.kind),
            key: key.clone(),
            payload: serde_json::to_vec(&cloud_event).unwrap_or_default(),
            output_id,
        });
    }
    outputs
}

fn output_id(turn: &Turn, index: usize) -> String {
    let id = &turn.identity;
    derive_id(&[
        b"output",
        id.tenant_id.as_bytes(),
        id.agent_id.as_bytes(),
        id.session_id.as_bytes(),
        turn.turn_id.as_bytes(),
        index.to_string().as_bytes(),
    ])
}

/// CloudEvents `source` must be a URI reference: the agent id is percent-encoded outside the
/// URI unreserved set (a typical id such as `retail-bot` is unchanged).
fn event_source(agent_id: &str) -> String {
    let mut out = String::with_capacity("turnstile/".len() + agent_id.len());
    out.push_str("turnstile/");
    for b in agent_id.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_percent_encodes_outside_unreserved() {
        assert_eq!(event_source("retail-bot"), "turnstile/retail-bot");
        assert_eq!(event_source("bot ç"), "turnstile/bot%20%C3%A7");
    }
}
