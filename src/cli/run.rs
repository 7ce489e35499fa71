//! `turnstile run`: the streaming worker. Bad configuration exits 64 with a message naming the
//! file, key and fix; an unreachable store at start exits 69; a fatal Kafka error exits 70.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder};

use crate::config::{
    agents::load_agents_file,
    profiles::{check_profile_references, load_profiles},
    settings::settings_from_env,
};
use crate::model::configured::ConfiguredModelError;
use crate::model::embedding::EmbeddingModelError;
use crate::store::cql::{CqlConfig, ScyllaCheckpointStore};
use crate::telemetry;
use crate::worker::{self, listener, Health, Services, WorkerConfig};

use super::model_args::{ModelArgs, ModelConcurrency};
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
    let (catalog, tool_http) = match load_agents_file(&args.config) {
        Ok(f) => (Arc::new(f.catalog), f.tool_http),
        Err(e) => return config_error(&e.to_string()),
    };
    let profiles = match load_profiles(&args.profiles) {
        Ok(p) => Arc::new(p),
        Err(e) => return config_error(&e.to_string()),
    };
    let settings = match settings_from_env(env) {
        Ok(s) => Arc::new(s),
        Err(e) => return config_error(&e.to_string()),
    };
    if let Err(e) = check_profile_references(
        &catalog,
        &args.config.display().to_string(),
        &settings,
        &profiles,
    ) {
        return config_error(&e.to_string());
    }
    let worker_config = match WorkerConfig::from_env(env) {
        Ok(c) => c,
        Err(e) => return config_error(&e.to_string()),
    };
    let concurrency = ModelConcurrency {
        chat: Some(worker_config.model_max_concurrency),
        embeddings: Some(worker_config.embeddings_max_concurrency),
    };
    let model = match args
        .model
        .build_model(&catalog, &settings, profiles, &env, concurrency)
        .await
    {
        Ok(m) => m,
        Err(ConfiguredModelError::Embeddings(EmbeddingModelError::Index(e))) => {
            eprintln!("turnstile: {e}");
            return EXIT_UNAVAILABLE;
        }
        Err(e) => return config_error(&e.to_string()),
    };
    // A profile without an endpoint would make every turn fall back silently: refuse to start.
    if let Err(e) = model.check_endpoints() {
        return config_error(&format!(
            "{e} (fix: set base_url in the profiles file, or TURNSTILE_MODEL_BASE_URL)"
        ));
    }
    let tools = match args.tools.build_gateway(&catalog, tool_http) {
        Ok(t) => t,
        Err(e) => return config_error(&e.to_string()),
    };
    let recorder = PrometheusBuilder::new()
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
        .and_then(|b| b.install_recorder());
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
    let cql = CqlConfig {
        contact_points: args
            .contact
            .split(',')
            .map(|s| s.trim().to_owned())
            .collect(),
        keyspace: args.keyspace.clone(),
        ..CqlConfig::default()
    }
    .with_security_from(|k| std::env::var(k).ok());
    let cql = match cql {
        Ok(c) => c,
        Err(e) => return config_error(&e),
    };
    // A CA file that cannot be read is a configuration error now, not a minute of retries.
    if let Some(Err(e)) = cql.tls.as_ref().map(|t| t.context()) {
        return config_error(&e.to_string());
    }
    tracing::info!(
        contact = %args.contact,
        tls = cql.tls.is_some(),
        tls_verify_hostname = cql.tls.as_ref().is_some_and(|t| t.verify_hostname),
        password_auth = cql.username_env.is_some(),
        "Connecting to the checkpoint store."
    );
    let store = match connect_with_patience(&cql).await {
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
            tracing::error!(error = %e, "Worker failed.");
            eprintln!("turnstile: {e}");
            EXIT_SOFTWARE
        }
    }
}

fn config_error(message: &str) -> u8 {
    eprintln!("turnstile: invalid configuration:\n{message}");
    EXIT_CONFIG
}

/// The store may still be starting (a pod next to a fresh cluster): try for a minute.
async fn connect_with_patience(cql: &CqlConfig) -> Option<ScyllaCheckpointStore> {
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
