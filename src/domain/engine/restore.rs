//! Order of evaluation, step 1: restore. ST-5 diagnosis of an inconsistent state, ST-6 expiry of
//! an idle session, and LC-4 recovery of a transaction found in EXECUTING.

use serde_json::{json, Value};

use super::{Flowing, Run};
use crate::domain::effect::{EventType, Inconsistency};
use crate::domain::reply::About;
use crate::domain::transaction::{reason, TransactionStatus};

impl Run<'_> {
    /// ST-5: diagnose inconsistent state; never restart a tool silently.
    pub(super) fn diagnose(&mut self) -> Flowing<()> {
        let live = self.state.transaction_status.is_some_and(|s| {
            matches!(
                s,
                TransactionStatus::CollectingParameters
                    | TransactionStatus::PreValidation
                    | TransactionStatus::AwaitingConfirmation
                    | TransactionStatus::Executing
            )
        });
        if live && self.state.active_transaction.is_none() {
            self.inconsistent(
                Inconsistency::StatusWithoutTransaction,
                json!({"transaction_status": self.state.transaction_status}),
            );
            self.state.recompute_projections();
        }
        // ST-5: an active transaction whose own status is not an active one never wedges the
        // conversation: IDLE ends CANCELLED, a terminal one becomes `last_transaction` as it is.
        let stale = self
            .state
            .active_transaction
            .as_ref()
            .map(|tx| tx.status)
            .filter(|s| *s == TransactionStatus::Idle || s.is_terminal());
        if let Some(status) = stale {
            self.inconsistent(
                Inconsistency::TransactionNotActive,
                json!({"status": status}),
            );
            if status == TransactionStatus::Idle {
                self.terminate(TransactionStatus::Cancelled, reason::INCONSISTENT_STATE)?;
            } else if let Some(tx) = self.state.active_transaction.take() {
                self.state.last_transaction = Some(tx);
            }
            self.state.recompute_projections();
        }
        // A seed-shaped transaction (ST-4) has no agent: it is the configured tool's.
        if let Some(tx) = self.state.active_transaction.as_mut() {
            if tx.agent.is_empty() {
                if let Some(tool) = self.assistant.tools.get(&tx.tool) {
                    tx.agent = tool.agent.clone();
                }
            }
        }
        let unknown_tool = self
            .state
            .active_transaction
            .as_ref()
            .filter(|tx| !self.assistant.tools.contains_key(&tx.tool))
            .map(|tx| tx.tool.clone());
        if let Some(tool) = unknown_tool {
            self.inconsistent(Inconsistency::ToolNotConfigured, json!({"tool": tool}));
            self.terminate(TransactionStatus::Failed, reason::TOOL_NOT_CONFIGURED)?;
        }
        Ok(())
    }

    fn inconsistent(&mut self, what: Inconsistency, detail: Value) {
        self.out.inconsistencies.push(what);
        self.emit(
            EventType::StateInconsistent,
            json!({"reason": what.as_str(), "detail": detail}),
        );
    }

    /// ST-6: a turn after `SESSION_TTL` of inactivity closes the old session first.
    pub(super) fn expire_if_idle(&mut self) -> Flowing<()> {
        let Some(last) = self.state.last_turn_at_ms else {
            return Ok(());
        };
        if self.turn.at_ms.saturating_sub(last) < self.settings.session_ttl_ms {
            return Ok(());
        }
        if self
            .state
            .active_transaction
            .as_ref()
            .is_some_and(|tx| tx.status != TransactionStatus::Executing)
        {
            let tool = self.active_tool();
            self.terminate(TransactionStatus::Cancelled, reason::EXPIRED)?;
            self.say_about(About::Expired, tool);
        }
        self.expired = true;
        self.start_fresh_session();
        Ok(())
    }

    pub(super) fn start_fresh_session(&mut self) {
        self.state.active_agent = None;
        self.state.human_handoff_requested = false;
        self.state.session_ended = false;
        self.state.history.make_mut().clear();
    }

    /// LC-4: a transaction found in EXECUTING re-issues the same call with the same key.
    /// Returns true when this turn was the one that started the execution (it is then done).
    pub(super) async fn resume_executing(&mut self) -> Flowing<bool> {
        let Some(tx) = self.state.active_transaction.as_ref() else {
            return Ok(false);
        };
        if tx.status != TransactionStatus::Executing {
            return Ok(false);
        }
        let own_turn = tx.executing_turn_id.as_deref() == Some(self.turn.turn_id.as_str());
        self.call_tool().await?;
        Ok(own_turn)
    }
}
