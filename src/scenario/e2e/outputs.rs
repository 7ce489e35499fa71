//! The worker's output topics as a downstream `read_committed` reader sees them, and the turn's
//! replies, events and dead letters picked out of what was read.

use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};
use serde_json::Value;

use crate::message::Topics;
use crate::testkit::bus::{self, ReadMessage};

/// The worker's output topics read from the beginning with `read_committed`, as a downstream
/// reader sees them. Like `testkit::bus::OutputReader`, plus the reader's positions, so the
/// runner knows when it has read up to a watermark instead of guessing with a sleep.
pub(super) struct Outputs {
    consumer: BaseConsumer,
    pub(super) partitions: Vec<(String, i32)>,
    pub(super) seen: Vec<ReadMessage>,
}

impl Outputs {
    pub(super) fn new(brokers: &str, topics: &[&str]) -> Result<Outputs, String> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", brokers)
            .set("group.id", format!("reader-{}", bus::unique_suffix()))
            .set("isolation.level", "read_committed")
            .set("enable.auto.commit", "false")
            .set("enable.partition.eof", "false")
            .set("fetch.wait.max.ms", "50")
            .create()
            .map_err(|e| format!("reader: {e}"))?;
        let mut tpl = TopicPartitionList::new();
        let mut partitions = Vec::new();
        for t in topics {
            for p in settled_partitions(&consumer, t)? {
                tpl.add_partition_offset(t, p, Offset::Beginning)
                    .map_err(|e| e.to_string())?;
                partitions.push(((*t).to_owned(), p));
            }
        }
        consumer.assign(&tpl).map_err(|e| format!("assign: {e}"))?;
        Ok(Outputs {
            consumer,
            partitions,
            seen: Vec::new(),
        })
    }

    pub(super) fn poll_for(&mut self, budget: Duration) {
        let until = Instant::now() + budget;
        while Instant::now() < until {
            let Some(Ok(m)) = self.consumer.poll(Duration::from_millis(20)) else {
                continue;
            };
            self.seen.push(ReadMessage::from_record(&m));
        }
    }

    /// True when the position of every partition in `marks` reached its mark. librdkafka moves
    /// the position over commit and abort markers too, so a high watermark is reachable.
    pub(super) fn caught_up(&self, marks: &[(String, i32, i64)]) -> bool {
        let Ok(positions) = self.consumer.position() else {
            return false;
        };
        marks.iter().all(|(topic, partition, mark)| {
            match positions
                .find_partition(topic, *partition)
                .map(|e| e.offset())
            {
                Some(Offset::Offset(at)) => at >= *mark,
                // Nothing read yet: caught up only with an empty partition.
                _ => *mark <= 0,
            }
        })
    }
}

/// The partitions of a topic created a moment ago, once the broker reports all of them with a
/// leader: metadata asked for too early can list none, and a reader assigned to none would
/// never see an output.
fn settled_partitions(consumer: &BaseConsumer, topic: &str) -> Result<Vec<i32>, String> {
    let started = Instant::now();
    loop {
        let meta = consumer
            .fetch_metadata(Some(topic), Duration::from_secs(10))
            .map_err(|e| format!("metadata of {topic}: {e}"))?;
        let settled = meta
            .topics()
            .iter()
            .find(|t| t.name() == topic)
            .and_then(|t| {
                let ok = t.error().is_none()
                    && !t.partitions().is_empty()
                    && t.partitions()
                        .iter()
                        .all(|p| p.error().is_none() && p.leader() >= 0);
                ok.then(|| t.partitions().iter().map(|p| p.id()).collect())
            });
        if let Some(ids) = settled {
            return Ok(ids);
        }
        if started.elapsed() >= Duration::from_secs(30) {
            return Err(format!(
                "topic {topic} has no partitions with a leader 30 s after it was created"
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub(super) fn replies_of<'a>(seen: &'a [ReadMessage], turn_id: &str) -> Vec<&'a ReadMessage> {
    let mut list: Vec<&ReadMessage> = seen
        .iter()
        .filter(|m| {
            m.topic.ends_with(".replies")
                && m.payload.get("turn_id").and_then(Value::as_str) == Some(turn_id)
        })
        .collect();
    list.sort_by_key(|m| (m.partition, m.offset));
    list
}

/// The turn's CloudEvents (extension `turnid`), in the order they were published: one key, so
/// one partition, so offset order.
pub(super) fn events_of<'a>(seen: &'a [ReadMessage], turn_id: &str) -> Vec<&'a ReadMessage> {
    let mut list: Vec<&ReadMessage> = seen
        .iter()
        .filter(|m| {
            m.topic.ends_with(".events")
                && m.payload.get("turnid").and_then(Value::as_str) == Some(turn_id)
        })
        .collect();
    list.sort_by_key(|m| (m.partition, m.offset));
    list
}

pub(super) fn repeated_output_id(list: &[&ReadMessage]) -> Option<String> {
    let mut ids: Vec<&str> = list.iter().filter_map(|m| m.output_id.as_deref()).collect();
    ids.sort_unstable();
    ids.windows(2)
        .find(|pair| pair[0] == pair[1])
        .map(|pair| pair[0].to_owned())
}

/// The dead letter of the inbound record at `at`, described in one line.
pub(super) fn dead_letter_of(
    seen: &[ReadMessage],
    topics: &Topics,
    at: (i32, i64),
) -> Option<String> {
    seen.iter()
        .filter(|m| m.topic == topics.dead_letters)
        .find(|m| {
            let original = m.payload.get("original");
            let field = |k: &str| original.and_then(|o| o.get(k)).and_then(Value::as_i64);
            field("partition") == Some(i64::from(at.0)) && field("offset") == Some(at.1)
        })
        .map(|m| {
            format!(
                "{}: {}",
                text_field(&m.payload, "reason"),
                text_field(&m.payload, "detail")
            )
        })
}

pub(super) fn text_field(payload: &Value, key: &str) -> String {
    payload
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn message(topic: &str, partition: i32, offset: i64, payload: Value, id: &str) -> ReadMessage {
        ReadMessage {
            topic: topic.into(),
            partition,
            offset,
            key: String::new(),
            payload,
            output_id: Some(id.into()),
            turn_id: None,
            timestamp_ms: None,
        }
    }

    #[test]
    fn events_and_replies_of_one_turn_in_offset_order() {
        let seen = vec![
            message("x.events", 1, 7, json!({"turnid": "t1", "type": "b"}), "2"),
            message("x.events", 1, 5, json!({"turnid": "t1", "type": "a"}), "1"),
            message("x.events", 1, 6, json!({"turnid": "t2", "type": "c"}), "3"),
            message(
                "x.replies",
                0,
                3,
                json!({"turn_id": "t1", "text": "hi"}),
                "4",
            ),
        ];
        let types: Vec<String> = events_of(&seen, "t1")
            .iter()
            .map(|m| text_field(&m.payload, "type"))
            .collect();
        assert_eq!(types, ["a", "b"]);
        assert_eq!(replies_of(&seen, "t1").len(), 1);
        assert!(replies_of(&seen, "t2").is_empty());
        assert_eq!(repeated_output_id(&events_of(&seen, "t1")), None);
    }

    #[test]
    fn a_repeated_output_id_is_found() {
        let seen = vec![
            message("x.replies", 0, 3, json!({"turn_id": "t1"}), "same"),
            message("x.replies", 0, 4, json!({"turn_id": "t1"}), "same"),
        ];
        assert_eq!(
            repeated_output_id(&replies_of(&seen, "t1")),
            Some("same".into())
        );
    }

    #[test]
    fn dead_letters_match_their_original_record() {
        let topics = Topics {
            dead_letters: "dl".into(),
            ..Topics::default()
        };
        let dl = json!({"reason": "schema_violation", "detail": "bad", "original": {"partition": 2, "offset": 9}});
        let seen = vec![message("dl", 0, 0, dl, "d")];
        assert_eq!(
            dead_letter_of(&seen, &topics, (2, 9)).as_deref(),
            Some("schema_violation: bad")
        );
        assert_eq!(dead_letter_of(&seen, &topics, (2, 8)), None);
    }
}
