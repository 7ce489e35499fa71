//! The worker's settings: Kafka, limits, lifecycle budgets, listener. Read from the environment
//! (`TURNSTILE_*`) with defaults an operator can run with; validated before anything starts.

use std::time::Duration;

use crate::config::{ConfigError, ConfigErrors};
use crate::message::Topics;

/// Everything `turnstile run` needs besides the agents config, profiles and settings.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerConfig {
    pub brokers: String,
    pub group_id: String,
    /// Stable per instance (a pod name): the transactional id and the static group member id.
    pub instance_id: String,
    pub topics: Topics,
    /// Turns running at once in one partition (distinct conversations). 1 = partition-serial.
    pub max_in_flight_per_partition: usize,
    /// Turns running at once in the whole process.
    pub max_in_flight: usize,
    /// Model calls in progress at once (each holds an HTTP connection); the rest wait.
    pub model_max_concurrency: usize,
    /// Embeddings calls at once (all embeddings profiles): about the server's parallelism, so
    /// a burst waits here, before its timeout starts, instead of in the server's queue.
    pub embeddings_max_concurrency: usize,
    /// Checkpoint reads and writes in progress at once; the rest wait.
    pub store_max_concurrency: usize,
    /// Bytes of checkpoint rows kept after their save, so a conversation's next turn under the
    /// same lease skips the store read (`store::cache`); 0 turns the cache off.
    pub checkpoint_cache_bytes: usize,
    /// Records fetched but not started, per partition, before the partition is paused.
    pub max_buffered_per_partition: usize,
    /// Bytes of fetched, unstarted records in the process before every partition is paused.
    pub max_buffered_bytes: usize,
    pub max_payload_bytes: usize,
    /// How often completed turns are published and their offsets committed.
    pub commit_interval: Duration,
    /// How long shutdown and a revocation wait for in-flight turns.
    pub drain_budget: Duration,
    /// The producer's `transaction.timeout.ms`: how long the broker keeps a transaction of a
    /// killed instance open before aborting it, i.e. how long read_committed readers of replies
    /// and events stall behind it. Tied to the drain budget: it must outlast a drain (else a
    /// graceful drain's transaction is aborted under it); by default the drain budget plus
    /// [`TRANSACTION_TIMEOUT_MARGIN`] (13 s with the defaults, not librdkafka's 60 s).
    pub transaction_timeout: Duration,
    pub session_timeout: Duration,
    /// How often the held partitions' high watermarks are read for
    /// `turnstile_consumer_lag_records` (one ListOffsets request per partition).
    pub lag_interval: Duration,
    /// `host:port` for `/metrics`, `/healthz`, `/readyz`.
    pub listen: String,
    /// Extra librdkafka settings (`TURNSTILE_KAFKA_<name with _ for .>`), e.g. security.
    pub kafka_overrides: Vec<(String, String)>,
    /// Fault injection for the crash harness: abort the process right after the N-th
    /// checkpoint save, before its Kafka commit (`TURNSTILE_FAULT_ABORT_AFTER_SAVES`). Only in
    /// builds with the `harness` feature: a release build has no fault hook to trip.
    #[cfg(feature = "harness")]
    pub fault_abort_after_saves: Option<u64>,
    /// Fault injection for the scale-down measurement: once this file exists, the committer
    /// holds its next transaction open after its outputs reached the broker, and never commits
    /// it (`TURNSTILE_FAULT_HOLD_TRANSACTION_FILE`), so a SIGKILL lands mid-transaction. Only in
    /// builds with the `harness` feature.
    #[cfg(feature = "harness")]
    pub fault_hold_transaction_file: Option<std::path::PathBuf>,
    /// Create missing topics at start (`TURNSTILE_CREATE_TOPICS`, off: production topics are
    /// usually managed elsewhere), with this many inbound partitions.
    pub create_topics: Option<i32>,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            brokers: "127.0.0.1:9092".into(),
            group_id: "turnstile".into(),
            instance_id: "turnstile-0".into(),
            topics: Topics::default(),
            max_in_flight_per_partition: 256,
            max_in_flight: 10_000,
            model_max_concurrency: 768,
            embeddings_max_concurrency: 16,
            store_max_concurrency: 512,
            checkpoint_cache_bytes: 32 * 1024 * 1024,
            max_buffered_per_partition: 2_000,
            max_buffered_bytes: 64 * 1024 * 1024,
            max_payload_bytes: 64 * 1024,
            commit_interval: Duration::from_millis(50),
            drain_budget: Duration::from_secs(8),
            transaction_timeout: Duration::from_secs(8) + TRANSACTION_TIMEOUT_MARGIN,
            session_timeout: Duration::from_secs(15),
            lag_interval: Duration::from_secs(10),
            listen: "0.0.0.0:9464".into(),
            kafka_overrides: Vec::new(),
            #[cfg(feature = "harness")]
            fault_abort_after_saves: None,
            #[cfg(feature = "harness")]
            fault_hold_transaction_file: None,
            create_topics: None,
        }
    }
}

const LABEL: &str = "environment";

/// What a transaction needs beyond the drain budget: the final publish and offset commit of a
/// drain (`TURNSTILE_TRANSACTION_TIMEOUT_MS` defaults to the drain budget plus this).
pub const TRANSACTION_TIMEOUT_MARGIN: Duration = Duration::from_secs(5);
/// librdkafka's lower bound of `transaction.timeout.ms`.
const MIN_TRANSACTION_TIMEOUT_MS: u64 = 1_000;

impl WorkerConfig {
    /// Reads `TURNSTILE_*` variables over the defaults; every error names the variable and fix.
    pub fn from_env(env: impl Fn(&str) -> Option<String>) -> Result<WorkerConfig, ConfigErrors> {
        let mut c = WorkerConfig::default();
        let mut errors = Vec::new();
        c.read_names(&env);
        c.read_limits(&env, &mut errors);
        c.read_timings(&env, &mut errors);
        #[cfg(feature = "harness")]
        if let Some(v) = env("TURNSTILE_FAULT_ABORT_AFTER_SAVES").filter(|v| !v.trim().is_empty()) {
            match v.trim().parse::<u64>() {
                Ok(n) if n >= 1 => c.fault_abort_after_saves = Some(n),
                _ => errors.push(ConfigError {
                    file: LABEL.into(),
                    key: "TURNSTILE_FAULT_ABORT_AFTER_SAVES".into(),
                    problem: format!("`{v}` is not a whole number >= 1"),
                    fix: "unset it (it is a test-only fault injection), or give a count".into(),
                }),
            }
        }
        #[cfg(feature = "harness")]
        {
            c.fault_hold_transaction_file = env("TURNSTILE_FAULT_HOLD_TRANSACTION_FILE")
                .filter(|v| !v.trim().is_empty())
                .map(std::path::PathBuf::from);
        }
        for (name, value) in env_overrides(&env) {
            c.kafka_overrides.push((name, value));
        }
        if env("TURNSTILE_CREATE_TOPICS").is_some_and(|v| matches!(v.trim(), "1" | "true" | "yes"))
        {
            let partitions = env("TURNSTILE_TOPIC_PARTITIONS")
                .and_then(|v| v.trim().parse::<i32>().ok())
                .filter(|p| *p >= 1)
                .unwrap_or(12);
            c.create_topics = Some(partitions);
        }
        c.validate(&mut errors);
        if errors.is_empty() {
            Ok(c)
        } else {
            Err(ConfigErrors(errors))
        }
    }

    /// Broker, group, instance, topics and listen address: text settings, blank means default.
    fn read_names(&mut self, env: &impl Fn(&str) -> Option<String>) {
        env_text(env, "TURNSTILE_BROKERS", &mut self.brokers);
        env_text(env, "TURNSTILE_GROUP_ID", &mut self.group_id);
        env_text(env, "TURNSTILE_INSTANCE_ID", &mut self.instance_id);
        env_text(env, "TURNSTILE_TOPIC_TURNS", &mut self.topics.inbound);
        env_text(env, "TURNSTILE_TOPIC_REPLIES", &mut self.topics.replies);
        env_text(env, "TURNSTILE_TOPIC_EVENTS", &mut self.topics.events);
        env_text(
            &env,
            "TURNSTILE_TOPIC_DEAD_LETTERS",
            &mut self.topics.dead_letters,
        );
        env_text(env, "TURNSTILE_LISTEN", &mut self.listen);
    }

    /// Concurrency, buffer, cache and payload limits: whole numbers with a lower bound.
    fn read_limits(
        &mut self,
        env: &impl Fn(&str) -> Option<String>,
        errors: &mut Vec<ConfigError>,
    ) {
        env_number(
            env,
            errors,
            "TURNSTILE_MAX_IN_FLIGHT_PER_PARTITION",
            &mut self.max_in_flight_per_partition,
            1,
        );
        env_number(
            env,
            errors,
            "TURNSTILE_MAX_IN_FLIGHT",
            &mut self.max_in_flight,
            1,
        );
        env_number(
            env,
            errors,
            "TURNSTILE_MODEL_MAX_CONCURRENCY",
            &mut self.model_max_concurrency,
            1,
        );
        env_number(
            env,
            errors,
            "TURNSTILE_EMBEDDINGS_MAX_CONCURRENCY",
            &mut self.embeddings_max_concurrency,
            1,
        );
        env_number(
            env,
            errors,
            "TURNSTILE_STORE_MAX_CONCURRENCY",
            &mut self.store_max_concurrency,
            1,
        );
        env_number(
            env,
            errors,
            "TURNSTILE_CHECKPOINT_CACHE_BYTES",
            &mut self.checkpoint_cache_bytes,
            0,
        );
        env_number(
            env,
            errors,
            "TURNSTILE_MAX_BUFFERED_PER_PARTITION",
            &mut self.max_buffered_per_partition,
            1,
        );
        env_number(
            env,
            errors,
            "TURNSTILE_MAX_BUFFERED_BYTES",
            &mut self.max_buffered_bytes,
            1024,
        );
        env_number(
            env,
            errors,
            "TURNSTILE_MAX_PAYLOAD_BYTES",
            &mut self.max_payload_bytes,
            256,
        );
    }

    /// Commit interval, drain budget, transaction and session timeouts, lag interval: milliseconds
    /// with a lower bound; the transaction timeout follows the drain budget unless set.
    fn read_timings(
        &mut self,
        env: &impl Fn(&str) -> Option<String>,
        errors: &mut Vec<ConfigError>,
    ) {
        env_millis(
            env,
            errors,
            "TURNSTILE_COMMIT_INTERVAL_MS",
            &mut self.commit_interval,
            1,
        );
        env_millis(
            env,
            errors,
            "TURNSTILE_DRAIN_BUDGET_MS",
            &mut self.drain_budget,
            0,
        );
        // Derived from the (possibly overridden) drain budget unless set explicitly.
        self.transaction_timeout = self.drain_budget + TRANSACTION_TIMEOUT_MARGIN;
        env_millis(
            env,
            errors,
            "TURNSTILE_TRANSACTION_TIMEOUT_MS",
            &mut self.transaction_timeout,
            MIN_TRANSACTION_TIMEOUT_MS,
        );
        env_millis(
            env,
            errors,
            "TURNSTILE_SESSION_TIMEOUT_MS",
            &mut self.session_timeout,
            6_000,
        );
        env_millis(
            env,
            errors,
            "TURNSTILE_LAG_INTERVAL_MS",
            &mut self.lag_interval,
            100,
        );
    }

    fn validate(&self, errors: &mut Vec<ConfigError>) {
        // A revocation must drain before the group evicts this member.
        if self.drain_budget >= self.session_timeout {
            errors.push(ConfigError {
                file: LABEL.into(),
                key: "TURNSTILE_DRAIN_BUDGET_MS".into(),
                problem: format!(
                    "drain budget {:?} is not shorter than the session timeout {:?}",
                    self.drain_budget, self.session_timeout
                ),
                fix: "make TURNSTILE_DRAIN_BUDGET_MS smaller than TURNSTILE_SESSION_TIMEOUT_MS"
                    .into(),
            });
        }
        // A drain holds the open transaction for up to the drain budget, then publishes and
        // commits: a timeout inside that window aborts the drain's transaction under it.
        if self.transaction_timeout <= self.drain_budget {
            errors.push(ConfigError {
                file: LABEL.into(),
                key: "TURNSTILE_TRANSACTION_TIMEOUT_MS".into(),
                problem: format!(
                    "transaction timeout {:?} does not exceed the drain budget {:?}: the broker would abort a draining worker's transaction",
                    self.transaction_timeout, self.drain_budget
                ),
                fix: format!(
                    "set TURNSTILE_TRANSACTION_TIMEOUT_MS above TURNSTILE_DRAIN_BUDGET_MS (e.g. {} = drain budget + {} s), or unset it to derive it from the drain budget",
                    (self.drain_budget + TRANSACTION_TIMEOUT_MARGIN).as_millis(),
                    TRANSACTION_TIMEOUT_MARGIN.as_secs()
                ),
            });
        }
        let names = [
            &self.topics.inbound,
            &self.topics.replies,
            &self.topics.events,
            &self.topics.dead_letters,
        ];
        for (i, a) in names.iter().enumerate() {
            if names[i + 1..].contains(a) {
                errors.push(ConfigError {
                    file: LABEL.into(),
                    key: "TURNSTILE_TOPIC_*".into(),
                    problem: format!("topic `{a}` is used for two purposes"),
                    fix: "give the turns, replies, events and dead-letter topics distinct names"
                        .into(),
                });
            }
        }
    }
}

/// `TURNSTILE_KAFKA_SECURITY_PROTOCOL=SSL` → `security.protocol=SSL`, for the few librdkafka
/// settings a deployment needs (security, SASL). Only these names are read: the lookup is by
/// name, not a scan of the environment.
fn env_overrides(env: &impl Fn(&str) -> Option<String>) -> Vec<(String, String)> {
    const PASSTHROUGH: &[&str] = &[
        "security.protocol",
        "sasl.mechanisms",
        "sasl.username",
        "sasl.password",
        "ssl.ca.location",
        "ssl.certificate.location",
        "ssl.key.location",
        "client.rack",
    ];
    PASSTHROUGH
        .iter()
        .filter_map(|name| {
            let var = format!("TURNSTILE_KAFKA_{}", name.replace('.', "_").to_uppercase());
            env(&var).map(|v| ((*name).to_owned(), v))
        })
        .collect()
}

/// A text setting: `name`'s trimmed value into `slot`, unless unset or blank.
fn env_text(env: &impl Fn(&str) -> Option<String>, name: &str, slot: &mut String) {
    if let Some(v) = env(name).filter(|v| !v.trim().is_empty()) {
        *slot = v.trim().to_owned();
    }
}

/// A whole-number setting of at least `min` into `slot`; anything else is an error naming it.
fn env_number(
    env: &impl Fn(&str) -> Option<String>,
    errors: &mut Vec<ConfigError>,
    name: &str,
    slot: &mut usize,
    min: usize,
) {
    if let Some(v) = env(name).filter(|v| !v.trim().is_empty()) {
        match v.trim().parse::<usize>() {
            Ok(n) if n >= min => *slot = n,
            _ => errors.push(ConfigError {
                file: LABEL.into(),
                key: name.into(),
                problem: format!("`{v}` is not a whole number >= {min}"),
                fix: format!("set {name} to a whole number of at least {min}"),
            }),
        }
    }
}

/// A setting in milliseconds, at least `min`, into `slot`; anything else is an error naming it.
fn env_millis(
    env: &impl Fn(&str) -> Option<String>,
    errors: &mut Vec<ConfigError>,
    name: &str,
    slot: &mut Duration,
    min: u64,
) {
    if let Some(v) = env(name).filter(|v| !v.trim().is_empty()) {
        match v.trim().parse::<u64>() {
            Ok(n) if n >= min => *slot = Duration::from_millis(n),
            _ => errors.push(ConfigError {
                file: LABEL.into(),
                key: name.into(),
                problem: format!("`{v}` is not a number of milliseconds >= {min}"),
                fix: format!("set {name} to milliseconds, e.g. {}", min.max(50)),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_env_overrides() {
        let c = WorkerConfig::from_env(|k| match k {
            "TURNSTILE_MAX_IN_FLIGHT_PER_PARTITION" => Some("1".into()),
            "TURNSTILE_BROKERS" => Some("kafka:9092".into()),
            _ => None,
        })
        .unwrap();
        assert_eq!(c.max_in_flight_per_partition, 1);
        assert_eq!(c.brokers, "kafka:9092");
    }

    #[test]
    fn errors_name_the_variable_and_fix() {
        let e = WorkerConfig::from_env(|k| match k {
            "TURNSTILE_MAX_IN_FLIGHT" => Some("lots".into()),
            "TURNSTILE_DRAIN_BUDGET_MS" => Some("20000".into()),
            _ => None,
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("TURNSTILE_MAX_IN_FLIGHT") && e.contains("fix:"),
            "{e}"
        );
        assert!(e.contains("TURNSTILE_DRAIN_BUDGET_MS"), "{e}");
    }

    #[test]
    fn the_transaction_timeout_follows_the_drain_budget() {
        let default = WorkerConfig::from_env(|_| None).unwrap();
        assert_eq!(default.transaction_timeout, Duration::from_secs(13));
        assert!(default.transaction_timeout <= Duration::from_secs(15));
        assert!(default.transaction_timeout > default.drain_budget);
        let derived = WorkerConfig::from_env(|k| {
            (k == "TURNSTILE_DRAIN_BUDGET_MS").then(|| "3000".to_owned())
        })
        .unwrap();
        assert_eq!(derived.transaction_timeout, Duration::from_secs(8));
        let explicit = WorkerConfig::from_env(|k| {
            (k == "TURNSTILE_TRANSACTION_TIMEOUT_MS").then(|| "20000".to_owned())
        })
        .unwrap();
        assert_eq!(explicit.transaction_timeout, Duration::from_secs(20));
    }

    #[test]
    fn a_transaction_timeout_within_the_drain_budget_is_refused_with_the_fix() {
        let e = WorkerConfig::from_env(|k| match k {
            "TURNSTILE_DRAIN_BUDGET_MS" => Some("8000".into()),
            "TURNSTILE_TRANSACTION_TIMEOUT_MS" => Some("8000".into()),
            _ => None,
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("TURNSTILE_TRANSACTION_TIMEOUT_MS")
                && e.contains("drain budget")
                && e.contains("13000"),
            "{e}"
        );
        let e = WorkerConfig::from_env(|k| {
            (k == "TURNSTILE_TRANSACTION_TIMEOUT_MS").then(|| "500".to_owned())
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("TURNSTILE_TRANSACTION_TIMEOUT_MS"), "{e}");
    }
}
