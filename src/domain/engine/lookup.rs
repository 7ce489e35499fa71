//! Look-ups after they ran (RP-1): a follow-up on the result just shown is answered from it; a
//! message that is only another value for it runs it again with that value.

use crate::domain::catalog::Tool;
use crate::domain::effect::ModelFreeReading;
use crate::domain::parameter;
use crate::domain::transaction::{AttemptOutcome, Transaction, TransactionStatus};

use super::free_text::{same_stem, QUESTION_OPENERS};
use super::Run;

/// Words that ask for the same again beside a new value (folded): `and PED-54870 too`, `e o
/// PED-2?`, `what about PED-1002?`, `e esse aqui também`.
const ADDITIVE: &[&str] = &[
    "too", "also", "what", "about", "how", "another", "other", "one", "now", "again", "tambem",
    "tb", "tbm", "outro", "outra", "esse", "essa", "este", "esta", "agora", "mais", "aqui",
];

/// Words that ask for something said before (folded): `what was the total again?`, `qual era o
/// código mesmo?`, `de novo`.
const AGAIN: &[&str] = &[
    "again",
    "mesmo",
    "msm",
    "novamente",
    "novo",
    "remind",
    "lembra",
    "repeat",
    "repete",
];

/// Words around a question on a result that ask about nothing in it: acknowledgements before it
/// (`cool and when is it due again?`, `ok got it, …`) and emphasis or a tag in it (`when
/// exactly`, `what does processing mean?`, `ships tomorrow right?`), folded.
const ASIDE: &[&str] = &[
    "ok",
    "okay",
    "cool",
    "got",
    "great",
    "nice",
    "alright",
    "thanks",
    "exactly",
    "mean",
    "means",
    "right",
    "beleza",
    "blz",
    "certo",
    "legal",
    "show",
    "valeu",
    "exatamente",
    "significa",
    "quer",
    "dizer",
    "neh",
    "ne",
    "entao",
];

/// The router's confidence from which a question it routes to the look-up just shown is taken
/// as one about that result (below the route threshold: restating runs nothing).
const LEANING: f64 = 0.6;

/// Words a question points back with at what the transaction in flight holds (folded): `where
/// is it`, `onde ele tá`.
const POINTING_AT_HELD: &[&str] = &[
    "it", "this", "that", "ele", "ela", "isso", "esse", "essa", "dele", "dela",
];

impl Run<'_> {
    /// PR-3 for a look-up the customer puts first (`actually wait, first tell me where it is`,
    /// `hold_on::puts_question_first`): a question that points back at what the interrupted
    /// transaction holds and gives no value of its own is asked about those values — the
    /// look-up runs with them instead of asking again for what the customer already gave.
    pub(super) fn with_held_values(
        &self,
        lookup: &Tool,
        text: &str,
        mut arguments: std::collections::BTreeMap<String, serde_json::Value>,
    ) -> std::collections::BTreeMap<String, serde_json::Value> {
        let words = parameter::folded_words(text);
        let points_back = words.iter().any(|w| POINTING_AT_HELD.contains(&w.as_str()));
        let Some(tx) = self
            .active()
            .filter(|_| points_back && arguments.is_empty())
        else {
            return arguments;
        };
        for p in &lookup.parameters {
            if let Some(v) = tx.arguments.get(&p.name) {
                arguments.insert(p.name.clone(), v.clone());
            }
        }
        arguments
    }

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
        let (_, tool) = self
            .last_lookup()
            .filter(|(last, _)| last.tool == tool_name)?;
        // A message with the tool's own verb asks for it again (`track my order`, `quero ver
        // minha fatura`); a follow-up asks about what it said.
        let names_action = tool.named_in(&parameter::content_words(text, &[]));
        if names_action || self.gives_a_value_for_last_lookup(text) {
            return None;
        }
        self.restated_last_result()
    }

    /// RP-1 with nothing in flight and no confident route: a question about the look-up result
    /// just shown (`when's it due again?`, `qual era o código de rastreio msm?`) is answered
    /// from it, as [`Self::last_result_again`] answers one the router names confidently, when
    /// the router leaned to that look-up ([`LEANING`] or more) and it asks for something again
    /// (`what was the total again?`, [`AGAIN`]), or
    /// every word the question asks about (beside [`ASIDE`] words) is a word of what the result
    /// can say ([`Self::last_result_vocabulary`]; they may be the tool's verbs: `tracking
    /// code`). It gives no value. Restating a result shown before runs nothing, so a lower bar
    /// than a route's is safe.
    pub(super) fn question_on_last_result(
        &mut self,
        text: &str,
        leaning: Option<(&str, f64)>,
    ) -> Option<String> {
        let (question, rest) = text.split_once('?').unwrap_or((text, ""));
        // An acknowledgement may stand first (`ok got it, and when will it arrive`).
        let opens_a_question = |part: &str| {
            parameter::content_words(part, &[])
                .iter()
                .find(|w| !ASIDE.contains(&w.as_str()))
                .is_some_and(|w| QUESTION_OPENERS.contains(&w.as_str()))
        };
        // One question: a second one after it (`so due jan 10? can i get an extension`) asks
        // something else the result does not answer.
        let asks_more = rest.contains('?') || opens_a_question(rest);
        if !(text.contains('?') || opens_a_question(question))
            || asks_more
            || self.gives_a_value_for_last_lookup(text)
        {
            return None;
        }
        let words = parameter::content_words(question, &[]);
        let (last, _) = self.last_lookup()?;
        // The router's leaning counts for a question that asks for something again.
        let leans = leaning.is_some_and(|(tool, confidence)| {
            tool == last.tool && (LEANING..=1.0).contains(&confidence)
        }) && words.iter().any(|w| AGAIN.contains(&w.as_str()));
        let shown = self.shown_last_result()?;
        let vocabulary = self.last_result_vocabulary(&shown);
        let asked: Vec<&String> = words
            .iter()
            .filter(|w| w.chars().count() > 2)
            .filter(|w| {
                ![QUESTION_OPENERS, AGAIN, ASIDE]
                    .iter()
                    .any(|list| list.contains(&w.as_str()))
            })
            .collect();
        let about_it = !asked.is_empty()
            && asked
                .iter()
                .all(|w| vocabulary.iter().any(|s| same_stem(s, w)));
        (leans || about_it).then(|| self.restated(shown))
    }

    /// The words a question on the last look-up's result may ask about: those of the result as
    /// shown, of the tool's result template in the turn's locale (what any result of it can say:
    /// `when does it arrive?` of an order not shipped yet), of its fields' labels, and of the
    /// response itself (`what does processing mean?`, `correios?`).
    fn last_result_vocabulary(&self, shown: &str) -> Vec<String> {
        let mut texts = vec![shown.to_owned()];
        if let Some((last, tool)) = self.last_lookup() {
            let locale = self.turn.locale;
            texts.extend(tool.wording.result.get(&locale).cloned());
            texts.extend(
                tool.wording
                    .result_fields
                    .values()
                    .filter_map(|f| f.label.get(&locale).cloned()),
            );
            texts.extend(
                last.evidence
                    .iter()
                    .filter(|e| e.outcome == AttemptOutcome::Ok)
                    .map(|e| e.summary.clone()),
            );
        }
        texts
            .iter()
            .flat_map(|t| parameter::content_words(t, &[]))
            .collect()
    }

    /// Whether `text` gives a value the last look-up's tool reads (`and PED-1002?`): then it
    /// asks for that value, not about the result shown.
    fn gives_a_value_for_last_lookup(&self, text: &str) -> bool {
        self.last_lookup().is_some_and(|(_, tool)| {
            let reading = tool.read_clear_values(text, self.turn.locale, Default::default());
            !reading.values.is_empty() || !reading.rejected.is_empty()
        })
    }

    /// The last look-up's result shown again, counted as restated.
    fn restated_last_result(&mut self) -> Option<String> {
        let shown = self.shown_last_result()?;
        Some(self.restated(shown))
    }

    /// `shown` (the last look-up's result as rendered), counted as restated.
    fn restated(&mut self, shown: String) -> String {
        if let Some((last, _)) = self.last_lookup() {
            let tool = last.tool.clone();
            self.out
                .results
                .push((tool, crate::domain::reply::ResultRendering::Restated));
        }
        shown
    }

    /// The last look-up's result as it was shown, from the last successful attempt's evidence;
    /// none when that evidence was truncated.
    fn shown_last_result(&self) -> Option<String> {
        let (last, tool) = self.last_lookup()?;
        self.shown_result(last, tool)
    }

    /// `last`'s result as it was shown, from its last successful attempt's evidence; none when
    /// that evidence was truncated.
    fn shown_result(&self, last: &Transaction, tool: &Tool) -> Option<String> {
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
        Some(text)
    }

    /// `did it go through?`, `deu certo então` (`domain::status_question`) answered from the
    /// state with no model: what is pending was not done yet (said, and asked again); else the
    /// last transaction's result as it was shown when it completed, or that it was not done.
    /// With no transaction at all the message goes on to be read as any other.
    pub(super) fn answered_whether_done(&mut self, text: &str) -> bool {
        if !crate::domain::status_question::asks_whether_done(text) {
            return false;
        }
        let assistant = self.assistant;
        if self
            .active()
            .is_some_and(|tx| tx.status != TransactionStatus::Executing)
        {
            self.say_about(crate::domain::reply::About::NotDone, self.active_tool());
            self.ask_pending();
        } else {
            let Some(last) = self.state.last_transaction.clone() else {
                return false;
            };
            let Some(tool) = assistant.tools.get(&last.tool) else {
                return false;
            };
            match (last.status, self.shown_result(&last, tool)) {
                (TransactionStatus::Completed, Some(shown)) => {
                    self.out.results.push((
                        last.tool.clone(),
                        crate::domain::reply::ResultRendering::Restated,
                    ));
                    self.reply(shown);
                }
                (TransactionStatus::Completed, None) => return false,
                _ => self.say_about(crate::domain::reply::About::NotDone, Some(tool)),
            }
        }
        self.out.settled_without_model = Some(ModelFreeReading::StatusQuestion);
        true
    }

    /// With nothing in flight and no confident route, a message that is only another value for
    /// the look-up that just completed (`and ped 54870 too 🙏`, `e o PED-320114?`): its values
    /// and filler, with words that ask for the same again ([`ADDITIVE`]) or correct the value
    /// (`parameter::CORRECTION_MARKERS`), and at least one value
    /// that differs from the last one's; or a new value beside any words when the router leaned
    /// to that same look-up ([`LEANING`] or more: `and my dad's one, PED-76012`), as a look-up
    /// runs nothing a customer must confirm. Returns the look-up's agent and tool, to run again.
    pub(super) fn another_value_for_last_lookup(
        &self,
        text: &str,
        leaning: Option<(&str, f64)>,
    ) -> Option<(String, String)> {
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
        // A correction of the value just looked up (`*ped380951 digitei errado`, `typo, it's
        // PED-11087`) asks for the same look-up with it.
        let only_values = parameter::content_words(text, &spans).iter().all(|w| {
            ADDITIVE.contains(&w.as_str()) || parameter::CORRECTION_MARKERS.contains(&w.as_str())
        });
        let leans = leaning.is_some_and(|(tool, confidence)| {
            tool == last.tool && (LEANING..=1.0).contains(&confidence)
        });
        (only_values || leans).then(|| (last.agent.clone(), last.tool.clone()))
    }
}
