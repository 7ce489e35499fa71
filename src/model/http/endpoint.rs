//! One resolved model profile: where its calls go (the chat-completions URL, parsed once), its
//! headers and its (redacted) API key; and the pooled HTTP client every profile shares.

use std::fmt;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use super::{ModelConfigError, CHAT_COMPLETIONS_PATH};
use crate::config::profiles::ModelProfile;

/// Where a profile's calls go, or why they cannot go anywhere.
#[derive(Clone)]
pub(super) enum Target {
    /// Parsed once, when the profile is read, not on every call (it is on every turn's path).
    Url(reqwest::Url),
    Missing,
    Invalid {
        url: String,
        reason: String,
    },
}

pub(super) fn resolve_target(base: Option<&str>) -> Target {
    let Some(base) = base.map(str::trim).filter(|b| !b.is_empty()) else {
        return Target::Missing;
    };
    let invalid = |reason: String| Target::Invalid {
        url: base.to_owned(),
        reason,
    };
    match reqwest::Url::parse(base) {
        Ok(u) if !matches!(u.scheme(), "http" | "https") => {
            invalid(format!("scheme `{}` is not http or https", u.scheme()))
        }
        Ok(u) if u.host_str().is_none_or(str::is_empty) => invalid("it has no host".into()),
        Ok(_) => {
            let full = format!("{}{CHAT_COMPLETIONS_PATH}", base.trim_end_matches('/'));
            match reqwest::Url::parse(&full) {
                Ok(u) => Target::Url(u),
                Err(e) => invalid(e.to_string()),
            }
        }
        Err(e) => invalid(e.to_string()),
    }
}

/// One resolved profile: its settings, target URL, headers and (redacted) credentials.
#[derive(Clone)]
pub(super) struct Endpoint {
    pub(super) profile: ModelProfile,
    pub(super) target: Target,
    /// `Bearer <key>`, marked sensitive.
    pub(super) auth: Option<HeaderValue>,
    pub(super) headers: HeaderMap,
    pub(super) timeout: Duration,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let target = match &self.target {
            Target::Url(u) => u.to_string(),
            Target::Missing => "<no base_url>".into(),
            Target::Invalid { url, .. } => format!("<invalid: {url}>"),
        };
        f.debug_struct("Endpoint")
            .field("profile", &self.profile.name)
            .field("provider", &self.profile.provider.as_str())
            .field("model", &self.profile.model)
            .field("url", &target)
            .field("api_key_env", &self.profile.api_key_env)
            .field("api_key", &self.auth.as_ref().map(|_| "<redacted>"))
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl Endpoint {
    pub(super) fn new(
        profile: &ModelProfile,
        env: &impl Fn(&str) -> Option<String>,
    ) -> Result<Endpoint, ModelConfigError> {
        let auth = match &profile.api_key_env {
            None => None,
            Some(var) => {
                let key = env(var)
                    .map(|k| k.trim().to_owned())
                    .filter(|k| !k.is_empty())
                    .ok_or_else(|| ModelConfigError::MissingApiKey {
                        profile: profile.name.clone(),
                        var: var.clone(),
                    })?;
                let mut value = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| {
                    ModelConfigError::InvalidApiKey {
                        profile: profile.name.clone(),
                        var: var.clone(),
                    }
                })?;
                value.set_sensitive(true);
                Some(value)
            }
        };
        let mut headers = HeaderMap::new();
        for (name, value) in &profile.headers {
            let invalid = || ModelConfigError::InvalidHeader {
                profile: profile.name.clone(),
                header: name.clone(),
            };
            let name = HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| invalid())?;
            let value = HeaderValue::from_str(value).map_err(|_| invalid())?;
            headers.insert(name, value);
        }
        // Profiles validation guarantees a positive finite number; clamp the rest.
        let timeout = Duration::try_from_secs_f64(profile.timeout_seconds)
            .unwrap_or(Duration::from_secs(3600))
            .max(Duration::from_millis(1));
        Ok(Endpoint {
            profile: profile.clone(),
            target: resolve_target(profile.base_url.as_deref()),
            auth,
            headers,
            timeout,
        })
    }

    pub(super) fn check(&self) -> Result<(), ModelConfigError> {
        match &self.target {
            Target::Url(_) => Ok(()),
            Target::Missing => Err(ModelConfigError::MissingBaseUrl {
                profile: self.profile.name.clone(),
            }),
            Target::Invalid { url, reason } => Err(ModelConfigError::InvalidBaseUrl {
                profile: self.profile.name.clone(),
                url: url.clone(),
                reason: reason.clone(),
            }),
        }
    }
}

pub(super) fn http_client(max_idle: usize) -> Result<reqwest::Client, ModelConfigError> {
    // One attempt per call (see the module doc).
    crate::http_client::builder(Duration::from_secs(60))
        .pool_max_idle_per_host(max_idle)
        .build()
        .map_err(ModelConfigError::Client)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_resolve_or_say_why() {
        assert!(matches!(
            resolve_target(Some("https://inference.generativeai.sa-saopaulo-1.oci.oraclecloud.com/openai/v1/")),
            Target::Url(u) if u.as_str() == "https://inference.generativeai.sa-saopaulo-1.oci.oraclecloud.com/openai/v1/chat/completions"
        ));
        assert!(matches!(resolve_target(None), Target::Missing));
        assert!(matches!(resolve_target(Some("  ")), Target::Missing));
        assert!(matches!(
            resolve_target(Some("ftp://x")),
            Target::Invalid { .. }
        ));
        assert!(matches!(
            resolve_target(Some("not a url")),
            Target::Invalid { .. }
        ));
    }
}
