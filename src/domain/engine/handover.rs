//! Handing a conversation to a person and back: what the handoff event tells a queue router
//! (SC-5: why, in which locale, about which transaction, and a short summary built from the
//! state with no model), and the `handback` action (SC-11) that gives the conversation back to
//! the assistant.

use serde_json::{json, Value};

use super::{Flowing, Run};
use crate::domain::catalog::Tool;
use crate::domain::decision::SessionControl;
use crate::domain::effect::{EventType, HandbackOutcome};
use crate::domain::locale::Locale;
use crate::domain::reply::format;
use crate::domain::transaction::{reason, Transaction, TransactionStatus};
use crate::domain::turn::ChannelAction;

/// The handoff event's `summary` is cut to this many characters.
pub const HANDOFF_SUMMARY_MAX_CHARS: usize = 400;

/// Why the conversation goes to a person (the handoff event's `reason`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum HandoffReason<'p> {
    /// The `handoff` channel action (step 2).
    Action,
    /// An accepted `HUMAN_HANDOFF` of the session-control classifier (step 4), its confidence.
    Classifier(f64),
    /// MG-4: a parameter's attempts ran out and the tool hands off (`on_attempts_exhausted`).
    AttemptsExhausted { parameter: &'p str, attempts: u32 },
}

impl HandoffReason<'_> {
    /// `{"source": "channel_action", "action": "handoff"}`, `{"source": "classifier", "label":
    /// "HUMAN_HANDOFF", "confidence": 0.97}` or `{"source": "attempts_exhausted", "parameter":
    /// "order_id", "attempts": 3}`.
    pub(super) fn to_json(self) -> Value {
        match self {
            HandoffReason::Action => json!({
                "source": "channel_action",
                "action": ChannelAction::Handoff.as_str(),
            }),
            HandoffReason::Classifier(confidence) => json!({
                "source": "classifier",
                "label": SessionControl::HumanHandoff.as_str(),
                "confidence": confidence,
            }),
            HandoffReason::AttemptsExhausted {
                parameter,
                attempts,
            } => json!({
                "source": "attempts_exhausted",
                "parameter": parameter,
                "attempts": attempts,
            }),
        }
    }
}

impl Run<'_> {
    /// SC-11: the queue router or the agent desk gives the conversation back. Only a handoff
    /// pending when the turn arrived is handed back; otherwise nothing changes and nothing is
    /// said or emitted (docs/decisions.md). Step 1 already ended a transaction whose session
    /// expired meanwhile (`CANCELLED`, `expired`, and its sentence); a kept one is asked again
    /// where it was.
    pub(super) fn handback(&mut self) -> Flowing<()> {
        if !self.handed_off {
            self.out.handback = Some(HandbackOutcome::NotPending);
            return Ok(());
        }
        self.state.human_handoff_requested = false;
        self.state.recompute_projections();
        let expired_tx = self
            .state
            .last_transaction
            .as_ref()
            .filter(|tx| self.expired && tx.reason.as_deref() == Some(reason::EXPIRED))
            .cloned();
        let (outcome, transaction) = match (self.active(), expired_tx) {
            (Some(tx), _) => (HandbackOutcome::Resumed, Some(tx.clone())),
            (None, Some(tx)) => (HandbackOutcome::Expired, Some(tx)),
            (None, None) => (HandbackOutcome::NoTransaction, None),
        };
        self.out.handback = Some(outcome);
        let data = json!({
            "outcome": outcome.as_str(),
            "identity": &self.turn.identity,
            "locale": self.turn.locale,
            "active_agent": &self.state.active_agent,
            "next_state": &self.state.next_state,
            "transaction_id": transaction.as_ref().map(|t| t.id.as_str()),
            "transaction_tool": transaction.as_ref().map(|t| t.tool.as_str()),
            "transaction_status": transaction.as_ref().map(|t| t.status),
            "transaction": transaction,
        });
        // Events: emitted here, after step 1's (an expired transaction's ending) and before
        // anything the resumed transaction emits.
        self.emit(EventType::HandbackCompleted, data);
        // The customer reads first that the assistant is back, then what step 1 said (an
        // expired transaction), then what is pending.
        let back = self.msgs.handback.clone();
        if !back.is_empty() {
            self.out.replies.insert(0, back);
        }
        if outcome == HandbackOutcome::Resumed {
            self.ask_pending();
        }
        Ok(())
    }

    /// SC-5: a short summary of the conversation for the person taking over, from the state
    /// alone (no model, no parameter values: those are in `active_transaction`), in the
    /// conversation's locale.
    pub(super) fn handoff_summary(&self, why: HandoffReason<'_>) -> String {
        let locale = self.turn.locale;
        let mut parts = vec![reason_sentence(why, self.active_tool(), locale)];
        match (self.active(), self.active_tool()) {
            (Some(tx), Some(tool)) => parts.push(transaction_sentence(tx, tool, locale)),
            _ => parts.push(
                match locale {
                    Locale::En => "No request in progress.",
                    Locale::PtBr => "Nenhuma solicitação em andamento.",
                }
                .to_owned(),
            ),
        }
        // The customer's lines in this session, this turn's included.
        let lines = self
            .state
            .history
            .iter()
            .filter(|h| h.role == crate::domain::state::Speaker::User)
            .count()
            + 1;
        parts.push(match locale {
            Locale::En => format!("Customer messages in this session: {lines}."),
            Locale::PtBr => format!("Mensagens do cliente nesta sessão: {lines}."),
        });
        format::cut(&parts.join(" "), HANDOFF_SUMMARY_MAX_CHARS)
    }
}

fn reason_sentence(why: HandoffReason<'_>, tool: Option<&Tool>, locale: Locale) -> String {
    match (why, locale) {
        (HandoffReason::Action, Locale::En) => {
            "The customer asked for a person with the channel's button.".to_owned()
        }
        (HandoffReason::Action, Locale::PtBr) => {
            "O cliente pediu um atendente pelo botão do canal.".to_owned()
        }
        (HandoffReason::Classifier(c), Locale::En) => {
            format!("The customer asked for a person (classifier confidence {c:.2}).")
        }
        (HandoffReason::Classifier(c), Locale::PtBr) => format!(
            "O cliente pediu um atendente (confiança do classificador {}).",
            format::number(&format!("{c:.2}"), locale)
        ),
        (
            HandoffReason::AttemptsExhausted {
                parameter,
                attempts,
            },
            _,
        ) => {
            let label = tool
                .and_then(|t| t.parameter(parameter))
                .map_or(parameter, |p| p.label.get(locale));
            match locale {
                Locale::En => {
                    format!("No valid {label} after {attempts} attempts.")
                }
                Locale::PtBr => {
                    format!("Nenhum valor válido para {label} após {attempts} tentativas.")
                }
            }
        }
    }
}

/// `In progress: Order cancellation (awaiting confirmation); collected: order number;
/// missing: none.`
fn transaction_sentence(tx: &Transaction, tool: &Tool, locale: Locale) -> String {
    let label = |name: &String| {
        tool.parameter(name)
            .map_or(name.clone(), |p| p.label.get(locale).to_owned())
    };
    let collected: Vec<String> = tx.arguments.keys().map(label).collect();
    let missing: Vec<String> = tx.missing_parameters.iter().map(label).collect();
    let list = |items: &[String]| {
        if items.is_empty() {
            match locale {
                Locale::En => "none".to_owned(),
                Locale::PtBr => "nenhum".to_owned(),
            }
        } else {
            format::join_and(items, locale)
        }
    };
    let title = format::capitalised(tool.title.get(locale));
    let status = status_words(tx.status, locale);
    match locale {
        Locale::En => format!(
            "In progress: {title} ({status}); collected: {}; missing: {}.",
            list(&collected),
            list(&missing)
        ),
        Locale::PtBr => format!(
            "Em andamento: {title} ({status}); informado: {}; faltando: {}.",
            list(&collected),
            list(&missing)
        ),
    }
}

fn status_words(status: TransactionStatus, locale: Locale) -> &'static str {
    match (status, locale) {
        (TransactionStatus::CollectingParameters, Locale::En) => "collecting details",
        (TransactionStatus::CollectingParameters, Locale::PtBr) => "coletando dados",
        (TransactionStatus::PreValidation, Locale::En) => "being checked",
        (TransactionStatus::PreValidation, Locale::PtBr) => "em verificação",
        (TransactionStatus::AwaitingConfirmation, Locale::En) => "awaiting confirmation",
        (TransactionStatus::AwaitingConfirmation, Locale::PtBr) => "aguardando confirmação",
        (TransactionStatus::Executing, Locale::En) => "being executed",
        (TransactionStatus::Executing, Locale::PtBr) => "em execução",
        (_, Locale::En) => "not in progress",
        (_, Locale::PtBr) => "fora de andamento",
    }
}
