//! librdkafka settings of the worker's consumer and transactional producer.

use rdkafka::config::ClientConfig;

use super::WorkerConfig;

pub(super) fn consumer_config(config: &WorkerConfig) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &config.brokers)
        .set("group.id", &config.group_id)
        .set("group.instance.id", &config.instance_id)
        .set("client.id", format!("{}-consumer", config.instance_id))
        .set("partition.assignment.strategy", "cooperative-sticky")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("isolation.level", "read_committed")
        .set(
            "session.timeout.ms",
            config.session_timeout.as_millis().to_string(),
        )
        .set(
            "heartbeat.interval.ms",
            (config.session_timeout.as_millis() / 4)
                .max(500)
                .to_string(),
        )
        .set("enable.partition.eof", "false")
        // librdkafka's own prefetch is bounded too, so memory stays bounded under any backlog.
        .set("queued.max.messages.kbytes", "16384")
        .set("fetch.max.bytes", "8388608");
    for (k, v) in &config.kafka_overrides {
        c.set(k, v);
    }
    c
}

pub(super) fn producer_config(config: &WorkerConfig) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &config.brokers)
        .set("client.id", format!("{}-producer", config.instance_id))
        // Stable per instance: a restarted instance fences its previous incarnation.
        .set(
            "transactional.id",
            format!("turnstile-{}", config.instance_id),
        )
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .set("transaction.timeout.ms", "60000");
    for (k, v) in &config.kafka_overrides {
        c.set(k, v);
    }
    c
}
