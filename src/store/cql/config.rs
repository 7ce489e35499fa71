//! `CqlConfig`: contact points, keyspace, consistency, timeouts, retention, credentials; and
//! their validation (unsafe keyspace or replication strings are refused before any CQL runs).

use super::*;

/// Cassandra's largest TTL is 20 years; retention beyond that would be refused at migrate time.
pub(super) const MAX_RETENTION_DAYS: u32 = 20 * 365;
/// Connection and schema settings for the CQL store.
#[derive(Debug, Clone)]
pub struct CqlConfig {
    /// `host:port` of one or more nodes; the driver discovers the rest of the cluster.
    pub contact_points: Vec<String>,
    pub keyspace: String,
    /// Datacenter whose replicas are preferred (and the only ones used: no DC failover, so
    /// LOCAL_QUORUM means what it says). `None` on a single-DC cluster.
    pub local_dc: Option<String>,
    /// Client-side timeout of one request attempt.
    pub request_timeout_ms: u64,
    /// Row retention (table `default_time_to_live`), applied at migrate time.
    pub retention_days: u32,
    /// CQL replication map for `CREATE KEYSPACE`, applied at migrate time.
    pub replication: String,
    /// Password authentication, its values read from the environment (never from a file or an
    /// argument) by whoever builds the configuration; `None`: no authentication.
    pub credentials: Option<CqlCredentials>,
    /// TLS to the nodes (`TURNSTILE_CQL_TLS_*`); `None`: plaintext.
    pub tls: Option<CqlTls>,
    pub read_consistency: Consistency,
    pub write_consistency: Consistency,
}

impl Default for CqlConfig {
    fn default() -> Self {
        CqlConfig {
            contact_points: vec![DEFAULT_CONTACT.to_owned()],
            keyspace: DEFAULT_KEYSPACE.to_owned(),
            local_dc: None,
            request_timeout_ms: DEFAULT_REQUEST_TIMEOUT_MS,
            retention_days: DEFAULT_RETENTION_DAYS,
            replication: DEFAULT_REPLICATION.to_owned(),
            credentials: None,
            tls: None,
            read_consistency: Consistency::LocalQuorum,
            write_consistency: Consistency::LocalQuorum,
        }
    }
}

/// Variables of the store's credentials (password authentication), read by `run`, `migrate` and
/// `inspect`: the values stay in the environment (a Kubernetes Secret), never in arguments.
pub const USERNAME_VAR: &str = "TURNSTILE_CQL_USERNAME";
pub const PASSWORD_VAR: &str = "TURNSTILE_CQL_PASSWORD";

/// The user name and password the store authenticates with; `Debug` never shows the password.
#[derive(Clone, PartialEq, Eq)]
pub struct CqlCredentials {
    pub username: String,
    /// `None`: `TURNSTILE_CQL_PASSWORD` is not set, and connecting fails saying so.
    pub password: Option<String>,
}

impl std::fmt::Debug for CqlCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CqlCredentials")
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl CqlCredentials {
    /// The password, or the error that names its missing variable.
    pub(super) fn password(&self) -> Result<&str, StoreError> {
        self.password.as_deref().ok_or_else(|| {
            StoreError::rejected(format!(
                "credential environment variable {PASSWORD_VAR} is not set"
            ))
        })
    }
}

impl CqlConfig {
    /// Password authentication when `TURNSTILE_CQL_USERNAME` is set (with
    /// `TURNSTILE_CQL_PASSWORD`); `env` is the process environment in production.
    pub fn with_credentials_from(mut self, env: impl Fn(&str) -> Option<String>) -> Self {
        self.credentials =
            env(USERNAME_VAR)
                .filter(|u| !u.is_empty())
                .map(|username| CqlCredentials {
                    username,
                    password: env(PASSWORD_VAR),
                });
        self
    }

    /// Password authentication and TLS from the process environment (`TURNSTILE_CQL_USERNAME`,
    /// `TURNSTILE_CQL_TLS_*`), as `run`, `migrate` and `inspect` read them; a bad TLS setting
    /// is an error naming the variable and the fix.
    pub fn with_security_from(self, env: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let tls = CqlTls::from_env(&env)?;
        let mut cfg = self.with_credentials_from(&env);
        cfg.tls = tls;
        Ok(cfg)
    }

    /// Checks what ends up spliced into CQL text (keyspace, replication), since identifiers and
    /// DDL options cannot be bound as values.
    pub fn validate(&self) -> Result<(), StoreError> {
        let ks = &self.keyspace;
        if ks.is_empty()
            || ks.len() > 48
            || !ks.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(StoreError::rejected(format!(
                "keyspace {ks:?} must be 1-48 characters of [A-Za-z0-9_]"
            )));
        }
        let r = self.replication.trim();
        if !(r.starts_with('{') && r.ends_with('}')) || r.contains(';') || r.contains("--") {
            return Err(StoreError::rejected(format!(
                "replication {r:?} must be one CQL map literal, e.g. {DEFAULT_REPLICATION}"
            )));
        }
        if !(1..=MAX_RETENTION_DAYS).contains(&self.retention_days) {
            return Err(StoreError::rejected(format!(
                "retention_days {} must be 1..={MAX_RETENTION_DAYS} (and far above SESSION_TTL)",
                self.retention_days
            )));
        }
        if self.contact_points.is_empty() {
            return Err(StoreError::rejected("no contact points"));
        }
        if self.request_timeout_ms == 0 {
            return Err(StoreError::rejected("request_timeout_ms must be > 0"));
        }
        Ok(())
    }

    pub(super) fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.request_timeout_ms)
    }

    pub(super) fn retention_seconds(&self) -> u64 {
        u64::from(self.retention_days) * 86_400
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_come_from_the_environment_only_when_a_username_is_set() {
        let none = CqlConfig::default().with_credentials_from(|_| None);
        assert_eq!(none.credentials, None);
        let empty = CqlConfig::default().with_credentials_from(|_| Some(String::new()));
        assert_eq!(empty.credentials, None);
        let set = CqlConfig::default()
            .with_credentials_from(|k| (k == USERNAME_VAR).then(|| "turnstile".to_owned()));
        let credentials = set.credentials.expect("a user name is set");
        assert_eq!(credentials.username, "turnstile");
        let missing = credentials.password().expect_err("no password");
        assert!(missing.to_string().contains(PASSWORD_VAR), "{missing}");
        let both = CqlConfig::default().with_credentials_from(|k| Some(format!("{k}-value")));
        let credentials = both.credentials.expect("set");
        assert_eq!(
            credentials.password().ok(),
            Some("TURNSTILE_CQL_PASSWORD-value")
        );
        assert!(!format!("{credentials:?}").contains("PASSWORD-value"));
    }

    #[test]
    fn rejects_unsafe_keyspace_and_replication() {
        let bad_ks = CqlConfig {
            keyspace: "t; DROP KEYSPACE x".into(),
            ..CqlConfig::default()
        };
        assert!(bad_ks.validate().is_err());
        let bad_repl = CqlConfig {
            replication: "{'class':'SimpleStrategy'}; DROP TABLE x".into(),
            ..CqlConfig::default()
        };
        assert!(bad_repl.validate().is_err());
        assert!(CqlConfig::default().validate().is_ok());
    }
}
