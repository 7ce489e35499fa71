//! What the customer reads: clarifying (PR-5), asking for what is pending, the confirmation
//! question, and rendering the configured message templates.

use serde_json::Value;

use super::{Flowing, Run};
use crate::domain::locale::Locale;
use crate::domain::transaction::TransactionStatus;

impl Run<'_> {
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
        let tool = self.active_tool().expect("active");
        let labels: Vec<String> = tx
            .missing_parameters
            .iter()
            .map(|m| {
                tool.parameter(m)
                    .map(|p| p.label.get(self.turn.locale).to_owned())
                    .unwrap_or_else(|| m.clone())
            })
            .collect();
        if labels.is_empty() {
            return;
        }
        let joined = join_labels(&labels, self.turn.locale);
        let text = self.render(
            &self.msgs.ask_parameters,
            &[("labels", &joined), ("tool", &self.active_title())],
        );
        self.reply(text);
    }

    pub(super) fn ask_confirmation(&mut self) {
        let tool = self.active_tool().expect("active");
        let tx = self.active().expect("active");
        let arguments: Vec<String> = tool
            .parameters
            .iter()
            .filter_map(|p| {
                tx.arguments
                    .get(&p.name)
                    .map(|v| format!("{}: {}", p.label.get(self.turn.locale), display_value(v)))
            })
            .collect();
        let text = self.render(
            &self.msgs.confirm,
            &[
                ("tool", &self.active_title()),
                ("arguments", &arguments.join(", ")),
            ],
        );
        self.reply(text);
    }

    pub(super) fn reply(&mut self, text: String) {
        if !text.is_empty() {
            self.out.replies.push(text);
        }
    }

    pub(super) fn render(&self, template: &str, values: &[(&str, &str)]) -> String {
        let mut out = template.to_owned();
        for (k, v) in values {
            out = out.replace(&format!("{{{k}}}"), v);
        }
        out
    }
}

fn display_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn join_labels(labels: &[String], locale: Locale) -> String {
    let and = match locale {
        Locale::En => " and ",
        Locale::PtBr => " e ",
    };
    match labels {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{}{and}{last}", init.join(", ")),
    }
}
