//! The one catalogue of metric names, labels and buckets (Prometheus conventions: base units,
//! `_total` counters, bounded label values — never a conversation id), plus logging setup.

use metrics::{counter, describe_counter, describe_gauge, describe_histogram, gauge, Unit};

use crate::domain::effect::TurnOutcome;
use crate::message::DeadLetterReason;

// Model calls (per skill and profile).
pub const MODEL_REQUESTS_TOTAL: &str = "turnstile_model_requests_total";
pub const MODEL_REQUEST_DURATION_SECONDS: &str = "turnstile_model_request_duration_seconds";
pub const MODEL_FALLBACKS_TOTAL: &str = "turnstile_model_fallbacks_total";
pub const DECISIONS_TOTAL: &str = "turnstile_decisions_total";
pub const MODEL_SPECULATIVE_DISCARDED_TOTAL: &str = "turnstile_model_speculative_discarded_total";
pub const MODEL_REQUESTS_WAITING: &str = "turnstile_model_requests_waiting";
pub const EMBEDDING_WORDS_MENDED_TOTAL: &str = "turnstile_embedding_words_mended_total";
// Tool and pre-validation webhooks.
pub const TOOL_CALLS_TOTAL: &str = "turnstile_tool_calls_total";
pub const TOOL_CALL_DURATION_SECONDS: &str = "turnstile_tool_call_duration_seconds";
pub const TOOL_RETRIES_TOTAL: &str = "turnstile_tool_retries_total";
// The engine's decisions.
pub const TRANSACTION_TRANSITIONS_TOTAL: &str = "turnstile_transaction_transitions_total";
pub const EVENTS_TOTAL: &str = "turnstile_events_total";
pub const INCONSISTENT_STATES_TOTAL: &str = "turnstile_inconsistent_states_total";
pub const TURNS_SETTLED_WITHOUT_MODEL_TOTAL: &str = "turnstile_turns_settled_without_model_total";
/// SC-11: `handback` actions by `outcome` (`HandbackOutcome::as_str`), `not_pending` included.
pub const HANDBACKS_TOTAL: &str = "turnstile_handbacks_total";
/// RP-1: completed tools' results by tool and `rendering` (`ResultRendering::as_str`).
pub const TOOL_RESULTS_RENDERED_TOTAL: &str = "turnstile_tool_results_rendered_total";
// The worker.
pub const TURNS_TOTAL: &str = "turnstile_turns_total";
pub const TURN_DURATION_SECONDS: &str = "turnstile_turn_duration_seconds";
pub const TURNS_IN_FLIGHT: &str = "turnstile_turns_in_flight";
pub const PARTITION_LAG: &str = "turnstile_partition_lag";
/// Broker-side lag (high watermark minus committed offset) of each held partition.
pub const CONSUMER_LAG_RECORDS: &str = "turnstile_consumer_lag_records";
/// The committed offset of each held partition (-1: none yet): the stall alert watches it move.
pub const CONSUMER_COMMITTED_OFFSET: &str = "turnstile_consumer_committed_offset";
/// From the inbound record's Kafka timestamp to the commit of its outputs.
pub const TURN_AGE_SECONDS: &str = "turnstile_turn_age_seconds";
pub const PARTITION_BUFFER_CAPACITY_RECORDS: &str = "turnstile_partition_buffer_capacity_records";
pub const COMMIT_DURATION_SECONDS: &str = "turnstile_commit_duration_seconds";
pub const COMMIT_FAILURES_TOTAL: &str = "turnstile_commit_failures_total";
pub const CHECKPOINT_LOAD_DURATION_SECONDS: &str = "turnstile_checkpoint_load_duration_seconds";
pub const CHECKPOINT_SAVE_DURATION_SECONDS: &str = "turnstile_checkpoint_save_duration_seconds";
pub const CHECKPOINT_REQUESTS_WAITING: &str = "turnstile_checkpoint_requests_waiting";
pub const CHECKPOINT_ERRORS_TOTAL: &str = "turnstile_checkpoint_errors_total";
/// The `op` label values of `turnstile_checkpoint_errors_total`.
pub const CHECKPOINT_OPS: [&str; 4] = ["load", "save", "acquire_epoch", "record"];
pub const CHECKPOINT_DECODE_FAILURES_TOTAL: &str = "turnstile_checkpoint_decode_failures_total";
pub const CHECKPOINT_CACHE_LOOKUPS_TOTAL: &str = "turnstile_checkpoint_cache_lookups_total";
pub const CHECKPOINT_CACHE_INVALIDATIONS_TOTAL: &str =
    "turnstile_checkpoint_cache_invalidations_total";
pub const CHECKPOINT_CACHE_BYTES: &str = "turnstile_checkpoint_cache_bytes";
/// Size of each turn's decision record as stored (issue 26), in bytes.
pub const DECISION_RECORD_BYTES: &str = "turnstile_decision_record_bytes";
/// Decision records by outcome: `saved`, `oversized` (kept without answers), `failed`.
pub const DECISION_RECORDS_TOTAL: &str = "turnstile_decision_records_total";
pub const OUTBOX_OUTPUTS_UNKNOWN_TOTAL: &str = "turnstile_outbox_outputs_unknown_total";
/// Buckets of [`DECISION_RECORD_BYTES`]: 256 B … 64 KiB (the per-turn target is 2 KB).
pub const RECORD_BYTES_BUCKETS: &[f64] = &[
    256.0, 512.0, 1024.0, 1536.0, 2048.0, 3072.0, 4096.0, 8192.0, 16384.0, 65536.0,
];
pub const FENCED_WRITES_TOTAL: &str = "turnstile_fenced_writes_total";
pub const DEAD_LETTERS_TOTAL: &str = "turnstile_dead_letters_total";
pub const PARTITIONS_ASSIGNED: &str = "turnstile_partitions_assigned";
pub const READY: &str = "turnstile_ready";
pub const IN_FLIGHT_LIMIT: &str = "turnstile_in_flight_limit";
pub const IN_FLIGHT_PER_PARTITION_LIMIT: &str = "turnstile_in_flight_per_partition_limit";

/// Latency buckets in seconds for model, tool and turn histograms (5 ms … 30 s).
pub const LATENCY_BUCKETS_SECONDS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0, 1.5, 2.5, 5.0, 10.0, 30.0,
];
/// Turn age buckets in seconds (50 ms … 10 min): a turn can wait minutes in Kafka behind a
/// backlog, and the latency objective's threshold must be one of these bounds.
pub const TURN_AGE_BUCKETS_SECONDS: &[f64] = &[
    0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0,
];
/// Store and commit buckets in seconds (0.5 ms … 5 s).
pub const STORE_BUCKETS_SECONDS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

/// What a metric of the catalogue is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MetricKind {
    Counter,
    Gauge,
    Histogram,
}

/// The catalogue's help texts and units: (kind, name, unit, help), in the order they are described.
const DESCRIPTIONS: &[(MetricKind, &str, Unit, &str)] = &[
    (
        MetricKind::Histogram,
        DECISION_RECORD_BYTES,
        Unit::Bytes,
        "Size of each applied turn's decision record as stored (issue 26; target 2 KB).",
    ),
    (
        MetricKind::Counter,
        DECISION_RECORDS_TOTAL,
        Unit::Count,
        "Decision records by outcome: saved, oversized (kept without answers), failed.",
    ),
    (
        MetricKind::Counter,
        OUTBOX_OUTPUTS_UNKNOWN_TOTAL,
        Unit::Count,
        "Stored outbox outputs of a kind this version does not know (a newer version wrote them): not republished.",
    ),
    (
        MetricKind::Counter,
        EMBEDDING_WORDS_MENDED_TOTAL,
        Unit::Count,
        "Misspelt words replaced by a known word before a message is embedded, by profile.",
    ),
    (
        MetricKind::Counter,
        DECISIONS_TOTAL,
        Unit::Count,
        "Model decisions by skill and deciding component (embeddings, llm, or fallback when no \
         confident answer came).",
    ),
    (
        MetricKind::Counter,
        MODEL_REQUESTS_TOTAL,
        Unit::Count,
        "Model calls by skill, profile and outcome.",
    ),
    (
        MetricKind::Gauge,
        CHECKPOINT_REQUESTS_WAITING,
        Unit::Count,
        "Checkpoint reads and writes waiting for a slot (TURNSTILE_STORE_MAX_CONCURRENCY).",
    ),
    (
        MetricKind::Gauge,
        MODEL_REQUESTS_WAITING,
        Unit::Count,
        "Model calls waiting for a slot (TURNSTILE_MODEL_MAX_CONCURRENCY).",
    ),
    (
        MetricKind::Histogram,
        MODEL_REQUEST_DURATION_SECONDS,
        Unit::Seconds,
        "Model call latency by skill and profile.",
    ),
    (
        MetricKind::Counter,
        MODEL_FALLBACKS_TOTAL,
        Unit::Count,
        "Model decisions that did not count, by skill and reason (SC-2).",
    ),
    (
        MetricKind::Counter,
        MODEL_SPECULATIVE_DISCARDED_TOTAL,
        Unit::Count,
        "Speculative router calls whose answer was discarded.",
    ),
    (
        MetricKind::Counter,
        TOOL_CALLS_TOTAL,
        Unit::Count,
        "Tool webhook calls by tool, kind and outcome.",
    ),
    (
        MetricKind::Histogram,
        TOOL_CALL_DURATION_SECONDS,
        Unit::Seconds,
        "Tool webhook latency per attempt by tool and kind.",
    ),
    (
        MetricKind::Counter,
        TOOL_RETRIES_TOTAL,
        Unit::Count,
        "Tool webhook retries by tool and kind.",
    ),
    (
        MetricKind::Counter,
        TRANSACTION_TRANSITIONS_TOTAL,
        Unit::Count,
        "Transaction status changes by from and to status.",
    ),
    (
        MetricKind::Counter,
        EVENTS_TOTAL,
        Unit::Count,
        "Events emitted by CloudEvents type.",
    ),
    (
        MetricKind::Counter,
        INCONSISTENT_STATES_TOTAL,
        Unit::Count,
        "Inconsistent checkpoints diagnosed, by reason (ST-5).",
    ),
    (
        MetricKind::Counter,
        TURNS_SETTLED_WITHOUT_MODEL_TOTAL,
        Unit::Count,
        "Turns settled with no model call, by the `reading` that settled them.",
    ),
    (
        MetricKind::Counter,
        TOOL_RESULTS_RENDERED_TOTAL,
        Unit::Count,
        "Completed tools' results shown to the customer, by tool and rendering (template, \
         unmapped_value, no_template, missing_field; RP-1).",
    ),
    (
        MetricKind::Counter,
        TURNS_TOTAL,
        Unit::Count,
        "Inbound turns by outcome.",
    ),
    (
        MetricKind::Counter,
        HANDBACKS_TOTAL,
        Unit::Count,
        "Hand-back actions (SC-11) by outcome: resumed, expired, no_transaction, not_pending.",
    ),
    (
        MetricKind::Histogram,
        TURN_DURATION_SECONDS,
        Unit::Seconds,
        "Turn latency from dequeue to published outputs.",
    ),
    (
        MetricKind::Gauge,
        TURNS_IN_FLIGHT,
        Unit::Count,
        "Turns being processed now.",
    ),
    (
        MetricKind::Gauge,
        PARTITION_LAG,
        Unit::Count,
        "Records delivered to this worker and not finished yet, by partition (not the \
         broker-side lag: unfetched records are not counted).",
    ),
    (
        MetricKind::Gauge,
        CONSUMER_LAG_RECORDS,
        Unit::Count,
        "Records on the broker not yet committed, by partition held: the high watermark \
         (read every TURNSTILE_LAG_INTERVAL_MS) minus the committed offset, as KEDA counts it.",
    ),
    (
        MetricKind::Gauge,
        CONSUMER_COMMITTED_OFFSET,
        Unit::Count,
        "The committed offset of each partition held (-1 while none is committed).",
    ),
    (
        MetricKind::Histogram,
        TURN_AGE_SECONDS,
        Unit::Seconds,
        "Age of a turn when its outputs were committed, from the inbound record's Kafka \
         timestamp: what the customer waited, time queued in Kafka included.",
    ),
    (
        MetricKind::Gauge,
        PARTITION_BUFFER_CAPACITY_RECORDS,
        Unit::Count,
        "Records fetched and not started per partition at most before the partition is paused \
         (TURNSTILE_MAX_BUFFERED_PER_PARTITION).",
    ),
    (
        MetricKind::Histogram,
        COMMIT_DURATION_SECONDS,
        Unit::Seconds,
        "Kafka transaction commit latency.",
    ),
    (
        MetricKind::Counter,
        COMMIT_FAILURES_TOTAL,
        Unit::Count,
        "Kafka transaction commits that failed.",
    ),
    (
        MetricKind::Histogram,
        CHECKPOINT_LOAD_DURATION_SECONDS,
        Unit::Seconds,
        "Checkpoint read latency.",
    ),
    (
        MetricKind::Histogram,
        CHECKPOINT_SAVE_DURATION_SECONDS,
        Unit::Seconds,
        "Checkpoint write latency.",
    ),
    (
        MetricKind::Counter,
        CHECKPOINT_ERRORS_TOTAL,
        Unit::Count,
        "Checkpoint store errors by operation.",
    ),
    (
        MetricKind::Counter,
        CHECKPOINT_DECODE_FAILURES_TOTAL,
        Unit::Count,
        "Stored checkpoints that could not be decoded, by reason (ST-4).",
    ),
    (
        MetricKind::Counter,
        CHECKPOINT_CACHE_LOOKUPS_TOTAL,
        Unit::Count,
        "Turns that looked for their checkpoint in the worker's cache, by result (hit: no store \
         read; miss: read from the store).",
    ),
    (
        MetricKind::Counter,
        CHECKPOINT_CACHE_INVALIDATIONS_TOTAL,
        Unit::Count,
        "Cached checkpoints dropped before use, by reason (revoked, fenced, commit_failed).",
    ),
    (
        MetricKind::Gauge,
        CHECKPOINT_CACHE_BYTES,
        Unit::Bytes,
        "Bytes the checkpoint cache holds (rows plus bookkeeping), at most \
         TURNSTILE_CHECKPOINT_CACHE_BYTES.",
    ),
    (
        MetricKind::Counter,
        FENCED_WRITES_TOTAL,
        Unit::Count,
        "Checkpoint writes refused because a newer owner holds the partition (IO-4).",
    ),
    (
        MetricKind::Counter,
        DEAD_LETTERS_TOTAL,
        Unit::Count,
        "Inbound messages sent to the dead-letter topic, by reason (IO-3).",
    ),
    (
        MetricKind::Gauge,
        PARTITIONS_ASSIGNED,
        Unit::Count,
        "Inbound partitions assigned to this worker.",
    ),
    (
        MetricKind::Gauge,
        READY,
        Unit::Count,
        "1 while /readyz answers 200 (group joined or partitions held, store and broker up), \
         else 0.",
    ),
    (
        MetricKind::Gauge,
        IN_FLIGHT_LIMIT,
        Unit::Count,
        "Turns processed at once per process at most (TURNSTILE_MAX_IN_FLIGHT).",
    ),
    (
        MetricKind::Gauge,
        IN_FLIGHT_PER_PARTITION_LIMIT,
        Unit::Count,
        "Conversations processed at once per partition at most \
         (TURNSTILE_MAX_IN_FLIGHT_PER_PARTITION).",
    ),
];

/// Registers help texts and units with the installed recorder.
pub fn describe() {
    for &(kind, name, unit, help) in DESCRIPTIONS {
        match kind {
            MetricKind::Counter => describe_counter!(name, unit, help),
            MetricKind::Gauge => describe_gauge!(name, unit, help),
            MetricKind::Histogram => describe_histogram!(name, unit, help),
        }
    }
}

/// Exports the counters the alerts watch at 0 before anything happens, so their first increment
/// is an increase to `rate()` / `increase()` (a series that appears at 1 shows none).
pub fn register_alerted_series() {
    for reason in DeadLetterReason::ALL {
        counter!(DEAD_LETTERS_TOTAL, "reason" => reason.as_str()).increment(0);
    }
    for op in CHECKPOINT_OPS {
        counter!(CHECKPOINT_ERRORS_TOTAL, "op" => op).increment(0);
    }
    counter!(COMMIT_FAILURES_TOTAL).increment(0);
    counter!(FENCED_WRITES_TOTAL).increment(0);
}

/// Exports the in-flight caps, so `turnstile_turns_in_flight` can be read against them.
pub fn record_in_flight_limits(process: usize, per_partition: usize) {
    gauge!(IN_FLIGHT_LIMIT).set(process as f64);
    gauge!(IN_FLIGHT_PER_PARTITION_LIMIT).set(per_partition as f64);
}

/// Exports the per-partition buffer cap, so the backlog alert compares
/// `turnstile_partition_lag` with the configured cap instead of a copy of the default.
pub fn record_buffer_capacity(per_partition: usize) {
    gauge!(PARTITION_BUFFER_CAPACITY_RECORDS).set(per_partition as f64);
}

/// Records what the engine decided in one turn: transitions, events, fallbacks, diagnoses.
pub fn record_outcome(outcome: &TurnOutcome) {
    for t in &outcome.transitions {
        counter!(TRANSACTION_TRANSITIONS_TOTAL, "from" => t.from.as_str(), "to" => t.to.as_str())
            .increment(1);
    }
    for e in &outcome.events {
        counter!(EVENTS_TOTAL, "type" => e.kind.as_str()).increment(1);
    }
    for (skill, reason) in &outcome.fallbacks {
        counter!(MODEL_FALLBACKS_TOTAL, "skill" => skill.as_str(), "reason" => reason.as_str())
            .increment(1);
    }
    for i in &outcome.inconsistencies {
        counter!(INCONSISTENT_STATES_TOTAL, "reason" => i.as_str()).increment(1);
    }
    if let Some(reading) = outcome.settled_without_model {
        counter!(TURNS_SETTLED_WITHOUT_MODEL_TOTAL, "reading" => reading.as_str()).increment(1);
    }
    if let Some(handback) = outcome.handback {
        counter!(HANDBACKS_TOTAL, "outcome" => handback.as_str()).increment(1);
    }
    for (tool, rendering) in &outcome.results {
        counter!(TOOL_RESULTS_RENDERED_TOTAL, "tool" => tool.clone(), "rendering" => rendering.as_str())
            .increment(1);
    }
}

/// Target of the turn span ([`turn_span`]). [`log_filter`] always enables it, so that a filter
/// that keeps only warnings (`RUST_LOG=warn`, as under load) still gives a turn's warnings their
/// span: filtered out like any INFO item, the span vanished and the lines lost their turn.
pub const TURN_SPAN_TARGET: &str = "turnstile::turn";

/// The span one inbound record runs in: every line logged while the record is processed (a model
/// fallback, a tool retry, a store wait) carries its topic, partition and offset, the tenant and
/// turn id once `pipeline::handle_record` records them, and the checkpoint's source once the
/// worker's store (`store::CachingCheckpointStore`) loaded it.
pub fn turn_span(topic: &str, partition: i32, offset: i64) -> tracing::Span {
    tracing::info_span!(
        target: TURN_SPAN_TARGET,
        "turn",
        topic = %topic,
        partition,
        offset,
        tenant_id = tracing::field::Empty,
        turn_id = tracing::field::Empty,
        checkpoint = tracing::field::Empty,
        decision_record_bytes = tracing::field::Empty
    )
}

/// `spec` (`RUST_LOG` syntax; `info` when it does not parse), with the turn span always on.
pub fn log_filter(spec: &str) -> tracing_subscriber::EnvFilter {
    let filter = tracing_subscriber::EnvFilter::try_new(spec)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    match format!("{TURN_SPAN_TARGET}=info").parse() {
        Ok(directive) => filter.add_directive(directive),
        Err(_) => filter,
    }
}

/// The worker's JSON log lines, filtered by `filter`, written to `writer`. A turn's lines carry
/// its span's fields under `span`.
pub fn json_logs<W>(
    filter: tracing_subscriber::EnvFilter,
    writer: W,
) -> impl tracing::Subscriber + Send + Sync
where
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_writer(writer)
        .with_current_span(true)
        .with_span_list(false)
        .finish()
}

/// Installs JSON logs on stderr. `RUST_LOG` filters (default `info`).
pub fn init_logging() {
    let spec = std::env::var("RUST_LOG").unwrap_or_else(|_| "info".to_owned());
    let _ = tracing::subscriber::set_global_default(json_logs(log_filter(&spec), std::io::stderr));
}

/// Counts one waiter on a `*_waiting` gauge until dropped, so a wait abandoned mid-way (its
/// future dropped) is uncounted too.
pub struct Waiting(metrics::Gauge);

impl Waiting {
    pub fn start(gauge: metrics::Gauge) -> Waiting {
        gauge.increment(1.0);
        Waiting(gauge)
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The in-flight caps and readiness are exported under their catalogue names, with help
    /// texts, by the exporter `turnstile run` installs.
    #[test]
    fn the_limit_gauges_are_exported_with_help() {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        metrics::with_local_recorder(&recorder, || {
            describe();
            record_in_flight_limits(10_000, 256);
            record_buffer_capacity(1_000);
            register_alerted_series();
            gauge!(READY).set(1.0);
        });
        let text = handle.render();
        for line in [
            "turnstile_in_flight_limit 10000",
            "turnstile_in_flight_per_partition_limit 256",
            "turnstile_partition_buffer_capacity_records 1000",
            "turnstile_ready 1",
            "# TYPE turnstile_in_flight_limit gauge",
            "# TYPE turnstile_ready gauge",
            "turnstile_dead_letters_total{reason=\"engine_error\"} 0",
            "turnstile_checkpoint_errors_total{op=\"save\"} 0",
            "turnstile_commit_failures_total 0",
            "turnstile_fenced_writes_total 0",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "no line `{line}` in:\n{text}"
            );
        }
        for name in [
            READY,
            IN_FLIGHT_LIMIT,
            IN_FLIGHT_PER_PARTITION_LIMIT,
            PARTITION_BUFFER_CAPACITY_RECORDS,
        ] {
            assert!(
                text.lines()
                    .any(|l| l.starts_with(&format!("# HELP {name} "))),
                "{name} has no help text:\n{text}"
            );
        }
    }
}
