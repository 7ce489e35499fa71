//! CQL over TLS (the driver's OpenSSL backend, the same system OpenSSL librdkafka links):
//! `TURNSTILE_CQL_TLS_CA_FILE` turns it on; a client certificate and key for mutual TLS and
//! the node-address check are optional. See `docs/store.md` "TLS".

use std::path::{Path, PathBuf};

use openssl::ssl::{SslConnector, SslFiletype, SslMethod, SslVerifyMode};
use scylla::client::session::TlsContext;

use super::errors::refused;
use super::StoreError;

pub const TLS_CA_FILE_VAR: &str = "TURNSTILE_CQL_TLS_CA_FILE";
pub const TLS_CERT_FILE_VAR: &str = "TURNSTILE_CQL_TLS_CERT_FILE";
pub const TLS_KEY_FILE_VAR: &str = "TURNSTILE_CQL_TLS_KEY_FILE";
pub const TLS_VERIFY_HOSTNAME_VAR: &str = "TURNSTILE_CQL_TLS_VERIFY_HOSTNAME";

/// TLS to the CQL nodes. The server certificate is always verified against `ca_file`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CqlTls {
    /// PEM: the CA (or bundle) that signed the nodes' certificates.
    pub ca_file: PathBuf,
    /// PEM client certificate and key, for nodes that require client authentication.
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    /// Check that each node's certificate names the address the driver connects to (the
    /// driver connects by IP: the certificates need IP SANs). `false` still verifies the
    /// chain, only not the name: for clusters whose node certificates carry no IP SANs.
    pub verify_hostname: bool,
}

impl CqlTls {
    /// Reads the `TURNSTILE_CQL_TLS_*` variables: `None` when no CA file is set (plaintext),
    /// an error naming the variable and the fix for a half or malformed setting.
    pub fn from_env(env: impl Fn(&str) -> Option<String>) -> Result<Option<CqlTls>, String> {
        let get = |k: &str| {
            env(k)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let cert = get(TLS_CERT_FILE_VAR).map(PathBuf::from);
        let key = get(TLS_KEY_FILE_VAR).map(PathBuf::from);
        let verify = match get(TLS_VERIFY_HOSTNAME_VAR).as_deref() {
            None | Some("true" | "1" | "yes") => true,
            Some("false" | "0" | "no") => false,
            Some(other) => {
                return Err(format!(
                    "{TLS_VERIFY_HOSTNAME_VAR}: `{other}` is not true or false (fix: set it to true, or false to skip only the node-address check)"
                ))
            }
        };
        let Some(ca) = get(TLS_CA_FILE_VAR) else {
            if cert.is_some() || key.is_some() {
                return Err(format!(
                    "{TLS_CERT_FILE_VAR}/{TLS_KEY_FILE_VAR} are set but {TLS_CA_FILE_VAR} is not (fix: set {TLS_CA_FILE_VAR} to the PEM CA of the nodes' certificates; TLS is on only with it)"
                ));
            }
            return Ok(None);
        };
        if cert.is_some() != key.is_some() {
            return Err(format!(
                "{TLS_CERT_FILE_VAR} and {TLS_KEY_FILE_VAR} go together (fix: set both for mutual TLS, or neither)"
            ));
        }
        Ok(Some(CqlTls {
            ca_file: PathBuf::from(ca),
            cert_file: cert,
            key_file: key,
            verify_hostname: verify,
        }))
    }

    /// The driver's TLS context; a missing or unreadable file is a `Rejected` error naming the
    /// variable, checked before any connection is tried.
    pub fn context(&self) -> Result<TlsContext, StoreError> {
        let bad = |var: &str, path: &Path, e: &dyn std::fmt::Display| {
            StoreError::rejected(format!(
                "{var} {}: {e} (fix: point {var} at a readable PEM file)",
                path.display()
            ))
        };
        let mut builder =
            SslConnector::builder(SslMethod::tls_client()).map_err(refused("CQL TLS"))?;
        if !self.ca_file.is_file() {
            return Err(bad(TLS_CA_FILE_VAR, &self.ca_file, &"no such file"));
        }
        builder
            .set_ca_file(&self.ca_file)
            .map_err(|e| bad(TLS_CA_FILE_VAR, &self.ca_file, &e))?;
        if let (Some(cert), Some(key)) = (&self.cert_file, &self.key_file) {
            builder
                .set_certificate_chain_file(cert)
                .map_err(|e| bad(TLS_CERT_FILE_VAR, cert, &e))?;
            builder
                .set_private_key_file(key, SslFiletype::PEM)
                .map_err(|e| bad(TLS_KEY_FILE_VAR, key, &e))?;
            builder.check_private_key().map_err(|e| {
                StoreError::rejected(format!(
                    "{TLS_KEY_FILE_VAR} is not the key of {TLS_CERT_FILE_VAR}: {e} (fix: give the matching pair)"
                ))
            })?;
        }
        if !self.verify_hostname {
            // The chain is still verified; only the driver's node-IP check is waived.
            builder.set_verify_callback(SslVerifyMode::PEER, |ok, ctx| {
                ok || ctx.error().as_raw() == X509_V_ERR_IP_ADDRESS_MISMATCH
            });
        }
        Ok(TlsContext::from(builder))
    }
}

/// `X509_V_ERR_IP_ADDRESS_MISMATCH` (OpenSSL's x509_vfy.h; stable since 1.0.2).
const X509_V_ERR_IP_ADDRESS_MISMATCH: i32 = 64;

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn tls_is_off_without_a_ca_and_on_with_one() {
        assert_eq!(CqlTls::from_env(env(&[])).unwrap(), None);
        let on = CqlTls::from_env(env(&[(TLS_CA_FILE_VAR, "/etc/ca.pem")]))
            .unwrap()
            .unwrap();
        assert_eq!(on.ca_file, PathBuf::from("/etc/ca.pem"));
        assert!(on.verify_hostname);
        let off = CqlTls::from_env(env(&[
            (TLS_CA_FILE_VAR, "/etc/ca.pem"),
            (TLS_VERIFY_HOSTNAME_VAR, "false"),
        ]))
        .unwrap()
        .unwrap();
        assert!(!off.verify_hostname);
    }

    #[test]
    fn half_settings_are_refused_with_the_fix() {
        let e = CqlTls::from_env(env(&[(TLS_CERT_FILE_VAR, "/c.pem")])).unwrap_err();
        assert!(e.contains(TLS_CA_FILE_VAR) && e.contains("fix:"), "{e}");
        let e = CqlTls::from_env(env(&[
            (TLS_CA_FILE_VAR, "/ca.pem"),
            (TLS_KEY_FILE_VAR, "/k.pem"),
        ]))
        .unwrap_err();
        assert!(e.contains("go together"), "{e}");
        let e = CqlTls::from_env(env(&[
            (TLS_CA_FILE_VAR, "/ca.pem"),
            (TLS_VERIFY_HOSTNAME_VAR, "maybe"),
        ]))
        .unwrap_err();
        assert!(e.contains(TLS_VERIFY_HOSTNAME_VAR), "{e}");
    }

    #[test]
    fn a_missing_ca_file_is_a_config_error_naming_the_variable() {
        let tls = CqlTls {
            ca_file: PathBuf::from("/nonexistent/ca.pem"),
            cert_file: None,
            key_file: None,
            verify_hostname: true,
        };
        let e = tls.context().err().expect("refused").to_string();
        assert!(e.contains(TLS_CA_FILE_VAR) && e.contains("fix:"), "{e}");
    }
}
