//! The per-conversation state (`AgentState`, ST-1), its projections (ST-2) and its migrations (ST-4).

use std::collections::BTreeMap;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::domain::transaction::{
    EvidenceRecord, PreValidationRecord, Transaction, TransactionStatus,
};

/// The version this release writes. Older versions are migrated on load (see [`decode`]).
pub const SCHEMA_VERSION: u32 = 2;

/// History entries kept in the checkpoint (user and assistant lines together).
pub const HISTORY_MAX: usize = 20;

/// Applied turn ids remembered for redelivery detection (EV-1). Kafka offsets cover older ones.
pub const APPLIED_TURN_IDS_MAX: usize = 64;

/// `next_state` values of the session-control contract (SC-5, SC-6).
pub const NEXT_STATE_HUMAN_HANDOFF: &str = "HUMAN_HANDOFF_REQUESTED";
pub const NEXT_STATE_SESSION_ENDED: &str = "SESSION_ENDED";

/// Who said a history line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Speaker {
    User,
    Assistant,
}

/// One line of the bounded conversation history the classifier may see (SC-8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEntry {
    pub role: Speaker,
    pub text: String,
    pub turn_id: String,
    pub at_ms: i64,
}

/// A list shared between copies of a state until one of them changes it. The engine replays a
/// turn from its base state once per request, so cloning the history and the applied turn ids
/// (up to 84 strings) on every replay cost more than the decision itself. Serialised as the
/// plain JSON array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedList<T>(Arc<Vec<T>>);

impl<T> SharedList<T> {
    pub fn new() -> Self {
        SharedList(Arc::new(Vec::new()))
    }
}

impl<T: Clone> SharedList<T> {
    /// The list to change: copied first only if another state still shares it.
    pub fn make_mut(&mut self) -> &mut Vec<T> {
        Arc::make_mut(&mut self.0)
    }
}

impl<T> Default for SharedList<T> {
    fn default() -> Self {
        SharedList::new()
    }
}

impl<T> Deref for SharedList<T> {
    type Target = Vec<T>;
    fn deref(&self) -> &Vec<T> {
        &self.0
    }
}

impl<T> From<Vec<T>> for SharedList<T> {
    fn from(v: Vec<T>) -> Self {
        SharedList(Arc::new(v))
    }
}

impl<T: PartialEq> PartialEq<Vec<T>> for SharedList<T> {
    fn eq(&self, other: &Vec<T>) -> bool {
        *self.0 == *other
    }
}

impl<T: Serialize> Serialize for SharedList<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for SharedList<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::deserialize(deserializer).map(SharedList::from)
    }
}

/// The seed's `selected_tool_call` / `pending_tool_call` shape: compatibility projections only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub name: String,
    pub arguments: BTreeMap<String, Value>,
}

/// Everything a checkpoint holds for one conversation (ST-1). JSON names are the seed's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentState {
    pub schema_version: u32,
    pub active_transaction: Option<Transaction>,
    pub last_transaction: Option<Transaction>,
    pub transaction_status: Option<TransactionStatus>,
    pub missing_parameters: Vec<String>,
    pub selected_tool_call: Option<ToolCall>,
    pub pending_tool_call: Option<ToolCall>,
    pub next_state: Option<String>,
    pub transaction_pre_validation: Vec<PreValidationRecord>,
    pub transaction_evidence: Vec<EvidenceRecord>,
    pub confirmation_required: bool,
    pub confirmation_received: bool,
    pub active_agent: Option<String>,
    pub human_handoff_requested: bool,
    pub session_ended: bool,
    pub history: SharedList<HistoryEntry>,
    pub applied_turn_ids: SharedList<String>,
    pub last_turn_at_ms: Option<i64>,
}

impl Default for AgentState {
    fn default() -> Self {
        AgentState {
            schema_version: SCHEMA_VERSION,
            active_transaction: None,
            last_transaction: None,
            transaction_status: None,
            missing_parameters: Vec::new(),
            selected_tool_call: None,
            pending_tool_call: None,
            next_state: None,
            transaction_pre_validation: Vec::new(),
            transaction_evidence: Vec::new(),
            confirmation_required: false,
            confirmation_received: false,
            active_agent: None,
            human_handoff_requested: false,
            session_ended: false,
            history: SharedList::new(),
            applied_turn_ids: SharedList::new(),
            last_turn_at_ms: None,
        }
    }
}

impl AgentState {
    /// Recomputes every projection from the canonical transaction (ST-2): from
    /// `active_transaction` while one is in flight, else from `last_transaction`.
    pub fn recompute_projections(&mut self) {
        let source = self
            .active_transaction
            .as_ref()
            .or(self.last_transaction.as_ref());
        self.transaction_status = source.map(|t| t.status);
        self.transaction_pre_validation =
            source.map(|t| t.pre_validation.clone()).unwrap_or_default();
        self.transaction_evidence = source.map(|t| t.evidence.clone()).unwrap_or_default();
        self.confirmation_required = source.is_some_and(|t| t.confirmation_required);
        self.confirmation_received = source.is_some_and(|t| t.confirmation_received);
        let active = self.active_transaction.as_ref();
        self.missing_parameters = active
            .map(|t| t.missing_parameters.clone())
            .unwrap_or_default();
        self.selected_tool_call = active.map(|t| ToolCall {
            name: t.tool.clone(),
            arguments: t.arguments.clone(),
        });
        self.pending_tool_call = active
            .filter(|t| {
                matches!(
                    t.status,
                    TransactionStatus::AwaitingConfirmation | TransactionStatus::Executing
                )
            })
            .map(|t| ToolCall {
                name: t.tool.clone(),
                arguments: t.arguments.clone(),
            });
        self.next_state = if self.session_ended {
            Some(NEXT_STATE_SESSION_ENDED.to_owned())
        } else if self.human_handoff_requested {
            Some(NEXT_STATE_HUMAN_HANDOFF.to_owned())
        } else {
            // Keeps the domain agent that owns the collection/confirmation (seed §3).
            active.map(|t| t.agent.clone())
        };
    }

    pub fn push_history(&mut self, entry: HistoryEntry) {
        let history = self.history.make_mut();
        history.push(entry);
        if history.len() > HISTORY_MAX {
            let excess = history.len() - HISTORY_MAX;
            history.drain(..excess);
        }
    }

    pub fn has_applied(&self, turn_id: &str) -> bool {
        self.applied_turn_ids.iter().any(|t| t == turn_id)
    }

    pub fn mark_applied(&mut self, turn_id: &str) {
        let applied = self.applied_turn_ids.make_mut();
        applied.push(turn_id.to_owned());
        if applied.len() > APPLIED_TURN_IDS_MAX {
            let excess = applied.len() - APPLIED_TURN_IDS_MAX;
            applied.drain(..excess);
        }
    }
}

/// Why a stored checkpoint could not be turned into an [`AgentState`] (ST-4: reported, never
/// replaced by an empty state).
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum DecodeStateError {
    #[error("checkpoint is not valid JSON: {0}")]
    Json(String),
    #[error("checkpoint has schema_version {found}, newer than this release's {SCHEMA_VERSION}: upgrade the worker")]
    FromTheFuture { found: u32 },
    #[error("checkpoint (schema_version {version}) does not match its schema: {detail}")]
    Shape { version: u32, detail: String },
}

impl DecodeStateError {
    /// A bounded label for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            DecodeStateError::Json(_) => "invalid_json",
            DecodeStateError::FromTheFuture { .. } => "newer_schema",
            DecodeStateError::Shape { .. } => "schema_mismatch",
        }
    }
}

/// Encodes the state as stored in a checkpoint.
pub fn encode(state: &AgentState) -> Vec<u8> {
    // Serialising plain data with string keys cannot fail.
    serde_json::to_vec(state).unwrap_or_default()
}

/// Decodes a stored checkpoint, migrating older schema versions (ST-4).
///
/// Version 1 is the seed-era layout a Python host wrote: the seed's fields only, no
/// `schema_version`, history as `{role, content}`, no applied turn ids. Version 2 is this release's.
pub fn decode(bytes: &[u8]) -> Result<AgentState, DecodeStateError> {
    // Fast path: a checkpoint of this release decodes straight into the struct.
    if let Ok(state) = serde_json::from_slice::<AgentState>(bytes) {
        if state.schema_version == SCHEMA_VERSION {
            return Ok(state);
        }
    }
    let mut value: Value =
        serde_json::from_slice(bytes).map_err(|e| DecodeStateError::Json(e.to_string()))?;
    let version = value
        .get("schema_version")
        .and_then(Value::as_u64)
        .map_or(1, |v| v as u32);
    if version > SCHEMA_VERSION {
        return Err(DecodeStateError::FromTheFuture { found: version });
    }
    if version < 2 {
        migrate_v1_to_v2(&mut value);
    }
    complete_seed_transactions(&mut value);
    let mut state: AgentState =
        serde_json::from_value(value).map_err(|e| DecodeStateError::Shape {
            version,
            detail: e.to_string(),
        })?;
    state.schema_version = SCHEMA_VERSION;
    Ok(state)
}

/// v1 → v2: add the fields v1 did not have, convert history, keep every seed field as it was.
fn migrate_v1_to_v2(value: &mut Value) {
    let Some(obj) = value.as_object_mut() else {
        return;
    };
    obj.insert("schema_version".into(), Value::from(2));
    let defaults = serde_json::to_value(AgentState::default()).unwrap_or(Value::Null);
    if let Some(defaults) = defaults.as_object() {
        for (k, v) in defaults {
            obj.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    // The seed stored transactions as free dicts; empty dicts meant "none".
    for key in ["active_transaction", "last_transaction"] {
        if obj
            .get(key)
            .is_some_and(|v| v.as_object().is_some_and(|o| o.is_empty()))
        {
            obj.insert(key.into(), Value::Null);
        }
    }
    if let Some(Value::Array(history)) = obj.get_mut("history") {
        for entry in history.iter_mut() {
            if let Some(e) = entry.as_object_mut() {
                if let Some(content) = e.remove("content") {
                    e.entry("text").or_insert(content);
                }
                if e.get("role").and_then(Value::as_str) == Some("assistant") {
                    e.insert("role".into(), Value::from("assistant"));
                }
                e.entry("turn_id").or_insert_with(|| Value::from(""));
                e.entry("at_ms").or_insert_with(|| Value::from(0));
            }
        }
    }
}

/// ST-4: a transaction in the seed's own shape (tool, status, arguments, missing parameters,
/// confirmation flags; no id, agent or times) gets what this release needs, derived only from
/// what is stored, so decoding the same bytes always yields the same transaction (and EV-4 key).
/// The agent is left empty: the engine fills it from the configured tool (a pure decode has no
/// catalog). Fields it already has are never touched.
fn complete_seed_transactions(value: &mut Value) {
    let Some(obj) = value.as_object_mut() else {
        return;
    };
    let top_status = obj.get("transaction_status").cloned();
    let top_missing = obj.get("missing_parameters").cloned();
    let top_required = obj.get("confirmation_required").cloned();
    let top_received = obj.get("confirmation_received").cloned();
    let at = obj
        .get("last_turn_at_ms")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    for key in ["active_transaction", "last_transaction"] {
        let Some(tx) = obj.get_mut(key).and_then(Value::as_object_mut) else {
            continue;
        };
        if tx.contains_key("id") && tx.contains_key("agent") {
            continue;
        }
        // The seed's hosts wrote the tool under `tool` or `tool_name`.
        if !tx.contains_key("tool") {
            if let Some(name) = tx.remove("tool_name") {
                tx.insert("tool".into(), name);
            }
        }
        if key == "active_transaction" {
            // The seed kept these beside the transaction; they describe the active one.
            for (field, top) in [
                ("status", &top_status),
                ("missing_parameters", &top_missing),
                ("confirmation_required", &top_required),
                ("confirmation_received", &top_received),
            ] {
                if let Some(v) = top.as_ref().filter(|v| !v.is_null()) {
                    tx.entry(field).or_insert_with(|| v.clone());
                }
            }
        }
        let content = serde_json::to_string(&*tx).unwrap_or_default();
        let id = uuid::Uuid::new_v5(&SEED_TRANSACTION_NAMESPACE, content.as_bytes());
        tx.entry("id")
            .or_insert_with(|| Value::from(id.to_string()));
        tx.entry("agent").or_insert_with(|| Value::from(""));
        tx.entry("arguments")
            .or_insert_with(|| Value::Object(Default::default()));
        tx.entry("missing_parameters")
            .or_insert_with(|| Value::Array(Vec::new()));
        tx.entry("confirmation_required")
            .or_insert(Value::Bool(false));
        tx.entry("confirmation_received")
            .or_insert(Value::Bool(false));
        tx.entry("opened_at_ms").or_insert_with(|| Value::from(at));
        tx.entry("updated_at_ms").or_insert_with(|| Value::from(at));
    }
}

/// Namespace of the ids given to seed-shaped transactions on load (ST-4, EV-4).
const SEED_TRANSACTION_NAMESPACE: uuid::Uuid =
    uuid::Uuid::from_u128(0x2d4c_51a8_0e7b_4f3c_8a61_5b9e_c0d2_7f14);

#[cfg(test)]
mod tests {
    use super::*;

    // ST-4: a seed-shaped active transaction (the seed's fields only) loads, with a stable id.
    #[test]
    fn seed_shaped_transaction_migrates_with_a_stable_id() {
        let seed = br#"{
            "active_transaction": {"tool":"retail_address_change",
                "arguments":{"order_id":"PED-1001"},
                "confirmation_required":true,"confirmation_received":false},
            "last_transaction": {"tool_name":"retail_order_tracking","status":"COMPLETED",
                "arguments":{"order_id":"PED-7"}},
            "transaction_status": "COLLECTING_PARAMETERS",
            "missing_parameters": ["zip_code","house_number"],
            "history": [{"role":"user","content":"change my address"}]
        }"#;
        let state = decode(seed).unwrap();
        let tx = state.active_transaction.as_ref().unwrap();
        assert_eq!(tx.tool, "retail_address_change");
        assert_eq!(tx.status, TransactionStatus::CollectingParameters);
        assert_eq!(tx.missing_parameters, vec!["zip_code", "house_number"]);
        assert_eq!(tx.arguments["order_id"], "PED-1001");
        assert!(
            tx.agent.is_empty(),
            "the engine fills the agent from the catalog"
        );
        assert_eq!(tx.id.len(), 36);
        let last = state.last_transaction.as_ref().unwrap();
        assert_eq!(last.tool, "retail_order_tracking");
        assert_eq!(last.status, TransactionStatus::Completed);
        assert_ne!(last.id, tx.id);
        // Same bytes, same ids: the idempotency key (EV-4) survives a re-decode.
        assert_eq!(decode(seed).unwrap(), state);
        // A seed transaction without a status anywhere is undecodable, never guessed.
        let no_status = br#"{"active_transaction": {"tool":"x","arguments":{}}}"#;
        assert_eq!(decode(no_status).unwrap_err().reason(), "schema_mismatch");
    }

    // ST-1: every field the contract names is in the checkpoint, with the seed's names.
    #[test]
    fn checkpoint_has_every_st1_field() {
        let json = serde_json::to_value(AgentState::default()).unwrap();
        for field in [
            "active_transaction",
            "last_transaction",
            "transaction_status",
            "missing_parameters",
            "selected_tool_call",
            "pending_tool_call",
            "next_state",
            "transaction_pre_validation",
            "transaction_evidence",
            "confirmation_required",
            "confirmation_received",
            "active_agent",
            "human_handoff_requested",
            "session_ended",
            "history",
            "applied_turn_ids",
            "last_turn_at_ms",
            "schema_version",
        ] {
            assert!(json.get(field).is_some(), "missing {field}");
        }
    }

    // ST-4: a v1 (seed-era) checkpoint loads and keeps its transaction.
    #[test]
    fn v1_checkpoint_migrates() {
        let v1 = br#"{
            "active_transaction": {"id":"tx1","agent":"retail","tool":"retail_order_cancel",
                "status":"COLLECTING_PARAMETERS","arguments":{},"missing_parameters":["order_id"],
                "confirmation_required":true,"confirmation_received":false,
                "opened_at_ms":1,"updated_at_ms":1},
            "last_transaction": {},
            "transaction_status": "COLLECTING_PARAMETERS",
            "missing_parameters": ["order_id"],
            "history": [{"role":"user","content":"cancel my order"}]
        }"#;
        let state = decode(v1).unwrap();
        assert_eq!(state.schema_version, SCHEMA_VERSION);
        assert_eq!(
            state.active_transaction.as_ref().unwrap().tool,
            "retail_order_cancel"
        );
        assert!(state.last_transaction.is_none());
        assert_eq!(state.history[0].text, "cancel my order");
    }

    // ST-4: undecodable and future checkpoints are errors, never an empty state.
    #[test]
    fn bad_checkpoints_are_errors() {
        assert_eq!(decode(b"{not json").unwrap_err().reason(), "invalid_json");
        assert_eq!(
            decode(br#"{"schema_version": 99}"#).unwrap_err(),
            DecodeStateError::FromTheFuture { found: 99 }
        );
        assert_eq!(
            decode(br#"{"schema_version": 2, "history": 5}"#)
                .unwrap_err()
                .reason(),
            "schema_mismatch"
        );
    }

    #[test]
    fn encode_decode_round_trips() {
        let mut s = AgentState {
            active_agent: Some("retail".into()),
            ..Default::default()
        };
        s.mark_applied("t1");
        assert_eq!(decode(&encode(&s)).unwrap(), s);
    }
}
