//! `turnstile inspect TENANT AGENT SESSION`: prints one stored checkpoint as pretty JSON, for
//! operators looking at a conversation (including one whose checkpoint no longer decodes, ST-4).
//!
//! ```json
//! {"state": {…AgentState…}, "in_flight": {…} | null, "applied": {"partition": 3, "offset": 41} | null,
//!  "outbox": [ … ] | null, "epoch": 7}
//! ```
//! A blob that is not valid JSON (or a state that does not decode) is shown as
//! `{"undecodable": "<why>", "base64": "<bytes>"}` rather than hidden.
//!
//! Exit codes: 0 printed, 1 no checkpoint for the identity (or the store refused), 64 invalid
//! arguments, 69 store unreachable.

use base64::Engine as _;
use serde_json::{json, Value};

use crate::cli::migrate::{report_store_error, split_contacts, EXIT_CONFIG, EXIT_OK};
use crate::domain::state;
use crate::domain::turn::Identity;
use crate::store::cql::{CqlConfig, ScyllaCheckpointStore, StoredRow, DEFAULT_KEYSPACE};

pub const EXIT_ABSENT: u8 = 1;

/// Print the stored checkpoint of one conversation as JSON.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    pub tenant: String,
    pub agent: String,
    pub session: String,
    /// CQL contact point(s), comma-separated.
    #[arg(long, env = "TURNSTILE_CQL_CONTACT", default_value = crate::store::cql::DEFAULT_CONTACT)]
    pub contact: String,
    /// Keyspace holding the checkpoints.
    #[arg(long, env = "TURNSTILE_KEYSPACE", default_value = DEFAULT_KEYSPACE)]
    pub keyspace: String,
}

pub async fn run(args: Args) -> u8 {
    let cfg = CqlConfig {
        contact_points: split_contacts(&args.contact),
        keyspace: args.keyspace,
        ..CqlConfig::default()
    }
    .with_security_from(|k| std::env::var(k).ok());
    let cfg = match cfg {
        Ok(c) => c,
        Err(e) => {
            eprintln!("turnstile inspect: {e}");
            return EXIT_CONFIG;
        }
    };
    if let Err(e) = cfg.validate() {
        eprintln!("turnstile inspect: {e}");
        return EXIT_CONFIG;
    }
    let identity = Identity::new(&args.tenant, &args.agent, &args.session);
    let store = match ScyllaCheckpointStore::connect(&cfg).await {
        Ok(s) => s,
        Err(e) => return report_store_error("inspect", &cfg, &e),
    };
    match store.load_row(&identity).await {
        Ok(Some(row)) => {
            let text = serde_json::to_string_pretty(&render(&row))
                .unwrap_or_else(|e| format!("{{\"error\": \"cannot render: {e}\"}}"));
            println!("{text}");
            EXIT_OK
        }
        Ok(None) => {
            eprintln!("no checkpoint for {}", identity.key());
            EXIT_ABSENT
        }
        Err(e) => report_store_error("inspect", &cfg, &e),
    }
}

/// The row as JSON; decoding failures are shown, never dropped.
pub fn render(row: &StoredRow) -> Value {
    let state = match state::decode(&row.state) {
        Ok(s) => {
            serde_json::to_value(&s).unwrap_or_else(|e| undecodable(&row.state, &e.to_string()))
        }
        Err(e) => undecodable(&row.state, &e.to_string()),
    };
    json!({
        "state": state,
        "in_flight": row.in_flight.as_deref().map(json_blob),
        "applied": row.applied.map(|(partition, offset)| json!({"partition": partition, "offset": offset})),
        "outbox": row.outbox.as_deref().map(json_blob),
        "epoch": row.epoch,
    })
}

fn json_blob(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap_or_else(|e| undecodable(bytes, &e.to_string()))
}

fn undecodable(bytes: &[u8], why: &str) -> Value {
    json!({
        "undecodable": why,
        "base64": base64::engine::general_purpose::STANDARD.encode(bytes),
    })
}
