//! Steps 3 to 6 for free text: the typed fill and the confirmation recogniser first, then the
//! session-control classifier, the interpreter for the transaction in flight, and the router,
//! and what the router's answer does to the transaction (PR-2..PR-5).

use std::collections::BTreeMap;

use serde_json::Value;

use super::handover::HandoffReason;
use super::values::Reading;
use super::{confident, Flowing, Run};
use crate::domain::confirmation::{self, Confirmation};
use crate::domain::decision::{ModelFailure, RouterDecision, SessionControl, Skill};
use crate::domain::effect::{Answer, FallbackReason, ModelFreeReading, Request, RouterRequest};
use crate::domain::reply::About;
use crate::domain::transaction::{reason, TransactionStatus};

/// Words that point back at what is being discussed (folded): a question holding one is about
/// the transaction in flight, not a request for another tool (PR-3).
const POINTING_BACK: &[&str] = &[
    "this", "that", "it", "isso", "isto", "esse", "essa", "este", "aquilo",
];

/// Nouns of time a demonstrative dates rather than points back with (folded): `this month`,
/// `essa semana`.
const TIME_NOUNS: &[&str] = &[
    "month",
    "week",
    "year",
    "morning",
    "afternoon",
    "evening",
    "time",
    "mes",
    "semana",
    "ano",
    "manha",
    "tarde",
    "noite",
    "vez",
];

/// Words that ask which one (folded).
const WHICH: &[&str] = &["which", "what", "qual", "quais", "que"];

/// A parsed router answer that counts.
enum Routed {
    /// Nothing usable: fallback or out of scope (`true` = the router said out of scope).
    Nowhere { out_of_scope: bool },
    Agent {
        agent: String,
        tool: Option<String>,
        arguments: BTreeMap<String, Value>,
    },
    /// PR-3a, SC-9: a question about a tool or a conversational intent, its reply text, and
    /// whether it takes leave (`ends_session`).
    Topic { reply: String, ends: bool },
}

impl Run<'_> {
    // ---- steps 3 to 6: free text ----

    pub(super) async fn on_text(&mut self, text: &str) -> Flowing<()> {
        let Some(text) = self.text_to_read(text) else {
            return Ok(());
        };
        let text = text.as_str();
        // Step 3: PR-1 typed fill, PR-6 recogniser. No model when they decide.
        let mut refusal: Option<&str> = None;
        match self.active_status() {
            Some(TransactionStatus::CollectingParameters | TransactionStatus::PreValidation)
                if Box::pin(self.try_typed_fill(text)).await? =>
            {
                self.out.settled_without_model = Some(ModelFreeReading::TypedFill);
                return Ok(());
            }
            // A resend (a bad connection delivers the request again: `quero cancelar o pedido
            // 310120` twice) is no answer to the confirmation its first copy opened, however
            // its words read: the question is asked again and nothing executes.
            Some(TransactionStatus::AwaitingConfirmation) if self.resends_last_message(text) => {
                self.out.settled_without_model = Some(ModelFreeReading::Resend);
                self.ask_pending();
                return Ok(());
            }
            Some(TransactionStatus::AwaitingConfirmation) => match self.recognise(text) {
                Some(Confirmation::Affirm) => {
                    self.out.settled_without_model = Some(ModelFreeReading::Affirmed);
                    return Box::pin(self.confirmed()).await;
                }
                Some(Confirmation::Deny) => {
                    self.out.settled_without_model = Some(ModelFreeReading::Declined);
                    return self.declined();
                }
                // PR-6 with MG-6: yes with the values shown said back (`sim, cancela o
                // PED-90121`, `yes, number 10, cep 70040-010`) confirms what was shown.
                None if self.affirms_restating(text) => {
                    self.out.settled_without_model = Some(ModelFreeReading::Affirmed);
                    return Box::pin(self.confirmed()).await;
                }
                // MG-6: a correction (`I meant PED-1002`, `yes, but the number is 210`) is
                // merged and asked again, with no model call.
                None if Box::pin(self.try_typed_fill(text)).await? => {
                    self.out.settled_without_model = Some(ModelFreeReading::Correction);
                    return Ok(());
                }
                // PR-6: `melhor não, vou esperar` — a refusing first clause, nothing after it
                // that affirms or names the action: declined (always safe), unless session
                // control hands off or ends (`não é isso, quero falar com um atendente`).
                // `let me check with my bank first. don't submit it yet`: a deferral, then a
                // refusal — declined the same way, with nothing after it to route.
                None => {
                    let verbs = self.confirmation_verbs();
                    refusal = confirmation::refuses_first(text, &verbs).or_else(|| {
                        confirmation::refuses_after_deferral(text, &verbs).then_some("")
                    });
                }
            },
            _ => {}
        }
        // Step 4: the session-control classifier.
        if self.settings.enable_route_stickiness {
            let control = match self.classify(text).await? {
                // SC-10: consent is no end, however the classifier reads it: ending would cancel
                // what the customer just agreed to. It goes on as CONTINUE; a model never
                // confirms (PR-6), so what is pending is asked again.
                Some(SessionControl::EndSession) if self.consents(text) => {
                    Some(SessionControl::Continue)
                }
                control => control,
            };
            match control {
                Some(SessionControl::HumanHandoff) => {
                    return self.handoff(HandoffReason::Classifier(self.classifier_confidence))
                }
                Some(SessionControl::EndSession) => return self.end_session(),
                _ if refusal.is_some() => return Box::pin(self.refused(text, refusal)).await,
                // Step 5 (SC-3: CONTINUE without an active agent is ROUTE; with an active
                // agent but no transaction, the router decides).
                Some(SessionControl::Continue)
                    if self.state.active_agent.is_some()
                        && self.state.active_transaction.is_some() =>
                {
                    return match Box::pin(self.read_with_interpreter(text)).await? {
                        Reading::Settled => Ok(()),
                        // PR-2: the same message may carry a new intent; the router decides.
                        Reading::Cancelled(tool) => Box::pin(self.route(text, Some(&tool))).await,
                        Reading::Nothing => Box::pin(self.unread(text)).await,
                    };
                }
                _ => {}
            }
        }
        if refusal.is_some() {
            return Box::pin(self.refused(text, refusal)).await;
        }
        // Step 6: the router.
        Box::pin(self.route(text, None)).await
    }

    /// PR-6: a refusing first clause declines. When what follows it gives a value (`don't
    /// cancel it, just track PED-2719 for me`, `não, cancela o PED-2874 de uma vez`) or opens
    /// with another tool's action verb (`não, pera, esquece. mostra minha fatura aí`) it may be
    /// a new request: the message goes to the router, as a withdrawal's does (PR-2), which must
    /// not reopen the declined tool. Anything else after it is the refusal's reason (`melhor
    /// não, vou esperar pra ver se chega`).
    async fn refused(&mut self, text: &str, rest: Option<&str>) -> Flowing<()> {
        let tool = self.active().map(|t| t.tool.clone());
        let asks_anew = rest.is_some_and(|rest| {
            self.gives_a_value(rest) || self.opens_with_another_tools_verb(rest)
        });
        match tool {
            Some(tool) if asks_anew => {
                // The request that follows is answered in the same reply: the decline says what
                // was not done, without asking what else it can do (RP-1).
                self.declined_quietly()?;
                Box::pin(self.route(text, Some(&tool))).await
            }
            _ => self.declined(),
        }
    }

    /// The router's answer for `text`, read against the thresholds (a route to `cancelled` is
    /// none), with the look-up it leaned to and how confidently, whatever the thresholds.
    async fn routed(
        &mut self,
        text: &str,
        cancelled: Option<&str>,
    ) -> Flowing<(Routed, Option<(String, f64)>)> {
        let request = RouterRequest {
            message: text.to_owned(),
            locale: self.turn.locale,
            assistant: self.assistant.agent_id.clone(),
            active_agent: self.state.active_agent.clone(),
            active_transaction: self.summary(),
            after_cancel: cancelled.is_some(),
        };
        let answer = match self.ask(Request::Route(request)).await {
            Answer::Router(a) => a,
            other => return Err(self.mismatch("router", &other)),
        };
        let leaning = match &answer {
            Ok(RouterDecision::Route {
                intent: Some(tool),
                confidence,
                ..
            }) => Some((tool.clone(), *confidence)),
            _ => None,
        };
        let mut routed = self.read_route(answer);
        if let Routed::Agent { tool: Some(t), .. } = &routed {
            if Some(t.as_str()) == cancelled {
                routed = Routed::Nowhere {
                    out_of_scope: false,
                };
            }
        }
        Ok((routed, leaning))
    }

    /// Step 6: the router. `cancelled`: the tool of a transaction this same message just cancelled
    /// (PR-2), which the router's answer must not reopen.
    pub(super) async fn route(&mut self, text: &str, cancelled: Option<&str>) -> Flowing<()> {
        let (routed, leaning) = self.routed(text, cancelled).await?;
        let after_cancel = cancelled.is_some();
        if let (Routed::Nowhere { .. }, None, false) = (&routed, self.active(), after_cancel) {
            let leaning = leaning.as_ref().map(|(tool, c)| (tool.as_str(), *c));
            if let Some(reply) = self.question_on_last_result(text, leaning) {
                self.reply(reply);
                return Ok(());
            }
            if let Some((agent, tool)) = self.another_value_for_last_lookup(text, leaning) {
                return Box::pin(self.route_fresh(text, agent, Some(tool), BTreeMap::new())).await;
            }
        }
        if let Routed::Topic { reply, ends } = routed {
            self.reply(reply);
            if ends {
                // SC-9: a farewell is answered, then ends the session as END_SESSION does.
                return self.end_session();
            }
            // Not a request: answered, and whatever is pending is asked again, untouched.
            self.ask_pending();
            return Ok(());
        }
        let active = self.active().map(|tx| (tx.agent.clone(), tx.tool.clone()));
        match (routed, active) {
            (Routed::Topic { .. }, _) => Ok(()),
            (Routed::Nowhere { out_of_scope }, Some(_)) => {
                Box::pin(self.keep_after_router(text, BTreeMap::new(), out_of_scope)).await
            }
            (Routed::Nowhere { .. }, None) => {
                if !after_cancel {
                    self.reply(self.msgs.out_of_scope.clone());
                }
                Ok(())
            }
            (
                Routed::Agent {
                    agent,
                    tool,
                    arguments,
                },
                Some((active_agent, active_tool)),
            ) => {
                let same_tool = tool.as_deref() == Some(active_tool.as_str());
                let generic = tool.is_none();
                if same_tool || (generic && agent == active_agent) {
                    // PR-4: the transaction's own tool or a generic mention of its agent; PR-2:
                    // `never mind the address change` names the tool and still cancels it.
                    self.set_route(&agent, Some(active_tool));
                    Box::pin(self.keep_after_router(text, arguments, false)).await
                } else if let Some(tool) = tool.filter(|_| !generic) {
                    Box::pin(self.interrupt_for(text, agent, tool, arguments)).await
                } else {
                    // A generic mention of another agent is not a new intent: keep and clarify.
                    Box::pin(self.keep_after_router(text, BTreeMap::new(), false)).await
                }
            }
            (
                Routed::Agent {
                    agent,
                    tool,
                    arguments,
                },
                None,
            ) => Box::pin(self.route_fresh(text, agent, tool, arguments)).await,
        }
    }

    /// PR-3: the router named another tool while a transaction is in flight. An unambiguous new
    /// intent interrupts it; a question about something else keeps it and asks again.
    async fn interrupt_for(
        &mut self,
        text: &str,
        agent: String,
        tool: String,
        arguments: BTreeMap<String, Value>,
    ) -> Flowing<()> {
        if let Some((name, value)) = self.free_text_answer(text) {
            return self
                .apply_values(BTreeMap::from([(name, value)]), Vec::new())
                .await;
        }
        // A look-up put first in so many words is asked for, whatever it points back at.
        let lookup_first = self
            .assistant
            .tools
            .get(&tool)
            .filter(|t| !t.confirmation && crate::domain::hold_on::puts_question_first(text));
        let arguments = match lookup_first {
            Some(lookup) => self.with_held_values(lookup, text, arguments),
            None if !self.asks_for(&tool, text) => {
                return Box::pin(self.keep_after_router(text, BTreeMap::new(), false)).await;
            }
            None => arguments,
        };
        if !self.assistant.offers(&self.turn.identity.tenant_id, &tool) {
            self.say_not_offered(&tool);
            self.ask_pending();
            return Ok(());
        }
        let stopped = self.active_tool();
        self.terminate(TransactionStatus::Cancelled, reason::INTERRUPTED)?;
        self.say_about(About::Interrupted, stopped);
        self.set_route(&agent, Some(tool.clone()));
        Box::pin(self.open(&agent, &tool, arguments, text)).await
    }

    /// PR-3 while a transaction is in flight: whether `text` asks for `tool` clearly enough to
    /// interrupt it. A statement does (`forget it, just tell me how much my bill is`), and so
    /// does a question that names one of the tool's action verbs, not negated (`can you show me
    /// the bill?`), gives a value the tool reads (`where is PED-3388 right now?`) or does not
    /// point back (`where is my order?`, `how much is my bill this month?`: a demonstrative
    /// before a noun of time dates it). A question that points back at what is in flight
    /// (`this`, `it`, `isso`: `will this affect my next bill?`, `what's there to explain? can't
    /// you see it on my account?`), or asks which value a missing parameter means (`qual
    /// número, o da nota fiscal?`), asks about it: interrupting would drop the transaction and
    /// run a tool nobody asked for. A tool with no action verbs configured is asked for by any
    /// question the router gives it.
    fn asks_for(&self, tool_name: &str, text: &str) -> bool {
        let Some(tool) = self.assistant.tools.get(tool_name) else {
            return true;
        };
        let verbs: Vec<String> = tool.action_verbs.values().flatten().cloned().collect();
        if self.names_own_pending_value(tool, text)
            && !confirmation::names_a_verb_unnegated(text, &verbs)
        {
            return false;
        }
        if !text.contains(['?', '¿']) || verbs.is_empty() {
            return true;
        }
        let words = crate::domain::parameter::folded_words(text);
        // `this month` dates the question; it does not point back at what is in flight.
        let points_back = words.iter().enumerate().any(|(i, w)| {
            POINTING_BACK.contains(&w.as_str())
                && !words
                    .get(i + 1)
                    .is_some_and(|next| TIME_NOUNS.contains(&next.as_str()))
        }) || self.asks_which_value(&words);
        !points_back
            || confirmation::names_a_verb_unnegated(text, &verbs)
            || !tool
                .read_clear_values(text, self.turn.locale, Default::default())
                .values
                .is_empty()
    }

    /// Whether `text` names a value still missing in the transaction in flight that `other`
    /// does not take (`one sec, let me find the amount`, `sei lá o valor, tá na fatura` while a
    /// contestation waits for its amount): it talks about what is in flight, not about
    /// `other`, however the bill it mentions pulls the router there. Names are compared as whole
    /// folded phrases.
    fn names_own_pending_value(&self, other: &crate::domain::catalog::Tool, text: &str) -> bool {
        let (Some(tool), Some(tx)) = (self.active_tool(), self.active()) else {
            return false;
        };
        let words = crate::domain::parameter::folded_words(text);
        tool.parameters
            .iter()
            .filter(|p| {
                tx.missing_parameters.contains(&p.name) && other.parameter(&p.name).is_none()
            })
            .flat_map(|p| p.names())
            .map(|name| crate::domain::parameter::folded_words(&name))
            .any(|name| !name.is_empty() && words.windows(name.len()).any(|w| w == name.as_slice()))
    }

    /// Whether `words` ask which value is meant by a parameter still missing (`qual número, o
    /// da nota fiscal?` while the order number is asked for): `which`/`what`/`qual`/`que`
    /// right before a word of its label.
    fn asks_which_value(&self, words: &[String]) -> bool {
        let (Some(tool), Some(tx)) = (self.active_tool(), self.active()) else {
            return false;
        };
        let labels: Vec<String> = tool
            .parameters
            .iter()
            .filter(|p| tx.missing_parameters.contains(&p.name))
            .flat_map(|p| [p.label.en.as_str(), p.label.pt_br.as_str()])
            .flat_map(|l| crate::domain::parameter::content_words(l, &[]))
            .collect();
        words.windows(2).any(|pair| match pair {
            [asks, word] => WHICH.contains(&asks.as_str()) && labels.contains(word),
            _ => false,
        })
    }

    /// Step 6 with no transaction in flight: open the tool the router named, or say what the
    /// agent can do.
    pub(super) async fn route_fresh(
        &mut self,
        text: &str,
        agent: String,
        tool: Option<String>,
        arguments: BTreeMap<String, Value>,
    ) -> Flowing<()> {
        self.set_route(&agent, tool.clone());
        self.state.active_agent = Some(agent.clone());
        match tool {
            Some(tool) if self.assistant.offers(&self.turn.identity.tenant_id, &tool) => {
                if let Some(reply) = self.last_result_again(&tool, text) {
                    self.reply(reply);
                    return Ok(());
                }
                Box::pin(self.open(&agent, &tool, arguments, text)).await
            }
            Some(tool) => {
                // LC-1: a tool not offered to this tenant ends OUT_OF_SCOPE.
                self.open_bare(&agent, &tool)?;
                self.terminate(TransactionStatus::OutOfScope, reason::NOT_OFFERED)?;
                self.say_not_offered(&tool);
                Ok(())
            }
            None => {
                self.say_routed(&agent);
                Ok(())
            }
        }
    }

    fn read_route(&mut self, answer: Result<RouterDecision, ModelFailure>) -> Routed {
        let threshold = self.settings.router_confidence_threshold;
        match answer {
            Err(f) => {
                self.fallback(Skill::Router, f.into());
                Routed::Nowhere {
                    out_of_scope: false,
                }
            }
            Ok(RouterDecision::OutOfScope { .. }) => Routed::Nowhere { out_of_scope: true },
            Ok(RouterDecision::Route { confidence, .. }) if !confident(confidence, threshold) => {
                self.fallback(Skill::Router, FallbackReason::LowConfidence);
                Routed::Nowhere {
                    out_of_scope: false,
                }
            }
            Ok(RouterDecision::Topic { confidence, .. })
                if !confident(confidence, self.settings.topic_confidence_threshold) =>
            {
                self.fallback(Skill::Router, FallbackReason::LowConfidence);
                Routed::Nowhere {
                    out_of_scope: false,
                }
            }
            Ok(RouterDecision::Topic {
                tool,
                topic,
                confidence,
            }) => match self.topic_reply(tool, &topic) {
                // An end must be meant: a farewell counts from the session-control threshold.
                Some((_, true))
                    if !confident(
                        confidence,
                        self.settings.route_stickiness_confidence_threshold,
                    ) =>
                {
                    self.fallback(Skill::Router, FallbackReason::LowConfidence);
                    Routed::Nowhere {
                        out_of_scope: false,
                    }
                }
                Some((reply, ends)) => Routed::Topic { reply, ends },
                None => {
                    self.fallback(Skill::Router, FallbackReason::UnknownTarget);
                    Routed::Nowhere {
                        out_of_scope: false,
                    }
                }
            },
            Ok(RouterDecision::Route {
                agent,
                intent,
                arguments,
                ..
            }) => {
                let intent = intent.filter(|i| !i.is_empty() && *i != agent);
                let agent_known = self.assistant.agents.contains_key(&agent);
                let tool_known = intent.as_ref().is_none_or(|i| {
                    self.assistant
                        .tools
                        .get(i)
                        .is_some_and(|t| t.agent == agent)
                });
                if agent_known && tool_known {
                    Routed::Agent {
                        agent,
                        tool: intent,
                        arguments,
                    }
                } else {
                    self.fallback(Skill::Router, FallbackReason::UnknownTarget);
                    Routed::Nowhere {
                        out_of_scope: false,
                    }
                }
            }
        }
    }

    /// PR-6: the recogniser, with the pending tool's action verbs in every locale.
    fn recognise(&self, text: &str) -> Option<Confirmation> {
        let verbs = self.confirmation_verbs();
        confirmation::recognise_with(text, &verbs)
            .or_else(|| confirmation::answer_after_asides(text, &verbs, &self.catalog_verbs()))
            .or_else(|| confirmation::answer_before_asides(text, &verbs, &self.catalog_verbs()))
    }

    /// Whether `text` is the customer's previous message again (compared folded, spacing
    /// aside) and that message opened the transaction: the request resent. A message repeated
    /// after a correction was asked again (`sim, cancela o PED-2003` twice) is an answer.
    fn resends_last_message(&self, text: &str) -> bool {
        let (Some(last), Some(tx)) = (
            self.state
                .history
                .iter()
                .rev()
                .find(|e| e.role == crate::domain::state::Speaker::User),
            self.active(),
        ) else {
            return false;
        };
        let fold = |t: &str| crate::domain::parameter::folded_words(t).join(" ");
        tx.turn_ids.first() == Some(&last.turn_id)
            && !fold(text).is_empty()
            && fold(text) == fold(&last.text)
    }

    /// PR-6 with MG-6: whether `text` affirms while saying back the values the confirmation
    /// shows — every value the typed parsers read equals the one held, none is invalid, and
    /// once those values and the words that name the parameters (`ParameterSpec::names`) are set aside, the
    /// recogniser reads what remains as yes (`isso, 202`; `cancel PED-85107 yes`). A value that
    /// differs is a correction (asked again, never executed); no value at all is the
    /// recogniser's alone.
    fn affirms_restating(&self, text: &str) -> bool {
        let (Some(reading), Some(tool), Some(tx)) =
            (self.typed_reading(text), self.active_tool(), self.active())
        else {
            return false;
        };
        let restates = !reading.values.is_empty()
            && reading.rejected.is_empty()
            && reading
                .values
                .iter()
                .all(|v| tx.arguments.get(&v.name) == Some(&v.value));
        if !restates {
            return false;
        }
        let mut rest = text.to_owned();
        let mut spans: Vec<_> = reading.values.iter().map(|v| v.span.clone()).collect();
        spans.sort_by_key(|s| std::cmp::Reverse(s.start));
        for span in spans {
            if rest.is_char_boundary(span.start) && rest.is_char_boundary(span.end) {
                rest.replace_range(span, " ");
            }
        }
        let label_words: Vec<String> = tool
            .parameters
            .iter()
            .flat_map(|p| p.names())
            .filter_map(|phrase| confirmation::clauses(&phrase))
            .flatten()
            .flatten()
            .collect();
        let Some(clauses) = confirmation::clauses(&rest) else {
            return false;
        };
        let rest: Vec<String> = clauses
            .into_iter()
            .map(|c| {
                c.into_iter()
                    .filter(|w| !label_words.contains(w))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .filter(|c| !c.is_empty())
            .collect();
        confirmation::recognise_with(&rest.join(", "), &self.confirmation_verbs())
            == Some(Confirmation::Affirm)
    }

    /// Every tool's action verbs, in every locale: what makes a clause a request.
    pub(super) fn catalog_verbs(&self) -> Vec<String> {
        self.assistant
            .tools
            .values()
            .flat_map(|t| t.action_verbs.values().flatten().cloned())
            .collect()
    }

    pub(super) fn confirmation_verbs(&self) -> Vec<String> {
        // The tool's own name counts like its verbs (`yes, confirm the cancellation`, `confirmo
        // a contestação`): its words of four letters or more, in every locale.
        self.active_tool()
            .map(|t| {
                let title_words = [&t.title.en, &t.title.pt_br]
                    .into_iter()
                    .flat_map(|title| title.split_whitespace())
                    .filter(|w| w.chars().count() >= 4)
                    .map(str::to_owned);
                t.action_verbs
                    .values()
                    .flatten()
                    .cloned()
                    .chain(title_words)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The configured reply of a question about `tool` or of a conversational intent (`tool`
    /// none), in the turn's locale, after the out-of-scope message for a topic that answers a
    /// request no tool does, and whether it ends the session (`ends_session`); `None` when no
    /// such topic is configured.
    fn topic_reply(&self, tool: Option<String>, topic: &str) -> Option<(String, bool)> {
        let topics = match tool {
            Some(t) => &self.assistant.tools.get(&t)?.questions,
            None => &self.assistant.conversation,
        };
        let topic = topics.iter().find(|q| q.name == topic)?;
        let reply = topic.reply.get(self.turn.locale);
        if reply.is_empty() {
            return None;
        }
        let text = if topic.out_of_scope {
            format!("{} {reply}", self.msgs.out_of_scope)
        } else {
            reply.to_owned()
        };
        Some((text, topic.ends_session))
    }

    /// Step 6 with a transaction active and no new intent: the interpreter reads the message if
    /// it has not yet (a cancel on every path, PR-2); otherwise, or when it reads nothing
    /// actionable, the transaction is kept with the router's valid arguments (PR-4) and the
    /// reply clarifies when nothing was merged (PR-5).
    async fn keep_after_router(
        &mut self,
        text: &str,
        arguments: BTreeMap<String, Value>,
        out_of_scope: bool,
    ) -> Flowing<()> {
        if !self.interpreted {
            let routed = self.out.route.clone();
            match self.read_with_interpreter(text).await? {
                Reading::Settled | Reading::Cancelled(_) => return Ok(()),
                // The router's answer stands as the turn's route (null when it found none).
                Reading::Nothing => self.out.route = routed,
            }
        }
        let (valid, invalid) = self.validate_values(&arguments);
        let changes = valid.iter().any(|(k, v)| {
            self.active()
                .is_some_and(|tx| tx.arguments.get(k) != Some(v))
        });
        if !changes && invalid.is_empty() {
            return match self.free_text_answer(text) {
                Some((name, value)) => {
                    self.apply_values(BTreeMap::from([(name, value)]), Vec::new())
                        .await
                }
                None => self.clarify(out_of_scope),
            };
        }
        self.apply_values(valid, invalid).await
    }
}
