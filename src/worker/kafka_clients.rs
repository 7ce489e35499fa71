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
        // At most 1 s: a member learns of a rebalance only at its next heartbeat, so when
        // workers leave (scale-down) the ones that stay take the partitions up to one interval
        // later. With session / 4 (3.75 s) a 3 -> 1 scale-down's turns waited up to 3.2-3.8 s,
        // with 1 s 1.2-1.4 s (`turnstile chaos --fault scale-down`, docs/benchmarks.md).
        .set(
            "heartbeat.interval.ms",
            (config.session_timeout.as_millis() / 4)
                .clamp(500, 1_000)
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
        // Tied to the drain budget (`WorkerConfig::transaction_timeout`): after a kill, the
        // broker aborts the dead instance's transaction this soon and read_committed readers
        // move on; librdkafka's 60 s default would stall them that long.
        .set(
            "transaction.timeout.ms",
            config.transaction_timeout.as_millis().to_string(),
        );
    for (k, v) in &config.kafka_overrides {
        c.set(k, v);
    }
    c
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn heartbeats_at_most_every_second_and_within_the_session() {
        let beat = |session_ms: u64| {
            let config = WorkerConfig {
                session_timeout: Duration::from_millis(session_ms),
                ..WorkerConfig::default()
            };
            consumer_config(&config)
                .get("heartbeat.interval.ms")
                .map(str::to_owned)
        };
        assert_eq!(beat(15_000).as_deref(), Some("1000"));
        assert_eq!(beat(3_000).as_deref(), Some("750"));
        assert_eq!(beat(1_000).as_deref(), Some("500"));
    }

    #[test]
    fn the_producer_carries_the_configured_transaction_timeout() {
        let config = WorkerConfig {
            transaction_timeout: Duration::from_millis(11_500),
            ..WorkerConfig::default()
        };
        assert_eq!(
            producer_config(&config).get("transaction.timeout.ms"),
            Some("11500")
        );
    }
}
