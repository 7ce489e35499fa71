//! `turnstile run`: the streaming worker. Bad configuration exits 64 with a message naming the
//! file, key and fix; an unreachable store at start exits 69; a fatal Kafka error exits 70.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};

use crate::model::configured::{ConfiguredModel, ConfiguredModelError};
use crate::model::embedding::EmbeddingModelError;
use crate::store::cql::{CqlConfig, ScyllaCheckpointStore};
use crate::telemetry;
use crate::worker::{self, listener, Health, Services};

use super::model_args::ModelArgs;
use super::run_config::RunConfiguration;
use super::tool_args::ToolArgs;

pub use super::EXIT_CONFIG;
pub const EXIT_UNAVAILABLE: u8 = 69;
pub const EXIT_SOFTWARE: u8 = 70;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Agents configuration (assistants, tenants, tools).
    #[arg(
        long,
        env = "TURNSTILE_CONFIG",
        default_value = "config/agents.example.yaml"
    )]
    pub config: PathBuf,
    /// Model profiles file.
    #[arg(
        long,
        env = "TURNSTILE_PROFILES",
        default_value = "config/profiles.example.yaml"
    )]
    pub profiles: PathBuf,
    /// CQL contact point(s), comma-separated.
    #[arg(long, env = "TURNSTILE_CQL_CONTACT", default_value = crate::store::cql::DEFAULT_CONTACT)]
    pub contact: String,
    /// CQL keyspace.
    #[arg(long, env = "TURNSTILE_KEYSPACE", default_value = "turnstile")]
    pub keyspace: String,
    #[command(flatten)]
    pub tools: ToolArgs,
    #[command(flatten)]
    pub model: ModelArgs,
}

pub async fn run(args: Args) -> u8 {
    telemetry::init_logging();
    let env = |k: &str| std::env::var(k).ok();
    let config = match RunConfiguration::from_env_and_files(&args, env) {
        Ok(c) => c,
        Err(e) => return config_error(&e),
    };
    let model = match decision_model(&args.model, &config, &env).await {
        Ok(m) => m,
        Err(code) => return code,
    };
    let RunConfiguration {
        catalog,
        tool_http,
        settings,
        worker: worker_config,
        cql,
        ..
    } = config;
    let tools = match args.tools.build_gateway(&catalog, tool_http) {
        Ok(t) => t,
        Err(e) => return config_error(&e.to_string()),
    };
    let recorder = install_metrics();
    let metrics = match recorder {
        Ok(h) => h,
        Err(e) => {
            eprintln!("turnstile: cannot install the metrics recorder: {e}");
            return EXIT_SOFTWARE;
        }
    };
    telemetry::describe();
    let health = Arc::new(Health::default());
    // `turnstile_ready` 0 from the first scrape on, so "not ready" is a value, not an absence.
    health.publish();
    let (bound, _listener) =
        match listener::serve(&worker_config.listen, metrics, health.clone()).await {
            Ok(x) => x,
            Err(e) => {
                return config_error(&format!(
                    "TURNSTILE_LISTEN {}: cannot bind: {e} (fix: choose a free host:port)",
                    worker_config.listen
                ))
            }
        };
    tracing::info!(listen = %bound, "Operations listener up (/metrics, /healthz, /readyz).");
    let store = match connect_with_patience(&cql, &args.contact).await {
        Some(s) => s.with_max_concurrency(worker_config.store_max_concurrency),
        None => {
            eprintln!(
                "turnstile: checkpoint store {} unreachable (fix: start it, or check TURNSTILE_CQL_CONTACT; run `turnstile migrate` once)",
                args.contact
            );
            return EXIT_UNAVAILABLE;
        }
    };
    health
        .store_ok
        .store(true, std::sync::atomic::Ordering::Relaxed);
    health.publish();
    let services = Services {
        catalog,
        settings,
        model,
        tools,
        store,
    };
    match worker::run(worker_config, services, health, shutdown_signal()).await {
        Ok(()) => 0,
        Err(e) => {
            tracing::error!(error = %e, retry_class = ?e.retry_class(), "Worker failed.");
            eprintln!("turnstile: {e}");
            EXIT_SOFTWARE
        }
    }
}

/// The decision model of every skill, its chat endpoints checked. `Err`: the exit code, after
/// saying why (an embeddings index that cannot be built is unavailability, the rest configuration).
async fn decision_model(
    model_args: &ModelArgs,
    config: &RunConfiguration,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ConfiguredModel, u8> {
    let model = match model_args
        .build_model(
            &config.catalog,
            &config.settings,
            config.profiles.clone(),
            env,
            config.model_concurrency(),
        )
        .await
    {
        Ok(m) => m,
        Err(ConfiguredModelError::Embeddings(EmbeddingModelError::Index(e))) => {
            eprintln!("turnstile: {e}");
            return Err(EXIT_UNAVAILABLE);
        }
        Err(e) => return Err(config_error(&e.to_string())),
    };
    // A profile without an endpoint would make every turn fall back silently: refuse to start.
    if let Err(e) = model.check_endpoints() {
        return Err(config_error(&format!(
            "{e} (fix: set base_url in the profiles file, or TURNSTILE_MODEL_BASE_URL)"
        )));
    }
    Ok(model)
}

/// The Prometheus recorder, installed: latency buckets for the store and commits, for turn
/// age, and for every other `_seconds` histogram.
fn install_metrics() -> Result<PrometheusHandle, BuildError> {
    PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full(telemetry::COMMIT_DURATION_SECONDS.into()),
            telemetry::STORE_BUCKETS_SECONDS,
        )
        // Full matches are tried before the prefix and suffix ones below.
        .and_then(|b| {
            b.set_buckets_for_metric(
                Matcher::Full(telemetry::TURN_AGE_SECONDS.into()),
                telemetry::TURN_AGE_BUCKETS_SECONDS,
            )
        })
        .and_then(|b| {
            b.set_buckets_for_metric(
                Matcher::Full(telemetry::DECISION_RECORD_BYTES.into()),
                telemetry::RECORD_BYTES_BUCKETS,
            )
        })
        .and_then(|b| {
            b.set_buckets_for_metric(
                Matcher::Prefix("turnstile_checkpoint_".into()),
                telemetry::STORE_BUCKETS_SECONDS,
            )
        })
        .and_then(|b| {
            b.set_buckets_for_metric(
                Matcher::Suffix("_seconds".into()),
                telemetry::LATENCY_BUCKETS_SECONDS,
            )
        })
        .and_then(|b| b.install_recorder())
}

fn config_error(message: &str) -> u8 {
    eprintln!("turnstile: invalid configuration:\n{message}");
    EXIT_CONFIG
}

/// The store may still be starting (a pod next to a fresh cluster): try for a minute.
/// `contact`: as given, for the log line.
async fn connect_with_patience(cql: &CqlConfig, contact: &str) -> Option<ScyllaCheckpointStore> {
    tracing::info!(
        contact = %contact,
        tls = cql.tls.is_some(),
        tls_verify_hostname = cql.tls.as_ref().is_some_and(|t| t.verify_hostname),
        password_auth = cql.credentials.is_some(),
        "Connecting to the checkpoint store."
    );
    let mut delay = Duration::from_millis(250);
    for _ in 0..12 {
        match ScyllaCheckpointStore::connect(cql).await {
            Ok(s) => return Some(s),
            Err(e) => {
                tracing::warn!(error = %e, "Checkpoint store not reachable yet.");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(10));
            }
        }
    }
    None
}

/// Resolves on SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
