//! What the customer reads: clarifying (PR-5), asking for what is pending, the confirmation
//! question, and the sentences that name a transaction as it ends (SC-6, PR-3a). The text
//! itself is built by `domain::reply`.

use super::{Flowing, Run};
use crate::domain::catalog::Tool;
use crate::domain::reply::{About, Replies};
use crate::domain::transaction::TransactionStatus;

impl<'a> Run<'a> {
    pub(super) fn replies(&self) -> Replies<'a> {
        Replies::new(self.assistant, self.turn.locale)
    }

    /// PR-5: keep the transaction and ask again for what is pending.
    pub(super) fn clarify(&mut self, out_of_scope: bool) -> Flowing<()> {
        let lead = if out_of_scope {
            self.msgs.out_of_scope.clone()
        } else {
            self.msgs.clarify.clone()
        };
        self.reply(lead);
        self.ask_pending();
        Ok(())
    }

    /// Asks for the missing parameters, or repeats the confirmation question.
    pub(super) fn ask_pending(&mut self) {
        let Some(tx) = self.active() else {
            return;
        };
        if tx.status == TransactionStatus::AwaitingConfirmation {
            self.ask_confirmation();
            return;
        }
        if tx.missing_parameters.is_empty() {
            return;
        }
        let tool = self.active_tool().expect("active");
        let text = self.replies().ask_parameters(tool, &tx.missing_parameters);
        self.reply(text);
    }

    pub(super) fn ask_confirmation(&mut self) {
        let tool = self.active_tool().expect("active");
        let tx = self.active().expect("active");
        let text = self.replies().confirm(tool, &tx.arguments);
        self.reply(text);
    }

    /// A sentence naming `tool` (taken before the transaction ended: cancel, decline,
    /// interruption, expiry, end of session).
    pub(super) fn say_about(&mut self, which: About, tool: Option<&Tool>) {
        if let Some(tool) = tool {
            let text = self.replies().about(which, tool);
            self.reply(text);
        }
    }

    /// LC-1: the requested tool is not offered to this tenant; the reply names it.
    pub(super) fn say_not_offered(&mut self, tool: &str) {
        let assistant = self.assistant;
        match assistant.tools.get(tool) {
            Some(t) => self.say_about(About::NotOffered, Some(t)),
            None => self.reply(self.msgs.not_offered.clone()),
        }
    }

    /// The router picked an agent and no tool.
    pub(super) fn say_routed(&mut self, agent: &str) {
        let text = self.replies().routed(agent);
        self.reply(text);
    }

    pub(super) fn reply(&mut self, text: String) {
        if !text.is_empty() {
            self.out.replies.push(text);
        }
    }
}
