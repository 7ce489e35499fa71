//! The checkpoint's outbox: the outputs of applied turns whose Kafka commit is not known yet.
//! Saved with the turn's state in one write, so a record redelivered after a crash between the
//! save and the commit is republished byte for byte (EV-1: same output ids) instead of re-run.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::message::{Output, OutputTopic};

/// One output as kept in the checkpoint's outbox until its commit is known.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OutboxOutput {
    pub topic: String,
    pub key: String,
    /// The payload's own JSON, embedded as is, so it is neither escaped on save nor unescaped on
    /// the next load, as a string would be. Older rows hold a JSON string; so does a payload that
    /// is not exactly one JSON value (see [`from_outbox`]).
    pub payload: Box<RawValue>,
    pub output_id: String,
    pub kind: String,
}

/// The outputs of one applied turn whose Kafka commit is not yet known.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OutboxEntry {
    #[serde(default)]
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub turn_id: String,
    pub outputs: Vec<OutboxOutput>,
}

pub fn to_outbox(o: &Output) -> OutboxOutput {
    let text = String::from_utf8_lossy(&o.payload);
    // A payload that is itself a JSON string would read back as the old format: quote it.
    let embedded = if text.starts_with('"') {
        None
    } else {
        // Parsing trims surrounding whitespace; such a payload is kept as a string, exact.
        RawValue::from_string(text.clone().into_owned())
            .ok()
            .filter(|raw| raw.get().len() == text.len())
    };
    let payload =
        embedded.unwrap_or_else(|| serde_json::value::to_raw_value(&text).unwrap_or_default());
    OutboxOutput {
        topic: o.topic.as_str().to_owned(),
        key: o.key.clone(),
        payload,
        output_id: o.output_id.clone(),
        kind: o.kind.to_string(),
    }
}

pub fn from_outbox(o: &OutboxOutput) -> Output {
    let raw = o.payload.get();
    let payload = if raw.starts_with('"') {
        serde_json::from_str::<String>(raw)
            .map(String::into_bytes)
            .unwrap_or_else(|_| raw.as_bytes().to_vec())
    } else {
        raw.as_bytes().to_vec()
    };
    Output {
        topic: match o.topic.as_str() {
            "events" => OutputTopic::Events,
            "dead_letters" => OutputTopic::DeadLetters,
            _ => OutputTopic::Replies,
        },
        key: o.key.clone(),
        payload,
        output_id: o.output_id.clone(),
        kind: kind_name(&o.kind),
    }
}

/// Output kinds are a closed set; map the stored name back to its static label.
fn kind_name(kind: &str) -> &'static str {
    for t in crate::domain::effect::EventType::ALL {
        if t.as_str() == kind {
            return t.as_str();
        }
    }
    match kind {
        "dead_letter" => "dead_letter",
        _ => "reply",
    }
}

/// Decodes a stored outbox; an unreadable one is treated as empty (its turns were applied, so the
/// worst case is a re-run that the engine answers as a duplicate, EV-1).
pub fn decode(bytes: Option<&[u8]>) -> Vec<OutboxEntry> {
    bytes
        .and_then(|b| serde_json::from_slice(b).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(payload: &[u8]) -> Output {
        Output {
            topic: OutputTopic::Events,
            key: "t/a/s".into(),
            payload: payload.to_vec(),
            output_id: "id-1".into(),
            kind: "transaction.completed",
        }
    }

    fn through_the_store(o: &Output) -> (Output, String) {
        let stored = serde_json::to_string(&vec![to_outbox(o)]).unwrap();
        let back: Vec<OutboxOutput> = serde_json::from_str(&stored).unwrap();
        (from_outbox(&back[0]), stored)
    }

    /// A republished output must be byte for byte what was first published (EV-1: same
    /// `output_id`, same payload), whatever the payload is.
    #[test]
    fn outbox_keeps_every_payload_byte_for_byte() {
        for payload in [
            &br#"{"type":"transaction.completed","data":{"text":"ol\u00e1 \"x\""}}"#[..],
            br#"  {"spaced": true}  "#,
            br#""a JSON string""#,
            b"not json at all",
            b"",
        ] {
            let (back, stored) = through_the_store(&output(payload));
            assert_eq!(back.payload, payload, "stored as {stored}");
            assert_eq!(back.output_id, "id-1");
            assert_eq!(back.kind, "transaction.completed");
            assert_eq!(back.topic, OutputTopic::Events);
        }
    }

    #[test]
    fn outbox_embeds_a_json_payload_without_escaping_it() {
        let (_, stored) = through_the_store(&output(br#"{"a":1}"#));
        assert!(stored.contains(r#""payload":{"a":1}"#), "{stored}");
    }

    /// Rows written before the payload was embedded hold it as a JSON string.
    #[test]
    fn outbox_reads_rows_that_stored_the_payload_as_a_string() {
        let old = r#"[{"topic":"replies","key":"t/a/s","payload":"{\"text\":\"hi\"}","output_id":"id-9","kind":"reply"}]"#;
        let back: Vec<OutboxOutput> = serde_json::from_str(old).unwrap();
        let out = from_outbox(&back[0]);
        assert_eq!(out.payload, br#"{"text":"hi"}"#);
        assert_eq!(out.topic, OutputTopic::Replies);
        assert_eq!(out.kind, "reply");
    }
}
