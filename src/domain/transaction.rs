//! One attempt to run one tool for one conversation, and its lifecycle table (LC-1..LC-3).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `transaction_status` values, with the seed's names on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TransactionStatus {
    Idle,
    CollectingParameters,
    PreValidation,
    AwaitingConfirmation,
    Executing,
    Completed,
    Cancelled,
    OutOfScope,
    Failed,
}

impl TransactionStatus {
    pub const ALL: [TransactionStatus; 9] = [
        TransactionStatus::Idle,
        TransactionStatus::CollectingParameters,
        TransactionStatus::PreValidation,
        TransactionStatus::AwaitingConfirmation,
        TransactionStatus::Executing,
        TransactionStatus::Completed,
        TransactionStatus::Cancelled,
        TransactionStatus::OutOfScope,
        TransactionStatus::Failed,
    ];

    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TransactionStatus::Completed
                | TransactionStatus::Cancelled
                | TransactionStatus::OutOfScope
                | TransactionStatus::Failed
        )
    }

    /// The wire name (`COLLECTING_PARAMETERS`), also used as a metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            TransactionStatus::Idle => "IDLE",
            TransactionStatus::CollectingParameters => "COLLECTING_PARAMETERS",
            TransactionStatus::PreValidation => "PRE_VALIDATION",
            TransactionStatus::AwaitingConfirmation => "AWAITING_CONFIRMATION",
            TransactionStatus::Executing => "EXECUTING",
            TransactionStatus::Completed => "COMPLETED",
            TransactionStatus::Cancelled => "CANCELLED",
            TransactionStatus::OutOfScope => "OUT_OF_SCOPE",
            TransactionStatus::Failed => "FAILED",
        }
    }
}

/// The lifecycle table (LC-3): the only status changes the engine may apply.
/// Cancellation is possible until execution starts; once EXECUTING the call is in flight and only
/// its result ends the transaction. FAILED is also reachable from any live state, for a
/// transaction whose tool was removed from configuration (ST-5). IDLE → CANCELLED ends a stored
/// transaction that never started (ST-5, reason `inconsistent_state`).
pub fn is_legal_transition(from: TransactionStatus, to: TransactionStatus) -> bool {
    use TransactionStatus::*;
    matches!(
        (from, to),
        (Idle, CollectingParameters)
            | (Idle, Cancelled)
            | (CollectingParameters, PreValidation)
            | (CollectingParameters, AwaitingConfirmation)
            | (CollectingParameters, Executing)
            | (CollectingParameters, Cancelled)
            | (CollectingParameters, OutOfScope)
            | (CollectingParameters, Failed)
            | (PreValidation, AwaitingConfirmation)
            | (PreValidation, Executing)
            | (PreValidation, OutOfScope)
            | (PreValidation, Cancelled)
            | (PreValidation, CollectingParameters)
            | (PreValidation, Failed)
            | (AwaitingConfirmation, Executing)
            | (AwaitingConfirmation, PreValidation)
            | (AwaitingConfirmation, CollectingParameters)
            | (AwaitingConfirmation, Cancelled)
            | (AwaitingConfirmation, Failed)
            | (Executing, Completed)
            | (Executing, Failed)
    )
}

/// Why a transaction reached its terminal state (`reason` on the wire).
pub mod reason {
    pub const USER_CANCELLED: &str = "user_cancelled";
    pub const INTERRUPTED: &str = "interrupted";
    pub const DECLINED: &str = "declined";
    pub const EXPIRED: &str = "expired";
    pub const SESSION_ENDED: &str = "session_ended";
    pub const NOT_OFFERED: &str = "not_offered_to_tenant";
    pub const NOT_ELIGIBLE: &str = "not_eligible";
    pub const TOOL_NOT_CONFIGURED: &str = "tool_not_configured";
    pub const TOOL_FAILED: &str = "tool_failed";
    pub const INCONSISTENT_STATE: &str = "inconsistent_state";
    pub const PRE_VALIDATION_UNAVAILABLE: &str = "pre_validation_unavailable";
}

/// One pre-validation result (EV-2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PreValidationRecord {
    pub eligible: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub data: Value,
    /// The arguments that were validated: a correction makes the record stale (MG-6).
    pub arguments: BTreeMap<String, Value>,
    pub idempotency_key: String,
    pub at_ms: i64,
}

/// How one execution attempt ended (EV-3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptOutcome {
    Ok,
    RetryableFailure,
    Failure,
}

impl AttemptOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptOutcome::Ok => "ok",
            AttemptOutcome::RetryableFailure => "retryable_failure",
            AttemptOutcome::Failure => "failure",
        }
    }
}

/// One execution attempt (EV-3). Times come from whoever performed the call, never from the core.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvidenceRecord {
    pub idempotency_key: String,
    pub attempt: u32,
    pub started_at_ms: i64,
    pub ended_at_ms: i64,
    pub outcome: AttemptOutcome,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_code: Option<u16>,
    /// A bounded summary of the response (see `EVIDENCE_SUMMARY_MAX_CHARS`).
    pub summary: String,
}

/// Evidence summaries are cut to this many characters so a checkpoint stays small.
pub const EVIDENCE_SUMMARY_MAX_CHARS: usize = 512;

/// Turn ids kept on a transaction for audit; older ones are dropped.
pub const TRANSACTION_TURN_IDS_MAX: usize = 32;

/// The canonical in-flight transaction (ST-2). Everything else about a transaction is a projection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Transaction {
    /// Deterministic: derived from the identity and the turn that opened it (EV-4).
    pub id: String,
    pub agent: String,
    pub tool: String,
    pub status: TransactionStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub arguments: BTreeMap<String, Value>,
    pub missing_parameters: Vec<String>,
    pub confirmation_required: bool,
    pub confirmation_received: bool,
    #[serde(default)]
    pub pre_validation: Vec<PreValidationRecord>,
    #[serde(default)]
    pub evidence: Vec<EvidenceRecord>,
    #[serde(default)]
    pub turn_ids: Vec<String>,
    /// Invalid values received since the last valid one (MG-4).
    #[serde(default)]
    pub failed_attempts: u32,
    /// The turn that moved it to EXECUTING (LC-4 recovery finishes that turn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executing_turn_id: Option<String>,
    pub opened_at_ms: i64,
    pub updated_at_ms: i64,
}

impl Transaction {
    /// The idempotency key of the tool execution (EV-4): the same on every retry and restart.
    pub fn execution_key(&self) -> String {
        format!("{}:execute", self.id)
    }

    /// The idempotency key of the n-th pre-validation (a correction re-validates, MG-6).
    pub fn pre_validation_key(&self) -> String {
        format!(
            "{}:pre_validation:{}",
            self.id,
            self.pre_validation.len() + 1
        )
    }

    /// Whether the latest pre-validation covered exactly the current arguments.
    pub fn is_pre_validated(&self) -> bool {
        self.pre_validation
            .last()
            .is_some_and(|r| r.eligible && r.arguments == self.arguments)
    }

    pub fn record_turn(&mut self, turn_id: &str) {
        if self.turn_ids.last().map(String::as_str) != Some(turn_id) {
            self.turn_ids.push(turn_id.to_owned());
        }
        if self.turn_ids.len() > TRANSACTION_TURN_IDS_MAX {
            let excess = self.turn_ids.len() - TRANSACTION_TURN_IDS_MAX;
            self.turn_ids.drain(..excess);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // LC-3: no transition leaves a terminal state.
    #[test]
    fn terminal_states_have_no_way_out() {
        for from in TransactionStatus::ALL
            .into_iter()
            .filter(|s| s.is_terminal())
        {
            for to in TransactionStatus::ALL {
                assert!(!is_legal_transition(from, to), "{from:?} -> {to:?}");
            }
        }
    }

    // LC-1: the happy path is legal step by step, and skipping steps is legal.
    #[test]
    fn happy_path_and_skips_are_legal() {
        use TransactionStatus::*;
        let path = [
            Idle,
            CollectingParameters,
            PreValidation,
            AwaitingConfirmation,
            Executing,
            Completed,
        ];
        for w in path.windows(2) {
            assert!(is_legal_transition(w[0], w[1]), "{:?} -> {:?}", w[0], w[1]);
        }
        assert!(is_legal_transition(CollectingParameters, Executing));
        assert!(is_legal_transition(PreValidation, OutOfScope));
        assert!(!is_legal_transition(Executing, Cancelled));
        assert!(!is_legal_transition(Idle, Executing));
    }

    // LC-3: the whole table, all 81 pairs, written out from the contract so that any edge added
    // or removed in `is_legal_transition` fails here. Rows are `from`, columns `to`, in the order
    // of `TransactionStatus::ALL` (I C P A E Co Ca O F); 1 = legal.
    #[test]
    fn the_transition_table_is_exactly_the_contracts() {
        #[rustfmt::skip]
        const TABLE: [[u8; 9]; 9] = [
            //  I  C  P  A  E Co Ca  O  F
            [0, 1, 0, 0, 0, 0, 1, 0, 0], // IDLE: opens; ST-5 ends a stored IDLE one CANCELLED
            [0, 0, 1, 1, 1, 0, 1, 1, 1], // COLLECTING: LC-1 skips, cancel, not offered, ST-5
            [0, 1, 0, 1, 1, 0, 1, 1, 1], // PRE_VALIDATION: MG-6 correction back, not eligible
            [0, 1, 1, 0, 1, 0, 1, 0, 1], // AWAITING_CONFIRMATION: MG-6 back, cancel, ST-5
            [0, 0, 0, 0, 0, 1, 0, 0, 1], // EXECUTING: only the tool's result ends it (LC-4)
            [0, 0, 0, 0, 0, 0, 0, 0, 0], // COMPLETED: terminal
            [0, 0, 0, 0, 0, 0, 0, 0, 0], // CANCELLED: terminal
            [0, 0, 0, 0, 0, 0, 0, 0, 0], // OUT_OF_SCOPE: terminal
            [0, 0, 0, 0, 0, 0, 0, 0, 0], // FAILED: terminal
        ];
        for (i, from) in TransactionStatus::ALL.into_iter().enumerate() {
            for (j, to) in TransactionStatus::ALL.into_iter().enumerate() {
                assert_eq!(
                    is_legal_transition(from, to),
                    TABLE[i][j] == 1,
                    "{from:?} -> {to:?}"
                );
            }
        }
    }

    #[test]
    fn status_names_are_the_seeds() {
        let json = serde_json::to_string(&TransactionStatus::AwaitingConfirmation).unwrap();
        assert_eq!(json, "\"AWAITING_CONFIRMATION\"");
        for s in TransactionStatus::ALL {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
    }
}
