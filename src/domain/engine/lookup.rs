//! Look-ups after they ran (RP-1): a follow-up on the result just shown is answered from it; a
//! message that is only another value for it runs it again with that value.

use crate::domain::catalog::Tool;
use crate::domain::parameter;
use crate::domain::transaction::{AttemptOutcome, Transaction, TransactionStatus};

use super::Run;

/// Words that ask for the same again beside a new value (folded): `and PED-54870 too`, `e o
/// PED-2?`, `what about PED-1002?`, `e esse aqui também`.
const ADDITIVE: &[&str] = &[
    "too", "also", "what", "about", "how", "another", "other", "one", "now", "again", "tambem",
    "tb", "tbm", "outro", "outra", "esse", "essa", "este", "esta", "agora", "mais", "aqui",
];

impl Run<'_> {
    /// The last transaction when it is a look-up (a tool with no confirmation) that completed,
    /// with its tool.
    fn last_lookup(&self) -> Option<(&Transaction, &Tool)> {
        let last = self.state.last_transaction.as_ref()?;
        let tool = self.assistant.tools.get(&last.tool)?;
        (last.status == TransactionStatus::Completed && !tool.confirmation).then_some((last, tool))
    }

    /// RP-1: a follow-up on the look-up that just completed (`when's it due again?`, `e chega
    /// quando?`) is answered from its recorded result — no second call, no new transaction —
    /// when the router names that same tool, it needs no confirmation (a look-up), and the
    /// message gives no value (`and PED-1002?`, `track PED-1001 again` run it anew) and none of
    /// the tool's action verbs (`track my order` runs it anew).
    /// The result is the last successful attempt's evidence; a truncated one is not restated.
    pub(super) fn last_result_again(&mut self, tool_name: &str, text: &str) -> Option<String> {
        let (last, tool) = self
            .last_lookup()
            .filter(|(last, _)| last.tool == tool_name)?;
        let options = parameter::ClearOptions::default();
        let reading = tool.read_clear_values(text, self.turn.locale, options);
        if !reading.values.is_empty() || !reading.rejected.is_empty() {
            return None;
        }
        // A message with the tool's own verb asks for it again (`track my order`, `quero ver
        // minha fatura`); a follow-up asks about what it said.
        let words = parameter::content_words(text, &[]);
        let names_action = tool.action_verbs.values().flatten().any(|verb| {
            let verb = parameter::content_words(verb, &[]);
            !verb.is_empty() && verb.iter().all(|v| words.contains(v))
        });
        if names_action {
            return None;
        }
        let evidence = last
            .evidence
            .iter()
            .rev()
            .find(|e| e.outcome == AttemptOutcome::Ok)?;
        if evidence.summary.ends_with('…') {
            return None;
        }
        let data = serde_json::from_str(&evidence.summary)
            .unwrap_or_else(|_| serde_json::Value::String(evidence.summary.clone()));
        let (text, _) = self.replies().completed(tool, &last.arguments, &data);
        self.out.results.push((
            tool_name.to_owned(),
            crate::domain::reply::ResultRendering::Restated,
        ));
        Some(text)
    }

    /// With nothing in flight and no confident route, a message that is only another value for
    /// the look-up that just completed (`and ped 54870 too 🙏`, `e o PED-320114?`): its values
    /// and filler, with words that ask for the same again ([`ADDITIVE`]), and at least one value
    /// that differs from the last one's. Returns the look-up's agent and tool, to run again.
    pub(super) fn another_value_for_last_lookup(&self, text: &str) -> Option<(String, String)> {
        let (last, tool) = self.last_lookup()?;
        let reading = tool.read_clear_values(text, self.turn.locale, Default::default());
        let new = reading
            .values
            .iter()
            .any(|v| last.arguments.get(&v.name) != Some(&v.value));
        if !new || !reading.rejected.is_empty() {
            return None;
        }
        let spans: Vec<_> = reading.values.iter().map(|v| v.span.clone()).collect();
        let only_values = parameter::content_words(text, &spans)
            .iter()
            .all(|w| ADDITIVE.contains(&w.as_str()));
        only_values.then(|| (last.agent.clone(), last.tool.clone()))
    }
}
