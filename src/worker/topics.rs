//! Topic creation: for `TURNSTILE_CREATE_TOPICS` (local runs) and the test harnesses.

use std::time::Duration;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::KafkaError;
use rdkafka::types::RDKafkaErrorCode;

use crate::message::Topics;
use crate::ports::RetryClass;

/// Why the topics could not be created.
#[derive(Debug, thiserror::Error)]
pub enum CreateTopicsError {
    #[error("admin client: {0}")]
    Client(#[source] KafkaError),
    #[error("cannot reach Kafka at {brokers}: {source} (run `bash scripts/services.sh up`)")]
    Unreachable {
        brokers: String,
        #[source]
        source: KafkaError,
    },
    #[error("create topic {topic}: {code}")]
    Refused {
        topic: String,
        code: RDKafkaErrorCode,
    },
}

impl CreateTopicsError {
    /// An unreachable broker may answer a later attempt; a refused configuration or topic will
    /// not until an operator changes it.
    pub fn retry_class(&self) -> RetryClass {
        match self {
            CreateTopicsError::Unreachable { .. } => RetryClass::Retryable,
            CreateTopicsError::Client(_) | CreateTopicsError::Refused { .. } => RetryClass::Fatal,
        }
    }
}

/// Creates the four topics (`partitions` for the inbound one; 3 for the outputs).
pub async fn create_topics(
    brokers: &str,
    topics: &Topics,
    partitions: i32,
) -> Result<(), CreateTopicsError> {
    create_topics_with(brokers, &[], topics, partitions).await
}

/// [`create_topics`] with extra librdkafka settings: the worker's security overrides
/// (`TURNSTILE_KAFKA_*`), so topic creation works against a TLS / SASL listener too.
pub async fn create_topics_with(
    brokers: &str,
    overrides: &[(String, String)],
    topics: &Topics,
    partitions: i32,
) -> Result<(), CreateTopicsError> {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", brokers);
    for (k, v) in overrides {
        config.set(k, v);
    }
    let admin: AdminClient<DefaultClientContext> =
        config.create().map_err(CreateTopicsError::Client)?;
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
        .map_err(|source| CreateTopicsError::Unreachable {
            brokers: brokers.to_owned(),
            source,
        })?;
    for r in results {
        if let Err((topic, code)) = r {
            if code != RDKafkaErrorCode::TopicAlreadyExists {
                return Err(CreateTopicsError::Refused { topic, code });
            }
        }
    }
    Ok(())
}
