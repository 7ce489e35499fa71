//! Parameters and their interpretation: the typed parsers' clear reading (PR-1, MG-5), the
//! interpreter's reading of free text against the transaction in flight (steps 5 and 6, PR-6),
//! and validating, merging and explaining values (MG-1..MG-6).

use std::collections::BTreeMap;

use serde_json::Value;

use super::handover::HandoffReason;
use super::{confident, required_names, Flowing, Run};
use crate::domain::catalog::OnAttemptsExhausted;
use crate::domain::decision::{InterpreterAct, Skill};
use crate::domain::effect::{Answer, FallbackReason, InterpreterRequest, ParameterBrief, Request};
use crate::domain::parameter::{self, InvalidReason};
use crate::domain::transaction::TransactionStatus;

/// What the interpreter's reading did to the transaction in flight.
pub(super) enum Reading {
    /// It settled the turn (values merged, a decline, the confirmation question asked again).
    Settled,
    /// It cancelled the transaction of this tool (PR-2); the router may still find a new intent.
    Cancelled(String),
    /// Nothing actionable: unclear, below the threshold, a failure, or no usable value.
    Nothing,
}

/// Valid values by parameter, and the invalid ones as (name, raw text, why).
type Values = (
    BTreeMap<String, Value>,
    Vec<(String, String, InvalidReason)>,
);

impl Run<'_> {
    /// Step 3: typed parsers read the message against all of the transaction's parameters (PR-1,
    /// MG-4a, MG-6). Only clear readings settle the turn, so a number inside an unrelated
    /// sentence goes on to the classifier. A reading settles it when it fills a pending
    /// parameter, corrects a collected value (a valid value that differs from it: merged, and
    /// in `AWAITING_CONFIRMATION` asked again, never executed), or is a clear invalid attempt
    /// at a pending or collected parameter (explained, MG-4).
    pub(super) async fn try_typed_fill(&mut self, text: &str) -> Flowing<bool> {
        let Some(reading) = self.typed_reading(text) else {
            return Ok(false);
        };
        let reading = self.spelled_reading(text, &reading).unwrap_or(reading);
        let reading = match reading.whole {
            true => reading,
            false => self.correction_beside_asides(text).unwrap_or(reading),
        };
        let tool = self.active_tool().expect("typed_reading needs one");
        let tx = self.active().expect("active");
        let pending = tx.missing_parameters.clone();
        let collected = tx.arguments.clone();
        let settles = reading.values.iter().any(|v| {
            let typed = tool.parameter(&v.name).is_some_and(|p| p.kind.is_typed());
            let fills = pending.contains(&v.name);
            // A correction is a message that only corrects (`I meant PED-1002`); a value inside
            // another request (`I want to track PED-1002`) goes on to the classifier.
            let corrects =
                reading.whole && collected.get(&v.name).is_some_and(|old| *old != v.value);
            typed && (fills || corrects)
        });
        // MG-4: a rejected value for a pending parameter, or a clear attempt at correcting a
        // collected one, is explained, even when other values of the same message were merged.
        let rejected = reading.rejected.into_iter().find(|r| {
            pending.contains(&r.name) || (reading.whole && collected.contains_key(&r.name))
        });
        if !settles && rejected.is_none() {
            return Ok(false);
        }
        let spans: Vec<_> = reading.values.iter().map(|v| v.span.clone()).collect();
        let mut valid: BTreeMap<String, Value> = reading
            .values
            .into_iter()
            .map(|v| (v.name, v.value))
            .collect();
        if let Some((name, value)) = self.free_text_reading(text, &spans) {
            valid.entry(name).or_insert(value);
        }
        let invalid: Vec<(String, String, InvalidReason)> = rejected
            .into_iter()
            .map(|r| (r.name, r.invalid.raw, r.invalid.reason))
            .collect();
        self.apply_values(valid, invalid).await?;
        Ok(true)
    }

    /// PR-1 for a number in words: a message that is nothing but a pending value written in
    /// words, its label and filler (`two hundred ten`, `número trezentos e doze`, `cento e
    /// cinquenta reais`), or a correction of a collected one (`na verdade o cep é zero quatro
    /// cinco três oito um três dois`, MG-6), reads as its digits would. Inside any other
    /// sentence a number in words is left to the model (`it was around seventy reais, I
    /// think`), as is an approximation (`uns trinta e pouco`, `parameter::spelled`). Spans
    /// cover the message.
    fn spelled_reading(
        &self,
        text: &str,
        typed: &parameter::Extraction,
    ) -> Option<parameter::Extraction> {
        let tx = self.active()?;
        let settles = |r: &parameter::Extraction| {
            r.values.iter().any(|v| {
                tx.missing_parameters.contains(&v.name)
                    || (r.whole && tx.arguments.get(&v.name).is_some_and(|old| *old != v.value))
            })
        };
        if settles(typed) {
            return None;
        }
        let std::borrow::Cow::Owned(digits) = parameter::spelled::as_digits(text) else {
            return None;
        };
        let mut read = self.typed_reading(&digits)?;
        if !(read.whole && settles(&read)) {
            return None;
        }
        for v in &mut read.values {
            v.span = 0..text.len();
        }
        for r in &mut read.rejected {
            r.span = 0..text.len();
        }
        Some(read)
    }

    /// MG-6: a correction with chat around it (`sim mas é 25,40 na real, me confundi`; `Sim,
    /// por gentileza, porém o número correto é 1502. Peço desculpas pelo equívoco.`): the
    /// clauses that are asides (`confirmation::is_aside`: no value, answer, action verb or
    /// question word) are set apart and the rest is read again. It counts only when that rest
    /// reads whole and changes a collected value; spans cover the message.
    pub(super) fn correction_beside_asides(&self, text: &str) -> Option<parameter::Extraction> {
        let tx = self.active()?;
        if tx.arguments.is_empty() {
            return None;
        }
        let verbs = self.confirmation_verbs();
        let mut rest = String::new();
        let mut set_apart = false;
        for clause in clauses_of(text) {
            let words = parameter::folded_words(clause);
            if crate::domain::confirmation::is_aside(&words, &verbs) {
                set_apart = true;
            } else {
                rest.push_str(clause);
                rest.push_str(", ");
            }
        }
        if !set_apart {
            return None;
        }
        let mut read = self.typed_reading(&rest)?;
        let corrects = read.whole
            && read
                .values
                .iter()
                .any(|v| tx.arguments.get(&v.name).is_some_and(|old| *old != v.value));
        if !corrects {
            return None;
        }
        for v in &mut read.values {
            v.span = 0..text.len();
        }
        read.rejected.clear();
        Some(read)
    }

    /// MG-5 for free text: a message that starts a transaction, or answers it with typed values,
    /// while a free-text parameter is missing, fills that parameter with the message itself
    /// when it says more than a request for the tool: it has at least three words outside the
    /// typed values and filler, and two of them (of three letters or more) are not request words:
    /// the tool's title, action verbs and parameter labels, the words that frame any request
    /// ([`REQUEST_WORDS`]) and the assistant's conversational examples (`good morning`), compared
    /// by their first five letters so inflections match (`charged` ~ `charge`, `contestar` ~
    /// `contestação`). The tool's example utterances are not request words: customers' examples
    /// of a contestation carry reasons (`I was charged twice`), and a message that repeats one
    /// says why. `I want to dispute a charge` gives no reason; `there's a charge of R$ 150 I
    /// don't recognise, I want to dispute it` does. A bare yes or no never fills it.
    pub(super) fn free_text_reading(
        &self,
        text: &str,
        spans: &[std::ops::Range<usize>],
    ) -> Option<(String, Value)> {
        let tool = self.active_tool()?;
        let tx = self.active()?;
        let param = tool.parameters.iter().find(|p| {
            matches!(p.kind, parameter::ParameterKind::Text { .. })
                && tx.missing_parameters.contains(&p.name)
        })?;
        let conversation = self
            .assistant
            .conversation
            .iter()
            .flat_map(|t| t.examples.values())
            .flatten();
        let phrases = tool
            .action_verbs
            .values()
            .flatten()
            .chain(conversation)
            .chain([&tool.title.en, &tool.title.pt_br])
            .chain(
                tool.parameters
                    .iter()
                    .flat_map(|p| [&p.label.en, &p.label.pt_br]),
            );
        let mut known: Vec<String> = parameter::REQUEST_FRAME
            .iter()
            .chain(REQUEST_WORDS)
            .map(|w| (*w).to_owned())
            .collect();
        for phrase in phrases {
            known.extend(parameter::content_words(phrase, &[]));
        }
        let words = parameter::content_words(text, spans);
        let news = words
            .iter()
            .filter(|w| w.chars().count() > 2 && !w.chars().all(|c| c.is_ascii_digit()))
            .filter(|w| !known.iter().any(|k| same_stem(k, w)))
            .count();
        let objects = words.iter().any(|w| OBJECTION_WORDS.contains(&w.as_str()));
        if (news < 2 && !objects)
            || words.len() < 3
            || crate::domain::confirmation::recognise(text).is_some()
        {
            return None;
        }
        // A customer who explains at length has given the reason: what fits of it is kept (its
        // first words up to the limit), rather than asking for a reason already given.
        let text = match param.kind {
            parameter::ParameterKind::Text { max_len } => words_within(text.trim(), max_len),
            _ => text.trim(),
        };
        let value = param
            .kind
            .validate(&Value::String(text.to_owned()), self.turn.locale);
        value.ok().map(|v| (param.name.clone(), v))
    }

    /// The typed parsers' clear reading of `text` for the active tool's parameters (PR-1, MG-5),
    /// with correction forms (MG-6) and the parameter the last reply asked for (MG-4a: the first
    /// missing one, which `ask_parameters` names first).
    pub(super) fn typed_reading(&self, text: &str) -> Option<parameter::Extraction> {
        let tool = self.active_tool()?;
        let tx = self.active()?;
        let asked = tx.missing_parameters.first().map(String::as_str);
        // MG-6: correction forms exist only where there is something to correct.
        let correction = !tx.arguments.is_empty()
            || tx.status == crate::domain::transaction::TransactionStatus::AwaitingConfirmation;
        let options = parameter::ClearOptions {
            asked,
            correction,
            held: Some(&tx.arguments),
        };
        Some(tool.read_clear_values(text, self.turn.locale, options))
    }

    /// MG-5: the typed parsers' clear reading of the message wins over a model's value for the
    /// same parameter and adds the parameters the model missed.
    pub(super) fn with_typed_reading(
        &self,
        text: &str,
        valid: BTreeMap<String, Value>,
        invalid: Vec<(String, String, InvalidReason)>,
    ) -> Values {
        merge_reading(self.typed_reading(text), valid, invalid)
    }

    /// Steps 5 and 6: the interpreter reads free text against the transaction in flight. A model
    /// never confirms (PR-6): `affirm` only asks the confirmation question again.
    pub(super) async fn read_with_interpreter(&mut self, text: &str) -> Flowing<Reading> {
        self.interpreted = true;
        let tool = self.active_tool().expect("caller checked the transaction");
        let tx = self.active().expect("caller checked the transaction");
        let agent = tx.agent.clone();
        self.set_route(&agent, Some(tx.tool.clone()));
        let request = InterpreterRequest {
            message: text.to_owned(),
            assistant: self.assistant.agent_id.clone(),
            locale: self.turn.locale,
            transaction: self.summary().expect("active"),
            parameters: tool
                .parameters
                .iter()
                .map(|p| ParameterBrief {
                    name: p.name.clone(),
                    type_name: p.kind.type_name().to_owned(),
                    label: p.label.get(self.turn.locale).to_owned(),
                    required: p.required,
                })
                .collect(),
        };
        let answer = match self.ask(Request::Interpret(request)).await {
            Answer::Interpreter(a) => a,
            other => return Err(self.mismatch("interpreter", &other)),
        };
        let decision = match answer {
            Ok(d) if confident(d.confidence, self.settings.interpreter_confidence_threshold) => d,
            Ok(_) => {
                self.fallback(Skill::Interpreter, FallbackReason::LowConfidence);
                return Ok(Reading::Nothing);
            }
            Err(f) => {
                self.fallback(Skill::Interpreter, f.into());
                return Ok(Reading::Nothing);
            }
        };
        let awaiting = self.active_status() == Some(TransactionStatus::AwaitingConfirmation);
        match decision.act {
            InterpreterAct::Provide => {
                let (valid, invalid) = self.validate_values(&decision.arguments);
                let (valid, invalid) = self.with_typed_reading(text, valid, invalid);
                if valid.is_empty() && invalid.is_empty() {
                    return Ok(Reading::Nothing);
                }
                self.apply_values(valid, invalid).await?;
                Ok(Reading::Settled)
            }
            InterpreterAct::Cancel => {
                let cancelled = self.active().map(|tx| tx.tool.clone()).unwrap_or_default();
                if self.active_status() == Some(TransactionStatus::Executing) {
                    self.reply(self.msgs.nothing_to_cancel.clone());
                    return Ok(Reading::Settled);
                }
                self.cancel_by_user()?;
                Ok(Reading::Cancelled(cancelled))
            }
            InterpreterAct::Affirm if awaiting => {
                // PR-6: only a button or the recogniser confirms; ask the same question again.
                self.ask_confirmation();
                Ok(Reading::Settled)
            }
            InterpreterAct::Deny if awaiting => {
                self.declined()?;
                Ok(Reading::Settled)
            }
            InterpreterAct::Affirm | InterpreterAct::Deny | InterpreterAct::Unclear => {
                Ok(Reading::Nothing)
            }
        }
    }

    /// MG-1..MG-6: merges the valid values and explains the first invalid one. A change moves
    /// the transaction on from where it stands — re-running pre-validation and asking for
    /// confirmation of the arguments as they now are, in the same reply, even when part of the
    /// message was invalid (MG-6's safety invariant: only shown arguments are ever confirmed).
    pub(super) async fn apply_values(
        &mut self,
        valid: BTreeMap<String, Value>,
        invalid: Vec<(String, String, InvalidReason)>,
    ) -> Flowing<()> {
        let changed = self.merge(valid);
        if changed {
            self.active_mut().confirmation_received = false;
        }
        let Some((name, raw, why)) = invalid.into_iter().next() else {
            self.active_mut().failed_attempts = 0;
            return self.advance().await;
        };
        if self.invalid_value(&name, &raw, why)? {
            return Ok(()); // attempts exhausted: the tool's way out took the turn
        }
        let complete = self
            .active()
            .is_some_and(|tx| tx.missing_parameters.is_empty());
        if changed && complete {
            return self.advance().await;
        }
        if self.active_status() == Some(TransactionStatus::AwaitingConfirmation) {
            // Nothing changed: the question as it stands is still the one to answer.
            self.ask_confirmation();
        }
        Ok(())
    }

    /// MG-4: validates model-provided values against their parameter types.
    pub(super) fn validate_values(&self, arguments: &BTreeMap<String, Value>) -> Values {
        let mut valid = BTreeMap::new();
        let mut invalid = Vec::new();
        let Some(tool) = self.active_tool() else {
            return (valid, invalid);
        };
        for (name, raw) in arguments {
            let Some(spec) = tool.parameter(name) else {
                continue; // not a parameter of this tool: ignored, never stored
            };
            if raw.is_null() {
                continue;
            }
            match spec.kind.validate(raw, self.turn.locale) {
                Ok(v) => {
                    valid.insert(name.clone(), v);
                }
                Err(e) => invalid.push((name.clone(), e.raw, e.reason)),
            }
        }
        (valid, invalid)
    }

    /// MG-1/MG-3: `{**existing, **new}`, then `missing = required − present`. Returns whether
    /// any stored value changed.
    fn merge(&mut self, values: BTreeMap<String, Value>) -> bool {
        let tool = self
            .active_tool()
            .expect("merge needs an active transaction");
        let required = required_names(tool);
        let tx = self.active_mut();
        let mut changed = false;
        for (k, v) in values {
            if tx.arguments.get(&k) != Some(&v) {
                tx.arguments.insert(k, v);
                changed = true;
            }
        }
        tx.missing_parameters = required
            .into_iter()
            .filter(|r| !tx.arguments.contains_key(r))
            .collect();
        changed
    }

    /// MG-4: an invalid value is not merged; the reply says why and asks again; too many → the
    /// tool's configured way out. Returns true when that way out was a handoff (the turn is over).
    fn invalid_value(&mut self, name: &str, raw: &str, why: InvalidReason) -> Flowing<bool> {
        let tool = self.active_tool().expect("active");
        let max = tool.max_attempts.max(1);
        let exhausted_way = tool.on_attempts_exhausted;
        let tx = self.active_mut();
        tx.failed_attempts += 1;
        let exhausted = tx.failed_attempts >= max;
        if exhausted {
            self.active_mut().failed_attempts = 0;
            match exhausted_way {
                OnAttemptsExhausted::Handoff => {
                    self.handoff(HandoffReason::AttemptsExhausted {
                        parameter: name,
                        attempts: max,
                    })?;
                    return Ok(true);
                }
                OnAttemptsExhausted::Clarify => {
                    let text = self.replies().attempts_exhausted(tool, name, why);
                    self.reply(text);
                    return Ok(false);
                }
            }
        }
        // RP-4: what is wrong and the expected form.
        let text = self.replies().invalid_value(tool, name, raw, why);
        self.reply(text);
        Ok(false)
    }
}

/// MG-5: a typed reading wins over a model's value for the same parameter and adds the
/// parameters the model missed; its rejections are kept for parameters nothing else read.
pub(super) fn merge_reading(
    reading: Option<parameter::Extraction>,
    mut valid: BTreeMap<String, Value>,
    mut invalid: Vec<(String, String, InvalidReason)>,
) -> Values {
    let Some(reading) = reading else {
        return (valid, invalid);
    };
    for v in reading.values {
        invalid.retain(|(name, _, _)| *name != v.name);
        valid.insert(v.name, v.value);
    }
    for r in reading.rejected {
        let known = valid.contains_key(&r.name) || invalid.iter().any(|(n, _, _)| *n == r.name);
        if !known {
            invalid.push((r.name, r.invalid.raw, r.invalid.reason));
        }
    }
    (valid, invalid)
}

/// PR-1, MG-5: the clear typed reading of `text` for `tool`'s parameters. A parameter is named
/// by its name (`house_number` → `house number`), its labels in every locale and its synonyms.
/// The longest prefix of `text` of whole words within `max_chars` characters.
fn words_within(text: &str, max_chars: usize) -> &str {
    if text.chars().count() <= max_chars {
        return text;
    }
    let cut = text
        .char_indices()
        .nth(max_chars)
        .map_or(text.len(), |(i, _)| i);
    let head = &text[..cut];
    head.rfind(char::is_whitespace)
        .map_or(head, |space| head[..space].trim_end())
}

/// Words that frame any request rather than describe it (folded), beyond
/// [`parameter::REQUEST_FRAME`] (`I want to`, `can you`, `quero`, `preciso`, `pode`): what stands
/// beside them in a message is what it says.
const REQUEST_WORDS: &[&str] = &[
    "please",
    "fazer",
    // Framing a request, not a reason: `file a dispute about my last invoice`, `abrir uma
    // contestação sobre a última fatura`.
    "file",
    "open",
    "start",
    "make",
    "about",
    "regarding",
    "last",
    "latest",
    "recent",
    "abrir",
    "registrar",
    "sobre",
    "referente",
    "ultima",
    "ultimo",
    // Asking how to make it is still the request: `how do I dispute something on my bill`,
    // `como faço pra contestar uma cobrança dessa fatura`.
    "how",
    "way",
    "something",
    "como",
    "faco",
    "faz",
    "jeito",
    "algo",
    "dessa",
    "desta",
    "desse",
    "deste",
    "nessa",
    "nesta",
    // Where the charge is and how the customer reached us frame the request too: `I'm calling
    // about my bill, there's a charge on there I want to contest`, `a charge that appears on my
    // latest statement`, `tô ligando por causa da minha fatura, tem uma cobrança aí`.
    "bill",
    "statement",
    "invoice",
    "account",
    "fatura",
    "conta",
    "there",
    "appears",
    "shows",
    "showing",
    "aparece",
    "calling",
    "call",
    "ligando",
    "ligar",
    "liguei",
    "alo",
    "formally",
    "formalmente",
    "tem",
    "por",
    "causa",
    "que",
    "ai",
    // A charge that came on the bill, or a problem with it, is still no reason: `qro contestar
    // 59,90 q veio na minha fatura`, `I have a problem with my bill, I want to dispute 50`.
    "veio",
    "vieram",
    "came",
    "apareceu",
    "appeared",
    "problem",
    "problema",
    "issue",
    // Chat spellings of `quero`.
    "qro",
    "kero",
];

/// Words that say what is wrong (folded): a negation or an excess (`that I don't recognise`,
/// `que eu não reconheço`, `cobraram a mais`, `charged twice`). With one of them beside the
/// request, the message gives a reason however few other words it has.
const OBJECTION_WORDS: &[&str] = &[
    // An apostrophe splits a word here: `don't` is `don` and `t`.
    "not", "never", "don", "dont", "didn", "didnt", "doesn", "doesnt", "haven", "wasn", "isn",
    "twice", "double", "wrong", "nao", "nunca", "nem", "mais", "duas", "dobro", "errado", "errada",
    "indevida", "indevido",
];

/// Two folded words match when they are equal or share their first five letters (`charged` and
/// `charge`, `contestar` and `contestacao`): a stem without a stemmer, enough to tell request
/// words from a description.
fn same_stem(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    let prefix = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    prefix >= 5
}

/// The clauses of a message: split at `,` `.` `;` `!` followed by a space or the end, so a
/// number's separators (`25,40`, `1.234,56`) stay inside it.
fn clauses_of(text: &str) -> Vec<&str> {
    parameter::parts(text, &[',', '.', ';', '!'])
}
