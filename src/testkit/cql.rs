//! The local test node of `scripts/services.sh` as tests, the harnesses and the benches reach it.

use crate::ports::StoreError;
use crate::store::cql::{CqlConfig, ScyllaCheckpointStore, DEFAULT_CONTACT};

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

/// A store on `keyspace` of the nodes at `contact` (comma-separated), the keyspace created or
/// migrated first; the driver's default timeouts (the harnesses run the worker's own).
pub async fn migrated_store(
    contact: &str,
    keyspace: &str,
) -> Result<ScyllaCheckpointStore, StoreError> {
    let cql = CqlConfig {
        contact_points: contact.split(',').map(|s| s.trim().to_owned()).collect(),
        keyspace: keyspace.to_owned(),
        ..CqlConfig::default()
    };
    ScyllaCheckpointStore::migrate(&cql).await?;
    ScyllaCheckpointStore::connect(&cql).await
}
