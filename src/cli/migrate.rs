//! `turnstile migrate`: creates (or confirms) the checkpoint keyspace and tables from
//! `schemas/cql/*.cql`. Idempotent, so deploys can run it every time.
//!
//! Exit codes: 0 schema ready, 64 invalid arguments, 69 store unreachable, 1 the store refused a
//! statement (for example a malformed `--replication` map or missing permissions).

use crate::ports::StoreError;
use crate::store::cql::{
    CqlConfig, ScyllaCheckpointStore, DEFAULT_KEYSPACE, DEFAULT_REPLICATION, DEFAULT_RETENTION_DAYS,
};

pub const EXIT_OK: u8 = 0;
pub const EXIT_REJECTED: u8 = 1;
pub use super::EXIT_CONFIG;
pub const EXIT_UNAVAILABLE: u8 = 69;

/// Create the checkpoint keyspace and tables (idempotent).
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// CQL contact point(s), comma-separated.
    #[arg(long, env = "TURNSTILE_CQL_CONTACT", default_value = crate::store::cql::DEFAULT_CONTACT)]
    pub contact: String,
    /// Keyspace to create.
    #[arg(long, env = "TURNSTILE_KEYSPACE", default_value = DEFAULT_KEYSPACE)]
    pub keyspace: String,
    /// Row retention in days (the checkpoints table's default TTL). Must stay far above
    /// SESSION_TTL (ST-6); every write refreshes it.
    #[arg(long, default_value_t = DEFAULT_RETENTION_DAYS)]
    pub retention_days: u32,
    /// CQL replication map for a new keyspace. Production: NetworkTopologyStrategy with RF 3,
    /// e.g. "{'class':'NetworkTopologyStrategy','dc1':3}". An existing keyspace is left as is.
    #[arg(long, default_value = DEFAULT_REPLICATION)]
    pub replication: String,
    /// Local datacenter, preferred by the driver.
    #[arg(long)]
    pub local_dc: Option<String>,
}

pub async fn run(args: Args) -> u8 {
    let cfg = CqlConfig {
        contact_points: split_contacts(&args.contact),
        keyspace: args.keyspace,
        retention_days: args.retention_days,
        replication: args.replication,
        local_dc: args.local_dc,
        ..CqlConfig::default()
    }
    .with_security_from(|k| std::env::var(k).ok());
    let cfg = match cfg {
        Ok(c) => c,
        Err(e) => {
            eprintln!("turnstile migrate: {e}");
            return EXIT_CONFIG;
        }
    };
    // Argument mistakes are told apart from store failures before any connection is tried.
    if let Err(e) = cfg.validate() {
        eprintln!("turnstile migrate: {e}");
        return EXIT_CONFIG;
    }
    match ScyllaCheckpointStore::migrate(&cfg).await {
        Ok(()) => {
            println!(
                "schema ready: keyspace {} (checkpoints retention {} days, replication {})",
                cfg.keyspace,
                cfg.retention_days,
                cfg.replication.trim()
            );
            EXIT_OK
        }
        Err(e) => report_store_error("migrate", &cfg, &e),
    }
}

/// `host:port[,host:port…]` as a list, ignoring blanks.
pub(crate) fn split_contacts(contact: &str) -> Vec<String> {
    contact
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// One clear line on stderr and the matching exit code, shared with `inspect`.
pub(crate) fn report_store_error(command: &str, cfg: &CqlConfig, e: &StoreError) -> u8 {
    match e {
        StoreError::Unavailable { .. } => {
            eprintln!(
                "turnstile {command}: checkpoint store unreachable at {}: {e} \
                 (fix: start it — locally `bash scripts/services.sh up` — or pass --contact)",
                cfg.contact_points.join(",")
            );
            EXIT_UNAVAILABLE
        }
        StoreError::Rejected { .. } | StoreError::Fenced => {
            eprintln!("turnstile {command}: {e}");
            EXIT_REJECTED
        }
    }
}
