//! `turnstile eval conversations --through-kafka`: the same sets played against a running worker
//! (`bash scripts/run.sh`) instead of in process ([`crate::eval::conversations::kafka`]). The
//! brokers, topics, Kafka security settings, CQL contact and keyspace default to the worker's own
//! (`TURNSTILE_BROKERS`, `TURNSTILE_TOPIC_*`, `TURNSTILE_KAFKA_*`, `TURNSTILE_CQL_CONTACT`,
//! `TURNSTILE_KEYSPACE`), so the command needs only what differs.

use std::time::Duration;

use crate::domain::catalog::Catalog;
use crate::eval::conversations::{
    Conversation, KafkaPlayError, KafkaTarget, KafkaTransport, Played, Player,
};
use crate::store::cql::{CqlConfig, ScyllaCheckpointStore, DEFAULT_CONTACT, DEFAULT_KEYSPACE};
use crate::worker::WorkerConfig;

use super::run::EXIT_UNAVAILABLE;
use super::EXIT_CONFIG;

/// Where the worker is, when playing through Kafka.
#[derive(Debug, Clone, clap::Args)]
pub struct KafkaArgs {
    /// Play every turn through Kafka against a running worker (`turnstile run`, e.g. `bash
    /// scripts/run.sh`) instead of in process; the model and tools are the worker's.
    #[arg(long)]
    pub through_kafka: bool,
    /// The worker's brokers [default: TURNSTILE_BROKERS, else 127.0.0.1:9092].
    #[arg(long)]
    pub brokers: Option<String>,
    /// The worker's checkpoint store: CQL contact point(s), comma-separated.
    #[arg(long, env = "TURNSTILE_CQL_CONTACT", default_value = DEFAULT_CONTACT)]
    pub cql_contact: String,
    /// The worker's CQL keyspace.
    #[arg(long, env = "TURNSTILE_KEYSPACE", default_value = DEFAULT_KEYSPACE)]
    pub keyspace: String,
    /// The worker's inbound topic [default: TURNSTILE_TOPIC_TURNS, else turnstile.turns.v1].
    #[arg(long)]
    pub topic_turns: Option<String>,
    /// [default: TURNSTILE_TOPIC_REPLIES, else turnstile.replies.v1]
    #[arg(long)]
    pub topic_replies: Option<String>,
    /// [default: TURNSTILE_TOPIC_EVENTS, else turnstile.events.v1]
    #[arg(long)]
    pub topic_events: Option<String>,
    /// [default: TURNSTILE_TOPIC_DEAD_LETTERS, else turnstile.dead-letters.v1]
    #[arg(long)]
    pub topic_dead_letters: Option<String>,
    /// Seconds one turn may wait for the worker's answer before it fails ("no reply within").
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub turn_timeout_secs: u64,
    /// Conversations played at once through Kafka (the turns of one stay sequential).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=256))]
    pub concurrency: u64,
}

impl KafkaArgs {
    /// The worker's settings from the environment, overridden by the flags given.
    fn target(&self, worker: WorkerConfig) -> KafkaTarget {
        let mut topics = worker.topics;
        for (flag, slot) in [
            (&self.topic_turns, &mut topics.inbound),
            (&self.topic_replies, &mut topics.replies),
            (&self.topic_events, &mut topics.events),
            (&self.topic_dead_letters, &mut topics.dead_letters),
        ] {
            if let Some(name) = flag {
                slot.clone_from(name);
            }
        }
        KafkaTarget {
            brokers: self.brokers.clone().unwrap_or(worker.brokers),
            overrides: worker.kafka_overrides,
            topics,
            turn_timeout: Duration::from_secs(self.turn_timeout_secs),
            give_up_after: usize::try_from(self.concurrency).unwrap_or(1),
        }
    }
}

fn fail(code: u8, message: &str) -> u8 {
    eprintln!("turnstile eval conversations: {message}");
    code
}

/// Plays `conversations` through Kafka, or the exit code of what could not start (reported).
pub async fn play<'c>(
    args: &KafkaArgs,
    catalog: &Catalog,
    conversations: &'c [Conversation],
    session_prefix: String,
) -> Result<Played<'c>, u8> {
    let env = |k: &str| std::env::var(k).ok();
    let worker = WorkerConfig::from_env(env)
        .map_err(|e| fail(EXIT_CONFIG, &format!("invalid settings:\n{e}")))?;
    let target = args.target(worker);
    let cql = CqlConfig {
        contact_points: args
            .cql_contact
            .split(',')
            .map(|s| s.trim().to_owned())
            .collect(),
        keyspace: args.keyspace.clone(),
        ..CqlConfig::default()
    }
    .with_security_from(env)
    .map_err(|e| fail(EXIT_CONFIG, &format!("invalid settings:\n{e}")))?;
    let store = ScyllaCheckpointStore::connect(&cql).await.map_err(|e| {
        fail(
            EXIT_UNAVAILABLE,
            &format!(
                "the worker's checkpoint store at {} (keyspace {}) is unavailable: {e} (fix: start \
                 it: bash scripts/services.sh up, and the worker: bash scripts/run.sh, which \
                 creates the schema; or point --cql-contact / --keyspace at the worker's)",
                args.cql_contact, args.keyspace
            ),
        )
    })?;
    let described = format!(
        "mode=kafka brokers={} turns={} replies={} events={} keyspace={} concurrency={} turn_timeout={}s",
        target.brokers,
        target.topics.inbound,
        target.topics.replies,
        target.topics.events,
        args.keyspace,
        args.concurrency,
        args.turn_timeout_secs
    );
    let transport = KafkaTransport::connect(target, store, &session_prefix)
        .await
        .map_err(|e| match e {
            KafkaPlayError::Client { .. } => fail(EXIT_CONFIG, &e.to_string()),
            _ => fail(EXIT_UNAVAILABLE, &e.to_string()),
        })?;
    eprintln!(
        "turnstile eval conversations: {described}: playing {} conversations",
        conversations.len()
    );
    let player = Player {
        catalog,
        transport,
        session_prefix,
        concurrency: usize::try_from(args.concurrency).unwrap_or(1),
    };
    let played = player.play_all(conversations).await;
    let unanswered = played
        .conversations
        .iter()
        .flat_map(|c| &c.turns)
        .filter(|t| t.error.is_some())
        .count();
    if unanswered > 0 {
        eprintln!(
            "turnstile eval conversations: {unanswered} turns were not processed through Kafka \
             (each failed with its reason: see the report)"
        );
    }
    Ok(played)
}
