//! The transaction lifecycle: opening (LC-1, EV-4), advancing through every step that has
//! nothing to wait for (pre-validation, confirmation), executing behind the write-ahead (LC-4),
//! and ending (LC-2) through the only way a status changes (LC-3).

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::{required_names, EngineError, Flowing, Run, PRE_VALIDATION_UNAVAILABLE};
use crate::domain::decision::{PreValidationResult, ToolResult};
use crate::domain::effect::{Answer, EventType, ExecutedTool, Request, ToolRequest, Transition};
use crate::domain::reply::About;
use crate::domain::transaction::{
    is_legal_transition, reason, AttemptOutcome, EvidenceRecord, PreValidationRecord, Transaction,
    TransactionStatus, EVIDENCE_SUMMARY_MAX_CHARS,
};
use crate::domain::turn::Turn;

impl Run<'_> {
    pub(super) fn open_bare(&mut self, agent: &str, tool: &str) -> Flowing<()> {
        self.opened += 1;
        let id = transaction_id(self.turn, self.opened);
        let tool_def = self.assistant.tools.get(tool);
        let mut tx = Transaction {
            id,
            agent: agent.to_owned(),
            tool: tool.to_owned(),
            status: TransactionStatus::Idle,
            reason: None,
            arguments: BTreeMap::new(),
            missing_parameters: tool_def.map(required_names).unwrap_or_default(),
            confirmation_required: tool_def.is_some_and(|t| t.confirmation),
            confirmation_received: false,
            pre_validation: Vec::new(),
            evidence: Vec::new(),
            turn_ids: Vec::new(),
            failed_attempts: 0,
            executing_turn_id: None,
            opened_at_ms: self.turn.at_ms,
            updated_at_ms: self.turn.at_ms,
        };
        tx.record_turn(&self.turn.turn_id);
        self.state.active_transaction = Some(tx);
        self.state.active_agent = Some(agent.to_owned());
        self.transition(TransactionStatus::CollectingParameters)?;
        let snapshot = self.snapshot();
        self.emit(EventType::Started, snapshot);
        Ok(())
    }

    /// Opens a transaction with the router's initial arguments and the typed parsers' reading
    /// of the message that started it (MG-5), and moves it as far as it goes (LC-1).
    pub(super) async fn open(
        &mut self,
        agent: &str,
        tool: &str,
        arguments: BTreeMap<String, Value>,
        text: &str,
    ) -> Flowing<()> {
        self.open_bare(agent, tool)?;
        let (valid, invalid) = self.validate_values(&arguments);
        // One typed reading serves the merge and the free-text reading (MG-5).
        let reading = self.typed_reading(text);
        let spans: Vec<_> = reading
            .iter()
            .flat_map(|r| r.values.iter().map(|v| v.span.clone()))
            .collect();
        let (mut valid, invalid) = super::values::merge_reading(reading, valid, invalid);
        if let Some((name, value)) = self.free_text_reading(text, &spans) {
            valid.entry(name).or_insert(value);
        }
        let mut values = (valid, invalid);
        self.values_pointed_back(text, &mut values);
        let (valid, invalid) = values;
        self.apply_values(valid, invalid).await
    }

    /// LC-1: moves the active transaction through every step that has nothing to wait for.
    pub(super) async fn advance(&mut self) -> Flowing<()> {
        let tool = self
            .active_tool()
            .expect("advance needs an active transaction");
        let missing = self.active().expect("active").missing_parameters.clone();
        if !missing.is_empty() {
            self.transition(TransactionStatus::CollectingParameters)?;
            self.ask_pending();
            return Ok(());
        }
        if tool.pre_validation && !self.active().expect("active").is_pre_validated() {
            self.transition(TransactionStatus::PreValidation)?;
            let request = self.tool_request(self.active().expect("active").pre_validation_key());
            let result = match self.ask(Request::PreValidate(request.clone())).await {
                Answer::PreValidation(r) => r,
                other => return Err(self.mismatch("pre_validation", &other)),
            };
            self.record_pre_validation(&request, &result);
            let unavailable = result
                .reason
                .as_deref()
                .is_some_and(|r| r.starts_with(PRE_VALIDATION_UNAVAILABLE));
            if !result.eligible && unavailable {
                // LC-1: no answer is not "not eligible": FAILED, and the customer may retry.
                self.terminate(
                    TransactionStatus::Failed,
                    reason::PRE_VALIDATION_UNAVAILABLE,
                )?;
                self.say_about(About::PreValidationUnavailable, Some(tool));
                return Ok(());
            }
            if !result.eligible {
                let why = result.reason.clone().unwrap_or_default();
                // The reason is final before `terminate`, so the `transaction.out_of_scope`
                // event's snapshot and `last_transaction` are the same transaction (LC-2).
                let ending = if why.is_empty() {
                    reason::NOT_ELIGIBLE.to_owned()
                } else {
                    format!("{}: {why}", reason::NOT_ELIGIBLE)
                };
                self.terminate(TransactionStatus::OutOfScope, &ending)?;
                // RP-2: the reason only in the reply's locale.
                let text = self.replies().not_eligible(
                    tool,
                    result.reason.as_deref(),
                    result.code.as_deref(),
                );
                self.reply(text);
                return Ok(());
            }
        }
        if tool.confirmation && !self.active().expect("active").confirmation_received {
            self.transition(TransactionStatus::AwaitingConfirmation)?;
            self.ask_confirmation();
            return Ok(());
        }
        self.execute().await
    }

    pub(super) async fn confirmed(&mut self) -> Flowing<()> {
        self.active_mut().confirmation_received = true;
        self.execute().await
    }

    /// PR-6: a negative confirmation cancels with reason `declined`.
    pub(super) fn declined(&mut self) -> Flowing<()> {
        self.decline_saying(About::Declined)
    }

    /// PR-6: declined, said as a cancel is (`OK, I won't go ahead with …`), for a turn whose
    /// reply goes on to answer a new request.
    pub(super) fn declined_quietly(&mut self) -> Flowing<()> {
        self.decline_saying(About::Cancelled)
    }

    fn decline_saying(&mut self, about: About) -> Flowing<()> {
        let tool = self.active_tool();
        self.terminate(TransactionStatus::Cancelled, reason::DECLINED)?;
        self.say_about(about, tool);
        Ok(())
    }

    /// PR-2: explicit cancel.
    pub(super) fn cancel_by_user(&mut self) -> Flowing<()> {
        if self.active_status() == Some(TransactionStatus::Executing) {
            self.reply(self.msgs.nothing_to_cancel.clone());
            return Ok(());
        }
        let tool = self.active_tool();
        self.terminate(TransactionStatus::Cancelled, reason::USER_CANCELLED)?;
        // PR-3a: a cancel names the transaction.
        self.say_about(About::Cancelled, tool);
        Ok(())
    }

    /// LC-4: checkpoint EXECUTING, then call the tool with the transaction's idempotency key.
    async fn execute(&mut self) -> Flowing<()> {
        self.transition(TransactionStatus::Executing)?;
        let turn_id = self.turn.turn_id.clone();
        self.active_mut().executing_turn_id = Some(turn_id);
        let mut ahead = self.state.clone();
        ahead.recompute_projections();
        match self.ask(Request::PersistExecuting(Box::new(ahead))).await {
            Answer::Persisted => {}
            other => return Err(self.mismatch("persisted", &other)),
        }
        self.call_tool().await
    }

    pub(super) async fn call_tool(&mut self) -> Flowing<()> {
        let request = self.tool_request(self.active().expect("executing").execution_key());
        let result: ToolResult = match self.ask(Request::Execute(request.clone())).await {
            Answer::Tool(r) => r,
            other => return Err(self.mismatch("tool", &other)),
        };
        let tool = self.active_tool();
        {
            let tx = self.active_mut();
            for attempt in &result.attempts {
                let mut record = attempt.clone();
                record.summary = bounded(&record.summary, EVIDENCE_SUMMARY_MAX_CHARS);
                tx.evidence.push(record);
            }
        }
        self.out.executed.push(ExecutedTool {
            tool: request.tool.clone(),
            arguments: request.arguments.clone(),
            idempotency_key: request.idempotency_key.clone(),
            ok: result.is_ok(),
        });
        if result.is_ok() {
            self.terminate(TransactionStatus::Completed, "")?;
            if let Some(tool) = tool {
                // RP-1: the result reaches the customer.
                let (text, how) = self
                    .replies()
                    .completed(tool, &request.arguments, &result.data);
                self.out.results.push((tool.name.clone(), how));
                self.reply(text);
            }
        } else {
            self.terminate(TransactionStatus::Failed, reason::TOOL_FAILED)?;
            if let Some(tool) = tool {
                // RP-2: the service's words (a decided failure's body) only in the locale.
                let text = self.replies().failed(tool, &result.data);
                self.reply(text);
            }
        }
        Ok(())
    }

    /// LC-2: a terminal state copies the transaction to `last_transaction`, then clears the latch.
    pub(super) fn terminate(&mut self, status: TransactionStatus, why: &str) -> Flowing<()> {
        self.transition(status)?;
        let mut tx = self
            .state
            .active_transaction
            .take()
            .expect("terminate needs an active transaction");
        if !why.is_empty() {
            tx.reason = Some(why.to_owned());
        }
        tx.record_turn(&self.turn.turn_id);
        let data = json!({"transaction": &tx});
        self.state.last_transaction = Some(tx);
        if let Some(kind) = EventType::for_terminal(status) {
            self.emit(kind, data);
        }
        Ok(())
    }

    /// LC-3: the only way a status changes.
    pub(super) fn transition(&mut self, to: TransactionStatus) -> Flowing<()> {
        let at = self.turn.at_ms;
        let tx = self
            .state
            .active_transaction
            .as_mut()
            .expect("transition needs an active transaction");
        let from = tx.status;
        if from == to {
            return Ok(());
        }
        if !is_legal_transition(from, to) {
            return Err(EngineError::IllegalTransition {
                transaction_id: tx.id.clone(),
                from,
                to,
            });
        }
        tx.status = to;
        tx.updated_at_ms = at;
        self.out.transitions.push(Transition { from, to });
        Ok(())
    }

    fn record_pre_validation(&mut self, request: &ToolRequest, result: &PreValidationResult) {
        let tx = self.active_mut();
        tx.pre_validation.push(PreValidationRecord {
            eligible: result.eligible,
            reason: result.reason.clone(),
            data: result.data.clone(),
            arguments: request.arguments.clone(),
            idempotency_key: request.idempotency_key.clone(),
            at_ms: result.at_ms,
        });
    }
}

/// EV-4: a deterministic transaction id from the identity, the opening turn and its ordinal.
fn transaction_id(turn: &Turn, ordinal: u32) -> String {
    const NAMESPACE: uuid::Uuid = uuid::Uuid::from_u128(0x6f1c_9a52_4b7e_4d3a_9e0f_2c8b_7d15_a3e4);
    let name = format!(
        "{}\u{1f}{}\u{1f}{}\u{1f}{}\u{1f}{}",
        turn.identity.tenant_id,
        turn.identity.agent_id,
        turn.identity.session_id,
        turn.turn_id,
        ordinal
    );
    uuid::Uuid::new_v5(&NAMESPACE, name.as_bytes()).to_string()
}

fn bounded(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max_chars.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// The tool result a scenario or test server gives: convenience for adapters building answers.
pub fn single_attempt_result(
    key: &str,
    ok: bool,
    retryable: bool,
    data: Value,
    error: Option<String>,
    at_ms: i64,
) -> ToolResult {
    let outcome = if ok {
        AttemptOutcome::Ok
    } else if retryable {
        AttemptOutcome::RetryableFailure
    } else {
        AttemptOutcome::Failure
    };
    let summary = if ok {
        data.to_string()
    } else {
        error.clone().unwrap_or_default()
    };
    ToolResult {
        outcome,
        data,
        error,
        attempts: vec![EvidenceRecord {
            idempotency_key: key.to_owned(),
            attempt: 1,
            started_at_ms: at_ms,
            ended_at_ms: at_ms,
            outcome,
            status_code: None,
            summary,
        }],
    }
}
