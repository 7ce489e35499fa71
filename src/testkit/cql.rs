//! The local test node of `scripts/services.sh` as tests, the harnesses and the benches reach it.

use crate::store::cql::{CqlConfig, DEFAULT_CONTACT};

/// `CQL_CONTACT` (set by `scripts/services.sh env`), else the default local node.
pub fn contact() -> String {
    std::env::var("CQL_CONTACT").unwrap_or_else(|_| DEFAULT_CONTACT.to_owned())
}

/// A client configuration for `keyspace` on the test node.
pub fn config(keyspace: &str) -> CqlConfig {
    CqlConfig {
        contact_points: contact().split(',').map(|s| s.trim().to_owned()).collect(),
        keyspace: keyspace.to_owned(),
        // The shared 2-core test box stalls now and then; production keeps the 2 s default.
        request_timeout_ms: 10_000,
        ..CqlConfig::default()
    }
}
