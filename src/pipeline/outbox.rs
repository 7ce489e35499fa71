//! The checkpoint's outbox: the outputs of applied turns whose Kafka commit is not known yet.
//! Saved with the turn's state in one write, so a record redelivered after a crash between the
//! save and the commit is republished byte for byte (EV-1: same output ids) instead of re-run.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use metrics::counter;

use crate::message::{Output, OutputKind};
use crate::telemetry::OUTBOX_OUTPUTS_UNKNOWN_TOTAL;

/// One output as kept in the checkpoint's outbox until its commit is known.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OutboxOutput {
    /// Written for readers of the row (`turnstile inspect`); read back, the kind decides the topic.
    pub topic: String,
    pub key: String,
    /// The payload's own JSON, embedded as is, so it is neither escaped on save nor unescaped on
    /// the next load, as a string would be. Older rows hold a JSON string; so does a payload that
    /// is not exactly one JSON value (see [`from_outbox`]).
    pub payload: Box<RawValue>,
    pub output_id: String,
    /// [`OutputKind::wire_name`]. A name this version does not know (a row written by a newer
    /// one) is kept as read: that output is not republished, the others are (see [`from_outbox`]).
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
        topic: o.topic().as_str().to_owned(),
        key: o.key.clone(),
        payload,
        output_id: o.output_id.clone(),
        kind: o.kind.wire_name().to_owned(),
    }
}

/// The stored output, to publish again; `None` for a kind this version does not know (a row a
/// newer version wrote, then rolled back): it is counted and logged, not published under a
/// guessed kind, and the turn's other outputs — its reply first — still are.
pub fn from_outbox(o: &OutboxOutput) -> Option<Output> {
    let Some(kind) = OutputKind::from_wire_name(&o.kind) else {
        counter!(OUTBOX_OUTPUTS_UNKNOWN_TOTAL).increment(1);
        tracing::warn!(
            kind = %o.kind,
            output_id = %o.output_id,
            "A stored output of a kind this version does not know is not republished (written by a newer version?)."
        );
        return None;
    };
    let raw = o.payload.get();
    let payload = if raw.starts_with('"') {
        serde_json::from_str::<String>(raw)
            .map(String::into_bytes)
            .unwrap_or_else(|_| raw.as_bytes().to_vec())
    } else {
        raw.as_bytes().to_vec()
    };
    Some(Output {
        kind,
        key: o.key.clone(),
        payload,
        output_id: o.output_id.clone(),
    })
}

/// Decodes a stored outbox; an unreadable one is treated as empty (its turns were applied, so the
/// worst case is a re-run that the engine answers as a duplicate, EV-1, publishing nothing).
pub fn decode(bytes: Option<&[u8]>) -> Vec<OutboxEntry> {
    let Some(bytes) = bytes else {
        return Vec::new();
    };
    serde_json::from_slice(bytes).unwrap_or_else(|e| {
        tracing::warn!(
            error = %e,
            "Checkpoint outbox unreadable (written by another version?); its uncommitted turns \
             run again as duplicates and republish nothing."
        );
        Vec::new()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::effect::EventType;
    use crate::message::OutputTopic;

    fn output(payload: &[u8]) -> Output {
        Output {
            kind: OutputKind::Event(EventType::Completed),
            key: "t/a/s".into(),
            payload: payload.to_vec(),
            output_id: "id-1".into(),
        }
    }

    fn through_the_store(o: &Output) -> (Output, String) {
        let stored = serde_json::to_string(&vec![to_outbox(o)]).unwrap();
        let back: Vec<OutboxOutput> = serde_json::from_str(&stored).unwrap();
        (from_outbox(&back[0]).expect("a known kind"), stored)
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
            assert_eq!(back.kind, OutputKind::Event(EventType::Completed));
            assert_eq!(back.topic(), OutputTopic::Events);
        }
    }

    #[test]
    fn outbox_embeds_a_json_payload_without_escaping_it() {
        let (_, stored) = through_the_store(&output(br#"{"a":1}"#));
        assert!(stored.contains(r#""payload":{"a":1}"#), "{stored}");
    }

    /// The row's bytes are the ones earlier versions wrote and read.
    #[test]
    fn outbox_row_format_is_unchanged() {
        let o = Output {
            kind: OutputKind::DeadLetter,
            key: "k".into(),
            payload: br#"{"a":1}"#.to_vec(),
            output_id: "id-2".into(),
        };
        assert_eq!(
            serde_json::to_string(&to_outbox(&o)).unwrap(),
            r#"{"topic":"dead_letters","key":"k","payload":{"a":1},"output_id":"id-2","kind":"dead_letter"}"#
        );
    }

    /// A kind this version does not know is not republished under a guessed one; the turn's
    /// other outputs are.
    #[test]
    fn an_output_of_an_unknown_kind_is_left_out_of_the_republish_only() {
        let row = r#"[{"topic":"replies","partition":0,"offset":1,"turn_id":"u","outputs":[{"topic":"replies","key":"k","payload":{},"output_id":"r","kind":"reply"},{"topic":"events","key":"k","payload":{},"output_id":"i","kind":"transaction.paused"}]}]"#;
        let entries = decode(Some(row.as_bytes()));
        let outputs: Vec<Output> = entries[0].outputs.iter().filter_map(from_outbox).collect();
        assert_eq!(outputs.len(), 1);
        assert_eq!(outputs[0].kind, OutputKind::Reply);
        let known = row.replace("transaction.paused", "transaction.started");
        let entries = decode(Some(known.as_bytes()));
        assert_eq!(entries[0].outputs.iter().filter_map(from_outbox).count(), 2);
    }

    /// Rows written before the payload was embedded hold it as a JSON string.
    #[test]
    fn outbox_reads_rows_that_stored_the_payload_as_a_string() {
        let old = r#"[{"topic":"replies","key":"t/a/s","payload":"{\"text\":\"hi\"}","output_id":"id-9","kind":"reply"}]"#;
        let back: Vec<OutboxOutput> = serde_json::from_str(old).unwrap();
        let out = from_outbox(&back[0]).unwrap();
        assert_eq!(out.payload, br#"{"text":"hi"}"#);
        assert_eq!(out.topic(), OutputTopic::Replies);
        assert_eq!(out.kind, OutputKind::Reply);
    }
}
