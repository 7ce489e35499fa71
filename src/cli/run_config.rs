//! Everything `turnstile run` reads before it connects anywhere, assembled in one place from its
//! sources: the agents file (`--config`), the profiles file (`--profiles`), the session-control
//! settings (the seed's environment names), the worker's settings (`TURNSTILE_*`: Kafka, limits,
//! listener) and the checkpoint store's connection (`--contact`, `--keyspace`, and TLS and
//! credentials from `TURNSTILE_CQL_*`). These settings are read from the environment here,
//! through `env`: the store and the worker take their values as input. (The model's API keys are
//! read through the same `env` when the model is built.)

use std::sync::Arc;

use crate::config::{
    agents::load_agents_file,
    profiles::{check_profile_references, load_profiles, Profiles},
    settings::settings_from_env,
    tool_http::ToolHttpSettings,
};
use crate::domain::catalog::{Catalog, Settings};
use crate::store::cql::CqlConfig;
use crate::worker::WorkerConfig;

use super::model_args::ModelConcurrency;
use super::run::Args;

/// The configuration of one `turnstile run`, every source read and checked.
pub(super) struct RunConfiguration {
    pub catalog: Arc<Catalog>,
    pub tool_http: ToolHttpSettings,
    pub profiles: Arc<Profiles>,
    pub settings: Arc<Settings>,
    pub worker: WorkerConfig,
    pub cql: CqlConfig,
}

impl RunConfiguration {
    /// Reads and checks every source: the agents file, the profiles (every one the catalog and
    /// settings name must exist), the session-control settings, the worker's settings and the
    /// store's connection. `Err`: what is invalid, each line naming the file or variable and the
    /// fix.
    pub fn from_env_and_files(
        args: &Args,
        env: impl Fn(&str) -> Option<String> + Copy,
    ) -> Result<RunConfiguration, String> {
        let file = load_agents_file(&args.config).map_err(|e| e.to_string())?;
        let catalog = Arc::new(file.catalog);
        let profiles = Arc::new(load_profiles(&args.profiles).map_err(|e| e.to_string())?);
        let mut settings = settings_from_env(env).map_err(|e| e.to_string())?;
        settings.config_version =
            crate::record::config_version_of_files(&args.config, &args.profiles)?;
        let settings = Arc::new(settings);
        check_profile_references(
            &catalog,
            &args.config.display().to_string(),
            &settings,
            &profiles,
        )
        .map_err(|e| e.to_string())?;
        let worker = WorkerConfig::from_env(env).map_err(|e| e.to_string())?;
        let cql = cql_config(&args.contact, &args.keyspace, env)?;
        Ok(RunConfiguration {
            catalog,
            tool_http: file.tool_http,
            profiles,
            settings,
            worker,
            cql,
        })
    }

    /// Model calls at once: the worker's caps for chat and embeddings calls.
    pub fn model_concurrency(&self) -> ModelConcurrency {
        ModelConcurrency {
            chat: Some(self.worker.model_max_concurrency),
            embeddings: Some(self.worker.embeddings_max_concurrency),
        }
    }
}

/// The checkpoint store's connection settings: `contact` (comma-separated) and `keyspace`, TLS
/// and credentials from the environment (a CA file that cannot be read is an error now, not a
/// minute of retries).
fn cql_config(
    contact: &str,
    keyspace: &str,
    env: impl Fn(&str) -> Option<String>,
) -> Result<CqlConfig, String> {
    let cql = CqlConfig {
        contact_points: contact.split(',').map(|s| s.trim().to_owned()).collect(),
        keyspace: keyspace.to_owned(),
        ..CqlConfig::default()
    }
    .with_security_from(env)?;
    if let Some(Err(e)) = cql.tls.as_ref().map(|t| t.context()) {
        return Err(e.to_string());
    }
    Ok(cql)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::cql::{PASSWORD_VAR, USERNAME_VAR};

    #[test]
    fn the_store_connection_takes_its_security_from_the_environment_given() {
        let env = |k: &str| match k {
            USERNAME_VAR => Some("turnstile".to_owned()),
            PASSWORD_VAR => Some("secret".to_owned()),
            _ => None,
        };
        let cql = cql_config("a:9042, b:9042", "ks", env).expect("valid");
        assert_eq!(cql.contact_points, ["a:9042", "b:9042"]);
        assert_eq!(cql.keyspace, "ks");
        let credentials = cql.credentials.expect("password authentication");
        assert_eq!(
            (
                credentials.username.as_str(),
                credentials.password.as_deref()
            ),
            ("turnstile", Some("secret"))
        );
        assert!(cql.tls.is_none());
    }

    #[test]
    fn a_bad_store_setting_is_an_error_naming_its_variable() {
        let env = |k: &str| (k == "TURNSTILE_CQL_TLS_VERIFY_HOSTNAME").then(|| "maybe".to_owned());
        let e = cql_config("a:9042", "ks", env).expect_err("invalid");
        assert!(e.contains("TURNSTILE_CQL_TLS_VERIFY_HOSTNAME"), "{e}");
        let env = |k: &str| (k == "TURNSTILE_CQL_TLS_CA_FILE").then(|| "/nonexistent.pem".into());
        let e = cql_config("a:9042", "ks", env).expect_err("unreadable CA");
        assert!(e.contains("TURNSTILE_CQL_TLS_CA_FILE"), "{e}");
    }
}
