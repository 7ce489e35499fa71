//! `turnstile eval conversations`: whole conversations (`docs/conversations.md`)
//! through the worker's own turn path with the real decision model and the real tool webhooks,
//! judged turn by turn.
//!
//! | module | what it is |
//! |---|---|
//! | [`format`](mod@format) | the JSONL reader: every problem names file, line and field; names checked against the configuration |
//! | [`judge`] | a turn's outcome class (the spec's order), expectation matching, unsafe kinds |
//! | [`play`] | each conversation in its own session, turn by turn through a transport (in process: its own in-memory store and `pipeline::process_turn`), judged the same way whichever |
//! | [`kafka`] | the transport through Kafka against a running worker, the checkpoint read back from its store |
//! | [`report`] | the figures (strict / lenient, Wilson 95 % intervals, by locale, by outcome), unsafe turns, transcripts |
//!
//! **The test part.** A conversation belongs to the `test` part when the FNV-1a 64-bit hash of
//! its id's UTF-8 bytes is divisible by 3 ([`is_test_part`]); the rest is `dev`. The split
//! depends on the id alone: stable across runs, machines and file order, about a third of any
//! set, and a conversation never changes part when others are added. Tune on `dev`; report
//! `test`.

pub mod format;
pub mod judge;
pub mod kafka;
pub mod play;
pub mod report;

pub use format::{parse_conversations, Conversation, DataError, Expectation, OutcomeClass};
pub use kafka::{KafkaPlayError, KafkaTarget, KafkaTransport};
pub use play::{InProcess, Played, Player, TurnTransport};
pub use report::{wilson95, Report};

/// FNV-1a, 64 bits (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Whether the conversation `id` is in the held-out `test` part (see the module doc).
pub fn is_test_part(id: &str) -> bool {
    fnv1a64(id.as_bytes()) % 3 == 0
}

/// Which conversations a run plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    All,
    Dev,
    Test,
}

impl Part {
    pub fn parse(name: &str) -> Option<Part> {
        match name {
            "all" => Some(Part::All),
            "dev" => Some(Part::Dev),
            "test" => Some(Part::Test),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Part::All => "all",
            Part::Dev => "dev",
            Part::Test => "test",
        }
    }

    pub fn contains(self, id: &str) -> bool {
        match self {
            Part::All => true,
            Part::Dev => !is_test_part(id),
            Part::Test => is_test_part(id),
        }
    }
}

/// Pass marks of a run; each one given and not met is named.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Floors {
    /// On the strict turn accuracy.
    pub min_turn_accuracy: Option<f64>,
    /// On the strict conversation success.
    pub min_conversation_success: Option<f64>,
    /// On the number of unsafe turns (a turn with several findings counts once).
    pub max_unsafe: Option<usize>,
}

impl Floors {
    /// The floors `report` does not meet, each as a sentence.
    pub fn unmet(&self, report: &Report) -> Vec<String> {
        let f = &report.figures;
        let mut out = Vec::new();
        if let Some(min) = self.min_turn_accuracy {
            if f.turn_accuracy.strict < min {
                out.push(format!(
                    "turn accuracy (strict) {:.4} is below --min-turn-accuracy {min}",
                    f.turn_accuracy.strict
                ));
            }
        }
        if let Some(min) = self.min_conversation_success {
            if f.conversation_success.strict < min {
                out.push(format!(
                    "conversation success (strict) {:.4} is below --min-conversation-success {min}",
                    f.conversation_success.strict
                ));
            }
        }
        if let Some(max) = self.max_unsafe {
            if report.unsafe_turns > max {
                out.push(format!(
                    "{} unsafe turns, more than --max-unsafe {max}",
                    report.unsafe_turns
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a64_matches_the_published_test_vectors() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn the_test_part_is_stable_for_fixed_ids_and_about_a_third() {
        let test: Vec<&str> = [
            "en01", "en02", "en03", "en04", "en05", "en06", "en07", "pt01", "pt02", "pt03",
        ]
        .into_iter()
        .filter(|id| is_test_part(id))
        .collect();
        assert_eq!(test, ["en05", "en06", "pt01"]);
        assert!(!is_test_part("conversa-ção"), "hashed as UTF-8 bytes");
        let ids: Vec<String> = (0..3000).map(|i| format!("c{i}")).collect();
        let share = ids.iter().filter(|id| is_test_part(id)).count() as f64 / 3000.0;
        assert!((0.30..0.37).contains(&share), "{share}");
        assert!(
            Part::Test.contains("en05")
                && !Part::Dev.contains("en05")
                && Part::All.contains("en05")
        );
        assert!(Part::Dev.contains("en01") && !Part::Test.contains("en01"));
        assert_eq!(Part::parse("dev"), Some(Part::Dev));
        assert_eq!(Part::parse("train"), None);
    }
}
