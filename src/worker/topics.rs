//! Topic creation: for `TURNSTILE_CREATE_TOPICS` (local runs) and the test harnesses.

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;

use crate::message::Topics;

/// Creates the four topics (`partitions` for the inbound one; 3 for the outputs).
pub async fn create_topics(brokers: &str, topics: &Topics, partitions: i32) -> Result<(), String> {
    create_topics_with(brokers, &[], topics, partitions).await
}

/// [`create_topics`] with extra librdkafka settings: the worker's security overrides
/// (`TURNSTILE_KAFKA_*`), so topic creation works against a TLS / SASL listener too.
pub async fn create_topics_with(
    brokers: &str,
    overrides: &[(String, String)],
    topics: &Topics,
    partitions: i32,
) -> Result<(), String> {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", brokers);
    for (k, v) in overrides {
        config.set(k, v);
    }
    let admin: AdminClient<DefaultClientContext> =
        config.create().map_err(|e| format!("admin client: {e}"))?;
    let specs = [
        NewTopic::new(&topics.inbound, partitions, TopicReplication::Fixed(1)),
        NewTopic::new(&topics.replies, 3, TopicReplication::Fixed(1)),
        NewTopic::new(&topics.events, 3, TopicReplication::Fixed(1)),
        NewTopic::new(&topics.dead_letters, 1, TopicReplication::Fixed(1)),
    ];
    let results = admin
        .create_topics(
            &specs,
            &AdminOptions::new().operation_timeout(Some(Duration::from_secs(30))),
        )
        .await
        .map_err(|e| {
            format!("cannot reach Kafka at {brokers}: {e} (run `bash scripts/services.sh up`)")
        })?;
    for r in results {
        if let Err((topic, code)) = r {
            if code != rdkafka::types::RDKafkaErrorCode::TopicAlreadyExists {
                return Err(format!("create topic {topic}: {code}"));
            }
        }
    }
    Ok(())
}
