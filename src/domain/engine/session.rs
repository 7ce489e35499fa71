//! Session control: step 2's structured channel actions, step 4's session-control classifier,
//! and the two global nodes it can reach, human handoff (SC-5) and end of session (SC-6).

use serde_json::json;

use super::handover::HandoffReason;
use super::{confident, Flowing, Run, ROUTE_END_SESSION, ROUTE_HUMAN_HANDOFF};
use crate::domain::confirmation::{self, Confirmation};
use crate::domain::decision::{SessionControl, Skill};
use crate::domain::effect::RouteDecision;
use crate::domain::effect::{
    Answer, ClassifierRequest, EventType, FallbackReason, ModelFreeReading, Request,
};
use crate::domain::locale::Locale;
use crate::domain::person_refusal::Besides;
use crate::domain::reply::About;
use crate::domain::transaction::{reason, TransactionStatus};
use crate::domain::turn::ChannelAction;

impl Run<'_> {
    // ---- step 2: structured channel actions ----

    pub(super) async fn on_action(&mut self, action: ChannelAction) -> Flowing<()> {
        self.out.settled_without_model = Some(ModelFreeReading::ChannelAction);
        let status = self.active_status();
        match action {
            ChannelAction::Confirm => match status {
                Some(TransactionStatus::AwaitingConfirmation) => self.confirmed().await,
                Some(_) => {
                    self.reply(self.msgs.nothing_to_confirm.clone());
                    self.ask_pending();
                    Ok(())
                }
                None => {
                    self.reply(self.msgs.nothing_to_confirm.clone());
                    Ok(())
                }
            },
            ChannelAction::Decline => match status {
                Some(TransactionStatus::AwaitingConfirmation) => self.declined(),
                _ => {
                    self.reply(self.msgs.nothing_to_confirm.clone());
                    Ok(())
                }
            },
            ChannelAction::Cancel => {
                if status.is_some() {
                    self.cancel_by_user()
                } else {
                    self.reply(self.msgs.nothing_to_cancel.clone());
                    Ok(())
                }
            }
            ChannelAction::Handoff => self.handoff(HandoffReason::Action),
            ChannelAction::End => self.end_session(),
            ChannelAction::Handback => self.handback(),
        }
    }

    // ---- step 4: the session-control classifier ----

    /// Step 4: returns the accepted label, or None after a counted fallback (SC-2).
    pub(super) async fn classify(&mut self, text: &str) -> Flowing<Option<SessionControl>> {
        let request = ClassifierRequest {
            message: text.to_owned(),
            assistant: self.turn.identity.agent_id.clone(),
            locale: self.turn.locale,
            history: self.recent_history(self.settings.route_stickiness_history_turns),
            active_agent: self.state.active_agent.clone(),
            active_transaction: self.summary(),
        };
        let answer = match self.ask(Request::Classify(request)).await {
            Answer::Classifier(a) => a,
            other => return Err(self.mismatch("classifier", &other)),
        };
        let threshold = self.settings.route_stickiness_confidence_threshold;
        Ok(match answer {
            Ok(d) if confident(d.confidence, threshold) => {
                self.classifier_confidence = d.confidence;
                Some(d.decision)
            }
            Ok(_) => {
                self.fallback(Skill::Classifier, FallbackReason::LowConfidence);
                None
            }
            Err(f) => {
                self.fallback(Skill::Classifier, f.into());
                None
            }
        })
    }

    // ---- session control (SC-5, SC-6) ----

    /// SC-5. The event also carries what a queue router needs without reading the
    /// conversation: why (`reason`), the locale, the active transaction's tool and status, and
    /// a short deterministic `summary` (added to v1 as optional fields).
    pub(super) fn handoff(&mut self, why: HandoffReason<'_>) -> Flowing<()> {
        let summary = self.handoff_summary(why);
        let tx = self.active();
        let transaction_tool = tx.map(|t| t.tool.clone());
        let transaction_status = tx.map(|t| t.status);
        self.state.human_handoff_requested = true;
        self.state.session_ended = false;
        self.out.route = Some(RouteDecision {
            route: ROUTE_HUMAN_HANDOFF.into(),
            intent: Some(ROUTE_HUMAN_HANDOFF.into()),
            handoff: true,
            session_control: Some(SessionControl::HumanHandoff.as_str().into()),
        });
        let data = json!({
            "route": ROUTE_HUMAN_HANDOFF,
            "intent": ROUTE_HUMAN_HANDOFF,
            "handoff": true,
            "session_control": SessionControl::HumanHandoff.as_str(),
            "identity": &self.turn.identity,
            "locale": self.turn.locale,
            "last_turns": self.recent_history(self.settings.route_stickiness_history_turns.max(5)),
            "message": self.turn.text(),
            "active_agent": &self.state.active_agent,
            "active_transaction": &self.state.active_transaction,
            "reason": why.to_json(),
            "transaction_tool": transaction_tool,
            "transaction_status": transaction_status,
            "summary": summary,
        });
        self.emit(EventType::HumanHandoffRequested, data);
        let text = match (&self.settings.human_handoff_message, self.turn.locale) {
            (Some(custom), Locale::En) => custom.clone(),
            _ => self.msgs.human_handoff.clone(),
        };
        self.reply(text);
        Ok(())
    }

    pub(super) fn end_session(&mut self) -> Flowing<()> {
        if self
            .active()
            .is_some_and(|tx| tx.status != TransactionStatus::Executing)
        {
            let tool = self.active_tool();
            self.terminate(TransactionStatus::Cancelled, reason::SESSION_ENDED)?;
            // SC-6, PR-3a: the end-of-session text follows a sentence naming what was not done.
            self.say_about(About::NotDone, tool);
        }
        self.state.session_ended = true;
        self.state.human_handoff_requested = false;
        self.out.route = Some(RouteDecision {
            route: ROUTE_END_SESSION.into(),
            intent: Some(ROUTE_END_SESSION.into()),
            handoff: false,
            session_control: Some(SessionControl::EndSession.as_str().into()),
        });
        let data = json!({
            "route": ROUTE_END_SESSION,
            "intent": ROUTE_END_SESSION,
            "handoff": false,
            "session_control": SessionControl::EndSession.as_str(),
            "identity": &self.turn.identity,
            "locale": self.turn.locale,
            "last_transaction": &self.state.last_transaction,
        });
        self.emit(EventType::EndRequested, data);
        let text = match (&self.settings.end_session_message, self.turn.locale) {
            (Some(custom), Locale::En) => custom.clone(),
            _ => self.msgs.end_session.clone(),
        };
        self.reply(text);
        Ok(())
    }

    /// A hold-on (`one sec, let me find the amount`, `domain::hold_on`) while values are
    /// collected or a confirmation is pending keeps what is in flight, whatever the words of what
    /// the customer will look at read as: answered, and the pending step asked again.
    pub(super) fn held_on(&mut self, text: &str) -> bool {
        let pending = matches!(
            self.active_status(),
            Some(TransactionStatus::CollectingParameters | TransactionStatus::AwaitingConfirmation)
        );
        if !(pending && crate::domain::hold_on::holds_on(text)) {
            return false;
        }
        self.out.settled_without_model = Some(ModelFreeReading::HoldOn);
        self.reply(self.msgs.hold_on.clone());
        self.ask_pending();
        true
    }

    /// What of `text` steps 3 to 6 read, or None when the turn is settled before them: a person
    /// owns the conversation (the bot does not talk over them), a hold-on, a question whether
    /// it was done, a refused person with nothing else said, a question what is needed.
    pub(super) fn text_to_read(&mut self, text: &str) -> Option<String> {
        if self.state.human_handoff_requested {
            self.out.settled_without_model = Some(ModelFreeReading::HumanOwned);
            self.reply(self.msgs.handoff_pending.clone());
            return None;
        }
        if self.held_on(text) {
            return None;
        }
        if self.answered_whether_done(text) {
            return None;
        }
        let text = match self.refused_a_person(text) {
            Some(Besides::Nothing) => return None,
            Some(Besides::Rest(rest)) => rest,
            None => text.to_owned(),
        };
        self.answered_what_is_needed(text)
    }

    /// `what do you need from me?` (`domain::needs_question`): alone, while something is
    /// pending, the pending step's question answers it, with no model; beside a request (`quero
    /// abrir uma contestação. o que vc precisa?`) the request is read without it.
    fn answered_what_is_needed(&mut self, text: String) -> Option<String> {
        match crate::domain::needs_question::rest_beside(&text) {
            Some(rest) if rest.trim().is_empty() => {
                let pending = matches!(
                    self.active_status(),
                    Some(
                        TransactionStatus::CollectingParameters
                            | TransactionStatus::AwaitingConfirmation
                    )
                );
                if !pending {
                    return Some(text);
                }
                self.out.settled_without_model = Some(ModelFreeReading::NeedsQuestion);
                self.ask_pending();
                None
            }
            Some(rest) => Some(rest),
            None => Some(text),
        }
    }

    /// SC-4, SC-5: a refused person (`I don't want to talk to a human, just fix it`,
    /// `domain::person_refusal`) is neither a handoff nor an end, whatever a sentence model
    /// reads in its words. With nothing else said the assistant carries on and asks again what
    /// is pending (`Settled`); what else the message says is read as the message (`Rest`).
    pub(super) fn refused_a_person(&mut self, text: &str) -> Option<Besides> {
        let besides = crate::domain::person_refusal::refuses_a_person(text)?;
        if besides == Besides::Nothing {
            self.out.settled_without_model = Some(ModelFreeReading::PersonRefused);
            self.reply(self.msgs.keeps_helping.clone());
            self.ask_pending();
        }
        Some(besides)
    }

    /// SC-10: whether `text` consents to what is pending: with a confirmation pending, a message
    /// that opens by consenting and says no farewell (`então tá, confirmado`; `yes, my wife
    /// bought it by mistake`); while values are collected, a plain affirmation (`yes pls`, `ok`,
    /// `sim`: an acknowledgement of the question).
    pub(super) fn consents(&self, text: &str) -> bool {
        match self.active_status() {
            Some(TransactionStatus::AwaitingConfirmation) => {
                confirmation::opens_with_consent(text, &self.confirmation_verbs())
            }
            // `obrigado, só isso` holds a yes word (`isso`) but takes leave: a closing is no
            // consent while values are being asked for.
            Some(TransactionStatus::CollectingParameters | TransactionStatus::PreValidation) => {
                confirmation::recognise(text) == Some(Confirmation::Affirm)
                    && !confirmation::says_goodbye(text)
            }
            _ => false,
        }
    }
}
