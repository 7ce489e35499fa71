//! How the labels the head ranks become decisions (pure functions, see the module doc of
//! [`super`]): the classifier's, the router's and the interpreter's readings, and the router's
//! second looks at a message's segments and values.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{ExampleIndex, Label};
use crate::domain::catalog::{Assistant, Tool};
use crate::domain::confirmation::{self, Confirmation};
use crate::domain::decision::{
    ClassifierDecision, InterpreterAct, InterpreterDecision, RouterDecision, SessionControl,
};
use crate::domain::effect::InterpreterRequest;
use crate::domain::locale::Locale;
use crate::domain::parameter;
use crate::domain::transaction::TransactionStatus;
use crate::domain::withdrawal;

pub(super) fn agent_of<'a>(assistant: Option<&'a Assistant>, tool: &str) -> Option<&'a str> {
    assistant?.tools.get(tool).map(|t| t.agent.as_str())
}

/// The classifier's reading of ranked labels (see the module doc).
///
/// `CONTINUE` is the transaction's own tool (and the cancel examples) while one is active, so
/// another tool of the same agent (`show me the bill` during a contestation) is a `ROUTE` the
/// router decides; with an agent active but no transaction, that agent's tools.
pub fn classify_from(
    ranked: &[(&Label, f32)],
    assistant: Option<&Assistant>,
    active_agent: Option<&str>,
    active_tool: Option<&str>,
) -> ClassifierDecision {
    let mut p = [0.0f64; 4]; // continue, route, handoff, end
    for (label, prob) in ranked {
        let prob = f64::from(*prob);
        let slot = match label {
            Label::HumanHandoff => 2,
            Label::EndSession => 3,
            Label::Cancel if active_agent.is_some() => 0,
            // While a transaction is active: its own tool continues, any other routes.
            Label::Tool(t) if Some(t.as_str()) == active_tool => 0,
            Label::Tool(_) if active_tool.is_some() => 1,
            Label::Tool(t) if active_agent.is_some() && agent_of(assistant, t) == active_agent => 0,
            _ => 1,
        };
        p[slot] += prob;
    }
    let decisions = [
        SessionControl::Continue,
        SessionControl::Route,
        SessionControl::HumanHandoff,
        SessionControl::EndSession,
    ];
    let (best, confidence) =
        p.iter().enumerate().fold(
            (1, f64::MIN),
            |acc, (i, &v)| if v > acc.1 { (i, v) } else { acc },
        );
    ClassifierDecision {
        decision: decisions[best],
        confidence: round(confidence),
    }
}

/// The router's reading of ranked labels.
///
/// The router is asked only after session control chose a route (SC-4), so the handoff and end
/// labels are not among its answers, nor the in-transaction cancel when no transaction is
/// active: its probabilities are those of the labels that remain, renormalised (a conditional
/// probability: `quero cancelar` is the order cancellation, not "abandon what is in flight").
/// When a tool is the most probable reading, the topics (PR-3a questions, SC-9 conversational
/// intents) leave the normalisation too, so adding topics does not lower a request's
/// confidence — except the questions about that tool, which a request must be told from; a
/// topic decides only when it is itself the most probable reading.
pub fn route_from(
    ranked: &[(&Label, f32)],
    assistant: Option<&Assistant>,
    in_transaction: bool,
    active: Option<&str>,
) -> RouterDecision {
    let routable = |l: &Label| match l {
        Label::HumanHandoff | Label::EndSession => false,
        Label::Cancel => in_transaction,
        _ => true,
    };
    // A request is weighed against the other requests (and "none of these"), not against the
    // topics: a topic that is not the most probable reading takes no confidence from a tool.
    // Questions about that same tool stay: telling a request from a question about it is the
    // decision PR-3a asks for (`I want to pay my bill` is no request to see it). So do the
    // questions about the transaction in progress: a question about it is no request for
    // another tool (`could you tell me whether I'll be notified by email?` while a contestation
    // awaits confirmation: the bill 0.70, the contestation's questions beside it).
    let top_tool = ranked
        .iter()
        .find(|(l, _)| routable(l))
        .and_then(|(l, _)| match l {
            Label::Tool(t) => Some(t.as_str()),
            _ => None,
        });
    let routable = |l: &Label| {
        routable(l)
            && match (top_tool, l) {
                (Some(top), Label::Topic { tool, .. }) => {
                    tool.as_deref() == Some(top) || (tool.is_some() && tool.as_deref() == active)
                }
                _ => true,
            }
    };
    let mass: f32 = ranked
        .iter()
        .filter(|(l, _)| routable(l))
        .map(|(_, p)| p)
        .sum();
    let ranked: Vec<(&Label, f32)> = ranked
        .iter()
        .filter(|(l, _)| routable(l))
        .map(|(l, p)| (*l, if mass > 0.0 { p / mass } else { 0.0 }))
        .collect();
    match ranked.first() {
        Some((Label::Tool(tool), p)) => match agent_of(assistant, tool) {
            Some(agent) => RouterDecision::Route {
                agent: agent.to_owned(),
                intent: Some(tool.clone()),
                confidence: round(f64::from(*p)),
                arguments: BTreeMap::new(),
            },
            None => RouterDecision::OutOfScope { confidence: 0.0 },
        },
        // SC-9: small talk is answered without touching anything whichever of the
        // conversational intents it is (`ok thanks` is thanks or an acknowledgement), so the
        // confidence is that of "a conversational intent": their probabilities together. A
        // question about a tool (PR-3a) has an answer of its own and stands alone.
        Some((Label::Topic { tool: None, name }, _)) => RouterDecision::Topic {
            tool: None,
            topic: name.clone(),
            confidence: round(
                ranked
                    .iter()
                    .filter(|(l, _)| matches!(l, Label::Topic { tool: None, .. }))
                    .map(|(_, p)| f64::from(*p))
                    .sum(),
            ),
        },
        // A question about a tool, read more as the question than as the request: the message
        // is about that tool as surely as the two together, and of the two it asks the question
        // (`is that including the late fee?` — items 0.72, the bill 0.27).
        Some((Label::Topic { tool, name }, p)) => RouterDecision::Topic {
            tool: tool.clone(),
            topic: name.clone(),
            confidence: round(
                f64::from(*p)
                    + ranked
                        .iter()
                        .filter(|(l, _)| matches!(l, Label::Tool(t) if Some(t) == tool.as_ref()))
                        .map(|(_, q)| f64::from(*q))
                        .sum::<f64>(),
            ),
        },
        Some((_, p)) => RouterDecision::OutOfScope {
            confidence: round(f64::from(*p)),
        },
        None => RouterDecision::OutOfScope { confidence: 0.0 },
    }
}

/// The interpreter's reading of ranked labels.
pub fn interpret_from(
    ranked: &[(&Label, f32)],
    request: &InterpreterRequest,
    asked_value: Option<BTreeMap<String, Value>>,
) -> InterpreterDecision {
    let active_tool = request.transaction.tool.as_str();
    let unclear = |confidence: f64| InterpreterDecision {
        act: InterpreterAct::Unclear,
        arguments: BTreeMap::new(),
        confidence: round(confidence),
    };
    let Some((top, top_p)) = ranked.first() else {
        return unclear(0.0);
    };
    let answer = confirmation::recognise(&request.message);
    // PR-6: a confirmation pending and a first clause that plainly refuses (`nope, let me check
    // with my wife first`, `melhor não, vou esperar`): a refusal, which is always safe.
    let awaiting = request.transaction.status == TransactionStatus::AwaitingConfirmation;
    if awaiting && confirmation::refuses_first(&request.message, &[]).is_some() {
        return InterpreterDecision {
            act: InterpreterAct::Deny,
            arguments: BTreeMap::new(),
            confidence: 1.0,
        };
    }
    // PR-2: a first clause that plainly withdraws (`never mind, I'll just pick it up myself`), or
    // a last one after its reason (`I don't have the zip on me. never mind`): the reason must not
    // drag the reading elsewhere.
    if withdrawal::withdraws_first(&request.message, &[])
        || withdrawal::withdraws_last(&request.message, &[])
    {
        return InterpreterDecision {
            act: InterpreterAct::Cancel,
            arguments: BTreeMap::new(),
            confidence: 1.0,
        };
    }
    // An affirmation (`go ahead`, `sim`) is never read as abandoning the transaction.
    // A message with a number in it is an answer or a correction, not an abandonment.
    let has_digit = request.message.chars().any(|c| c.is_ascii_digit());
    if **top == Label::Cancel && answer != Some(Confirmation::Affirm) && !has_digit {
        return InterpreterDecision {
            act: InterpreterAct::Cancel,
            arguments: BTreeMap::new(),
            confidence: round(f64::from(*top_p)),
        };
    }
    let free_text = request.parameters.iter().find(|p| {
        p.type_name == "text" && request.transaction.missing_parameters.contains(&p.name)
    });
    // The free-text parameter is the one asked for: a description is its answer unless it is
    // read as a session decision, or as another request or topic with confidence.
    // An asked value read in the message counts as the answer in the same way.
    let asked = asked_value.is_some()
        || free_text
            .is_some_and(|p| request.transaction.missing_parameters.first() == Some(&p.name));
    let other = |label: &Label, p: f32| match label {
        // A number is an answer or a correction, never an abandonment (see above).
        Label::Cancel => !has_digit,
        Label::HumanHandoff | Label::EndSession => true,
        Label::Tool(t) if t == active_tool => false,
        Label::Tool(_) | Label::Topic { .. } => !asked || p >= 0.9,
        Label::OutOfScope => false,
    };
    let other_decision: f64 = ranked
        .iter()
        .filter(|(l, p)| other(l, *p))
        .map(|(_, p)| f64::from(*p))
        .sum();
    // A bare yes or no is no reason or description (the recogniser reads it as an answer).
    let read_as_other = answer.is_some() || other(top, *top_p);
    if let (Some(values), false) = (asked_value, read_as_other) {
        // The asked parameter's value, read in a sentence PR-1 did not take as an answer.
        return InterpreterDecision {
            act: InterpreterAct::Provide,
            arguments: values,
            confidence: round(1.0 - other_decision),
        };
    }
    match free_text {
        Some(param)
            if !read_as_other
                && !request.message.trim().is_empty()
                && !asks_the_assistant(&request.message) =>
        {
            InterpreterDecision {
                act: InterpreterAct::Provide,
                arguments: BTreeMap::from([(
                    param.name.clone(),
                    Value::String(request.message.trim().to_owned()),
                )]),
                confidence: round(1.0 - other_decision),
            }
        }
        _ => unclear(f64::from(*top_p)),
    }
}

/// Words that address the assistant (folded): `you`, `vc`, `você`, `cê`, `tu`.
const ADDRESSING: &[&str] = &["you", "u", "ya", "vc", "voce", "vcs", "voces", "ce", "tu"];

/// MG-5: a question put to the assistant (`vc pode me explicar como funciona antes?`, `what's
/// there to explain? can't you see it on my account?`) asks something; it is no reason or
/// description, while a customer's own question (`why was I charged twice?`) may be one.
pub(super) fn asks_the_assistant(message: &str) -> bool {
    message.contains(['?', '¿'])
        && parameter::folded_words(message)
            .iter()
            .any(|w| ADDRESSING.contains(&w.as_str()))
}

/// PR-3a: during a transaction, a question that another tool also answers (`will I get my money
/// back?` during a contestation) is about the transaction in progress: its probability goes to
/// the active tool's question of the same name.
pub(super) fn toward_active_tool<'l>(
    ranked: Vec<(&'l Label, f32)>,
    active: Option<&str>,
) -> Vec<(&'l Label, f32)> {
    let Some(active) = active else {
        return ranked;
    };
    let own = |name: &str| {
        ranked.iter().map(|(l, _)| *l).find(
            |l| matches!(l, Label::Topic { tool: Some(t), name: n } if t == active && n == name),
        )
    };
    let mut out: Vec<(&Label, f32)> = Vec::with_capacity(ranked.len());
    for (label, p) in &ranked {
        let target = match label {
            Label::Topic {
                tool: Some(t),
                name,
            } if t != active => own(name).unwrap_or(label),
            _ => label,
        };
        match out.iter_mut().find(|(l, _)| *l == target) {
            Some((_, q)) => *q += p,
            None => out.push((target, *p)),
        }
    }
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    out
}

/// What the router needs to read one text of a message against the assistant's examples.
pub(super) struct SegmentReading<'a> {
    pub(super) assistant: Option<&'a Assistant>,
    pub(super) in_transaction: bool,
    pub(super) active: Option<&'a str>,
    pub(super) index: &'a ExampleIndex,
}

impl SegmentReading<'_> {
    /// The router's decision on `x`, and the probability that it is a session action.
    pub(super) fn decide(&self, x: &[f32]) -> (RouterDecision, f32) {
        let ranked = toward_active_tool(self.index.rank(x), self.active);
        let session = ranked
            .iter()
            .filter(|(l, _)| matches!(l, Label::HumanHandoff | Label::EndSession))
            .map(|(_, p)| p)
            .sum();
        (
            route_from(&ranked, self.assistant, self.in_transaction, self.active),
            session,
        )
    }

    /// A value of a form only some tools take (a dashed CEP, a prefixed id, money with its
    /// marker) says the request is one of them: when the most probable request reads a value in
    /// the message, the tools that read none leave the normalisation (`meu cep novo é
    /// 88015-600, preciso que o pedido vá pra lá`: the address change, 0.75 with the bill and the
    /// tracking beside it); when it reads the most values of all, so do the tools that read
    /// fewer. Like the other second looks, it may make the message's own request surer, never
    /// name another one.
    pub(super) fn decide_given_values(
        &self,
        x: &[f32],
        text: &str,
        locale: Locale,
    ) -> RouterDecision {
        let ranked = toward_active_tool(self.index.rank(x), self.active);
        let plain = route_from(&ranked, self.assistant, self.in_transaction, self.active);
        let Some(top) = intent_of(&plain) else {
            return plain;
        };
        // Each tool's count of values read, once: the typed parsers run per tool.
        let counts: BTreeMap<&str, usize> = ranked
            .iter()
            .filter_map(|(l, _)| match l {
                Label::Tool(t) => Some(t.as_str()),
                _ => None,
            })
            .map(|t| {
                let n = self
                    .assistant
                    .and_then(|a| a.tools.get(t))
                    .map_or(0, |spec| values_read(spec, text, locale));
                (t, n)
            })
            .collect();
        let count = |tool: &str| counts.get(tool).copied().unwrap_or(0);
        let at_top = count(top);
        if at_top == 0 {
            return plain;
        }
        // When the most probable request reads the most values (`PED-73745, cep 60160-230,
        // number 987`: only the address change takes all three), the tools that read fewer
        // leave too.
        let most = counts.values().copied().max().unwrap_or(0);
        let floor = if at_top == most { most } else { 1 };
        let reads = |tool: &str| count(tool) >= floor;
        // An id of the assistant's own pattern (`Status PED-9999.`) is no request it does not
        // serve: with nothing in flight, "none of these" leaves too.
        let own_id = !self.in_transaction
            && self
                .assistant
                .and_then(|a| a.tools.get(top))
                .is_some_and(|t| reads_an_id(t, text, locale));
        let kept: Vec<(&Label, f32)> = ranked
            .into_iter()
            .filter(|(l, _)| match l {
                Label::Tool(t) => reads(t),
                Label::OutOfScope => !own_id,
                _ => true,
            })
            .collect();
        let given = route_from(&kept, self.assistant, self.in_transaction, self.active);
        if intent_of(&given) == Some(top) && confidence_of(&given) > confidence_of(&plain) {
            given
        } else {
            plain
        }
    }
}

impl SegmentReading<'_> {
    /// A message that names one tool's own action verb, not negated, and holds a value that
    /// tool reads (`i want to cancel order PED-27730 it's going to the wrong address`, `então
    /// rastreia o ped6187 pra mim`) asks for that tool: the other tools and "none of these" leave
    /// the normalisation, and the request competes only with the questions about it (PR-3a).
    /// The sentence model alone reads the reason or the typed id more than the verb (the
    /// address change 0.73; out of scope 0.62). Only with no transaction in flight, where a
    /// verb cannot mean "abandon what is pending". A message that says nothing but the verb
    /// (`quero contestar`: 0.65 beside the contestation's questions) asks for the tool alone.
    /// So does one read most as abandoning (`então cancela ele`), as nothing is in flight to
    /// abandon: that reading joins the tool's.
    pub(super) fn decide_given_verb(
        &self,
        x: &[f32],
        text: &str,
        locale: Locale,
    ) -> Option<RouterDecision> {
        let assistant = self.assistant?;
        let tool = named_by_verb(assistant, text)?;
        let spec = assistant.tools.get(tool)?;
        // `quero contestar`, `I want to track`: nothing but the verb, so no question about the
        // tool either.
        // A pronoun object is what was just cancelled when the message cancelled something
        // (`esquece, cancela isso`): only with nothing in flight at all.
        let bare = only_the_verb(spec, text, !self.in_transaction);
        let ranked = self.index.rank(x);
        // `então cancela ele` after a look-up reads as abandoning what is in flight (1.00), and
        // nothing is: with the tool's own verb named, that reading is the request for it.
        let abandons =
            !self.in_transaction && ranked.first().is_some_and(|(l, _)| **l == Label::Cancel);
        if !bare && !abandons && !reads_a_value(spec, text, locale) {
            return None;
        }
        let abandoning: f32 = if abandons {
            ranked
                .iter()
                .filter(|(l, _)| **l == Label::Cancel)
                .map(|(_, p)| p)
                .sum()
        } else {
            0.0
        };
        let mut own: Vec<(&Label, f32)> = ranked
            .into_iter()
            .filter(|(l, _)| match l {
                Label::Tool(t) => t == tool,
                Label::Topic { tool: Some(t), .. } => t == tool && !bare,
                _ => false,
            })
            .map(|(l, p)| match l {
                Label::Tool(_) => (l, p + abandoning),
                _ => (l, p),
            })
            .collect();
        own.sort_by(|a, b| b.1.total_cmp(&a.1));
        Some(route_from(&own, self.assistant, false, None))
    }
}

/// The one tool whose action verbs the message names, not negated (`não quero cancelar`), when
/// it is one: a verb several tools share (`check`, `enviar`) names none, and two tools named
/// name none.
pub(super) fn named_by_verb<'a>(assistant: &'a Assistant, text: &str) -> Option<&'a str> {
    // A negation holds within its clause: `ainda nem saiu?? então cancela ele` names the verb.
    let clauses = confirmation::clauses(text)?;
    let verbs: Vec<(&str, Vec<String>)> = assistant
        .tools
        .iter()
        .flat_map(|(name, t)| {
            let own: Vec<String> = t.action_verbs.values().flatten().cloned().collect();
            confirmation::verb_phrases(&own)
                .into_iter()
                .map(move |v| (name.as_str(), v))
        })
        .collect();
    let shared = |v: &Vec<String>, tool: &str| verbs.iter().any(|(t, w)| w == v && *t != tool);
    let said = |v: &Vec<String>| clauses.iter().any(|c| confirmation::said_unnegated(c, v));
    let mut named = verbs
        .iter()
        .filter(|(tool, v)| !shared(v, tool) && said(v))
        .map(|(tool, _)| *tool);
    let first = named.next()?;
    named.all(|t| t == first).then_some(first)
}

/// Whether `text` says nothing but a request frame and `tool`'s action verbs (`quero
/// contestar`): it frames a request, and every word that is not filler or framing is a word of
/// one of its verbs. A verb alone is no request: `show` is also Portuguese slang for "great";
/// with a pronoun for its object (`show it`) it is, when `objects` (nothing was in flight).
pub(super) fn only_the_verb(tool: &Tool, text: &str, objects: bool) -> bool {
    let verb_words: Vec<String> = tool
        .action_verbs
        .values()
        .flatten()
        .flat_map(|v| parameter::folded_words(v))
        .collect();
    let words = parameter::content_words(text, &[]);
    // A verb with a pronoun for its object asks as surely as a framed one (`show it`, `me
    // mostra ela`, `cancela ele`): `show` alone may be slang, `show it` is not.
    const OBJECTS: &[&str] = &["it", "them", "ele", "ela", "eles", "elas", "isso"];
    let all = parameter::folded_words(text);
    let with_object = objects
        && all
            .windows(2)
            .any(|pair| verb_words.contains(&pair[0]) && OBJECTS.contains(&pair[1].as_str()));
    let framed = with_object
        || words
            .iter()
            .any(|w| parameter::REQUEST_FRAME.contains(&w.as_str()));
    // `por` of `por favor` (a filler phrase, whose words are not filler alone).
    let pleading = all
        .windows(2)
        .any(|pair| pair[0] == "por" && pair[1] == "favor");
    let said: Vec<&String> = words
        .iter()
        .filter(|w| !parameter::REQUEST_FRAME.contains(&w.as_str()))
        .filter(|w| !(pleading && w.as_str() == "por"))
        .collect();
    framed && !said.is_empty() && said.iter().all(|w| verb_words.contains(w))
}

/// Whether `clause` read as `decision` names that tool by its own action verb and no earlier
/// clause names any tool by its verb.
pub(super) fn asks_by_its_verb(
    assistant: Option<&Assistant>,
    clause: &str,
    decision: &RouterDecision,
    earlier: &[&str],
) -> bool {
    let Some(assistant) = assistant else {
        return false;
    };
    let named = named_by_verb(assistant, clause);
    named.is_some()
        && named == intent_of(decision)
        && earlier
            .iter()
            .all(|e| named_by_verb(assistant, e).is_none())
}

/// Whether the typed parsers clearly read one of `tool`'s parameters in `text` (PR-1's reading:
/// a distinctive form anywhere, a plain one only alone).
pub(super) fn reads_a_value(tool: &Tool, text: &str, locale: Locale) -> bool {
    values_read(tool, text, locale) > 0
}

/// How many of `tool`'s parameters the typed parsers clearly read in `text`.
pub(super) fn values_read(tool: &Tool, text: &str, locale: Locale) -> usize {
    values_read_of(tool, text, locale, |_| true)
}

/// Whether the typed parsers read one of `tool`'s id parameters (of its configured pattern) in
/// `text`.
pub(super) fn reads_an_id(tool: &Tool, text: &str, locale: Locale) -> bool {
    values_read_of(tool, text, locale, |kind| {
        matches!(kind, parameter::ParameterKind::Id { .. })
    }) > 0
}

/// How many of `tool`'s parameters of the kinds `kind` accepts the typed parsers clearly read.
fn values_read_of(
    tool: &Tool,
    text: &str,
    locale: Locale,
    kind: impl Fn(&parameter::ParameterKind) -> bool,
) -> usize {
    let params: Vec<parameter::LabelledParameter<'_>> = tool
        .parameters
        .iter()
        .filter(|p| kind(&p.kind))
        .map(|p| parameter::LabelledParameter {
            name: &p.name,
            kind: &p.kind,
            labels: &[],
        })
        .collect();
    parameter::extract_clear(&params, text, locale).values.len()
}

pub(super) fn intent_of(decision: &RouterDecision) -> Option<&str> {
    match decision {
        RouterDecision::Route { intent, .. } => intent.as_deref(),
        _ => None,
    }
}

pub(super) fn confidence_of(decision: &RouterDecision) -> f64 {
    match decision {
        RouterDecision::Route { confidence, .. }
        | RouterDecision::Topic { confidence, .. }
        | RouterDecision::OutOfScope { confidence } => *confidence,
    }
}

/// Confidences are reported to 4 decimals: stable in logs and answer logs across platforms.
pub(super) fn round(p: f64) -> f64 {
    (p.clamp(0.0, 1.0) * 10_000.0).round() / 10_000.0
}
