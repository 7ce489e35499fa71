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
pub(super) type Values = (
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
        if !reading.whole
            && (self.asks_another_tool(text)
                || crate::domain::hold_on::asks_before_that(text)
                || crate::domain::hold_on::puts_question_first(text))
        {
            return Ok(false);
        }
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
        let money_asked = tx
            .missing_parameters
            .first()
            .and_then(|name| self.active_tool()?.parameter(name))
            .is_some_and(|p| matches!(p.kind, parameter::ParameterKind::Money));
        let std::borrow::Cow::Owned(digits) = parameter::spelled::as_digits_in(text, money_asked)
        else {
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
            InterpreterAct::Provide => Box::pin(self.provided(text, &decision.arguments)).await,
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
            // PR-6 with PR-2: a refusal that goes on to give a value (`não, calma, eu não
            // falei pra cancelar ainda! primeiro quero saber onde tá o PED-347222`) may carry a
            // new request: declined as a cancel is, and the router decides, never reopening
            // the declined tool.
            InterpreterAct::Deny if awaiting && self.gives_a_value(text) => {
                if let Some(values) = self.correction_after_refusal(text) {
                    self.apply_values(values, Vec::new()).await?;
                    return Ok(Reading::Settled);
                }
                let declined = self.active().map(|tx| tx.tool.clone()).unwrap_or_default();
                self.declined_quietly()?;
                Ok(Reading::Cancelled(declined))
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

    /// The values the interpreter provided, validated, with the typed parsers' reading (MG-5).
    async fn provided(
        &mut self,
        text: &str,
        arguments: &BTreeMap<String, Value>,
    ) -> Flowing<Reading> {
        let (mut valid, invalid) = self.validate_values(arguments);
        valid.retain(|name, value| !self.is_bare_request_as_text(name, value, text));
        let (mut valid, invalid) = self.with_typed_reading(text, valid, invalid);
        // MG-5: the reason asked for, told beside a value the model read (`me cobraram um
        // seguro que eu nunca contratei, quarenta e nove e noventa`).
        if !valid.is_empty() {
            if let Some((name, value)) = self.free_text_answer(text) {
                valid.entry(name).or_insert(value);
            }
        }
        if valid.is_empty() && invalid.is_empty() {
            return Ok(Reading::Nothing);
        }
        self.apply_values(valid, invalid).await?;
        Ok(Reading::Settled)
    }

    /// PR-3 before PR-1: a message that names another tool's action verb (not the pending
    /// tool's), not negated, and gives that tool a value the pending tool does not take (`dá
    /// tempo de mudar o endereço né, muda pro cep 01415 000 número 45 do pedido 359247` while
    /// tracking waits for its order number) is that tool's request, not an answer to what is
    /// pending: the order number it also holds must not run the look-up. Session control and
    /// the router read it.
    fn asks_another_tool(&self, text: &str) -> bool {
        let Some(active) = self.active_tool() else {
            return false;
        };
        let names = |t: &crate::domain::catalog::Tool| {
            let verbs: Vec<String> = t.action_verbs.values().flatten().cloned().collect();
            crate::domain::confirmation::names_a_verb_unnegated(text, &verbs)
        };
        if names(active) {
            return false;
        }
        self.assistant
            .tools
            .values()
            .filter(|t| t.name != active.name && names(t))
            .any(|t| {
                t.read_clear_values(text, self.turn.locale, Default::default())
                    .values
                    .iter()
                    .any(|v| active.parameter(&v.name).is_none())
            })
    }

    /// MG-6 after a refusal: `não, espera, foi cobrado 2x então contesta 79,80` refuses the
    /// value shown, not the operation — it names the pending tool's own action verb (and no
    /// other tool's) beside a new value for one of its collected parameters. Those values
    /// correct the transaction, which is asked again (never executed).
    fn correction_after_refusal(&self, text: &str) -> Option<BTreeMap<String, Value>> {
        let tool = self.active_tool()?;
        let held = &self.active()?.arguments;
        let words = parameter::content_words(text, &[]);
        let mut others = self
            .assistant
            .tools
            .values()
            .filter(|t| t.name != tool.name);
        if !tool.named_in(&words) || others.any(|t| t.named_in(&words)) {
            return None;
        }
        let new: BTreeMap<String, Value> = self
            .typed_reading(text)?
            .values
            .into_iter()
            .filter(|v| held.get(&v.name).is_some_and(|old| *old != v.value))
            .map(|v| (v.name, v.value))
            .collect();
        (!new.is_empty()).then_some(new)
    }

    /// Whether any tool's typed parsers read a value in `text` (`track PED-2719`, `cep
    /// 01310-100`): after a refusal, the sign of a request that may follow it.
    pub(super) fn gives_a_value(&self, text: &str) -> bool {
        self.assistant.tools.values().any(|t| {
            !t.read_clear_values(text, self.turn.locale, Default::default())
                .values
                .is_empty()
        })
    }

    /// Whether a clause of `text` opens, filler aside, with an action verb of a tool other than
    /// the one in flight (`mostra minha fatura aí`, `just show me my bill instead` after a
    /// refusal): a request for that tool. A verb later in a clause is no request (`vou esperar
    /// pra ver se chega` gives a reason).
    pub(super) fn opens_with_another_tools_verb(&self, text: &str) -> bool {
        let active = self.active().map(|tx| tx.tool.as_str());
        let openings: Vec<Vec<String>> = parameter::parts(text, &['.', ',', '!', ';', '?'])
            .into_iter()
            .map(|clause| parameter::content_words(clause, &[]))
            .collect();
        self.assistant
            .tools
            .values()
            .filter(|t| Some(t.name.as_str()) != active)
            .flat_map(|t| t.action_verbs.values().flatten())
            .map(|verb| parameter::folded_words(verb))
            .any(|verb| !verb.is_empty() && openings.iter().any(|c| c.starts_with(&verb)))
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

    /// A request that points back (`cancel that one`, `o endereço dele`) and gives no value for
    /// an id parameter that the last transaction had takes that transaction's value
    /// (docs/decisions.md, "A request that points back"): what is pointed at is a thing, and an
    /// id names it; an amount or a number is never carried (`I want to contest it`). What
    /// is carried is shown before anything that needs confirmation runs; a look-up, which runs
    /// at once, takes it only when the message names its action (`track it`, `rastreia ele`) or
    /// asks about it (`when does that same order ship?`, `quando chega esse?`) — not from a
    /// complaint that mentions it (`I want a person about that last refund, it never came`).
    pub(super) fn values_pointed_back(&self, text: &str, values: &mut Values) {
        const ASKING: &[&str] = &["when", "where", "quando", "onde", "cade", "status"];
        let (Some(last), Some(tool)) = (self.state.last_transaction.as_ref(), self.active_tool())
        else {
            return;
        };
        let verbs: Vec<String> = tool.action_verbs.values().flatten().cloned().collect();
        let asks = text.contains('?')
            || parameter::folded_words(text)
                .iter()
                .any(|w| ASKING.contains(&w.as_str()));
        let asked =
            tool.confirmation || asks || crate::domain::confirmation::names_a_verb(text, &verbs);
        if !asked || !parameter::points_back(text) {
            return;
        }
        let (valid, invalid) = values;
        for spec in &tool.parameters {
            let typed = matches!(spec.kind, parameter::ParameterKind::Id { .. });
            let given = valid.contains_key(&spec.name) || invalid.iter().any(|i| i.0 == spec.name);
            if let (true, false, Some(value)) = (typed, given, last.arguments.get(&spec.name)) {
                valid.insert(spec.name.clone(), value.clone());
            }
        }
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

/// The clauses of a message: split at `,` `.` `;` `!` followed by a space or the end, so a
/// number's separators (`25,40`, `1.234,56`) stay inside it.
fn clauses_of(text: &str) -> Vec<&str> {
    parameter::parts(text, &[',', '.', ';', '!'])
}
